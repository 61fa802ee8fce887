/**
 * ggml's k-quants: super-blocks of 256 elements (QK_K) split into sub-blocks of 16 or 32, each
 * sub-block with its own small integer scale (and min) that a per-super-block f16 scale multiplies.
 * Byte layouts, exactly ggml-common.h's block_q*_K (little-endian, offsets in bytes):
 *
 *   Q2_K  84 B: scales[16] @0 (low nibble scale, high nibble min, one per 16 elements)
 *               qs[64] @16 (2-bit) | d f16 @80 | dmin f16 @82      value = d sc q - dmin m
 *   Q3_K 110 B: hmask[32] @0 (high bit) | qs[64] @32 (low 2 bits)
 *               scales[12] @96 (16 x 6-bit, biased by 32) | d f16 @108  value = d (sc - 32) (q - 4)
 *   Q4_K 144 B: d f16 @0 | dmin f16 @2 | scales[12] @4 (8 x 6-bit scale, 8 x 6-bit min,
 *               one pair per 32 elements) | qs[128] @16 (4-bit)    value = d sc q - dmin m
 *   Q5_K 176 B: d @0 | dmin @2 | scales[12] @4 | qh[32] @16 (5th bit) | qs[128] @48
 *   Q6_K 210 B: ql[128] @0 (low 4 bits) | qh[64] @128 (high 2 bits) | scales[16] @192 (int8,
 *               one per 16 elements) | d f16 @208                value = d sc (q - 32)
 *
 * Element order inside a super-block (e = 0..255), as ggml's dequantize_row_q*_K walks it:
 *   Q2_K / Q3_K: 2-bit q of e in qs[32 (e >> 7) + (e & 31)] at bit 2 ((e >> 5) & 3); scale e >> 4;
 *                Q3_K's high bit in hmask[e & 31] at bit e >> 5.
 *   Q4_K / Q5_K: 4-bit q of e in qs[32 (e >> 6) + (e & 31)], low nibble when (e & 32) == 0;
 *                scale / min pair e >> 5; Q5_K's 5th bit in qh[e & 31] at bit e >> 5.
 *   Q6_K:        e = 128 h + 32 g + l: low 4 bits in ql[64 h + l + 32 (g & 1)], nibble g >> 1;
 *                high 2 bits in qh[32 h + l] at bit 2 g; scale e >> 4.
 *
 * Dequantisation does ggml's f32 operations in ggml's order (Math.fround after each), so it is
 * bit-compatible with dequantize_row_q*_K compiled without FMA contraction (ggml-base is).
 * The quantisers are quantize_row_q*_K_ref (no importance matrix), byte for byte; see quant-k-search.ts.
 */
import { F16_TABLE, f32ToF16 } from './f16.js';
import { fitQ3Scale, fitScaleMin, fitSymmetricScale, nearestInt } from './quant-k-search.js';

export const QK_K = 256;
export const K_BLOCK_BYTES = { Q2_K: 84, Q3_K: 110, Q4_K: 144, Q5_K: 176, Q6_K: 210 } as const;
export type KQuantName = keyof typeof K_BLOCK_BYTES;

const f = Math.fround;

function f16At(bytes: Uint8Array, o: number): number {
  return F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
}

function writeF16(dst: Uint8Array, o: number, x: number): number {
  const h = f32ToF16(x);
  dst[o] = h & 0xff;
  dst[o + 1] = h >>> 8;
  return F16_TABLE[h];
}

/** ggml get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes at s. */
export function scaleMinK4(bytes: Uint8Array, s: number, j: number): [number, number] {
  if (j < 4) return [bytes[s + j] & 63, bytes[s + j + 4] & 63];
  const scale = (bytes[s + j + 4] & 0x0f) | ((bytes[s + j - 4] >> 6) << 4);
  const min = (bytes[s + j + 4] >> 4) | ((bytes[s + j] >> 6) << 4);
  return [scale, min];
}

/** Q3_K's 6-bit scale s (0..15) from the 12 packed bytes at o: low nibbles in bytes 0..7, high 2 bits in 8..11. */
export function scaleQ3K(bytes: Uint8Array, o: number, s: number): number {
  const low = s < 8 ? bytes[o + s] & 0x0f : bytes[o + s - 8] >> 4;
  const high = (bytes[o + 8 + (s % 4)] >> (2 * (s >> 2))) & 3;
  return low | (high << 4);
}

// ---------------------------------------------------------------- dequantisation

export function dequantKRow(
  type: KQuantName,
  bytes: Uint8Array,
  offset: number,
  cols: number,
  out: Float32Array,
  outOffset: number,
): void {
  const size = K_BLOCK_BYTES[type];
  const dequantBlock = DEQUANT_BLOCK[type];
  for (let b = 0; b < cols / QK_K; b++) dequantBlock(bytes, offset + b * size, out, outOffset + b * QK_K);
}

type DequantBlock = (bytes: Uint8Array, o: number, out: Float32Array, y: number) => void;

const DEQUANT_BLOCK: Record<KQuantName, DequantBlock> = {
  Q2_K(bytes, o, out, y) {
    const d = f16At(bytes, o + 80);
    const dmin = f16At(bytes, o + 82);
    for (let e = 0; e < QK_K; e++) {
      const sc = bytes[o + (e >> 4)];
      const q = (bytes[o + 16 + 32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
      const dl = f(d * (sc & 0x0f));
      const ml = f(dmin * (sc >> 4));
      out[y + e] = f(dl * q) - ml;
    }
  },
  Q3_K(bytes, o, out, y) {
    const d = f16At(bytes, o + 108);
    for (let e = 0; e < QK_K; e++) {
      const dl = f(d * (scaleQ3K(bytes, o + 96, e >> 4) - 32));
      const low = (bytes[o + 32 + 32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
      const high = (bytes[o + (e & 31)] >> (e >> 5)) & 1;
      out[y + e] = dl * (low - (high ? 0 : 4));
    }
  },
  Q4_K(bytes, o, out, y) {
    const d = f16At(bytes, o);
    const dmin = f16At(bytes, o + 2);
    for (let j = 0; j < 8; j++) {
      const [sc, m] = scaleMinK4(bytes, o + 4, j);
      const d1 = f(d * sc);
      const m1 = f(dmin * m);
      const qs = o + 16 + 32 * (j >> 1);
      const shift = (j & 1) * 4;
      for (let l = 0; l < 32; l++) out[y + 32 * j + l] = f(d1 * ((bytes[qs + l] >> shift) & 0x0f)) - m1;
    }
  },
  Q5_K(bytes, o, out, y) {
    const d = f16At(bytes, o);
    const dmin = f16At(bytes, o + 2);
    for (let j = 0; j < 8; j++) {
      const [sc, m] = scaleMinK4(bytes, o + 4, j);
      const d1 = f(d * sc);
      const m1 = f(dmin * m);
      const qs = o + 48 + 32 * (j >> 1);
      const shift = (j & 1) * 4;
      for (let l = 0; l < 32; l++) {
        const q = ((bytes[qs + l] >> shift) & 0x0f) + ((bytes[o + 16 + l] >> j) & 1 ? 16 : 0);
        out[y + 32 * j + l] = f(d1 * q) - m1;
      }
    }
  },
  Q6_K(bytes, o, out, y) {
    const d = f16At(bytes, o + 208);
    for (let e = 0; e < QK_K; e++) {
      const h = e >> 7,
        g = (e >> 5) & 3,
        l = e & 31;
      const low = (bytes[o + 64 * h + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 0x0f;
      const high = (bytes[o + 128 + 32 * h + l] >> (2 * g)) & 3;
      const sc = (bytes[o + 192 + (e >> 4)] << 24) >> 24; // int8
      out[y + e] = f(d * sc) * ((low | (high << 4)) - 32);
    }
  },
};

// ---------------------------------------------------------------- quantisation

export function quantizeKRow(
  type: KQuantName,
  src: Float32Array,
  srcOffset: number,
  cols: number,
  dst: Uint8Array,
  dstOffset: number,
): void {
  const size = K_BLOCK_BYTES[type];
  const quantBlock = QUANT_BLOCK[type];
  for (let b = 0; b < cols / QK_K; b++) {
    const o = dstOffset + b * size;
    dst.fill(0, o, o + size);
    quantBlock(src, srcOffset + b * QK_K, dst, o);
  }
}

type QuantBlock = (x: Float32Array, s: number, dst: Uint8Array, o: number) => void;

/** Packs levels L[0..256) of 2 bits into 64 bytes at o the way Q2_K / Q3_K's qs hold them. */
function pack2Bit(L: ArrayLike<number>, dst: Uint8Array, o: number): void {
  for (let h = 0; h < 2; h++) {
    for (let l = 0; l < 32; l++) {
      const e = 128 * h + l;
      dst[o + 32 * h + l] = L[e] | (L[e + 32] << 2) | (L[e + 64] << 4) | (L[e + 96] << 6);
    }
  }
}

/** quantize_row_q2_K_ref: 16 sub-blocks of 16 fitted by fitScaleMin (nmax 3), scales and mins to 4 bits. */
function quantBlockQ2_K(x: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const L = new Uint8Array(QK_K);
  const laux = new Uint8Array(16);
  const weights = new Float32Array(16);
  const scales = new Float32Array(16);
  const mins = new Float32Array(16);
  let maxScale = 0,
    maxMin = 0;
  for (let j = 0; j < 16; j++) {
    for (let l = 0; l < 16; l++) weights[l] = Math.abs(x[s + 16 * j + l]);
    const fit = fitScaleMin(x, s + 16 * j, 16, 3, weights, L, 16 * j, laux, f(-0.5), f(0.1), 15, true);
    scales[j] = fit.scale;
    mins[j] = fit.minNeg;
    if (fit.scale > maxScale) maxScale = fit.scale;
    if (fit.minNeg > maxMin) maxMin = fit.minNeg;
  }
  const q4scale = 15;
  let d = 0,
    dmin = 0;
  if (maxScale > 0) {
    const iscale = f(q4scale / maxScale);
    for (let j = 0; j < 16; j++) dst[o + j] = nearestInt(f(iscale * scales[j])) & 0xff;
    d = writeF16(dst, o + 80, f(maxScale / q4scale));
  } else {
    d = writeF16(dst, o + 80, 0);
  }
  if (maxMin > 0) {
    const iscale = f(q4scale / maxMin);
    for (let j = 0; j < 16; j++) dst[o + j] |= (nearestInt(f(iscale * mins[j])) << 4) & 0xff;
    dmin = writeF16(dst, o + 82, f(maxMin / q4scale));
  } else {
    dmin = writeF16(dst, o + 82, 0);
  }
  for (let j = 0; j < 16; j++) {
    const dl = f(d * (dst[o + j] & 0x0f));
    if (dl === 0) continue;
    const ml = f(dmin * (dst[o + j] >> 4));
    for (let i = 0; i < 16; i++)
      L[16 * j + i] = Math.max(0, Math.min(3, nearestInt(f(f(x[s + 16 * j + i] + ml) / dl))));
  }
  pack2Bit(L, dst, o + 16);
}

/** quantize_row_q3_K_ref: 16 sub-blocks of 16 fitted by fitQ3Scale (levels -4..3), scales to 6 bits. */
function quantBlockQ3_K(x: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const L = new Int8Array(QK_K);
  const scales = new Float32Array(16);
  let maxScale = 0,
    amax = 0;
  for (let j = 0; j < 16; j++) {
    scales[j] = fitQ3Scale(x, s + 16 * j, 16, 4, L, 16 * j);
    const a = Math.abs(scales[j]);
    if (a > amax) {
      amax = a;
      maxScale = scales[j];
    }
  }
  const sc = o + 96;
  let d = 0;
  if (maxScale !== 0) {
    const iscale = f(-32 / maxScale);
    for (let j = 0; j < 16; j++) {
      const l = Math.max(-32, Math.min(31, (nearestInt(f(iscale * scales[j])) << 24) >> 24)) + 32; // int8, then 0..63
      if (j < 8) dst[sc + j] = l & 0x0f;
      else dst[sc + j - 8] |= (l & 0x0f) << 4;
      dst[sc + 8 + (j % 4)] |= (l >> 4) << (2 * (j >> 2));
    }
    d = writeF16(dst, o + 108, f(1 / iscale));
  } else {
    d = writeF16(dst, o + 108, 0);
  }
  for (let j = 0; j < 16; j++) {
    const dl = f(d * (scaleQ3K(dst, sc, j) - 32));
    if (dl === 0) continue;
    for (let i = 0; i < 16; i++) L[16 * j + i] = Math.max(-4, Math.min(3, nearestInt(f(x[s + 16 * j + i] / dl)))) + 4;
  }
  for (let e = 0; e < QK_K; e++) {
    if (L[e] > 3) {
      dst[o + (e & 31)] |= 1 << (e >> 5); // hmask
      L[e] -= 4;
    }
  }
  pack2Bit(L, dst, o + 32);
}

/**
 * quantize_row_q4_K_ref / quantize_row_q5_K_ref: 8 sub-blocks of 32 fitted by fitScaleMin with
 * weights av_x + |x| (av_x the sub-block's rms); scales and mins to 6 bits against max / 63.
 */
function quantBlockQ45_K(bits: 4 | 5, x: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const nmax = bits === 4 ? 15 : 31;
  const L = new Uint8Array(QK_K);
  const laux = new Uint8Array(32);
  const weights = new Float32Array(32);
  const scales = new Float32Array(8);
  const mins = new Float32Array(8);
  let maxScale = 0,
    maxMin = 0;
  for (let j = 0; j < 8; j++) {
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) sumX2 = f(sumX2 + f(x[s + 32 * j + l] * x[s + 32 * j + l]));
    const avX = f(Math.sqrt(f(sumX2 / 32)));
    for (let l = 0; l < 32; l++) weights[l] = f(avX + Math.abs(x[s + 32 * j + l]));
    const fit =
      bits === 4
        ? fitScaleMin(x, s + 32 * j, 32, nmax, weights, L, 32 * j, laux, -1, f(0.1), 20, false)
        : fitScaleMin(x, s + 32 * j, 32, nmax, weights, L, 32 * j, laux, f(-0.5), f(0.1), 15, false);
    scales[j] = fit.scale;
    mins[j] = fit.minNeg;
    if (fit.scale > maxScale) maxScale = fit.scale;
    if (fit.minNeg > maxMin) maxMin = fit.minNeg;
  }
  const invScale = maxScale > 0 ? f(63 / maxScale) : 0;
  const invMin = maxMin > 0 ? f(63 / maxMin) : 0;
  const sc = o + 4;
  for (let j = 0; j < 8; j++) {
    const ls = Math.min(63, nearestInt(f(invScale * scales[j])) & 0xff);
    const lm = Math.min(63, nearestInt(f(invMin * mins[j])) & 0xff);
    if (j < 4) {
      dst[sc + j] = ls;
      dst[sc + j + 4] = lm;
    } else {
      dst[sc + j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
      dst[sc + j - 4] |= (ls >> 4) << 6;
      dst[sc + j] |= (lm >> 4) << 6;
    }
  }
  const d = writeF16(dst, o, f(maxScale / 63));
  const dmin = writeF16(dst, o + 2, f(maxMin / 63));
  for (let j = 0; j < 8; j++) {
    const [ls, lm] = scaleMinK4(dst, sc, j);
    const dl = f(d * ls);
    if (dl === 0) continue;
    const ml = f(dmin * lm);
    for (let i = 0; i < 32; i++)
      L[32 * j + i] = Math.max(0, Math.min(nmax, nearestInt(f(f(x[s + 32 * j + i] + ml) / dl))));
  }
  const qs = o + (bits === 4 ? 16 : 48);
  for (let e = 0; e < QK_K; e++) {
    const low = L[e] & 0x0f;
    dst[qs + 32 * (e >> 6) + (e & 31)] |= e & 32 ? low << 4 : low;
    if (bits === 5 && L[e] > 15) dst[o + 16 + (e & 31)] |= 1 << (e >> 5); // qh
  }
}

/** quantize_row_q6_K_ref: 16 sub-blocks of 16 fitted by fitSymmetricScale (levels -32..31), int8 scales. */
function quantBlockQ6_K(x: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const L = new Uint8Array(QK_K);
  const scales = new Float32Array(16);
  let maxScale = 0,
    maxAbsScale = 0;
  for (let j = 0; j < 16; j++) {
    scales[j] = fitSymmetricScale(x, s + 16 * j, 16, 32, L, 16 * j);
    const a = Math.abs(scales[j]);
    if (a > maxAbsScale) {
      maxAbsScale = a;
      maxScale = scales[j];
    }
  }
  if (maxAbsScale < f(1e-15)) return; // an all-zero block: every byte 0 (d = +0)
  const iscale = f(-128 / maxScale);
  const d = writeF16(dst, o + 208, f(1 / iscale));
  for (let j = 0; j < 16; j++) dst[o + 192 + j] = Math.min(127, nearestInt(f(iscale * scales[j]))) & 0xff;
  for (let j = 0; j < 16; j++) {
    const dl = f(d * ((dst[o + 192 + j] << 24) >> 24));
    if (dl === 0) continue;
    for (let i = 0; i < 16; i++)
      L[16 * j + i] = Math.max(-32, Math.min(31, nearestInt(f(x[s + 16 * j + i] / dl)))) + 32;
  }
  for (let e = 0; e < QK_K; e++) {
    const h = e >> 7,
      g = (e >> 5) & 3,
      l = e & 31;
    dst[o + 64 * h + l + 32 * (g & 1)] |= (L[e] & 0x0f) << (4 * (g >> 1));
    dst[o + 128 + 32 * h + l] |= (L[e] >> 4) << (2 * g);
  }
}

const QUANT_BLOCK: Record<KQuantName, QuantBlock> = {
  Q2_K: quantBlockQ2_K,
  Q3_K: quantBlockQ3_K,
  Q4_K: (x, s, dst, o) => quantBlockQ45_K(4, x, s, dst, o),
  Q5_K: (x, s, dst, o) => quantBlockQ45_K(5, x, s, dst, o),
  Q6_K: quantBlockQ6_K,
};
