import { describe, expect, it } from 'vitest';
import { rmsNorm, rope, softmax, topK } from '../../../src/reference/math.js';

describe('reference math', () => {
  it('rmsNorm gives unit root-mean-square times the weight', () => {
    const x = Float32Array.from([3, -4, 0, 5]);
    const out = rmsNorm(x, Float32Array.from([1, 1, 1, 2]), 0);
    const rms = Math.sqrt((9 + 16 + 25) / 4);
    expect(Array.from(out)).toEqual([3 / rms, -4 / rms, 0, 10 / rms].map(Math.fround));
  });

  it('softmax sums to one and keeps order', () => {
    const v = Float32Array.from([1, 2, 3]);
    softmax(v);
    expect(v[0] + v[1] + v[2]).toBeCloseTo(1, 6);
    expect(v[2] / v[1]).toBeCloseTo(Math.E, 5);
  });

  it('topK breaks ties toward the lower index', () => {
    expect(topK(Float32Array.from([0.2, 0.5, 0.5, 0.1]), 2)).toEqual([1, 2]);
  });

  for (const type of ['norm', 'neox'] as const) {
    it(`rope (${type}) is the identity at 0, keeps norms, and scores depend only on relative position`, () => {
      const dim = 16;
      const q = Float32Array.from({ length: dim }, (_, i) => Math.sin(i + 1));
      const k = Float32Array.from({ length: dim }, (_, i) => Math.cos(2 * i + 1));
      const at0 = q.slice();
      rope(at0, 0, dim, 0, 10000, type);
      expect(Array.from(at0)).toEqual(Array.from(q));
      const score = (m: number, n: number) => {
        const a = q.slice();
        const b = k.slice();
        rope(a, 0, dim, m, 10000, type);
        rope(b, 0, dim, n, 10000, type);
        return a.reduce((s, v, i) => s + v * b[i], 0);
      };
      expect(score(7, 3)).toBeCloseTo(score(14, 10), 4);
      expect(score(7, 3)).not.toBeCloseTo(score(7, 7), 2);
      const rotated = q.slice();
      rope(rotated, 0, dim, 5, 10000, type);
      const norm = (v: Float32Array) => Math.hypot(...v);
      expect(norm(rotated)).toBeCloseTo(norm(q), 5);
    });
  }

  it('norm and neox rotate different pairs', () => {
    const a = Float32Array.from({ length: 8 }, (_, i) => i + 1);
    const b = a.slice();
    rope(a, 0, 8, 3, 10000, 'norm');
    rope(b, 0, 8, 3, 10000, 'neox');
    expect(Array.from(a)).not.toEqual(Array.from(b));
  });
});
