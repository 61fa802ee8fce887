/**
 * The replay simulator: feeds a scenario's events to a policy, applies its
 * decisions to its own copy of the residency (asserting the budget) and counts.
 *
 *   init                       -> setup decisions (counted apart, not per token)
 *   prefill, per layer l:      calls of counts[l] vs residency, then prefillCounts(l)
 *   decode, per token t:       per layer l: hits/misses of route(l), then route(l)
 *                              then decodeTick(t)
 *
 * Hit rate is the decode hit rate: hits / routed (token, expert) pairs, counted
 * before the route event's decisions (a kept miss is still a miss: no second count).
 * Tokens before the scenario's scoreFrom are replayed (every event, every decision) but
 * not counted: a warm-up.
 *
 * A token's own experts are protected from eviction by that token's misses: a demand
 * policy's victim is never an expert routed in the same route event (common.ts
 * lowestResident's `pinned`), as in the engine, where a running call holds a lease on
 * each of its experts. A simulator that lets a miss evict its own token's other expert
 * reads lower for LFU, whose coldest resident is often the one just routed.
 */
import { assert } from '../core/assert.js';
import { applyDecisions, isResident, type Residency } from './residency.js';
import type { Offload, PhaseCounts } from './cost.js';
import type { Scenario } from './scenario.js';
import type { Decision, Policy, TierEvent } from './types.js';
import { guardSummary, type GuardState, type GuardSummary } from './policies/replan-guard.js';

/** A prefill call of this many rows or more is uploaded even with a host runner (docs/SPEC.md section 3). */
export const prefillStreamRowsMin = 16;

export interface ReplayCounts {
  tokens: number;
  routed: number;
  hits: number;
  misses: number;
  /** Every upload of the decode (host-less: misses included). */
  uploads: number;
  /** Uploads of experts not being missed at that moment (swaps/fills ahead of use). */
  aheadUploads: number;
  fills: number;
  swaps: number;
  /** Uploads of init: moving from the shared start to the policy's own. */
  setupUploads: number;
  decode: PhaseCounts;
  prefill?: PhaseCounts;
  /** The replan guard's layers at the end (guarded policies only). */
  guard?: GuardSummary;
}

function guardOf(state: unknown): GuardSummary | undefined {
  const g = (state as { guard?: GuardState }).guard;
  return g ? guardSummary(g) : undefined;
}

export type ReplayObserver = (
  event: TierEvent | { kind: 'init' },
  before: Residency,
  decisions: readonly Decision[],
  after: Residency,
) => void;

export function replay(policy: Policy, sc: Scenario, offload: Offload, observe?: ReplayObserver): ReplayCounts {
  const ctx = {
    layers: sc.layers,
    experts: sc.experts,
    start: sc.start,
    heat: sc.heat,
    future: policy.offline ? sc.decode : undefined,
  };
  let { state, decisions } = policy.init(ctx);
  let res = applyDecisions(sc.start, decisions);
  checkSame(state.residency, res, decisions, 'init');
  observe?.({ kind: 'init' }, sc.start, decisions, res);
  const c: ReplayCounts = {
    tokens: sc.decode.length - sc.scoreFrom,
    routed: 0,
    hits: 0,
    misses: 0,
    uploads: 0,
    aheadUploads: 0,
    fills: 0,
    swaps: 0,
    setupUploads: decisions.length,
    decode: { residentCalls: 0, missCalls: 0, streamedCalls: 0, extraUploads: 0 },
  };
  const run = (ev: TierEvent): readonly Decision[] => {
    const before = res;
    ({ state, decisions } = policy.step(state, ev));
    res = applyDecisions(before, decisions);
    checkSame(state.residency, res, decisions, ev.kind);
    observe?.(ev, before, decisions, res);
    return decisions;
  };
  if (sc.prefill) {
    const p: PhaseCounts = { residentCalls: 0, missCalls: 0, streamedCalls: 0, extraUploads: 0 };
    sc.prefill.forEach((counts, layer) => {
      counts.forEach((rows, e) => {
        if (rows === 0) return;
        if (isResident(res, layer, e)) p.residentCalls++;
        else {
          p.missCalls++;
          if (offload === 'hostless' || rows >= prefillStreamRowsMin) p.streamedCalls++;
        }
      });
      p.extraUploads += run({ kind: 'prefillCounts', layer, counts }).length;
    });
    c.prefill = p;
  }
  const warmup: ReplayCounts = { ...c, decode: { ...c.decode } };
  sc.decode.forEach((step, token) => {
    const acc = token < sc.scoreFrom ? warmup : c;
    step.forEach((experts, layer) => {
      const missed = experts.filter((e) => !isResident(res, layer, e));
      acc.routed += experts.length;
      acc.misses += missed.length;
      count(acc, run({ kind: 'route', layer, experts }), (d) => d.layer === layer && missed.includes(d.expert));
      if (offload === 'hostless') acc.uploads += missed.length;
    });
    count(acc, run({ kind: 'decodeTick', token }), () => false);
  });
  const summary = guardOf(state);
  if (summary) c.guard = summary;
  c.hits = c.routed - c.misses;
  finishDecode(c, offload);
  return c;

  function count(
    acc: ReplayCounts,
    ds: readonly Decision[],
    servesMiss: (k: { layer: number; expert: number }) => boolean,
  ): void {
    for (const d of ds) {
      const newcomer = d.kind === 'fill' ? d.expert : d.newcomer;
      if (d.kind === 'fill') acc.fills++;
      else acc.swaps++;
      const ahead = !servesMiss(newcomer);
      if (ahead) acc.aheadUploads++;
      // Host-less: a kept miss rides on the upload its call needs anyway (admit before run).
      if (offload === 'hosted' || ahead) acc.uploads++;
    }
  }
}

function finishDecode(c: ReplayCounts, offload: Offload): void {
  c.decode = {
    residentCalls: c.hits,
    missCalls: c.misses,
    streamedCalls: offload === 'hostless' ? c.misses : 0,
    extraUploads: offload === 'hostless' ? c.aheadUploads : c.uploads,
  };
}

/** The policy's own view must be what its decisions made of the replay's residency. */
function checkSame(own: Residency, mine: Residency, ds: readonly Decision[], where: string): void {
  assert(own.total === mine.total, `${where}: policy residency total ${own.total} = replay's ${mine.total}`);
  for (const d of ds) {
    for (const k of d.kind === 'fill' ? [d.expert] : [d.victim, d.newcomer]) {
      assert(
        own.resident[k.layer][k.expert] === mine.resident[k.layer][k.expert],
        `${where}: policy and replay agree on ${k.layer}/${k.expert}`,
      );
    }
  }
}
