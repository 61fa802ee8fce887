/**
 * Messages of the upload-queue actor, the TypeScript face of the tier's one gate (mt_tier.h,
 * native/tier/tier_gate.cc). A task moves one expert's bytes into a device slot over a victim's
 * (a swap the placement decided); the gate queues it, and issues it at its layer's boundary while
 * its one in-flight budget has room.
 */

export interface UploadTask {
  id: number;
  layer: number;
  expert: number;
  bytes: number;
  /** The expert whose slot is reused. */
  victimExpert: number;
  /** A replan swap: its layer's queue is issued at once when the layer is not computing (tierRequestSwap issueNow). */
  issueNow?: boolean;
}

export type UploadQueueMessage =
  | { kind: 'enqueue'; task: UploadTask }
  /** A request ended: the swaps still queued at the gate are dropped (issued ones finish). */
  | { kind: 'cancelQueued' }
  | { kind: 'tune'; limits: Partial<UploadQueueLimits> };

/** The one gate's budget (engine option `upload`, engine.tune's uploadInflight*): every upload into a slot counts. */
export interface UploadQueueLimits {
  /** Bytes in flight at once, every class (misses, prefetches, swaps, warm starts). */
  inflightBytesMax: number;
  /** Transfers in flight at once. */
  inflightTransfersMax: number;
  /** Swaps the gate holds queued at once; past it a swap is refused and counted. */
  queueDepthMax: number;
}

/** What became of a message: a swap queued (or started at once), refused by the tier, or swaps cancelled. */
export type UploadQueueEffect =
  | { kind: 'queued' | 'started'; task: UploadTask }
  | { kind: 'dropped'; task: UploadTask; reason: 'queue-full' | 'refused'; code: number }
  | { kind: 'cancelled'; count: number };
