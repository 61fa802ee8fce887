/**
 * The prefetch replay's timing model: how long each layer computes, and how
 * long one expert's read takes on the single transfer lane:
 *
 *   readMs = transferFixedMs + bytes / bandwidthBytesPerS * 1000
 *
 * From the napkin cost model (cost.ts): a layer computes its topK resident calls (the MoE part
 * only: attention and the rest of the layer are not in that model), a read is one upload (the
 * h2d figures stand in for the disk's). Or from a calibration snapshot the engine measured
 * (CalibrationSnapshot, as JSON): its EWMA compute per layer, bandwidth and fixed cost.
 * Pure: the caller reads the file; this checks its parsed contents.
 */
import { FileFormatError } from '../core/errors.js';
import type { CalibrationSnapshot } from '../actors/calibration/messages.js';
import { unitCosts, type CostParams } from './cost.js';
import { prefetchCount } from './prefetch.js';
import type { ModelGeometry } from './geometry.js';
import { transferWindowBytes, type TransferWindowLimits } from './transfer-window.js';

export interface TimingModel {
  /** 'cost', or the calibration snapshot's file. */
  source: string;
  /** Per layer. */
  computeMs: readonly number[];
  bandwidthBytesPerS: number;
  transferFixedMs: number;
}

export function readMs(t: TimingModel, bytes: number): number {
  return t.transferFixedMs + (bytes / t.bandwidthBytesPerS) * 1000;
}

export function timingFromCost(g: ModelGeometry, p: CostParams): TimingModel {
  const u = unitCosts(g, p);
  return {
    source: 'cost',
    computeMs: new Array<number>(g.layers).fill((g.topK * u.deviceUs) / 1000),
    bandwidthBytesPerS: p.h2dGBps * 1e9,
    transferFixedMs: p.transferFixedUs / 1000,
  };
}

/**
 * Experts each layer's window admits once calibrated, with nothing in flight: what the replay's
 * snapshot converges to (the window of layer l serves layer l + 1's prediction). 0 where
 * safety x compute does not exceed the fixed cost plus one read.
 */
export function steadyWindowExperts(t: TimingModel, bytes: number, limits: TransferWindowLimits): number[] {
  const snapshot: CalibrationSnapshot = {
    invocation: 0,
    bandwidthBytesPerSEwma: t.bandwidthBytesPerS,
    transferFixedMsEwma: t.transferFixedMs,
    computeMsEwma: [...t.computeMs],
    deviceComputeMsEwma: t.computeMs.map(() => undefined),
    samplesAccepted: 0,
    samplesRejected: 0,
    samplesStale: 0,
  };
  return t.computeMs.map((_, l) => prefetchCount(transferWindowBytes(snapshot, l, 0, 0, limits), bytes));
}

const positive = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x) && x > 0;

/** A snapshot's figures as a timing model for a trace of `layers` layers; every figure must be measured. */
export function timingFromSnapshot(file: string, json: unknown, layers: number): TimingModel {
  const s = json as Partial<CalibrationSnapshot> | null;
  if (s === null || typeof s !== 'object' || Array.isArray(s))
    throw new FileFormatError(file, 'the top level', 'a calibration snapshot object (engine.calibration$())');
  const compute = s.computeMsEwma;
  if (!Array.isArray(compute) || compute.length !== layers) {
    throw new FileFormatError(
      file,
      'computeMsEwma',
      `an array of ${layers} numbers (one per layer of the trace), got ${Array.isArray(compute) ? compute.length : typeof compute}`,
    );
  }
  const unmeasured = compute.findIndex((x) => !positive(x));
  if (unmeasured >= 0)
    throw new FileFormatError(file, `computeMsEwma[${unmeasured}]`, 'a measured compute time in ms > 0');
  if (!positive(s.bandwidthBytesPerSEwma))
    throw new FileFormatError(file, 'bandwidthBytesPerSEwma', 'a measured bandwidth in bytes/s > 0');
  const fixed = s.transferFixedMsEwma;
  if (typeof fixed !== 'number' || !Number.isFinite(fixed) || fixed < 0)
    throw new FileFormatError(file, 'transferFixedMsEwma', 'a measured fixed cost in ms >= 0');
  return {
    source: file,
    computeMs: compute as number[],
    bandwidthBytesPerS: s.bandwidthBytesPerSEwma,
    transferFixedMs: fixed,
  };
}
