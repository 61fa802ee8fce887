/**
 * gen-model's native writer verbs (native/addon/synth.cc, native/cpu/quantize*.cc) against the
 * TypeScript reference (src/model/quant.ts, src/synth/prng.ts):
 *  - quantizeRows writes quantizeRow's bytes for every type, on every kernel path (the k-quant
 *    searches run 4, 8 or 16 sub-blocks side by side there), on rows that reach each branch:
 *    Gaussian, small, sparse with all-zero sub-blocks, all positive, all negative, outliers,
 *    a constant row, an all-zero row;
 *  - quantizeRowsAsync gives the same bytes for 1 and 3 threads;
 *  - synthUniformAsync draws Rng.fillUniform's floats (rows spanning several of its fill buffers),
 *    quantises them as quantizeRow does, and leaves the state where the Rng's would be.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ISA, type NativeSynthVerbs } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { quantizeRow, rowBytes } from '../../src/model/quant.js';
import { GGML_TYPE, type GgmlTypeName } from '../../src/model/types.js';
import { Rng } from '../../src/synth/prng.js';

const native = loadDiagnostics();
const verbs = native as unknown as NativeSynthVerbs;
const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());
const TYPES: GgmlTypeName[] = [
  'F32',
  'F16',
  'BF16',
  'Q8_0',
  'Q4_0',
  'Q5_0',
  'Q5_1',
  'Q2_K',
  'Q3_K',
  'Q4_K',
  'Q5_K',
  'Q6_K',
  'IQ4_NL',
  'IQ4_XS',
  'MXFP4',
];

afterEach(() => {
  native.isaSet(native.isaBest());
});

/** Rows of `cols` that reach the quantisers' branches (see the header). */
function testRows(cols: number, seed: number): Float32Array {
  const kinds = 9;
  const rng = new Rng(seed, 'quantize-test');
  const x = new Float32Array(kinds * cols);
  for (let r = 0; r < kinds; r++) {
    for (let i = 0; i < cols; i++) {
      const v = rng.normal();
      const values = [
        v,
        v * 0.02,
        i % 64 < 32 ? 0 : rng.uniform() < 0.7 ? 0 : v, // whole zero sub-blocks, and sparse ones
        Math.abs(v) + 1,
        -Math.abs(v) * 1e-3,
        i % 37 === 0 ? 80 * v : v * 1e-3,
        -0.75,
        0,
        rng.uniform() * 2 - 1,
      ];
      x[r * cols + i] = values[r];
    }
  }
  return x;
}

function reference(type: GgmlTypeName, x: Float32Array, cols: number): Uint8Array {
  const rows = x.length / cols,
    stride = rowBytes(type, cols);
  const out = new Uint8Array(rows * stride);
  for (let r = 0; r < rows; r++) quantizeRow(type, x, r * cols, cols, out, r * stride);
  return out;
}

function firstDifference(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe('native quantizeRows', () => {
  it("writes src/model/quant.ts's bytes for every type on every kernel path", () => {
    const cols = 1024; // 4 k-quant super-blocks: 32 Q4_K sub-blocks (two 16-lane groups) and 64 Q6_K ones
    for (const seed of [1, 2]) {
      const x = testRows(cols, seed);
      for (const type of TYPES) {
        const want = reference(type, x, cols);
        for (const isa of PATHS) {
          expect(native.isaSet(isa)).toBe(true);
          const got = new Uint8Array(want.length);
          verbs.quantizeRows(GGML_TYPE[type], x, x.length / cols, cols, got);
          expect({ type, isa, seed, firstDifference: firstDifference(got, want) }).toEqual({
            type,
            isa,
            seed,
            firstDifference: -1,
          });
        }
      }
    }
  });

  it("pads a last lane group short of the path's width: one super-block per row (8 Q4_K sub-blocks on 16 lanes)", () => {
    const cols = 256;
    const x = testRows(cols, 3);
    for (const type of ['Q4_K', 'Q5_K', 'Q6_K'] as const) {
      const want = reference(type, x, cols);
      for (const isa of PATHS) {
        native.isaSet(isa);
        const got = new Uint8Array(want.length);
        verbs.quantizeRows(GGML_TYPE[type], x, x.length / cols, cols, got);
        expect({ type, isa, firstDifference: firstDifference(got, want) }).toEqual({ type, isa, firstDifference: -1 });
      }
    }
  });

  it("MXFP4: the TypeScript's bytes at the exponent's edges on every path", () => {
    // Blocks of 32: subnormal, near 2^-126, huge; the largest |x| at 1.5 * 2^k, just past it and at
    // 2^k; elements on the midpoints between table values (ties go to the first of equals).
    const scales = [1e-40, 3e-39, 1.2e-38, 1e30, 1, 1, 1, 1];
    const x = new Float32Array(32 * scales.length);
    const rng = new Rng(8, 'mxfp4-edges');
    scales.forEach((s, b) => {
      for (let j = 0; j < 32; j++) x[32 * b + j] = rng.normal() * s;
    });
    x[32 * 4] = 1.5 * 2 ** 3;
    x[32 * 5] = Math.fround(1.5 * 2 ** 3 * (1 + 2 ** -20));
    x[32 * 6] = -(2 ** 3);
    for (let j = 0; j < 32; j++) x[32 * 7 + j] = ((j % 8) + 0.5) * (j % 2 ? -0.25 : 0.25);
    const want = reference('MXFP4', x, 32);
    for (const isa of PATHS) {
      native.isaSet(isa);
      const got = new Uint8Array(want.length);
      verbs.quantizeRows(GGML_TYPE.MXFP4, x, scales.length, 32, got);
      expect({ isa, firstDifference: firstDifference(got, want) }).toEqual({ isa, firstDifference: -1 });
    }
    expect(want[0]).toBe(0); // the subnormal block: e = 0
  });

  it('refuses a type that cannot hold the rows, and arrays of the wrong size, naming the argument', () => {
    const x = new Float32Array(100);
    expect(() => verbs.quantizeRows(GGML_TYPE.Q4_K, x, 1, 100, new Uint8Array(1000))).toThrow(
      /typeId 12 cannot hold rows of 100 elements/,
    );
    expect(() => verbs.quantizeRows(GGML_TYPE.Q8_0, new Float32Array(64), 1, 64, new Uint8Array(67))).toThrow(
      /dst: expected 68 elements, got 67/,
    );
    expect(() => verbs.quantizeRows(GGML_TYPE.Q8_0, new Float32Array(63), 1, 64, new Uint8Array(68))).toThrow(
      /src: expected 64 elements/,
    );
  });
});

describe('native quantizeRowsAsync', () => {
  it("gives quantizeRows's bytes for 1 and 3 threads", async () => {
    const cols = 512;
    const x = new Float32Array(200 * cols);
    new Rng(5, 'async').fillUniform(x, 0.05);
    for (const type of ['Q4_K', 'Q6_K', 'Q8_0'] as const) {
      const want = new Uint8Array(200 * rowBytes(type, cols));
      verbs.quantizeRows(GGML_TYPE[type], x, 200, cols, want);
      for (const threads of [1, 3]) {
        const got = new Uint8Array(want.length);
        await verbs.quantizeRowsAsync(GGML_TYPE[type], x, 200, cols, got, threads);
        expect(firstDifference(got, want)).toBe(-1);
      }
    }
  });

  it('rejects (does not throw) on a bad argument', async () => {
    await expect(
      verbs.quantizeRowsAsync(GGML_TYPE.Q8_0, new Float32Array(32), 1, 32, new Uint8Array(34), 0),
    ).rejects.toThrow(/threads/);
  });
});

describe('native synthUniformAsync', () => {
  it("draws Rng.fillUniform's stream and quantises it as quantizeRow does, for 1 and 2 threads", async () => {
    // 4 Mi floats fill one native buffer: 17000 rows of 256 span two buffers and a short third.
    const cols = 256,
      rows = 17000,
      sd = 0.03;
    const floats = new Float32Array(rows * cols);
    const jsRng = new Rng(9, 'blk.0.ffn_up_exps.weight');
    jsRng.fillUniform(floats, sd);
    const after = jsRng.uniform(); // where the stream goes on after the tensor
    for (const type of ['Q8_0', 'Q4_0', 'IQ4_NL', 'MXFP4'] as const) {
      const want = reference(type, floats, cols);
      for (const threads of [1, 2]) {
        const rng = new Rng(9, 'blk.0.ffn_up_exps.weight');
        const state = rng.state();
        const got = new Uint8Array(want.length);
        await verbs.synthUniformAsync(
          state,
          (Math.sqrt(3) * sd) / 2147483648,
          GGML_TYPE[type],
          rows,
          cols,
          got,
          threads,
        );
        expect({ type, threads, firstDifference: firstDifference(got, want) }).toEqual({
          type,
          threads,
          firstDifference: -1,
        });
        rng.setState(state);
        expect(rng.uniform()).toBe(after);
      }
    }
  });

  it('k-quant rows: the same bytes as the TypeScript path', async () => {
    const cols = 768,
      rows = 24,
      sd = 1 / Math.sqrt(768);
    const floats = new Float32Array(rows * cols);
    new Rng(4, 'k').fillUniform(floats, sd);
    for (const type of ['Q4_K', 'Q5_K', 'Q6_K', 'Q3_K', 'Q2_K'] as const) {
      const state = new Rng(4, 'k').state();
      const got = new Uint8Array(rows * rowBytes(type, cols));
      await verbs.synthUniformAsync(state, (Math.sqrt(3) * sd) / 2147483648, GGML_TYPE[type], rows, cols, got, 2);
      expect({ type, firstDifference: firstDifference(got, reference(type, floats, cols)) }).toEqual({
        type,
        firstDifference: -1,
      });
    }
  });
});
