/**
 * Upload-queue logic (pure): the gate's limits and what a tier's answer to a swap means. The queue
 * itself, its in-flight budget and its ledger are the native tier's (tier_gate.cc): nothing here
 * keeps a copy.
 */
import { InvalidOptionError } from '../../core/errors.js';
import { TIER_GATE_DEFAULTS } from '../../native/constants.js';
import type { UploadQueueEffect, UploadQueueLimits, UploadTask } from './messages.js';

/** docs/SPEC.md section 4's max_inflight_bytes and the gate's other defaults (mt_tier.h MT_TIER_GATE_*). */
export const UPLOAD_QUEUE_DEFAULTS: UploadQueueLimits = TIER_GATE_DEFAULTS;

/** mt_tier.h mt_tier_request_swap's answers. */
export const SWAP_STARTED = 1;
export const SWAP_QUEUE_FULL = -4;

export function validateUploadLimits(limits: UploadQueueLimits): UploadQueueLimits {
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1)
      throw new InvalidOptionError(`upload.${name}`, 'an integer >= 1', value);
  }
  if (limits.inflightTransfersMax > 2 ** 31 - 1 || limits.queueDepthMax > 2 ** 31 - 1) {
    throw new InvalidOptionError('upload', 'inflightTransfersMax and queueDepthMax below 2^31', limits);
  }
  return limits;
}

/** The effect of the tier's answer `code` to a swap request. */
export function swapEffect(task: UploadTask, code: number): UploadQueueEffect {
  if (code >= 0) return { kind: code === SWAP_STARTED ? 'started' : 'queued', task };
  return { kind: 'dropped', task, reason: code === SWAP_QUEUE_FULL ? 'queue-full' : 'refused', code };
}
