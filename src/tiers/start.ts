/**
 * Starting content of the device slots, the same for every policy compared:
 *   empty: every slot free
 *   ids:   each layer's lowest expert ids (the cold start of docs/SPEC.md section 1)
 *   heat:  each layer's hottest experts from a heat table (the warmstart)
 * Under a global budget the slots are split evenly over layers for `ids`
 * (the first layers take the remainder) and go to the hottest (layer, expert)
 * pairs of the whole model for `heat`.
 */
import { InvalidOptionError } from '../core/errors.js';
import { emptyResidency, residencyOf, type Residency } from './residency.js';
import type { Budget, HeatTable } from './types.js';

export type StartKind = 'empty' | 'ids' | 'heat';

/** Expert ids of a row ordered by count descending, ties by id ascending. */
export function hottestFirst(row: readonly number[]): number[] {
  return row.map((_, e) => e).sort((a, b) => row[b] - row[a] || a - b);
}

export function startResidency(
  kind: StartKind,
  layers: number,
  experts: number,
  budget: Budget,
  heat?: HeatTable,
): Residency {
  if (kind === 'empty') return emptyResidency(layers, experts, budget);
  if (budget.scope === 'layer' && budget.slots > experts) {
    throw new InvalidOptionError('budget', `at most ${experts} slots per layer (the expert count)`, budget.slots);
  }
  if (budget.scope === 'global' && budget.slots > layers * experts) {
    throw new InvalidOptionError('budget', `at most ${layers * experts} global slots`, budget.slots);
  }
  if (kind === 'ids') {
    const per = (l: number): number =>
      budget.scope === 'layer' ? budget.slots : Math.floor(budget.slots / layers) + (l < budget.slots % layers ? 1 : 0);
    return residencyOf(
      experts,
      budget,
      Array.from({ length: layers }, (_, l) => range(per(l))),
    );
  }
  if (!heat) throw new InvalidOptionError('start', 'a heat table for start "heat" (give --heat-from-prefix)', kind);
  if (budget.scope === 'layer') {
    return residencyOf(
      experts,
      budget,
      heat.map((row) => hottestFirst(row).slice(0, budget.slots)),
    );
  }
  const pairs: [number, number, number][] = [];
  heat.forEach((row, l) => row.forEach((c, e) => pairs.push([c, l, e])));
  pairs.sort((a, b) => b[0] - a[0] || a[1] - b[1] || a[2] - b[2]);
  const sets: number[][] = Array.from({ length: layers }, () => []);
  for (const [, l, e] of pairs.slice(0, budget.slots)) sets[l].push(e);
  return residencyOf(experts, budget, sets);
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
