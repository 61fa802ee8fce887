/** Small pure helpers shared by the policies: copy-on-write rows, victim search, demand admission. */
import { applyDecisions, freeSlots, isResident, victimLayers, type Residency } from '../residency.js';
import type { Decision, ExpertKey } from '../types.js';

/** Per-layer numeric rows (scores, times): row[layer][expert]. Replaced, never mutated, once published. */
export type Rows = readonly Float64Array[];

export function rowsOf(layers: number, experts: number, fill = 0, from?: readonly (readonly number[])[]): Rows {
  return Array.from({ length: layers }, (_, l) => {
    const row = new Float64Array(experts).fill(fill);
    if (from) row.set(from[l]);
    return row;
  });
}

/** A copy of `rows` whose `layer` row is a fresh copy that `edit` may change. */
export function withRow(rows: Rows, layer: number, edit: (row: Float64Array) => void): Rows {
  const out = [...rows];
  const row = rows[layer].slice();
  edit(row);
  out[layer] = row;
  return out;
}

/**
 * The resident with the lowest score that a newcomer of `layer` may evict:
 * same layer (per-layer budget) or any layer (global), never one of `pinned`
 * (the experts the current event routes at `layer`), nor the whole current
 * layer when `otherLayersOnly`. Ties go to the lowest layer, then the lowest id.
 */
export function lowestResident(
  r: Residency,
  layer: number,
  pinned: readonly number[],
  score: (layer: number, expert: number) => number,
  otherLayersOnly = false,
): ExpertKey | undefined {
  let best: ExpertKey | undefined;
  let bestScore = Infinity;
  for (const l of victimLayers(r, layer)) {
    if (otherLayersOnly && l === layer) continue;
    const row = r.resident[l];
    for (let e = 0; e < row.length; e++) {
      if (!row[e] || (l === layer && pinned.includes(e))) continue;
      const s = score(l, e);
      if (s < bestScore) {
        best = { layer: l, expert: e };
        bestScore = s;
      }
    }
  }
  return best;
}

/** The routed experts of `layer` that are not resident, in rank order. */
export function missesOf(r: Residency, layer: number, experts: readonly number[]): number[] {
  return experts.filter((e) => !isResident(r, layer, e));
}

/** Plain demand admission: fill a free slot, else evict the lowest-scoring unpinned resident. */
export function admitMiss(
  r: Residency,
  layer: number,
  expert: number,
  pinned: readonly number[],
  score: (layer: number, expert: number) => number,
): Decision | undefined {
  const newcomer = { layer, expert };
  if (freeSlots(r, layer) > 0) return { kind: 'fill', expert: newcomer };
  const victim = lowestResident(r, layer, pinned, score);
  return victim ? { kind: 'swap', victim, newcomer } : undefined;
}

/** A demand policy's route: every miss in rank order is admitted (admitMiss), each seeing the ones before it. */
export function admitEveryMiss(
  r: Residency,
  layer: number,
  experts: readonly number[],
  score: (layer: number, expert: number) => number,
): { residency: Residency; decisions: Decision[] } {
  let residency = r;
  const decisions: Decision[] = [];
  for (const e of missesOf(residency, layer, experts)) {
    const d = admitMiss(residency, layer, e, experts, score);
    if (!d) continue;
    decisions.push(d);
    residency = applyDecisions(residency, [d]);
  }
  return { residency, decisions };
}
