/**
 * Routing traces: which experts the router picked, per token and per MoE layer.
 *
 * A trace holds one prompt: its header, then the prefill rows and the decode
 * tokens, each a step with one expert list per layer in router rank order:
 *   step.layers [nLayer][topK] -> expert ids
 * Traces recorded without rank order (../shared/traces/) keep their ids sorted
 * and say so in `header.rankOrder`.
 */

export interface TraceHeader {
  /** Model name as recorded (e.g. "olmoe-1b-7b"); selects a byte geometry in replay. */
  model: string;
  layers: number;
  experts: number;
  topK: number;
  promptId?: string;
  /** Prompt text when known. */
  prompt?: string;
  /** False when the ids of a layer are sorted rather than in router rank order. */
  rankOrder: boolean;
  /**
   * The recording model's expert geometry, when the recorder knew it (the engine writes it):
   * replay prices a trace of a model it has no named geometry for from these.
   */
  geometry?: TraceGeometry;
}

export interface TraceGeometry {
  /** nEmbd. */
  hidden: number;
  /** nFfExp: one expert's FFN width. */
  expertFfn: number;
  /** The container type of the expert tensors (a GGML type name: Q8_0, Q4_0, F16, ...). */
  expertType: string;
}

export type Phase = 'prefill' | 'decode';

export interface RouteStep {
  /** Prompt row (prefill) or decode token index (decode), from 0. */
  step: number;
  /** Token id at this step, when recorded. */
  token?: number;
  /** [layer][k] expert ids, rank order unless header.rankOrder is false. */
  layers: number[][];
  /** [layer][k] router probabilities, parallel to `layers`, when recorded. */
  probs?: number[][];
}

export interface Trace {
  /** Where the trace came from (file name, or a label for generated traces). */
  source: string;
  header: TraceHeader;
  prefill: RouteStep[];
  decode: RouteStep[];
}
