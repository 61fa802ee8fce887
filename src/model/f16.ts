/**
 * IEEE binary16 and bfloat16 conversions (scalar), shared by the block formats in
 * quant.ts and quant-k.ts. Every f16 pattern is decoded once into a table, so a read is a lookup.
 */

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
export const F16_TABLE = (() => {
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
