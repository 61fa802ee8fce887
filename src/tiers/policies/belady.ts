/**
 * Belady's MIN with bypass: the offline optimum of demand caching. On a miss with
 * no free slot, of the residents that may go and the newcomer itself, the one
 * whose next routing is furthest in the future stays out (the newcomer may stay
 * uncached). It needs the whole decode routing in advance (ctx.future) and bounds
 * the hit rate of every demand policy from the same starting content.
 *
 * Time runs token-major, layer-minor: event (token t, layer l) is at t * L + l, so
 * "furthest" also compares keys of different layers under a global budget.
 */
import { assert } from '../../core/assert.js';
import { applyDecisions, freeSlots, victimLayers, type Residency } from '../residency.js';
import type { Decision, ExpertKey, FutureStep, Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';

interface Future {
  layers: number;
  steps: readonly FutureStep[];
  /** uses[layer][expert] = decode tokens that route it, ascending. */
  uses: readonly (readonly number[])[][];
}

export interface BeladyState {
  residency: Residency;
  /** Decode token the next route events belong to. */
  token: number;
  future: Future;
}

function futureOf(ctx: PolicyContext): Future {
  assert(ctx.future !== undefined, 'belady is offline: it needs ctx.future');
  const uses = Array.from({ length: ctx.layers }, () => Array.from({ length: ctx.experts }, () => [] as number[]));
  ctx.future.forEach((step, t) => step.forEach((ids, l) => ids.forEach((e) => uses[l][e].push(t))));
  return { layers: ctx.layers, steps: ctx.future, uses };
}

/** Time of the first routing of `k` strictly after event (token, layer); Infinity if none. */
function nextUse(f: Future, token: number, layer: number, k: ExpertKey): number {
  const ts = f.uses[k.layer][k.expert];
  const from = k.layer > layer ? token : token + 1;
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < from) lo = mid + 1;
    else hi = mid;
  }
  return lo < ts.length ? ts[lo] * f.layers + k.layer : Infinity;
}

function onRoute(s: BeladyState, layer: number, experts: readonly number[]): PolicyStep<BeladyState> {
  const f = s.future;
  const planned = f.steps[s.token]?.[layer];
  assert(
    planned !== undefined && planned.length === experts.length && planned.every((e, i) => e === experts[i]),
    `belady: route event at token ${s.token} layer ${layer} matches the future it was given`,
  );
  let residency = s.residency;
  const decisions: Decision[] = [];
  for (const m of experts) {
    if (residency.resident[layer][m]) continue;
    const newcomer = { layer, expert: m };
    let d: Decision | undefined;
    if (freeSlots(residency, layer) > 0) {
      d = { kind: 'fill', expert: newcomer };
    } else {
      let victim: ExpertKey | undefined;
      let furthest = nextUse(f, s.token, layer, newcomer);
      for (const l of victimLayers(residency, layer)) {
        const row = residency.resident[l];
        for (let e = 0; e < row.length; e++) {
          if (!row[e] || (l === layer && experts.includes(e))) continue;
          const t = nextUse(f, s.token, layer, { layer: l, expert: e });
          if (t > furthest) [victim, furthest] = [{ layer: l, expert: e }, t];
        }
      }
      if (victim) d = { kind: 'swap', victim, newcomer };
    }
    if (!d) continue;
    decisions.push(d);
    residency = applyDecisions(residency, [d]);
  }
  return { state: { ...s, residency }, decisions };
}

export const belady: Policy<BeladyState> = {
  name: 'belady',
  kind: 'demand',
  offline: true,
  init: (ctx) => ({ state: { residency: ctx.start, token: 0, future: futureOf(ctx) }, decisions: [] }),
  step(s: BeladyState, ev: TierEvent) {
    if (ev.kind === 'route') return onRoute(s, ev.layer, ev.experts);
    if (ev.kind === 'decodeTick') return { state: { ...s, token: s.token + 1 }, decisions: [] };
    return { state: s, decisions: [] };
  },
};
