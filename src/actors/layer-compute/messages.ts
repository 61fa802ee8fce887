/**
 * Messages of the layer-compute actor. One evaluation step runs every layer natively (the
 * per-layer critical path never crosses into JavaScript); what it publishes is one report per
 * step, read in place from the buffers the eval filled:
 *
 *   routes      Int32Array   [nTokens][nLayer][k]   routed expert ids, rank order
 *   layerStats  Float64Array [nLayer][8]            [startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs]
 */

/** Fields per layer of layerStats: the native constant's one owner (mt_forward.h, checked against the addon at load). */
export { LAYER_STAT_FIELDS } from '../../native/constants.js';

export type StepPhase = 'prefill' | 'decode';

/** Evaluate tokens at position; logits of the last row land in `logits`. */
export interface EvaluateStep {
  kind: 'evaluate';
  phase: StepPhase;
  tokens: Int32Array;
  position: number;
  logits: Float32Array;
  /** Prefill replan: each layer's rows per expert while later layers compute (posted from the eval thread). */
  onLayerRouted?: (layer: number, counts: Int32Array) => void;
  /** [nTokens][nLayer][k]: the experts to run instead of the router's top-k (routesFrom, a simulation); the report's routes are these. */
  forcedRoutes?: Int32Array;
  /** Continuous batching: each row's sequence and position, the rows that get logits (NativeEvalOptions); position is then 0. */
  batch?: BatchRows;
}

/** The rows of a batched step (src/engine/batch/scheduler.ts): NativeEvalOptions seqIds / positions / logitRows. */
export interface BatchRows {
  seqIds: Int32Array;
  positions: Int32Array;
  logitRows: Int32Array;
}

/**
 * What one step produced. The buffers are the actor's: a decode step's stay valid for
 * stepRingSlots - 1 more decode steps (logic.ts), the prefill's until the next prefill; a
 * subscriber that keeps a report longer copies what it needs.
 */
export interface LayerStepReport {
  phase: StepPhase;
  /** Position of the step's first token in the context. */
  position: number;
  nTokens: number;
  /** The step's first token id (the id a decode step evaluated; callers reuse their token arrays). */
  firstToken: number;
  /** A batched decode step's token ids, one per row (its own copy); undefined for one-row steps. */
  tokens?: Int32Array;
  routes: Int32Array;
  layerStats: Float64Array;
  /** The decode ring slot the step wrote (0 .. stepRingSlots - 1); -1 for a prefill or a batched step (its own buffers, valid as long as the report is kept). */
  slot: number;
}
