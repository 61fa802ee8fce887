/**
 * Messages of the upload-queue actor. A task moves one expert's bytes into a device slot
 * (in place over a victim when the backend allows it). Queue and in-flight are bounded.
 */

export interface UploadTask {
  id: number;
  layer: number;
  expert: number;
  bytes: number;
  /** The expert whose slot is reused (a swap); undefined for a fill into a free slot. */
  victimExpert?: number;
  /** Tasks of an older generation are dropped when cancelled (a new request, a replan). */
  generation: number;
  /** A replan swap: started at once by the tier when its layer is not computing (tierRequestSwap issueNow). */
  issueNow?: boolean;
  /** Trace context of the decision that asked for it (see src/telemetry). */
  traceCarrier?: Record<string, string>;
}

export type UploadQueueMessage =
  | { kind: 'enqueue'; task: UploadTask }
  | { kind: 'settled'; id: number; ok: boolean }
  | { kind: 'cancelGeneration'; generationBelow: number }
  | { kind: 'tune'; limits: Partial<UploadQueueLimits> };

export interface UploadQueueLimits {
  /** Bytes in flight at once. */
  inflightBytesMax: number;
  /** Transfers in flight at once. */
  inflightTransfersMax: number;
  /** Tasks waiting to start; past it a task is dropped and counted. */
  queueDepthMax: number;
}

/** Effects the actor performs for the logic. */
export type UploadQueueEffect = { kind: 'start'; task: UploadTask } | { kind: 'dropped'; task: UploadTask; reason: 'queue-full' | 'cancelled' };
