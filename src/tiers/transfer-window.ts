/**
 * The transfer window (pure): how many speculative bytes may start moving while a layer computes,
 * from the calibration's estimates. The engine's placement and the prefetch replay both call it,
 * so the replay admits what the engine would.
 */
import { TIER_GATE_DEFAULTS } from '../native/constants.js';

/** The estimates the window reads (the calibration actor's snapshot has them: src/actors/calibration/messages.ts). */
export interface TransferEstimates {
  /** EWMA of each layer's compute time, ms (undefined: no sample yet). */
  readonly computeMsEwma: readonly (number | undefined)[];
  readonly bandwidthBytesPerSEwma?: number;
  readonly transferFixedMsEwma?: number;
}

export interface TransferWindowLimits {
  /** Fraction of the compute window trusted (public default 0.8). */
  safety: number;
  /** Cap on bytes admitted into one window (public default 256 MiB). */
  windowBytesMax: number;
  /** Cap on speculative bytes in flight at once, this window's included (public default 512 MiB). */
  inflightBytesMax?: number;
}

/** The in-flight default is the tier gate's (every upload into a slot shares it: mt_tier.h MT_TIER_GATE_BYTES_DEFAULT). */
export const TRANSFER_WINDOW_DEFAULTS: Required<TransferWindowLimits> = {
  safety: 0.8,
  windowBytesMax: 256 * 1024 * 1024,
  inflightBytesMax: TIER_GATE_DEFAULTS.inflightBytesMax,
};

/**
 * Bytes a speculative transfer may start while layer `layer` computes:
 *   T_window = max(0, safety * compute_ewma[l] - queue_wait - fixed cost)
 *   B_admit  = clamp(bandwidth * T_window - inflight, 0, min(windowBytesMax, inflightBytesMax - inflight))
 * undefined while a compute or a transfer sample is missing (cold start: the caller admits at most one expert).
 */
export function transferWindowBytes(
  state: TransferEstimates,
  layer: number,
  inflightBytes: number,
  queueWaitMs: number,
  limits: TransferWindowLimits = TRANSFER_WINDOW_DEFAULTS,
): number | undefined {
  const compute = state.computeMsEwma[layer];
  if (compute === undefined || state.bandwidthBytesPerSEwma === undefined || state.transferFixedMsEwma === undefined)
    return undefined;
  const windowMs = Math.max(0, limits.safety * compute - queueWaitMs - state.transferFixedMsEwma);
  const windowBytes = (state.bandwidthBytesPerSEwma * windowMs) / 1000;
  const inflightRoom = (limits.inflightBytesMax ?? TRANSFER_WINDOW_DEFAULTS.inflightBytesMax) - inflightBytes;
  return Math.max(0, Math.min(limits.windowBytesMax, inflightRoom, windowBytes - inflightBytes));
}
