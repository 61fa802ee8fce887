/**
 * Prefill replan (SPEC.md section 2) on top of the LFRU baseline. After a prefill
 * layer's routing, its counts over the prompt rows pair victims and newcomers:
 *   victims    = residents     by prompt count ascending  (never-routed first)
 *   newcomers  = non-residents by prompt count descending
 * swapping pair i only while newcomer count > victim count, at most `cap` per layer.
 * `startPerCall` swaps start at once (what the upload queue takes); the rest wait
 * in a FIFO drained first on later prefill calls and `drainPerToken` per decode tick.
 * A pending swap whose victim left or whose newcomer arrived meanwhile is dropped
 * and counted.
 */
import { applyDecisions, isResident, residentIds } from '../residency.js';
import type { Decision, Policy, PolicyStep } from '../types.js';
import { lfruDefaults, lfruInit, lfruObserve, lfruTick, type LfruParams, type LfruState } from './lfru.js';

export interface ReplanParams extends LfruParams {
  capPerLayer: number;
  startPerCall: number;
  drainPerToken: number;
}

export const replanDefaults: ReplanParams = { ...lfruDefaults, capPerLayer: 24, startPerCall: 8, drainPerToken: 4 };

type Swap = Extract<Decision, { kind: 'swap' }>;

export interface ReplanState extends LfruState {
  pending: readonly Swap[];
  /** Pending swaps dropped because residency changed before they started. */
  staleDropped: number;
}

/** The victim-first, budget-neutral swaps for one layer's prompt counts. */
export function planReplan(s: LfruState, layer: number, counts: readonly number[], cap: number): Swap[] {
  const r = s.residency;
  const victims = residentIds(r, layer).sort((a, b) => counts[a] - counts[b] || a - b);
  const newcomers = counts.map((_, e) => e).filter((e) => !isResident(r, layer, e))
    .sort((a, b) => counts[b] - counts[a] || a - b);
  const swaps: Swap[] = [];
  for (let i = 0; i < Math.min(victims.length, newcomers.length, cap); i++) {
    if (counts[newcomers[i]] <= counts[victims[i]]) break;
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
  return {
    name: 'replan',
    kind: 'ahead',
    offline: false,
    init: (ctx) => ({ state: { ...lfruInit(ctx), pending: [], staleDropped: 0 }, decisions: [] }),
    step(s, ev) {
      if (ev.kind === 'route') return { state: { ...s, ...lfruObserve(s, ev) }, decisions: [] };
      if (ev.kind === 'prefillCounts') {
        const observed: ReplanState = { ...s, ...lfruObserve(s, ev) };
        const planned = planReplan(observed, ev.layer, ev.counts, p.capPerLayer);
        return drain({ ...observed, pending: [...observed.pending, ...planned] }, p.startPerCall);
      }
      const drained = drain(s, p.drainPerToken);
      const ticked = lfruTick(drained.state, p);
      return {
        state: { ...drained.state, ...ticked.state },
        decisions: [...drained.decisions, ...ticked.decisions],
      };
    },
  };
}

export const replan = makeReplan();
