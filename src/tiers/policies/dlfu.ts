/**
 * Decayed LFU, a demand policy: every routed miss is kept, evicting the resident with the lowest
 * decayed routing count, where each routing's weight halves every `halfLifeTokens` decode tokens
 * (prefill rows count at time 0). Plain LFU remembers a topic the request left long ago; LRU
 * forgets an expert routed every other token the moment two others pass it; the half-life sits
 * between them, and a wrong warm start (a heat file from other prompts) fades within a few
 * half-lives.
 *
 *   value(e, t) = count_e x 2^(-(t - stamp_e) / H)      updated at each routing: count = value + 1, stamp = t
 *
 * Compared at one time t, the order of value(e, t) is that of log2(count_e) + stamp_e / H: the
 * score kept here (no decay pass over every expert each token, no underflow). Ties go to the lowest
 * id (lowestResident). A heat file, when there is one, is the counts at time 0, each layer's row
 * scaled to sum to H routings: whatever the number of requests merged into it, a warm start weighs
 * what H routings of this request weigh, so a wrong one is outvoted within about a half-life.
 *
 * One implementation: the arithmetic and the victim choice are native (include/mt_policy.h), the code
 * the engine's tier runs at the moment a slot is needed (native/tier/tier_policy.cc); this file only
 * holds the replay's rows and walks its events. Misses are kept in expert-id order, the order the
 * tier binds a layer's routed experts in, so the engine and the replay pair the same victims with the
 * same newcomers (tests/engine/replay-decisions.test.ts compares every eviction).
 *
 * Default H = 16 tokens, chosen on the shared OLMoE trace (docs/REPLAY.md, "Decayed LFU"): the best
 * mean hit rate over budgets 8..32 among 4..1024 (0.655; 8 and 32 within 0.004; plain LFU 0.640,
 * LRU 0.633). Its coding answer moves between sub-topics every few dozen tokens, so reuse that old
 * is worth little; a longer request on one topic would favour a longer half-life (the option).
 */
import { nativePolicy } from '../../native/policy.js';
import { applyDecisions, freeSlots, isResident, victimLayers, type Residency } from '../residency.js';
import type { Decision, ExpertKey, Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { rowsOf, withRow, type Rows } from './common.js';

export interface DlfuParams {
  halfLifeTokens: number;
}

export const dlfuDefaults: DlfuParams = { halfLifeTokens: 16 };

/** The half-lives the option accepts: a token at least, at most 2^20 (beyond, it is plain LFU over any request). */
export const dlfuHalfLifeMax = 2 ** 20;

export interface DlfuState {
  residency: Residency;
  /** count[layer][expert]: the decayed count as of stamp[layer][expert]. */
  count: Rows;
  stamp: Rows;
  /** Decode tokens ticked so far (the decay clock). */
  tokens: number;
}

export function checkDlfuParams(p: DlfuParams, where = 'halfLifeTokens'): void {
  const h = p.halfLifeTokens;
  if (typeof h !== 'number' || !Number.isFinite(h) || h < 1 || h > dlfuHalfLifeMax) {
    throw new RangeError(`${where}: a number of tokens in [1, ${dlfuHalfLifeMax}], got ${String(h)}`);
  }
}

/** The order-preserving score of an expert's decayed count (see the top of the file); -Infinity never routed. */
export function dlfuScore(s: DlfuState, p: DlfuParams, layer: number, expert: number): number {
  return nativePolicy().dlfuScore(s.count[layer], s.stamp[layer], expert, p.halfLifeTokens);
}

/** Each layer's heat row scaled to sum to `routings` (an all-zero row stays zero). */
export function heatPrior(heat: readonly (readonly number[])[], routings: number): number[][] {
  return heat.map((row) => {
    const sum = row.reduce((a, b) => a + b, 0);
    return sum > 0 ? row.map((c) => (c * routings) / sum) : row.map(() => 0);
  });
}

/** The counts after `adds` (per expert, 0: untouched) at `layer`, at the state's clock. */
function added(s: DlfuState, p: DlfuParams, layer: number, adds: Float64Array): DlfuState {
  let stamp = s.stamp;
  const count = withRow(s.count, layer, (row) => {
    stamp = withRow(s.stamp, layer, (st) => nativePolicy().dlfuAdd(row, st, adds, s.tokens, p.halfLifeTokens));
  });
  return { ...s, count, stamp };
}

/** The native victim: the lowest-scored resident of the layers a newcomer of `layer` may evict from, never one of `pinned`. */
function victimOf(
  s: DlfuState,
  p: DlfuParams,
  r: Residency,
  layer: number,
  pinned: readonly number[],
): ExpertKey | undefined {
  const native = nativePolicy();
  let best: ExpertKey | undefined;
  let bestScore = Infinity;
  for (const l of victimLayers(r, layer)) {
    const eligible = Uint8Array.from(r.resident[l], (v, e) =>
      v === 1 && !(l === layer && pinned.includes(e)) ? 1 : 0,
    );
    const e = native.dlfuVictim(s.count[l], s.stamp[l], eligible, p.halfLifeTokens);
    if (e < 0) continue;
    const score = native.dlfuScore(s.count[l], s.stamp[l], e, p.halfLifeTokens);
    if (best === undefined || score < bestScore) [best, bestScore] = [{ layer: l, expert: e }, score];
  }
  return best;
}

/** A route: every miss kept, in expert-id order (the tier's bind order), each seeing the ones before it. */
function keepMisses(s: DlfuState, p: DlfuParams, layer: number, experts: readonly number[]): PolicyStep<DlfuState> {
  let residency = s.residency;
  const decisions: Decision[] = [];
  for (const e of [...experts].sort((a, b) => a - b)) {
    if (isResident(residency, layer, e)) continue;
    const newcomer = { layer, expert: e };
    const victim = freeSlots(residency, layer) > 0 ? undefined : victimOf(s, p, residency, layer, experts);
    const d: Decision | undefined = victim
      ? { kind: 'swap', victim, newcomer }
      : freeSlots(residency, layer) > 0
        ? { kind: 'fill', expert: newcomer }
        : undefined;
    if (!d) continue;
    decisions.push(d);
    residency = applyDecisions(residency, [d]);
  }
  return { state: { ...s, residency }, decisions };
}

export function makeDlfu(p: DlfuParams = dlfuDefaults): Policy<DlfuState> {
  checkDlfuParams(p);
  const h = p.halfLifeTokens;
  return {
    name: 'dlfu',
    kind: 'demand',
    offline: false,
    init(ctx: PolicyContext): PolicyStep<DlfuState> {
      return {
        state: {
          residency: ctx.start,
          count: rowsOf(ctx.layers, ctx.experts, 0, ctx.heat && heatPrior(ctx.heat, h)),
          stamp: rowsOf(ctx.layers, ctx.experts),
          tokens: 0,
        },
        decisions: [],
      };
    },
    step(s: DlfuState, ev: TierEvent): PolicyStep<DlfuState> {
      if (ev.kind === 'decodeTick') return { state: { ...s, tokens: s.tokens + 1 }, decisions: [] };
      const adds = new Float64Array(s.count[ev.layer].length);
      if (ev.kind === 'route') for (const e of ev.experts) adds[e] = 1;
      else
        ev.counts.forEach((c, e) => {
          adds[e] = c;
        });
      const state = added(s, p, ev.layer, adds);
      return ev.kind === 'prefillCounts' ? { state, decisions: [] } : keepMisses(state, p, ev.layer, ev.experts);
    },
  };
}

export const dlfu = makeDlfu();
