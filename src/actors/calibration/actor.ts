/**
 * The calibration actor: holds the timing estimates. After each batch of steps, the tier request
 * hands their timings to `fold` (src/engine/tier/request.ts, its calibrate stage): each step's
 * samples fold into the EWMAs (logic.ts calibrateStep), and a step that moved them is an update:
 * the snapshot is published on snapshots$ (engine.calibration$(): a stream, the real shape of
 * estimates that move while requests run) and traced (moetier.calibration.update, a child of the
 * request's span through the trace context the step carries).
 *
 *   fold(timings) ──calibrateStep──> record: snapshot ──> snapshots$ (latest replayed, then live)
 *                                          └──> span per update
 *
 * It runs on the event loop, inside the step: a step's fold costs microseconds, less than one
 * crossing to a worker thread (~38 us). A throw while tracing an update is thrown to the step
 * that folded it, and so fails the request; the estimates have moved by then, and the next
 * request folds on from them.
 */
import { ReplaySubject, type Observable } from 'rxjs';
import type { Tracer } from '@opentelemetry/api';
import { calibrationAttributes, recordTimedSpan, SpanNames } from '../../telemetry/index.js';
import { calibrateStep, initialCalibration, type CalibrationConfig } from './logic.js';
import type { CalibrationSnapshot, StepTimings } from './messages.js';

export class CalibrationActor {
  private current: CalibrationSnapshot;
  private readonly published = new ReplaySubject<CalibrationSnapshot>(1);
  /** Updates recorded (one per step whose samples moved an estimate). */
  updates = 0;
  constructor(
    private readonly config: CalibrationConfig,
    /** Looked up per update: the SDK may be registered after the engine opened. */
    private readonly tracer: () => Tracer,
  ) {
    this.current = initialCalibration(config);
  }

  /** The estimates now (the initial, empty snapshot before the first accepted sample). */
  get snapshot(): CalibrationSnapshot {
    return this.current;
  }

  /** Every new snapshot; a late subscriber first gets the latest one. Completes when the actor closes. */
  snapshots$(): Observable<CalibrationSnapshot> {
    return this.published.asObservable();
  }

  /**
   * Folds steps' timings in order; each step that moved an estimate is recorded (published, and
   * traced with the fold's window on the monotonic clock when the step is). A throw while tracing
   * is thrown here, after that step's estimates moved; the steps after it are not folded.
   */
  fold(...timings: StepTimings[]): void {
    for (const step of timings) {
      const startNs = step.traced ? process.hrtime.bigint() : 0n;
      const { snapshot, accepted } = calibrateStep(this.current, step, this.config);
      this.current = snapshot; // stale and rejected counts move even when nothing was accepted
      if (accepted > 0)
        this.record({ snapshot, accepted, step, startNs, endNs: step.traced ? process.hrtime.bigint() : 0n });
    }
  }

  close(): void {
    this.published.complete();
  }

  /** One update: the estimates are published, then traced (a throw fails the step). */
  private record(u: CalibrationUpdate): void {
    this.updates++;
    this.published.next(u.snapshot);
    if (!u.step.traced) return;
    const c = u.snapshot;
    recordTimedSpan(
      this.tracer(),
      SpanNames.calibrationUpdate,
      u.startNs,
      u.endNs,
      calibrationAttributes({
        bandwidthBytesPerS: c.bandwidthBytesPerSEwma ?? 0,
        fixedCostMs: c.transferFixedMsEwma ?? 0,
        layerComputeMs: c.computeMsEwma.map((x) => x ?? 0),
        ...(c.deviceComputeMsEwma.some((x) => x !== undefined)
          ? { deviceComputeMs: c.deviceComputeMsEwma.map((x) => x ?? 0) }
          : {}),
        samples: u.accepted,
      }),
      u.step.traceContext,
    );
  }
}

/** A step whose samples moved the estimates (accepted > 0); the fold's window, monotonic ns (0n / 0n when the step is not traced). */
interface CalibrationUpdate {
  snapshot: CalibrationSnapshot;
  accepted: number;
  step: StepTimings;
  startNs: bigint;
  endNs: bigint;
}
