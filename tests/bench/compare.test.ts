import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { compareCase, divergenceStep, summarizeParity } from '../../bench/lib/compare.mjs';

const noTop2 = async () => {
  throw new Error('top2At must only be asked on divergence');
};

describe('divergenceStep', () => {
  it('is -1 for identical runs and the first differing index otherwise', () => {
    expect(divergenceStep([5, 6, 7], [5, 6, 7])).toBe(-1);
    expect(divergenceStep([5, 6, 7], [5, 9, 7])).toBe(1);
  });

  it('counts a run that stops early as diverging where it stopped', () => {
    expect(divergenceStep([5, 6], [5, 6, 7])).toBe(2);
    expect(divergenceStep([5, 6, 7], [5, 6])).toBe(2);
  });

  it('ignores moetier tokens after llama.cpp stopped at an end-of-generation token', () => {
    expect(divergenceStep([5, 2, 9, 9], [5, 2], true)).toBe(-1);
    expect(divergenceStep([5, 3, 9, 9], [5, 2], true)).toBe(1);
  });
});

describe('compareCase', () => {
  const firstLogits = [0, -1, -4];

  it('reports identity and the largest first-step logit difference', async () => {
    const verdict = await compareCase(
      { tokens: [0, 1], firstLogits },
      { tokens: [0, 1], stoppedAtEog: false, firstLogits: [0, -1.25, null], top2: [] },
      noTop2,
    );
    expect(verdict.identical).toBe(true);
    expect(verdict.maxAbsLogitDiff).toBeCloseTo(0.25, 12);
    expect(verdict.logitsCompared).toBe(2);
    expect(verdict.divergence).toBeUndefined();
  });

  it("on divergence reports the step and both engines' top-2 there", async () => {
    const llamaTop2 = [
      [
        { id: 0, logit: 0 },
        { id: 1, logit: -1 },
      ],
      [
        { id: 2, logit: 0 },
        { id: 1, logit: -0.01 },
      ],
    ];
    const asked: number[] = [];
    const verdict = await compareCase(
      { tokens: [0, 1, 2], firstLogits },
      { tokens: [0, 2, 2], stoppedAtEog: false, firstLogits, top2: llamaTop2 },
      async (step: number) => {
        asked.push(step);
        return [
          { id: 1, logit: 0 },
          { id: 2, logit: -0.02 },
        ];
      },
    );
    expect(verdict.identical).toBe(false);
    expect(asked).toEqual([1]);
    expect(verdict.divergence).toEqual({
      step: 1,
      moetier: {
        token: 1,
        top2: [
          { id: 1, logit: 0 },
          { id: 2, logit: -0.02 },
        ],
      },
      llamaCpp: { token: 2, top2: llamaTop2[1] },
    });
  });
});

describe('summarizeParity', () => {
  it('is all-identical only when every case is, and never for no cases', () => {
    expect(summarizeParity([{ identical: true }, { identical: true }], {}).allTokensIdentical).toBe(true);
    expect(summarizeParity([{ identical: true }, { identical: false }], {}).allTokensIdentical).toBe(false);
    expect(summarizeParity([], {}).allTokensIdentical).toBe(false);
  });
});
