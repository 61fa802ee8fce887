/**
 * The shapes of the application-side telemetry (what startTelemetry returns), kept apart from
 * setup.ts so that they can be used, and the no-op case built, without loading the SDK.
 */
import type { TelemetryPlan, TraceExporterKind } from './plan.js';

/** What the trace file (--trace-file) got. */
export interface TraceFileReport {
  readonly file: string;
  readonly spans: number;
  readonly droppedSpans: number;
}

export interface TelemetryOptions {
  /** service.name; default OTEL_SERVICE_NAME, else 'moetier'. */
  serviceName?: string;
  /** Also write every span to this file as Chrome/Perfetto trace-event JSON (--trace-file). */
  traceFile?: string;
  /**
   * How long shutdown() waits for the exporters to flush, and each OTLP export for its answer;
   * default OTEL_EXPORTER_OTLP_TIMEOUT, else exportTimeoutMsDefault.
   */
  shutdownTimeoutMs?: number;
}

export interface OtlpReport {
  /** Where the traces went (the base URL when only metrics are exported). */
  readonly endpoint: string;
  /** Span batches the collector refused or did not answer within the timeout. */
  readonly failedBatches: number;
  /** Errors the SDK reported (failed metric exports; span batches it gave up on are counted again here). */
  readonly errors: number;
  readonly lastError?: string;
}

export interface TelemetryShutdownReport {
  readonly traceFile?: TraceFileReport;
  readonly otlp?: OtlpReport;
  /** False when the exporters did not finish flushing within timeoutMs. */
  readonly flushed: boolean;
  /** The bound shutdown waited under (and each OTLP export), ms; absent when nothing was set up. */
  readonly timeoutMs?: number;
}

export interface Telemetry {
  /** False when nothing was configured: the SDK was not loaded and tracing stays a no-op. */
  readonly active: boolean;
  readonly traceExporters: readonly TraceExporterKind[];
  readonly metrics: boolean;
  readonly traceFile?: string;
  readonly warnings: readonly string[];
  /** Writes the trace file and flushes; idempotent. Rejects with TraceFileError if the file cannot be written. */
  shutdown(): Promise<TelemetryShutdownReport>;
}

/** Nothing asked for telemetry (or the plan is off) and there is no trace file. */
export function wantsNoTelemetry(plan: TelemetryPlan, traceFile: string | undefined): boolean {
  return plan.traceExporters.length === 0 && !plan.metricsFromEnv && traceFile === undefined;
}

/** The telemetry of a run that asked for none: no SDK, no-op spans, an empty report. */
export function inactiveTelemetry(plan: TelemetryPlan): Telemetry {
  return {
    traceExporters: plan.traceExporters,
    metrics: plan.metricsFromEnv,
    warnings: plan.warnings,
    active: false,
    shutdown: async () => ({ flushed: true }),
  };
}

/**
 * The one line a run prints about its export when something went wrong (undefined when all was
 * sent): the collector refused or did not answer, or the flush did not end within the bound.
 */
export function exportProblem(report: TelemetryShutdownReport): string | undefined {
  const o = report.otlp;
  const failed = o !== undefined && (o.failedBatches > 0 || o.errors > 0);
  if (report.flushed && !failed) return undefined;
  const parts: string[] = [];
  if (o && o.failedBatches > 0)
    parts.push(`${o.failedBatches} span ${o.failedBatches === 1 ? 'batch' : 'batches'} lost`);
  if (!report.flushed) parts.push(`gave up after ${report.timeoutMs ?? '?'} ms`);
  if (o?.lastError) parts.push(o.lastError);
  return `OpenTelemetry export${o ? ` to ${o.endpoint}` : ''} failed: ${parts.join('; ')}`;
}
