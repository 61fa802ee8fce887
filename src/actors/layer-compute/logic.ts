/**
 * Layer-compute logic (pure): which buffers a step writes, how big its routes are, and the
 * per-step totals read from layerStats. The actor owns the arrays; this decides about them.
 *
 *   decode step t writes ring slot (t mod stepRingSlots); the prefill writes its own buffers
 *   (one prefill per request). A decode report stays readable for stepRingSlots - 1 more decode
 *   steps, so an observer may read the reports of several steps at once (in a batch), as long
 *   as it reads each within that many steps.
 */
import { LAYER_STAT_FIELDS } from './messages.js';

export interface StepShape {
  nLayer: number;
  /** Experts routed per token (top-k). */
  k: number;
}

/**
 * Decode steps whose reports are kept readable in the actor's ring. Observers that batch their
 * reading of the reports (src/engine/tier/request.ts) must read within this many steps.
 */
export const stepRingSlots = 16;

/** The ring slot the decode step after `last` writes (the first decode step: slot 0). */
export function nextRingSlot(last: number | undefined): number {
  return last === undefined ? 0 : (last + 1) % stepRingSlots;
}

/** Int32 entries of a step's routes: [nTokens][nLayer][k]. */
export function routesLength(shape: StepShape, nTokens: number): number {
  return nTokens * shape.nLayer * shape.k;
}

/** Float64 entries of a step's layerStats: [nLayer][LAYER_STAT_FIELDS]. */
export function layerStatsLength(shape: StepShape): number {
  return shape.nLayer * LAYER_STAT_FIELDS;
}

/** Sum over layers of the MoE half's time (moeEnd - moeStart), ns. */
export function moeNs(layerStats: Float64Array): number {
  let ns = 0;
  for (let at = 0; at < layerStats.length; at += LAYER_STAT_FIELDS) ns += layerStats[at + 3] - layerStats[at + 2];
  return ns;
}

/** Layer `layer`'s experts for token `t` of a step: a view into routes (no copy). */
export function routedExperts(routes: Int32Array, shape: StepShape, t: number, layer: number): Int32Array {
  const at = (t * shape.nLayer + layer) * shape.k;
  return routes.subarray(at, at + shape.k);
}
