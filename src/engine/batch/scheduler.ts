/**
 * Continuous batching: the sequences running on an engine at once (openEngine `parallel`) share
 * each eval. Each request hands the scheduler its next rows (its prompt, then one sampled token at a
 * time) and awaits the logits of the last of them; the scheduler runs one step at a time over every
 * sequence with rows waiting:
 *
 *   rows waiting ─> planStep (decode rows first, then prompt chunks, <= batchTokensMax)
 *                ─> one eval (seqIds, positions, logitRows) ─> each finished sequence's logits
 *
 * A step starts on the next macrotask after rows arrive (setImmediate), so every sequence whose
 * consumer asked for its next token in the meantime joins it. A sequence's rows attend to its own
 * cache only (the native context's sequences), so its logits are the bits it gets alone. An eval's
 * failure fails every sequence in the step; one whose rows were left for a later step is unharmed.
 * `members` are the requests that joined and have not left: the host's span over a busy period
 * (the tier's request) ends only when none is left and no step runs (onDrained).
 */
import { assert } from '../../core/assert.js';
import { RequestAbortedError } from '../../core/errors.js';
import { planStep, type PlannedRows } from './step-plan.js';

export type RowPhase = 'prefill' | 'decode';

/** One sequence's part of a step, in eval order. */
export interface StepPart {
  seq: number;
  rows: number;
  phase: RowPhase;
  /** Position of its first row in its sequence. */
  position: number;
}

/** What one step evaluates: row i is tokens[i] of sequence seqIds[i] at positions[i]. */
export interface BatchStep {
  tokens: Int32Array;
  seqIds: Int32Array;
  positions: Int32Array;
  /** The rows whose logits the step writes (each the last of a sequence's submitted rows), increasing. */
  logitRows: Int32Array;
  /** [logitRows.length][nVocab] */
  logits: Float32Array;
  parts: readonly StepPart[];
  /** [rows][nLayer][k] forced expert ids (a route trace drives the routing), else undefined. */
  forcedRoutes: Int32Array | undefined;
}

/** Where a sequence's forced routes come from (routesFrom: each request's own cursor into the trace). */
export type ForcedRoutesOf = (phase: RowPhase, rows: number) => Int32Array | undefined;

interface Waiting {
  seq: number;
  tokens: Int32Array;
  /** Rows of tokens evaluated so far. */
  done: number;
  position: number;
  phase: RowPhase;
  arrival: number;
  forced: ForcedRoutesOf | undefined;
  resolve: (logits: Float32Array) => void;
  reject: (error: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class BatchScheduler {
  private readonly waiting = new Map<number, Waiting>();
  private readonly members = new Set<number>();
  private looping = false;
  private stepping = false;
  private arrivals = 0;

  constructor(
    private readonly nVocab: number,
    private readonly tokensMax: number,
    private readonly run: (step: BatchStep) => Promise<void>,
    /** No member left and no step running (the host's busy period is over). */
    private readonly onDrained: () => void,
  ) {}

  /** Requests that joined and have not left. */
  get active(): number {
    return this.members.size;
  }

  /** A request takes sequence `seq` (the engine chose it among the free ones). */
  join(seq: number): void {
    assert(!this.members.has(seq), 'one request per sequence');
    this.members.add(seq);
  }

  /** The request on `seq` ended: nothing of it waits any more. */
  leave(seq: number): void {
    const w = this.waiting.get(seq);
    if (w) this.drop(w);
    this.members.delete(seq);
    if (this.members.size === 0 && !this.stepping) this.onDrained();
  }

  /**
   * Evaluates `tokens` of sequence `seq` at [position, position + n) in the coming steps; resolves
   * with the last row's logits (a copy), rejects with the failing step's error, or at once with
   * RequestAbortedError when `signal` aborts first.
   */
  evaluate(
    seq: number,
    tokens: Int32Array,
    position: number,
    phase: RowPhase,
    signal?: AbortSignal,
    forced?: ForcedRoutesOf,
  ): Promise<Float32Array> {
    assert(this.members.has(seq) && !this.waiting.has(seq), 'a member submits one batch of rows at a time');
    assert(tokens.length > 0, 'at least one row');
    if (signal?.aborted) return Promise.reject(new RequestAbortedError());
    return new Promise((resolve, reject) => {
      const w: Waiting = {
        seq,
        tokens,
        done: 0,
        position,
        phase,
        arrival: this.arrivals++,
        forced,
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.drop(w);
          reject(new RequestAbortedError());
        },
      };
      signal?.addEventListener('abort', w.onAbort, { once: true });
      this.waiting.set(seq, w);
      this.kick();
    });
  }

  private drop(w: Waiting): void {
    if (this.waiting.get(w.seq) === w) this.waiting.delete(w.seq);
    w.signal?.removeEventListener('abort', w.onAbort);
  }

  private kick(): void {
    if (this.looping) return;
    this.looping = true;
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      for (;;) {
        // Every sequence whose consumer is about to ask for its next token joins this step.
        await new Promise<void>((resolve) => setImmediate(resolve));
        const plan = planStep(
          Array.from(this.waiting.values(), (w) => ({
            seq: w.seq,
            rows: w.tokens.length - w.done,
            decoding: w.phase === 'decode',
            arrival: w.arrival,
          })),
          this.tokensMax,
        );
        if (plan.length === 0) break;
        await this.step(plan);
      }
    } finally {
      this.looping = false;
    }
  }

  private async step(plan: readonly PlannedRows[]): Promise<void> {
    const inStep = plan.map((p) => this.waiting.get(p.seq)!);
    const step = this.build(plan, inStep);
    this.stepping = true;
    let failure: { error: unknown } | undefined;
    try {
      await this.run(step);
    } catch (error) {
      failure = { error };
    } finally {
      this.stepping = false;
    }
    let logitRow = 0;
    plan.forEach((p, i) => {
      const w = inStep[i];
      const finished = w.done + p.rows === w.tokens.length;
      const row = finished ? logitRow++ : -1;
      if (this.waiting.get(w.seq) !== w) return; // aborted or left while the step ran
      if (failure) {
        this.drop(w);
        w.reject(failure.error);
        return;
      }
      w.done += p.rows;
      w.position += p.rows;
      if (!finished) return;
      this.drop(w);
      w.resolve(step.logits.slice(row * this.nVocab, (row + 1) * this.nVocab));
    });
    if (this.members.size === 0) this.onDrained();
  }

  private build(plan: readonly PlannedRows[], inStep: readonly Waiting[]): BatchStep {
    const total = plan.reduce((n, p) => n + p.rows, 0);
    const tokens = new Int32Array(total);
    const seqIds = new Int32Array(total);
    const positions = new Int32Array(total);
    const logitRows: number[] = [];
    const parts: StepPart[] = [];
    const forced: Int32Array[] = [];
    let at = 0;
    plan.forEach((p, i) => {
      const w = inStep[i];
      tokens.set(w.tokens.subarray(w.done, w.done + p.rows), at);
      seqIds.fill(p.seq, at, at + p.rows);
      for (let r = 0; r < p.rows; r++) positions[at + r] = w.position + r;
      if (w.done + p.rows === w.tokens.length) logitRows.push(at + p.rows - 1);
      parts.push({ seq: p.seq, rows: p.rows, phase: w.phase, position: w.position });
      const f = w.forced?.(w.phase, p.rows);
      if (f) forced.push(f);
      at += p.rows;
    });
    assert(forced.length === 0 || forced.length === plan.length, 'forced routes for every sequence or none');
    return {
      tokens,
      seqIds,
      positions,
      logitRows: Int32Array.from(logitRows),
      logits: new Float32Array(Math.max(1, logitRows.length) * this.nVocab),
      parts,
      forcedRoutes: forced.length > 0 ? concat(forced) : undefined,
    };
  }
}

function concat(parts: readonly Int32Array[]): Int32Array {
  const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
