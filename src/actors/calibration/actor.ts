/**
 * The calibration actor: fed by the step-report bus (one StepTimings per evaluation step), it
 * folds each step's samples through the calibrationUpdates edge (src/streams) and publishes
 * the snapshots; every update is traced (moetier.calibration.update, a child of the request's
 * span through the trace context the message carries).
 *
 *   step-report bus ──calibrationUpdates──> span per update ──> snapshots$ (latest replayed, then live)
 *
 * It runs on the event loop, where the reports are published: a step's fold costs microseconds,
 * less than one crossing to a worker thread (~38 us). A throw while tracing an update is kept
 * (takeFailure) and fails the request that published the step; the actor keeps folding.
 */
import { ReplaySubject, type Observable, type Subscription } from 'rxjs';
import type { Tracer } from '@opentelemetry/api';
import { calibrationAttributes, recordTimedSpan, SpanNames } from '../../telemetry/index.js';
import { calibrationUpdates, type CalibrationUpdate } from '../../streams/calibration.js';
import { initialCalibration, type CalibrationConfig } from './logic.js';
import type { CalibrationSnapshot, StepTimings } from './messages.js';

export class CalibrationActor {
  private current: CalibrationSnapshot;
  private readonly published = new ReplaySubject<CalibrationSnapshot>(1);
  private readonly subscription: Subscription;
  private failure: { error: unknown } | undefined;
  /** Updates published (one per step whose samples moved an estimate). */
  updates = 0;

  constructor(
    config: CalibrationConfig,
    steps$: Observable<StepTimings>,
    /** Looked up per update: the SDK may be registered after the engine opened. */
    private readonly tracer: () => Tracer,
  ) {
    this.current = initialCalibration(config);
    this.subscription = steps$.pipe(calibrationUpdates(config)).subscribe({
      next: (u) => this.update(u),
      error: (error) => this.published.error(error),
      complete: () => this.published.complete(),
    });
  }

  /** The estimates now (the initial, empty snapshot before the first accepted sample). */
  get snapshot(): CalibrationSnapshot {
    return this.current;
  }

  /** Every new snapshot; a late subscriber first gets the latest one. Completes when the actor closes. */
  snapshots$(): Observable<CalibrationSnapshot> {
    return this.published.asObservable();
  }

  /** The first failure since the last call (tracing an update threw). */
  takeFailure(): unknown {
    const f = this.failure;
    this.failure = undefined;
    return f?.error;
  }

  close(): void {
    this.subscription.unsubscribe();
    this.published.complete();
  }

  private update(u: CalibrationUpdate): void {
    this.current = u.snapshot;
    this.updates++;
    try {
      if (u.step.traced) {
        const c = u.snapshot;
        recordTimedSpan(this.tracer(), SpanNames.calibrationUpdate, u.startNs, u.endNs, calibrationAttributes({
          bandwidthBytesPerS: c.bandwidthBytesPerSEwma ?? 0,
          fixedCostMs: c.transferFixedMsEwma ?? 0,
          layerComputeMs: c.computeMsEwma.map((x) => x ?? 0),
          samples: u.accepted,
        }), u.step.traceContext);
      }
    } catch (error) {
      this.failure ??= { error };
    }
    this.published.next(u.snapshot);
  }
}
