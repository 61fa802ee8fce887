/**
 * The per-step pipeline of a tier request, top to bottom: one evaluation step goes in, its
 * settled report comes out. src/engine/tier/request.ts supplies the stages; each edge below is
 * an operator of its own (tests/streams/step-pipeline.test.ts: an error and a teardown each).
 *
 *   EvaluateStep
 *     │ evaluate    layer-compute actor: the native eval of every layer; swaps queued for a
 *     │             layer are issued right after it computes (native tier, its issuer thread)
 *     ▼               concurrency 1 (concatMap: the next step waits for this one), buffer 0
 *   LayerStepReport (routes, per-layer timing: views into the actor's ring)
 *     │ settle      the tier's poll: settled uploads retire in the upload queue; evictions
 *     │ rebuild     int8-rebuild actor: a newcomer's host copy freed, a victim's built (its workers)
 *     │ observe     the step's routes into the policy (prefill: its counts per layer)
 *     │ decide      the policy's tick: swaps (prefill: none here; replan decided during the eval)
 *     │ issue       the swaps through the upload queue (the one gate) to tierRequestSwap
 *     │ batch       every observerBatchSteps decode steps (and the prefill at once): MoE time,
 *     │             route log, layer and upload spans; out come the steps' timings
 *     │ calibrate   the calibration edge (calibration.ts calibrationUpdates): EWMA fold, a span
 *     ▼             and a snapshot per update (the calibration actor records them)
 *   SettledStep
 *
 * Every stage after evaluate runs synchronously on the event loop, between two evaluations
 * (buffer 0: nothing is queued between stages). Errors: a throw in any stage, or a failed
 * eval, is the stream's error, and so the rejection of the request's step: nothing is parked
 * to be picked up later. Teardown: unsubscribing stops at the stage it reached; a running eval
 * finishes (native work cannot be interrupted) and its report is dropped.
 */
import { concatMap, endWith, from, ignoreElements, map, Subject, tap, type Observable, type ObservableInput, type OperatorFunction, type Subscription } from 'rxjs';
import type { EvaluateStep, LayerStepReport } from '../actors/layer-compute/messages.js';
import type { StepTimings } from '../actors/calibration/messages.js';
import type { Decision } from '../tiers/types.js';
import type { CalibrationUpdate } from './calibration.js';

/** What a stage sees of the tier's poll (src/engine/tier/port.ts TierPoll). */
export interface SettledUploads {
  uploads: readonly unknown[];
  evicted: readonly unknown[];
}

export interface SettledStep<P extends SettledUploads = SettledUploads> {
  report: LayerStepReport;
  poll: P;
  decisions: readonly Decision[];
}

export interface StepStages<P extends SettledUploads = SettledUploads> {
  /** The eval (a promise in the engine; any observable input, e.g. in marble tests). */
  evaluate(step: EvaluateStep): ObservableInput<LayerStepReport>;
  settle(report: LayerStepReport): P;
  rebuild(poll: P): void;
  observe(report: LayerStepReport): void;
  decide(report: LayerStepReport): readonly Decision[];
  issue(decisions: readonly Decision[]): void;
  /** The step joins its batch; returns the timings of the steps the batch handled now (often none). */
  batch(step: SettledStep<P>): readonly StepTimings[];
  /** The calibration edge, continuing from the calibration actor's estimates. */
  calibrate: OperatorFunction<StepTimings, CalibrationUpdate>;
  record(update: CalibrationUpdate): void;
}

/** evaluate: one step at a time, in order. */
export function evaluateEdge(evaluate: StepStages['evaluate']): OperatorFunction<EvaluateStep, LayerStepReport> {
  return concatMap((step) => from(evaluate(step)));
}

/** settle -> rebuild: the step's poll, handed to the host-copy rebuild. */
export function settleEdge<P extends SettledUploads>(settle: (r: LayerStepReport) => P, rebuild: (poll: P) => void): OperatorFunction<LayerStepReport, SettledStep<P>> {
  return map((report) => {
    const poll = settle(report);
    rebuild(poll);
    return { report, poll, decisions: [] };
  });
}

/** observe -> decide -> issue: the placement's part of the step. */
export function placementEdge<P extends SettledUploads>(s: Pick<StepStages<P>, 'observe' | 'decide' | 'issue'>): OperatorFunction<SettledStep<P>, SettledStep<P>> {
  return map((step) => {
    s.observe(step.report);
    const decisions = s.decide(step.report);
    s.issue(decisions);
    return { ...step, decisions };
  });
}

/** batch -> calibrate: the observers' batch, its timings folded by the calibration edge; the step passes on. */
export function batchEdge<P extends SettledUploads>(s: Pick<StepStages<P>, 'batch' | 'calibrate' | 'record'>): OperatorFunction<SettledStep<P>, SettledStep<P>> {
  return concatMap((step) => {
    const timings = s.batch(step);
    // Most steps hand over no timings (seven of eight decode steps): no calibration chain for them.
    return timings.length === 0 ? [step] : calibrated(timings, s).pipe(endWith(step));
  });
}

/** Timings through the calibration edge, each update recorded; completes empty. */
export function calibrated(timings: readonly StepTimings[], s: Pick<StepStages, 'calibrate' | 'record'>): Observable<never> {
  return from(timings).pipe(s.calibrate, tap((u) => s.record(u)), ignoreElements());
}

/** The whole pipeline, in the order of the diagram above. */
export function stepPipeline<P extends SettledUploads>(s: StepStages<P>): OperatorFunction<EvaluateStep, SettledStep<P>> {
  return (steps) => steps.pipe(evaluateEdge(s.evaluate), settleEdge(s.settle, s.rebuild), placementEdge(s), batchEdge(s));
}

/**
 * A request's steps through one pipeline, subscribed once for the request (a subscription per
 * step cost ~5 % of a small model's token in the tier-overhead bench). run() pushes a step and
 * resolves with its settled report; the pipeline's error rejects that step and every later one
 * (the request is over). close() unsubscribes.
 */
export class StepRunner<P extends SettledUploads = SettledUploads> {
  private readonly steps = new Subject<EvaluateStep>();
  private waiting: { resolve: (s: SettledStep<P>) => void; reject: (e: unknown) => void } | undefined;
  private failure: { error: unknown } | undefined;
  private readonly subscription: Subscription;

  constructor(stages: StepStages<P>) {
    this.subscription = this.steps.pipe(stepPipeline(stages)).subscribe({
      next: (s) => this.settle()?.resolve(s),
      error: (error) => {
        this.failure = { error };
        this.settle()?.reject(error);
      },
    });
  }

  run(step: EvaluateStep): Promise<SettledStep<P>> {
    if (this.failure) return Promise.reject(this.failure.error);
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.steps.next(step);
    });
  }

  close(): void {
    this.subscription.unsubscribe();
  }

  private settle() {
    const w = this.waiting;
    this.waiting = undefined;
    return w;
  }
}
