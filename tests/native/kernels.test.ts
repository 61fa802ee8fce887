/**
 * Native kernels against a plain f64 TypeScript reference, per type and per ISA path the CPU has.
 *
 * The reference dequantises weights with its own decoder (written here from the block layout in
 * src/model/types.ts) and takes the f64 dot with the unquantised x.
 *
 * Tolerances, per output element y = W[r, :] . x:
 *  - float sums: |err| <= 2 cols u S, u = 2^-24 (the standard bound for a sum of cols f32 products,
 *    doubled for the two roundings per product-add), S = sum |w_i| (|x_i| + e_i).
 *  - Q8_0 / Q4_0 also quantise x to 8-bit blocks (d = max|x_b| / 127, q = round(x / d), then d kept
 *    as its f16 rounding d16, as llama.cpp stores it), which moves each x_i by
 *    e_i <= d_b / 2 + 127 |d_b - d16_b|: |err| <= sum |w_i| e_i + the float bound above.
 *  - a SIMD path against scalar: every path sums in one canonical order (native/cpu/kernels_internal.h),
 *    so their results are bit-identical, and matmul row i is bit-identical to a matvec of row i.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { GGML_BLOCK, GGML_TYPE, type GgmlTypeName } from '../../src/model/types.js';
import { mulberry32 } from '../../src/core/prng.js';

const native = loadDiagnostics();
const U = 2 ** -24;
const TYPES: GgmlTypeName[] = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0'];
const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());

afterEach(() => {
  native.isaSet(native.isaBest());
});

/** A small deterministic PRNG, so a failure reproduces. */
const rng = mulberry32;

function f16ToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0x1f) return man ? NaN : sign * Infinity;
  if (exp === 0) return sign * man * 2 ** -24;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

function bf16ToNumber(h: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, h << 16, true);
  return view.getFloat32(0, true);
}

/** x rounded to the nearest f16 value (ties to even), for normal f16 magnitudes. */
function roundF16(x: number): number {
  if (x === 0) return 0;
  const exp = Math.max(Math.floor(Math.log2(Math.abs(x))), -14);
  const ulp = 2 ** (exp - 10);
  const q = x / ulp,
    f = Math.floor(q);
  const r = q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f;
  return r * ulp;
}

/** An f16 with exponent in [expLo, expHi] (value ~ 2^(exp-15)), random sign and mantissa. */
function randomF16(next: () => number, expLo: number, expHi: number): number {
  const exp = expLo + Math.floor(next() * (expHi - expLo + 1));
  return (next() < 0.5 ? 0x8000 : 0) | (exp << 10) | Math.floor(next() * 1024);
}

/** Random weights [rows, cols] of a type, as the container stores them. */
function randomWeights(type: GgmlTypeName, rows: number, cols: number, seed: number): Uint8Array {
  const next = rng(seed);
  const { elements, bytes } = GGML_BLOCK[type];
  const out = new Uint8Array((rows * cols * bytes) / elements);
  const view = new DataView(out.buffer);
  if (type === 'F32') {
    for (let i = 0; i < rows * cols; i++) view.setFloat32(4 * i, next() * 2 - 1, true);
  } else if (type === 'F16') {
    for (let i = 0; i < rows * cols; i++) view.setUint16(2 * i, randomF16(next, 8, 16), true);
  } else if (type === 'BF16') {
    const f = new Float32Array(1);
    const bits = new Uint32Array(f.buffer);
    for (let i = 0; i < rows * cols; i++) {
      f[0] = next() * 2 - 1;
      view.setUint16(2 * i, bits[0] >>> 16, true); // bf16 = the top half of an f32
    }
  } else {
    for (let b = 0; b < out.length / bytes; b++) {
      view.setUint16(b * bytes, randomF16(next, 5, 10), true); // d ~ 2^-10 .. 2^-5
      for (let j = 2; j < bytes; j++) out[b * bytes + j] = Math.floor(next() * 256); // all int8 / nibble values
    }
  }
  return out;
}

/** Dequantise one row from the block layout (the test's own decoder). */
function dequantRef(type: GgmlTypeName, row: Uint8Array, cols: number): Float64Array {
  const view = new DataView(row.buffer, row.byteOffset, row.byteLength);
  const out = new Float64Array(cols);
  for (let i = 0; i < cols; i++) {
    if (type === 'F32') out[i] = view.getFloat32(4 * i, true);
    else if (type === 'F16') out[i] = f16ToNumber(view.getUint16(2 * i, true));
    else if (type === 'BF16') out[i] = bf16ToNumber(view.getUint16(2 * i, true));
  }
  if (type === 'Q8_0') {
    for (let b = 0; b < cols / 32; b++) {
      const d = f16ToNumber(view.getUint16(b * 34, true));
      for (let j = 0; j < 32; j++) out[b * 32 + j] = view.getInt8(b * 34 + 2 + j) * d;
    }
  } else if (type === 'Q4_0') {
    for (let b = 0; b < cols / 32; b++) {
      const d = f16ToNumber(view.getUint16(b * 18, true));
      for (let j = 0; j < 16; j++) {
        const byte = row[b * 18 + 2 + j];
        out[b * 32 + j] = ((byte & 0x0f) - 8) * d;
        out[b * 32 + j + 16] = ((byte >> 4) - 8) * d;
      }
    }
  }
  return out;
}

function randomX(n: number, seed: number): Float32Array {
  const next = rng(seed);
  return Float32Array.from({ length: n }, () => (next() * 2 - 1) * (next() < 0.1 ? 8 : 1));
}

interface RowBound {
  ref: number; // f64 reference of W[r, :] . x
  actErr: number; // sum |w_i| e_i: what 8-bit activations may move the result
  floatErr: number; // 2 cols u S
}

/** Per-row f64 reference and its error bounds (see the header comment). */
function reference(type: GgmlTypeName, w: Uint8Array, rows: number, cols: number, x: Float32Array): RowBound[] {
  const quant = type === 'Q8_0' || type === 'Q4_0';
  const e = new Float64Array(cols);
  if (quant) {
    for (let b = 0; b < cols / 32; b++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b * 32 + j]));
      const d = amax / 127;
      e.fill((d / 2 + 127 * Math.abs(d - roundF16(d))) * (1 + 1e-6), b * 32, b * 32 + 32);
    }
  }
  const rowBytes = (cols / GGML_BLOCK[type].elements) * GGML_BLOCK[type].bytes;
  return Array.from({ length: rows }, (_, r) => {
    const wr = dequantRef(type, w.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
    let ref = 0,
      actErr = 0,
      s = 0;
    for (let i = 0; i < cols; i++) {
      ref += wr[i] * x[i];
      actErr += Math.abs(wr[i]) * e[i];
      s += Math.abs(wr[i]) * (Math.abs(x[i]) + e[i]);
    }
    return { ref, actErr, floatErr: 2 * cols * U * s + 1e-30 };
  });
}

function colsFor(type: GgmlTypeName): number[] {
  // Quantised types need whole blocks; float types also get tails that miss the vector width.
  return GGML_BLOCK[type].elements === 32 ? [32, 96, 256, 800] : [32, 96, 256, 800, 37, 7];
}

describe('dequantRow', () => {
  it.each(TYPES)('%s matches the block-layout decoder exactly', (type) => {
    for (const cols of [32, 256]) {
      const row = randomWeights(type, 1, cols, 11 + cols);
      const out = new Float32Array(cols);
      native.dequantRow(GGML_TYPE[type], row, cols, out);
      expect(Array.from(out)).toEqual(Array.from(Float32Array.from(dequantRef(type, row, cols))));
    }
  });

  it('F16 decodes subnormals, signed zeros, infinities and NaN', () => {
    const bits = [0x0000, 0x8000, 0x0001, 0x03ff, 0x8200, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e00];
    const row = new Uint8Array(new Uint16Array(bits).buffer);
    const out = new Float32Array(bits.length);
    native.dequantRow(GGML_TYPE.F16, row, bits.length, out);
    expect(Array.from(out)).toEqual(bits.map(f16ToNumber));
    expect(Object.is(out[1], -0)).toBe(true);
  });
});

describe.each(PATHS.map((isa) => [native.isaName(isa), isa] as const))('path %s', (_name, isa) => {
  it.each(TYPES)('matvec %s: f64 reference within the stated bound, and scalar within the float bound', (type) => {
    for (const cols of colsFor(type)) {
      for (const rows of [1, 7, 33]) {
        const w = randomWeights(type, rows, cols, rows * 1000 + cols);
        const x = randomX(cols, cols + 7);
        const bounds = reference(type, w, rows, cols, x);
        const y = new Float32Array(rows);
        const yScalar = new Float32Array(rows);
        expect(native.isaSet(ISA.scalar)).toBe(true);
        native.matvec(GGML_TYPE[type], w, rows, cols, x, yScalar);
        expect(native.isaSet(isa)).toBe(true);
        native.matvec(GGML_TYPE[type], w, rows, cols, x, y);
        bounds.forEach((b, r) => {
          const where = `${type} rows=${rows} cols=${cols} r=${r}`;
          expect(Math.abs(y[r] - b.ref), where).toBeLessThanOrEqual(b.actErr + b.floatErr);
          expect(Object.is(y[r], yScalar[r]), `${where}: ${y[r]} vs scalar ${yScalar[r]}`).toBe(true);
        });
      }
    }
  });

  it.each(TYPES)('matmul %s gives the bits of n matvecs (n = 1, 3, 5, 9)', (type) => {
    const rows = 13;
    for (const cols of [64, 288]) {
      const w = randomWeights(type, rows, cols, 77 + cols);
      for (const n of [1, 3, 5, 9]) {
        const x = randomX(n * cols, n);
        expect(native.isaSet(isa)).toBe(true);
        const y = new Float32Array(n * rows);
        native.matmul(GGML_TYPE[type], w, rows, cols, x, n, y);
        for (let i = 0; i < n; i++) {
          const xi = x.subarray(i * cols, (i + 1) * cols);
          const yi = new Float32Array(rows);
          native.matvec(GGML_TYPE[type], w, rows, cols, xi, yi);
          for (let r = 0; r < rows; r++) expect(y[i * rows + r], `${type} n=${n} i=${i} r=${r}`).toBe(yi[r]);
        }
      }
    }
  });
});

describe('activation quantisation', () => {
  it('is bit-identical on every path (read back through one-hot Q8_0 rows)', () => {
    // Row j of W [32, 32] is one block with d = 1 and q[j] = 1, so y[j] = d_x * q_x[j] exactly.
    const w = new Uint8Array(32 * 34);
    for (let j = 0; j < 32; j++) {
      w.set([0x00, 0x3c], j * 34); // f16 1.0
      w[j * 34 + 2 + j] = 1;
    }
    const next = rng(99);
    // Random values, exact ties (x / d = k + 0.5 with amax 127 -> d = 1), zeros and a negative max.
    const xs = [
      Float32Array.from({ length: 32 }, () => next() * 2 - 1),
      Float32Array.from({ length: 32 }, (_, i) => (i === 0 ? 127 : (i % 5) - 2 + 0.5)),
      new Float32Array(32),
      Float32Array.from({ length: 32 }, (_, i) => (i === 7 ? -3 : i / 100)),
      // Tiny values: d = max|x| / 127 lands among the f16 subnormals (scalar rounds them without F16C).
      Float32Array.from({ length: 32 }, () => (next() * 2 - 1) * 3e-6),
    ];
    for (const x of xs) {
      const byPath = PATHS.map((isa) => {
        native.isaSet(isa);
        const y = new Float32Array(32);
        native.matvec(GGML_TYPE.Q8_0, w, 32, 32, x, y);
        return Array.from(y);
      });
      for (const y of byPath) expect(y).toEqual(byPath[0]);
      const d = Math.max(...Array.from(x, Math.abs)) / 127;
      const bound = d / 2 + 127 * Math.abs(d - roundF16(d));
      byPath[0].forEach((v, j) => expect(Math.abs(v - x[j])).toBeLessThanOrEqual(bound * (1 + 1e-6)));
    }
  });
});

describe('activation quantisation of NaN and inf', () => {
  it('keeps them non-finite on every path (fmaxf and the rounding used to turn a NaN into an 8-bit code)', () => {
    const cols = 64;
    const w = randomWeights('Q8_0', 3, cols, 5);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const x = randomX(cols, 9);
      x[40] = bad; // block 1
      const byPath = PATHS.map((isa) => {
        native.isaSet(isa);
        const y = new Float32Array(3);
        native.matvec(GGML_TYPE.Q8_0, w, 3, cols, x, y);
        return Array.from(y);
      });
      for (const y of byPath) {
        expect(y.every(Number.isNaN), `${bad}: ${y}`).toBe(true);
      }
    }
  });
});

describe('ISA control', () => {
  it('names every path and refuses one the CPU lacks', () => {
    expect([0, 1, 2].map((isa) => native.isaName(isa))).toEqual(['scalar', 'avx2', 'avx512vnni']);
    expect(native.isaSet(ISA.scalar)).toBe(true);
    expect(native.isaActive()).toBe(ISA.scalar);
    for (const isa of [ISA.avx2, ISA.avx512vnni]) expect(native.isaSet(isa)).toBe(isa <= native.isaBest());
  });
});

describe('typed arrays over shared and offset memory', () => {
  it('reads SharedArrayBuffer views at a 2-byte offset (GGUF rows are only 2-byte aligned)', () => {
    const rows = 5,
      cols = 64;
    const w = randomWeights('Q8_0', rows, cols, 5);
    const shared = new Uint8Array(new SharedArrayBuffer(w.length + 2), 2, w.length);
    shared.set(w);
    const xShared = new Float32Array(new SharedArrayBuffer(4 * (cols + 4)), 16, cols);
    xShared.set(randomX(cols, 3));
    const y = new Float32Array(rows),
      yShared = new Float32Array(new SharedArrayBuffer(4 * rows));
    native.matvec(GGML_TYPE.Q8_0, w, rows, cols, Float32Array.from(xShared), y);
    native.matvec(GGML_TYPE.Q8_0, shared, rows, cols, xShared, yShared);
    expect(Array.from(yShared)).toEqual(Array.from(y));
  });
});
