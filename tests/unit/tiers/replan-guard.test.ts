/**
 * The replan guard (src/tiers/policies/replan-guard.ts) step by step, on one layer of 8 experts
 * with 4 slots: it freezes the sets, counts only the routings that tell them apart, switches at a
 * checkpoint when the reserve leads by the margin and not before, keeps a layer after the last
 * checkpoint, drops a reverted layer's pending swaps, and swaps the most routed experts back first.
 */
import { describe, expect, it } from 'vitest';
import { residencyOf, residentIds } from '../../../src/tiers/residency.js';
import {
  guardDefaults,
  guardInit,
  guardRoute,
  guardTick,
  guardWatch,
  reserveLeads,
  switchSwaps,
  type GuardParams,
} from '../../../src/tiers/policies/replan-guard.js';
import { makeReplan, planReplan, replanDefaults, type ReplanState } from '../../../src/tiers/policies/replan.js';
import { lfruInit } from '../../../src/tiers/policies/lfru.js';
import type { Decision, PolicyContext, TierEvent } from '../../../src/tiers/types.js';

const experts = 8;
const start = residencyOf(experts, { scope: 'layer', slots: 4 }, [[0, 1, 2, 3]]);
const ctx: PolicyContext = { layers: 1, experts, start };
/** The prompt routes 4..7 only: the replan swaps all four residents out. */
const prompt = [0, 0, 0, 0, 5, 4, 3, 2];

function run(policy = makeReplan(), events: TierEvent[]): { state: ReplanState; log: Decision[][] } {
  let { state } = policy.init(ctx);
  const log: Decision[][] = [];
  for (const ev of events) {
    const step = policy.step(state, ev);
    state = step.state;
    log.push([...step.decisions]);
  }
  return { state, log };
}

/** n decode tokens, each routing `experts` at layer 0 then ticking. */
function tokens(n: number, routed: number[], from = 0): TierEvent[] {
  return Array.from(
    { length: n },
    (_, i) =>
      [
        { kind: 'route', layer: 0, experts: routed },
        { kind: 'decodeTick', token: from + i },
      ] as TierEvent[],
  ).flat();
}

describe('the guard state', () => {
  const swaps = planReplan(lfruInit(ctx), 0, prompt, 24, 2);
  it('freezes the residents before and after the replan, and counts only routings that tell them apart', () => {
    expect(swaps.map((s) => s.newcomer.expert)).toEqual([4, 5, 6, 7]);
    let g = guardWatch(guardInit('replan', 1), start, 0, swaps, prompt);
    expect(Array.from(g.layers[0]!.before)).toEqual([1, 1, 1, 1, 0, 0, 0, 0]);
    expect(Array.from(g.layers[0]!.after)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    g = guardRoute(g, 0, [0, 1, 4]);
    expect(g.layers[0]).toMatchObject({ beforeOnly: 2, afterOnly: 1 });
    expect(g.layers[0]!.seen[0]).toBe(1);
  });

  it('a replan that changes nothing is not watched; a later prefill (after decode tokens) starts anew', () => {
    expect(guardWatch(guardInit('replan', 1), start, 0, [], prompt).layers[0]).toBeUndefined();
    let g = guardWatch(guardInit('replan', 1), start, 0, swaps, prompt);
    g = guardTick(g, guardDefaults).state;
    expect(g.tokens).toBe(1);
    g = guardWatch(g, start, 0, swaps.slice(0, 1), prompt);
    expect(g.tokens).toBe(0);
    expect(Array.from(g.layers[0]!.after)).toEqual([0, 1, 1, 1, 1, 0, 0, 0]);
  });

  it('the margin: max(leadMin, leadSigmas x sqrt(differing routings))', () => {
    const p: GuardParams = { checkpoints: [1], leadMin: 2, leadSigmas: 1 };
    const g = guardWatch(guardInit('replan', 1), start, 0, swaps, prompt);
    const lead = (beforeOnly: number, afterOnly: number) =>
      reserveLeads(g, { ...g.layers[0]!, beforeOnly, afterOnly }, p);
    expect(lead(1, 0)).toBe(false); // below leadMin
    expect(lead(2, 0)).toBe(true);
    expect(lead(9, 6)).toBe(false); // lead 3 < sqrt(15) = 3.9
    expect(lead(10, 6)).toBe(true); // lead 4 >= sqrt(16)
    // Shadow mode: the reserve is the replan (after), held is before.
    const s = guardWatch(guardInit('shadow', 1), start, 0, swaps, prompt);
    expect(reserveLeads(s, { ...s.layers[0]!, beforeOnly: 0, afterOnly: 2 }, p)).toBe(true);
    expect(reserveLeads(s, { ...s.layers[0]!, beforeOnly: 2, afterOnly: 0 }, p)).toBe(false);
  });

  it('switch swaps move the layer to its reserve set, the most routed newcomer first', () => {
    let g = guardWatch(guardInit('replan', 1), start, 0, swaps, prompt);
    g = guardRoute(g, 0, [2, 3]);
    g = guardRoute(g, 0, [3]);
    const replanned = residencyOf(experts, start.budget, [[4, 5, 6, 7]]);
    const back = switchSwaps(g, replanned, 0);
    expect(back.map((d) => d.newcomer.expert)).toEqual([3, 2, 0, 1]);
    expect(back.map((d) => d.victim.expert).sort()).toEqual([4, 5, 6, 7]);
  });
});

describe('the guarded replan policy', () => {
  it("reverts at the first checkpoint where the old residents lead, and drops the layer's pending swaps", () => {
    // startPerCall 2: two swaps start in the prefill, two wait in the FIFO.
    const policy = makeReplan({ ...replanDefaults, startPerCall: 2, drainPerToken: 0 });
    const { state, log } = run(policy, [
      { kind: 'prefillCounts', layer: 0, counts: prompt },
      ...tokens(1, [0, 1, 2, 3]),
    ]);
    expect(log[0].map((d) => d.kind === 'swap' && d.newcomer.expert)).toEqual([4, 5]);
    // Token 1 (checkpoint 1), against the frozen sets: 0..3 are before-only (4 routings), none
    // after-only: lead 4 >= max(2, sqrt 4). Experts 0 and 1 come back (2 and 3 never left); the
    // victims are the newcomers, the fewest prompt rows first (5: 4 rows, then 4: 5 rows).
    const reverted = log[2];
    expect(reverted.map((d) => d.kind === 'swap' && [d.victim.expert, d.newcomer.expert])).toEqual([
      [5, 0],
      [4, 1],
    ]);
    expect(state.pending).toEqual([]);
    expect(state.revertDropped).toBe(2);
    expect(residentIds(state.residency, 0)).toEqual([0, 1, 2, 3]);
    expect(state.guard!.layers[0]!.status).toBe('switched');
  });

  it('keeps a replan the decode agrees with, through the last checkpoint', () => {
    const last = guardDefaults.checkpoints.at(-1)!;
    const { state, log } = run(makeReplan(), [
      { kind: 'prefillCounts', layer: 0, counts: prompt },
      ...tokens(last, [4, 5, 6, 7]),
    ]);
    expect(state.guard!.layers[0]!.status).toBe('kept');
    // No decision after the prefill's swaps but the LFRU tick's (none: everything routed is resident).
    expect(log.slice(1).flat()).toEqual([]);
  });

  it('does not switch between checkpoints, nor after the last', () => {
    const p = { ...replanDefaults, guard: { checkpoints: [3], leadMin: 2, leadSigmas: 1 } };
    const agree = tokens(2, [4, 5, 6, 7]);
    const disagree = tokens(1, [0, 1, 2, 3], 2);
    const late = tokens(3, [0, 1, 2, 3], 3);
    const { log } = run(makeReplan(p), [
      { kind: 'prefillCounts', layer: 0, counts: prompt },
      ...agree,
      ...disagree,
      ...late,
    ]);
    // At token 3: before-only 4, after-only 8: kept. After it the old set leads, but the watch is over.
    expect(log.slice(1).flat()).toEqual([]);
  });

  it('shadow mode (replan off): holds the replan, applies it late where the decode favours it', () => {
    const policy = makeReplan({ ...replanDefaults, apply: false });
    expect(policy.name).toBe('lfru-guarded');
    const { state, log } = run(policy, [{ kind: 'prefillCounts', layer: 0, counts: prompt }, ...tokens(1, [4, 5, 7])]);
    expect(log[0]).toEqual([]); // nothing at the prefill
    const applied = log[2];
    // The most routed newcomers first (4, 5, 7 seen once; then by prompt rows: 4 (5), 5 (4), 7 (2); then 6).
    expect(applied.map((d) => d.kind === 'swap' && d.newcomer.expert)).toEqual([4, 5, 7, 6]);
    expect(residentIds(state.residency, 0)).toEqual([4, 5, 6, 7]);
  });

  it("unguarded replan keeps docs/SPEC.md's strict rule (a lead of one prompt row swaps); guarded needs two", () => {
    const oneRow = [0, 0, 0, 0, 1, 1, 0, 0];
    expect(planReplan(lfruInit(ctx), 0, oneRow, 24, 1)).toHaveLength(2);
    expect(planReplan(lfruInit(ctx), 0, oneRow, 24, replanDefaults.planLeadMin)).toHaveLength(0);
  });
});
