/**
 * A prediction source for traces without hidden states: the next layer's true
 * routing, degraded to a stated recall. The recall is an assumption the user states, not a
 * measurement: a real predictor's (the router applied a layer early) is measured by
 * bench/predict.mjs on models the engine runs.
 *
 *   for each true expert, in the trace's order: kept with probability recall, else replaced by
 *   a wrong one, uniform over the experts neither routed nor already predicted
 *   ranked: the i-th of k scores k - i (the trace's order stands in for the router's rank)
 */
import type { Rng } from '../core/prng.js';

export function oraclePrediction(rng: Rng, routed: readonly number[], experts: number, recall: number): number[] {
  const out: number[] = [];
  for (const e of routed) {
    // Two draws per expert whatever the outcome, so the stream stays aligned across recalls.
    const keep = rng() < recall;
    const pick = rng();
    const wrong: number[] = [];
    for (let x = 0; x < experts; x++) if (!routed.includes(x) && !out.includes(x)) wrong.push(x);
    out.push(keep || wrong.length === 0 ? e : wrong[Math.min(wrong.length - 1, Math.floor(pick * wrong.length))]);
  }
  return out;
}

/** Scores for packPrefetch: the prediction's order, highest first. */
export function rankScores(prediction: readonly number[]): number[] {
  return prediction.map((_, i) => prediction.length - i);
}
