/**
 * The MXFP4 kernels (ggml type id 39, gpt-oss's experts) per ISA path.
 *
 * Weights are random valid blocks built here (every nibble is valid; the E8M0 byte e is drawn near
 * 2^-10 .. 2^5, with some blocks on the subnormal scales e = 0, 1 and the first normal e = 2), decoded
 * by this file's own reading of ggml's block_mxfp4 (dequantize_row_mxfp4), independent of native/cpu:
 *   17 bytes / 32: u8 e | qs[16]; code j = qs[j % 16] nibble (low for j < 16, high for j >= 16);
 *   value = T[code] * 2^(e - 128), T = ggml's kvalues_mxfp4 (the E2M1 values doubled).
 *
 * Checks:
 *  - hand-built blocks dequantise to the values the layout above gives (natively and in
 *    src/model/quant.ts, the reference pass's reader), the subnormal scales and e = 255 included, and
 *    random rows to this file's decoder exactly, the TypeScript reader to the same bits as the native.
 *  - every path's matvec and matmul give the scalar path's bits (the canonical order of
 *    native/cpu/kernels_internal.h), with 1, 3, 9 rows, n = 1, 3, 8, 11 and 1, 3, 8, 9, 17, 90 (a
 *    gpt-oss row of 2880) and 289 blocks (the matvec's long-row prefetch variant).
 *  - an MXFP4 row and its exact Q8_0 copy (q = T[code], d = 2^(e - 128) as an f16, which holds it
 *    for e in 104..143) give the same bits on every path: the same integer sums, scales and order.
 *  - the result is close to the f64 dot of the dequantised weights with the f32 x, within the bound
 *    tests/native/kernels-q5.test.ts derives for Q8_0 activations (the f16 rounding of their d).
 *  - NaN and inf in the activations stay non-finite; zero and tiny rows agree across paths.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { dequantizeRow } from '../../src/model/quant.js';
import { matmulOn, matvecOn, sameBits } from './kernel-paths.js';
import { mulberry32 } from '../../src/core/prng.js';

const native = loadDiagnostics();
const U = 2 ** -24;
const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());
const T = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];
const MXFP4 = 39;
const BYTES = 17;
const COLS = [32, 96, 256, 288, 544, 2880, 9248]; // 1, 3, 8, 9, 17, 90, 289 blocks

afterEach(() => {
  native.isaSet(native.isaBest());
});

/** W [rows, cols] of random valid blocks; one block in `subnormalEvery` on e = 0, 1 or 2. */
function randomBlocks(rows: number, cols: number, seed: number, subnormalEvery = 8): Uint8Array {
  const next = mulberry32(seed);
  const out = new Uint8Array(((rows * cols) / 32) * BYTES);
  for (let b = 0; b < out.length / BYTES; b++) {
    for (let j = 1; j < BYTES; j++) out[b * BYTES + j] = Math.floor(next() * 256);
    out[b * BYTES] = next() < 1 / subnormalEvery ? Math.floor(next() * 3) : 118 + Math.floor(next() * 16);
  }
  return out;
}

/** This test's decoder: per element its scale 2^(e - 128) and table value. */
function decodeRow(row: Uint8Array, cols: number): { scale: Float64Array; v: Int32Array } {
  const out = { scale: new Float64Array(cols), v: new Int32Array(cols) };
  for (let b = 0; b < cols / 32; b++) {
    const at = b * BYTES;
    for (let j = 0; j < 32; j++) {
      const byte = row[at + 1 + (j % 16)];
      out.scale[32 * b + j] = 2 ** (row[at] - 128);
      out.v[32 * b + j] = T[j < 16 ? byte & 15 : byte >> 4];
    }
  }
  return out;
}

function randomX(n: number, seed: number): Float32Array {
  const next = mulberry32(seed);
  return Float32Array.from({ length: n }, () => (next() * 2 - 1) * (next() < 0.1 ? 8 : 1));
}

/** Per-row f64 reference and bound (kernels-q5.test.ts: Q8_0 activations, the f16 rounding of their d). */
function bounds(w: Uint8Array, rows: number, cols: number, x: Float32Array): { ref: number; tol: number }[] {
  const e = new Float64Array(cols);
  for (let b = 0; b < cols / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * b + j]));
    const d = amax / 127;
    e.fill((d / 2) * (1 + 1e-5) + 127 * (d * 2 ** -11 + 2 ** -25), 32 * b, 32 * b + 32);
  }
  const rowBytes = (cols / 32) * BYTES;
  return Array.from({ length: rows }, (_, r) => {
    const dec = decodeRow(w.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
    let ref = 0,
      actErr = 0,
      s = 0;
    for (let i = 0; i < cols; i++) {
      const wi = dec.scale[i] * dec.v[i];
      ref += wi * x[i];
      actErr += Math.abs(wi) * e[i];
      s += Math.abs(wi) * (Math.abs(x[i]) + e[i]);
    }
    // + 2^-149 per block: a subnormal d_w d_x product rounds to the f32 subnormal grid.
    return { ref, tol: actErr + 4 * (cols / 32 + 8) * U * s + (cols / 32) * 2 ** -149 * 127 * 32 + 1e-30 };
  });
}

describe('the ggml layout', () => {
  it('e = 128 (d = 1), byte j = code j | code (15 - j) << 4 -> element j = T[j], element j + 16 = T[15 - j]', () => {
    const blk = new Uint8Array(BYTES);
    blk[0] = 128;
    for (let j = 0; j < 16; j++) blk[1 + j] = j | ((15 - j) << 4);
    const want = [...T, ...T.map((_, j) => T[15 - j])];
    const out = new Float32Array(32);
    native.dequantRow(MXFP4, blk, 32, out);
    expect(Array.from(out)).toEqual(want);
    const ref = new Float32Array(32);
    dequantizeRow('MXFP4', blk, 0, 32, ref);
    expect(Array.from(ref)).toEqual(want);
  });

  it('the scale is 2^(e - 128): the subnormals 2^-128 (e = 0) and 2^-127 (e = 1), 2^-126, 2^-1 and 2^127 (e = 255)', () => {
    for (const e of [0, 1, 2, 127, 255]) {
      const blk = new Uint8Array(BYTES);
      blk[0] = e;
      blk[1] = 0x72; // element 0: T[2] = 2, element 16: T[7] = 12
      const want = new Float32Array(32);
      want[0] = 2 * 2 ** (e - 128);
      want[16] = 12 * 2 ** (e - 128); // e = 255: 12 * 2^127 overflows f32 to +inf, as in ggml
      const out = new Float32Array(32);
      native.dequantRow(MXFP4, blk, 32, out);
      expect(sameBits(out, want), `e = ${e}`).toBe(true);
      const ref = new Float32Array(32);
      dequantizeRow('MXFP4', blk, 0, 32, ref);
      expect(sameBits(ref, want), `e = ${e}`).toBe(true);
    }
  });

  it("dequantRow gives this file's decoder exactly, and the reference reader the same bits", () => {
    for (const cols of COLS.slice(0, 6)) {
      const row = randomBlocks(1, cols, 3 + cols, 3);
      const out = new Float32Array(cols);
      native.dequantRow(MXFP4, row, cols, out);
      const dec = decodeRow(row, cols);
      expect(Array.from(out)).toEqual(Array.from({ length: cols }, (_, i) => Math.fround(dec.scale[i] * dec.v[i])));
      const ref = new Float32Array(cols);
      dequantizeRow('MXFP4', row, 0, cols, ref);
      expect(sameBits(ref, out)).toBe(true);
    }
  });
});

describe('MXFP4 and its exact Q8_0 copy', () => {
  it('give the same bits on every path (q = T[code], the same d: the same integer sums and order)', () => {
    for (const cols of [96, 544, 2880, 9248]) {
      const rows = 5;
      const next = mulberry32(41 + cols);
      const w = randomBlocks(rows, cols, 41 + cols);
      // e in 104..143: 2^(e - 128) is a normal f16 (2^-24 is its smallest subnormal, 2^15 its largest power).
      for (let b = 0; b < w.length / BYTES; b++) w[b * BYTES] = 104 + Math.floor(next() * 40);
      const dec = decodeRow(w, rows * cols);
      const q8 = new Uint8Array(((rows * cols) / 32) * 34);
      const view = new DataView(q8.buffer);
      for (let b = 0; b < (rows * cols) / 32; b++) {
        const exp = w[b * BYTES] - 128; // 2^exp as f16: exponent field exp + 15, or the subnormal 2^(exp + 24)
        view.setUint16(34 * b, exp >= -14 ? (exp + 15) << 10 : 1 << (exp + 24), true);
        for (let j = 0; j < 32; j++) q8[34 * b + 2 + j] = dec.v[32 * b + j] & 0xff;
      }
      for (const n of [1, 3, 8]) {
        const x = randomX(n * cols, 5 * n + cols);
        for (const isa of PATHS) {
          const ym = matmulOn(isa, MXFP4, w, rows, cols, x, n);
          const y8 = matmulOn(isa, 8, q8, rows, cols, x, n);
          expect(sameBits(ym, y8), `${native.isaName(isa)} cols=${cols} n=${n}`).toBe(true);
        }
      }
    }
  });
});

describe('MXFP4 kernels', () => {
  it('matvec: f64 reference within the stated bound on every path', () => {
    for (const cols of COLS) {
      for (const rows of [1, 5]) {
        const w = randomBlocks(rows, cols, rows * 100 + cols);
        const x = randomX(cols, cols + rows);
        const b = bounds(w, rows, cols, x);
        for (const isa of PATHS) {
          const y = matvecOn(isa, MXFP4, w, rows, cols, x);
          b.forEach(({ ref, tol }, r) =>
            expect(Math.abs(y[r] - ref), `${native.isaName(isa)} rows=${rows} cols=${cols} r=${r}`).toBeLessThanOrEqual(
              tol,
            ),
          );
        }
      }
    }
  });

  it.each(PATHS.map((isa) => [native.isaName(isa), isa] as const))(
    'path %s: matvec and matmul give the scalar bits, each matmul row its matvec',
    (_name, isa) => {
      for (const cols of COLS) {
        for (const rows of [1, 3, 9]) {
          const w = randomBlocks(rows, cols, 7 * rows + cols);
          for (const n of [1, 3, 8, 11]) {
            const x = randomX(n * cols, n * 31 + cols);
            const ref = matmulOn(ISA.scalar, MXFP4, w, rows, cols, x, n);
            const y = matmulOn(isa, MXFP4, w, rows, cols, x, n);
            expect(sameBits(y, ref), `matmul rows=${rows} cols=${cols} n=${n}`).toBe(true);
            for (let i = 0; i < n; i++) {
              const yi = matvecOn(isa, MXFP4, w, rows, cols, x.subarray(i * cols, (i + 1) * cols));
              expect(
                sameBits(yi, ref.subarray(i * rows, (i + 1) * rows)),
                `matvec rows=${rows} cols=${cols} i=${i}`,
              ).toBe(true);
            }
          }
        }
      }
    },
  );

  it('blocks on the subnormal scales only: the same bits on every path, and not all zero', () => {
    const cols = 544;
    const w = randomBlocks(4, cols, 23, 1); // every block e = 0, 1 or 2
    const x = randomX(cols, 8).map((v) => v * 2 ** 100);
    const ref = matvecOn(ISA.scalar, MXFP4, w, 4, cols, x);
    expect(ref.some((v) => v !== 0)).toBe(true);
    for (const isa of PATHS) expect(sameBits(matvecOn(isa, MXFP4, w, 4, cols, x), ref), native.isaName(isa)).toBe(true);
  });

  it('keeps NaN and inf in the activations non-finite on every path', () => {
    const cols = 288;
    const w = randomBlocks(2, cols, 5);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      for (const at of [40, 270]) {
        const x = randomX(cols, 9);
        x[at] = bad;
        for (const isa of PATHS)
          expect(Array.from(matvecOn(isa, MXFP4, w, 2, cols, x)).every(Number.isNaN), `${at} ${bad}`).toBe(true);
      }
    }
  });

  it('an all-zero row and a tiny row agree across paths', () => {
    const cols = 544;
    const w = randomBlocks(4, cols, 17);
    for (const x of [new Float32Array(cols), randomX(cols, 4).map((v) => v * 3e-6)]) {
      const ref = matvecOn(ISA.scalar, MXFP4, w, 4, cols, x);
      for (const isa of PATHS)
        expect(sameBits(matvecOn(isa, MXFP4, w, 4, cols, x), ref), native.isaName(isa)).toBe(true);
    }
  });

  it('the addon names MXFP4 among the types and refuses a partial block', () => {
    expect(() => native.matvec(MXFP4, new Uint8Array(17), 1, 48, new Float32Array(48), new Float32Array(1))).toThrow(
      /cols: expected a multiple of 32/,
    );
    expect(() => native.matvec(3, new Uint8Array(20), 1, 32, new Float32Array(32), new Float32Array(1))).toThrow(
      /39 \(MXFP4\)/,
    );
  });
});
