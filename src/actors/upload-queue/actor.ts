/**
 * The upload-queue actor: a handle over the pure logic (logic.ts). Placement sends it
 * enqueue / settled / cancel / tune messages; the effects it returns say which transfers start
 * now and which were dropped; every effect is also published on effects$ for observers.
 *
 *   placement ──send(message)──> stepUploadQueue ──effects──> placement (start: tierRequestSwap)
 *                                                        └──> effects$ (observers, tests)
 *
 * It runs on the event loop with its caller: a message costs a few microseconds, less than one
 * crossing to a worker thread (~38 us); the bytes themselves move on the backend's upload thread.
 */
import { Subject, type Observable } from 'rxjs';
import { initialUploadQueue, stepUploadQueue, type UploadQueueState } from './logic.js';
import type { UploadQueueEffect, UploadQueueLimits, UploadQueueMessage, UploadTask } from './messages.js';

export class UploadQueueActor {
  private state: UploadQueueState;
  private readonly effects = new Subject<UploadQueueEffect>();

  constructor(limits: Partial<UploadQueueLimits> = {}) {
    this.state = initialUploadQueue(limits);
  }

  /** Applies one message; returns its effects (a bad tune throws and changes nothing). */
  send(message: UploadQueueMessage): UploadQueueEffect[] {
    const { state, effects } = stepUploadQueue(this.state, message);
    this.state = state;
    for (const e of effects) this.effects.next(e);
    return effects;
  }

  get limits(): UploadQueueLimits {
    return this.state.limits;
  }
  get inflightBytes(): number {
    return this.state.inflightBytes;
  }
  get inflightTransfers(): number {
    return this.state.inflight.size;
  }
  get queuedTransfers(): number {
    return this.state.queued.length;
  }
  /** The tasks waiting to start, in order (decided, not yet the tier's). */
  get queuedTasks(): readonly UploadTask[] {
    return this.state.queued;
  }
  /** Whether the task started and has not settled yet (its upload is the gate's to retire). */
  isInflight(id: number): boolean {
    return this.state.inflight.has(id);
  }
  get counts(): UploadQueueState['counts'] {
    return this.state.counts;
  }

  /** Every effect, as it happens (no replay, no buffer: observers see what follows their subscribe). */
  effects$(): Observable<UploadQueueEffect> {
    return this.effects.asObservable();
  }

  close(): void {
    this.effects.complete();
  }
}
