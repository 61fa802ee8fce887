/**
 * Prefill replan (docs/SPEC.md section 2) on top of the LFRU baseline. After a prefill
 * layer's routing, its counts over the prompt rows pair victims and newcomers:
 *   victims    = residents     by prompt count ascending  (never-routed first)
 *   newcomers  = non-residents by prompt count descending
 * swapping pair i only while newcomer count > victim count, at most `cap` per layer.
 * `startPerCall` swaps start at once (what the upload queue takes); the rest wait
 * in a FIFO drained first on later prefill calls and `drainPerToken` per decode tick.
 * A pending swap whose victim left or whose newcomer arrived meanwhile is dropped
 * and counted.
 *
 * The guard (replan-guard.ts, on by default) watches every replanned layer over the first decode
 * tokens and reverts it where the residents it displaced would have done better; the pending
 * swaps of a reverted layer are dropped, not issued. With `apply: false` the replan is planned but
 * held in reserve (the guarded baseline, 'lfru-guarded'): a layer takes it late where the first
 * decode tokens show it would do better than the warm start. `guard: undefined` is the unguarded
 * replan of docs/SPEC.md section 2 ('replan-unguarded').
 */
import { applyDecisions, isResident, residentIds } from '../residency.js';
import type { Decision, Policy, PolicyStep } from '../types.js';
import { lfruDefaults, lfruInit, lfruObserve, lfruTick, type LfruParams, type LfruState } from './lfru.js';
import {
  guardDefaults,
  guardInit,
  guardPlanLeadMin,
  guardRoute,
  guardTick,
  guardWatch,
  switchAll,
  type GuardParams,
  type GuardState,
} from './replan-guard.js';

export interface ReplanParams extends LfruParams {
  capPerLayer: number;
  startPerCall: number;
  drainPerToken: number;
  /** The guard's checkpoints and margin; undefined: unguarded. */
  guard?: GuardParams;
  /** false: plan but hold in reserve (needs a guard to ever apply). Default true. */
  apply?: boolean;
  /** The prompt rows a newcomer must lead its victim by (planReplan): guarded 2, docs/SPEC.md's unguarded rule 1. */
  planLeadMin?: number;
}

export const replanDefaults: ReplanParams = {
  ...lfruDefaults,
  capPerLayer: 24,
  startPerCall: 8,
  drainPerToken: 4,
  guard: guardDefaults,
  planLeadMin: guardPlanLeadMin,
};

type Swap = Extract<Decision, { kind: 'swap' }>;

export interface ReplanState extends LfruState {
  pending: readonly Swap[];
  /** Pending swaps dropped because residency changed before they started. */
  staleDropped: number;
  /** Pending swaps dropped because the guard reverted their layer. */
  revertDropped: number;
  guard?: GuardState;
}

/** The replan fields on a state that had none (a tune that turns replan or its guard on). */
export function withReplanFields(s: LfruState, p: ReplanParams, layers: number): ReplanState {
  const r = s as Partial<ReplanState>;
  const mode = p.apply === false ? 'shadow' : 'replan';
  return {
    ...s,
    pending: r.pending ?? [],
    staleDropped: r.staleDropped ?? 0,
    revertDropped: r.revertDropped ?? 0,
    guard: p.guard ? (r.guard?.mode === mode ? r.guard : guardInit(mode, layers)) : undefined,
  };
}

/**
 * The victim-first, budget-neutral swaps for one layer's prompt counts: a pair is swapped while
 * the newcomer's count beats the victim's by at least `leadMin` (1: docs/SPEC.md's strict "beats").
 */
export function planReplan(s: LfruState, layer: number, counts: readonly number[], cap: number, leadMin = 1): Swap[] {
  const r = s.residency;
  const victims = residentIds(r, layer).sort((a, b) => counts[a] - counts[b] || a - b);
  const newcomers = counts
    .map((_, e) => e)
    .filter((e) => !isResident(r, layer, e))
    .sort((a, b) => counts[b] - counts[a] || a - b);
  const swaps: Swap[] = [];
  for (let i = 0; i < Math.min(victims.length, newcomers.length, cap); i++) {
    if (counts[newcomers[i]] - counts[victims[i]] < leadMin) break;
    swaps.push({ kind: 'swap', victim: { layer, expert: victims[i] }, newcomer: { layer, expert: newcomers[i] } });
  }
  return swaps;
}

/** Starts up to `n` pending swaps that are still valid, in FIFO order. */
function drain(s: ReplanState, n: number): PolicyStep<ReplanState> {
  let residency = s.residency;
  let staleDropped = s.staleDropped;
  const decisions: Decision[] = [];
  let i = 0;
  for (; i < s.pending.length && decisions.length < n; i++) {
    const { victim: v, newcomer: c } = s.pending[i];
    if (!isResident(residency, v.layer, v.expert) || isResident(residency, c.layer, c.expert)) {
      staleDropped++;
      continue;
    }
    decisions.push(s.pending[i]);
    residency = applyDecisions(residency, [s.pending[i]]);
  }
  return { state: { ...s, residency, staleDropped, pending: s.pending.slice(i) }, decisions };
}

export function makeReplan(p: ReplanParams = replanDefaults): Policy<ReplanState> {
  const apply = p.apply !== false;
  const guard = p.guard;
  return {
    name: !guard ? (apply ? 'replan-unguarded' : 'lfru') : apply ? 'replan' : 'lfru-guarded',
    kind: 'ahead',
    offline: false,
    init: (ctx) => ({ state: withReplanFields(lfruInit(ctx), p, ctx.layers), decisions: [] }),
    step(s, ev) {
      if (ev.kind === 'route') {
        const observed = { ...s, ...lfruObserve(s, ev) };
        return {
          state: s.guard ? { ...observed, guard: guardRoute(s.guard, ev.layer, ev.experts) } : observed,
          decisions: [],
        };
      }
      if (ev.kind === 'prefillCounts') {
        const observed: ReplanState = { ...s, ...lfruObserve(s, ev) };
        const planned = planReplan(observed, ev.layer, ev.counts, p.capPerLayer, p.planLeadMin ?? 1);
        const watched = s.guard
          ? { ...observed, guard: guardWatch(s.guard, observed.residency, ev.layer, planned, ev.counts) }
          : observed;
        if (!apply) return { state: watched, decisions: [] };
        return drain({ ...watched, pending: [...observed.pending, ...planned] }, p.startPerCall);
      }
      const guarded = guard && s.guard ? guardStep(s, guard) : { state: s, decisions: [] };
      const drained = drain(guarded.state, p.drainPerToken);
      const ticked = lfruTick(drained.state, p);
      return {
        state: { ...drained.state, ...ticked.state },
        decisions: [...guarded.decisions, ...drained.decisions, ...ticked.decisions],
      };
    },
  };
}

/** The guard's checkpoint on a decode tick: switched layers lose their pending swaps and swap to their reserve set. */
function guardStep(s: ReplanState, p: GuardParams): PolicyStep<ReplanState> {
  const { state: guard, switched } = guardTick(s.guard!, p);
  if (switched.length === 0) return { state: { ...s, guard }, decisions: [] };
  const kept = s.pending.filter((d) => !switched.includes(d.victim.layer));
  const decisions = switchAll(guard, s.residency, switched);
  const residency = applyDecisions(s.residency, decisions);
  const revertDropped = s.revertDropped + s.pending.length - kept.length;
  return { state: { ...s, guard, residency, pending: kept, revertDropped }, decisions };
}

/** The guarded replan (the default), the unguarded one, and the guarded baseline (the replan held in reserve). */
export const replan = makeReplan();
export const replanUnguarded = makeReplan({ ...replanDefaults, guard: undefined, planLeadMin: 1 });
export const lfruGuarded = makeReplan({ ...replanDefaults, apply: false });
