/**
 * Edge: timing samples -> calibration snapshots (the calibration actor's logic, src/actors/calibration).
 *   concurrency 1: samples fold in arrival order (scan), synchronously
 *   buffer 0:      a snapshot is emitted only when a sample was accepted (rejected / stale are counted in it)
 *   error / teardown: pass through; the fold has no resources of its own
 */
import { filter, map, scan, type Observable, type OperatorFunction } from 'rxjs';
import { calibrate, initialCalibration, type CalibrationConfig } from '../actors/calibration/logic.js';
import type { CalibrationMessage, CalibrationSnapshot } from '../actors/calibration/messages.js';

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
