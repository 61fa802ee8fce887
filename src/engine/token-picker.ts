/**
 * A request's tokens, one logits row at a time: sampled, checked against the stop conditions
 * (end of generation, maxTokens, the sequence's context), decoded to text; the request's stats
 * kept. The one-at-a-time path (engine.ts run) and the batched one (batch/batched-requests.ts)
 * both pick their tokens here.
 */
import type { Tokenizer } from '../model/tokenizer/index.js';
import type { ContextTurn, TurnStart } from './conversation.js';
import type { GenerateOptions, GeneratedToken } from './generate-options.js';
import type { RequestTrace } from './request-trace.js';
import { createSampler, type Sampler } from './sampler.js';
import { rate, type GenerationStats } from './stats.js';

/** The stats of a request before its first eval (a conversation's turn: what it reused and replayed). */
export function newStats(start: TurnStart, isTurn: boolean): GenerationStats {
  return {
    promptTokens: start.tokens.length,
    generatedTokens: 0,
    ttftMs: 0,
    prefillMs: 0,
    decodeMs: 0,
    prefillTokPerS: 0,
    decodeTokPerS: 0,
    finishReason: 'length',
    msPerToken: 0,
    ...(isTurn && { cachedTokens: start.position, replayedTokens: start.replayedTokens }),
  };
}

/** The request's own stats to its onStats (a throw there is the caller's, and changes nothing here). */
export function reportStats(options: GenerateOptions, stats: GenerationStats): void {
  try {
    options.onStats?.(stats);
  } catch {
    // the caller's callback: its failure is not the request's
  }
}

/** The rates once the request completed (decodeMs, prefillMs and the counts set). */
export function completeRates(stats: GenerationStats): void {
  stats.prefillTokPerS = rate(stats.promptTokens, stats.prefillMs);
  stats.decodeTokPerS = rate(Math.max(0, stats.generatedTokens - 1), stats.decodeMs);
  stats.msPerToken = stats.generatedTokens > 1 ? stats.decodeMs / (stats.generatedTokens - 1) : 0;
}

export class TokenPicker {
  private readonly sampler: Sampler;
  private readonly streamer: ReturnType<Tokenizer['createStreamDecoder']>;

  constructor(
    private readonly options: GenerateOptions,
    private readonly maxTokens: number,
    private readonly tokenizer: Tokenizer,
    /** Positions of the request's sequence. */
    private readonly contextTokens: number,
    /** When generate() was called (performance.now(): TTFT and elapsedMs count from it). */
    private readonly started: number,
    private readonly stats: GenerationStats,
    private readonly trace: RequestTrace,
    private readonly turn: ContextTurn | undefined,
  ) {
    this.sampler = createSampler(options);
    this.streamer = tokenizer.createStreamDecoder({ special: false });
  }

  /**
   * Token `index` from the logits of the row at position - 1; last: the request ends with it (its
   * finishReason set). The last piece of text also carries any bytes the stream decoder still holds.
   */
  pick(logits: Float32Array, index: number, position: number): { token: GeneratedToken; last: boolean } {
    const { stats } = this;
    const id = this.sampler.sample(logits);
    const elapsedMs = performance.now() - this.started;
    if (index === 0) stats.ttftMs = elapsedMs;
    stats.generatedTokens++;
    const isEos = this.tokenizer.eogIds.has(id) && this.options.stopAtEos !== false;
    const contextFull = position >= this.contextTokens;
    const last = isEos || index + 1 === this.maxTokens || contextFull;
    const text = this.streamer.push(id) + (last ? this.streamer.flush() : '');
    this.trace.addText(text);
    this.turn?.sampled(id);
    if (last) stats.finishReason = isEos ? 'stop' : contextFull && index + 1 < this.maxTokens ? 'context' : 'length';
    return { token: { id, text, index, elapsedMs }, last };
  }
}
