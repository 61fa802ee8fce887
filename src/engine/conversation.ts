/**
 * A conversation: turns that keep the engine's KV cache between them, so a turn evaluates only
 * the tokens that are not in the cache yet.
 *
 *   turn 1   [p1]        at 0       -> decode a1 .. ak   (ak sampled, never evaluated: pending)
 *   turn 2   [ak, p2]    at cached  -> decode b1 .. bm   (positions [0, cached) reused)
 *
 *   cache:   | p1 | a1 .. ak-1 | ak | p2 | b1 .. bm-1 |  bm pending
 *
 * The engine has one KV cache and runs one request at a time (src/engine/request-queue.ts). Every
 * request that evaluates takes the cache under a new epoch (ContextOwner). A turn whose conversation
 * no longer holds the epoch of its last eval finds its cache overwritten: it is refused with
 * ConversationEvictedError before any eval (onEvicted 'throw', the default; the history stays in
 * `tokens`), or evaluates the whole history again from position 0 (onEvicted 'replay'; the turn's
 * stats count it as replayedTokens).
 *
 * Limit: a turn's cached tokens + the tokens it evaluates + its maxTokens must not pass the
 * engine's contextTokens, or it is refused with ContextFullError before any eval (nothing changes).
 * So a turn never stops with finishReason 'context': the whole turn fits, its pending last token
 * included.
 *
 * After any turn (finished, failed, aborted, or its consumer broke out early): `tokens` holds the
 * prompt once its prefill succeeded and each token once it was yielded; `cachedTokens` counts
 * those whose eval succeeded (positions [0, cachedTokens) of the cache, each written at its own
 * position); the rest, at most the last one, is evaluated first by the next turn. A failed eval
 * writes only at and after its own position, so the cached prefix stays exact.
 */
import { assert } from '../core/assert.js';
import { ContextFullError, ConversationEvictedError, InvalidOptionError } from '../core/errors.js';
import { fromCancellable } from '../streams/tokens.js';
import type { Observable } from 'rxjs';
import type { GenerateOptions, GeneratedToken } from './generate-options.js';
import type { GenerationStats } from './stats.js';

/**
 * Who wrote each sequence of the engine's KV cache last (one sequence, or `parallel` of them):
 * each request that evaluates claims a sequence under the next epoch, before its first eval. A
 * conversation holds its cache while its sequence's epoch is the one its last turn claimed.
 */
export class ContextOwner {
  private epoch = 0;
  private lastBy = 'none';
  private conversations = 0;
  /** Per sequence: the epoch of its last claim (0: never), and whether that claim keeps its cache (a conversation). */
  private readonly epochs: number[];
  private readonly keeps: boolean[];

  constructor(readonly sequences = 1) {
    this.epochs = new Array<number>(sequences).fill(0);
    this.keeps = new Array<boolean>(sequences).fill(false);
  }

  /** seq: the sequence taken; keeps: a conversation's turn, whose cache later turns reuse. */
  claim(by: string, seq = 0, keeps = false): number {
    this.lastBy = by;
    this.epochs[seq] = ++this.epoch;
    this.keeps[seq] = keeps;
    return this.epoch;
  }

  holds(epoch: number): boolean {
    return this.seqOf(epoch) !== undefined;
  }

  /** The sequence whose cache the claim of `epoch` still holds, or undefined once another claimed it. */
  seqOf(epoch: number): number | undefined {
    const seq = this.epochs.indexOf(epoch);
    return epoch > 0 && seq >= 0 ? seq : undefined;
  }

  /**
   * The sequence a new request should take among `free`: `preferred` (a conversation's own) when
   * free, else one that holds no conversation's cache, else the one claimed longest ago.
   */
  choose(free: readonly number[], preferred: number | undefined): number {
    if (preferred !== undefined && free.includes(preferred)) return preferred;
    const rank = (s: number): number => (this.keeps[s] ? 2 ** 40 : 0) + this.epochs[s];
    return free.reduce((best, s) => (rank(s) < rank(best) ? s : best));
  }

  /** Requests that claimed the cache after `epoch`. */
  since(epoch: number): number {
    return this.epoch - epoch;
  }

  /** What claimed the cache last ('engine.generate', 'engine.logits', 'conversation 2'). */
  get last(): string {
    return this.lastBy;
  }

  /** A number for a new conversation, to name it in another's eviction error. */
  nextConversation(): number {
    return ++this.conversations;
  }
}

/** Where a request's tokens go in the cache: evaluate `tokens` at [position, position + tokens.length). */
export interface TurnStart {
  position: number;
  tokens: Int32Array;
  /** Of `tokens`, the history evaluated again after an eviction (onEvicted 'replay'). */
  replayedTokens: number;
}

/**
 * How a conversation's turn sits in the engine's context. The engine's run calls these in order:
 * begin (under the queue, before any eval), claimed (just before the first eval), evaluated after
 * each eval that succeeded, sampled before each token is yielded, end in the request's finally.
 */
export interface ContextTurn {
  /** Throws to refuse the turn (evicted, context full, closed): nothing was evaluated, nothing changed. */
  begin(): TurnStart;
  readonly name: string;
  claimed(epoch: number): void;
  /** The sequence whose cache holds this conversation's prefix now (undefined: none, or evicted). */
  heldSequence(): number | undefined;
  /** The cache now holds positions [0, cachedTokens). */
  evaluated(cachedTokens: number): void;
  sampled(id: number): void;
  end(stats: GenerationStats): void;
}

/** What a conversation needs of its engine (src/engine/engine.ts supplies it). */
export interface ConversationHost {
  readonly contextTokens: number;
  readonly owner: ContextOwner;
  checkOpen(): void;
  /** engine.generate's checks of the prompt's type and the options; returns maxTokens. */
  checkRequest(prompt: unknown, options: GenerateOptions): number;
  /** addBos undefined: as the tokenizer asks. */
  tokenize(text: string, addBos: boolean | undefined): number[];
  /** At least one id, each in the vocabulary (the context's length is the turn's to check). */
  checkIds(ids: readonly number[]): void;
  /** A request placed by `turn`, queued like engine.generate. */
  run(
    prompt: string | number[],
    maxTokens: number,
    options: GenerateOptions,
    turn: ContextTurn,
  ): AsyncIterable<GeneratedToken>;
}

export interface ConversationOptions {
  /**
   * A turn after another request used the engine's KV cache: 'throw' (default) refuses it with
   * ConversationEvictedError, nothing changed; 'replay' evaluates the history again from position 0
   * (the turn's stats: replayedTokens, cachedTokens 0).
   */
  onEvicted?: 'throw' | 'replay';
}

export class Conversation {
  readonly id: number;
  private readonly onEvicted: 'throw' | 'replay';
  /** The ids of every accepted turn: prompts and yielded tokens. */
  private history: number[] = [];
  /** Positions [0, cached) of the cache hold history[0, cached), written under `epoch`. */
  private cached = 0;
  private epoch = -1;
  /** Bumped by reset() and close(): a turn still running keeps streaming but no longer updates the state. */
  private generation = 0;
  private closed = false;
  private stats: GenerationStats | undefined;

  constructor(
    private readonly host: ConversationHost,
    options: ConversationOptions = {},
  ) {
    if (typeof options !== 'object' || options === null) throw new InvalidOptionError('options', 'an object', options);
    const onEvicted = options.onEvicted ?? 'throw';
    if (onEvicted !== 'throw' && onEvicted !== 'replay')
      throw new InvalidOptionError('onEvicted', '"throw" or "replay"', onEvicted);
    this.onEvicted = onEvicted;
    this.id = host.owner.nextConversation();
  }

  /** The ids in the cache and the pending last one (a copy). */
  get tokens(): number[] {
    return this.history.slice();
  }

  /** Positions of the KV cache this conversation holds now (0 once evicted). */
  get cachedTokens(): number {
    return this.evicted ? 0 : this.cached;
  }

  /** Another request ran on the engine since this conversation's last eval, overwriting its cache. */
  get evicted(): boolean {
    return this.cached > 0 && !this.host.owner.holds(this.epoch);
  }

  /** Statistics of the last turn that ran (promptTokens: the tokens it evaluated; cachedTokens: the prefix it reused). */
  get lastStats(): GenerationStats | undefined {
    return this.stats;
  }

  /**
   * The next turn: streams tokens like engine.generate. addBos defaults to the tokenizer's choice on
   * the first turn (an empty history) and to false after. Refused when it would not fit (ContextFullError) or when
   * the cache was evicted (ConversationEvictedError, unless onEvicted is 'replay'), on the first
   * next(), before any eval.
   */
  generate(prompt: string | number[], options: GenerateOptions = {}): AsyncIterable<GeneratedToken> {
    this.checkOpen();
    this.host.checkOpen();
    const maxTokens = this.host.checkRequest(prompt, options);
    if (Array.isArray(prompt)) this.host.checkIds(prompt);
    return this.host.run(prompt, maxTokens, options, this.turn(prompt, maxTokens, options));
  }

  /** The same tokens as an RxJS Observable; unsubscribing cancels the turn. */
  generate$(prompt: string | number[], options: GenerateOptions = {}): Observable<GeneratedToken> {
    return fromCancellable((signal) =>
      this.generate(prompt, {
        ...options,
        signal: options.signal ? AbortSignal.any([options.signal, signal]) : signal,
      }),
    );
  }

  /** Forgets the history: the next turn starts at position 0. */
  reset(): void {
    this.generation++;
    this.history = [];
    this.cached = 0;
    this.epoch = -1;
  }

  /** No more turns (a typed refusal); `tokens` stays readable. A turn still running is no longer recorded. */
  close(): void {
    this.closed = true;
    this.generation++;
  }

  private checkOpen(): void {
    if (this.closed) throw new InvalidOptionError('conversation', 'an open conversation', 'closed');
  }

  private turn(prompt: string | number[], maxTokens: number, options: GenerateOptions): ContextTurn {
    let generation = -1;
    let promptIds: number[] = [];
    let prefilled = false;
    const current = (): boolean => generation === this.generation;
    return {
      name: `conversation ${this.id}`,
      begin: () => {
        this.checkOpen();
        generation = this.generation;
        if (this.evicted) this.evict();
        // After an eviction (or a replay whose prefill failed) the history is evaluated again from 0.
        const replayedTokens = this.cached === 0 ? this.history.length : 0;
        // BOS as the tokenizer asks on the first turn, none after (it would sit mid-conversation).
        const addBos = options.addBos ?? (this.history.length === 0 ? undefined : false);
        promptIds = typeof prompt === 'string' ? this.host.tokenize(prompt, addBos) : prompt.slice();
        this.host.checkIds(promptIds);
        const tokens = [...this.history.slice(this.cached), ...promptIds];
        if (this.cached + tokens.length + maxTokens > this.host.contextTokens) {
          throw new ContextFullError(this.cached, tokens.length, maxTokens, this.host.contextTokens);
        }
        return { position: this.cached, tokens: Int32Array.from(tokens), replayedTokens };
      },
      claimed: (epoch) => {
        if (current()) this.epoch = epoch;
      },
      heldSequence: () => (this.cached > 0 && !this.evicted ? this.host.owner.seqOf(this.epoch) : undefined),
      evaluated: (cachedTokens) => {
        if (!current()) return;
        // The first eval is the prefill: from here on the prompt is part of the history.
        if (!prefilled) this.history.push(...promptIds);
        prefilled = true;
        assert(cachedTokens <= this.history.length, 'a conversation caches only tokens of its history');
        this.cached = cachedTokens;
      },
      sampled: (id) => {
        if (current()) this.history.push(id);
      },
      end: (stats) => {
        if (current()) this.stats = stats;
      },
    };
  }

  /** The cache was overwritten: refuse the turn, or let it start again from position 0. */
  private evict(): void {
    if (this.onEvicted === 'throw')
      throw new ConversationEvictedError(this.cached, this.host.owner.since(this.epoch), this.host.owner.last);
    this.cached = 0;
  }
}
