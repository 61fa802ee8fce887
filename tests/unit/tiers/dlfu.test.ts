/** Decayed LFU (src/tiers/policies/dlfu.ts): the half-life decides between frequency and recency; a heat file is a bounded prior. */
import { describe, expect, it } from 'vitest';
import { residencyOf, residentIds } from '../../../src/tiers/residency.js';
import { checkDlfuParams, dlfuDefaults, dlfuScore, heatPrior, makeDlfu } from '../../../src/tiers/policies/dlfu.js';
import type { PolicyContext, TierEvent } from '../../../src/tiers/types.js';
import { lfu } from '../../../src/tiers/policies/lfu.js';

const ctx: PolicyContext = { layers: 1, experts: 4, start: residencyOf(4, { scope: 'layer', slots: 2 }, [[0, 1]]) };
const route = (...experts: number[]): TierEvent[] => [
  { kind: 'route', layer: 0, experts },
  { kind: 'decodeTick', token: 0 },
];

/** Expert 0 routed 4 times early, expert 1 once, then 40 quiet tokens (expert 2 alone), then a miss on 3. */
function events(): TierEvent[] {
  const early = [...route(0), ...route(0), ...route(0), ...route(0)];
  const quiet = Array.from({ length: 40 }, () => route(2)).flat();
  return [...early, ...route(1), ...quiet, ...route(3)];
}

function residentsAfter(policy = makeDlfu(), evs = events()): number[] {
  let { state } = policy.init(ctx);
  for (const ev of evs) state = policy.step(state, ev).state;
  return residentIds(state.residency, 0);
}

describe('dlfu', () => {
  it('a long half-life keeps the frequent expert, as LFU does; a short one the recent', () => {
    // Long: 0 (4 routings) outweighs 2 (40, decayed little) ... both kept over 1; then 3 evicts the lowest.
    expect(residentsAfter(makeDlfu({ halfLifeTokens: 1e6 }))).toEqual(residentsAfter(lfu as never));
    // Short (2 tokens): 0's four routings 40 tokens ago weigh 4 x 2^-20: the recent 2 stays, 0 goes.
    const short = residentsAfter(makeDlfu({ halfLifeTokens: 2 }));
    expect(short).toContain(2);
    expect(short).toContain(3);
    expect(short).not.toContain(0);
  });

  it('scores order by the decayed count: log2(count) + stamp / H', () => {
    const p = { halfLifeTokens: 8 };
    const policy = makeDlfu(p);
    let { state } = policy.init(ctx);
    for (const ev of [...route(0), ...route(0), ...Array.from({ length: 8 }, () => route(1)).flat()])
      state = policy.step(state, ev).state;
    // Expert 0: 2 routings at t = 0, 1, decayed over ~9 tokens; expert 1: 8 recent routings.
    expect(dlfuScore(state, p, 0, 1)).toBeGreaterThan(dlfuScore(state, p, 0, 0));
    expect(dlfuScore(state, p, 0, 3)).toBe(-Infinity);
    const value0 = (2 ** (-1 / 8) + 1) * 2 ** (-(state.tokens - 1) / 8); // its count as of now
    const value1 = state.count[0][1] * 2 ** (-(state.tokens - state.stamp[0][1]) / 8);
    expect(Math.sign(dlfuScore(state, p, 0, 1) - dlfuScore(state, p, 0, 0))).toBe(Math.sign(value1 - value0));
  });

  it('a heat file is a prior worth H routings per layer, whatever its size', () => {
    expect(heatPrior([[300, 100, 0, 0]], 16)).toEqual([[12, 4, 0, 0]]);
    expect(heatPrior([[0, 0, 0, 0]], 16)).toEqual([[0, 0, 0, 0]]);
    const big = makeDlfu().init({ ...ctx, heat: [[3e6, 1e6, 0, 0]] }).state;
    expect(big.count[0][0]).toBeCloseTo(dlfuDefaults.halfLifeTokens * 0.75, 12);
  });

  it("is a demand policy whose victims are never the current route's experts", () => {
    const policy = makeDlfu();
    let { state } = policy.init(ctx);
    const step = policy.step(state, { kind: 'route', layer: 0, experts: [2, 0] });
    expect(step.decisions).toEqual([
      { kind: 'swap', victim: { layer: 0, expert: 1 }, newcomer: { layer: 0, expert: 2 } },
    ]);
    state = step.state;
    expect(() => checkDlfuParams({ halfLifeTokens: 0 })).toThrow(RangeError);
    expect(() => checkDlfuParams({ halfLifeTokens: Number.NaN })).toThrow(RangeError);
    expect(() => makeDlfu({ halfLifeTokens: 2 ** 21 })).toThrow(/halfLifeTokens/);
  });
});
