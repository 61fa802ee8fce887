import { describe, expect, it } from 'vitest';
import {
  bf16ToF32,
  dequantizeRow,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  quantizeRow,
  rowBytes,
} from '../../../src/model/quant.js';
import type { GgmlTypeName } from '../../../src/model/types.js';

describe('f16', () => {
  it('encodes hand-computed values with round-to-nearest-even', () => {
    expect(f32ToF16(1)).toBe(0x3c00);
    expect(f32ToF16(-2)).toBe(0xc000);
    expect(f32ToF16(0.1)).toBe(0x2e66);
    expect(f32ToF16(65504)).toBe(0x7bff);
    expect(f32ToF16(65520)).toBe(0x7c00); // halfway to 65536: rounds to even = inf
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00); // tie, down to even
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie, up to even
    expect(f32ToF16(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16(2 ** -25)).toBe(0x0000); // tie between 0 and min subnormal: even
    expect(f32ToF16(3 * 2 ** -25)).toBe(0x0002);
    expect(f32ToF16(-0)).toBe(0x8000);
    expect(f32ToF16(Infinity)).toBe(0x7c00);
    expect(f32ToF16(NaN) & 0x7c00).toBe(0x7c00);
  });
  it('decodes every finite pattern back to itself', () => {
    for (let h = 0; h < 65536; h++) {
      if ((h & 0x7c00) === 0x7c00) continue;
      expect(f32ToF16(f16ToF32(h))).toBe(h);
    }
  });
});

describe('bf16', () => {
  it('keeps the top 16 bits, rounding to nearest even', () => {
    expect(f32ToBf16(1)).toBe(0x3f80);
    expect(f32ToBf16(1 + 2 ** -8)).toBe(0x3f80); // tie: even
    expect(f32ToBf16(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie: even upward
    expect(f32ToBf16(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81); // above the tie
    expect(bf16ToF32(0xc040)).toBe(-3);
    expect(Number.isNaN(bf16ToF32(f32ToBf16(NaN)))).toBe(true);
  });
});

describe('Q8_0', () => {
  it('quantises a hand-computed block (amax 127 -> d = 1)', () => {
    const x = new Float32Array(32);
    x.set([127, -127, 0, 1, -1, 50.4, -50.6, 2.5, -2.5]);
    const bytes = new Uint8Array(rowBytes('Q8_0', 32));
    expect(quantizeRow('Q8_0', x, 0, 32, bytes, 0)).toBe(34);
    expect(bytes[0] | (bytes[1] << 8)).toBe(0x3c00);
    const q = Array.from(new Int8Array(bytes.buffer, 2, 9));
    expect(q).toEqual([127, -127, 0, 1, -1, 50, -51, 3, -3]); // roundf: half away from zero
    const out = new Float32Array(32);
    dequantizeRow('Q8_0', bytes, 0, 32, out);
    expect(Array.from(out.subarray(0, 9))).toEqual(q);
  });
});

describe('Q4_0', () => {
  it('quantises a hand-computed block (max -8 -> d = 1)', () => {
    const x = new Float32Array(32);
    x.set([-8, 7, 0, 3.4, -2.6, 7.9]);
    x[16] = 1;
    x[17] = -3;
    const bytes = new Uint8Array(18);
    quantizeRow('Q4_0', x, 0, 32, bytes, 0);
    expect(bytes[0] | (bytes[1] << 8)).toBe(0x3c00); // d = -8 / -8 = 1
    // q = min(15, trunc(x + 8.5)): [0, 15, 8, 11, 5, 15]; high nibbles from elements 16, 17: 9, 5.
    expect(Array.from(bytes.subarray(2, 8))).toEqual([
      0 | (9 << 4),
      15 | (5 << 4),
      8 | (8 << 4),
      11 | (8 << 4),
      5 | (8 << 4),
      15 | (8 << 4),
    ]);
    const out = new Float32Array(32);
    dequantizeRow('Q4_0', bytes, 0, 32, out);
    expect(Array.from(out.subarray(0, 6))).toEqual([-8, 7, 0, 3, -3, 7]);
    expect(out[16]).toBe(1);
    expect(out[17]).toBe(-3);
  });
  it('uses the signed extreme: a positive max gives a negative scale', () => {
    const x = new Float32Array(32).fill(-1);
    x[5] = 8;
    const bytes = new Uint8Array(18);
    quantizeRow('Q4_0', x, 0, 32, bytes, 0);
    expect(f16ToF32(bytes[0] | (bytes[1] << 8))).toBe(-1);
    const out = new Float32Array(32);
    dequantizeRow('Q4_0', bytes, 0, 32, out);
    expect(out[5]).toBe(8);
    expect(out[0]).toBe(-1);
  });
});

/** Small deterministic generator for the round-trip data (not the synth PRNG on purpose). */
function lcgRow(n: number, seed: number, scale: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return out;
}

describe('round trips', () => {
  const cols = 256;
  const cases: Array<[GgmlTypeName, (amax: number, x: number) => number]> = [
    ['F32', () => 0],
    ['F16', (_a, x) => Math.abs(x) * 2 ** -11 + 2 ** -25],
    ['BF16', (_a, x) => Math.abs(x) * 2 ** -8],
    ['Q8_0', (a) => (a / 127) * (0.5 + 127 * 2 ** -11) + 1e-7],
    ['Q4_0', (a) => (a / 8) * (1 + 2 ** -10) + 1e-7], // the clamped extreme can be off by one step
  ];
  for (const [type, bound] of cases) {
    it(`${type} stays within its error bound, at an unaligned offset too`, () => {
      const x = lcgRow(cols, 7, 3);
      const bytes = new Uint8Array(rowBytes(type, cols) + 3);
      quantizeRow(type, x, 0, cols, bytes, 3);
      const out = new Float32Array(cols);
      dequantizeRow(type, bytes, 3, cols, out);
      for (let b = 0; b < cols; b += 32) {
        let amax = 0;
        for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b + j]));
        for (let j = 0; j < 32; j++) {
          expect(Math.abs(out[b + j] - x[b + j])).toBeLessThanOrEqual(bound(amax, x[b + j]));
        }
      }
    });
  }
  it('Q4_0 error is within half a step except in the clamped band opposite the max', () => {
    const x = lcgRow(cols, 11, 1);
    const bytes = new Uint8Array(rowBytes('Q4_0', cols));
    quantizeRow('Q4_0', x, 0, cols, bytes, 0);
    const out = new Float32Array(cols);
    dequantizeRow('Q4_0', bytes, 0, cols, out);
    for (let b = 0; b < cols; b += 32) {
      let max = 0;
      for (let j = 0; j < 32; j++) if (Math.abs(x[b + j]) > Math.abs(max)) max = x[b + j];
      for (let j = 0; j < 32; j++) {
        // q = 16 would be needed for x / d > 7.5 with d = max / -8: those clamp to 15.
        const clamped = x[b + j] / (max / -8) > 7.5;
        const step = Math.abs(max) / 8;
        expect(Math.abs(out[b + j] - x[b + j])).toBeLessThanOrEqual(step * (clamped ? 1 : 0.5) * 1.01);
      }
    }
  });
  it('rowBytes matches the block layouts', () => {
    expect(rowBytes('F32', 64)).toBe(256);
    expect(rowBytes('F16', 64)).toBe(128);
    expect(rowBytes('BF16', 64)).toBe(128);
    expect(rowBytes('Q8_0', 64)).toBe(68);
    expect(rowBytes('Q4_0', 64)).toBe(36);
  });
});
