/**
 * Requests on one engine run one at a time, in arrival order (one KV cache per engine).
 * The queue is bounded: `depthMax` requests may wait behind the running one; past that a new one
 * is refused, not buffered. A waiter whose signal aborts leaves the queue at once: its acquire
 * rejects with RequestAbortedError then, not when its turn would have come, and its place is free.
 */
import { LimitExceededError, RequestAbortedError } from '../core/errors.js';

interface Waiter {
  resolve: (release: () => void) => void;
  reject: (error: Error) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class RequestQueue {
  private running = false;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly depthMax: number) {}

  /** Requests waiting behind the running one. */
  get depth(): number {
    return this.waiting.length;
  }

  /**
   * Resolves with a release function once every earlier request has released (at once when the
   * engine is idle). unbounded: admitted past the depth (the engine's close, which must never be refused).
   */
  acquire(signal?: AbortSignal, options: { unbounded?: boolean } = {}): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(new RequestAbortedError());
    if (!this.running) {
      this.running = true;
      return Promise.resolve(this.releaser());
    }
    if (!options.unbounded && this.waiting.length >= this.depthMax) {
      // The running request and those waiting: what was admitted.
      return Promise.reject(new LimitExceededError('requestQueueDepthMax', this.waiting.length + 1, this.depthMax));
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, signal, onAbort: () => this.leave(waiter) };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** The release of one turn: the next waiter runs (a second call changes nothing). */
  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next === undefined) {
        this.running = false;
        return;
      }
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(this.releaser());
    };
  }

  /** An aborted waiter leaves its place at once. */
  private leave(waiter: Waiter): void {
    const i = this.waiting.indexOf(waiter);
    if (i < 0) return;
    this.waiting.splice(i, 1);
    waiter.reject(new RequestAbortedError());
  }
}
