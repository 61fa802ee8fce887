/**
 * The IQ4_NL and IQ4_XS kernels (ggml type ids 20 and 23) per ISA path.
 *
 * Weights are random valid blocks built here (every nibble and scale bit pattern is valid; the f16 d
 * is set to a finite value), decoded by this file's own reading of ggml's block_iq4_nl / block_iq4_xs
 * (dequantize_row_iq4_nl / _iq4_xs), independent of native/cpu:
 *   IQ4_NL, 18 bytes / 32: f16 d | qs[16]; index j = qs[j % 16] nibble (low for j < 16, high for
 *     j >= 16); value = d * T[index], T = ggml's kvalues_iq4nl.
 *   IQ4_XS, 136 bytes / 256: f16 d | u16 scales_h | scales_l[4] | qs[128]; sub-block ib of 32:
 *     ls = (nibble ib % 2 of scales_l[ib / 2]) | ((scales_h >> 2 ib) & 3) << 4, dl = d (ls - 32);
 *     qs[16 ib + j]: low nibble -> element j, high -> j + 16 of the sub-block; value = dl * T[index].
 *
 * Checks:
 *  - a hand-built block of each type dequantises to the values the layout above gives (natively and
 *    in src/model/quant.ts, the reference pass's reader), and random rows dequantise to this file's
 *    decoder exactly, in f32 steps, the TypeScript reader to the same bits as the native one.
 *  - every path's matvec and matmul give the scalar path's bits (the canonical order of
 *    native/cpu/kernels_internal.h), with 1, 3, 9 rows, n = 1, 3, 8, 11, and for IQ4_NL 1, 3, 8, 9, 17
 *    and 289 blocks (289: the matvec's long-row prefetch variant), for IQ4_XS 1, 3, 9 super-blocks.
 *  - an IQ4_NL row and its exact Q8_0 copy (q = T[index], the same d) give the same bits on every path.
 *  - the result is close to the f64 dot of the dequantised weights with the f32 x, within the bounds
 *    tests/native/kernels-q5.test.ts (IQ4_NL: Q8_0 activations, the f16 rounding of their d) and
 *    kernels-kquant.test.ts (IQ4_XS: Q8_K activations) derive.
 *  - NaN and inf in the activations stay non-finite.
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
const T = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

type IqType = 'IQ4_NL' | 'IQ4_XS';
const IQ: Record<IqType, { id: number; bytes: number; elements: number }> = {
  IQ4_NL: { id: 20, bytes: 18, elements: 32 },
  IQ4_XS: { id: 23, bytes: 136, elements: 256 },
};
const TYPES = Object.keys(IQ) as IqType[];
const COLS: Record<IqType, number[]> = {
  IQ4_NL: [32, 96, 256, 288, 544, 9248], // 1, 3, 8, 9, 17, 289 blocks
  IQ4_XS: [256, 768, 2304], // 1, 3, 9 super-blocks
};

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

/** An f16 of random sign with exponent in [lo, hi] (value ~ 2^(exp - 15)). */
function randomF16(next: () => number, lo: number, hi: number): number {
  const sign = next() < 0.5 ? 0x8000 : 0;
  return sign | ((lo + Math.floor(next() * (hi - lo + 1))) << 10) | Math.floor(next() * 1024);
}

/** W [rows, cols] of random valid blocks. */
function randomBlocks(type: IqType, rows: number, cols: number, seed: number): Uint8Array {
  const next = mulberry32(seed);
  const { bytes, elements } = IQ[type];
  const out = new Uint8Array(((rows * cols) / elements) * bytes);
  const view = new DataView(out.buffer);
  for (let b = 0; b < out.length / bytes; b++) {
    for (let j = 0; j < bytes; j++) out[b * bytes + j] = Math.floor(next() * 256);
    // d ~ +-2^-12 .. 2^-8 (IQ4_XS: times |ls - 32| <= 32)
    view.setUint16(b * bytes, type === 'IQ4_NL' ? randomF16(next, 3, 7) : randomF16(next, 0, 3), true);
  }
  return out;
}

/** This test's decoder: per element its scale (d, or d (ls - 32) rounded to f32 as ggml's dl) and table value. */
function decodeRow(type: IqType, row: Uint8Array, cols: number): { scale: Float64Array; v: Int32Array } {
  const out = { scale: new Float64Array(cols), v: new Int32Array(cols) };
  const view = new DataView(row.buffer, row.byteOffset, row.byteLength);
  const { bytes, elements } = IQ[type];
  for (let b = 0; b < cols / elements; b++) {
    const at = b * bytes;
    const d = f16ToNumber(view.getUint16(at, true));
    if (type === 'IQ4_NL') {
      for (let j = 0; j < 32; j++) {
        const byte = row[at + 2 + (j % 16)];
        out.scale[32 * b + j] = d;
        out.v[32 * b + j] = T[j < 16 ? byte & 15 : byte >> 4];
      }
      continue;
    }
    const scalesH = view.getUint16(at + 2, true);
    for (let ib = 0; ib < 8; ib++) {
      const ls = ((row[at + 4 + (ib >> 1)] >> (4 * (ib % 2))) & 15) | (((scalesH >> (2 * ib)) & 3) << 4);
      const dl = Math.fround(d * (ls - 32));
      for (let j = 0; j < 16; j++) {
        const byte = row[at + 8 + 16 * ib + j];
        const e = 256 * b + 32 * ib;
        out.scale[e + j] = out.scale[e + j + 16] = dl;
        out.v[e + j] = T[byte & 15];
        out.v[e + j + 16] = T[byte >> 4];
      }
    }
  }
  return out;
}

function randomX(n: number, seed: number): Float32Array {
  const next = mulberry32(seed);
  return Float32Array.from({ length: n }, () => (next() * 2 - 1) * (next() < 0.1 ? 8 : 1));
}

/** Per-row f64 reference and bound (kernels-q5.test.ts for IQ4_NL, kernels-kquant.test.ts for IQ4_XS). */
function bounds(
  type: IqType,
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Float32Array,
): { ref: number; tol: number }[] {
  const block = IQ[type].elements;
  const e = new Float64Array(cols);
  for (let b = 0; b < cols / block; b++) {
    let amax = 0;
    for (let j = 0; j < block; j++) amax = Math.max(amax, Math.abs(x[block * b + j]));
    const d = amax / 127;
    const err = type === 'IQ4_NL' ? (d / 2) * (1 + 1e-5) + 127 * (d * 2 ** -11 + 2 ** -25) : (d / 2) * (1 + 1e-5);
    e.fill(err, block * b, block * b + block);
  }
  const rowBytes = (cols / block) * IQ[type].bytes;
  return Array.from({ length: rows }, (_, r) => {
    const dec = decodeRow(type, w.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
    let ref = 0,
      actErr = 0,
      s = 0;
    for (let i = 0; i < cols; i++) {
      const wi = dec.scale[i] * dec.v[i];
      ref += wi * x[i];
      actErr += Math.abs(wi) * e[i];
      s += Math.abs(wi) * (Math.abs(x[i]) + e[i]);
    }
    return { ref, tol: actErr + 4 * (cols / block + 8) * U * s + 1e-30 };
  });
}

describe('the ggml layouts', () => {
  it('IQ4_NL: d = 0.5, byte j = index j | index (15 - j) << 4 -> element j = T[j] / 2, element j + 16 = T[15 - j] / 2', () => {
    const blk = new Uint8Array(18);
    blk[1] = 0x38; // f16 0.5
    for (let j = 0; j < 16; j++) blk[2 + j] = j | ((15 - j) << 4);
    const want = [...T.map((v) => v / 2), ...T.map((_, j) => T[15 - j] / 2)];
    const out = new Float32Array(32);
    native.dequantRow(20, blk, 32, out);
    expect(Array.from(out)).toEqual(want);
    const ref = new Float32Array(32);
    dequantizeRow('IQ4_NL', blk, 0, 32, ref);
    expect(Array.from(ref)).toEqual(want);
  });

  it('IQ4_XS: sub-block ib gets ls = ib + 30 (low 4 bits in scales_l, high 2 in scales_h), indices as IQ4_NL', () => {
    const blk = new Uint8Array(136);
    blk[1] = 0x3c; // f16 1.0
    let scalesH = 0;
    for (let ib = 0; ib < 8; ib++) {
      const ls = ib + 30; // 30..37: dl = ib - 2
      blk[4 + (ib >> 1)] |= (ls & 15) << (4 * (ib % 2));
      scalesH |= (ls >> 4) << (2 * ib);
      for (let j = 0; j < 16; j++) blk[8 + 16 * ib + j] = (j + ib) % 16 | (j << 4);
    }
    blk[2] = scalesH & 0xff;
    blk[3] = scalesH >> 8;
    const want: number[] = [];
    for (let ib = 0; ib < 8; ib++) {
      for (let j = 0; j < 16; j++) want.push((ib - 2) * T[(j + ib) % 16] + 0); // + 0: -0 -> 0 for toEqual
      for (let j = 0; j < 16; j++) want.push((ib - 2) * T[j] + 0);
    }
    const out = new Float32Array(256);
    native.dequantRow(23, blk, 256, out);
    expect(Array.from(out).map((v) => v + 0)).toEqual(want);
    const ref = new Float32Array(256);
    dequantizeRow('IQ4_XS', blk, 0, 256, ref);
    expect(Array.from(ref).map((v) => v + 0)).toEqual(want);
  });
});

describe('IQ4_NL and its exact Q8_0 copy', () => {
  it('give the same bits on every path (q = T[index], the same d: the same integer sums and order)', () => {
    for (const cols of [96, 544, 9248]) {
      const rows = 5;
      const w = randomBlocks('IQ4_NL', rows, cols, 41 + cols);
      const dec = decodeRow('IQ4_NL', w, rows * cols);
      const q8 = new Uint8Array(((rows * cols) / 32) * 34);
      for (let b = 0; b < (rows * cols) / 32; b++) {
        q8[34 * b] = w[18 * b];
        q8[34 * b + 1] = w[18 * b + 1];
        for (let j = 0; j < 32; j++) q8[34 * b + 2 + j] = dec.v[32 * b + j] & 0xff;
      }
      for (const n of [1, 3, 8]) {
        const x = randomX(n * cols, 5 * n + cols);
        for (const isa of PATHS) {
          const yi = matmulOn(isa, 20, w, rows, cols, x, n);
          const y8 = matmulOn(isa, 8, q8, rows, cols, x, n);
          expect(sameBits(yi, y8), `${native.isaName(isa)} cols=${cols} n=${n}`).toBe(true);
        }
      }
    }
  });
});

describe.each(TYPES)('%s', (type) => {
  const { id } = IQ[type];

  it("dequantRow gives this file's decoder exactly (scale * T[index] in f32), and the reference reader the same bits", () => {
    for (const cols of COLS[type].slice(0, 4)) {
      const row = randomBlocks(type, 1, cols, 3 + cols);
      const out = new Float32Array(cols);
      native.dequantRow(id, row, cols, out);
      const dec = decodeRow(type, row, cols);
      expect(Array.from(out)).toEqual(Array.from({ length: cols }, (_, i) => Math.fround(dec.scale[i] * dec.v[i])));
      const ref = new Float32Array(cols);
      dequantizeRow(type, row, 0, cols, ref);
      expect(sameBits(ref, out)).toBe(true);
    }
  });

  it('matvec: f64 reference within the stated bound on every path', () => {
    for (const cols of COLS[type]) {
      for (const rows of [1, 5]) {
        const w = randomBlocks(type, rows, cols, rows * 100 + cols);
        const x = randomX(cols, cols + rows);
        const b = bounds(type, w, rows, cols, x);
        for (const isa of PATHS) {
          const y = matvecOn(isa, id, w, rows, cols, x);
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
      for (const cols of COLS[type]) {
        for (const rows of [1, 3, 9]) {
          const w = randomBlocks(type, rows, cols, 7 * rows + cols);
          for (const n of [1, 3, 8, 11]) {
            const x = randomX(n * cols, n * 31 + cols);
            const ref = matmulOn(ISA.scalar, id, w, rows, cols, x, n);
            const y = matmulOn(isa, id, w, rows, cols, x, n);
            expect(sameBits(y, ref), `matmul rows=${rows} cols=${cols} n=${n}`).toBe(true);
            for (let i = 0; i < n; i++) {
              const yi = matvecOn(isa, id, w, rows, cols, x.subarray(i * cols, (i + 1) * cols));
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
    const cols = type === 'IQ4_NL' ? 288 : 512;
    const w = randomBlocks(type, 2, cols, 5);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      for (const at of [40, 270]) {
        const x = randomX(cols, 9);
        x[at] = bad;
        for (const isa of PATHS)
          expect(Array.from(matvecOn(isa, id, w, 2, cols, x)).every(Number.isNaN), `${at} ${bad}`).toBe(true);
      }
    }
  });

  it('an all-zero row and a tiny row agree across paths', () => {
    const cols = type === 'IQ4_NL' ? 544 : 512;
    const w = randomBlocks(type, 4, cols, 17);
    for (const x of [new Float32Array(cols), randomX(cols, 4).map((v) => v * 3e-6)]) {
      const ref = matvecOn(ISA.scalar, id, w, 4, cols, x);
      for (const isa of PATHS) expect(sameBits(matvecOn(isa, id, w, 4, cols, x), ref), native.isaName(isa)).toBe(true);
    }
  });
});
