/**
 * IQ4_NL and IQ4_XS: 4-bit indices into ggml's non-linear table kvalues_iq4nl (ggml-common.h
 * block_iq4_nl / block_iq4_xs; ggml-quants.c dequantize_row_iq4_nl / _iq4_xs). Byte layouts:
 *   IQ4_NL  18 B / 32:  [d: f16][qs: 16 bytes]   byte j = index of elem j (low nibble) | elem j+16 (high)
 *                                                value = d * TABLE[index]
 *   IQ4_XS 136 B / 256: [d: f16][scales_h: u16][scales_l: 4 bytes][qs: 128 bytes], 8 sub-blocks of 32:
 *                       ls(j) = (nibble j % 2 of scales_l[j / 2]) | ((scales_h >> 2j) & 3) << 4
 *                       dl = d * (ls - 32); qs[16 j .. 16 j + 15] hold sub-block j as IQ4_NL's qs
 *                       value = dl * TABLE[index]
 * llama-quantize writes IQ4_NL for rows that are not a multiple of 256 where the target type has
 * 256-element blocks (older llama.cpp for Q2_K / Q3_K too: quant-mix.ts). The writers here are
 * moetier's own encoders, not ggml's scale searches: see fitBlock and quantizeIq4XsBlock.
 */
import { F16_TABLE, f32ToF16 } from './f16.js';
import { nearestTableIndex, signedAbsMax } from './quant-block.js';

/** ggml's kvalues_iq4nl. */
export const IQ4_TABLE: readonly number[] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

const QK = 32;
const f = Math.fround;

export function dequantIq4NlRow(
  bytes: Uint8Array,
  offset: number,
  cols: number,
  out: Float32Array,
  outOffset: number,
): void {
  for (let b = 0, o = offset; b < cols / QK; b++, o += 18) {
    const d = F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
    const base = outOffset + b * QK;
    for (let j = 0; j < QK / 2; j++) {
      const byte = bytes[o + 2 + j];
      out[base + j] = d * IQ4_TABLE[byte & 0x0f];
      out[base + j + QK / 2] = d * IQ4_TABLE[byte >>> 4];
    }
  }
}

export function dequantIq4XsRow(
  bytes: Uint8Array,
  offset: number,
  cols: number,
  out: Float32Array,
  outOffset: number,
): void {
  for (let b = 0, o = offset; b < cols / 256; b++, o += 136) {
    const d = F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
    const scalesH = bytes[o + 2] | (bytes[o + 3] << 8);
    for (let j = 0; j < 8; j++) {
      const ls = ((bytes[o + 4 + (j >> 1)] >>> (4 * (j & 1))) & 0x0f) | (((scalesH >>> (2 * j)) & 3) << 4);
      const dl = f(d * (ls - 32));
      const base = outOffset + b * 256 + 32 * j;
      for (let k = 0; k < 16; k++) {
        const byte = bytes[o + 8 + 16 * j + k];
        out[base + k] = dl * IQ4_TABLE[byte & 0x0f];
        out[base + k + 16] = dl * IQ4_TABLE[byte >>> 4];
      }
    }
  }
}

/**
 * The fit of one 32-element block to the table: d0 = max / -127 (max: the signed element of
 * largest |x|, the first of equals) puts it on the table's -127; each x takes the nearest table
 * value v of x / d0 (idx[at + j]); the scale returned is sum(v x) / sum(v v), the least-squares one
 * for those indices (ggml's search ends on the same fit after trying 15 starting scales; this tries
 * one). Every step one f32 rounding, as native/cpu/quantize.cc fit_iq4.
 */
function fitBlock(src: Float32Array, s: number, idx: Uint8Array, at: number): number {
  const max = signedAbsMax(src, s, QK);
  const d0 = f(max / -127);
  const id = d0 !== 0 ? f(1 / d0) : 0;
  let sumqx = 0,
    sumq2 = 0;
  for (let j = 0; j < QK; j++) {
    idx[at + j] = nearestTableIndex(IQ4_TABLE, f(src[s + j] * id));
    const v = IQ4_TABLE[idx[at + j]];
    sumqx = f(sumqx + f(v * src[s + j]));
    sumq2 = f(sumq2 + v * v);
  }
  return f(sumqx / sumq2);
}

/** One IQ4_NL block of src[s..s+32) at dst[o..o+18): fitBlock's indices and scale (as f16). */
export function quantizeIq4NlBlock(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const idx = new Uint8Array(QK);
  const h = f32ToF16(fitBlock(src, s, idx, 0));
  dst[o] = h & 0xff;
  dst[o + 1] = h >>> 8;
  for (let j = 0; j < QK / 2; j++) dst[o + 2 + j] = idx[j] | (idx[j + QK / 2] << 4);
}

/** Round half away from zero (C's roundf). */
function roundAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/**
 * One IQ4_XS super-block of src[s..s+256) at dst[o..o+136), as ggml's quantize_row_iq4_xs shapes it
 * without an importance matrix: each sub-block of 32 fitted alone (fitBlock), d = the sub-block scale
 * of largest |scale| / -32 (stored f16), each sub-block's ls - 32 = round(scale / d) clamped to
 * -32..31, then its indices chosen again for its scale d (ls - 32) as the reader will see it.
 */
export function quantizeIq4XsBlock(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const scratch = new Uint8Array(256);
  const scales = new Float32Array(8);
  for (let j = 0; j < 8; j++) scales[j] = fitBlock(src, s + 32 * j, scratch, 32 * j);
  const max = signedAbsMax(scales, 0, 8);
  const h = f32ToF16(max !== 0 ? f(max / -32) : 0); // +0 for a zero block, not -0
  const d = F16_TABLE[h];
  const id = d !== 0 ? f(1 / d) : 0;
  dst[o] = h & 0xff;
  dst[o + 1] = h >>> 8;
  dst.fill(0, o + 4, o + 8);
  let scalesH = 0;
  for (let j = 0; j < 8; j++) {
    const l = Math.max(-32, Math.min(31, roundAway(f(scales[j] * id))));
    const ls = l + 32;
    dst[o + 4 + (j >> 1)] |= (ls & 15) << (4 * (j & 1));
    scalesH |= (ls >> 4) << (2 * j);
    const dl = f(d * l);
    const inv = dl !== 0 ? f(1 / dl) : 0;
    for (let k = 0; k < 16; k++) {
      const lo = nearestTableIndex(IQ4_TABLE, f(src[s + 32 * j + k] * inv));
      const hi = nearestTableIndex(IQ4_TABLE, f(src[s + 32 * j + k + 16] * inv));
      dst[o + 8 + 16 * j + k] = lo | (hi << 4);
    }
  }
  dst[o + 2] = scalesH & 0xff;
  dst[o + 3] = scalesH >>> 8;
}
