/**
 * Plain LFU, a demand policy: every routed miss is kept, evicting the resident
 * with the fewest routings so far (counts are kept for every expert, resident or
 * not: "perfect" LFU). Ties go to the least recently routed.
 */
import type { Residency } from '../residency.js';
import type { Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { admitEveryMiss, rowsOf, withRow, type Rows } from './common.js';

export interface LfuState {
  residency: Residency;
  /** count[layer][expert]: routings seen (prefill rows included). */
  count: Rows;
  lastUse: Rows;
  clock: number;
}

export const lfu: Policy<LfuState> = {
  name: 'lfu',
  kind: 'demand',
  offline: false,
  init(ctx: PolicyContext): PolicyStep<LfuState> {
    const state = {
      residency: ctx.start,
      count: rowsOf(ctx.layers, ctx.experts),
      lastUse: rowsOf(ctx.layers, ctx.experts, -1),
      clock: 0,
    };
    return { state, decisions: [] };
  },
  step(s: LfuState, ev: TierEvent): PolicyStep<LfuState> {
    if (ev.kind === 'decodeTick') return { state: s, decisions: [] };
    const clock = s.clock + 1;
    if (ev.kind === 'prefillCounts') {
      const count = withRow(s.count, ev.layer, (row) => ev.counts.forEach((c, e) => (row[e] += c)));
      const lastUse = withRow(s.lastUse, ev.layer, (row) => ev.counts.forEach((c, e) => c > 0 && (row[e] = clock)));
      return { state: { ...s, count, lastUse, clock }, decisions: [] };
    }
    const count = withRow(s.count, ev.layer, (row) => ev.experts.forEach((e) => row[e]++));
    const lastUse = withRow(s.lastUse, ev.layer, (row) => ev.experts.forEach((e) => (row[e] = clock)));
    // Count first, recency breaks ties: clock < 2^40 keeps the sum exact in a double.
    const score = (l: number, x: number): number => count[l][x] * 2 ** 40 + lastUse[l][x];
    const { residency, decisions } = admitEveryMiss(s.residency, ev.layer, ev.experts, score);
    return { state: { residency, count, lastUse, clock }, decisions };
  },
};
