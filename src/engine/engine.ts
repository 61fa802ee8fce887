/**
 * The engine: one model, one native context (KV cache + compute threads), requests queued.
 *
 *   generate(prompt) -> queue -> prefill (batched) -> [sample -> decode one token]* -> release
 *
 * Native evaluation runs off the event loop (evalAsync); an AbortSignal is checked between tokens.
 */
import { InvalidOptionError, LimitExceededError, RequestAbortedError } from '../core/errors.js';
import { limits } from '../core/limits.js';
import type { HParams } from '../model/types.js';
import type { Tokenizer } from '../model/tokenizer/index.js';
import { loadNative, type NativeBinding, type NativeContextHandle } from '../native/binding.js';
import { loadModel, type LoadedModel } from './load.js';
import { RequestQueue } from './request-queue.js';
import { createSampler, validateSampling, type SamplingOptions } from './sampler.js';
import { rate, type GenerationStats } from './stats.js';

export interface EngineOptions {
  /** Path to a GGUF model file. */
  model: string;
  /** Native compute threads (default: 2, or the cores available if fewer). */
  threads?: number;
  /** KV-cache length in tokens (default limits.contextTokensDefault). */
  contextTokens?: number;
  /** Requests allowed to wait behind the running one (default 64). */
  requestQueueDepthMax?: number;
}

export interface GenerateOptions extends SamplingOptions {
  maxTokens?: number;
  signal?: AbortSignal;
  /** Prepend the BOS token when the tokenizer asks for it (default true). */
  addBos?: boolean;
  /** Stop at an end-of-generation token (eos, <|im_end|>...; default true). */
  stopAtEos?: boolean;
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

export interface Engine {
  readonly hparams: HParams;
  readonly tokenizer: Tokenizer;
  readonly modelPath: string;
  /** Statistics of the last finished request. */
  readonly lastStats: GenerationStats | undefined;
  tokenize(text: string, options?: { addBos?: boolean }): number[];
  detokenize(ids: number[]): string;
  generate(prompt: string | number[], options?: GenerateOptions): AsyncIterable<GeneratedToken>;
  /** Logits of the last row after evaluating `tokens` from an empty context. */
  logits(tokens: number[]): Promise<Float32Array>;
  close(): Promise<void>;
}

export async function openEngine(options: EngineOptions): Promise<Engine> {
  const threads = options.threads ?? 2;
  const contextTokens = options.contextTokens ?? limits.contextTokensDefault;
  if (!Number.isInteger(threads) || threads < 1 || threads > limits.threadsMax) {
    throw new InvalidOptionError('threads', `an integer in [1, ${limits.threadsMax}]`, threads);
  }
  if (!Number.isInteger(contextTokens) || contextTokens < 2 || contextTokens > limits.contextTokensMax) {
    throw new InvalidOptionError('contextTokens', `an integer in [2, ${limits.contextTokensMax}]`, contextTokens);
  }
  const native = loadNative();
  const model = loadModel(native, options.model);
  const context = native.createContext(model.nativeModel, { nCtx: contextTokens, threads });
  return new NativeEngine(native, model, context, contextTokens, options.requestQueueDepthMax ?? 64);
}

class NativeEngine implements Engine {
  private readonly queue: RequestQueue;
  private closed = false;
  lastStats: GenerationStats | undefined;

  constructor(
    private readonly native: NativeBinding,
    private readonly model: LoadedModel,
    private readonly context: NativeContextHandle,
    private readonly contextTokens: number,
    queueDepthMax: number,
  ) {
    this.queue = new RequestQueue(queueDepthMax);
  }

  get hparams(): HParams {
    return this.model.hparams;
  }
  get tokenizer(): Tokenizer {
    return this.model.tokenizer;
  }
  get modelPath(): string {
    return this.model.path;
  }

  tokenize(text: string, options?: { addBos?: boolean }): number[] {
    return this.model.tokenizer.encode(text, options);
  }

  detokenize(ids: number[]): string {
    return this.model.tokenizer.decode(ids);
  }

  async logits(tokens: number[]): Promise<Float32Array> {
    this.checkOpen();
    const ids = this.checkTokens(tokens);
    const release = await this.queue.acquire();
    try {
      const out = new Float32Array(this.hparams.nVocab);
      await this.native.evalAsync(this.context, ids, 0, out);
      return out;
    } finally {
      release();
    }
  }

  generate(prompt: string | number[], options: GenerateOptions = {}): AsyncIterable<GeneratedToken> {
    this.checkOpen();
    const maxTokens = options.maxTokens ?? limits.maxTokensDefault;
    if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > limits.maxTokensMax) {
      throw new InvalidOptionError('maxTokens', `an integer in [1, ${limits.maxTokensMax}]`, maxTokens);
    }
    validateSampling(options);
    const promptIds = this.checkTokens(typeof prompt === 'string' ? this.tokenize(prompt, { addBos: options.addBos }) : prompt);
    return this.run(promptIds, maxTokens, options);
  }

  private async *run(promptIds: Int32Array, maxTokens: number, options: GenerateOptions): AsyncGenerator<GeneratedToken> {
    const started = performance.now();
    const { signal } = options;
    const release = await this.queue.acquire(signal);
    const stats: GenerationStats = {
      promptTokens: promptIds.length,
      generatedTokens: 0,
      ttftMs: 0,
      prefillMs: 0,
      decodeMs: 0,
      prefillTokPerS: 0,
      decodeTokPerS: 0,
      finishReason: 'length',
    };
    try {
      const sampler = createSampler(options);
      const streamer = this.model.tokenizer.createStreamDecoder({ special: false });
      const logits = new Float32Array(this.hparams.nVocab);
      const prefillStart = performance.now();
      await this.native.evalAsync(this.context, promptIds, 0, logits);
      stats.prefillMs = performance.now() - prefillStart;
      let position = promptIds.length;
      const decodeStart = performance.now();
      const step = new Int32Array(1);
      for (let index = 0; index < maxTokens; index++) {
        if (signal?.aborted) {
          stats.finishReason = 'aborted';
          throw new RequestAbortedError();
        }
        const id = sampler.sample(logits);
        const elapsedMs = performance.now() - started;
        if (index === 0) stats.ttftMs = elapsedMs;
        stats.generatedTokens++;
        const isEos = this.model.tokenizer.eogIds.has(id) && options.stopAtEos !== false;
        const contextFull = position >= this.contextTokens;
        const last = isEos || index + 1 === maxTokens || contextFull;
        // The last piece also carries any bytes the stream decoder still holds.
        yield { id, text: streamer.push(id) + (last ? streamer.flush() : ''), index, elapsedMs };
        if (last) {
          stats.finishReason = isEos ? 'stop' : contextFull && index + 1 < maxTokens ? 'context' : 'length';
          break;
        }
        step[0] = id;
        await this.native.evalAsync(this.context, step, position++, logits);
      }
      stats.decodeMs = performance.now() - decodeStart;
      stats.prefillTokPerS = rate(stats.promptTokens, stats.prefillMs);
      stats.decodeTokPerS = rate(Math.max(0, stats.generatedTokens - 1), stats.decodeMs);
    } finally {
      this.lastStats = stats;
      release();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Wait for running and queued requests to finish before freeing native memory.
    const release = await this.queue.acquire();
    try {
      this.native.freeContext(this.context);
      this.native.freeModel(this.model.nativeModel);
      this.native.unmapFile(this.model.mapping);
    } finally {
      release();
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new InvalidOptionError('engine', 'an open engine', 'closed');
  }

  private checkTokens(tokens: number[]): Int32Array {
    const nVocab = this.hparams.nVocab;
    if (tokens.length === 0) throw new InvalidOptionError('prompt', 'at least one token', tokens);
    if (tokens.length >= this.contextTokens) throw new LimitExceededError('contextTokens', tokens.length + 1, this.contextTokens);
    for (const t of tokens) {
      if (!Number.isInteger(t) || t < 0 || t >= nVocab) throw new InvalidOptionError('prompt', `token ids in [0, ${nVocab})`, t);
    }
    return Int32Array.from(tokens);
  }
}
