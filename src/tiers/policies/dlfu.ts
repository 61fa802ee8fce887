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
 * Default H = 16 tokens, chosen on the shared OLMoE trace (docs/REPLAY.md, "Decayed LFU"): the best
 * mean hit rate over budgets 8..32 among 4..1024 (0.655; 8 and 32 within 0.004; plain LFU 0.640,
 * LRU 0.633). Its coding answer moves between sub-topics every few dozen tokens, so reuse that old
 * is worth little; a longer request on one topic would favour a longer half-life (the option).
 */
import type { Residency } from '../residency.js';
import type { Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { admitEveryMiss, rowsOf, withRow, type Rows } from './common.js';

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
  const c = s.count[layer][expert];
  return c > 0 ? Math.log2(c) + s.stamp[layer][expert] / p.halfLifeTokens : -Infinity;
}

function decayedAdd(count: Float64Array, stamp: Float64Array, e: number, add: number, now: number, h: number): void {
  count[e] = count[e] * 2 ** (-(now - stamp[e]) / h) + add;
  stamp[e] = now;
}

/** Each layer's heat row scaled to sum to `routings` (an all-zero row stays zero). */
export function heatPrior(heat: readonly (readonly number[])[], routings: number): number[][] {
  return heat.map((row) => {
    const sum = row.reduce((a, b) => a + b, 0);
    return sum > 0 ? row.map((c) => (c * routings) / sum) : row.map(() => 0);
  });
}

export function makeDlfu(p: DlfuParams = dlfuDefaults): Policy<DlfuState> {
  checkDlfuParams(p);
  const h = p.halfLifeTokens;
  return {
    name: 'dlfu',
    kind: 'demand',
    offline: false,
    init(ctx: PolicyContext): PolicyStep<DlfuState> {
      return { state: { residency: ctx.start, count: rowsOf(ctx.layers, ctx.experts, 0, ctx.heat && heatPrior(ctx.heat, h)), stamp: rowsOf(ctx.layers, ctx.experts), tokens: 0 }, decisions: [] };
    },
    step(s: DlfuState, ev: TierEvent): PolicyStep<DlfuState> {
      if (ev.kind === 'decodeTick') return { state: { ...s, tokens: s.tokens + 1 }, decisions: [] };
      const now = s.tokens;
      let stamp = s.stamp;
      const count = withRow(s.count, ev.layer, (row) => {
        stamp = withRow(s.stamp, ev.layer, (st) => {
          if (ev.kind === 'route') ev.experts.forEach((e) => decayedAdd(row, st, e, 1, now, h));
          else ev.counts.forEach((c, e) => c > 0 && decayedAdd(row, st, e, c, now, h));
        });
      });
      const state: DlfuState = { ...s, count, stamp };
      if (ev.kind === 'prefillCounts') return { state, decisions: [] };
      const score = (l: number, x: number): number => dlfuScore(state, p, l, x);
      const { residency, decisions } = admitEveryMiss(s.residency, ev.layer, ev.experts, score);
      return { state: { ...state, residency }, decisions };
    },
  };
}

export const dlfu = makeDlfu();
