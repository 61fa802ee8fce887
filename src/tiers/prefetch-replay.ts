/**
 * The prefetch replay: one scenario's decode on a simulated clock, host-less
 * (the disk tier: a miss is read before it runs), in one mode: off | observe | enforce.
 *
 *   per token t:  beginStep(t) cancels the last token's queued, unstarted prefetches
 *   per layer l:  settle the lane up to now; queued reads for l are stale (l routes now): cancelled
 *                 route l: resident -> hit (covered if a prefetch landed it); on the lane -> wait
 *                   for it (late); else a demand read on the lane, kept by LRU (the stall)
 *                 predict l+1 (oracle at a stated recall), window of layer l (transferWindowBytes on
 *                   the snapshot folded from this run's own samples), packPrefetch; enforce admits
 *                   the reads to the ledger, observe only counts them (wouldIssue / wouldCover)
 *                 compute: the layer runs once its experts are in, for computeMs[l]
 *   per token:    the token's layer times and reads folded by calibrateStep, as the engine does
 *
 * One transfer lane (a FIFO of reads at the timing model's bandwidth, fixed cost each): the
 * current layer's demand reads go before queued prefetches (a prefetch never delays the layer
 * that waits), never before the one already reading. A prefetch takes its slot as it starts
 * (a free slot, else the LRU resident not predicted for its layer); one that finds none is
 * dropped. Queue wait is passed to the window as 0, as the engine's placement does today.
 *
 * Residency: residency.ts (applyDecisions asserts the budget) and the policies' victim search
 * (policies/common.ts admitMiss) with an LRU score of this file's own: a Policy's step has no
 * prefetch event to learn a read ahead from, so the policies themselves are not reused here.
 */
import { calibrateStep, initialCalibration, CALIBRATION_DEFAULTS } from '../actors/calibration/logic.js';
import { STEP_LAYER_FIELDS, type CalibrationSnapshot, type StepUpload } from '../actors/calibration/messages.js';
import { assert } from '../core/assert.js';
import { InvalidOptionError } from '../core/errors.js';
import { mulberry32, type Rng } from '../core/prng.js';
import { oraclePrediction, rankScores } from './prefetch-oracle.js';
import { PrefetchLedger, PREFETCH_LEDGER_LIMITS, type Tallies } from './prefetch-ledger.js';
import { packPrefetch } from './prefetch.js';
import { readMs, type TimingModel } from './prefetch-timing.js';
import { admitMiss } from './policies/common.js';
import { applyDecisions, isResident, type Residency } from './residency.js';
import type { Scenario } from './scenario.js';
import type { Decision, ExpertKey } from './types.js';
import { transferWindowBytes, type TransferWindowLimits } from './transfer-window.js';

export type PrefetchReplayMode = 'off' | 'observe' | 'enforce';
export const prefetchReplayModes: readonly PrefetchReplayMode[] = ['off', 'observe', 'enforce'];

export interface PrefetchReplayOptions {
  mode: PrefetchReplayMode;
  timing: TimingModel;
  expertBytes: number;
  /** The oracle's recall in [0, 1]: a stated assumption. */
  recall: number;
  seed: number;
  window: TransferWindowLimits;
  queueLengthMax?: number;
}

export interface PrefetchReplayResult {
  mode: PrefetchReplayMode;
  tokens: number;
  decodeMs: number;
  stallMs: number;
  routed: number;
  demandReads: number;
  prefetchReads: number;
  ledger: Tallies;
  /** The ledger per layer: by the layer predicted (a prefetch's) or routed. */
  layers: Tallies[];
  landedUnrouted: number;
  wouldIssue: number;
  wouldCover: number;
}

/** Layer stamps of 0 are "not timed" to the calibration: the simulated clock starts 1 s in. */
const EPOCH_NS = 1e9;
const ns = (ms: number): number => EPOCH_NS + Math.round(ms * 1e6);

export function replayPrefetch(sc: Scenario, o: PrefetchReplayOptions): PrefetchReplayResult {
  if (!(o.recall >= 0 && o.recall <= 1))
    throw new InvalidOptionError('prefetch recall', 'a number in [0, 1]', o.recall);
  if (o.timing.computeMs.length !== sc.layers)
    throw new InvalidOptionError('timing', `compute times for ${sc.layers} layers`, o.timing.computeMs.length);
  const sim = new Sim(sc, o);
  sc.decode.forEach((step, t) => sim.token(step, t));
  return sim.finish();
}

class Sim {
  private now = 0;
  private laneFreeAt = 0;
  private clock = 0;
  private stallMs = 0;
  private routed = 0;
  private demandReads = 0;
  private wouldIssue = 0;
  private wouldCover = 0;
  private res: Residency;
  private readonly lastUse: Float64Array[];
  private onLane: { id: number; layer: number; expert: number; endMs: number } | undefined;
  /** Per layer: the last prediction for it, never a prefetch's victim. */
  private readonly predicted = new Map<number, readonly number[]>();
  private readonly observed = new Set<number>();
  private readonly ledger: PrefetchLedger;
  private readonly rng: Rng;
  private readonly track: boolean;
  private snapshot: CalibrationSnapshot;
  private uploads: StepUpload[] = [];
  private readonly layerStats: Float64Array;

  constructor(
    private readonly sc: Scenario,
    private readonly o: PrefetchReplayOptions,
  ) {
    this.res = sc.start;
    this.lastUse = Array.from({ length: sc.layers }, () => new Float64Array(sc.experts).fill(-1));
    const d = PREFETCH_LEDGER_LIMITS;
    this.ledger = new PrefetchLedger(sc.layers, sc.experts, {
      queueLengthMax: o.queueLengthMax ?? d.queueLengthMax,
      inflightBytesMax: o.window.inflightBytesMax ?? d.inflightBytesMax,
    });
    this.rng = mulberry32(o.seed);
    this.track = o.mode !== 'off'; // off counts nothing, as the engine's tier
    this.snapshot = initialCalibration({ alpha: CALIBRATION_DEFAULTS.alpha, nLayer: sc.layers });
    this.layerStats = new Float64Array(sc.layers * STEP_LAYER_FIELDS);
  }

  token(step: readonly (readonly number[])[], t: number): void {
    this.settle(this.now);
    if (this.track) this.ledger.beginStep(t, this.now);
    for (let l = 0; l < this.sc.layers; l++) this.layer(step, l);
    const timing = {
      kind: 'step' as const,
      invocation: 1,
      layerStats: this.layerStats,
      uploads: this.uploads,
      traced: false,
    };
    this.snapshot = calibrateStep(this.snapshot, timing, {
      alpha: CALIBRATION_DEFAULTS.alpha,
      nLayer: this.sc.layers,
    }).snapshot;
    this.uploads = [];
  }

  finish(): PrefetchReplayResult {
    const decodeMs = this.now;
    // Drain, after the clock stopped: the queue is cancelled, the read on the lane lands.
    this.settle(this.now);
    if (this.track) this.ledger.beginStep(this.ledger.generation + 1, this.now);
    if (this.onLane) this.settle(this.onLane.endMs);
    assert(this.ledger.outstandingBytes === 0, 'the prefetch replay drains every read');
    const ledger = this.ledger.tallies();
    return {
      mode: this.o.mode,
      tokens: this.sc.decode.length,
      decodeMs,
      stallMs: this.stallMs,
      routed: this.routed,
      demandReads: this.demandReads,
      prefetchReads: ledger.issued.count,
      ledger,
      landedUnrouted: this.ledger.landedUnrouted(),
      layers: Array.from({ length: this.sc.layers }, (_, l) => this.ledger.layerTallies(l)),
      wouldIssue: this.wouldIssue,
      wouldCover: this.wouldCover,
    };
  }

  private layer(step: readonly (readonly number[])[], l: number): void {
    this.settle(this.now);
    // A read for layer l not started by now comes too late for this token; the next predicts again.
    for (const t of this.ledger.queued()) if (t.layer === l) this.ledger.cancel(t.id, this.now);
    const ready = this.route(l, step[l]);
    if (this.track && l + 1 < this.sc.layers) this.predict(l, step[l + 1]);
    this.settle(ready);
    this.stallMs += ready - this.now;
    const end = ready + this.o.timing.computeMs[l];
    this.layerStats[l * STEP_LAYER_FIELDS] = ns(ready);
    this.layerStats[l * STEP_LAYER_FIELDS + 1] = ns(end);
    this.now = end;
  }

  /** Routes layer l's experts; returns when the last of them is in. */
  private route(l: number, experts: readonly number[]): number {
    let ready = this.now;
    for (const e of experts) {
      this.routed++;
      this.lastUse[l][e] = ++this.clock;
      if (this.observed.delete(l * this.sc.experts + e)) this.wouldCover++;
      const flying = this.onLane?.layer === l && this.onLane.expert === e;
      if (this.track) this.ledger.route(l, e, this.o.expertBytes, this.now, isResident(this.res, l, e));
      if (flying) ready = Math.max(ready, this.onLane!.endMs);
      if (isResident(this.res, l, e)) continue;
      this.demandReads++;
      ready = Math.max(ready, this.read(this.now, l));
      const d = admitMiss(this.res, l, e, experts, this.score);
      if (d) this.apply(d); // none: every resident is routed here, the read is streamed
    }
    return ready;
  }

  private predict(l: number, nextRouted: readonly number[]): void {
    const next = l + 1;
    const prediction = oraclePrediction(this.rng, nextRouted, this.sc.experts, this.o.recall);
    const enforce = this.o.mode === 'enforce';
    // Observe has nothing in flight; queue wait 0 as the engine's placement passes it.
    const window = transferWindowBytes(this.snapshot, l, enforce ? this.ledger.outstandingBytes : 0, 0, this.o.window);
    const scores = rankScores(prediction);
    const admission = packPrefetch(
      prediction.map((expert, i) => {
        const state = this.ledger.liveTask(next, expert)?.state;
        return {
          expert,
          score: scores[i],
          bytes: this.o.expertBytes,
          resident: isResident(this.res, next, expert),
          inflight: state === 'queued' || state === 'issued',
        };
      }),
      window,
    );
    this.predicted.set(next, prediction);
    for (const e of admission.admitted) {
      if (enforce) this.ledger.admit(next, e, this.o.expertBytes, this.now);
      else if (!this.observed.has(next * this.sc.experts + e))
        (this.observed.add(next * this.sc.experts + e), this.wouldIssue++);
    }
  }

  /** Runs the lane up to `until`: lands the read on it, starts the next queued one when free. */
  private settle(until: number): void {
    for (;;) {
      if (this.onLane) {
        if (this.onLane.endMs > until) return;
        this.ledger.complete(this.onLane.id, this.onLane.endMs);
        this.onLane = undefined;
        continue;
      }
      const next = this.ledger.queued()[0];
      if (!next) return;
      const start = Math.max(this.laneFreeAt, next.admittedMs);
      if (start > until) return;
      assert(!isResident(this.res, next.layer, next.expert), 'a queued prefetch is of an expert not resident');
      const d = admitMiss(this.res, next.layer, next.expert, this.predicted.get(next.layer) ?? [], this.score);
      if (!d) {
        this.ledger.drop(next.id, start);
        continue;
      }
      this.ledger.issue(next.id, start);
      this.onLane = { id: next.id, layer: next.layer, expert: next.expert, endMs: this.read(start, next.layer) };
      this.apply(d, start);
      this.lastUse[next.layer][next.expert] = this.clock;
    }
  }

  /** One read on the lane from `at` (after what it is reading); its calibration sample; returns its end. */
  private read(at: number, layer: number): number {
    const start = Math.max(at, this.laneFreeAt);
    const end = start + readMs(this.o.timing, this.o.expertBytes);
    this.laneFreeAt = end;
    this.uploads.push({
      layer,
      bytes: this.o.expertBytes,
      ok: true,
      issuedNs: ns(start),
      startNs: ns(start + this.o.timing.transferFixedMs),
      endNs: ns(end),
    });
    return end;
  }

  private apply(d: Decision, atMs = this.now): void {
    if (d.kind === 'swap') this.evicted(d.victim, atMs);
    this.res = applyDecisions(this.res, [d]);
  }

  private evicted(k: ExpertKey, atMs: number): void {
    this.observed.delete(k.layer * this.sc.experts + k.expert);
    if (this.track) this.ledger.evict(k.layer, k.expert, atMs);
  }

  /** LRU; the read on the lane is nobody's victim (its slot is being written). */
  private readonly score = (layer: number, expert: number): number =>
    this.onLane?.layer === layer && this.onLane.expert === expert ? Infinity : this.lastUse[layer][expert];
}
