/**
 * Upload-queue logic (pure): which queued transfers start now, under the in-flight limits.
 * FIFO; a task too big for the remaining byte budget waits (head-of-line) unless nothing is in
 * flight, so one oversized expert can never deadlock the queue. Every task leaves exactly once:
 * settled (ok or failed), dropped (queue full) or cancelled.
 */
import { InvalidOptionError } from '../../core/errors.js';
import type { UploadQueueEffect, UploadQueueLimits, UploadQueueMessage, UploadTask } from './messages.js';

export const UPLOAD_QUEUE_DEFAULTS: UploadQueueLimits = {
  inflightBytesMax: 512 * 1024 * 1024, // SPEC.md section 4: max_inflight_bytes
  inflightTransfersMax: 8,
  queueDepthMax: 4096,
};

export interface UploadQueueState {
  limits: UploadQueueLimits;
  queued: UploadTask[];
  inflight: Map<number, UploadTask>;
  inflightBytes: number;
  counts: { started: number; succeeded: number; failed: number; dropped: number; cancelled: number };
}

export function validateUploadLimits(limits: UploadQueueLimits): UploadQueueLimits {
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value < 1) throw new InvalidOptionError(`uploadQueue.${name}`, 'an integer >= 1', value);
  }
  return limits;
}

export function initialUploadQueue(limits: Partial<UploadQueueLimits> = {}): UploadQueueState {
  return {
    limits: validateUploadLimits({ ...UPLOAD_QUEUE_DEFAULTS, ...limits }),
    queued: [],
    inflight: new Map(),
    inflightBytes: 0,
    counts: { started: 0, succeeded: 0, failed: 0, dropped: 0, cancelled: 0 },
  };
}

export function stepUploadQueue(state: UploadQueueState, message: UploadQueueMessage): { state: UploadQueueState; effects: UploadQueueEffect[] } {
  const next: UploadQueueState = { ...state, queued: state.queued.slice(), inflight: new Map(state.inflight), counts: { ...state.counts } };
  const effects: UploadQueueEffect[] = [];
  switch (message.kind) {
    case 'enqueue':
      if (next.queued.length >= next.limits.queueDepthMax) {
        next.counts.dropped++;
        effects.push({ kind: 'dropped', task: message.task, reason: 'queue-full' });
      } else {
        next.queued.push(message.task);
      }
      break;
    case 'settled': {
      const task = next.inflight.get(message.id);
      if (!task) break; // already retired: settling twice must not free bytes twice
      next.inflight.delete(message.id);
      next.inflightBytes -= task.bytes;
      if (message.ok) next.counts.succeeded++;
      else next.counts.failed++;
      break;
    }
    case 'cancelGeneration':
      next.queued = next.queued.filter((task) => {
        if (task.generation >= message.generationBelow) return true;
        next.counts.cancelled++;
        effects.push({ kind: 'dropped', task, reason: 'cancelled' });
        return false;
      });
      break;
    case 'tune':
      next.limits = validateUploadLimits({ ...next.limits, ...message.limits });
      break;
  }
  startWhatFits(next, effects);
  return { state: next, effects };
}

function startWhatFits(state: UploadQueueState, effects: UploadQueueEffect[]): void {
  while (state.queued.length > 0 && state.inflight.size < state.limits.inflightTransfersMax) {
    const head = state.queued[0];
    const fits = state.inflightBytes + head.bytes <= state.limits.inflightBytesMax;
    if (!fits && state.inflight.size > 0) break;
    state.queued.shift();
    state.inflight.set(head.id, head);
    state.inflightBytes += head.bytes;
    state.counts.started++;
    effects.push({ kind: 'start', task: head });
  }
}
