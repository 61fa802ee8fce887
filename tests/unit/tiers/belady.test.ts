/**
 * Belady's MIN with bypass against an exhaustive search over every demand schedule
 * (keep or bypass each miss, any unpinned victim) on tiny random traces.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32, randomInt } from '../../../src/core/prng.js';
import { belady } from '../../../src/tiers/policies/belady.js';
import { replay } from '../../../src/tiers/replay.js';
import { buildScenario, type Scenario } from '../../../src/tiers/scenario.js';
import type { Budget } from '../../../src/tiers/types.js';
import { randomTrace } from './random-trace.js';

/** Fewest misses any demand policy with bypass can reach: DP over cache contents as bitmasks. */
function optimumMisses(sc: Scenario): number {
  const key = (l: number, e: number): number => l * sc.experts + e;
  let startMask = 0;
  sc.start.resident.forEach((row, l) => row.forEach((v, e) => v && (startMask |= 1 << key(l, e))));
  const fits = (mask: number, l: number): boolean => {
    if (sc.budget.scope === 'global') return popcount(mask) <= sc.budget.slots;
    let n = 0;
    for (let e = 0; e < sc.experts; e++) if (mask & (1 << key(l, e))) n++;
    return n <= sc.budget.slots;
  };
  let best = new Map<number, number>([[startMask, 0]]);
  for (const step of sc.decode) {
    step.forEach((experts, l) => {
      const pinned = experts.reduce((m, e) => m | (1 << key(l, e)), 0);
      for (const e of experts) {
        const bit = 1 << key(l, e);
        const next = new Map<number, number>();
        const offer = (m: number, v: number): void => {
          if ((next.get(m) ?? Infinity) > v) next.set(m, v);
        };
        for (const [mask, misses] of best) {
          if (mask & bit) {
            offer(mask, misses);
            continue;
          }
          offer(mask, misses + 1); // bypass
          if (fits(mask | bit, l)) offer(mask | bit, misses + 1);
          const victimsFrom = sc.budget.scope === 'global' ? Array.from({ length: sc.layers }, (_, i) => i) : [l];
          for (const vl of victimsFrom) {
            for (let v = 0; v < sc.experts; v++) {
              const vb = 1 << key(vl, v);
              if (mask & vb && !(pinned & vb)) offer((mask & ~vb) | bit, misses + 1);
            }
          }
        }
        best = next;
      }
    });
  }
  return Math.min(...best.values());
}

function popcount(x: number): number {
  let n = 0;
  for (; x; x &= x - 1) n++;
  return n;
}

describe("Belady's MIN with bypass", () => {
  it('reaches the exhaustive optimum of demand caching on tiny traces', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const rng = mulberry32(seed);
      const layers = randomInt(rng, 1, 2);
      const experts = randomInt(rng, 3, 5);
      const topK = randomInt(rng, 1, 2);
      const trace = randomTrace(rng, {
        layers,
        experts,
        topK,
        tokens: randomInt(rng, 4, 10),
        prefillRows: 0,
        reuse: 0.3,
      });
      const per = randomInt(rng, topK, experts - 1);
      const budget: Budget = rng() < 0.5 ? { scope: 'layer', slots: per } : { scope: 'global', slots: per * layers };
      const sc = buildScenario(trace, { budget, start: rng() < 0.5 ? 'empty' : 'ids' });
      expect(replay(belady, sc, 'hosted').misses, `seed ${seed} ${budget.scope}`).toBe(optimumMisses(sc));
    }
  });

  it('bypasses a newcomer whose next use is furthest', () => {
    // One layer, 3 experts, 1 slot holding 0: route 1 once, then 0 again. Keeping 1 would lose the hit on 0.
    const trace = randomTrace(mulberry32(1), { layers: 1, experts: 3, topK: 1, tokens: 1, prefillRows: 0, reuse: 0 });
    trace.decode = [[1], [0], [0]].map((ids, step) => ({ step, layers: [ids] }));
    const sc = buildScenario(trace, { budget: { scope: 'layer', slots: 1 }, start: 'ids' });
    const c = replay(belady, sc, 'hosted');
    expect([c.hits, c.misses, c.uploads]).toEqual([2, 1, 0]);
  });
});
