/**
 * Which experts hold a device slot, under a budget. Immutable by convention:
 * `applyDecisions` copies the layers it changes and shares the rest.
 *
 *   resident[layer][expert] = 1 when resident        (Uint8Array(experts) per layer)
 *   used[layer]             = resident count of the layer
 */
import { assert } from '../core/assert.js';
import type { Budget, Decision, ExpertKey } from './keys.js';

export interface Residency {
  readonly budget: Budget;
  readonly experts: number;
  readonly resident: readonly Uint8Array[];
  readonly used: readonly number[];
  readonly total: number;
}

export function emptyResidency(layers: number, experts: number, budget: Budget): Residency {
  assert(Number.isInteger(budget.slots) && budget.slots >= 0, 'budget slots is a non-negative integer');
  const resident = Array.from({ length: layers }, () => new Uint8Array(experts));
  return { budget, experts, resident, used: new Array<number>(layers).fill(0), total: 0 };
}

/** A residency holding exactly `sets[layer]`; asserts the budget. */
export function residencyOf(experts: number, budget: Budget, sets: readonly (readonly number[])[]): Residency {
  const fills: Decision[] = [];
  sets.forEach((ids, layer) => ids.forEach((expert) => fills.push({ kind: 'fill', expert: { layer, expert } })));
  return applyDecisions(emptyResidency(sets.length, experts, budget), fills);
}

export function isResident(r: Residency, layer: number, expert: number): boolean {
  return r.resident[layer][expert] === 1;
}

/** Slots a newcomer of `layer` may take without evicting anyone. */
export function freeSlots(r: Residency, layer: number): number {
  return r.budget.scope === 'layer' ? r.budget.slots - r.used[layer] : r.budget.slots - r.total;
}

export function residentIds(r: Residency, layer: number): number[] {
  const ids: number[] = [];
  const row = r.resident[layer];
  for (let e = 0; e < row.length; e++) if (row[e]) ids.push(e);
  return ids;
}

/** The keys a victim may be taken from for a newcomer of `layer`: its own layer, or every layer. */
export function victimLayers(r: Residency, layer: number): number[] {
  if (r.budget.scope === 'layer') return [layer];
  return r.resident.map((_, l) => l);
}

/**
 * Applies decisions in order. A broken rule is a policy bug, so it asserts:
 * a fill needs a free slot, a swap needs a resident victim and a non-resident
 * newcomer (and, per-layer, the same layer), so a swap never changes occupancy.
 */
export function applyDecisions(r: Residency, decisions: readonly Decision[]): Residency {
  if (decisions.length === 0) return r;
  const resident = [...r.resident];
  const used = [...r.used];
  const copied = new Set<number>();
  let total = r.total;
  const row = (layer: number): Uint8Array => {
    assert(layer >= 0 && layer < resident.length, `layer ${layer} in range`);
    if (!copied.has(layer)) {
      resident[layer] = resident[layer].slice();
      copied.add(layer);
    }
    return resident[layer];
  };
  const check = (k: ExpertKey): void => {
    assert(Number.isInteger(k.expert) && k.expert >= 0 && k.expert < r.experts, `expert ${k.expert} in range`);
  };
  for (const d of decisions) {
    if (d.kind === 'fill') {
      const { layer, expert } = d.expert;
      check(d.expert);
      const free = r.budget.scope === 'layer' ? r.budget.slots - used[layer] : r.budget.slots - total;
      assert(free > 0, `fill ${layer}/${expert}: a free slot under the budget`);
      const rw = row(layer);
      assert(rw[expert] === 0, `fill ${layer}/${expert}: not already resident`);
      rw[expert] = 1;
      used[layer]++;
      total++;
    } else {
      const { victim: v, newcomer: n } = d;
      check(v);
      check(n);
      assert(
        r.budget.scope === 'global' || v.layer === n.layer,
        `swap ${v.layer}/${v.expert} -> ${n.layer}/${n.expert}: same layer under a per-layer budget`,
      );
      const vr = row(v.layer);
      assert(vr[v.expert] === 1, `swap victim ${v.layer}/${v.expert} resident`);
      vr[v.expert] = 0;
      const nr = row(n.layer);
      assert(nr[n.expert] === 0, `swap newcomer ${n.layer}/${n.expert} not resident`);
      nr[n.expert] = 1;
      used[v.layer]--;
      used[n.layer]++;
    }
  }
  return { budget: r.budget, experts: r.experts, resident, used, total };
}
