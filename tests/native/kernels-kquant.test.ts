/**
 * The k-quant kernels (Q2_K .. Q6_K, ggml type ids 10..14, 256-element super-blocks) per ISA path.
 *
 * Weights are random valid blocks built here (every bit pattern of codes and sub-block scales is
 * valid; the f16 d / dmin are set to finite values), decoded by this file's own reading of ggml's
 * block layouts (dequantize_row_q*_K), independent of native/cpu/kernels_kquant.h.
 *
 * Checks:
 *  - dequantRow gives exactly this file's decoder, in f32 steps ((d sc) q - dmin m, as ggml).
 *  - every path's matvec and matmul give the scalar path's bits (the canonical order of
 *    native/cpu/kernels_internal.h), with 1..9 rows, 1, 3, 9 and 17 super-blocks, n = 1, 3, 8, 11;
 *    and the SIMD drivers' edges: matvec in groups of 8 rows (16, 17 rows and short last groups),
 *    matmul in tiles of 8 activation rows (every short tile, n = 1..8, 9, 16) and in passes
 *    of tiles (160 rows of one super-block).
 *  - the result is close to the f64 dot of the dequantised weights with the f32 x:
 *    activations are quantised per 256 elements to Q8_K (d = max|x| / 127 as f32, q = round(x / d)),
 *    which moves each x_i by e_i <= d / 2 (times 1 + 1e-5 for the rounding of 1 / d), so
 *    |err| <= sum |w_i| e_i + floatErr, floatErr = 4 (nb + 8) u S, S = sum over elements of
 *    (|d sc q| + |dmin m|)(|x| + e), u = 2^-24: per super-block the kernel rounds d_w d_x, (float)isum,
 *    and two fmas, and the 8 lanes are added in a tree (a generous bound; the activation term dominates).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { matmulOn, matvecOn, sameBits } from './kernel-paths.js';
import { mulberry32 } from '../../src/core/prng.js';

const native = loadDiagnostics();
const U = 2 ** -24;
const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());

type KType = 'Q2_K' | 'Q3_K' | 'Q4_K' | 'Q5_K' | 'Q6_K';
const K: Record<KType, { id: number; bytes: number; d: number; dmin?: number }> = {
  Q2_K: { id: 10, bytes: 84, d: 80, dmin: 82 },
  Q3_K: { id: 11, bytes: 110, d: 108 },
  Q4_K: { id: 12, bytes: 144, d: 0, dmin: 2 },
  Q5_K: { id: 13, bytes: 176, d: 0, dmin: 2 },
  Q6_K: { id: 14, bytes: 210, d: 208 },
};
const KTYPES = Object.keys(K) as KType[];

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

/** A positive f16 with exponent in [lo, hi] (value ~ 2^(exp - 15)). */
function randomF16(next: () => number, lo: number, hi: number): number {
  return ((lo + Math.floor(next() * (hi - lo + 1))) << 10) | Math.floor(next() * 1024);
}

/** W [rows, cols] of random valid super-blocks. */
function randomBlocks(type: KType, rows: number, cols: number, seed: number): Uint8Array {
  const next = mulberry32(seed);
  const { bytes, d, dmin } = K[type];
  const out = new Uint8Array((rows * cols * bytes) / 256);
  const view = new DataView(out.buffer);
  for (let b = 0; b < out.length / bytes; b++) {
    for (let j = 0; j < bytes; j++) out[b * bytes + j] = Math.floor(next() * 256);
    view.setUint16(b * bytes + d, randomF16(next, 5, 9), true); // d ~ 2^-10 .. 2^-6
    if (dmin !== undefined) view.setUint16(b * bytes + dmin, randomF16(next, 5, 9), true);
  }
  return out;
}

interface Decoded {
  scale: Float64Array; // per element: d * sc of its sub-block
  q: Int32Array; // per element: its signed quant
  min: Float64Array; // per element: dmin * m of its sub-block (0 without a min)
}

/** This test's own decoder of one super-block, written from ggml's dequantize_row_q*_K loops. */
function decodeBlock(type: KType, blk: Uint8Array, out: Decoded, at: number): void {
  const view = new DataView(blk.buffer, blk.byteOffset, blk.byteLength);
  const d = f16ToNumber(view.getUint16(K[type].d, true));
  const dmin = K[type].dmin === undefined ? 0 : f16ToNumber(view.getUint16(K[type].dmin!, true));
  const put = (e: number, sc: number, q: number, m: number): void => {
    out.scale[at + e] = d * sc;
    out.q[at + e] = q;
    out.min[at + e] = dmin * m;
  };
  if (type === 'Q2_K') {
    // scales[16] | qs[64]; 128-element halves, 4 shifts x 32
    let e = 0;
    for (let n = 0; n < 2; n++)
      for (let shift = 0; shift < 8; shift += 2)
        for (let l = 0; l < 32; l++, e++) {
          const sc = blk[e >> 4];
          put(e, sc & 15, (blk[16 + 32 * n + l] >> shift) & 3, sc >> 4);
        }
  } else if (type === 'Q3_K') {
    // hmask[32] | qs[64] | scales[12]
    const s = blk.subarray(96, 108);
    const scale = (k: number): number =>
      ((k < 8 ? s[k] & 15 : s[k - 8] >> 4) | (((s[8 + (k % 4)] >> (2 * Math.floor(k / 4))) & 3) << 4)) - 32;
    let e = 0,
      bit = 0;
    for (let n = 0; n < 2; n++)
      for (let shift = 0; shift < 8; shift += 2, bit++)
        for (let l = 0; l < 32; l++, e++) {
          const lo = (blk[32 + 32 * n + l] >> shift) & 3;
          put(e, scale(e >> 4), lo - ((blk[l] >> bit) & 1 ? 0 : 4), 0);
        }
  } else if (type === 'Q4_K' || type === 'Q5_K') {
    // d | dmin | scales[12] | (qh[32]) | qs[128]
    const s = blk.subarray(4, 16);
    const scaleMin = (j: number): [number, number] =>
      j < 4
        ? [s[j] & 63, s[j + 4] & 63]
        : [(s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)];
    const qs = type === 'Q4_K' ? 16 : 48;
    for (let c = 0; c < 4; c++)
      for (let half = 0; half < 2; half++) {
        const sub = 2 * c + half;
        const [sc, m] = scaleMin(sub);
        for (let l = 0; l < 32; l++) {
          let q = (blk[qs + 32 * c + l] >> (4 * half)) & 15;
          if (type === 'Q5_K' && (blk[16 + l] >> sub) & 1) q += 16;
          put(32 * sub + l, sc, q, m);
        }
      }
  } else {
    // Q6_K: ql[128] | qh[64] | int8 scales[16] | d
    for (let n = 0; n < 2; n++)
      for (let l = 0; l < 32; l++) {
        const ql = 64 * n,
          qh = blk[128 + 32 * n + l];
        const qs = [
          (blk[ql + l] & 15) | ((qh & 3) << 4),
          (blk[ql + 32 + l] & 15) | (((qh >> 2) & 3) << 4),
          (blk[ql + l] >> 4) | (((qh >> 4) & 3) << 4),
          (blk[ql + 32 + l] >> 4) | (((qh >> 6) & 3) << 4),
        ];
        for (let p = 0; p < 4; p++) {
          const e = 128 * n + 32 * p + l;
          put(e, view.getInt8(192 + (e >> 4)), qs[p] - 32, 0);
        }
      }
  }
}

function decodeRow(type: KType, row: Uint8Array, cols: number): Decoded {
  const out = { scale: new Float64Array(cols), q: new Int32Array(cols), min: new Float64Array(cols) };
  const { bytes } = K[type];
  for (let b = 0; b < cols / 256; b++) decodeBlock(type, row.subarray(b * bytes, (b + 1) * bytes), out, 256 * b);
  return out;
}

function randomX(n: number, seed: number): Float32Array {
  const next = mulberry32(seed);
  return Float32Array.from({ length: n }, () => (next() * 2 - 1) * (next() < 0.1 ? 8 : 1));
}

/** Per-row f64 reference and bound (see the header comment). */
function bounds(
  type: KType,
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Float32Array,
): { ref: number; tol: number }[] {
  const e = new Float64Array(cols);
  for (let b = 0; b < cols / 256; b++) {
    let amax = 0;
    for (let j = 0; j < 256; j++) amax = Math.max(amax, Math.abs(x[256 * b + j]));
    e.fill((amax / 127 / 2) * (1 + 1e-5), 256 * b, 256 * b + 256);
  }
  const rowBytes = (cols / 256) * K[type].bytes;
  return Array.from({ length: rows }, (_, r) => {
    const dec = decodeRow(type, w.subarray(r * rowBytes, (r + 1) * rowBytes), cols);
    let ref = 0,
      actErr = 0,
      s = 0;
    for (let i = 0; i < cols; i++) {
      const wi = dec.scale[i] * dec.q[i] - dec.min[i];
      ref += wi * x[i];
      actErr += Math.abs(wi) * e[i];
      s += (Math.abs(dec.scale[i] * dec.q[i]) + Math.abs(dec.min[i])) * (Math.abs(x[i]) + e[i]);
    }
    return { ref, tol: actErr + 4 * (cols / 256 + 8) * U * s + 1e-30 };
  });
}

describe.each(KTYPES)('%s', (type) => {
  it("dequantRow gives this file's decoder exactly ((d sc) q - dmin m in f32 steps)", () => {
    for (const cols of [256, 768]) {
      const row = randomBlocks(type, 1, cols, 3 + cols);
      const out = new Float32Array(cols);
      native.dequantRow(K[type].id, row, cols, out);
      const dec = decodeRow(type, row, cols);
      const f = Math.fround;
      const want = Array.from({ length: cols }, (_, i) => {
        const v = f(f(dec.scale[i]) * dec.q[i]);
        return K[type].dmin === undefined ? v : f(v - f(dec.min[i]));
      });
      expect(Array.from(out)).toEqual(want);
    }
  });

  it('matvec: f64 reference within the stated bound on every path', () => {
    for (const cols of [256, 768, 2304, 4352]) {
      for (const rows of [1, 5]) {
        const w = randomBlocks(type, rows, cols, rows * 100 + cols);
        const x = randomX(cols, cols + rows);
        const b = bounds(type, w, rows, cols, x);
        for (const isa of PATHS) {
          const y = matvecOn(isa, K[type].id, w, rows, cols, x);
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
      for (const cols of [256, 768, 2304, 4352]) {
        for (const rows of [1, 3, 9]) {
          const w = randomBlocks(type, rows, cols, 7 * rows + cols);
          for (const n of [1, 3, 8, 11]) {
            // 8, 11: the SIMD matmul's 8-row tiles and a short tail
            const x = randomX(n * cols, n * 31 + cols);
            const ref = matmulOn(ISA.scalar, K[type].id, w, rows, cols, x, n);
            const y = matmulOn(isa, K[type].id, w, rows, cols, x, n);
            expect(sameBits(y, ref), `matmul rows=${rows} cols=${cols} n=${n}`).toBe(true);
            for (let i = 0; i < n; i++) {
              const yi = matvecOn(isa, K[type].id, w, rows, cols, x.subarray(i * cols, (i + 1) * cols));
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

  it.each(PATHS.map((isa) => [native.isaName(isa), isa] as const))(
    "path %s: the drivers' row groups, activation tiles and passes give the scalar bits",
    (_name, isa) => {
      const cases: [rows: number, cols: number, ns: number[]][] = [
        [16, 768, [1, 2, 4, 5, 6, 7, 9, 16]],
        [17, 256, [1, 160]],
        [8, 2304, [2, 8]],
      ];
      for (const [rows, cols, ns] of cases) {
        const w = randomBlocks(type, rows, cols, 11 * rows + cols);
        for (const n of ns) {
          const x = randomX(n * cols, 5 * n + cols);
          const ref = matmulOn(ISA.scalar, K[type].id, w, rows, cols, x, n);
          expect(sameBits(matmulOn(isa, K[type].id, w, rows, cols, x, n), ref), `matmul rows=${rows} n=${n}`).toBe(
            true,
          );
          if (n > 2) continue;
          // Rows 3..rows as a matrix of their own: 13 / 14 / 5 rows, a short last group of 8.
          const rowBytes = (cols / 256) * K[type].bytes;
          const tail = w.subarray(3 * rowBytes);
          const y = matvecOn(isa, K[type].id, tail, rows - 3, cols, x.subarray(0, cols));
          expect(sameBits(y, ref.subarray(3, rows)), `matvec rows 3..${rows} cols=${cols}`).toBe(true);
        }
      }
    },
  );

  it('keeps NaN and inf in the activations non-finite on every path', () => {
    const cols = 512;
    const w = randomBlocks(type, 2, cols, 5);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const x = randomX(cols, 9);
      x[300] = bad; // super-block 1
      for (const isa of PATHS)
        expect(Array.from(matvecOn(isa, K[type].id, w, 2, cols, x)).every(Number.isNaN)).toBe(true);
    }
  });
});

describe('k-quant activations', () => {
  it('an all-zero row, a large-magnitude row and a row of exact ties agree across paths', () => {
    const cols = 512;
    for (const type of KTYPES) {
      const w = randomBlocks(type, 4, cols, 17);
      // d = max|x| / 127 = 1 exactly: every other element is a tie (k + 0.5), rounded to even.
      const ties = Float32Array.from({ length: cols }, (_, i) => (i % 256 === 0 ? 127 : (i % 254) - 126.5));
      for (const x of [new Float32Array(cols), randomX(cols, 4).map((v) => v * 1e30), ties]) {
        const ref = matvecOn(ISA.scalar, K[type].id, w, 4, cols, x);
        for (const isa of PATHS)
          expect(sameBits(matvecOn(isa, K[type].id, w, 4, cols, x), ref), `${type} ${native.isaName(isa)}`).toBe(true);
      }
    }
  });
});
