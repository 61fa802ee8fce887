/**
 * One request's view of the tier. Each step is one async function, top to bottom (runStep), whose
 * stages are this class's methods:
 *
 *   evaluate   the layer-compute actor (src/actors/layer-compute): routes and per-layer timing
 *   observe    prefill (before its poll): its counts per layer (replan: the layers the hook did
 *              not deliver, whose victims the poll then reports)
 *   settle     prefill: the stats mark first; the tier's poll, counted; settled uploads retire
 *   rebuild    host copies: a newcomer's freed, a victim's built (int8-rebuild actor)
 *   observe    decode: the token's routes
 *   decide     decode: the policy's tick
 *   issue      its swaps through the upload queue to the tier
 *   batch      every observerBatchSteps decode steps (and the prefill at once): MoE time, route
 *              log, traces; their timings go to calibrate (the calibration actor's fold)
 *
 *   routes      Int32Array [nTokens][nLayer][k]   routed expert ids, rank order
 *   layerStats  Float64Array [nLayer][8]          [startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs]
 *
 * With prefill replan on a native tier, the prefill eval carries onLayerRouted: each layer's
 * counts reach the placement while later layers compute (uploads settled so far are polled
 * first, so the upload queue has room; they join the prefill's settle, where the int8-rebuild
 * actor hears of them, between steps). Before each decode step the host copies of evicted
 * experts are awaited, so the miss path never computes them from the container.
 *
 * Why batches: JavaScript that runs once per 1.5 ms token finds its code and data evicted by the
 * eval, and pays for it in cache misses; the same work done for eight steps at once runs warm.
 * Measured on the small preset (every expert resident, 1 thread): the route log, tracing and
 * calibration cost ~60 us a step one at a time, ~26 us a step in batches (~11 us once V8 has
 * optimized them, after some thousand steps). The calibration estimates and the spans arrive up to
 * observerBatchSteps tokens late, with the same values and timestamps (the fold is in step order).
 * A throw in any stage rejects the step (and so the request); the stages after it do not run. A swap
 * the tick decides is issued at its layer's next boundary, like any swap; placement never
 * changes tokens.
 */
import { prefetchReport } from './prefetch-report.js';
import type { PrefillPath } from './prefill-path.js';
import type { LayerComputeActor } from '../../actors/layer-compute/actor.js';
import type { StepTimings } from '../../actors/calibration/messages.js';
import { moeNs, stepRingSlots } from '../../actors/layer-compute/logic.js';
import type { BatchRows, EvaluateStep, LayerStepReport, StepPhase } from '../../actors/layer-compute/messages.js';
import type { Decision } from '../../tiers/types.js';
import type { TierPlacement } from './placement.js';
import type { GuardSummary } from '../../tiers/policies/replan-guard.js';
import type { StepReport, TierPoll, TierPort, TierStats } from './port.js';
import type { RequestTracing } from './tracing.js';
import type { Int8RebuildActor } from '../../actors/int8-rebuild/actor.js';
import { assert } from '../../core/assert.js';
import type { RouteLog } from './route-log.js';

/** Decode steps whose route log, traces and calibration are handled together (see above). */
export const observerBatchSteps = 8;
assert(observerBatchSteps < stepRingSlots, 'a batch reads its steps before the ring reuses them');

/** A decode step waiting for its batch: the report (its buffers in the actor's ring) and the uploads it settled. */
interface PendingStep {
  report: LayerStepReport;
  poll: TierPoll;
}

export interface TierRequestStats {
  /** Hits / routed pairs from the first decode token on (NaN without a decode step). */
  decodeHitRate: number;
  prefillHitRate: number;
  /** MoE time per decode step, from the native per-layer timing (NaN without it). */
  moeMsPerToken: number;
  uploads: number;
  uploadBytes: number;
  decodeUploadBytes: number;
  failedUploads: number;
  /** The disk tier: the prefill's path, and its layer calls by path (prefill-path.ts). */
  prefillPath: PrefillPath | undefined;
  prefillPathCalls: { onDemand: number[]; wholeLayer: number[] } | undefined;
  /** The prefill's reads of routed misses (the disk tier; 0 elsewhere) and the distinct experts they read. */
  prefillExpertReads: number;
  prefillDistinctExpertsRead: number;
  /** The replan guard's layers of this request's prefill (undefined with the guard off). */
  replanGuard: ReplanGuardStats | undefined;
  /** The tier's counters at the end (tests read leases and slot use from here). */
  tier: TierStats;
}

/**
 * The replan guard per request (src/tiers/policies/replan-guard.ts): mode 'replan' (replan on:
 * reverted = layers swapped back to their pre-replan residents) or 'shadow' (replan off: appliedLate
 * = layers that took the held-back replan); kept = layers past the last checkpoint unchanged;
 * watching = layers the request ended before the last checkpoint for.
 */
export interface ReplanGuardStats {
  mode: 'replan' | 'shadow';
  kept: number;
  reverted: number;
  appliedLate: number;
  watching: number;
}

const nothingSettled: TierPoll = Object.freeze({
  uploads: Object.freeze([]) as unknown as TierPoll['uploads'],
  evicted: Object.freeze([]) as unknown as TierPoll['evicted'],
  reads: Object.freeze([]) as unknown as TierPoll['reads'],
});

export class TierRequest {
  private prefill: TierStats | undefined;
  private moeNs = 0;
  private decodeSteps = 0;
  private uploads = 0;
  private uploadBytes = 0;
  /** Of uploadBytes, those settled after the prefill's step (the decode's reads on the disk tier). */
  private decodeUploadBytes = 0;
  private decoding = false;
  private failedUploads = 0;
  private finished = false;
  /** Polled inside the prefill (by the replan hook), reported with the prefill's step. */
  private early: TierPoll = { uploads: [], evicted: [], reads: [] };
  /** Decode steps handled every step, waiting for the route log, traces and calibration. */
  private pending: PendingStep[] = [];
  /** The prefill's token ids (for the route log; the engine does not reuse this array). */
  private prompt: Int32Array | undefined;

  constructor(
    private readonly port: TierPort,
    private readonly placement: TierPlacement,
    private readonly compute: LayerComputeActor,
    private readonly tracing?: RequestTracing,
    private readonly rebuild?: Int8RebuildActor,
    /** The boundary work a tune left (a new slot budget), run before each step; undefined: none. */
    private readonly boundary?: () => Promise<boolean> | undefined,
    /** Where the request's routing goes (heat file, --trace-routes); undefined: not kept. */
    private readonly log?: RouteLog,
    /** The disk tier: the path a prefill of this many tokens takes (prefill-path.ts); undefined: the tier has one path. */
    private readonly prefillPathOf?: (promptTokens: number) => PrefillPath,
    /** Hears each step's report as it is traced (engine.steps$(): step-views.ts); undefined: nobody listens. */
    private readonly onStep?: (step: StepReport) => void,
  ) {
    port.resetStats();
  }

  /** One step; a throw in any stage rejects it. forcedRoutes: the experts to run instead of the router's (routesFrom). */
  async evaluate(
    phase: StepPhase,
    tokens: Int32Array,
    position: number,
    logits: Float32Array,
    forcedRoutes?: Int32Array,
    batch?: BatchRows,
  ): Promise<void> {
    const step: EvaluateStep = { kind: 'evaluate', phase, tokens, position, logits };
    if (forcedRoutes) step.forcedRoutes = forcedRoutes;
    if (batch) step.batch = batch;
    if (phase === 'prefill') this.prompt = tokens;
    const path = phase === 'prefill' && tokens.length > 1 ? this.prefillPathOf?.(tokens.length) : undefined;
    if (path === undefined) return this.runStep(step);
    this.prefillPath = path;
    this.port.setPrefillPath(path);
    try {
      await this.runStep(step);
    } finally {
      if (path !== 'on-demand') this.port.setPrefillPath('on-demand'); // decode steps read on demand
    }
  }

  /** The path this request's prefill took (the disk tier), once it ran. */
  private prefillPath: PrefillPath | undefined;

  private async runStep(step: EvaluateStep): Promise<void> {
    const { phase } = step;
    if (phase === 'prefill' && this.placement.replanEnabled) {
      step.onLayerRouted = (layer, counts) => {
        this.pollEarly();
        this.placement.replanLayer(layer, counts);
      };
    }
    const report = await this.compute.evaluate(step);
    if (report.phase === 'prefill') this.observePrefill(report);
    const poll = this.settleStep(report);
    this.rebuildAfter(poll);
    if (report.phase !== 'prefill') this.placement.observeRoutes(report.routes, report.nTokens);
    this.issue(this.decide(report));
    this.calibrate(this.batch(report, poll));
  }

  /** Settle: the step's settled uploads (the prefill's: after the stats mark, and from here on the decode's). */
  private settleStep(report: LayerStepReport): TierPoll {
    if (report.phase !== 'prefill') return this.settle(false);
    this.markPrefill();
    const poll = this.settle(false);
    this.decoding = true; // uploads settled from here on are the decode's
    return poll;
  }

  /**
   * Observe a prefill: its routes into the placement's policy, before its poll. The layers the hook
   * did not deliver (its queue was full) are replanned here, and their swaps start at once: their
   * victims are in the poll that follows, so their host copies are built before the first decode step.
   */
  private observePrefill(report: LayerStepReport): void {
    if (this.placement.replanEnabled) this.pollEarly(); // uploads landed so far leave the gate's room
    this.placement.observePrefill(report.routes, report.nTokens);
  }

  /** Decide: the policy's tick after a decode step (a prefill's replan was decided during its eval). */
  private decide(report: LayerStepReport): readonly Decision[] {
    return report.phase === 'prefill' ? [] : this.placement.tick();
  }

  /** Issue: the decisions through the upload queue (the one gate); the next prediction published. */
  private issue(decisions: readonly Decision[]): void {
    this.placement.issue(decisions);
    this.placement.publishPrefetch(this.tracing?.calibration.snapshot);
  }

  /** Calibrate: the batch's timings folded into the calibration actor's estimates. */
  private calibrate(timings: readonly StepTimings[]): void {
    if (timings.length > 0) this.tracing?.calibration.fold(...timings);
  }

  /**
   * Before each step (the prefill, every decode step): a tuned slot budget is applied, then the host copies of experts evicted so far
   * (and those still building since the tier opened) are ready, built in parallel on the actor's
   * workers, so the miss path never computes an evicted expert from the container.
   * undefined when there is nothing to wait for (most steps: no promise to settle between tokens).
   */
  beforeStep(): Promise<void> | undefined {
    const tuned = this.boundary?.();
    if (!tuned && (!this.rebuild || this.rebuild.idle)) return undefined;
    return this.waitBeforeStep(tuned);
  }

  /** A tune's boundary work, then the rebuilds: one that failed throws here, and so fails the step. */
  private async waitBeforeStep(tuned: Promise<boolean> | undefined): Promise<void> {
    if (tuned) await tuned;
    await this.rebuild?.settled();
  }

  private pollEarly(): void {
    const poll = this.placement.settle(this.port.poll());
    this.early.uploads.push(...poll.uploads);
    this.early.evicted.push(...poll.evicted);
    this.early.reads.push(...poll.reads);
  }

  /** The stats mark: decode hits count from the first decode token. */
  private markPrefill(): void {
    this.prefill = this.port.stats();
    this.port.resetStats();
  }

  /** The prefill at once; decode steps in batches of observerBatchSteps. Returns the timings to calibrate. */
  private batch(r: LayerStepReport, poll: TierPoll): readonly StepTimings[] {
    if (r.phase === 'prefill') {
      this.log?.add('prefill', r.routes, this.prompt ?? Int32Array.of(r.firstToken));
      const report: StepReport = { phase: 'prefill', position: r.position, layerStats: r.layerStats, poll };
      this.onStep?.(report);
      const t = this.tracing?.step(report);
      return t ? [t] : [];
    }
    this.decodeSteps++;
    this.pending.push({ report: r, poll });
    return this.pending.length >= observerBatchSteps ? this.observeBatch() : [];
  }

  /** The decode steps since the last batch, in order: MoE time, route log, traces; their timings. */
  private observeBatch(): StepTimings[] {
    const steps = this.pending;
    const timings: StepTimings[] = [];
    if (steps.length === 0) return timings;
    this.pending = [];
    for (const { report: r, poll } of steps) {
      this.moeNs += moeNs(r.layerStats);
      this.log?.add('decode', r.routes, r.tokens ?? Int32Array.of(r.firstToken));
      const report: StepReport = { phase: 'decode', position: r.position, layerStats: r.layerStats, poll };
      this.onStep?.(report);
      const t = this.tracing?.step(report);
      if (t) timings.push(t);
    }
    return timings;
  }

  /**
   * Uploads settled since the last call (with those the replan hook polled) to the placement, the
   * int8-rebuild actor and the counters. Between evaluations only: `resident` frees a host copy's
   * block for reuse. final: the request's last poll (in finish) has nothing more to fail it with.
   */
  private settle(final: boolean): TierPoll {
    // Uploads are only reported for swaps, and every swap the tier was asked for is queued or in
    // flight at the gate until its report comes: none, nothing to poll (~10 us saved a step); a
    // tier that reads its misses from the file reports them (and its fills) every step. A queued
    // swap counts: its boundary may have passed with the issuer not there yet, and the poll's
    // flush issues it now, so its victim is reported (and its host copy built) before the next step.
    const late =
      final || this.placement.swapsOutstanding > 0 || this.port.readsMisses
        ? this.placement.settle(this.port.poll())
        : nothingSettled;
    const early = this.early;
    const none = early.uploads.length + early.evicted.length + early.reads.length === 0;
    const poll: TierPoll = none
      ? late
      : {
          uploads: [...early.uploads, ...late.uploads],
          evicted: [...early.evicted, ...late.evicted],
          reads: [...early.reads, ...late.reads],
        };
    if (!none) this.early = { uploads: [], evicted: [], reads: [] };
    for (const u of poll.uploads) {
      if (!u.ok) {
        this.failedUploads++;
        continue;
      }
      this.uploads++;
      this.uploadBytes += u.bytes;
      if (this.decoding) this.decodeUploadBytes += u.bytes;
    }
    return poll;
  }

  /**
   * Between steps: a newcomer's host copy is freed, a victim's is built (a failure of that build
   * is thrown before the next step, by beforeStep).
   */
  private rebuildAfter(poll: TierPoll): void {
    if (this.rebuild && poll.uploads.length + poll.evicted.length > 0) {
      this.rebuild.send({
        kind: 'resident',
        experts: poll.uploads.filter((u) => u.ok).map((u) => ({ layer: u.layer, expert: u.expert })),
      });
      this.rebuild.send({
        kind: 'evicted',
        experts: this.stillEvicted(poll.evicted),
        ...(this.tracing ? { traceContext: this.tracing.context } : {}),
      });
    }
  }

  /**
   * Evictions are reported at the next poll, which may come after a tune's grow filled the expert
   * again: only those still without a slot get a host copy.
   */
  private stillEvicted(evicted: TierPoll['evicted']): TierPoll['evicted'] {
    if (evicted.length === 0) return evicted;
    const r = this.port.expertStates().slots;
    return evicted.filter((k) => r[k.layer * this.port.nExpert + k.expert] < 0);
  }

  /**
   * Ends the request (also after an abort or an error): queued swaps dropped, the last batch of
   * steps observed, uploads settled so far counted, the request span ended (failed with `error`)
   * and its metrics recorded. A throw in that last batch or poll still ends the span; then it is
   * thrown, unless the request already failed with `error`.
   */
  finish(error?: unknown): TierRequestStats {
    let failure: { error: unknown } | undefined;
    let guard: GuardSummary | undefined;
    if (!this.finished) {
      this.finished = true;
      try {
        guard = this.placement.guard;
        this.placement.endRequest();
        const timings = this.observeBatch(); // the decode steps since the last batch
        // The final poll: no step of its own (position -1: the traces skip the layer timing).
        const poll = this.settle(true);
        this.rebuildAfter(poll);
        const last = this.tracing?.step({
          phase: 'decode',
          position: -1,
          layerStats: this.compute.last?.layerStats ?? new Float64Array(0),
          poll,
        });
        if (last) timings.push(last);
        this.tracing?.calibration.fold(...timings);
      } catch (e) {
        failure = { error: e };
      }
    }
    const decode = this.port.stats();
    const prefill = this.prefill;
    const stats: TierRequestStats = {
      decodeHitRate: this.decodeSteps > 0 ? ratio(decode.hits, decode.hits + decode.misses) : Number.NaN,
      prefillHitRate: prefill ? ratio(prefill.hits, prefill.hits + prefill.misses) : Number.NaN,
      moeMsPerToken: this.decodeSteps > 0 ? this.moeNs / 1e6 / this.decodeSteps : Number.NaN,
      uploads: this.uploads,
      uploadBytes: this.uploadBytes,
      decodeUploadBytes: this.decodeUploadBytes,
      failedUploads: this.failedUploads,
      prefillPath: this.prefillPath,
      prefillPathCalls: prefill?.pathCalls,
      prefillExpertReads: prefill?.expertReads ?? 0,
      prefillDistinctExpertsRead: prefill?.distinctExpertsRead ?? 0,
      replanGuard: guard && {
        mode: guard.mode,
        kept: guard.kept,
        watching: guard.watching,
        reverted: guard.mode === 'replan' ? guard.switched : 0,
        appliedLate: guard.mode === 'shadow' ? guard.switched : 0,
      },
      tier: decode,
      ...(decode.prefetch && this.placement.prefetchConfig.mode !== 'off'
        ? { prefetch: prefetchReport(decode.prefetch, this.port.expertBytes.container) }
        : {}),
    };
    this.tracing?.end(stats);
    if (failure && error === undefined) throw failure.error;
    return stats;
  }
}

function ratio(a: number, b: number): number {
  return b > 0 ? a / b : Number.NaN;
}
