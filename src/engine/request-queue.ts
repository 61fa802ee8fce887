/**
 * Requests on one engine run one at a time, in arrival order (one KV cache per engine).
 * The queue is bounded: past `depthMax` waiting requests a new one is refused, not buffered.
 */
import { LimitExceededError, RequestAbortedError } from '../core/errors.js';

export class RequestQueue {
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;

  constructor(private readonly depthMax: number) {}

  get depth(): number {
    return this.waiting;
  }

  /** Resolves with a release function once every earlier request has released. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.waiting >= this.depthMax) throw new LimitExceededError('requestQueueDepthMax', this.waiting + 1, this.depthMax);
    this.waiting++;
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const previous = this.tail;
    this.tail = previous.then(() => mine);
    try {
      await previous;
    } finally {
      this.waiting--;
    }
    if (signal?.aborted) {
      release();
      throw new RequestAbortedError();
    }
    let released = false;
    return () => {
      if (!released) {
        released = true;
        release();
      }
    };
  }
}
