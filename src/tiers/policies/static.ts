/**
 * Static policies: the residency never changes after init.
 *   static:        keeps the starting content (warmstart alone, without the LFRU tick)
 *   oracle-static: the best fixed set for the whole replayed decode (an offline bound
 *                  for every static policy): per layer the B most routed experts, or
 *                  under a global budget the most routed (layer, expert) pairs.
 * oracle-static's init moves from the start to that set; its swaps count as setup.
 */
import { assert } from '../../core/assert.js';
import { applyDecisions, isResident, residentIds, type Residency } from '../residency.js';
import type { Decision, ExpertKey, Policy, PolicyContext } from '../types.js';

interface StaticState {
  residency: Residency;
}

export const staticStart: Policy<StaticState> = {
  name: 'static',
  kind: 'static',
  offline: false,
  init: (ctx) => ({ state: { residency: ctx.start }, decisions: [] }),
  step: (s) => ({ state: s, decisions: [] }),
};

/** The fixed set that maximises hits over `future`: best[layer] = expert ids. */
export function bestStaticSets(ctx: PolicyContext, r: Residency): number[][] {
  const counts = Array.from({ length: ctx.layers }, () => new Array<number>(ctx.experts).fill(0));
  for (const step of ctx.future ?? []) step.forEach((ids, l) => ids.forEach((e) => counts[l][e]++));
  // Among equal counts keep what is already resident, so ties cost no upload.
  const keys: [number, number, number][] = [];
  counts.forEach((row, l) => row.forEach((c, e) => keys.push([c, l, e])));
  const rank = (a: [number, number, number], b: [number, number, number]): number =>
    b[0] - a[0] || Number(isResident(r, b[1], b[2])) - Number(isResident(r, a[1], a[2])) || a[1] - b[1] || a[2] - b[2];
  const sets: number[][] = Array.from({ length: ctx.layers }, () => []);
  if (r.budget.scope === 'layer') {
    const slots = r.budget.slots;
    for (let l = 0; l < ctx.layers; l++) {
      keys
        .filter((k) => k[1] === l)
        .sort(rank)
        .slice(0, slots)
        .forEach((k) => sets[l].push(k[2]));
    }
  } else {
    keys
      .sort(rank)
      .slice(0, r.budget.slots)
      .forEach((k) => sets[k[1]].push(k[2]));
  }
  return sets;
}

/** Swaps (and fills where slots are free) that turn `r` into exactly `sets`. */
export function decisionsToReach(r: Residency, sets: readonly (readonly number[])[]): Decision[] {
  const leave: ExpertKey[] = [];
  const enter: ExpertKey[] = [];
  sets.forEach((ids, layer) => {
    const want = new Set(ids);
    for (const e of residentIds(r, layer)) if (!want.has(e)) leave.push({ layer, expert: e });
    for (const e of ids) if (!isResident(r, layer, e)) enter.push({ layer, expert: e });
  });
  const out: Decision[] = [];
  const perLayer = r.budget.scope === 'layer';
  for (const n of enter) {
    const i = perLayer ? leave.findIndex((v) => v.layer === n.layer) : leave.length > 0 ? 0 : -1;
    if (i >= 0) out.push({ kind: 'swap', victim: leave.splice(i, 1)[0], newcomer: n });
    else out.push({ kind: 'fill', expert: n });
  }
  assert(leave.length === 0, 'the target sets fill the budget, so every leaving resident has a newcomer');
  return out;
}

export const oracleStatic: Policy<StaticState> = {
  name: 'oracle-static',
  kind: 'static',
  offline: true,
  init(ctx) {
    const decisions = decisionsToReach(ctx.start, bestStaticSets(ctx, ctx.start));
    return { state: { residency: applyDecisions(ctx.start, decisions) }, decisions };
  },
  step: (s) => ({ state: s, decisions: [] }),
};
