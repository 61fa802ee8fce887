/**
 * Plain LRU, a demand policy: every routed miss is kept, evicting the resident
 * least recently routed. The clock counts route events, so recency compares
 * across layers under a global budget.
 */
import type { Residency } from '../residency.js';
import type { Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { admitEveryMiss, rowsOf, withRow, type Rows } from './common.js';

export interface LruState {
  residency: Residency;
  /** lastUse[layer][expert]: clock of its last routing, -1 never. */
  lastUse: Rows;
  clock: number;
}

export const lru: Policy<LruState> = {
  name: 'lru',
  kind: 'demand',
  offline: false,
  init(ctx: PolicyContext): PolicyStep<LruState> {
    return { state: { residency: ctx.start, lastUse: rowsOf(ctx.layers, ctx.experts, -1), clock: 0 }, decisions: [] };
  },
  step(s: LruState, ev: TierEvent): PolicyStep<LruState> {
    if (ev.kind === 'decodeTick') return { state: s, decisions: [] };
    const clock = s.clock + 1;
    const routed = ev.kind === 'route' ? ev.experts : ev.counts.flatMap((c, e) => (c > 0 ? [e] : []));
    const lastUse = withRow(s.lastUse, ev.layer, (row) => routed.forEach((e) => (row[e] = clock)));
    if (ev.kind === 'prefillCounts') return { state: { ...s, lastUse, clock }, decisions: [] };
    const { residency, decisions } = admitEveryMiss(s.residency, ev.layer, ev.experts, (l, x) => lastUse[l][x]);
    return { state: { residency, lastUse, clock }, decisions };
  },
};
