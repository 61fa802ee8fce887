import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { logitsFromProbabilities, maxAbsDiff, shiftToMax, topK } from '../../bench/lib/logits.mjs';

function softmax(logits: number[]): Map<number, number> {
  const max = Math.max(...logits);
  const exps = logits.map((l) => Math.fround(Math.exp(l - max)));
  const sum = exps.reduce((a, b) => a + b, 0);
  return new Map(exps.map((e, id) => [id, Math.fround(e / sum)]));
}

describe('logits from llama.cpp probabilities', () => {
  it('recovers logits shifted to a top-1 of 0, to float32 precision', () => {
    const logits = [1.5, -2.25, 4, 0, 3.75];
    const shifted = logitsFromProbabilities(softmax(logits));
    logits.forEach((l, id) => expect(shifted[id]).toBeCloseTo(l - 4, 5));
  });

  it('leaves an underflowed probability unknown (-Infinity) and skips it in the diff', () => {
    const shifted = logitsFromProbabilities(
      new Map([
        [0, 1],
        [1, 0],
        [2, 1e-20],
      ]),
    );
    expect(shifted[1]).toBe(-Infinity);
    const diff = maxAbsDiff(shifted, Float64Array.from([0, -3, Math.log(1e-20) + 0.5]));
    expect(diff.compared).toBe(2);
    expect(diff.skipped).toBe(1);
    expect(diff.maxAbsDiff).toBeCloseTo(0.5, 6);
    expect(diff.atId).toBe(2);
  });

  it('shifts moetier logits so that both sides compare on the same footing', () => {
    const raw = Float32Array.from([2, 7, -1]);
    expect(Array.from(shiftToMax(raw))).toEqual([-5, 0, -8]);
    const fromProbs = logitsFromProbabilities(softmax([2, 7, -1]));
    expect(maxAbsDiff(shiftToMax(raw), fromProbs).maxAbsDiff).toBeLessThan(1e-5);
  });

  it('refuses vectors of different lengths', () => {
    expect(() => maxAbsDiff([0, 1], [0])).toThrow(/length/);
  });
});

describe('topK', () => {
  it('returns the largest entries in descending order', () => {
    expect(topK([0.1, 3, -2, 5, 4], 2)).toEqual([
      { id: 3, logit: 5 },
      { id: 4, logit: 4 },
    ]);
  });

  it("breaks ties toward the lower id, like both engines' argmax", () => {
    expect(topK([1, 9, 9, 2], 2)).toEqual([
      { id: 1, logit: 9 },
      { id: 2, logit: 9 },
    ]);
  });

  it('ignores unknown entries', () => {
    expect(topK([null, -Infinity, -3], 2)).toEqual([{ id: 2, logit: -3 }]);
  });
});
