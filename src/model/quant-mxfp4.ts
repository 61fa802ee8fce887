/**
 * MXFP4 (ggml type 39, gpt-oss's experts): the OCP microscaling format's 4-bit floats with one
 * power-of-two scale per 32 elements (ggml-common.h block_mxfp4; ggml-quants.c dequantize_row_mxfp4).
 * Byte layout:
 *   MXFP4  17 B / 32:  [e: u8][qs: 16 bytes]   byte j = code of elem j (low nibble) | elem j+16 (high)
 *                      value = TABLE[code] * 2^(e - 128)
 * TABLE holds the E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 -> integers, bit 3 the sign), so
 * the scale is half the E8M0 exponent's 2^(e - 127): ggml's GGML_E8M0_TO_FP32_HALF. e = 0 and 1 give
 * the f32 subnormals 2^-128 and 2^-127; e = 255 (the MX format's NaN) reads as 2^127, as in ggml.
 * The writer is moetier's own encoder (quantizeMxfp4Block), native/cpu/quantize_mxfp4.cc its twin.
 */

import { nearestTableIndex } from './quant-block.js';

/** ggml's kvalues_mxfp4. */
export const MXFP4_TABLE: readonly number[] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

const QK = 32;
const f = Math.fround;

/** 2^(e - 128), the block's scale (exact in f32 for every e). */
export function e8m0Half(e: number): number {
  return 2 ** (e - 128);
}

export function dequantMxfp4Row(
  bytes: Uint8Array,
  offset: number,
  cols: number,
  out: Float32Array,
  outOffset: number,
): void {
  for (let b = 0, o = offset; b < cols / QK; b++, o += 17) {
    const d = e8m0Half(bytes[o]);
    const base = outOffset + b * QK;
    for (let j = 0; j < QK / 2; j++) {
      const byte = bytes[o + 1 + j];
      out[base + j] = MXFP4_TABLE[byte & 0x0f] * d;
      out[base + j + QK / 2] = MXFP4_TABLE[byte >>> 4] * d;
    }
  }
}

const bits = new Uint32Array(1);
const bitsF32 = new Float32Array(bits.buffer);

/**
 * The smallest e in 0..254 with 12 * 2^(e - 128) >= amax (finite, >= 0). With amax = m 2^k,
 * 1 <= m < 2 (exponent field E = k + 127), 12 * 2^(e - 128) = 1.5 * 2^(e - 125) reaches it from
 * e = E - 2 when m <= 1.5, else from E - 1; a subnormal amax and E = 1 need e = 0.
 */
function exponentFit(amax: number): number {
  bitsF32[0] = amax;
  const u = bits[0];
  const e = (u & 0x7fffff) <= 0x400000 ? (u >>> 23) - 2 : (u >>> 23) - 1;
  return Math.max(0, e);
}

/**
 * The nearest table value (the first of equals) of each x / 2^(e - 128) into idx; returns the
 * squared error in units of that scale, summed in element order, every step one f32 rounding.
 */
function fitExponent(src: Float32Array, s: number, e: number, idx: Uint8Array): number {
  const inv = 2 ** (128 - e);
  let err = 0;
  for (let j = 0; j < QK; j++) {
    const t = f(src[s + j] * inv); // exact in double, then one rounding to f32
    const best = nearestTableIndex(MXFP4_TABLE, t);
    idx[j] = best;
    const diff = f(t - MXFP4_TABLE[best]);
    err = f(err + f(diff * diff));
  }
  return err;
}

/**
 * One MXFP4 block of src[s..s+32) at dst[o..o+17). Two exponents are worth trying for a block of
 * largest |x| amax: e_fit, the smallest with 12 d >= amax (nothing saturates), and e_fit - 1 (twice
 * the resolution, the elements past 12 d clipped to +-12). Each element takes the nearest table value
 * of x / d, and the block keeps the exponent of lower squared error in units of the smaller d (e_fit
 * on a tie). llama.cpp's quantize_row_mxfp4_ref always takes e = floor(log2 amax) + 125, one of the two.
 */
export function quantizeMxfp4Block(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  let amax = 0;
  for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[s + j]));
  let e = exponentFit(amax);
  let idx = new Uint8Array(QK);
  const err = fitExponent(src, s, e, idx);
  if (e > 0) {
    const finer = new Uint8Array(QK);
    // The finer scale's error in units of 2^(e - 1 - 128) is 4 times the same error in units of d.
    if (f(fitExponent(src, s, e - 1, finer) * 0.25) < err) {
      e -= 1;
      idx = finer;
    }
  }
  dst[o] = e;
  for (let j = 0; j < QK / 2; j++) dst[o + 1 + j] = idx[j] | (idx[j + QK / 2] << 4);
}
