/**
 * Requests on one engine run `capacity` at a time (one per KV-cache sequence: openEngine
 * `parallel`, 1 by default), the rest wait in arrival order. The queue is bounded: `depthMax`
 * requests may wait behind the running ones; past that a new one is refused, not buffered. A waiter
 * whose signal aborts leaves the queue at once: its acquire rejects with RequestAbortedError then,
 * not when its turn would have come, and its place is free. An exclusive acquire (the engine's
 * close) takes every place: it waits for the running requests to end, and those behind it wait for it.
 */
import { LimitExceededError, RequestAbortedError } from '../core/errors.js';

interface Waiter {
  /** Places it takes: 1, or every place (exclusive). */
  places: number;
  exclusive: boolean;
  resolve: (release: () => void) => void;
  reject: (error: Error) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class RequestQueue {
  /** Places taken by the running requests (and an exclusive holder's, all of them). */
  private taken = 0;
  /** Holders of one place: the requests running now. */
  private requests = 0;
  private readonly waiting: Waiter[] = [];

  constructor(
    private readonly depthMax: number,
    private readonly capacity = 1,
  ) {}

  /** Requests waiting behind the running ones. */
  get depth(): number {
    return this.waiting.length;
  }

  /** Requests running now (an exclusive holder, the engine's close, is none). */
  get running(): number {
    return this.requests;
  }

  /**
   * Resolves with a release function once a place is free and every earlier waiter has one (at once
   * when a place is free and nobody waits). unbounded: admitted past the depth (the engine's close,
   * which must never be refused); exclusive: takes every place.
   */
  acquire(signal?: AbortSignal, options: { unbounded?: boolean; exclusive?: boolean } = {}): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(new RequestAbortedError());
    const exclusive = options.exclusive === true;
    const places = exclusive ? this.capacity : 1;
    if (this.waiting.length === 0 && this.taken + places <= this.capacity)
      return Promise.resolve(this.take(places, exclusive));
    if (!options.unbounded && this.waiting.length >= this.depthMax) {
      // The running requests and those waiting: what was admitted.
      return Promise.reject(
        new LimitExceededError('requestQueueDepthMax', this.waiting.length + this.taken, this.depthMax),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { places, exclusive, resolve, reject, signal, onAbort: () => this.leave(waiter) };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** Takes `places`; returns their release: they go to the waiters in order (a second call changes nothing). */
  private take(places: number, exclusive: boolean): () => void {
    const request = exclusive ? 0 : 1;
    this.taken += places;
    this.requests += request;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.taken -= places;
      this.requests -= request;
      this.admit();
    };
  }

  /** The waiters at the head whose places are free now, in order. */
  private admit(): void {
    while (this.waiting.length > 0 && this.taken + this.waiting[0].places <= this.capacity) {
      const next = this.waiting.shift()!;
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(this.take(next.places, next.exclusive));
    }
  }

  /** An aborted waiter leaves its place at once (an exclusive one may have held others back). */
  private leave(waiter: Waiter): void {
    const i = this.waiting.indexOf(waiter);
    if (i < 0) return;
    this.waiting.splice(i, 1);
    waiter.reject(new RequestAbortedError());
    this.admit();
  }
}
