/**
 * k-quants (and the Q5_0 / Q5_1 fallbacks): block layouts against hand-built blocks whose
 * values are worked out by hand, dequantisation against a literal transcription of ggml's
 * dequantize_row_q*_K loops (pointer walks, f32 ops in ggml's order) on random bytes, and the
 * quantisers' round-trip error on a Gaussian row.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dequantizeRow, quantizeRow, rowBytes } from '../../../src/model/quant.js';
import { GGML_BLOCK, GGML_TYPE, type GgmlTypeName } from '../../../src/model/types.js';

const f = Math.fround;
const ONE = 0x3c00,
  HALF = 0x3800; // f16 bits of 1 and 0.5

function setF16(b: Uint8Array, at: number, h: number): void {
  b[at] = h & 0xff;
  b[at + 1] = h >> 8;
}

function decode(type: GgmlTypeName, block: Uint8Array): Float32Array {
  const out = new Float32Array(GGML_BLOCK[type].elements);
  dequantizeRow(type, block, 0, out.length, out);
  return out;
}

describe('type tables', () => {
  it('have ggml ids, block sizes and bytes (ggml-common.h)', () => {
    const expected: Array<[GgmlTypeName, number, number, number]> = [
      ['Q5_0', 6, 32, 22],
      ['Q5_1', 7, 32, 24],
      ['Q2_K', 10, 256, 84],
      ['Q3_K', 11, 256, 110],
      ['Q4_K', 12, 256, 144],
      ['Q5_K', 13, 256, 176],
      ['Q6_K', 14, 256, 210],
    ];
    for (const [type, id, elements, bytes] of expected) {
      expect(GGML_TYPE[type]).toBe(id);
      expect(GGML_BLOCK[type]).toEqual({ elements, bytes });
      expect(rowBytes(type, 512)).toBe((512 / elements) * bytes);
    }
    expect(() => rowBytes('Q4_K', 64)).toThrow(/not a whole number of blocks/);
  });
});

describe('hand-built blocks', () => {
  it('Q4_K: 6-bit packed scales and mins, y = d sc q - dmin m', () => {
    const b = new Uint8Array(144);
    setF16(b, 0, ONE);
    setF16(b, 2, HALF);
    // scales (j: sc, m) = 0: 1,0  1: 2,1  2: 3,2  3: 4,3  4: 17,20  5: 33,40  6: 63,63  7: 5,7, packed by hand
    b.set([0x41, 0x82, 0xc3, 0x04, 0x40, 0x81, 0xc2, 0x03, 0x41, 0x81, 0xff, 0x75], 4);
    b.fill(0x21, 16); // every low nibble 1, every high nibble 2
    const y = decode('Q4_K', b);
    // even sub-blocks read low nibbles (q = 1), odd ones high nibbles (q = 2)
    const perSubBlock = [
      1 * 1 - 0,
      2 * 2 - 0.5,
      3 * 1 - 1,
      4 * 2 - 1.5,
      17 * 1 - 10,
      33 * 2 - 20,
      63 * 1 - 31.5,
      5 * 2 - 3.5,
    ];
    for (let e = 0; e < 256; e++) expect(y[e], `element ${e}`).toBe(perSubBlock[e >> 5]);
  });

  it('Q5_K: the 5th bit of element 32 j + l is bit j of qh[l]', () => {
    const b = new Uint8Array(176);
    setF16(b, 0, ONE); // dmin 0
    b.set([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], 4); // every scale 1, every min 0
    b[16] = 0b101; // qh[0]: elements 0 and 64 get +16
    b[48] = 0x21; // qs[0]: element 0 low nibble 1, element 32 high nibble 2
    const y = decode('Q5_K', b);
    expect([y[0], y[32], y[64], y[96], y[1]]).toEqual([17, 2, 16, 0, 0]);
  });

  it('Q6_K: 4 low bits in ql, 2 high bits in qh, int8 scales, y = d sc (q - 32)', () => {
    const b = new Uint8Array(210);
    setF16(b, 208, HALF);
    b.fill(1, 192, 208);
    b[192 + 0] = 2;
    b[192 + 2] = 0xff;
    b[192 + 4] = 3; // scales of elements 0.., 32.., 64.. : 2, -1, 3
    b[0] = 0x5a; // ql[0]: element 0 low 10, element 64 low 5
    b[128] = 0b11100100; // qh[0]: elements 0, 32, 64, 96 get high bits 0, 1, 2, 3
    const y = decode('Q6_K', b);
    expect([y[0], y[32], y[64], y[96], y[1]]).toEqual([
      0.5 * 2 * -22,
      0.5 * -1 * -16,
      0.5 * 3 * 5,
      0.5 * 1 * 16,
      0.5 * 2 * -32,
    ]);
    expect(y[128]).toBe(0.5 * 1 * -32);
  });

  it('Q3_K: 2 low bits in qs, the high bit set means no -4, 6-bit scales biased by 32', () => {
    const b = new Uint8Array(110);
    setF16(b, 108, ONE);
    // scale 6-bit values: all 33 (-> +1) except s = 1: 30 (-> -2); low nibbles in 96..103, high 2 bits in 104..107
    b.fill(0x11, 96, 104);
    b[97] = 0x1e;
    b.set([0xaa, 0xa9, 0xaa, 0xaa], 104);
    b.fill(0xff, 0, 32); // hmask: every high bit set
    b[0] = 0xfe; // ... except element 0's
    b[32] = 0b11100111; // qs[0]: elements 0, 32, 64, 96 have low bits 3, 1, 2, 3
    b[32 + 16] = 1; // element 16 (scale 1) has low bits 1
    const y = decode('Q3_K', b);
    expect([y[0], y[32], y[64], y[96], y[16]]).toEqual([-1, 1, 2, 3, -2]);
  });

  it('Q2_K: scale in the low nibble, min in the high nibble, y = d sc q - dmin m', () => {
    const b = new Uint8Array(84);
    b.fill(0x12, 0, 16); // sc 2, m 1
    b[1] = 0x31; // elements 16..31: sc 1, m 3
    b[16] = 0b11100100; // qs[0]: elements 0, 32, 64, 96 have q 0, 1, 2, 3
    b[16 + 16] = 3; // element 16: q 3
    setF16(b, 80, ONE);
    setF16(b, 82, ONE);
    const y = decode('Q2_K', b);
    expect([y[0], y[32], y[64], y[96], y[16], y[17]]).toEqual([-1, 1, 3, 5, 0, -3]);
  });

  it('Q5_0 and Q5_1: nibbles as Q4_0, the 5th bits of elements j and j + 16 in qh bits j and j + 16', () => {
    const q50 = new Uint8Array(22);
    setF16(q50, 0, HALF);
    q50[2] = 0b1;
    q50[4] = 0b1; // qh bit 0 (element 0) and bit 16 (element 16)
    q50[6] = 0x3f; // element 0 low 15, element 16 high 3
    const y0 = decode('Q5_0', q50);
    expect([y0[0], y0[16], y0[1], y0[17]]).toEqual([(31 - 16) * 0.5, (19 - 16) * 0.5, -8, -8]);
    const q51 = new Uint8Array(24);
    setF16(q51, 0, HALF);
    setF16(q51, 2, 0xbc00); // m = -1
    q51[4 + 3] = 0x80; // qh bit 31: element 31
    q51[8 + 15] = 0x20; // element 15 low 0, element 31 high 2
    const y1 = decode('Q5_1', q51);
    expect([y1[15], y1[31], y1[0]]).toEqual([-1, 18 * 0.5 - 1, -1]);
  });
});

/** ggml's dequantize_row_q*_K loops, transcribed literally (pointer walks and all). */
const GGML_LOOPS: Record<
  'Q2_K' | 'Q3_K' | 'Q4_K' | 'Q5_K' | 'Q6_K',
  (b: Uint8Array, h: (at: number) => number) => number[]
> = {
  Q2_K(b, h) {
    const y: number[] = [];
    const d = h(80),
      min = h(82);
    let q = 16,
      is = 0;
    for (let n = 0; n < 256; n += 128) {
      let shift = 0;
      for (let j = 0; j < 4; ++j) {
        let sc = b[is++];
        let dl = f(d * (sc & 0xf)),
          ml = f(min * (sc >> 4));
        for (let l = 0; l < 16; ++l) y.push(f(f(dl * ((b[q + l] >> shift) & 3)) - ml));
        sc = b[is++];
        dl = f(d * (sc & 0xf));
        ml = f(min * (sc >> 4));
        for (let l = 0; l < 16; ++l) y.push(f(f(dl * ((b[q + l + 16] >> shift) & 3)) - ml));
        shift += 2;
      }
      q += 32;
    }
    return y;
  },
  Q3_K(b, h) {
    const y: number[] = [];
    const dAll = h(108);
    const aux = new Uint32Array(4);
    const view = new DataView(b.buffer, b.byteOffset + 96, 12);
    for (let k = 0; k < 3; k++) aux[k] = view.getUint32(4 * k, true);
    const kmask1 = 0x03030303,
      kmask2 = 0x0f0f0f0f;
    const tmp = aux[2];
    aux[2] = ((aux[0] >>> 4) & kmask2) | (((tmp >>> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >>> 4) & kmask2) | (((tmp >>> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >>> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >>> 2) & kmask1) << 4);
    const scales = new Int8Array(aux.buffer);
    let q = 32,
      is = 0,
      m = 1;
    for (let n = 0; n < 256; n += 128) {
      let shift = 0;
      for (let j = 0; j < 4; ++j) {
        let dl = f(dAll * (scales[is++] - 32));
        for (let l = 0; l < 16; ++l) y.push(f(dl * (((b[q + l] >> shift) & 3) - (b[l] & m ? 0 : 4))));
        dl = f(dAll * (scales[is++] - 32));
        for (let l = 0; l < 16; ++l) y.push(f(dl * (((b[q + l + 16] >> shift) & 3) - (b[l + 16] & m ? 0 : 4))));
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
    return y;
  },
  Q4_K(b, h) {
    const y: number[] = [];
    const d = h(0),
      min = h(2);
    const scaleMin = (j: number): [number, number] =>
      j < 4
        ? [b[4 + j] & 63, b[4 + j + 4] & 63]
        : [(b[4 + j + 4] & 0xf) | ((b[4 + j - 4] >> 6) << 4), (b[4 + j + 4] >> 4) | ((b[4 + j] >> 6) << 4)];
    let q = 16,
      is = 0;
    for (let j = 0; j < 256; j += 64) {
      const [sc1, m1] = scaleMin(is),
        [sc2, m2] = scaleMin(is + 1);
      const d1 = f(d * sc1),
        mm1 = f(min * m1),
        d2 = f(d * sc2),
        mm2 = f(min * m2);
      for (let l = 0; l < 32; ++l) y.push(f(f(d1 * (b[q + l] & 0xf)) - mm1));
      for (let l = 0; l < 32; ++l) y.push(f(f(d2 * (b[q + l] >> 4)) - mm2));
      q += 32;
      is += 2;
    }
    return y;
  },
  Q5_K(b, h) {
    const y: number[] = [];
    const d = h(0),
      min = h(2);
    const scaleMin = (j: number): [number, number] =>
      j < 4
        ? [b[4 + j] & 63, b[4 + j + 4] & 63]
        : [(b[4 + j + 4] & 0xf) | ((b[4 + j - 4] >> 6) << 4), (b[4 + j + 4] >> 4) | ((b[4 + j] >> 6) << 4)];
    let ql = 48,
      is = 0,
      u1 = 1,
      u2 = 2;
    for (let j = 0; j < 256; j += 64) {
      const [sc1, m1] = scaleMin(is),
        [sc2, m2] = scaleMin(is + 1);
      const d1 = f(d * sc1),
        mm1 = f(min * m1),
        d2 = f(d * sc2),
        mm2 = f(min * m2);
      for (let l = 0; l < 32; ++l) y.push(f(f(d1 * ((b[ql + l] & 0xf) + (b[16 + l] & u1 ? 16 : 0))) - mm1));
      for (let l = 0; l < 32; ++l) y.push(f(f(d2 * ((b[ql + l] >> 4) + (b[16 + l] & u2 ? 16 : 0))) - mm2));
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
    return y;
  },
  Q6_K(b, h) {
    const y = new Array<number>(256);
    const d = h(208);
    const sc8 = new Int8Array(b.buffer, b.byteOffset + 192, 16);
    let ql = 0,
      qh = 128,
      sc = 0,
      out = 0;
    for (let n = 0; n < 256; n += 128) {
      for (let l = 0; l < 32; ++l) {
        const is = l >> 4;
        const q1 = ((b[ql + l] & 0xf) | (((b[qh + l] >> 0) & 3) << 4)) - 32;
        const q2 = ((b[ql + l + 32] & 0xf) | (((b[qh + l] >> 2) & 3) << 4)) - 32;
        const q3 = ((b[ql + l] >> 4) | (((b[qh + l] >> 4) & 3) << 4)) - 32;
        const q4 = ((b[ql + l + 32] >> 4) | (((b[qh + l] >> 6) & 3) << 4)) - 32;
        y[out + l] = f(f(d * sc8[sc + is]) * q1);
        y[out + l + 32] = f(f(d * sc8[sc + is + 2]) * q2);
        y[out + l + 64] = f(f(d * sc8[sc + is + 4]) * q3);
        y[out + l + 96] = f(f(d * sc8[sc + is + 6]) * q4);
      }
      out += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
    return y;
  },
};

const F16_OFFSETS = { Q2_K: [80, 82], Q3_K: [108], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208] } as const;

describe("dequantisation matches ggml's loops bit for bit", () => {
  for (const type of ['Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K'] as const) {
    it(`${type} on random blocks`, () => {
      let seed = GGML_TYPE[type];
      const next = (): number => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
      const size = GGML_BLOCK[type].bytes;
      for (let trial = 0; trial < 50; trial++) {
        const b = new Uint8Array(size);
        for (let i = 0; i < size; i++) b[i] = next() >>> 24;
        // finite scales: a random sign and exponent below 31 (an f16 of magnitude < 65536)
        for (const at of F16_OFFSETS[type]) setF16(b, at, (next() >>> 16) & 0xbfff);
        const h = (at: number): number => {
          const bits = b[at] | (b[at + 1] << 8);
          const e = (bits >> 10) & 0x1f,
            m = bits & 0x3ff,
            s = bits & 0x8000 ? -1 : 1;
          return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15);
        };
        const expected = GGML_LOOPS[type](b, h);
        const got = Array.from(decode(type, b));
        expect(got).toEqual(expected);
      }
    });
  }
});

function gaussianRow(cols: number, seed: number, sigma: number): Float32Array {
  let s = seed;
  const rnd = (): number => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) + 1) / 2 ** 32;
  const x = new Float32Array(cols);
  for (let i = 0; i < cols; i++) x[i] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd()) * sigma;
  return x;
}

/**
 * Round trip on a Gaussian row of 4096 elements (sigma 0.05): relative RMSE = |y - x| / |x| and the
 * largest |y - x| over the row's rms. Measured (this implementation): Q2_K 0.298 / 1.07,
 * Q3_K 0.152 / 0.58, Q4_K 0.0725 / 0.21, Q5_K 0.0367 / 0.11, Q6_K 0.018 / 0.07, Q5_0 0.043 / 0.14,
 * Q5_1 0.039 / 0.11 (Q4_0 0.087, Q8_0 0.005 for scale). The bounds leave ~10 % headroom.
 */
describe('quantiser round trip', () => {
  const bounds: Array<[GgmlTypeName, number, number]> = [
    ['Q2_K', 0.33, 1.2],
    ['Q3_K', 0.17, 0.65],
    ['Q4_K', 0.08, 0.24],
    ['Q5_K', 0.041, 0.12],
    ['Q6_K', 0.02, 0.08],
    ['Q5_0', 0.047, 0.16],
    ['Q5_1', 0.043, 0.12],
  ];
  for (const [type, relRmse, maxOverRms] of bounds) {
    it(`${type}: relative RMSE <= ${relRmse}, max error <= ${maxOverRms} rms, at an unaligned offset`, () => {
      const cols = 4096;
      const x = gaussianRow(cols, 12345, 0.05);
      const bytes = new Uint8Array(rowBytes(type, cols) + 5);
      expect(quantizeRow(type, x, 0, cols, bytes, 5)).toBe(rowBytes(type, cols));
      const y = new Float32Array(cols);
      dequantizeRow(type, bytes, 5, cols, y);
      let se = 0,
        sx = 0,
        max = 0;
      for (let i = 0; i < cols; i++) {
        se += (y[i] - x[i]) ** 2;
        sx += x[i] ** 2;
        max = Math.max(max, Math.abs(y[i] - x[i]));
      }
      expect(Math.sqrt(se / sx)).toBeLessThanOrEqual(relRmse);
      expect(max / Math.sqrt(sx / cols)).toBeLessThanOrEqual(maxOverRms);
    });
  }

  it('all-zero rows quantise to zeros and back, and a constant row is close', () => {
    for (const type of ['Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'Q5_0', 'Q5_1'] as const) {
      const zeros = new Float32Array(256);
      const bytes = new Uint8Array(rowBytes(type, 256));
      quantizeRow(type, zeros, 0, 256, bytes, 0);
      const y = new Float32Array(256);
      dequantizeRow(type, bytes, 0, 256, y);
      expect(
        y.every((v) => v === 0),
        type,
      ).toBe(true);
      const ones = new Float32Array(256).fill(0.25);
      quantizeRow(type, ones, 0, 256, bytes, 0);
      dequantizeRow(type, bytes, 0, 256, y);
      for (const v of y) expect(Math.abs(v - 0.25), type).toBeLessThan(0.25 * 0.02);
    }
  });
});

/**
 * The bytes of the 4096-element Gaussian row above, quantised by ggml's quantize_row_q*_K_ref
 * (ggml-quants.c at ggml-org/llama.cpp 01243c58, compiled with gcc 12 -O2 -ffp-contract=off, on
 * x86-64): their sha256 (first 32 hex digits). Ours must be the same bytes.
 */
describe("quantisers are bit-identical to ggml's reference", () => {
  const ggml: Array<[GgmlTypeName, string]> = [
    ['Q2_K', '36625d0b44ecf2703435162259540ebe'],
    ['Q3_K', '56011875ed6dc4c76d2edb6b8c3aedeb'],
    ['Q4_K', '2d0f4ceff235ea53c99efb43ffbf8558'],
    ['Q5_K', 'a1941b5b8871c1058c9b9c9bccf1ee77'],
    ['Q6_K', '71ff8490b23aa16340356e1b2320cb5e'],
  ];
  for (const [type, digest] of ggml) {
    it(type, () => {
      const x = gaussianRow(4096, 12345, 0.05);
      const bytes = new Uint8Array(rowBytes(type, 4096));
      quantizeRow(type, x, 0, 4096, bytes, 0);
      expect(createHash('sha256').update(bytes).digest('hex').slice(0, 32)).toBe(digest);
    });
  }
});
