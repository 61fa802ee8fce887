/**
 * An MoE layer's routing as llama.cpp computes it (llama-graph.cpp build_moe_ffn), for one row of
 * router logits: the reference forward pass's (the native route_phase is its twin, tested against it).
 *
 *   logits += ffn_gate_inp.bias                                       (HParams.routerBias, by the caller)
 *   probs = softmax(logits) | sigmoid(logits) | logits                (HParams.gating; logits: softmax_weight)
 *   sel   = probs (+ exp_probs_b: choosing only)                      (HParams.expertBias)
 *   groups: keep the `used` groups with the best top-2 sums of sel    (HParams.expertGroups)
 *   ids   = top-k of sel, rank order (or the forced ids)
 *   w     = probs[ids], / max(sum, 6.103515625e-5) when normTopK (or forced), * expertWeightsScale
 *           softmax_weight: w = softmax(probs[ids]) over the k (forced ids too), no renormalisation
 */
import type { HParams } from '../model/types.js';
import { sigmoid, softmax, topK } from './math.js';

/** llama.cpp clamps the renormalising sum from below (ggml_clamp at 2^-14). */
export const WEIGHTS_SUM_MIN = 6.103515625e-5;

type RoutingParams = Pick<HParams, 'nExpertUsed' | 'normTopK' | 'gating' | 'expertGroups' | 'expertWeightsScale'>;

/** The chosen experts (rank order) and their weights; `logits` [nExpert] become the probabilities in place. */
export function route(
  hp: RoutingParams,
  logits: Float32Array,
  bias: Float32Array | undefined,
  forced?: readonly number[],
): { ids: number[]; weights: number[] } {
  const probs = logits;
  if (hp.gating === 'sigmoid') for (let i = 0; i < probs.length; i++) probs[i] = sigmoid(probs[i]);
  else if (hp.gating !== 'softmax_weight') softmax(probs);
  const ids = forced ? [...forced] : topK(selection(hp, probs, bias), hp.nExpertUsed);
  let weights = ids.map((e) => probs[e]);
  if (hp.gating === 'softmax_weight') softmax(weights);
  else if (hp.normTopK || forced) {
    const total = Math.max(
      weights.reduce((s, x) => s + x, 0),
      WEIGHTS_SUM_MIN,
    );
    weights = weights.map((x) => x / total);
  }
  const scale = hp.expertWeightsScale;
  if (scale !== undefined && scale !== 0 && scale !== 1) weights = weights.map((x) => x * scale);
  return { ids, weights };
}

/** The scores the top-k is taken over: probs, biased, with the experts of the dropped groups at -inf. */
export function selection(
  hp: Pick<HParams, 'expertGroups'>,
  probs: Float32Array,
  bias: Float32Array | undefined,
): Float32Array {
  const groups = hp.expertGroups;
  if (!bias && !(groups && groups.count > 1)) return probs;
  const sel = Float32Array.from(probs, (p, i) => (bias ? p + bias[i] : p));
  if (!groups || groups.count <= 1) return sel;
  const size = sel.length / groups.count;
  const scores = Array.from({ length: groups.count }, (_, g) => {
    const top = topK(sel.subarray(g * size, (g + 1) * size), Math.min(2, size));
    return top.reduce((s, i) => s + sel[g * size + i], 0);
  });
  const kept = new Set(topK(Float32Array.from(scores), groups.used));
  for (let g = 0; g < groups.count; g++) if (!kept.has(g)) sel.fill(-Infinity, g * size, (g + 1) * size);
  return sel;
}
