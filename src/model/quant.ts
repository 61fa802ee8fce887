/**
 * Element formats of model tensors: f16 / bf16 conversion and row-wise quantise /
 * dequantise for F32, F16, BF16, Q8_0 and Q4_0, bit-compatible with ggml's
 * reference quantisers (quantize_row_q8_0_ref, quantize_row_q4_0_ref).
 *
 * A "row" is `cols` consecutive elements (dims[0] of a ggml tensor); block types
 * need cols % 32 === 0. Byte layouts (little-endian):
 *   F32   4 bytes / element            F16, BF16  2 bytes / element
 *   Q8_0  [d: f16][q: 32 x int8]        value = q * d
 *   Q4_0  [d: f16][16 bytes]            byte j = elem j (low nibble) | elem j+16 (high nibble)
 *                                       value = (nibble - 8) * d
 */
import { assert } from '../core/assert.js';
import { GGML_BLOCK, type GgmlTypeName } from './types.js';

const QK = 32; // elements per Q8_0 / Q4_0 block

// Scratch views that reinterpret one f32's bits.
const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** f32 -> IEEE binary16 bits, round to nearest even; overflow gives +-inf. */
export function f32ToF16(x: number): number {
  f32Scratch[0] = x;
  const bits = u32Scratch[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15; // rebiased exponent
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half: m * 2^-24 with m = full >> (14 - e); below half the smallest, 0.
    if (e < -10) return sign;
    const full = mant | 0x800000;
    const shift = 14 - e;
    let half = full >>> shift;
    const rem = full & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) !== 0)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (and reaches inf at the top).
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) !== 0)) half++;
  return sign | half;
}

/** Every f16 bit pattern decoded once: 256 KiB, makes F16 / Q8_0 / Q4_0 reads a lookup. */
const F16_TABLE = (() => {
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) table[h] = decodeF16(h);
  return table;
})();

function decodeF16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** IEEE binary16 bits -> number. */
export function f16ToF32(h: number): number {
  return F16_TABLE[h & 0xffff];
}

/** f32 -> bfloat16 bits (the top 16 bits of the f32), round to nearest even. */
export function f32ToBf16(x: number): number {
  f32Scratch[0] = x;
  const bits = u32Scratch[0];
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff; // keep NaN a NaN
  const lsb = (bits >>> 16) & 1;
  return ((bits + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** bfloat16 bits -> number. */
export function bf16ToF32(b: number): number {
  u32Scratch[0] = (b & 0xffff) << 16;
  return f32Scratch[0];
}

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
  assert(offset >= 0 && offset + size <= bytes.length, `${type} row at ${offset} (+${size}) is outside ${bytes.length} bytes`);
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
  let amax = 0;
  let max = 0;
  for (let j = 0; j < QK; j++) {
    const v = src[s + j];
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
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
