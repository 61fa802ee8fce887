/**
 * The engine: one model, one native context (KV cache + compute threads), requests queued.
 *
 *   generate(prompt) -> queue -> prefill (batched) -> [sample -> decode one token]* -> release
 *
 * With `parallel` > 1 the context holds that many sequences and concurrent requests share each
 * step instead (continuous batching: src/engine/batch); this file's run is the one-at-a-time path.
 *
 * Native evaluation runs off the event loop (evalAsync); an AbortSignal is checked between tokens.
 * A request starts at position 0, or, a conversation's turn (src/engine/conversation.ts), after the
 * prefix its conversation still holds in the cache; every request claims the cache before its first eval.
 * With `resident` or `slotsPerLayer`, an expert tier is attached (src/engine/tier): each eval
 * also reports its routing (and, natively, per-layer timing), which feeds the placement.
 */
import { checkWritableOutput } from '../core/output-file.js';
import {
  InvalidOptionError,
  LimitExceededError,
  NativeError,
  RequestAbortedError,
  UnsupportedModelError,
} from '../core/errors.js';
import { applyChatTemplate, hasChatTemplate, type ChatMessage } from '../model/chat-template.js';
import { limits } from '../core/limits.js';
import { firstMoeLayer, moeLayers, type HParams } from '../model/types.js';
import type { Tokenizer } from '../model/tokenizer/index.js';
import { loadNative, type NativeBinding, type NativeContextHandle } from '../native/binding.js';
import type { Observable } from 'rxjs';
import type { CalibrationSnapshot } from '../actors/calibration/messages.js';
import { fromCancellable } from '../streams/tokens.js';
import { loadModel, type LoadedModel } from '../model/load.js';
import { checkModelFile } from '../model/model-pin.js';
import { typedEvalError } from '../native/eval-errors.js';
import type { TierOptions } from './tier/options.js';
import { RouteLog } from './tier/route-log.js';
import type { MemoryPlan } from './memory-plan.js';
import { checkEngineOptions, resolveEngineConfig, type EngineConfig } from './config.js';
import type { TraceGeometry } from '../routes/types.js';
import type { TierStats } from './tier/port.js';
import type { TierRequest } from './tier/request.js';
import type { StepView } from './tier/step-views.js';
import { EngineTier } from './tier/tier.js';
import { validateTune, type TuneOptions, type TuneSettings } from './tier/tune.js';
import { prefetchReport, type PrefetchReport } from './tier/prefetch-report.js';
import { RequestQueue } from './request-queue.js';
import { validateSampling } from './sampler.js';
import { completeRates, newStats, reportStats, TokenPicker } from './token-picker.js';
import type { GenerateOptions, GeneratedToken } from './generate-options.js';
import {
  ContextOwner,
  Conversation,
  type ContextTurn,
  type ConversationHost,
  type ConversationOptions,
  type TurnStart,
} from './conversation.js';
import type { GenerationStats } from './stats.js';
import { modelName, RequestTrace } from './request-trace.js';
import { RouteTraceSource, type RequestRoutes } from './routes-from.js';
import { BatchedRequests, type BatchHost } from './batch/batched-requests.js';

export type { GenerateOptions, GeneratedToken } from './generate-options.js';

export interface EngineOptions extends TierOptions {
  /** Path to a GGUF model file. */
  model: string;
  /**
   * All the RAM the engine itself may hold (dense weights, KV cache, scratch, expert slots; Node's
   * heap is outside it). Below the whole model, experts live on the disk tier: the slots that fit
   * (src/engine/memory-plan.ts), the rest read from the file when routed. A budget below the
   * fixed parts is refused with MemoryBudgetError. Not with resident / slotsPerLayer / backend.
   */
  memoryBudgetBytes?: number;
  /** Native compute threads (default: 2, or the cores available if fewer). */
  threads?: number;
  /** KV-cache length in tokens of each sequence (default limits.contextTokensDefault). */
  contextTokens?: number;
  /**
   * Sequences run together (continuous batching, like llama-server's --parallel; default 1: one
   * request at a time). Each has its own contextTokens of KV cache (the memory plan counts them all);
   * concurrent generate() calls and conversation turns share every eval (src/engine/batch).
   */
  parallel?: number;
  /** Rows one batched step evaluates at most: decode rows first, then prompt chunks (default 256). */
  batchTokensMax?: number;
  /**
   * Fault every page of the model file into memory when the engine opens, off the event loop, as
   * llama.cpp's mmap does (MAP_POPULATE): the first requests then pay no page fault per page of
   * weights they touch first (a fresh engine's first prompt ran at half speed). Default: true when
   * the engine reads the model through the page cache (no memoryBudgetBytes, no disk backend) and
   * the file fits the memory available (src/core/available-memory.ts); true is refused beside a
   * budget or the disk backend, which read experts from the file on purpose.
   */
  preloadModel?: boolean;
  /** Requests allowed to wait behind the running ones (default 64). */
  requestQueueDepthMax?: number;
  /** A request whose consumer asks for no next token for this long is cancelled (default 60 000 ms). */
  requestIdleMs?: number;
  /**
   * A simulation for benchmarks: a route trace file (the engine's `traceRoutes` format, or the
   * headerless one of ../shared/traces/) whose routing replaces the router's (src/engine/routes-from.ts).
   * Each MoE layer runs the experts the trace names for the row, weighted by the router's softmax
   * renormalised over them; the tokens generated mean nothing, while slots, reads, uploads, prefetch,
   * calibration and spans are real. Decode step t of a request runs decode row t (wrapping around at
   * the trace's end); prompt rows run the trace's prefill rows, or its decode rows from row 0 when it
   * has none. A trace of other layers, experts or top-k than the model's is refused when the engine
   * opens (RouteTraceMismatchError). The default heat file is the model's and the trace's own.
   */
  routesFrom?: string;
}

export interface Engine {
  readonly hparams: HParams;
  readonly tokenizer: Tokenizer;
  readonly modelPath: string;
  /** Statistics of the last finished request. */
  readonly lastStats: GenerationStats | undefined;
  /** The memory plan when the engine was opened with memoryBudgetBytes (what each part holds, the slots). */
  readonly memoryPlan: MemoryPlan | undefined;
  /** The configuration the engine runs, every option resolved (src/engine/config.ts). */
  readonly config: EngineConfig;
  tokenize(text: string, options?: { addBos?: boolean }): number[];
  detokenize(ids: number[]): string;
  generate(prompt: string | number[], options?: GenerateOptions): AsyncIterable<GeneratedToken>;
  /** The same tokens as an RxJS Observable; unsubscribing cancels the request. */
  generate$(prompt: string | number[], options?: GenerateOptions): Observable<GeneratedToken>;
  /**
   * A conversation: turns that keep the KV cache between them, each evaluating only its new tokens
   * (src/engine/conversation.ts). With parallel 1 any other request on the engine evicts it (one
   * cache); with more, it keeps its own sequence while free sequences serve the other requests.
   */
  conversation(options?: ConversationOptions): Conversation;
  /** Logits of the last row after evaluating `tokens` from an empty context. */
  logits(tokens: number[]): Promise<Float32Array>;
  /** Changes the tier's budgets and policy parameters; validated (nothing changes on a bad value), applied before the next step. */
  tune(options: TuneOptions): void;
  /** The tier's live counters (hits since the last stats mark, leases, slots used per layer vs budget); undefined without a tier. */
  tierStats(): TierStats | undefined;
  /**
   * What the disk tier read from the model file since the engine opened (undefined on another
   * tier or none): the dense weights once, the disk backend's uploads (warmstart, swaps, misses
   * admitted into slots) and the tier's streamed misses, each from its read engine's own count.
   */
  fileReads(): { denseBytes: number; uploadBytes: number; streamedBytes: number; totalBytes: number } | undefined;
  /** The prefetch's counters with their bytes, coverage, precision and lateMs (src/engine/tier/prefetch-report.ts); undefined without a tier. */
  prefetchReport(): PrefetchReport | undefined;
  /** The host int8 copies (native tier over a Q4_0 container): built, freed, failed, and published now; undefined without. */
  hostCopies(): { built: number; freed: number; failed: number; dropped: number; published: number } | undefined;
  /**
   * The calibration actor's snapshots (EWMA upload bandwidth, fixed cost per transfer, compute ms
   * per layer): the latest one at once (after the first accepted sample), then one per step that
   * moved an estimate; completes when the engine closes. Throws InvalidOptionError without a tier.
   */
  calibration$(): Observable<CalibrationSnapshot>;
  /**
   * Each tier step's layer windows (compute start / end, hits, misses) and the uploads and reads
   * that settled with it (src/engine/tier/step-views.ts), from the requests that start after the
   * subscription; in batches of up to 8 decode steps; completes when the engine closes. Throws
   * InvalidOptionError without a tier.
   */
  steps$(): Observable<StepView>;
  /** The prefetch mode the tier runs ('off' without a tier). */
  readonly prefetchMode: 'off' | 'observe' | 'enforce';
  /** The route trace that drives the routing (options.routesFrom: a simulation), or undefined: the router's own. */
  readonly routesFrom: string | undefined;
  /** Requests waiting behind the running ones (the bounded queue: requestQueueDepthMax). */
  readonly queueDepth: number;
  /** Requests running now: at most one, or `parallel` on a batching engine (each on its own sequence). */
  readonly activeRequests: number;
  /**
   * The tier's settings now, in engine.tune()'s names (what a tune changed included); undefined
   * without a tier.
   */
  tuneSettings(): TuneSettings | undefined;
  /**
   * The prompt of a chat: the messages through the model's own chat template
   * (tokenizer.chat_template), tokenized; refused with UnsupportedModelError when the file has none.
   */
  chatPrompt(messages: ChatMessage[]): number[];
  close(): Promise<void>;
}

export async function openEngine(options: EngineOptions): Promise<Engine> {
  const basics = checkEngineOptions(options);
  const native = loadNative();
  const model = loadModel(native, options.model, { fromDisk: basics.readsFromDisk });
  // Everything opened from here on is freed if a later step throws (a bad tier option used to leave the model mapped).
  let context: NativeContextHandle | undefined;
  try {
    // Before anything runs: a trace of another shape than the model's is refused here.
    const routes =
      options.routesFrom === undefined ? undefined : RouteTraceSource.load(options.routesFrom, model.hparams);
    const config = resolveEngineConfig(native, model, options, basics, routes?.digest);
    if (config.preloadModel) await preload(native, model);
    context = native.createContext(model.nativeModel, {
      nCtx: config.contextTokens,
      threads: config.threads,
      nSeq: config.parallel,
    });
    const tier = config.tier ? await EngineTier.create(native, model, context, config.tier) : undefined;
    return new NativeEngine(native, model, context, config, tier, routes);
  } catch (err) {
    if (context !== undefined) native.freeContext(context);
    native.freeModel(model.nativeModel);
    native.unmapFile(model.mapping);
    throw err;
  }
}

/** options.preloadModel: the mapping faulted in; a read error of the file is the open's error, typed. */
async function preload(native: NativeBinding, model: LoadedModel): Promise<void> {
  try {
    await native.populateMapping(model.mapping);
  } catch (err) {
    throw new NativeError(`${model.path}: preloading the model file failed: ${(err as Error).message}`, { cause: err });
  }
}

class NativeEngine implements Engine {
  private readonly queue: RequestQueue;
  /** Who wrote each sequence of the KV cache last (a conversation still holds its prefix while it does). */
  private readonly owner: ContextOwner;
  /** parallel > 1: requests share each step (continuous batching); undefined: one request at a time. */
  private readonly batched: BatchedRequests | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;
  lastStats: GenerationStats | undefined;
  private readonly contextTokens: number;
  private readonly idleMs: number;

  constructor(
    private readonly native: NativeBinding,
    private readonly model: LoadedModel,
    private readonly context: NativeContextHandle,
    readonly config: EngineConfig,
    private readonly tier: EngineTier | undefined,
    private readonly routes: RouteTraceSource | undefined,
  ) {
    this.owner = new ContextOwner(config.parallel);
    this.batched = config.parallel > 1 ? this.batchedRequests() : undefined;
    this.queue = this.batched?.queue ?? new RequestQueue(config.queueDepthMax);
    this.contextTokens = config.contextTokens;
    this.idleMs = config.idleMs;
  }

  private batchedRequests(): BatchedRequests {
    const host: BatchHost = {
      hparams: this.model.hparams,
      tokenizer: this.model.tokenizer,
      contextTokens: this.config.contextTokens,
      name: this.name,
      owner: this.owner,
      tier: this.tier,
      routes: this.routes,
      checkModel: () => this.checkModel(),
      afterEval: () => this.afterEval(),
      evalError: (err, position) => this.evalError(err, position),
      evalUntiered: (step) =>
        this.native.evalAsync(this.context, step.tokens, 0, step.logits, {
          seqIds: step.seqIds,
          positions: step.positions,
          logitRows: step.logitRows,
          ...(step.forcedRoutes ? { forcedRoutes: step.forcedRoutes } : {}),
        }),
      finished: (stats) => {
        this.lastStats = stats;
      },
    };
    return new BatchedRequests(host, this.config.parallel, this.config.batchTokensMax, this.config.queueDepthMax);
  }

  get memoryPlan(): MemoryPlan | undefined {
    return this.config.memoryPlan;
  }

  get routesFrom(): string | undefined {
    return this.routes?.file;
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

  /** gen_ai.request.model of this engine's requests. */
  /** The expert geometry a route trace's header carries (replay prices the trace from it). */
  private traceGeometry(): TraceGeometry | undefined {
    const gate = this.model.file.tensors.get(`blk.${firstMoeLayer(this.hparams)}.ffn_gate_exps.weight`);
    return gate ? { hidden: this.hparams.nEmbd, expertFfn: this.hparams.nFfExp, expertType: gate.type } : undefined;
  }

  private get name(): string {
    return modelName(this.model.path, this.model.file.metadata.get('general.name'));
  }

  tokenize(text: string, options?: { addBos?: boolean }): number[] {
    if (typeof text !== 'string') throw new InvalidOptionError('text', 'a string', text);
    return this.model.tokenizer.encode(text, options);
  }

  detokenize(ids: number[]): string {
    if (!Array.isArray(ids)) throw new InvalidOptionError('ids', 'an array of token ids', ids);
    return this.model.tokenizer.decode(ids);
  }

  async logits(tokens: number[]): Promise<Float32Array> {
    this.checkOpen();
    const ids = this.checkTokens(tokens);
    if (this.batched) return this.batched.logits(ids);
    const release = await this.queue.acquire();
    try {
      this.checkModel();
      const out = new Float32Array(this.hparams.nVocab);
      this.owner.claim('engine.logits');
      const forcedRoutes = this.routes?.begin().next('prefill', ids.length);
      await this.native.evalAsync(this.context, ids, 0, out, forcedRoutes && { forcedRoutes }).then(
        () => this.afterEval(),
        (err: unknown) => {
          throw this.evalError(err, 0);
        },
      );
      return out;
    } finally {
      release();
    }
  }

  generate(prompt: string | number[], options: GenerateOptions = {}): AsyncIterable<GeneratedToken> {
    this.checkOpen();
    const maxTokens = this.checkRequest(prompt, options);
    const promptIds = this.checkTokens(
      typeof prompt === 'string' ? this.tokenize(prompt, { addBos: options.addBos }) : prompt,
    );
    return cancelWhenIdle(this.request(prompt, maxTokens, options, promptIds), this.idleMs);
  }

  /** A request on the batch scheduler (parallel > 1), else run one at a time. */
  private request(
    prompt: string | number[],
    maxTokens: number,
    options: GenerateOptions,
    place: Int32Array | ContextTurn,
  ): AsyncGenerator<GeneratedToken> {
    return this.batched
      ? this.batched.run(prompt, maxTokens, options, place, performance.now())
      : this.run(prompt, maxTokens, options, place);
  }

  /** The prompt's type and the options of a request; its maxTokens. */
  private checkRequest(prompt: unknown, options: GenerateOptions): number {
    if (typeof prompt !== 'string' && !Array.isArray(prompt))
      throw new InvalidOptionError('prompt', 'a string or an array of token ids', prompt);
    if (typeof options !== 'object' || options === null) throw new InvalidOptionError('options', 'an object', options);
    const maxTokens = options.maxTokens ?? limits.maxTokensDefault;
    if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > limits.maxTokensMax) {
      throw new InvalidOptionError('maxTokens', `an integer in [1, ${limits.maxTokensMax}]`, maxTokens);
    }
    validateSampling(options);
    if (options.traceRoutes !== undefined && this.batched)
      throw new InvalidOptionError(
        'traceRoutes',
        'an engine with parallel 1 (a batched step routes several requests together; the heat file still gets every row)',
        options.traceRoutes,
      );
    if (options.traceRoutes !== undefined) {
      // Before the first eval: a path that cannot be written, or one of the engine's inputs, fails the request here.
      if (typeof options.traceRoutes !== 'string' || options.traceRoutes === '')
        throw new InvalidOptionError('traceRoutes', 'a file path', options.traceRoutes);
      checkWritableOutput(options.traceRoutes, 'traceRoutes', this.inputFiles());
    }
    return maxTokens;
  }

  /**
   * A failed eval as a typed error; when the model file changed under the engine meanwhile (a
   * rewrite in place gives non-finite logits, not a fault), that is the error, the eval's its cause.
   */
  private evalError(err: unknown, position: number): unknown {
    const typed = typedEvalError(err, position);
    try {
      this.checkModel(typed);
    } catch (changed) {
      return changed;
    }
    return typed;
  }

  /** The model still reads as the file it was opened from (model-pin.ts); before each request and after a failed eval. */
  private checkModel(cause?: unknown): void {
    checkModelFile(this.model.pin, cause, this.native.mappedFaults(this.model.mapping));
  }

  /**
   * After each eval: a read past the end of the file, truncated during the eval, returned zeros
   * (the SIGBUS guard), so the eval's logits are not the model's: the request fails, typed. One
   * native counter read; the file's stat only when it moved.
   */
  private afterEval(): void {
    if (this.native.mappedFaults(this.model.mapping) > 0) this.checkModel();
  }

  /** Files the engine reads: no output of a request may be one of them (the model, the heat file, the route trace). */
  private inputFiles(): string[] {
    const heat = this.tier?.config.heat;
    return [
      this.model.path,
      ...(typeof heat === 'string' ? [heat] : []),
      ...(this.routesFrom !== undefined ? [this.routesFrom] : []),
    ];
  }

  conversation(options?: ConversationOptions): Conversation {
    this.checkOpen();
    const host: ConversationHost = {
      contextTokens: this.contextTokens,
      owner: this.owner,
      checkOpen: () => this.checkOpen(),
      checkRequest: (prompt, o) => this.checkRequest(prompt, o),
      tokenize: (text, addBos) => this.tokenize(text, { addBos }),
      checkIds: (ids) => void this.checkIds(ids),
      run: (prompt, maxTokens, o, turn) => cancelWhenIdle(this.request(prompt, maxTokens, o, turn), this.idleMs),
    };
    return new Conversation(host, options);
  }

  generate$(prompt: string | number[], options: GenerateOptions = {}): Observable<GeneratedToken> {
    return fromCancellable((signal) =>
      this.generate(prompt, {
        ...options,
        signal: options.signal ? AbortSignal.any([options.signal, signal]) : signal,
      }),
    );
  }

  /**
   * One request: `place` is the prompt's ids (evaluated at position 0), or a conversation's turn,
   * which says under the queue where its tokens go and hears of each eval and token.
   */
  private async *run(
    prompt: string | number[],
    maxTokens: number,
    options: GenerateOptions,
    place: Int32Array | ContextTurn,
  ): AsyncGenerator<GeneratedToken> {
    const started = performance.now();
    const { signal } = options;
    const release = await this.queue.acquire(signal);
    const turn = place instanceof Int32Array ? undefined : place;
    let start: TurnStart;
    try {
      start = turn ? turn.begin() : { position: 0, tokens: place as Int32Array, replayedTokens: 0 };
    } catch (err) {
      release();
      throw err;
    }
    const promptIds = start.tokens;
    const stats = newStats(start, turn !== undefined);
    // The request's routing: for the tier's heat file, and for --trace-routes (neither: not kept).
    const log =
      (this.tier && this.tier.config.heat !== false) || options.traceRoutes ? new RouteLog(this.hparams) : undefined;
    // The request's spans and metrics (no-ops without an SDK); the tier's spans hang under its steps.
    const trace = new RequestTrace({
      model: this.name,
      backend: this.tier?.config.backend,
      promptTokens: promptIds.length,
      maxTokens,
      sampling: options,
      prompt,
    });
    let tierRequest: TierRequest | undefined;
    try {
      // A truncated model file is a typed error here, before the eval could touch a page past its end (SIGBUS).
      this.checkModel();
      tierRequest = await this.tier?.beginRequest(trace, log);
    } catch (err) {
      trace.end(stats, err);
      release();
      throw err;
    }
    // Without a tier the routes come back from the eval into this buffer; with one, the tier's request logs them.
    const routesOnly = log && !tierRequest ? new RouteBuffer(this.hparams) : undefined;
    // routesFrom: the trace's rows for each eval instead of the router's top-k (a simulation).
    const routing: RequestRoutes | undefined = this.routes?.begin();
    let failure: { error: unknown } | undefined;
    let completed = false;
    // With a tier, steps go through its layer-compute actor (placement, route log and traces read its reports).
    const evaluate = (
      phase: 'prefill' | 'decode',
      tokens: Int32Array,
      position: number,
      logits: Float32Array,
    ): Promise<void> => {
      const forcedRoutes = routing?.next(phase, tokens.length);
      const untiered = (): Promise<void> => {
        const options = routesOnly?.evalOptions(tokens.length);
        return this.native.evalAsync(
          this.context,
          tokens,
          position,
          logits,
          forcedRoutes ? { ...options, forcedRoutes } : options,
        );
      };
      return (tierRequest ? tierRequest.evaluate(phase, tokens, position, logits, forcedRoutes) : untiered()).then(
        () => this.afterEval(),
        (err: unknown) => {
          throw this.evalError(err, position);
        },
      );
    };
    try {
      const picker = new TokenPicker(
        options,
        maxTokens,
        this.model.tokenizer,
        this.contextTokens,
        started,
        stats,
        trace,
        turn,
      );
      const logits = new Float32Array(this.hparams.nVocab);
      await tierRequest?.beforeStep(); // part of TTFT, not of prefillMs
      // From here the cache is this request's (a conversation that held it is evicted).
      const epoch = this.owner.claim(turn?.name ?? 'engine.generate');
      turn?.claimed(epoch);
      const prefillStart = performance.now();
      trace.beginPrefill();
      await evaluate('prefill', promptIds, start.position, logits);
      trace.endPrefill();
      stats.prefillMs = performance.now() - prefillStart;
      if (routesOnly) log!.add('prefill', routesOnly.routes, promptIds);
      let position = start.position + promptIds.length;
      turn?.evaluated(position);
      const decodeStart = performance.now();
      const step = new Int32Array(1);
      for (let index = 0; index < maxTokens; index++) {
        if (signal?.aborted) {
          stats.finishReason = 'aborted';
          throw new RequestAbortedError();
        }
        const { token, last } = picker.pick(logits, index, position);
        yield token;
        if (last) break;
        step[0] = token.id;
        trace.beginStep(position);
        // Most steps have nothing to wait for before them (no promise: a token's gap is short).
        const before = tierRequest?.beforeStep();
        if (before) await before;
        await evaluate('decode', step, position, logits);
        trace.endStep();
        if (routesOnly) log!.add('decode', routesOnly.routes, step);
        position++;
        turn?.evaluated(position);
      }
      stats.decodeMs = performance.now() - decodeStart;
      completeRates(stats);
      completed = true;
    } catch (err) {
      failure = { error: err };
      if (stats.finishReason !== 'aborted') stats.finishReason = 'error';
      throw err;
    } finally {
      // Closed early by the consumer (break, return(), an unsubscribed generate$()): a cancel.
      if (!completed && !failure) stats.finishReason = 'aborted';
      try {
        this.finishTier(tierRequest, log, stats, options, failure?.error);
      } finally {
        this.lastStats = stats;
        reportStats(options, stats);
        turn?.end(stats);
        trace.end(stats, failure?.error);
        release();
      }
    }
  }

  /** After every request (also an aborted or failed one): the tier's figures, the heat file, the route trace. */
  private finishTier(
    request: TierRequest | undefined,
    log: RouteLog | undefined,
    stats: GenerationStats,
    options: GenerateOptions,
    error: unknown,
  ): void {
    if (request) {
      const t = request.finish(error);
      Object.assign(stats, {
        decodeHitRate: t.decodeHitRate,
        prefillHitRate: t.prefillHitRate,
        moeMsPerToken: t.moeMsPerToken,
        uploads: t.uploads,
        uploadBytes: t.uploadBytes,
        decodeUploadBytes: t.decodeUploadBytes,
        failedUploads: t.failedUploads,
        ...(t.prefillPath ? { prefillPath: t.prefillPath, prefillPathCalls: t.prefillPathCalls } : {}),
        prefillExpertReads: t.prefillExpertReads,
        prefillDistinctExpertsRead: t.prefillDistinctExpertsRead,
        ...(t.replanGuard ? { replanGuard: t.replanGuard } : {}),
        tier: {
          hits: t.tier.hits,
          misses: t.tier.misses,
          leases: t.tier.leases,
          slotsUsed: t.tier.slotsUsed,
          slotsBudget: t.tier.slotsBudget,
        },
      });
      const heatFileError = log ? this.tier!.mergeHeat(log.rows()) : undefined;
      if (heatFileError) stats.heatFileError = heatFileError;
    }
    if (log && options.traceRoutes)
      log.write(options.traceRoutes, this.model.path, undefined, this.traceGeometry(), this.inputFiles());
  }

  get queueDepth(): number {
    return this.queue.depth;
  }

  get activeRequests(): number {
    return this.queue.running;
  }

  tuneSettings(): TuneSettings | undefined {
    const t = this.tier;
    if (!t) return undefined;
    const upload = t.placement.uploadLimits;
    return {
      placementPolicy: t.config.placementPolicy,
      residentSlotsPerLayer: t.port.slotsPerLayer[0],
      uploadInflightBytesMax: upload.inflightBytesMax,
      uploadInflightTransfersMax: upload.inflightTransfersMax,
      lfru: { ...t.config.lfru },
      prefillReplan: { ...t.config.replan },
      prefetch: { ...t.config.prefetch },
    };
  }

  chatPrompt(messages: ChatMessage[]): number[] {
    const file = this.model.file;
    if (!hasChatTemplate(file)) {
      throw new UnsupportedModelError(
        this.model.path,
        'key tokenizer.chat_template',
        'a chat template (use a plain prompt instead)',
      );
    }
    const ids = this.tokenize(applyChatTemplate(file, messages));
    // A template that writes the BOS token itself: the tokenizer's own BOS would double it.
    if (ids.length > 1 && ids[0] === ids[1] && this.tokenize('', { addBos: true })[0] === ids[0]) ids.shift();
    return ids;
  }

  get prefetchMode(): 'off' | 'observe' | 'enforce' {
    return this.tier?.config.prefetch.mode ?? 'off';
  }

  hostCopies(): { built: number; freed: number; failed: number; dropped: number; published: number } | undefined {
    const r = this.tier?.rebuild;
    if (!r) return undefined;
    let published = 0;
    for (let i = 0; i < r.offsets.length; i++) if (Atomics.load(r.offsets, i) >= 0) published++;
    return { ...r.counts, published };
  }

  tierStats(): TierStats | undefined {
    this.checkOpen(); // after close() the native tier is freed: a typed refusal, not "tier used after free"
    return this.tier?.port.stats();
  }

  prefetchReport(): PrefetchReport | undefined {
    this.checkOpen();
    const p = this.tier?.port.stats().prefetch;
    return this.tier && p ? prefetchReport(p, this.tier.port.expertBytes.container) : undefined;
  }

  fileReads(): { denseBytes: number; uploadBytes: number; streamedBytes: number; totalBytes: number } | undefined {
    this.checkOpen();
    const disk = this.tier?.backend.stats().disk;
    if (!this.tier || !disk) return undefined;
    const denseBytes = this.native.modelBytes(this.model.nativeModel).ownedDense;
    const streamedBytes = this.tier.port.stats().streamEngineBytes ?? 0;
    return {
      denseBytes,
      uploadBytes: disk.bytesRead,
      streamedBytes,
      totalBytes: denseBytes + disk.bytesRead + streamedBytes,
    };
  }

  steps$(): Observable<StepView> {
    if (!this.tier)
      throw new InvalidOptionError(
        'steps$',
        'an engine opened with an expert tier (resident or slotsPerLayer)',
        undefined,
      );
    return this.tier.steps.asObservable();
  }

  calibration$(): Observable<CalibrationSnapshot> {
    if (!this.tier)
      throw new InvalidOptionError(
        'calibration$',
        'an engine opened with an expert tier (resident or slotsPerLayer)',
        undefined,
      );
    return this.tier.tracing.calibration.snapshots$();
  }

  tune(options: TuneOptions): void {
    this.checkOpen();
    if (!this.tier)
      throw new InvalidOptionError('tune', 'an engine opened with an expert tier (resident or slotsPerLayer)', options);
    if (this.tier.config.placementPolicy === 'dlfu') {
      const lfruOnly = (['lfru', 'prefillReplan'] as const).find((k) => options?.[k] !== undefined);
      if (lfruOnly)
        throw new InvalidOptionError(
          `tune.${lfruOnly}`,
          'an engine whose placementPolicy is "lfru" (this one runs "dlfu")',
          options[lfruOnly],
        );
    }
    const { lfru, upload, prefillReplan, residentSlotsPerLayer, prefetch } = validateTune(
      options,
      this.tier.config.lfru,
      this.tier.placement.uploadLimits,
      this.tier.config.replan,
      this.hparams.nExpert,
      this.tier.config.prefetch,
    );
    this.tier.tune(lfru, upload, prefillReplan, prefetch);
    if (residentSlotsPerLayer !== undefined) this.tier.resizeSlots(residentSlotsPerLayer);
  }

  close(): Promise<void> {
    // One close for every caller: a second close() resolves when the first has freed everything.
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    this.closed = true;
    // Wait for running and queued requests to finish before freeing native memory; the close itself
    // is never refused by the queue's depth (a full queue used to make close() throw, freeing nothing).
    // An iterator its consumer dropped ends after requestIdleMs (cancelWhenIdle).
    const release = await this.queue.acquire(undefined, { unbounded: true, exclusive: true });
    try {
      await this.tier?.close();
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
    if (tokens.length >= this.contextTokens)
      throw new LimitExceededError('contextTokens', tokens.length + 1, this.contextTokens);
    return Int32Array.from(this.checkIds(tokens));
  }

  /** At least one token, each an id of the vocabulary. */
  private checkIds(tokens: readonly number[]): readonly number[] {
    const nVocab = this.hparams.nVocab;
    if (tokens.length === 0) throw new InvalidOptionError('prompt', 'at least one token', tokens);
    for (const t of tokens) {
      if (!Number.isInteger(t) || t < 0 || t >= nVocab)
        throw new InvalidOptionError('prompt', `token ids in [0, ${nVocab})`, t);
    }
    return tokens;
  }
}

/** The routes buffer of an engine without a tier that still records routing (--trace-routes). */
class RouteBuffer {
  routes = new Int32Array(0);
  constructor(private readonly hp: HParams) {}
  evalOptions(nTokens: number): { routes: Int32Array } {
    const need = nTokens * moeLayers(this.hp) * this.hp.nExpertUsed;
    if (this.routes.length !== need) this.routes = new Int32Array(need);
    return { routes: this.routes };
  }
}

/**
 * The request's iterator, cancelled when its consumer stops asking: after a token, if next() is not
 * called within idleMs, the request is ended as a cancel (its finally blocks run: the queue is freed,
 * the tier's leases returned), so a dropped iterator cannot hold the engine (and close()) for ever.
 * A later next() throws LimitExceededError('requestIdleMs').
 */
function cancelWhenIdle<T>(gen: AsyncGenerator<T>, idleMs: number): AsyncGenerator<T> {
  let timer: NodeJS.Timeout | undefined;
  let idleSince = 0;
  let abandoned = false;
  const disarm = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
  const wrapped: AsyncGenerator<T> = {
    async next(...args) {
      disarm();
      if (abandoned) throw new LimitExceededError('requestIdleMs', Math.round(performance.now() - idleSince), idleMs);
      const r = await gen.next(...args);
      if (!r.done) {
        idleSince = performance.now();
        timer = setTimeout(() => {
          abandoned = true;
          void gen.return(undefined);
        }, idleMs);
        timer.unref(); // an abandoned request must not keep the process alive either
      }
      return r;
    },
    return(value) {
      disarm();
      return gen.return(value as T);
    },
    throw(err) {
      disarm();
      return gen.throw(err);
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
  return wrapped;
}
