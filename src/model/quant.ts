/**
 * Element formats of model tensors: row-wise quantise / dequantise for F32, F16, BF16,
 * Q8_0, Q4_0, Q5_0, Q5_1 (bit-compatible with ggml's quantize_row_q*_ref and
 * dequantize_row_q*) and the k-quants Q2_K..Q6_K (quant-k.ts).
 *
 * A "row" is `cols` consecutive elements (dims[0] of a ggml tensor); block types
 * need cols % 32 === 0 (k-quants: % 256). Byte layouts (little-endian):
 *   F32   4 bytes / element            F16, BF16  2 bytes / element
 *   Q8_0  [d: f16][q: 32 x int8]        value = q * d
 *   Q4_0  [d: f16][16 bytes]            byte j = elem j (low nibble) | elem j+16 (high nibble)
 *                                       value = (nibble - 8) * d
 *   Q5_0  [d: f16][qh: u32][16 bytes]   low 4 bits as Q4_0, 5th bit of elem j in qh bit j
 *                                       value = (q - 16) * d
 *   Q5_1  [d: f16][m: f16][qh: u32][16 bytes]  as Q5_0, value = q * d + m
 * Q5_0 / Q5_1 are here because llama-quantize falls back to them (from Q4_K / Q5_K) for rows
 * that are not a multiple of 256 elements (quant-mix.ts). The k-quants are in quant-k.ts, IQ4_NL and
 * IQ4_XS in quant-iq4.ts, MXFP4 in quant-mxfp4.ts.
 */
import { assert } from '../core/assert.js';
import { F16_TABLE, bf16ToF32, f32ToBf16, f32ToF16 } from './f16.js';
import { dequantIq4NlRow, dequantIq4XsRow, quantizeIq4NlBlock, quantizeIq4XsBlock } from './quant-iq4.js';
import { dequantKRow, quantizeKRow } from './quant-k.js';
import { dequantMxfp4Row, quantizeMxfp4Block } from './quant-mxfp4.js';
import { signedAbsMax } from './quant-block.js';
import { GGML_BLOCK, type GgmlTypeName } from './types.js';

export { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from './f16.js';

const QK = 32; // elements per Q8_0 / Q4_0 block

/** Bytes of one row of `cols` elements of `type`. */
export function rowBytes(type: GgmlTypeName, cols: number): number {
  const block = GGML_BLOCK[type];
  assert(block !== undefined, `unknown tensor type ${type}`);
  assert(cols % block.elements === 0, `${type} row of ${cols} elements is not a whole number of blocks`);
  return (cols / block.elements) * block.bytes;
}

/** Reads `cols` elements of `type` at bytes[offset..] into out[outOffset..] as f32. */
export function dequantizeRow(
  type: GgmlTypeName,
  bytes: Uint8Array,
  offset: number,
  cols: number,
  out: Float32Array,
  outOffset = 0,
): void {
  const size = rowBytes(type, cols);
  assert(
    offset >= 0 && offset + size <= bytes.length,
    `${type} row at ${offset} (+${size}) is outside ${bytes.length} bytes`,
  );
  assert(outOffset + cols <= out.length, `output of ${out.length} cannot take ${cols} elements at ${outOffset}`);
  switch (type) {
    case 'F32':
      return readF32(bytes, offset, cols, out, outOffset);
    case 'F16':
      for (let i = 0, o = offset; i < cols; i++, o += 2) out[outOffset + i] = F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
      return;
    case 'BF16':
      for (let i = 0, o = offset; i < cols; i++, o += 2) out[outOffset + i] = bf16ToF32(bytes[o] | (bytes[o + 1] << 8));
      return;
    case 'Q8_0':
      return dequantQ8_0(bytes, offset, cols, out, outOffset);
    case 'Q4_0':
      return dequantQ4_0(bytes, offset, cols, out, outOffset);
    case 'Q5_0':
    case 'Q5_1':
      return dequantQ5(type, bytes, offset, cols, out, outOffset);
    case 'Q2_K':
    case 'Q3_K':
    case 'Q4_K':
    case 'Q5_K':
    case 'Q6_K':
      return dequantKRow(type, bytes, offset, cols, out, outOffset);
    case 'IQ4_NL':
      return dequantIq4NlRow(bytes, offset, cols, out, outOffset);
    case 'IQ4_XS':
      return dequantIq4XsRow(bytes, offset, cols, out, outOffset);
    case 'MXFP4':
      return dequantMxfp4Row(bytes, offset, cols, out, outOffset);
  }
}

function readF32(bytes: Uint8Array, offset: number, cols: number, out: Float32Array, outOffset: number): void {
  const start = bytes.byteOffset + offset;
  if (start % 4 === 0) {
    out.set(new Float32Array(bytes.buffer, start, cols), outOffset);
    return;
  }
  const view = new DataView(bytes.buffer, start, cols * 4);
  for (let i = 0; i < cols; i++) out[outOffset + i] = view.getFloat32(i * 4, true);
}

function dequantQ8_0(bytes: Uint8Array, offset: number, cols: number, out: Float32Array, outOffset: number): void {
  for (let b = 0, o = offset; b < cols / QK; b++, o += 34) {
    const d = F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
    const base = outOffset + b * QK;
    for (let j = 0; j < QK; j++) out[base + j] = ((bytes[o + 2 + j] << 24) >> 24) * d; // sign-extend int8
  }
}

function dequantQ4_0(bytes: Uint8Array, offset: number, cols: number, out: Float32Array, outOffset: number): void {
  for (let b = 0, o = offset; b < cols / QK; b++, o += 18) {
    const d = F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
    const base = outOffset + b * QK;
    for (let j = 0; j < QK / 2; j++) {
      const byte = bytes[o + 2 + j];
      out[base + j] = ((byte & 0x0f) - 8) * d;
      out[base + j + QK / 2] = ((byte >>> 4) - 8) * d;
    }
  }
}

/** Q5_0: q = low nibble | qh bit << 4, value (q - 16) d. Q5_1: value q d + m (ggml: x*d + m). */
function dequantQ5(
  type: 'Q5_0' | 'Q5_1',
  bytes: Uint8Array,
  offset: number,
  cols: number,
  out: Float32Array,
  outOffset: number,
): void {
  const size = type === 'Q5_0' ? 22 : 24;
  const head = type === 'Q5_0' ? 2 : 4; // qh follows d (and m)
  for (let b = 0, o = offset; b < cols / QK; b++, o += size) {
    const d = F16_TABLE[bytes[o] | (bytes[o + 1] << 8)];
    const m = type === 'Q5_1' ? F16_TABLE[bytes[o + 2] | (bytes[o + 3] << 8)] : 0;
    const qh =
      (bytes[o + head] | (bytes[o + head + 1] << 8) | (bytes[o + head + 2] << 16) | (bytes[o + head + 3] << 24)) >>> 0;
    const base = outOffset + b * QK;
    for (let j = 0; j < QK / 2; j++) {
      const byte = bytes[o + head + 4 + j];
      const q0 = (byte & 0x0f) | (((qh >>> j) & 1) << 4);
      const q1 = (byte >>> 4) | (((qh >>> (j + 16)) & 1) << 4);
      if (type === 'Q5_0') {
        out[base + j] = (q0 - 16) * d;
        out[base + j + QK / 2] = (q1 - 16) * d;
      } else {
        out[base + j] = Math.fround(q0 * d) + m;
        out[base + j + QK / 2] = Math.fround(q1 * d) + m;
      }
    }
  }
}

/**
 * Writes `cols` elements of src[srcOffset..] as `type` at dst[dstOffset..].
 * Returns the bytes written (rowBytes(type, cols)).
 */
export function quantizeRow(
  type: GgmlTypeName,
  src: Float32Array,
  srcOffset: number,
  cols: number,
  dst: Uint8Array,
  dstOffset: number,
): number {
  const size = rowBytes(type, cols);
  assert(srcOffset + cols <= src.length, `source of ${src.length} has no ${cols} elements at ${srcOffset}`);
  assert(dstOffset + size <= dst.length, `destination of ${dst.length} cannot take ${size} bytes at ${dstOffset}`);
  switch (type) {
    case 'F32': {
      const view = new DataView(dst.buffer, dst.byteOffset + dstOffset, size);
      for (let i = 0; i < cols; i++) view.setFloat32(i * 4, src[srcOffset + i], true);
      break;
    }
    case 'F16':
    case 'BF16': {
      const encode = type === 'F16' ? f32ToF16 : f32ToBf16;
      for (let i = 0, o = dstOffset; i < cols; i++, o += 2) writeU16(dst, o, encode(src[srcOffset + i]));
      break;
    }
    case 'Q8_0':
      for (let b = 0; b < cols / QK; b++) quantBlockQ8_0(src, srcOffset + b * QK, dst, dstOffset + b * 34);
      break;
    case 'Q4_0':
      for (let b = 0; b < cols / QK; b++) quantBlockQ4_0(src, srcOffset + b * QK, dst, dstOffset + b * 18);
      break;
    case 'Q5_0':
      for (let b = 0; b < cols / QK; b++) quantBlockQ5_0(src, srcOffset + b * QK, dst, dstOffset + b * 22);
      break;
    case 'Q5_1':
      for (let b = 0; b < cols / QK; b++) quantBlockQ5_1(src, srcOffset + b * QK, dst, dstOffset + b * 24);
      break;
    case 'Q2_K':
    case 'Q3_K':
    case 'Q4_K':
    case 'Q5_K':
    case 'Q6_K':
      quantizeKRow(type, src, srcOffset, cols, dst, dstOffset);
      break;
    case 'IQ4_NL':
      for (let b = 0; b < cols / QK; b++) quantizeIq4NlBlock(src, srcOffset + b * QK, dst, dstOffset + b * 18);
      break;
    case 'IQ4_XS':
      for (let b = 0; b < cols / 256; b++) quantizeIq4XsBlock(src, srcOffset + b * 256, dst, dstOffset + b * 136);
      break;
    case 'MXFP4':
      for (let b = 0; b < cols / QK; b++) quantizeMxfp4Block(src, srcOffset + b * QK, dst, dstOffset + b * 17);
      break;
  }
  return size;
}

function writeU16(dst: Uint8Array, o: number, v: number): void {
  dst[o] = v & 0xff;
  dst[o + 1] = v >>> 8;
}

/** ggml: d = amax / 127 (f32), q = roundf(x * (1/d)) (half away from zero), store f16(d). */
function quantBlockQ8_0(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  let amax = 0;
  for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[s + j]));
  const d = Math.fround(amax / 127);
  const id = d !== 0 ? Math.fround(1 / d) : 0;
  writeU16(dst, o, f32ToF16(d));
  for (let j = 0; j < QK; j++) {
    const x = Math.fround(src[s + j] * id);
    const q = x < 0 ? -Math.round(-x) : Math.round(x);
    dst[o + 2 + j] = q & 0xff;
  }
}

/** ggml: max = the signed element of largest |x| (first wins), d = max / -8, q = min(15, trunc(x / d + 8.5)). */
function quantBlockQ4_0(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const max = signedAbsMax(src, s, QK);
  const d = Math.fround(max / -8);
  const id = d !== 0 ? Math.fround(1 / d) : 0;
  writeU16(dst, o, f32ToF16(d));
  for (let j = 0; j < QK / 2; j++) {
    // x * id + 8.5 >= 0.5 always (|x * id| <= 8), so truncation is floor.
    const q0 = Math.min(15, Math.trunc(Math.fround(Math.fround(src[s + j] * id) + 8.5)));
    const q1 = Math.min(15, Math.trunc(Math.fround(Math.fround(src[s + j + QK / 2] * id) + 8.5)));
    dst[o + 2 + j] = q0 | (q1 << 4);
  }
}

/** Packs 32 five-bit levels as Q5_0 / Q5_1 do: 16 bytes of nibbles at qs, the 5th bits as a u32 at qh. */
function packQ5(levels: Uint8Array, dst: Uint8Array, qh: number, qs: number): void {
  let high = 0;
  for (let j = 0; j < QK / 2; j++) {
    dst[qs + j] = (levels[j] & 0x0f) | ((levels[j + QK / 2] & 0x0f) << 4);
    high |= ((levels[j] >> 4) & 1) << j;
    high |= ((levels[j + QK / 2] >> 4) & 1) << (j + QK / 2);
  }
  for (let k = 0; k < 4; k++) dst[qh + k] = (high >>> (8 * k)) & 0xff;
}

/** ggml quantize_row_q5_0_ref: d = max / -16 (max: signed element of largest |x|), q = min(31, trunc(x / d + 16.5)). */
function quantBlockQ5_0(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  const max = signedAbsMax(src, s, QK);
  const d = Math.fround(max / -16);
  const id = d !== 0 ? Math.fround(1 / d) : 0;
  writeU16(dst, o, f32ToF16(d));
  const levels = new Uint8Array(QK);
  // x * id + 16.5 >= 0.5 (|x * id| <= 16), so truncation is floor.
  for (let j = 0; j < QK; j++) levels[j] = Math.min(31, Math.trunc(Math.fround(Math.fround(src[s + j] * id) + 16.5)));
  packQ5(levels, dst, o + 2, o + 6);
}

/** ggml quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5). */
function quantBlockQ5_1(src: Float32Array, s: number, dst: Uint8Array, o: number): void {
  let min = Infinity,
    max = -Infinity;
  for (let j = 0; j < QK; j++) {
    const v = src[s + j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const d = Math.fround(Math.fround(max - min) / 31);
  const id = d !== 0 ? Math.fround(1 / d) : 0;
  writeU16(dst, o, f32ToF16(d));
  writeU16(dst, o + 2, f32ToF16(min));
  const levels = new Uint8Array(QK);
  for (let j = 0; j < QK; j++)
    levels[j] = Math.trunc(Math.fround(Math.fround(Math.fround(src[s + j] - min) * id) + 0.5)) & 0xff;
  packQ5(levels, dst, o + 4, o + 8);
}
