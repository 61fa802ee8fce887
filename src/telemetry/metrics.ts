/**
 * Per-request statistics as OpenTelemetry metrics (through @opentelemetry/api only): one
 * histogram observation per request for the rates and timings, counters for uploads.
 * The field names are those of `moetier run --json`; milliseconds become seconds here
 * (OTel durations are in seconds; the unit is in each instrument's metadata).
 */
import { metrics, type Attributes, type Counter, type Histogram, type Meter } from '@opentelemetry/api';
import { instrumentationScope, MetricSpecs, type MetricSpec } from '../../otel/semconv.js';

/** The tier's figures for one finished request. */
export interface RequestTierStats {
  /** Hits / routed pairs from the first decode token on; NaN when nothing was decoded. */
  decodeHitRate: number;
  prefillHitRate: number;
  moeMsPerToken: number;
  msPerToken: number;
  ttftMs: number;
  uploads: number;
  uploadBytes: number;
}

export class RequestMetrics {
  private readonly decodeHitRatio: Histogram;
  private readonly prefillHitRatio: Histogram;
  private readonly moeTimePerToken: Histogram;
  private readonly timePerToken: Histogram;
  private readonly timeToFirstToken: Histogram;
  private readonly uploads: Counter;
  private readonly uploadIo: Counter;

  /** The meter defaults to moetier's on the global provider (no-op until the SDK is set up). */
  constructor(meter: Meter = metrics.getMeter(instrumentationScope)) {
    this.decodeHitRatio = histogram(meter, MetricSpecs.decodeHitRatio);
    this.prefillHitRatio = histogram(meter, MetricSpecs.prefillHitRatio);
    this.moeTimePerToken = histogram(meter, MetricSpecs.moeTimePerToken);
    this.timePerToken = histogram(meter, MetricSpecs.timePerToken);
    this.timeToFirstToken = histogram(meter, MetricSpecs.timeToFirstToken);
    this.uploads = counter(meter, MetricSpecs.uploads);
    this.uploadIo = counter(meter, MetricSpecs.uploadIo);
  }

  /** Records one request. A figure that does not exist for it (NaN: no decode, no prefill) is skipped, not recorded as 0. */
  record(stats: RequestTierStats, attributes: Attributes = {}): void {
    observe(this.decodeHitRatio, stats.decodeHitRate, attributes);
    observe(this.prefillHitRatio, stats.prefillHitRate, attributes);
    observe(this.moeTimePerToken, stats.moeMsPerToken / 1000, attributes);
    observe(this.timePerToken, stats.msPerToken / 1000, attributes);
    observe(this.timeToFirstToken, stats.ttftMs / 1000, attributes);
    if (stats.uploads > 0) this.uploads.add(stats.uploads, attributes);
    if (stats.uploadBytes > 0) this.uploadIo.add(stats.uploadBytes, attributes);
  }
}

function histogram(meter: Meter, spec: MetricSpec): Histogram {
  return meter.createHistogram(spec.name, {
    unit: spec.unit,
    description: spec.description,
    ...(spec.buckets ? { advice: { explicitBucketBoundaries: [...spec.buckets] } } : {}),
  });
}

function counter(meter: Meter, spec: MetricSpec): Counter {
  return meter.createCounter(spec.name, { unit: spec.unit, description: spec.description });
}

function observe(instrument: Histogram, value: number, attributes: Attributes): void {
  if (Number.isFinite(value) && value >= 0) instrument.record(value, attributes);
}
