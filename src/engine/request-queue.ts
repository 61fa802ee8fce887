/**
 * Requests on one engine run one at a time, in arrival order (one KV cache per engine).
 * The queue is bounded: `depthMax` requests may wait behind the running one; past that a new one
 * is refused, not buffered. (Counting the running request as waiting admitted one fewer in a burst.)
 */
import { LimitExceededError, RequestAbortedError } from '../core/errors.js';

export class RequestQueue {
  private tail: Promise<void> = Promise.resolve();
  /** Requests admitted and not yet released: the running one (if any) and those waiting. */
  private admitted = 0;

  constructor(private readonly depthMax: number) {}

  /** Requests waiting behind the running one. */
  get depth(): number {
    return Math.max(0, this.admitted - 1);
  }

  /** Resolves with a release function once every earlier request has released. */
  /** unbounded: admitted past the depth (the engine's close, which must never be refused). */
  async acquire(signal?: AbortSignal, options: { unbounded?: boolean } = {}): Promise<() => void> {
    if (!options.unbounded && this.admitted > this.depthMax)
      throw new LimitExceededError('requestQueueDepthMax', this.admitted, this.depthMax);
    this.admitted++;
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const previous = this.tail;
    this.tail = previous.then(() => mine);
    let released = false;
    const done = (): void => {
      if (released) return;
      released = true;
      this.admitted--;
      release();
    };
    await previous;
    if (signal?.aborted) {
      done();
      throw new RequestAbortedError();
    }
    return done;
  }
}
