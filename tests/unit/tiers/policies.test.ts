/** Each policy's own rules on small hand-made scenarios. */
import { describe, expect, it } from 'vitest';
import {
  applyDecisions,
  emptyResidency,
  residencyOf,
  residentIds,
  type Residency,
} from '../../../src/tiers/residency.js';
import { lfruBar, lfruScore, makeLfru, type LfruState } from '../../../src/tiers/policies/lfru.js';
import { makeReplan, type ReplanState } from '../../../src/tiers/policies/replan.js';
import { makeAdmit, admitDefaults } from '../../../src/tiers/policies/admit.js';
import { lru } from '../../../src/tiers/policies/lru.js';
import { lfu } from '../../../src/tiers/policies/lfu.js';
import type { Decision, Policy, PolicyContext, TierEvent } from '../../../src/tiers/types.js';

const ctxOf = (start: Residency, heat?: number[][]): PolicyContext => ({
  layers: start.resident.length,
  experts: start.experts,
  start,
  heat,
});

/** Runs events through a policy, applying decisions like the replay does. */
function drive<S extends { residency: Residency }>(p: Policy<S>, ctx: PolicyContext, events: TierEvent[]) {
  let { state } = p.init(ctx);
  const log: Decision[][] = [];
  for (const ev of events) {
    const before = state.residency;
    const out = p.step(state, ev);
    expect(residentIds(applyDecisions(before, out.decisions), 0)).toEqual(residentIds(out.state.residency, 0));
    state = out.state;
    log.push([...out.decisions]);
  }
  return { state, log };
}

const ticks = (n: number, from = 0): TierEvent[] =>
  Array.from({ length: n }, (_, i) => ({ kind: 'decodeTick', token: from + i }));
const perLayer = (slots: number) => ({ scope: 'layer' as const, slots });

describe('residency', () => {
  it('refuses a fill over budget, a cross-layer swap per layer, and a swap of a non-resident', () => {
    const r = residencyOf(4, perLayer(1), [[0], [1]]);
    expect(() => applyDecisions(r, [{ kind: 'fill', expert: { layer: 0, expert: 2 } }])).toThrow(/free slot/);
    expect(() =>
      applyDecisions(r, [{ kind: 'swap', victim: { layer: 0, expert: 0 }, newcomer: { layer: 1, expert: 2 } }]),
    ).toThrow(/same layer/);
    expect(() =>
      applyDecisions(r, [{ kind: 'swap', victim: { layer: 0, expert: 3 }, newcomer: { layer: 0, expert: 2 } }]),
    ).toThrow(/resident/);
    const g = residencyOf(4, { scope: 'global', slots: 2 }, [[0], [1]]);
    const moved = applyDecisions(g, [
      { kind: 'swap', victim: { layer: 0, expert: 0 }, newcomer: { layer: 1, expert: 2 } },
    ]);
    expect([moved.used, moved.total, r.used]).toEqual([[0, 2], 2, [1, 1]]);
  });
});

describe('lru and lfu', () => {
  it('lru evicts the least recently routed unpinned resident', () => {
    const start = residencyOf(5, perLayer(2), [[0, 1]]);
    const { log } = drive(lru, ctxOf(start), [
      { kind: 'route', layer: 0, experts: [0] },
      { kind: 'route', layer: 0, experts: [1] },
      { kind: 'route', layer: 0, experts: [2] },
    ]);
    expect(log[2]).toEqual([{ kind: 'swap', victim: { layer: 0, expert: 0 }, newcomer: { layer: 0, expert: 2 } }]);
  });
  it('lfu evicts the least frequently routed, remembering counts of evicted experts', () => {
    const start = residencyOf(5, perLayer(2), [[0, 1]]);
    const r = (e: number): TierEvent => ({ kind: 'route', layer: 0, experts: [e] });
    const { log } = drive(lfu, ctxOf(start), [r(0), r(0), r(1), r(2), r(3)]);
    expect(log[3]).toEqual([{ kind: 'swap', victim: { layer: 0, expert: 1 }, newcomer: { layer: 0, expert: 2 } }]);
    // 2 (count 1, older) goes before 0 (count 2).
    expect(log[4]).toEqual([{ kind: 'swap', victim: { layer: 0, expert: 2 }, newcomer: { layer: 0, expert: 3 } }]);
  });
});

describe('lfru tick', () => {
  const lfru = makeLfru();
  it('swaps only on every 16th tick and only past the 25 % + 1024 bar', () => {
    const start = residencyOf(4, perLayer(2), [[0, 1]]);
    // Victim 0 scores 0 (no heat, never routed): the bar is lfruBar(0) = 1024 = heat 4 << 8.
    expect(lfruBar(0)).toBe(4 << 8);
    const below = drive(lfru, ctxOf(start, [[0, 9, 4, 0]]), ticks(16));
    expect(below.log.flat()).toEqual([]);
    const above = drive(lfru, ctxOf(start, [[0, 9, 5, 0]]), ticks(16));
    expect(above.log.slice(0, 15).flat()).toEqual([]);
    expect(above.log[15]).toEqual([
      { kind: 'swap', victim: { layer: 0, expert: 0 }, newcomer: { layer: 0, expert: 2 } },
    ]);
  });
  it('scores (heat << 8) | recent and halves heat every 1024 ticks', () => {
    const start = residencyOf(4, perLayer(2), [[0, 1]]);
    const { state: s } = drive(lfru, ctxOf(start, [[6, 9, 0, 0]]), [
      { kind: 'route', layer: 0, experts: [1] },
      ...ticks(3),
    ]);
    expect(lfruScore(s as LfruState, 0, 1)).toBe(10 * 256 + 255 - 3);
    const { state: h } = drive(lfru, ctxOf(start, [[6, 9, 0, 0]]), ticks(1024));
    expect(Array.from((h as LfruState).heat[0])).toEqual([3, 4, 0, 0]);
  });
});

describe('prefill replan', () => {
  const replan = makeReplan();
  const start = residencyOf(64, perLayer(32), [Array.from({ length: 32 }, (_, e) => e)]);
  // Experts 32..63 are prompt-hot, the residents 0..31 never routed, except 0 (count 9).
  const counts = Array.from({ length: 64 }, (_, e) => (e === 0 ? 9 : e >= 32 ? 70 - e : 0));
  it('pairs victims and newcomers in order, caps at 24, starts 8 and drains 4 per decode token', () => {
    const { state, log } = drive(replan, ctxOf(start), [{ kind: 'prefillCounts', layer: 0, counts }, ...ticks(6)]);
    expect(log[0]).toHaveLength(8);
    expect(log[0][0]).toEqual({ kind: 'swap', victim: { layer: 0, expert: 1 }, newcomer: { layer: 0, expert: 32 } });
    expect(log.slice(1, 5).map((d) => d.length)).toEqual([4, 4, 4, 4]);
    expect(log.slice(5).flat()).toEqual([]);
    const swapped = log.flat().map((d) => (d.kind === 'swap' ? d.newcomer.expert : -1));
    // Newcomer i = 32 + i: count 38 - i; victim counts are 0, so all 24 pairs win; 0 (count 9) stays.
    expect(swapped).toEqual(Array.from({ length: 24 }, (_, i) => 32 + i));
    expect(residentIds(state.residency, 0)).toContain(0);
    expect((state as ReplanState).pending).toHaveLength(0);
  });
  it('swaps only while the newcomer beats its victim', () => {
    const few = Array.from({ length: 64 }, (_, e) => (e < 32 ? 3 : e < 35 ? 5 : e === 35 ? 3 : 0));
    const { log } = drive(replan, ctxOf(start), [{ kind: 'prefillCounts', layer: 0, counts: few }]);
    expect(log[0].map((d) => (d.kind === 'swap' ? d.newcomer.expert : -1))).toEqual([32, 33, 34]);
  });
});

describe('admit before run', () => {
  const route = (experts: number[]): TierEvent => ({ kind: 'route', layer: 0, experts });
  it('fills free slots up to the per-layer-step cap', () => {
    const admit = makeAdmit({ ...admitDefaults, fillsPerLayerStep: 2 });
    const { log } = drive(admit, ctxOf(emptyResidency(1, 8, perLayer(6))), [
      route([0, 1, 2, 3]),
      { kind: 'decodeTick', token: 0 },
      route([4, 5, 6]),
    ]);
    expect(log[0].filter((d) => d.kind === 'fill')).toHaveLength(2);
    expect(log[2].filter((d) => d.kind === 'fill')).toHaveLength(2);
  });
  it('swaps a miss in only once its decayed score reaches the minimum, one per step', () => {
    const admit = makeAdmit();
    const start = residencyOf(8, perLayer(2), [[0, 1]]);
    const events: TierEvent[] = [];
    for (let t = 0; t < 12; t++) events.push(route([5, 6]), { kind: 'decodeTick', token: t });
    const { log } = drive(admit, ctxOf(start), events);
    const firstSwap = log.findIndex((d) => d.length > 0);
    // Score after n routings, one per step: sum of decay^i for i < n, >= 8 first at n = 9.
    const n = Array.from({ length: 12 }, (_, i) => i + 1).find(
      (k) => (1 - admitDefaults.decayPerStep ** k) / (1 - admitDefaults.decayPerStep) >= 8,
    );
    expect(firstSwap).toBe(2 * (n! - 1));
    expect(log[firstSwap]).toHaveLength(1);
  });
  it('keeps its incumbent victim unless another scores lower by more than the margin', () => {
    const start = residencyOf(8, perLayer(2), [[0, 1]]);
    const events: TierEvent[] = [];
    let t = 0;
    const at = (experts: number[]) => events.push(route(experts), { kind: 'decodeTick', token: t++ });
    for (let i = 0; i < 20; i++) at([0, 1]); // both residents hot (score ~ 15)
    for (let i = 0; i < 12; i++) at([5]); // 5 passes the minimum score (~10): 0 (tie, lower id) becomes the victim (~10.5), not beaten yet
    at([0]); // 0 now scores about 1 above 1
    for (let i = 0; i < 40; i++) at([5]); // 5 overtakes
    const victimWith = (victimMargin: number) => {
      const { log } = drive(makeAdmit({ ...admitDefaults, victimMargin }), ctxOf(start), events);
      const swap = log.flat().find((d) => d.kind === 'swap');
      return swap?.kind === 'swap' ? swap.victim.expert : -1;
    };
    expect(victimWith(100)).toBe(0); // the incumbent stays
    expect(victimWith(0)).toBe(1); // no hysteresis: the lowest score goes
  });
});
