/**
 * The OpenTelemetry Node SDK for moetier, set up by the application (the CLI), never by
 * the library: code in src/ traces through @opentelemetry/api and sees no-ops until this
 * runs.
 *
 *   startTelemetry({ traceFile })          plan.ts reads OTEL_* -> which exporters
 *        |
 *   NodeSDK: W3C propagator, AsyncLocalStorage context, resource (service.name, host, process)
 *        |-- BatchSpanProcessor  -> OTLPTraceExporter (OTLP/HTTP JSON, OTEL_EXPORTER_OTLP_*)
 *        |-- SimpleSpanProcessor -> ConsoleSpanExporter          (OTEL_TRACES_EXPORTER=console)
 *        |-- SimpleSpanProcessor -> TraceFileExporter (--trace-file F, written at shutdown)
 *        '-- metric readers from OTEL_METRICS_EXPORTER & co (when metrics are on)
 *
 *   await telemetry.shutdown()             writes the trace file, flushes the exporters
 *                                          (bounded: a dead collector cannot hold the CLI)
 */
import { accessSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { assert } from '../src/core/assert.js';
import { InvalidOptionError } from '../src/core/errors.js';
import { telemetryPlan, type TraceExporterKind } from './plan.js';
import { TraceFileExporter, type TraceFileReport } from './trace-file-exporter.js';

export interface TelemetryOptions {
  /** service.name; default OTEL_SERVICE_NAME, else 'moetier'. */
  serviceName?: string;
  /** Also write every span to this file as Chrome/Perfetto trace-event JSON (--trace-file). */
  traceFile?: string;
  /** How long shutdown() waits for the exporters to flush. */
  shutdownTimeoutMs?: number;
}

export interface OtlpReport {
  /** Where the traces went. */
  readonly endpoint: string;
  readonly failedBatches: number;
  readonly lastError?: string;
}

export interface TelemetryShutdownReport {
  readonly traceFile?: TraceFileReport;
  readonly otlp?: OtlpReport;
  /** False when the exporters did not finish flushing within shutdownTimeoutMs. */
  readonly flushed: boolean;
}

export interface Telemetry {
  /** False when nothing was configured: the SDK was not started and tracing stays a no-op. */
  readonly active: boolean;
  readonly traceExporters: readonly TraceExporterKind[];
  readonly metrics: boolean;
  readonly traceFile?: string;
  readonly warnings: readonly string[];
  /** Writes the trace file and flushes; idempotent. Rejects with TraceFileError if the file cannot be written. */
  shutdown(): Promise<TelemetryShutdownReport>;
}

export const shutdownTimeoutMsDefault = 5000;

let running = false;

export function startTelemetry(options: TelemetryOptions = {}): Telemetry {
  const plan = telemetryPlan(process.env);
  const traceFile = options.traceFile === undefined ? undefined : checkTraceFile(options.traceFile);
  if (plan.disabled && traceFile !== undefined) {
    throw new InvalidOptionError('traceFile (--trace-file)', 'OTEL_SDK_DISABLED unset: it turns all tracing off', traceFile);
  }
  const base = { traceExporters: plan.traceExporters, metrics: plan.metricsFromEnv, warnings: plan.warnings };
  if (plan.traceExporters.length === 0 && !plan.metricsFromEnv && traceFile === undefined) {
    return { ...base, active: false, shutdown: async () => ({ flushed: true }) };
  }
  assert(!running, 'startTelemetry called while telemetry is running: shut it down first');

  const serviceName = options.serviceName ?? (process.env.OTEL_SERVICE_NAME?.trim() || 'moetier');
  const exporters = buildExporters(plan.traceExporters, traceFile, serviceName);
  const sdk = new NodeSDK({
    serviceName,
    spanProcessors: exporters.processors,
    ...(plan.metricsFromEnv ? {} : { metricReaders: [] }),
    logRecordProcessors: [],
    instrumentations: [],
  });
  sdk.start();
  running = true;

  const timeoutMs = options.shutdownTimeoutMs ?? shutdownTimeoutMsDefault;
  let report: Promise<TelemetryShutdownReport> | undefined;
  const shutdown = async (): Promise<TelemetryShutdownReport> => {
    let fileReport: TraceFileReport | undefined;
    let fileError: unknown;
    try {
      fileReport = await exporters.writeTraceFile(); // first and unbounded: local, and asked for
    } catch (error) {
      fileError = error;
    }
    const flushed = await settlesWithin(sdk.shutdown(), timeoutMs);
    disableGlobals();
    running = false;
    if (fileError !== undefined) throw fileError;
    return {
      flushed,
      ...(exporters.otlp ? { otlp: exporters.otlp.report() } : {}),
      ...(fileReport ? { traceFile: fileReport } : {}),
    };
  };
  return { ...base, active: true, ...(traceFile ? { traceFile } : {}), shutdown: () => (report ??= shutdown()) };
}

interface Exporters {
  processors: SpanProcessor[];
  otlp?: CountingExporter;
  writeTraceFile(): Promise<TraceFileReport | undefined>;
}

/** OTLP batches (the network is slow and may be down); console and file export span by span (cheap, local). */
function buildExporters(kinds: readonly TraceExporterKind[], traceFile: string | undefined, serviceName: string): Exporters {
  const processors: SpanProcessor[] = [];
  const otlp = kinds.includes('otlp') ? new CountingExporter(new OTLPTraceExporter()) : undefined;
  if (otlp) processors.push(new BatchSpanProcessor(otlp));
  if (kinds.includes('console')) processors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));
  if (traceFile === undefined) return { processors, ...(otlp ? { otlp } : {}), writeTraceFile: async () => undefined };
  const file = new TraceFileExporter(traceFile, serviceName);
  const fileProcessor = new SimpleSpanProcessor(file);
  processors.push(fileProcessor);
  const writeTraceFile = async () => {
    await fileProcessor.forceFlush(); // spans whose export waited on the resource's async attributes
    return file.write();
  };
  return { processors, ...(otlp ? { otlp } : {}), writeTraceFile };
}

/** The folder must exist and be writable now, not after a long run. */
function checkTraceFile(file: string): string {
  if (typeof file !== 'string' || file.trim() === '') throw new InvalidOptionError('traceFile (--trace-file)', 'a file path', file);
  try {
    accessSync(path.dirname(path.resolve(file)), fsConstants.W_OK);
  } catch {
    throw new InvalidOptionError('traceFile (--trace-file)', 'a path in an existing, writable folder', file);
  }
  return file;
}

/** Counts the batches the collector refused or never answered, so the CLI can say so. */
class CountingExporter implements SpanExporter {
  private failed = 0;
  private lastError: string | undefined;

  constructor(private readonly inner: OTLPTraceExporter) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) {
        this.failed++;
        this.lastError = result.error?.message ?? 'export failed';
      }
      done(result);
    });
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  report(): OtlpReport {
    return { endpoint: otlpTracesEndpoint(), failedBatches: this.failed, ...(this.lastError ? { lastError: this.lastError } : {}) };
  }
}

/** The URL the OTLP/HTTP exporter posts to, by the standard's rules. */
export function otlpTracesEndpoint(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const signal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (signal) return signal;
  const general = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || 'http://localhost:4318';
  return `${general.replace(/\/+$/, '')}/v1/traces`;
}

function settlesWithin(work: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    timer.unref();
    work.then(
      () => (clearTimeout(timer), resolve(true)),
      () => (clearTimeout(timer), resolve(false)),
    );
  });
}

/** Unregisters the SDK from the API's globals, so a later startTelemetry (tests, long-lived hosts) can register again. */
function disableGlobals(): void {
  trace.disable();
  metrics.disable();
  propagation.disable();
  context.disable();
}
