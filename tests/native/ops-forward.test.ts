/**
 * The native forward pass's elementwise ops, each against a plain TypeScript version written
 * here in f64. Tolerance: 1e-5 relative to the largest magnitude of the expected output
 * (f32 arithmetic, a few roundings per element).
 */
import { describe, expect, it } from 'vitest';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { gaussian } from '../fixtures/random-model.js';
import { swigluOai } from '../../src/reference/math.js';

const ops = loadDiagnostics().forwardOps;
const tolerance = 1e-5;

function randomArray(n: number, seed: number, scale = 1): Float32Array {
  const g = gaussian(seed);
  return Float32Array.from({ length: n }, () => g() * scale);
}

function expectClose(actual: Float32Array, expected: ArrayLike<number>): void {
  expect(actual.length).toBe(expected.length);
  let scale = 0;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]));
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i] - expected[i]));
  expect(worst).toBeLessThanOrEqual(tolerance * Math.max(scale, 1e-30));
}

function softmax64(x: ArrayLike<number>): number[] {
  const max = Math.max(...Array.from(x));
  const e = Array.from(x, (v) => Math.exp(v - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

describe('native forward ops', () => {
  it('rmsNorm: x / sqrt(mean(x^2) + eps) * w, also in place', () => {
    for (const n of [1, 7, 64, 777]) {
      const x = randomArray(n, n, 3);
      const w = randomArray(n, n + 1);
      const eps = 1e-5;
      const r = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) / n + eps);
      const expected = Array.from(x, (v, i) => v * r * w[i]);
      const out = new Float32Array(n);
      ops.rmsNorm(x, w, eps, out);
      expectClose(out, expected);
      ops.rmsNorm(x, w, eps, x);
      expectClose(x, expected);
    }
  });

  for (const neox of [false, true]) {
    it(`rope (${neox ? 'neox' : 'norm'}) rotates the right pairs by pos * base^(-2i/hd)`, () => {
      const heads = 3;
      const hd = 16;
      for (const pos of [0, 1, 17, 4000]) {
        const v = randomArray(heads * hd, pos + 5);
        const expected = Array.from(v);
        for (let h = 0; h < heads; h++) {
          for (let i = 0; i < hd / 2; i++) {
            const theta = pos * Math.pow(10000, (-2 * i) / hd);
            const a = h * hd + (neox ? i : 2 * i);
            const b = h * hd + (neox ? i + hd / 2 : 2 * i + 1);
            const [x, y] = [v[a], v[b]];
            expected[a] = x * Math.cos(theta) - y * Math.sin(theta);
            expected[b] = x * Math.sin(theta) + y * Math.cos(theta);
          }
        }
        ops.rope(v, heads, hd, pos, 10000, neox);
        expectClose(v, expected);
      }
    });
  }

  it('softmax matches exp(x - max) / sum and survives large logits', () => {
    for (const [n, scale] of [
      [1, 1],
      [5, 1],
      [128, 30],
      [300, 1000],
    ] as const) {
      const x = randomArray(n, n * 3, scale);
      const expected = softmax64(x);
      ops.softmax(x);
      expectClose(x, expected);
      expect(x.every(Number.isFinite)).toBe(true);
    }
  });

  it('swiglu: g = silu(g) * u', () => {
    const g = randomArray(100, 11, 4);
    const u = randomArray(100, 12);
    const expected = Array.from(g, (z, i) => (z / (1 + Math.exp(-z))) * u[i]);
    ops.swiglu(g, u);
    expectClose(g, expected);
  });

  it('swigluOai: gpt-oss clamps g above at 7 and u to [-7, 7], alpha 1.702, up + 1', () => {
    const g = randomArray(100, 13, 12); // beyond the limit on both sides
    const u = randomArray(100, 14, 12);
    const expected = Array.from(g, (z, i) => swigluOai(z, u[i]));
    const clamped = Array.from(g, (z, i) => z > 7 || Math.abs(u[i]) > 7).filter(Boolean).length;
    expect(clamped).toBeGreaterThan(10); // the clamp is exercised
    ops.swigluOai(g, u);
    expectClose(g, expected);
    // By hand: g = 9 -> 7 * sigmoid(11.914) * (u + 1); u = -9 -> -7 + 1.
    const one = Float32Array.of(9, 1);
    ops.swigluOai(one, Float32Array.of(-9, 0.5));
    expect(one[0]).toBeCloseTo((7 / (1 + Math.exp(-1.702 * 7))) * -6, 4);
    expect(one[1]).toBeCloseTo((1 / (1 + Math.exp(-1.702))) * 1.5, 5);
  });

  it('topK: the k largest in descending order, ties to the lower index', () => {
    const p = randomArray(128, 21);
    for (const k of [1, 2, 8, 128]) {
      const expected = Array.from(p.keys())
        .sort((a, b) => p[b] - p[a] || a - b)
        .slice(0, k);
      expect(Array.from(ops.topK(p, k))).toEqual(expected);
    }
    const ties = Float32Array.from([0.1, 0.5, 0.2, 0.5, 0.5, 0.05]);
    expect(Array.from(ops.topK(ties, 3))).toEqual([1, 3, 4]);
    expect(Array.from(ops.topK(ties, 4))).toEqual([1, 3, 4, 2]);
    expect(Array.from(ops.topK(new Float32Array(6), 2))).toEqual([0, 1]);
  });

  it('attention with grouped KV heads: softmax(q . k / sqrt(hd)) weights the values', () => {
    for (const [nHead, nHeadKv, nKv] of [
      [4, 2, 1],
      [12, 4, 37],
      [3, 3, 5],
    ]) {
      const hd = 16;
      const kvDim = nHeadKv * hd;
      const q = randomArray(nHead * hd, nKv);
      const keys = randomArray(nKv * kvDim, nKv + 1);
      const values = randomArray(nKv * kvDim, nKv + 2);
      const expected = new Array<number>(nHead * hd).fill(0);
      for (let h = 0; h < nHead; h++) {
        const kvOff = Math.floor(h / (nHead / nHeadKv)) * hd;
        const scores = Array.from({ length: nKv }, (_, j) => {
          let s = 0;
          for (let d = 0; d < hd; d++) s += q[h * hd + d] * keys[j * kvDim + kvOff + d];
          return s / Math.sqrt(hd);
        });
        const a = softmax64(scores);
        for (let j = 0; j < nKv; j++)
          for (let d = 0; d < hd; d++) expected[h * hd + d] += a[j] * values[j * kvDim + kvOff + d];
      }
      const out = new Float32Array(nHead * hd);
      ops.attention(q, keys, values, nHead, nHeadKv, hd, nKv, out);
      expectClose(out, expected);
    }
  });

  it('refuses arrays too short for the shapes it is given', () => {
    expect(() =>
      ops.attention(new Float32Array(8), new Float32Array(8), new Float32Array(8), 4, 2, 16, 1, new Float32Array(64)),
    ).toThrow(TypeError);
    expect(() => ops.topK(new Float32Array(3), 4)).toThrow(/topK/);
    expect(() => ops.rmsNorm(new Float32Array(8), new Float32Array(4), 1e-6, new Float32Array(8))).toThrow(/rmsNorm/);
  });
});
