/**
 * One request's view of the tier: the buffers each evaluation fills, the stats mark after
 * the prefill, the placement fed from every decode step, and the request's figures.
 *
 *   routes      Int32Array [nTokens][nLayer][k]   routed expert ids, rank order
 *   layerStats  Float64Array [nLayer][6]          [startNs, endNs, moeStartNs, moeEndNs, hits, misses]
 *
 * With prefill replan on a native tier, the prefill eval carries onLayerRouted: each layer's
 * counts reach the placement while later layers compute (uploads settled so far are polled
 * first, so the upload queue has room; they join the prefill's report, where the int8-rebuild
 * actor hears of them, between steps). Before each decode step the host copies of evicted
 * experts are awaited, so the miss path never computes them from the container.
 */
import type { HParams } from '../../model/types.js';
import type { NativeEvalOptions } from '../../native/binding.js';
import type { TierPlacement } from './placement.js';
import { LAYER_STAT_FIELDS, type TierPoll, type TierPort, type TierStats } from './port.js';
import type { RequestTracing } from './tracing.js';
import type { Int8RebuildActor } from '../../actors/int8-rebuild/actor.js';

export interface TierRequestStats {
  /** Hits / routed pairs from the first decode token on (NaN without a decode step). */
  decodeHitRate: number;
  prefillHitRate: number;
  /** MoE time per decode step, from the native per-layer timing (NaN without it). */
  moeMsPerToken: number;
  uploads: number;
  uploadBytes: number;
  failedUploads: number;
  /** The tier's counters at the end (tests read leases and slot use from here). */
  tier: TierStats;
}

export class TierRequest {
  private routes = new Int32Array(0);
  private readonly layerStats: Float64Array | undefined;
  private prefill: TierStats | undefined;
  private moeNs = 0;
  private decodeSteps = 0;
  private uploads = 0;
  private uploadBytes = 0;
  private failedUploads = 0;
  private finished = false;
  /** Polled inside the prefill (by the replan hook), reported with the prefill's step. */
  private early: TierPoll = { uploads: [], evicted: [] };

  constructor(
    private readonly port: TierPort,
    private readonly placement: TierPlacement,
    private readonly hp: Pick<HParams, 'nLayer' | 'nExpertUsed'>,
    private readonly tracing?: RequestTracing,
    private readonly rebuild?: Int8RebuildActor,
  ) {
    this.layerStats = port.hasLayerStats ? new Float64Array(hp.nLayer * LAYER_STAT_FIELDS) : undefined;
    port.resetStats();
  }

  /** Options for evaluating nTokens tokens; the routes buffer is reused while it is big enough. */
  evalOptions(nTokens: number): NativeEvalOptions {
    const need = nTokens * this.hp.nLayer * this.hp.nExpertUsed;
    if (this.routes.length !== need) this.routes = new Int32Array(need);
    const options: NativeEvalOptions = this.layerStats ? { routes: this.routes, layerStats: this.layerStats } : { routes: this.routes };
    if (this.prefill === undefined && this.placement.replanEnabled && this.port.kind === 'native') {
      options.onLayerRouted = (layer, counts) => {
        this.pollEarly();
        this.placement.replanLayer(layer, counts);
      };
    }
    return options;
  }

  /**
   * Before a decode step: the host copies of experts evicted so far (and those still building
   * since the tier opened) are ready, built in parallel on the actor's workers.
   */
  async beforeDecode(): Promise<void> {
    if (!this.rebuild) return;
    await this.rebuild.whenIdle();
    const failure = this.rebuild.takeFailure();
    if (failure) throw failure;
  }

  private pollEarly(): void {
    const poll = this.placement.settle(this.port.poll());
    this.early.uploads.push(...poll.uploads);
    this.early.evicted.push(...poll.evicted);
  }

  /** The routes of the last evaluation, [nTokens][nLayer][k]. */
  lastRoutes(): Int32Array {
    return this.routes;
  }

  afterPrefill(nTokens: number, position: number): void {
    this.port.afterEval(this.routes, nTokens);
    this.prefill = this.port.stats();
    this.port.resetStats(); // the stats mark: decode hits count from the first decode token
    this.placement.observePrefill(this.routes, nTokens);
    this.report('prefill', position);
  }

  afterDecode(position: number): void {
    this.port.afterEval(this.routes, 1);
    this.decodeSteps++;
    if (this.layerStats) {
      for (let l = 0; l < this.hp.nLayer; l++) this.moeNs += this.layerStats[l * LAYER_STAT_FIELDS + 3] - this.layerStats[l * LAYER_STAT_FIELDS + 2];
    }
    this.placement.observeDecode(this.routes);
    this.report('decode', position);
  }

  /** final: the request's last poll (in finish) reports nothing more to fail it with. */
  private report(phase: 'prefill' | 'decode', position: number, final = false): void {
    const late = this.placement.settle(this.port.poll());
    const poll: TierPoll = { uploads: [...this.early.uploads, ...late.uploads], evicted: [...this.early.evicted, ...late.evicted] };
    this.early = { uploads: [], evicted: [] };
    if (this.rebuild) {
      // Between steps: a newcomer's host copy is freed, a victim's is built.
      this.rebuild.send({ kind: 'resident', experts: poll.uploads.filter((u) => u.ok).map((u) => ({ layer: u.layer, expert: u.expert })) });
      this.rebuild.send({ kind: 'evicted', experts: poll.evicted });
    }
    for (const u of poll.uploads) {
      if (!u.ok) {
        this.failedUploads++;
        continue;
      }
      this.uploads++;
      this.uploadBytes += u.bytes;
    }
    this.tracing?.step({ phase, position, layerStats: this.layerStats, poll });
    const failure = final ? undefined : this.rebuild?.takeFailure();
    if (failure) throw failure;
  }

  /**
   * Ends the request (also after an abort or an error): queued swaps dropped, uploads settled
   * so far counted, the request span ended (failed with `error`) and its metrics recorded.
   */
  finish(timing: { msPerToken: number; ttftMs: number }, error?: unknown): TierRequestStats {
    if (!this.finished) {
      this.finished = true;
      this.placement.endRequest();
      this.report('decode', -1, true);
    }
    const decode = this.port.stats();
    const prefill = this.prefill;
    const stats: TierRequestStats = {
      decodeHitRate: this.decodeSteps > 0 ? ratio(decode.hits, decode.hits + decode.misses) : Number.NaN,
      prefillHitRate: prefill ? ratio(prefill.hits, prefill.hits + prefill.misses) : Number.NaN,
      moeMsPerToken: this.layerStats && this.decodeSteps > 0 ? this.moeNs / 1e6 / this.decodeSteps : Number.NaN,
      uploads: this.uploads,
      uploadBytes: this.uploadBytes,
      failedUploads: this.failedUploads,
      tier: decode,
    };
    this.tracing?.end({ ...stats, ...timing }, error);
    return stats;
  }
}

function ratio(a: number, b: number): number {
  return b > 0 ? a / b : Number.NaN;
}
