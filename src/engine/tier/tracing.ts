/**
 * The tier's spans and calibration, through @opentelemetry/api only (no-ops until otel/ set up
 * the SDK). Spans are built after each step from the native timing (explicit start and end on
 * the monotonic clock; the fake backend's virtual clock for both compute and uploads):
 *
 *   moetier.request (live, ends in finish)
 *   ├── moetier.layer.compute   per layer and step: layer, phase, token, hits, misses   (layerStats)
 *   ├── moetier.upload          per settled upload: layer, expert, bytes, in place      (tierPoll)
 *   └── moetier.calibration.update  after a step whose samples changed the EWMAs
 *
 * Calibration: each layer's compute window and each upload become samples of the calibration
 * logic (src/actors/calibration); its snapshot is published to the listeners.
 */
import { context, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { calibrate, initialCalibration, type CalibrationConfig } from '../../actors/calibration/logic.js';
import type { CalibrationMessage, CalibrationSnapshot } from '../../actors/calibration/messages.js';
import {
  AttrNames,
  calibrationAttributes,
  layerComputeAttributes,
  moetierTracer,
  recordTimedSpan,
  RequestMetrics,
  SpanNames,
  startSpan,
  endSpan,
  uploadAttributes,
  type RequestTierStats,
} from '../../telemetry/index.js';
import { LAYER_STAT_FIELDS, type StepReport } from './port.js';

export class TierTracing {
  private calibration: CalibrationSnapshot;
  private readonly metrics = new RequestMetrics();
  private readonly listeners = new Set<(s: CalibrationSnapshot) => void>();
  private invocation = 0;

  constructor(
    private readonly config: CalibrationConfig,
    private readonly backend: string,
    /** Default: moetier's tracer from the global provider, looked up per request (the SDK may start after the engine). */
    private readonly tracerOverride?: Tracer,
  ) {
    this.calibration = initialCalibration(config);
  }

  get snapshot(): CalibrationSnapshot {
    return this.calibration;
  }

  /** Calls `listener` with every new calibration snapshot; returns the unsubscribe. */
  onCalibration(listener: (s: CalibrationSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  beginRequest(promptTokens: number): RequestTracing {
    this.invocation++;
    this.calibration = calibrate(this.calibration, { kind: 'invocation', invocation: this.invocation }, this.config);
    const span = startSpan(this.tracerOf, SpanNames.request, { [AttrNames.promptTokens]: promptTokens, [AttrNames.backend]: this.backend });
    const virtual = this.backend === 'fake';
    return new RequestTracing(this, span, trace.setSpan(context.active(), span), this.invocation, virtual ? Number(process.hrtime.bigint()) : undefined);
  }

  /** Feeds samples; when any was accepted, publishes the snapshot and traces the update. */
  feed(messages: CalibrationMessage[], parent: Context, recording: boolean): void {
    const before = this.calibration.samplesAccepted;
    const startNs = recording ? process.hrtime.bigint() : 0n;
    for (const m of messages) this.calibration = calibrate(this.calibration, m, this.config);
    const accepted = this.calibration.samplesAccepted - before;
    if (accepted === 0) return;
    const c = this.calibration;
    if (recording) recordTimedSpan(this.tracerOf, SpanNames.calibrationUpdate, startNs, process.hrtime.bigint(), calibrationAttributes({
      bandwidthBytesPerS: c.bandwidthBytesPerSEwma ?? 0,
      fixedCostMs: c.transferFixedMsEwma ?? 0,
      layerComputeMs: c.computeMsEwma.map((x) => x ?? 0),
      samples: accepted,
    }), parent);
    for (const l of this.listeners) l(c);
  }

  record(stats: RequestTierStats): void {
    this.metrics.record(stats, { [AttrNames.backend]: this.backend });
  }

  get tracerOf(): Tracer {
    return this.tracerOverride ?? moetierTracer();
  }
}

export class RequestTracing {
  constructor(
    private readonly owner: TierTracing,
    private readonly span: Span,
    private readonly parent: Context,
    private readonly invocation: number,
    /** Fake backend: real time at the request's start; its virtual stamps are shifted to start there. */
    private readonly realStartNs: number | undefined,
  ) {}

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

  step(r: StepReport): void {
    const tracer = this.owner.tracerOf;
    // Without an SDK (or when sampled out) the timed spans are skipped, not built and dropped.
    const recording = this.span.isRecording();
    const samples: CalibrationMessage[] = [];
    const ls = r.layerStats;
    if (ls && r.position >= 0) {
      // Read in place: a subarray and an array per layer and step cost more than the rest of the step.
      for (let l = 0, at = 0; at < ls.length; l++, at += LAYER_STAT_FIELDS) {
        const startNs = Math.round(ls[at]);
        const endNs = Math.round(ls[at + 1]);
        if (!(endNs >= startNs && startNs > 0)) continue;
        const hits = Math.round(ls[at + 4]);
        const misses = Math.round(ls[at + 5]);
        if (recording) recordTimedSpan(tracer, SpanNames.layerCompute, this.at(startNs), this.at(endNs), layerComputeAttributes({ layer: l, phase: r.phase, tokenIndex: r.position, hits, misses }), this.parent);
        samples.push({ kind: 'compute', invocation: this.invocation, layer: l, startNs, endNs });
      }
    }
    for (const u of r.poll.uploads) {
      if (recording && u.endNs >= u.startNs && u.startNs > 0) {
        recordTimedSpan(tracer, SpanNames.upload, this.at(u.startNs), this.at(u.endNs), uploadAttributes({ layer: u.layer, expert: u.expert, bytes: u.bytes, inPlace: u.inPlace }), this.parent);
      }
      if (u.ok) samples.push({ kind: 'transfer', invocation: this.invocation, layer: u.layer, bytes: u.bytes, issuedNs: u.issuedNs, startNs: u.startNs, endNs: u.endNs });
    }
    if (samples.length > 0) this.owner.feed(samples, this.parent, recording);
  }

  end(stats: RequestTierStats, error?: unknown): void {
    this.owner.record(stats);
    endSpan(this.span, error);
  }
}
