/**
 * How a synthetic model routes. Two kinds:
 *
 *   planted    each (layer, topic) prefers 2k experts by a large logit bonus: a prompt locks into
 *              one topic and its decode uses those 2k experts and nothing else (the tests' models).
 *   realistic  the router's logit for expert e at layer l is the sum of three parts, each with a
 *              standard deviation in logits fitted to a real trace (OLMoE-1B-7B's decode):
 *                topic    sigmaTopic   w[l][t][e] . a        (the prompt's topic: a broad lean, not a lock)
 *                context  sigmaContext v[l][e] . s(token)    (s drifts slowly along the text: reuse)
 *                token    sigmaToken   noise[l][e] . u_token (the token itself: spread)
 *
 * The context part lives in the residual stream: every token's embedding carries a context vector
 * s(v) in m directions of its own (orthogonal to the topic centroids and the token vectors), and
 * along each topic's word cycle (the order greedy decoding walks) s is an AR(1) walk with lag-1
 * correlation contextRho, so consecutive tokens of a continuation share most of their context and
 * tokens 16 apart little of it. The attention of every layer also writes into those directions
 * (attentionContextShare of its output), so the router of a layer reads a context the residual
 * entering the layer did not yet hold: a next-layer predictor has a real but imperfect signal.
 */
import { Rng } from './prng.js';

export type RoutingKind = 'realistic' | 'planted';
export const ROUTING_KINDS: readonly RoutingKind[] = ['realistic', 'planted'];

export const REALISTIC = {
  /** Logit std of each part (token part: the router's noise rows, as planted). */
  sigmaTopic: 0.3,
  sigmaContext: 2.0,
  sigmaToken: 1.15,
  /** Lag-1 correlation of the context walk along a topic's cycle. */
  contextRho: 0.72,
  /** Directions that carry the context. */
  contextDims: 16,
  /** Norm of the context part of an embedding, beside topic weight 1 and token weight 1. */
  contextWeight: 0.6,
  /**
   * What each layer's attention writes into the context directions, per direction, over the
   * embedding's context part (for attention values of unit spread): the share of a layer's
   * routing that the residual entering the layer does not hold yet.
   */
  attentionContextShare: 0.4,
} as const;

/** The context directions and every token's context coefficients s(v) [m]. */
export class ContextField {
  readonly coefficients: Float32Array[];

  constructor(nVocab: number, cycles: readonly number[][], seed: number) {
    const m = REALISTIC.contextDims;
    const rng = new Rng(seed, 'context');
    this.coefficients = Array.from({ length: nVocab }, () => {
      const s = new Float32Array(m);
      for (let j = 0; j < m; j++) s[j] = rng.normal();
      return s;
    });
    // Along each cycle: s_i = rho s_{i-1} + sqrt(1 - rho^2) xi_i (unit variance kept).
    const rho = REALISTIC.contextRho;
    const fresh = Math.sqrt(1 - rho * rho);
    for (const cycle of cycles) {
      for (let i = 1; i < cycle.length; i++) {
        const prev = this.coefficients[cycle[i - 1]];
        const cur = this.coefficients[cycle[i]];
        for (let j = 0; j < m; j++) cur[j] = rho * prev[j] + fresh * cur[j];
      }
    }
  }
}

/**
 * The attention output's context writes of one layer: o[j] [qDim], so that row r of attn_output
 * gains sum_j d_j[r] o_j (a rank-m map from the attention's mixed values into the context).
 */
export function attentionContextMaps(seed: number, layer: number, qDim: number): Float32Array[] {
  const rng = new Rng(seed, `attention-context:${layer}`);
  const sd = (REALISTIC.attentionContextShare * REALISTIC.contextWeight) / Math.sqrt(REALISTIC.contextDims * qDim);
  return Array.from({ length: REALISTIC.contextDims }, () => {
    const o = new Float32Array(qDim);
    for (let i = 0; i < qDim; i++) o[i] = sd * rng.normal();
    return o;
  });
}

/** Per-layer router weights of the realistic parts: topic[t][e] and context[j][e], standard normal. */
export function realisticRouterWeights(
  seed: number,
  layer: number,
  topics: number,
  experts: number,
): { topic: Float32Array[]; context: Float32Array[] } {
  const rng = new Rng(seed, `router-parts:${layer}`);
  const normals = (n: number): Float32Array => {
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = rng.normal();
    return v;
  };
  return {
    topic: Array.from({ length: topics }, () => normals(experts)),
    context: Array.from({ length: REALISTIC.contextDims }, () => normals(experts)),
  };
}
