/**
 * Calibration logic (pure): timing events in, EWMA estimates out (docs/SPEC.md section 4).
 *   ewma' = a * sample + (1 - a) * ewma   (the first sample seeds it)
 * Non-positive samples are rejected; samples of an older invocation are stale. Both are counted.
 * The transfer window an overlap-aware prefetch may fill from these estimates: src/tiers/transfer-window.ts.
 */
import { InvalidOptionError } from '../../core/errors.js';
import {
  STEP_LAYER_FIELDS,
  type CalibrationMessage,
  type CalibrationSnapshot,
  type StepTimings,
  type TransferSample,
} from './messages.js';

export interface CalibrationConfig {
  /** EWMA weight of a new sample (public default 0.2). */
  alpha: number;
  nLayer: number;
}

export const CALIBRATION_DEFAULTS = { alpha: 0.2 } as const;

export function initialCalibration(config: CalibrationConfig): CalibrationSnapshot {
  if (!(config.alpha > 0 && config.alpha <= 1))
    throw new InvalidOptionError('calibration.alpha', 'a number in (0, 1]', config.alpha);
  if (!Number.isInteger(config.nLayer) || config.nLayer < 1)
    throw new InvalidOptionError('calibration.nLayer', 'an integer >= 1', config.nLayer);
  return {
    invocation: 0,
    bandwidthBytesPerSEwma: undefined,
    transferFixedMsEwma: undefined,
    computeMsEwma: new Array<number | undefined>(config.nLayer).fill(undefined),
    deviceComputeMsEwma: new Array<number | undefined>(config.nLayer).fill(undefined),
    samplesAccepted: 0,
    samplesRejected: 0,
    samplesStale: 0,
  };
}

export function ewma(old: number | undefined, sample: number, alpha: number): number {
  return old === undefined ? sample : alpha * sample + (1 - alpha) * old;
}

/** Returns the next snapshot; never mutates `state`. */
export function calibrate(
  state: CalibrationSnapshot,
  message: CalibrationMessage,
  config: CalibrationConfig,
): CalibrationSnapshot {
  if (message.kind === 'invocation') {
    return message.invocation > state.invocation ? { ...state, invocation: message.invocation } : state;
  }
  const fold = startFold(state, state.invocation);
  const current = message.invocation === state.invocation;
  if (message.kind === 'compute') foldCompute(fold, current, message.layer, message.startNs, message.endNs, config);
  else if (message.kind === 'device-compute')
    foldCompute(fold, current, message.layer, message.startNs, message.endNs, config, 'device');
  else foldTransfer(fold, current, message, config);
  return fold.next;
}

/**
 * A snapshot being folded: a copy of the state whose per-layer array is copied on its first
 * write. Both folds (one sample: calibrate; one step: calibrateStep) go through these helpers,
 * so they share every rule: stale, rejected, the EWMA.
 */
interface Fold {
  readonly state: CalibrationSnapshot;
  readonly next: CalibrationSnapshot;
  computeCopied: boolean;
  deviceCopied: boolean;
}

function startFold(state: CalibrationSnapshot, invocation: number): Fold {
  return { state, next: { ...state, invocation }, computeCopied: false, deviceCopied: false };
}

/** A layer's window ('layer', into computeMsEwma) or its device share ('device', into deviceComputeMsEwma). */
function foldCompute(
  f: Fold,
  current: boolean,
  layer: number,
  startNs: number,
  endNs: number,
  config: CalibrationConfig,
  where: 'layer' | 'device' = 'layer',
): void {
  if (!current || layer < 0 || layer >= config.nLayer) {
    f.next.samplesStale++;
    return;
  }
  const ms = (endNs - startNs) / 1e6;
  if (!(ms > 0)) {
    f.next.samplesRejected++;
    return;
  }
  if (where === 'device') {
    if (!f.deviceCopied) {
      f.next.deviceComputeMsEwma = f.state.deviceComputeMsEwma.slice();
      f.deviceCopied = true;
    }
    f.next.deviceComputeMsEwma[layer] = ewma(f.next.deviceComputeMsEwma[layer], ms, config.alpha);
  } else {
    if (!f.computeCopied) {
      f.next.computeMsEwma = f.state.computeMsEwma.slice();
      f.computeCopied = true;
    }
    f.next.computeMsEwma[layer] = ewma(f.next.computeMsEwma[layer], ms, config.alpha);
  }
  f.next.samplesAccepted++;
}

function foldTransfer(
  f: Fold,
  current: boolean,
  t: Omit<TransferSample, 'kind' | 'invocation'>,
  config: CalibrationConfig,
): void {
  if (!current || t.layer < 0 || t.layer >= config.nLayer) {
    f.next.samplesStale++;
    return;
  }
  const moveS = (t.endNs - t.startNs) / 1e9;
  const fixedMs = (t.startNs - t.issuedNs) / 1e6;
  if (!(moveS > 0) || !(t.bytes > 0) || fixedMs < 0) {
    f.next.samplesRejected++;
    return;
  }
  f.next.bandwidthBytesPerSEwma = ewma(f.next.bandwidthBytesPerSEwma, t.bytes / moveS, config.alpha);
  // A transfer that started at once has a fixed cost of 0: a valid sample.
  f.next.transferFixedMsEwma = ewma(f.next.transferFixedMsEwma, fixedMs, config.alpha);
  f.next.samplesAccepted++;
}

/**
 * One step's samples folded at once: the same snapshot as folding stepSamples(step) through
 * calibrate one by one (tested), with one copy of the state instead of one per sample. It runs
 * on the event loop after decode steps, between two evaluations, where a token waits for it.
 * Returns the next snapshot (never mutates `state`) and how many samples were accepted.
 */
export function calibrateStep(
  state: CalibrationSnapshot,
  step: StepTimings,
  config: CalibrationConfig,
): { snapshot: CalibrationSnapshot; accepted: number } {
  const invocation = Math.max(state.invocation, step.invocation);
  const fold = startFold(state, invocation);
  const current = step.invocation === invocation;
  const ls = step.layerStats;
  for (let l = 0, at = 0; ls && at < ls.length; l++, at += STEP_LAYER_FIELDS) {
    const startNs = Math.round(ls[at]);
    const endNs = Math.round(ls[at + 1]);
    // A layer the step did not time (0 stamps, or an end before its start) gives no sample.
    if (endNs >= startNs && startNs > 0) foldCompute(fold, current, l, startNs, endNs, config);
    const device = deviceSpan(ls, at);
    if (device) foldCompute(fold, current, l, device.startNs, device.endNs, config, 'device');
  }
  for (const u of step.uploads) if (u.ok) foldTransfer(fold, current, u, config);
  return { snapshot: fold.next, accepted: fold.next.samplesAccepted - state.samplesAccepted };
}

/**
 * A step's samples, in the order the fold takes them: the invocation first (a new request makes
 * older samples stale; an equal one is a no-op), then each timed layer, then each finished upload.
 */
export function stepSamples(step: StepTimings): CalibrationMessage[] {
  const out: CalibrationMessage[] = [{ kind: 'invocation', invocation: step.invocation }];
  const ls = step.layerStats;
  if (ls) {
    for (let l = 0, at = 0; at < ls.length; l++, at += STEP_LAYER_FIELDS) {
      const startNs = Math.round(ls[at]);
      const endNs = Math.round(ls[at + 1]);
      // A layer the step did not time (0 stamps, or an end before its start) gives no sample.
      if (endNs >= startNs && startNs > 0)
        out.push({ kind: 'compute', invocation: step.invocation, layer: l, startNs, endNs });
      const device = deviceSpan(ls, at);
      if (device) out.push({ kind: 'device-compute', invocation: step.invocation, layer: l, ...device });
    }
  }
  for (const u of step.uploads) {
    if (u.ok)
      out.push({
        kind: 'transfer',
        invocation: step.invocation,
        layer: u.layer,
        bytes: u.bytes,
        issuedNs: u.issuedNs,
        startNs: u.startNs,
        endNs: u.endNs,
      });
  }
  return out;
}

/** A layer's device pair (layerStats [6], [7]), when its residents ran on a device. */
function deviceSpan(ls: Float64Array, at: number): { startNs: number; endNs: number } | undefined {
  const startNs = Math.round(ls[at + 6]);
  const endNs = Math.round(ls[at + 7]);
  return endNs > startNs && startNs > 0 ? { startNs, endNs } : undefined;
}
