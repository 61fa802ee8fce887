/**
 * The smallest words of the tier vocabulary, apart so that residency.ts and types.ts
 * can both use them without importing each other.
 */
export interface ExpertKey {
  layer: number;
  expert: number;
}

export type Decision = { kind: 'fill'; expert: ExpertKey } | { kind: 'swap'; victim: ExpertKey; newcomer: ExpertKey };

/** Per-layer: each layer owns `slots` device slots. Global: `slots` shared by all layers. */
export type Budget = { scope: 'layer'; slots: number } | { scope: 'global'; slots: number };
