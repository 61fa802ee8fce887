/**
 * The tier's spans, through @opentelemetry/api only (no-ops until otel/ set up the SDK). Spans
 * are built after each step from the native timing (explicit start and end on the monotonic
 * clock; the fake backend's virtual clock for both compute and uploads):
 *
 *   moetier.request (the engine's, src/engine/request-trace.ts)
 *   ├── moetier.prefill / moetier.decode_step (the engine's)
 *   │   └── moetier.layer.compute   per layer and step: layer, phase, token, hits, misses   (layerStats)
 *   │       └── moetier.layer.device  its residents on a CUDA device: the compute stream's events (layerStats)
 *   ├── moetier.upload          per settled upload: layer, expert, bytes, in place      (tierPoll)
 *   ├── moetier.rebuild         per host copy built (the int8-rebuild actor)
 *   └── moetier.calibration.update  by the calibration actor, after a step whose samples moved the EWMAs
 *
 * Each step's timing comes back from step() with the request's trace context; the request's
 * calibrate stage (src/engine/tier/request.ts) folds it into the calibration actor.
 */
import { trace, type Context, type Tracer } from '@opentelemetry/api';
import type { CalibrationActor } from '../../actors/calibration/actor.js';
import type { StepTimings } from '../../actors/calibration/messages.js';
import {
  AttrNames,
  layerComputeAttributes,
  moetierTracer,
  recordTimedSpan,
  RequestMetrics,
  SpanNames,
  uploadAttributes,
  expertReadAttributes,
  type RequestTierStats,
} from '../../telemetry/index.js';
import { LAYER_STAT_FIELDS, type StepReport } from './port.js';

export class TierTracing {
  private readonly metrics = new RequestMetrics();
  private invocation = 0;

  constructor(
    private readonly backend: string,
    /** Where the steps' timings are folded (by the request's calibrate stage). */
    readonly calibration: CalibrationActor,
    /** Default: moetier's tracer from the global provider, looked up per request (the SDK may start after the engine). */
    private readonly tracerOverride?: Tracer,
  ) {}

  /** The request's spans hang under the engine's request trace (its steps are the layer spans' parents). */
  beginRequest(parent: TraceParent): RequestTracing {
    this.invocation++;
    const virtual = this.backend === 'fake';
    return new RequestTracing(this, parent, this.invocation, virtual ? Number(process.hrtime.bigint()) : undefined);
  }

  record(stats: RequestTierStats): void {
    this.metrics.record(stats, { [AttrNames.backend]: this.backend });
  }

  get tracerOf(): Tracer {
    return this.tracerOverride ?? moetierTracer();
  }
}

/** What the tier needs of the engine's request trace (src/engine/request-trace.ts). */
export interface TraceParent {
  /** The request span's context. */
  readonly context: Context;
  /** Whether the request span records (no SDK, or sampled out: the timed spans are skipped). */
  readonly recording: boolean;
  /** The parent of the layer spans of the step at `position` (0: the prefill). */
  stepContext(position: number): Context;
}

export class RequestTracing {
  private readonly parent: Context;

  constructor(
    private readonly owner: TierTracing,
    private readonly request: TraceParent,
    private readonly invocation: number,
    /** Fake backend: real time at the request's start; its virtual stamps are shifted to start there. */
    private readonly realStartNs: number | undefined,
  ) {
    this.parent = request.context;
  }

  /** The calibration actor the request's step timings are folded into. */
  get calibration(): CalibrationActor {
    return this.owner.calibration;
  }

  /** The request's context: the parent of uploads, rebuilds and calibration. */
  get context(): Context {
    return this.request.context;
  }

  private shiftNs = 0;
  private shifted = false;

  /** A stamp on the span timeline: real ns as they are; the fake's virtual ns moved so the request's first stamp lands at its start. */
  private at(ns: number): number {
    if (this.realStartNs === undefined) return Math.round(ns);
    if (!this.shifted) {
      this.shiftNs = this.realStartNs - Math.round(ns);
      this.shifted = true;
    }
    return Math.round(ns) + this.shiftNs;
  }

  /** The step's layer and upload spans; returns its timings for the calibration edge (undefined: nothing timed). */
  step(r: StepReport): StepTimings | undefined {
    const tracer = this.owner.tracerOf;
    // Without an SDK (or when sampled out) the timed spans are skipped, not built and dropped.
    const recording = this.request.recording;
    const ls = r.position >= 0 ? r.layerStats : undefined;
    if (ls && recording) {
      const stepParent = this.request.stepContext(r.position);
      // Read in place: a subarray and an array per layer and step cost more than the rest of the step.
      for (let l = 0, at = 0; at < ls.length; l++, at += LAYER_STAT_FIELDS) {
        const startNs = Math.round(ls[at]);
        const endNs = Math.round(ls[at + 1]);
        if (!(endNs >= startNs && startNs > 0)) continue;
        const hits = Math.round(ls[at + 4]);
        const misses = Math.round(ls[at + 5]);
        const attributes = layerComputeAttributes({ layer: l, phase: r.phase, tokenIndex: r.position, hits, misses });
        const layerSpan = recordTimedSpan(
          tracer,
          SpanNames.layerCompute,
          this.at(startNs),
          this.at(endNs),
          attributes,
          stepParent,
        );
        const deviceStartNs = Math.round(ls[at + 6]);
        const deviceEndNs = Math.round(ls[at + 7]);
        if (deviceEndNs > deviceStartNs && deviceStartNs > 0) {
          const deviceAttributes = {
            [AttrNames.layer]: l,
            [AttrNames.phase]: r.phase,
            [AttrNames.tokenIndex]: r.position,
          };
          recordTimedSpan(
            tracer,
            SpanNames.layerDevice,
            this.at(deviceStartNs),
            this.at(deviceEndNs),
            deviceAttributes,
            trace.setSpanContext(stepParent, layerSpan),
          );
        }
      }
    }
    if (recording) {
      for (const u of r.poll.uploads) {
        if (!(u.endNs >= u.startNs && u.startNs > 0)) continue;
        // An upload a routed miss waited on is that miss's read (admit before run): one span, named so.
        if (u.admitted || u.prefetch) this.readSpan(u, u.admitted ? 'admitted' : 'prefetch');
        else
          recordTimedSpan(
            tracer,
            SpanNames.upload,
            this.at(u.startNs),
            this.at(u.endNs),
            uploadAttributes({ layer: u.layer, expert: u.expert, bytes: u.bytes, inPlace: u.inPlace }),
            this.parent,
          );
      }
      for (const read of r.poll.reads)
        if (read.endNs >= read.startNs && read.startNs > 0) this.readSpan(read, 'streamed');
    }
    if (!ls && r.poll.uploads.length === 0 && r.poll.reads.length === 0) return undefined;
    // Streamed reads are transfers from the disk as much as uploads are: the calibration folds both.
    const transfers =
      r.poll.reads.length === 0
        ? r.poll.uploads
        : [...r.poll.uploads, ...r.poll.reads.map((read) => ({ ...read, ok: true }))];
    // A copy: the eval writes this buffer again stepRingSlots steps on.
    return {
      kind: 'step',
      invocation: this.invocation,
      layerStats: ls?.slice(),
      uploads: transfers,
      traceContext: this.parent,
      traced: recording,
    };
  }

  private readSpan(
    read: { layer: number; expert: number; bytes: number; issuedNs: number; startNs: number; endNs: number },
    mode: 'admitted' | 'streamed' | 'prefetch',
  ): void {
    const attributes = expertReadAttributes({
      layer: read.layer,
      expert: read.expert,
      bytes: read.bytes,
      mode,
      queueWaitUs: Math.max(0, (read.startNs - read.issuedNs) / 1e3),
    });
    recordTimedSpan(
      this.owner.tracerOf,
      SpanNames.expertRead,
      this.at(read.startNs),
      this.at(read.endNs),
      attributes,
      this.parent,
    );
  }

  /** The tier's metrics of the request (the engine ends the request span). */
  end(stats: RequestTierStats): void {
    this.owner.record(stats);
  }
}
