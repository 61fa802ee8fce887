/**
 * The Q5_0 / Q5_1 kernels (ggml type ids 6 and 7, 32-element blocks) per ISA path.
 *
 * Weights are random valid blocks built here (every bit pattern of qh and the nibbles is valid;
 * the f16 d, and Q5_1's f16 m, are set to finite values), decoded by this file's own reading of
 * ggml's block_q5_0 / block_q5_1 (dequantize_row_q5_0 / _q5_1), independent of native/cpu:
 *   Q5_0, 22 bytes: f16 d | qh[4] | qs[16]; code j = (qs[j % 16] nibble: low for j < 16, high
 *     for j >= 16) | (bit j of qh, little-endian) << 4; value = (code - 16) * d.
 *   Q5_1, 24 bytes: f16 d | f16 m | qh[4] | qs[16]; value = code * d + m.
 *
 * Checks:
 *  - dequantRow gives exactly this file's decoder, in f32 steps ((code - 16) * d; code * d + m).
 *  - every path's matvec and matmul give the scalar path's bits (the canonical order of
 *    native/cpu/kernels_internal.h, Q5_1 with its second fma for the min), with 1, 3, 9 rows,
 *    1, 3, 8, 9, 17 and 289 blocks (289: the matvec's long-row prefetch variant), n = 1, 3, 8, 11.
 *  - a Q5_0 row and its exact Q8_0 copy (q = code - 16, the same d) give the same bits.
 *  - the result is close to the f64 dot of the dequantised weights with the f32 x:
 *    activations are quantised per 32 elements as Q8_0 (d = max|x| / 127, q = round(x / d), then
 *    d rounded to f16), which moves each x_i by e_i <= (d / 2)(1 + 1e-5) + 127 |d - f16(d)|, with
 *    |d - f16(d)| <= d 2^-11 + 2^-25; so |err| <= sum |w_i| e_i + floatErr,
 *    floatErr = 4 (nb + 8) u S, S = sum over elements of (|d code'| + |m|)(|x| + e), u = 2^-24
 *    (per block the kernel rounds d_w d_x, m_w d_x and two fmas; the 8 lanes add in a tree).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { matmulOn, matvecOn, sameBits } from './kernel-paths.js';
import { mulberry32 } from '../../src/core/prng.js';

const native = loadDiagnostics();
const U = 2 ** -24;
const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());

type Q5Type = 'Q5_0' | 'Q5_1';
const Q5: Record<Q5Type, { id: number; bytes: number; qh: number }> = {
  Q5_0: { id: 6, bytes: 22, qh: 2 },
  Q5_1: { id: 7, bytes: 24, qh: 4 },
};
const TYPES = Object.keys(Q5) as Q5Type[];

afterEach(() => {
  native.isaSet(native.isaBest());
});

function f16ToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0x1f) return man ? NaN : sign * Infinity;
  if (exp === 0) return sign * man * 2 ** -24;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

/** An f16 of random sign (unless positive) with exponent in [lo, hi] (value ~ 2^(exp - 15)). */
function randomF16(next: () => number, lo: number, hi: number, positive = false): number {
  const sign = !positive && next() < 0.5 ? 0x8000 : 0;
  return sign | ((lo + Math.floor(next() * (hi - lo + 1))) << 10) | Math.floor(next() * 1024);
}

/** W [rows, cols] of random valid blocks. */
function randomBlocks(type: Q5Type, rows: number, cols: number, seed: number): Uint8Array {
  const next = mulberry32(seed);
  const { bytes } = Q5[type];
  const out = new Uint8Array((rows * cols * bytes) / 32);
  const view = new DataView(out.buffer);
  for (let b = 0; b < out.length / bytes; b++) {
    for (let j = 0; j < bytes; j++) out[b * bytes + j] = Math.floor(next() * 256);
    view.setUint16(b * bytes, randomF16(next, 5, 9), true); // d ~ +-2^-10 .. 2^-6
    if (type === 'Q5_1') view.setUint16(b * bytes + 2, randomF16(next, 6, 11), true); // m ~ +-2^-9 .. 2^-4
  }
  return out;
}

/** This test's decoder: per element its scale d, its signed code (Q5_0: code - 16) and min m (Q5_0: 0). */
function decodeRow(type: Q5Type, row: Uint8Array, cols: number): { d: Float64Array; q: Int32Array; m: Float64Array } {
  const out = { d: new Float64Array(cols), q: new Int32Array(cols), m: new Float64Array(cols) };
  const { bytes, qh } = Q5[type];
  const view = new DataView(row.buffer, row.byteOffset, row.byteLength);
  for (let b = 0; b < cols / 32; b++) {
    const at = b * bytes;
    const d = f16ToNumber(view.getUint16(at, true));
    const m = type === 'Q5_1' ? f16ToNumber(view.getUint16(at + 2, true)) : 0;
    const high = view.getUint32(at + qh, true);
    for (let j = 0; j < 32; j++) {
      const byte = row[at + qh + 4 + (j % 16)];
      const code = (j < 16 ? byte & 15 : byte >> 4) | (((high >>> j) & 1) << 4);
      out.d[32 * b + j] = d;
      out.q[32 * b + j] = type === 'Q5_0' ? code - 16 : code;
      out.m[32 * b + j] = m;
    }
  }
  return out;
}

function randomX(n: number, seed: number): Float32Array {
  const next = mulberry32(seed);
  return Float32Array.from({ length: n }, () => (next() * 2 - 1) * (next() < 0.1 ? 8 : 1));
}

/** Per-row f64 reference and bound (see the header comment). */
function bounds(
  type: Q5Type,
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Float32Array,
): { ref: number; tol: number }[] {
  const e = new Float64Array(cols);
  for (let b = 0; b < cols / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * b + j]));
    const d = amax / 127;
    e.fill((d / 2) * (1 + 1e-5) + 127 * (d * 2 ** -11 + 2 ** -25), 32 * b, 32 * b + 32);
  }
  const rowBytes = (cols / 32) * Q5[type].bytes;
  return Array.from({ length: rows }, (_, r) => {
    const dec = decodeRow(type, w.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
    let ref = 0,
      actErr = 0,
      s = 0;
    for (let i = 0; i < cols; i++) {
      const wi = dec.d[i] * dec.q[i] + dec.m[i];
      ref += wi * x[i];
      actErr += Math.abs(wi) * e[i];
      s += (Math.abs(dec.d[i] * dec.q[i]) + Math.abs(dec.m[i])) * (Math.abs(x[i]) + e[i]);
    }
    return { ref, tol: actErr + 4 * (cols / 32 + 8) * U * s + 1e-30 };
  });
}

const COLS = [32, 96, 256, 288, 544, 9248]; // 1, 3, 8, 9, 17, 289 blocks

describe('Q5_0 and its exact Q8_0 copy', () => {
  it('give the same bits on every path (q = code - 16, the same d: the same integer sums and order)', () => {
    for (const cols of [96, 544, 9248]) {
      const rows = 5;
      const w = randomBlocks('Q5_0', rows, cols, 41 + cols);
      const dec = decodeRow('Q5_0', w, rows * cols);
      const q8 = new Uint8Array(((rows * cols) / 32) * 34);
      for (let b = 0; b < (rows * cols) / 32; b++) {
        q8[34 * b] = w[22 * b];
        q8[34 * b + 1] = w[22 * b + 1];
        for (let j = 0; j < 32; j++) q8[34 * b + 2 + j] = dec.q[32 * b + j] & 0xff;
      }
      for (const n of [1, 3, 8]) {
        const x = randomX(n * cols, 5 * n + cols);
        for (const isa of PATHS) {
          expect(native.isaSet(isa)).toBe(true);
          const y5 = new Float32Array(n * rows),
            y8 = new Float32Array(n * rows);
          native.matmul(6, w, rows, cols, x, n, y5);
          native.matmul(8, q8, rows, cols, x, n, y8);
          expect(sameBits(y5, y8), `${native.isaName(isa)} cols=${cols} n=${n}`).toBe(true);
        }
      }
    }
  });
});

describe.each(TYPES)('%s', (type) => {
  it("dequantRow gives this file's decoder exactly ((code - 16) d, or code d + m, in f32 steps)", () => {
    for (const cols of [32, 288]) {
      const row = randomBlocks(type, 1, cols, 3 + cols);
      const out = new Float32Array(cols);
      native.dequantRow(Q5[type].id, row, cols, out);
      const dec = decodeRow(type, row, cols);
      const f = Math.fround;
      const want = Array.from({ length: cols }, (_, i) =>
        type === 'Q5_0' ? f(dec.q[i] * dec.d[i]) : f(f(dec.q[i] * dec.d[i]) + dec.m[i]),
      );
      expect(Array.from(out)).toEqual(want);
    }
  });

  it('matvec: f64 reference within the stated bound on every path', () => {
    for (const cols of COLS) {
      for (const rows of [1, 5]) {
        const w = randomBlocks(type, rows, cols, rows * 100 + cols);
        const x = randomX(cols, cols + rows);
        const b = bounds(type, w, rows, cols, x);
        for (const isa of PATHS) {
          const y = matvecOn(isa, Q5[type].id, w, rows, cols, x);
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
    'path %s: matvec and matmul give the scalar bits',
    (_name, isa) => {
      for (const cols of COLS) {
        for (const rows of [1, 3, 9]) {
          const w = randomBlocks(type, rows, cols, 7 * rows + cols);
          for (const n of [1, 3, 8, 11]) {
            const x = randomX(n * cols, n * 31 + cols);
            const ref = matmulOn(ISA.scalar, Q5[type].id, w, rows, cols, x, n);
            const y = matmulOn(isa, Q5[type].id, w, rows, cols, x, n);
            expect(sameBits(y, ref), `matmul rows=${rows} cols=${cols} n=${n}`).toBe(true);
            for (let i = 0; i < n; i++) {
              const yi = matvecOn(isa, Q5[type].id, w, rows, cols, x.subarray(i * cols, (i + 1) * cols));
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

  it('keeps NaN and inf in the activations non-finite on every path', () => {
    const cols = 288;
    const w = randomBlocks(type, 2, cols, 5);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const x = randomX(cols, 9);
      x[270] = bad; // block 8: the short last group
      for (const isa of PATHS)
        expect(Array.from(matvecOn(isa, Q5[type].id, w, 2, cols, x)).every(Number.isNaN)).toBe(true);
      x[270] = 0.5;
      x[40] = bad; // block 1: a full group
      for (const isa of PATHS)
        expect(Array.from(matvecOn(isa, Q5[type].id, w, 2, cols, x)).every(Number.isNaN)).toBe(true);
    }
  });

  it('an all-zero row and a tiny row (f16-subnormal activation scales) agree across paths', () => {
    const cols = 544;
    const w = randomBlocks(type, 4, cols, 17);
    for (const x of [new Float32Array(cols), randomX(cols, 4).map((v) => v * 3e-6)]) {
      const ref = matvecOn(ISA.scalar, Q5[type].id, w, 4, cols, x);
      for (const isa of PATHS)
        expect(sameBits(matvecOn(isa, Q5[type].id, w, 4, cols, x), ref), native.isaName(isa)).toBe(true);
    }
  });
});
