/**
 * The calibration actor: holds the timing estimates. The step pipeline (src/streams/
 * step-pipeline.ts) folds each batch's step timings through the calibration edge (`calibrate`,
 * src/streams/calibration.ts, continuing from these estimates) and hands every update to
 * `record`: the estimates move, the snapshot is published, and the update is traced
 * (moetier.calibration.update, a child of the request's span through the trace context the step
 * carries).
 *
 *   step pipeline ──calibrate (calibrationUpdates)──> record: snapshot ──> snapshots$ (latest replayed, then live)
 *                                                           └──> span per update
 *
 * It runs on the event loop, inside the step: a step's fold costs microseconds, less than one
 * crossing to a worker thread (~38 us). A throw while tracing an update is an error of the
 * step's pipeline, and so fails the request; the estimates have moved by then, and the next
 * request folds on from them.
 */
import { ReplaySubject, type Observable, type OperatorFunction } from 'rxjs';
import type { Tracer } from '@opentelemetry/api';
import { calibrationAttributes, recordTimedSpan, SpanNames } from '../../telemetry/index.js';
import { calibrationUpdates, type CalibrationUpdate } from '../../streams/calibration.js';
import { calibrated } from '../../streams/step-pipeline.js';
import { initialCalibration, type CalibrationConfig } from './logic.js';
import type { CalibrationSnapshot, StepTimings } from './messages.js';

export class CalibrationActor {
  private current: CalibrationSnapshot;
  private readonly published = new ReplaySubject<CalibrationSnapshot>(1);
  /** Updates recorded (one per step whose samples moved an estimate). */
  updates = 0;
  /** The calibration edge, continuing from this actor's estimates. */
  readonly calibrate: OperatorFunction<StepTimings, CalibrationUpdate>;

  constructor(
    config: CalibrationConfig,
    /** Looked up per update: the SDK may be registered after the engine opened. */
    private readonly tracer: () => Tracer,
  ) {
    this.current = initialCalibration(config);
    this.calibrate = calibrationUpdates(config, process.hrtime.bigint, () => this.current, (s) => (this.current = s));
  }

  /** The estimates now (the initial, empty snapshot before the first accepted sample). */
  get snapshot(): CalibrationSnapshot {
    return this.current;
  }

  /** Every new snapshot; a late subscriber first gets the latest one. Completes when the actor closes. */
  snapshots$(): Observable<CalibrationSnapshot> {
    return this.published.asObservable();
  }

  /** Folds timings now, outside a step pipeline (its updates recorded); a throw while tracing is thrown here. */
  fold(...timings: StepTimings[]): void {
    let failure: { error: unknown } | undefined;
    calibrated(timings, this).subscribe({ error: (error) => (failure = { error }) });
    if (failure) throw failure.error;
  }

  close(): void {
    this.published.complete();
  }

  /** One update of the calibration edge: the estimates move and are published, then traced (a throw fails the step). */
  readonly record = (u: CalibrationUpdate): void => {
    this.current = u.snapshot;
    this.updates++;
    this.published.next(u.snapshot);
    if (!u.step.traced) return;
    const c = u.snapshot;
    recordTimedSpan(this.tracer(), SpanNames.calibrationUpdate, u.startNs, u.endNs, calibrationAttributes({
      bandwidthBytesPerS: c.bandwidthBytesPerSEwma ?? 0,
      fixedCostMs: c.transferFixedMsEwma ?? 0,
      layerComputeMs: c.computeMsEwma.map((x) => x ?? 0),
      ...(c.deviceComputeMsEwma.some((x) => x !== undefined) ? { deviceComputeMs: c.deviceComputeMsEwma.map((x) => x ?? 0) } : {}),
      samples: u.accepted,
    }), u.step.traceContext);
  };
}
