/**
 * Messages of the calibration actor. Timestamps are CLOCK_MONOTONIC nanoseconds from the
 * backends' timing events (the clock of process.hrtime.bigint()), as plain numbers.
 */

/** A request (invocation) began; samples of older invocations are stale from now on. */
export interface InvocationStarted {
  kind: 'invocation';
  invocation: number;
}

/** One finished transfer: issued by the upload queue, started and ended on the backend. */
export interface TransferSample {
  kind: 'transfer';
  invocation: number;
  layer: number;
  bytes: number;
  issuedNs: number;
  startNs: number;
  endNs: number;
}

/** One layer's compute window in one step. */
export interface ComputeSample {
  kind: 'compute';
  invocation: number;
  layer: number;
  startNs: number;
  endNs: number;
}

/**
 * One layer's residents on a CUDA device in one step: the compute stream's events around them
 * (layerStats' device pair), on the same clock as the layer's window. A part of that window:
 * the misses run on the CPU meanwhile.
 */
export interface DeviceComputeSample {
  kind: 'device-compute';
  invocation: number;
  layer: number;
  startNs: number;
  endNs: number;
}

export type CalibrationMessage = InvocationStarted | TransferSample | ComputeSample | DeviceComputeSample;

/** What the actor publishes after every accepted sample. */
export interface CalibrationSnapshot {
  invocation: number;
  /** EWMA of bytes / (end - start) over transfers; undefined until the first sample. */
  bandwidthBytesPerSEwma: number | undefined;
  /** EWMA of start - issued: the fixed cost a transfer pays before its bytes move. */
  transferFixedMsEwma: number | undefined;
  /**
   * Per-layer EWMA of compute time: the layer's window on the wall clock, which is what an
   * upload overlaps (the copy engine runs beside the CPU's and the device's work alike).
   */
  computeMsEwma: Array<number | undefined>;
  /** Per-layer EWMA of the device's share (its residents' runs, from CUDA events); undefined on other backends. */
  deviceComputeMsEwma: Array<number | undefined>;
  samplesAccepted: number;
  /** Non-positive durations: rejected, counted. */
  samplesRejected: number;
  /** Samples of an older invocation, or of an unknown layer: counted, not used. */
  samplesStale: number;
}

/** Fields per layer of a step's timing: [startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs] (the eval's layerStats). */
export { LAYER_STAT_FIELDS as STEP_LAYER_FIELDS } from '../../native/constants.js';

/** One settled upload, as the tier reports it. */
export interface StepUpload {
  layer: number;
  bytes: number;
  ok: boolean;
  issuedNs: number;
  startNs: number;
  endNs: number;
}

/**
 * What the calibration actor folds (a tier request's batch of steps): one evaluation step's timing (or a request's
 * final poll, with no layer timing). The actor derives its samples from it (stepSamples).
 */
export interface StepTimings {
  kind: 'step';
  invocation: number;
  /** [nLayer][STEP_LAYER_FIELDS], a copy (the eval reuses its buffer); undefined: uploads only. */
  layerStats: Float64Array | undefined;
  uploads: readonly StepUpload[];
  /** Trace context of the request: the parent of the update's span. In-process, like the actor. */
  traceContext?: import('@opentelemetry/api').Context;
  /** The request span records: time the update and trace it (else skip the clock reads). */
  traced: boolean;
}
