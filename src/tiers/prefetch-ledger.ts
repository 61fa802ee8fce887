/**
 * A bounded prefetch queue and its exact-route ledger, pure and deterministic: a typed face over
 * the native ledger (include/mt_prefetch_ledger.h, native/policy/prefetch_ledger.cc), the state
 * machine the engine's tier runs (native/tier/tier_prefetch.cc), so the replay and the engine keep
 * one ledger. The caller passes every time (ms on its own clock, never going back); nothing here
 * reads a clock, moves bytes or throws for a full queue. The replay drives it (prefetch-replay.ts).
 *
 *   admit ──▶ queued ──issue──▶ issued (in flight) ──complete──▶ completed (landed, resident)
 *               │                    └───────fail───────▶ failed
 *               ├── cancel, or beginStep(a newer generation) ──▶ cancelled
 *               └── drop (no slot could take it when its turn came) ──▶ dropped
 *
 * A task's bytes count as outstanding (queued + in flight, against inflightBytesMax) from admit
 * until its end, where they are retired exactly once: completed, failed, cancelled or dropped.
 *
 * Exact-route accounting by (layer, expert), the tier's words (mt_prefetch_ledger.h):
 *   covered    prefetched, routed after it landed
 *   late       prefetched, routed while in flight: counted when it lands, with the wait (lateMs)
 *   uncovered  routed, not resident, with no prefetch read for it (a demand read)
 *   wasted     prefetched and landed, evicted before any routing (evicted in flight: wasted as it lands;
 *              a route that waited on it is then uncovered: it needs a demand read after all)
 *   cancelled  admitted, never issued (a newer generation, a route that overtook it, the caller)
 *   resident   routed and resident by other means (not a prefetch's doing)
 * Each landed task is exactly one of covered, late, wasted or still landed unrouted; each route
 * exactly one of resident, covered, late, uncovered, or awaiting a read still in flight.
 * This file checks the arguments (typed errors) and asserts the ledger's answers (a task in the
 * wrong state for its event is a bug); the transitions and the tallies are the native ledger's.
 */
import { assert } from '../core/assert.js';
import { InvalidOptionError } from '../core/errors.js';
import { nativePolicy, type NativePrefetchLedger } from '../native/policy.js';
import { TRANSFER_WINDOW_DEFAULTS } from './transfer-window.js';

export type PrefetchTaskState = 'queued' | 'issued' | 'completed' | 'failed' | 'cancelled' | 'dropped';

export interface PrefetchLedgerLimits {
  /** Tasks queued and not yet issued, at most. */
  queueLengthMax: number;
  /** Bytes of tasks admitted and not retired (queued + in flight), at most. */
  inflightBytesMax: number;
}

/** Defaults: the native tier's queue (MT_TIER_PREFETCH_QUEUE_MAX, prefetch.queueMax's) and the window's in-flight cap. */
export const PREFETCH_LEDGER_LIMITS: PrefetchLedgerLimits = {
  queueLengthMax: 64,
  inflightBytesMax: TRANSFER_WINDOW_DEFAULTS.inflightBytesMax,
};

export const TALLY_NAMES = [
  'admitted',
  'refusedQueueFull',
  'refusedBytesFull',
  'refusedDuplicate',
  'issued',
  'completed',
  'failed',
  'cancelled',
  'dropped',
  'retired',
  'routed',
  'resident',
  'covered',
  'late',
  'uncovered',
  'wasted',
] as const;
export type TallyName = (typeof TALLY_NAMES)[number];
export type Tallies = Record<TallyName, { count: number; bytes: number }> & { lateMs: number };

export interface PrefetchTask {
  readonly id: number;
  readonly layer: number;
  readonly expert: number;
  readonly bytes: number;
  readonly generation: number;
  readonly admittedMs: number;
  readonly state: PrefetchTaskState;
  /** A route found it in flight: it lands late (or its failure leaves the route uncovered). */
  readonly awaited: boolean;
  /** Evicted while in flight: it lands as wasted. */
  readonly evicted: boolean;
  readonly retired: boolean;
}

export type RouteOutcome = 'covered' | 'awaiting' | 'uncovered' | 'resident';

export function emptyTallies(): Tallies {
  const t = { lateMs: 0 } as Tallies;
  for (const n of TALLY_NAMES) t[n] = { count: 0, bytes: 0 };
  return t;
}

/** mt_prefetch_task_state, by value. */
const TASK_STATES = ['free', 'queued', 'issued', 'completed', 'failed', 'cancelled', 'dropped'] as const;
const TASK_AWAITED = 1;
const TASK_EVICTED = 2;

/** The native ledger behind typed arguments: checks what a caller passes, asserts what the ledger answers. */
export class PrefetchLedger {
  private readonly native = nativePolicy();
  private readonly handle: NativePrefetchLedger;
  private lastMs = -Infinity;

  constructor(
    readonly layers: number,
    readonly experts: number,
    readonly limits: PrefetchLedgerLimits = PREFETCH_LEDGER_LIMITS,
  ) {
    for (const [name, v] of [
      ['layers', layers],
      ['experts', experts],
      ['limits.queueLengthMax', limits.queueLengthMax],
    ] as const) {
      if (!Number.isSafeInteger(v) || v < 1)
        throw new InvalidOptionError(`prefetchLedger.${name}`, 'an integer >= 1', v);
    }
    if (!Number.isSafeInteger(limits.inflightBytesMax) || limits.inflightBytesMax < 1) {
      throw new InvalidOptionError(
        'prefetchLedger.limits.inflightBytesMax',
        'an integer number of bytes >= 1',
        limits.inflightBytesMax,
      );
    }
    this.handle = this.native.prefetchLedgerCreate(layers, experts, limits.queueLengthMax, limits.inflightBytesMax);
  }

  get generation(): number {
    return this.state()[0];
  }
  get queueLength(): number {
    return this.state()[1];
  }
  /** Bytes of issued tasks not yet landed or failed. */
  get inflightBytes(): number {
    return this.state()[2];
  }
  /** Bytes admitted and not retired: queued + in flight (what the limit and the window count). */
  get outstandingBytes(): number {
    return this.state()[3];
  }
  tallies(): Tallies {
    return this.readTallies(-1);
  }
  layerTallies(layer: number): Tallies {
    this.checkKey(layer, 0);
    return this.readTallies(layer);
  }
  task(id: number): Readonly<PrefetchTask> | undefined {
    const r =
      Number.isSafeInteger(id) && id >= 1
        ? this.native.prefetchLedgerRead(this.handle, 'task', id)
        : new Float64Array(0);
    if (r.length === 0) return undefined;
    const [layer, expert, bytes, generation, admittedMs, state, flags] = r;
    const name = TASK_STATES[state];
    assert(name !== 'free', `prefetch task ${id} was admitted`);
    const retired = name !== 'queued' && name !== 'issued';
    return {
      id,
      layer,
      expert,
      bytes,
      generation,
      admittedMs,
      state: name,
      awaited: (flags & TASK_AWAITED) !== 0,
      evicted: (flags & TASK_EVICTED) !== 0,
      retired,
    };
  }
  /** The queued tasks, oldest first (the order a lane issues them in). */
  queued(): readonly Readonly<PrefetchTask>[] {
    return Array.from(this.native.prefetchLedgerRead(this.handle, 'queue'), (id) => this.task(id)!);
  }
  liveTask(layer: number, expert: number): Readonly<PrefetchTask> | undefined {
    this.checkKey(layer, expert);
    const [id] = this.native.prefetchLedgerRead(this.handle, 'live', layer, expert);
    return id === undefined ? undefined : this.task(id);
  }
  /** Landed prefetches not yet routed or evicted (neither covered nor wasted yet). */
  landedUnrouted(): number {
    return this.state()[4];
  }

  /** A new step: the queued tasks of older generations are cancelled (returned: how many). */
  beginStep(generation: number, atMs: number): number {
    const now = this.generation;
    if (!Number.isSafeInteger(generation) || generation < now) {
      throw new InvalidOptionError(
        'prefetchLedger.beginStep generation',
        `an integer >= ${now} (generations never go back)`,
        generation,
      );
    }
    return this.event('begin', atMs, generation) as number;
  }

  /** Queues a read of (layer, expert); undefined when refused (counted): a duplicate or no room under the limits. */
  admit(layer: number, expert: number, bytes: number, atMs: number): number | undefined {
    this.checkKey(layer, expert);
    if (!Number.isSafeInteger(bytes) || bytes < 1)
      throw new InvalidOptionError('prefetchLedger.admit bytes', 'an integer >= 1', bytes);
    const id = this.event('admit', atMs, layer, expert, bytes);
    return typeof id === 'number' ? id : undefined;
  }

  issue(id: number, atMs: number): void {
    this.end('issue', id, atMs, 'queued');
  }
  cancel(id: number, atMs: number): void {
    this.end('cancel', id, atMs, 'queued');
  }
  /** A queued task no slot could take when its turn came: it ends unread. */
  drop(id: number, atMs: number): void {
    this.end('drop', id, atMs, 'queued');
  }
  complete(id: number, atMs: number): void {
    this.end('complete', id, atMs, 'issued');
  }
  /** A failed read: its bytes retire; a route waiting on it now needs a demand read (uncovered). */
  fail(id: number, atMs: number): void {
    this.end('fail', id, atMs, 'issued');
  }

  /**
   * (layer, expert) is routed now; `resident`: it holds a slot by other means. A queued read it
   * overtook is cancelled (the demand read goes first); one in flight is awaited (late as it lands).
   */
  route(layer: number, expert: number, bytes: number, atMs: number, resident: boolean): RouteOutcome {
    this.checkKey(layer, expert);
    const outcome = this.event('route', atMs, layer, expert, bytes, resident ? 1 : 0);
    assert(
      outcome === 'covered' || outcome === 'awaiting' || outcome === 'uncovered' || outcome === 'resident',
      `a route's outcome, not ${outcome}`,
    );
    return outcome;
  }

  /** (layer, expert) left its slot: a landed prefetch never routed is wasted; one in flight is wasted as it lands. */
  evict(layer: number, expert: number, atMs: number): void {
    this.checkKey(layer, expert);
    this.event('evict', atMs, layer, expert);
  }

  /** A task's event; the ledger changes nothing when the task is not in the state the event needs. */
  private end(event: string, id: number, atMs: number, from: PrefetchTaskState): void {
    const outcome = this.event(event, atMs, Number.isSafeInteger(id) && id >= 1 ? id : 0x7fffffff);
    assert(outcome !== 'wrong-state', `prefetch task ${id} exists and is ${from} (${event})`);
  }

  private event(event: string, atMs: number, ...args: number[]): number | string {
    if (!Number.isFinite(atMs) || atMs < this.lastMs)
      throw new InvalidOptionError(
        'prefetchLedger atMs',
        `a finite time >= ${this.lastMs} ms (time never goes back)`,
        atMs,
      );
    this.lastMs = atMs;
    return this.native.prefetchLedgerEvent(this.handle, event, atMs, ...args);
  }

  private state(): Float64Array {
    return this.native.prefetchLedgerRead(this.handle, 'state');
  }

  private readTallies(layer: number): Tallies {
    const r = this.native.prefetchLedgerRead(this.handle, 'tallies', layer);
    const t = { lateMs: r[2 * TALLY_NAMES.length] } as Tallies;
    TALLY_NAMES.forEach((n, i) => {
      t[n] = { count: r[2 * i], bytes: r[2 * i + 1] };
    });
    return t;
  }

  private checkKey(layer: number, expert: number): void {
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.layers)
      throw new InvalidOptionError('prefetchLedger layer', `an integer in [0, ${this.layers})`, layer);
    if (!Number.isInteger(expert) || expert < 0 || expert >= this.experts)
      throw new InvalidOptionError('prefetchLedger expert', `an integer in [0, ${this.experts})`, expert);
  }
}
