/**
 * Per-request statistics as OpenTelemetry metrics (through @opentelemetry/api only): one
 * histogram observation per request for the rates, timings and token counts, counters for
 * uploads. The field names are those of `moetier run --json`; milliseconds become seconds here
 * (OTel durations are in seconds; the unit is in each instrument's metadata).
 *
 * The metrics API has no proxy provider (unlike traces): a meter taken before the SDK registers
 * stays a no-op. So the instruments are looked up again whenever the global provider changed
 * (an app may start its SDK after opening the engine).
 */
import {
  metrics,
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  type MeterProvider,
} from '@opentelemetry/api';
import { AttrNames, GenAiNames, instrumentationScope, MetricSpecs, type MetricSpec } from '../../otel/semconv.js';

/** The tier's figures for one finished request. */
export interface RequestTierStats {
  /** Hits / routed pairs from the first decode token on; NaN when nothing was decoded. */
  decodeHitRate: number;
  prefillHitRate: number;
  moeMsPerToken: number;
  uploads: number;
  uploadBytes: number;
  /** With prefetch observe / enforce: the request's route outcomes by bytes, and the waits of late prefetches. */
  prefetch?: {
    coveredBytes: number;
    lateBytes: number;
    uncoveredBytes: number;
    wastedBytes: number;
    lateMs: number;
    coverage: number | null;
  };
}

/** Every request's figures (with or without a tier). */
export interface RequestGenAiStats {
  ttftMs: number;
  /** Decode time per token after the first; NaN without a second token. */
  msPerToken: number;
  promptTokens: number;
  generatedTokens: number;
}

/** Instruments of one meter provider, rebuilt when the global provider changes. */
abstract class ProviderInstruments<T> {
  private provider: MeterProvider | undefined;
  private instruments: T | undefined;

  /** Default: moetier's meter on the global provider (a no-op until the SDK is set up). */
  constructor(private readonly fixedMeter?: Meter) {}

  protected abstract build(meter: Meter): T;

  protected get current(): T {
    if (this.fixedMeter) return (this.instruments ??= this.build(this.fixedMeter));
    const provider = metrics.getMeterProvider();
    if (provider !== this.provider || !this.instruments) {
      this.provider = provider;
      this.instruments = this.build(provider.getMeter(instrumentationScope));
    }
    return this.instruments;
  }
}

interface TierInstruments {
  decodeHitRatio: Histogram;
  prefillHitRatio: Histogram;
  moeTimePerToken: Histogram;
  uploads: Counter;
  uploadIo: Counter;
  prefetchIo: Counter;
  prefetchLateTime: Counter;
  prefetchCoverage: Histogram;
}

/** The tier's metrics (moetier.*). */
export class RequestMetrics extends ProviderInstruments<TierInstruments> {
  protected build(meter: Meter): TierInstruments {
    return {
      decodeHitRatio: histogram(meter, MetricSpecs.decodeHitRatio),
      prefillHitRatio: histogram(meter, MetricSpecs.prefillHitRatio),
      moeTimePerToken: histogram(meter, MetricSpecs.moeTimePerToken),
      uploads: counter(meter, MetricSpecs.uploads),
      uploadIo: counter(meter, MetricSpecs.uploadIo),
      prefetchIo: counter(meter, MetricSpecs.prefetchIo),
      prefetchLateTime: counter(meter, MetricSpecs.prefetchLateTime),
      prefetchCoverage: histogram(meter, MetricSpecs.prefetchCoverage),
    };
  }

  /** Records one request. A figure that does not exist for it (NaN: no decode, no prefill) is skipped, not recorded as 0. */
  record(stats: RequestTierStats, attributes: Attributes = {}): void {
    const m = this.current;
    observe(m.decodeHitRatio, stats.decodeHitRate, attributes);
    observe(m.prefillHitRatio, stats.prefillHitRate, attributes);
    observe(m.moeTimePerToken, stats.moeMsPerToken / 1000, attributes);
    if (stats.uploads > 0) m.uploads.add(stats.uploads, attributes);
    if (stats.uploadBytes > 0) m.uploadIo.add(stats.uploadBytes, attributes);
    const p = stats.prefetch;
    if (!p) return;
    const outcomes = { covered: p.coveredBytes, late: p.lateBytes, uncovered: p.uncoveredBytes, wasted: p.wastedBytes };
    for (const [outcome, bytes] of Object.entries(outcomes))
      if (bytes > 0) m.prefetchIo.add(bytes, { ...attributes, [AttrNames.prefetchOutcome]: outcome });
    if (p.lateMs > 0) m.prefetchLateTime.add(p.lateMs / 1000, attributes);
    if (p.coverage !== null) observe(m.prefetchCoverage, p.coverage, attributes);
  }
}

interface GenAiInstruments {
  timeToFirstToken: Histogram;
  timePerOutputToken: Histogram;
  tokenUsage: Histogram;
}

/** Every request's metrics in the GenAI conventions' names (gen_ai.*). */
export class GenAiMetrics extends ProviderInstruments<GenAiInstruments> {
  protected build(meter: Meter): GenAiInstruments {
    return {
      timeToFirstToken: histogram(meter, MetricSpecs.timeToFirstToken),
      timePerOutputToken: histogram(meter, MetricSpecs.timePerOutputToken),
      tokenUsage: histogram(meter, MetricSpecs.tokenUsage),
    };
  }

  /** One request that ended without an error; `attributes` carry gen_ai.operation.name and gen_ai.request.model. */
  record(stats: RequestGenAiStats, attributes: Attributes): void {
    const m = this.current;
    if (stats.generatedTokens > 0) observe(m.timeToFirstToken, stats.ttftMs / 1000, attributes);
    if (stats.generatedTokens > 1) observe(m.timePerOutputToken, stats.msPerToken / 1000, attributes);
    m.tokenUsage.record(stats.promptTokens, { ...attributes, [GenAiNames.tokenType]: 'input' });
    m.tokenUsage.record(stats.generatedTokens, { ...attributes, [GenAiNames.tokenType]: 'output' });
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
