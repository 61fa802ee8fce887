/** What a request takes and yields: engine.generate and a conversation's turns (src/engine/conversation.ts). */
import type { SamplingOptions } from './sampler.js';
import type { GenerationStats } from './stats.js';

export interface GenerateOptions extends SamplingOptions {
  maxTokens?: number;
  signal?: AbortSignal;
  /** Prepend the BOS token when the tokenizer asks for it (default true). */
  addBos?: boolean;
  /** Stop at an end-of-generation token (eos, <|im_end|>...; default true). */
  stopAtEos?: boolean;
  /** Write this request's routing (prefill rows, decode steps) to this file, in the policy lab's JSONL format. */
  traceRoutes?: string;
  /**
   * Called once when the request ends (finished, aborted or failed) with its own statistics. With
   * requests running together (parallel > 1), engine.lastStats is whichever ended last: this is the
   * request's. A throw from it is ignored.
   */
  onStats?: (stats: GenerationStats) => void;
}

export interface GeneratedToken {
  id: number;
  /** Text this token completes (may be '' while a multi-byte character is incomplete). */
  text: string;
  /** 0 for the first generated token. */
  index: number;
  /** Milliseconds since generate() was called. */
  elapsedMs: number;
}
