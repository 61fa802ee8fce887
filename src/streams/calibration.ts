/**
 * Edges into the calibration actor's logic (src/actors/calibration).
 *
 * calibrationSnapshots: timing samples -> snapshots
 *   concurrency 1: samples fold in arrival order (scan), synchronously
 *   buffer 0:      a snapshot is emitted only when a sample was accepted (rejected / stale are counted in it)
 *   error / teardown: pass through; the fold has no resources of its own
 *
 * calibrationUpdates: step timings (the step pipeline's batch, step-pipeline.ts) -> one update per step that moved the EWMAs
 *   each step's samples fold at once (calibrateStep: the same result as folding stepSamples through
 *   calibrationSnapshots' logic in order, with one copy of the state); the
 *   update carries the step (its trace context) and, when the step is traced, the fold's window
 *   on the monotonic clock (the calibration span's start and end)
 *   the fold continues from start() (the calibration actor's estimates), read at each subscription,
 *   and tells keep() every fold's estimates
 *   concurrency 1, buffer 0, error / teardown: as above
 */
import { defer, filter, map, scan, type Observable, type OperatorFunction } from 'rxjs';
import { calibrate, calibrateStep, initialCalibration, type CalibrationConfig } from '../actors/calibration/logic.js';
import type { CalibrationMessage, CalibrationSnapshot, StepTimings } from '../actors/calibration/messages.js';

export function calibrationSnapshots(config: CalibrationConfig): OperatorFunction<CalibrationMessage, CalibrationSnapshot> {
  return (samples: Observable<CalibrationMessage>) =>
    samples.pipe(
      scan(
        (acc, m) => {
          const next = calibrate(acc.snapshot, m, config);
          return { snapshot: next, changed: next.samplesAccepted !== acc.snapshot.samplesAccepted };
        },
        { snapshot: initialCalibration(config), changed: false },
      ),
      filter((s) => s.changed),
      map((s) => s.snapshot),
    );
}

export interface CalibrationUpdate {
  snapshot: CalibrationSnapshot;
  /** Samples of this step that were accepted (> 0). */
  accepted: number;
  step: StepTimings;
  /** The fold's window, monotonic ns; 0n / 0n when the step is not traced. */
  startNs: bigint;
  endNs: bigint;
}

export function calibrationUpdates(
  config: CalibrationConfig,
  clockNs: () => bigint = process.hrtime.bigint,
  /** The estimates to continue from, read at each subscription (the calibration actor's). */
  start: () => CalibrationSnapshot = () => initialCalibration(config),
  /** Told every fold's estimates, accepted or not (stale and rejected counts move too). */
  keep: (snapshot: CalibrationSnapshot) => void = () => undefined,
): OperatorFunction<StepTimings, CalibrationUpdate> {
  return (steps: Observable<StepTimings>) =>
    defer(() => {
      const first: CalibrationUpdate = { snapshot: start(), accepted: 0, step: undefined as unknown as StepTimings, startNs: 0n, endNs: 0n };
      return steps.pipe(
        scan((acc, step) => {
          const startNs = step.traced ? clockNs() : 0n;
          const { snapshot, accepted } = calibrateStep(acc.snapshot, step, config);
          keep(snapshot);
          return { snapshot, accepted, step, startNs, endNs: step.traced ? clockNs() : 0n };
        }, first),
        filter((u) => u.accepted > 0),
      );
    });
}
