/**
 * An engine's requests when it runs several sequences together (openEngine `parallel` > 1): each
 * request takes a free sequence of the KV cache, and its evals join the steps of the batch
 * scheduler (scheduler.ts) beside every other running request's:
 *
 *   generate() ─> queue (parallel places) ─> a free sequence (a conversation: its own, when free)
 *              ─> [ prompt rows | one sampled token ] ─> scheduler ─> one eval for all ─> logits
 *
 * Tokens are those of the request run alone (greedy, or the same seed): its rows attend to its own
 * sequence only, and every kernel gives a row the same bits whatever rows share its eval.
 * With an expert tier, the tier's request spans a busy period (from the first step until no request
 * is left) and sees each step's rows of every sequence together: one read or upload per expert per
 * step, however many rows were routed to it. Its figures (hit rates, uploads) are the period's
 * (engine.tierStats()), not a request's, so a batched request's stats carry none of them.
 */
import { RequestAbortedError } from '../../core/errors.js';
import type { HParams } from '../../model/types.js';
import type { Tokenizer } from '../../model/tokenizer/index.js';
import { RequestQueue } from '../request-queue.js';
import type { ContextOwner, ContextTurn, TurnStart } from '../conversation.js';
import type { GenerateOptions, GeneratedToken } from '../generate-options.js';
import type { GenerationStats } from '../stats.js';
import { completeRates, newStats, reportStats, TokenPicker } from '../token-picker.js';
import { RequestTrace } from '../request-trace.js';
import type { RouteTraceSource } from '../routes-from.js';
import { RouteLog } from '../tier/route-log.js';
import type { TierRequest } from '../tier/request.js';
import type { EngineTier } from '../tier/tier.js';
import { BatchScheduler, type BatchStep, type ForcedRoutesOf } from './scheduler.js';
import { BatchTrace } from './batch-trace.js';

/** What the batched requests need of their engine (src/engine/engine.ts supplies it). */
export interface BatchHost {
  readonly hparams: HParams;
  readonly tokenizer: Tokenizer;
  /** Positions of each sequence's cache. */
  readonly contextTokens: number;
  /** gen_ai.request.model */
  readonly name: string;
  readonly owner: ContextOwner;
  readonly tier: EngineTier | undefined;
  readonly routes: RouteTraceSource | undefined;
  /** The model file still reads as when opened (before each request; throws typed). */
  checkModel(): void;
  /** After each eval: a fault in the mapping fails the step, typed. */
  afterEval(): void;
  /** A failed eval as a typed error. */
  evalError(err: unknown, position: number): unknown;
  /** One step without a tier: the native eval with the step's rows. */
  evalUntiered(step: BatchStep): Promise<void>;
  /** Statistics of the request that just ended (engine.lastStats). */
  finished(stats: GenerationStats): void;
}

/** The tier's request over one busy period, and what it logs. */
interface TierPeriod {
  request: TierRequest;
  trace: BatchTrace;
  log: RouteLog | undefined;
}

export class BatchedRequests {
  readonly queue: RequestQueue;
  private readonly scheduler: BatchScheduler;
  private readonly free: Set<number>;
  private period: TierPeriod | undefined;
  /** Requests that joined since the busy period began (the batch span's count). */
  private joined = 0;

  constructor(
    private readonly host: BatchHost,
    parallel: number,
    batchTokensMax: number,
    queueDepthMax: number,
  ) {
    this.queue = new RequestQueue(queueDepthMax, parallel);
    this.free = new Set(Array.from({ length: parallel }, (_, s) => s));
    this.scheduler = new BatchScheduler(
      host.hparams.nVocab,
      batchTokensMax,
      (step) => this.runStep(step),
      () => this.endPeriod(),
    );
  }

  /** Requests running now (each on a sequence of its own). */
  get active(): number {
    return this.scheduler.active;
  }

  /**
   * One request: `place` is the prompt's ids (at position 0 of a free sequence), or a conversation's
   * turn (its own sequence when it still holds it). `started`: when generate() was called (TTFT).
   */
  async *run(
    prompt: string | number[],
    maxTokens: number,
    options: GenerateOptions,
    place: Int32Array | ContextTurn,
    started: number,
  ): AsyncGenerator<GeneratedToken> {
    const { signal } = options;
    const release = await this.queue.acquire(signal);
    const turn = place instanceof Int32Array ? undefined : place;
    let seq: number;
    let start: TurnStart;
    try {
      seq = this.host.owner.choose([...this.free], turn?.heldSequence());
      start = turn ? turn.begin() : { position: 0, tokens: place as Int32Array, replayedTokens: 0 };
      this.host.checkModel();
    } catch (err) {
      release();
      throw err;
    }
    this.take(seq);
    const epoch = this.host.owner.claim(turn?.name ?? 'engine.generate', seq, turn !== undefined);
    turn?.claimed(epoch);
    const stats = newStats(start, turn !== undefined);
    const trace = new RequestTrace({
      model: this.host.name,
      backend: this.host.tier?.config.backend,
      promptTokens: start.tokens.length,
      maxTokens,
      sampling: options,
      prompt,
    });
    const routing = this.host.routes?.begin();
    const forced: ForcedRoutesOf | undefined = routing && ((phase, rows) => routing.next(phase, rows));
    let failure: { error: unknown } | undefined;
    let completed = false;
    try {
      const picker = new TokenPicker(
        options,
        maxTokens,
        this.host.tokenizer,
        this.host.contextTokens,
        started,
        stats,
        trace,
        turn,
      );
      const prefillStart = performance.now();
      trace.beginPrefill();
      let logits = await this.scheduler.evaluate(seq, start.tokens, start.position, 'prefill', signal, forced);
      trace.endPrefill();
      stats.prefillMs = performance.now() - prefillStart;
      let position = start.position + start.tokens.length;
      turn?.evaluated(position);
      const decodeStart = performance.now();
      for (let index = 0; index < maxTokens; index++) {
        if (signal?.aborted) {
          stats.finishReason = 'aborted';
          throw new RequestAbortedError();
        }
        const { token, last } = picker.pick(logits, index, position);
        yield token;
        if (last) break;
        trace.beginStep(position);
        logits = await this.scheduler.evaluate(seq, Int32Array.of(token.id), position, 'decode', signal, forced);
        trace.endStep();
        position++;
        turn?.evaluated(position);
      }
      stats.decodeMs = performance.now() - decodeStart;
      completeRates(stats);
      completed = true;
    } catch (err) {
      failure = { error: err };
      stats.finishReason = err instanceof RequestAbortedError ? 'aborted' : 'error';
      throw err;
    } finally {
      if (!completed && !failure) stats.finishReason = 'aborted';
      this.give(seq);
      this.host.finished(stats);
      reportStats(options, stats);
      turn?.end(stats);
      trace.end(stats, failure?.error);
      release();
    }
  }

  /** engine.logits: the last row's logits of `ids` from position 0 of a free sequence. */
  async logits(ids: Int32Array): Promise<Float32Array> {
    const release = await this.queue.acquire();
    const seq = this.host.owner.choose([...this.free], undefined);
    try {
      this.host.checkModel();
      this.take(seq);
      this.host.owner.claim('engine.logits', seq);
      const routing = this.host.routes?.begin();
      const forced: ForcedRoutesOf | undefined = routing && ((phase, rows) => routing.next(phase, rows));
      return await this.scheduler.evaluate(seq, ids, 0, 'prefill', undefined, forced);
    } finally {
      if (!this.free.has(seq)) this.give(seq);
      release();
    }
  }

  private take(seq: number): void {
    this.free.delete(seq);
    this.scheduler.join(seq);
    this.joined++;
  }

  private give(seq: number): void {
    this.free.add(seq);
    this.scheduler.leave(seq);
  }

  /** One step: through the tier's request (begun with the busy period) or the plain eval. */
  private async runStep(step: BatchStep): Promise<void> {
    try {
      const tier = this.host.tier;
      if (tier) {
        const period = this.period ?? (await this.beginPeriod(tier));
        const before = period.request.beforeStep();
        if (before) await before;
        await period.request.evaluate('decode', step.tokens, 0, step.logits, step.forcedRoutes, {
          seqIds: step.seqIds,
          positions: step.positions,
          logitRows: step.logitRows,
        });
      } else {
        await this.host.evalUntiered(step);
      }
    } catch (err) {
      throw this.host.evalError(err, step.positions[0]);
    }
    this.host.afterEval();
  }

  private async beginPeriod(tier: EngineTier): Promise<TierPeriod> {
    const trace = new BatchTrace(this.host.name);
    const log = tier.config.heat !== false ? new RouteLog(this.host.hparams) : undefined;
    try {
      this.period = { request: await tier.beginRequest(trace, log), trace, log };
    } catch (err) {
      trace.end(0, err);
      throw err;
    }
    return this.period;
  }

  /** No request left and no step running: the tier's request ends, the heat file takes the period's routes. */
  private endPeriod(): void {
    const period = this.period;
    this.period = undefined;
    const requests = this.joined;
    this.joined = 0;
    if (!period) return;
    let error: unknown;
    try {
      period.request.finish();
      if (period.log) this.host.tier?.mergeHeat(period.log.rows());
    } catch (err) {
      error = err;
    }
    period.trace.end(requests, error);
  }
}
