/**
 * A bounded prefetch queue and its exact-route ledger, pure and deterministic:
 * the caller passes every time (ms on its own clock, never going back); nothing here reads a
 * clock, moves bytes or throws for a full queue. The replay drives it (prefetch-replay.ts).
 *
 *   admit ──▶ queued ──issue──▶ issued (in flight) ──complete──▶ completed (landed, resident)
 *               │                    └───────fail───────▶ failed
 *               ├── cancel, or beginStep(a newer generation) ──▶ cancelled
 *               └── drop (no slot could take it when its turn came) ──▶ dropped
 *
 * A task's bytes count as outstanding (queued + in flight, against inflightBytesMax) from admit
 * until its end, where they are retired exactly once: completed, failed, cancelled or dropped
 * (the native tier's ledger has the same ends, tier_prefetch.cc).
 *
 * Exact-route accounting by (layer, expert), in the native tier's words (tier_prefetch.cc):
 *   covered    prefetched, routed after it landed
 *   late       prefetched, routed while in flight: counted when it lands, with the wait (lateMs)
 *   uncovered  routed, not resident, with no prefetch read for it (a demand read)
 *   wasted     prefetched and landed, evicted before any routing (evicted in flight: wasted as it lands;
 *              a route that waited on it is then uncovered: it needs a demand read after all)
 *   cancelled  admitted, never issued (a newer generation, a route that overtook it, the caller)
 *   resident   routed and resident by other means (not a prefetch's doing)
 * Each landed task is exactly one of covered, late, wasted or still landed unrouted; each route
 * exactly one of resident, covered, late, uncovered, or awaiting a read still in flight.
 */
import { assert } from '../core/assert.js';
import { InvalidOptionError } from '../core/errors.js';
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
  'admitted', 'refusedQueueFull', 'refusedBytesFull', 'refusedDuplicate', 'issued', 'completed', 'failed', 'cancelled',
  'dropped', 'retired', 'routed', 'resident', 'covered', 'late', 'uncovered', 'wasted',
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
  state: PrefetchTaskState;
  /** When a route found it in flight: the late wait runs from here to its landing. */
  awaitedMs?: number;
  /** Evicted while in flight: it lands as wasted. */
  evicted: boolean;
  retired: boolean;
}

export type RouteOutcome = 'covered' | 'awaiting' | 'uncovered' | 'resident';

export function emptyTallies(): Tallies {
  const t = { lateMs: 0 } as Tallies;
  for (const n of TALLY_NAMES) t[n] = { count: 0, bytes: 0 };
  return t;
}

export class PrefetchLedger {
  private readonly total = emptyTallies();
  private readonly byLayer: Tallies[];
  private readonly tasks = new Map<number, PrefetchTask>();
  /** The task of each (layer, expert) that still matters to a route: queued, in flight or landed unrouted. */
  private readonly live = new Map<number, PrefetchTask>();
  private readonly queue: PrefetchTask[] = [];
  private nextId = 1;
  private generationNow = 0;
  private lastMs = -Infinity;
  private outstanding = 0;
  private inflight = 0;

  constructor(readonly layers: number, readonly experts: number, readonly limits: PrefetchLedgerLimits = PREFETCH_LEDGER_LIMITS) {
    for (const [name, v] of [['layers', layers], ['experts', experts], ['limits.queueLengthMax', limits.queueLengthMax]] as const) {
      if (!Number.isSafeInteger(v) || v < 1) throw new InvalidOptionError(`prefetchLedger.${name}`, 'an integer >= 1', v);
    }
    if (!Number.isSafeInteger(limits.inflightBytesMax) || limits.inflightBytesMax < 1) {
      throw new InvalidOptionError('prefetchLedger.limits.inflightBytesMax', 'an integer number of bytes >= 1', limits.inflightBytesMax);
    }
    this.byLayer = Array.from({ length: layers }, emptyTallies);
  }

  get generation(): number { return this.generationNow; }
  get queueLength(): number { return this.queue.length; }
  /** Bytes of issued tasks not yet landed or failed. */
  get inflightBytes(): number { return this.inflight; }
  /** Bytes admitted and not retired: queued + in flight (what the limit and the window count). */
  get outstandingBytes(): number { return this.outstanding; }
  tallies(): Tallies { return structuredClone(this.total); }
  layerTallies(layer: number): Tallies {
    this.checkKey(layer, 0);
    return structuredClone(this.byLayer[layer]);
  }
  task(id: number): Readonly<PrefetchTask> | undefined { return this.tasks.get(id); }
  /** The queued tasks, oldest first (the order a lane issues them in). */
  queued(): readonly Readonly<PrefetchTask>[] { return [...this.queue]; }
  liveTask(layer: number, expert: number): Readonly<PrefetchTask> | undefined { return this.live.get(this.checkKey(layer, expert)); }
  /** Landed prefetches not yet routed or evicted (neither covered nor wasted yet). */
  landedUnrouted(): number { return [...this.live.values()].filter((t) => t.state === 'completed').length; }

  /** A new step: the queued tasks of older generations are cancelled (returned: how many). */
  beginStep(generation: number, atMs: number): number {
    if (!Number.isSafeInteger(generation) || generation < this.generationNow) {
      throw new InvalidOptionError('prefetchLedger.beginStep generation', `an integer >= ${this.generationNow} (generations never go back)`, generation);
    }
    this.at(atMs);
    this.generationNow = generation;
    const stale = this.queue.filter((t) => t.generation < generation);
    for (const t of stale) this.cancel(t.id, atMs);
    return stale.length;
  }

  /** Queues a read of (layer, expert); undefined when refused (counted): a duplicate or no room under the limits. */
  admit(layer: number, expert: number, bytes: number, atMs: number): number | undefined {
    const key = this.checkKey(layer, expert);
    if (!Number.isSafeInteger(bytes) || bytes < 1) throw new InvalidOptionError('prefetchLedger.admit bytes', 'an integer >= 1', bytes);
    this.at(atMs);
    if (this.live.has(key)) return this.refuse('refusedDuplicate', layer, bytes);
    if (this.queue.length >= this.limits.queueLengthMax) return this.refuse('refusedQueueFull', layer, bytes);
    if (this.outstanding + bytes > this.limits.inflightBytesMax) return this.refuse('refusedBytesFull', layer, bytes);
    const t: PrefetchTask = { id: this.nextId++, layer, expert, bytes, generation: this.generationNow, admittedMs: atMs, state: 'queued', evicted: false, retired: false };
    this.tasks.set(t.id, t);
    this.live.set(key, t);
    this.queue.push(t);
    this.outstanding += bytes;
    this.bump('admitted', t);
    return t.id;
  }

  issue(id: number, atMs: number): void {
    const t = this.take(id, 'queued', atMs);
    this.queue.splice(this.queue.indexOf(t), 1);
    t.state = 'issued';
    this.inflight += t.bytes;
    this.bump('issued', t);
  }

  cancel(id: number, atMs: number): void {
    this.unqueue(id, atMs, 'cancelled');
  }

  /** A queued task no slot could take when its turn came: it ends unread. */
  drop(id: number, atMs: number): void {
    this.unqueue(id, atMs, 'dropped');
  }

  complete(id: number, atMs: number): void {
    const t = this.take(id, 'issued', atMs);
    this.inflight -= t.bytes;
    this.end(t, 'completed');
    if (t.evicted) this.bump('wasted', t);
    else if (t.awaitedMs !== undefined) {
      this.bump('late', t);
      this.total.lateMs += atMs - t.awaitedMs;
      this.byLayer[t.layer].lateMs += atMs - t.awaitedMs;
    } else return; // landed: stays live until routed (covered) or evicted (wasted)
    this.unlive(t);
  }

  /** A failed read: its bytes retire; a route waiting on it now needs a demand read (uncovered). */
  fail(id: number, atMs: number): void {
    const t = this.take(id, 'issued', atMs);
    this.inflight -= t.bytes;
    this.end(t, 'failed');
    if (t.awaitedMs !== undefined && !t.evicted) this.bump('uncovered', t);
    this.unlive(t);
  }

  /**
   * (layer, expert) is routed now; `resident`: it holds a slot by other means. A queued read it
   * overtook is cancelled (the demand read goes first); one in flight is awaited (late as it lands).
   */
  route(layer: number, expert: number, bytes: number, atMs: number, resident: boolean): RouteOutcome {
    const key = this.checkKey(layer, expert);
    this.at(atMs);
    const t = this.live.get(key);
    this.add('routed', layer, bytes);
    if (t?.state === 'queued') this.cancel(t.id, atMs);
    if (t?.state === 'completed') {
      this.live.delete(key);
      this.bump('covered', t);
      return 'covered';
    }
    // A second route of a read already awaited costs no read of its own: resident, as it lands.
    if (t?.state === 'issued' && t.awaitedMs === undefined) {
      t.awaitedMs = atMs;
      return 'awaiting';
    }
    this.add(resident || t?.state === 'issued' ? 'resident' : 'uncovered', layer, bytes);
    return t?.state === 'issued' ? 'awaiting' : resident ? 'resident' : 'uncovered';
  }

  /** (layer, expert) left its slot: a landed prefetch never routed is wasted; one in flight is wasted as it lands. */
  evict(layer: number, expert: number, atMs: number): void {
    const key = this.checkKey(layer, expert);
    this.at(atMs);
    const t = this.live.get(key);
    if (t === undefined || t.state === 'queued') return; // a queued read holds no slot yet
    this.live.delete(key);
    if (t.state === 'completed') {
      this.bump('wasted', t);
      return;
    }
    t.evicted = true;
    // A route waiting on it now needs a demand read of its own.
    if (t.awaitedMs !== undefined) this.bump('uncovered', t);
  }

  private unqueue(id: number, atMs: number, state: 'cancelled' | 'dropped'): void {
    const t = this.take(id, 'queued', atMs);
    this.queue.splice(this.queue.indexOf(t), 1);
    this.end(t, state);
  }

  private take(id: number, from: PrefetchTaskState, atMs: number): PrefetchTask {
    this.at(atMs);
    const t = this.tasks.get(id);
    assert(t !== undefined, `prefetch task ${id} exists`);
    assert(t.state === from, `prefetch task ${id}: ${from}, not ${t.state}`);
    return t;
  }

  /** The one place a task's bytes leave the outstanding count. */
  private end(t: PrefetchTask, state: 'completed' | 'failed' | 'cancelled' | 'dropped'): void {
    assert(!t.retired, `prefetch task ${t.id} retires its bytes once`);
    t.retired = true;
    t.state = state;
    this.outstanding -= t.bytes;
    assert(this.outstanding >= 0 && this.inflight >= 0, 'outstanding and in-flight bytes never go below 0');
    this.bump(state, t);
    this.bump('retired', t);
    if (state === 'cancelled' || state === 'dropped') this.unlive(t);
  }

  /** Only its own entry: an evicted task's key may hold a newer task by now. */
  private unlive(t: PrefetchTask): void {
    if (this.live.get(this.keyOf(t)) === t) this.live.delete(this.keyOf(t));
  }

  private refuse(name: TallyName, layer: number, bytes: number): undefined {
    this.add(name, layer, bytes);
    return undefined;
  }

  private bump(name: TallyName, t: PrefetchTask): void { this.add(name, t.layer, t.bytes); }

  private add(name: TallyName, layer: number, bytes: number): void {
    for (const tally of [this.total, this.byLayer[layer]]) {
      tally[name].count++;
      tally[name].bytes += bytes;
    }
  }

  private keyOf(t: PrefetchTask): number { return t.layer * this.experts + t.expert; }

  private checkKey(layer: number, expert: number): number {
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.layers) throw new InvalidOptionError('prefetchLedger layer', `an integer in [0, ${this.layers})`, layer);
    if (!Number.isInteger(expert) || expert < 0 || expert >= this.experts) throw new InvalidOptionError('prefetchLedger expert', `an integer in [0, ${this.experts})`, expert);
    return layer * this.experts + expert;
  }

  private at(atMs: number): void {
    if (!Number.isFinite(atMs) || atMs < this.lastMs) throw new InvalidOptionError('prefetchLedger atMs', `a finite time >= ${this.lastMs} ms (time never goes back)`, atMs);
    this.lastMs = atMs;
  }
}
