/**
 * The OpenTelemetry Node SDK for moetier, set up by the application (the CLI), never by
 * the library: code in src/ traces through @opentelemetry/api and sees no-ops until this
 * runs.
 *
 *   startTelemetry({ traceFile })          plan.ts reads OTEL_* -> which exporters
 *        |
 *   NodeSDK: W3C propagator, AsyncLocalStorage context, resource (service.name, host, process
 *            without its command line: a prompt given on it must not reach the collector)
 *        |-- BatchSpanProcessor  -> OTLPTraceExporter (OTLP/HTTP JSON, OTEL_EXPORTER_OTLP_*)
 *        |-- SimpleSpanProcessor -> ConsoleSpanExporter          (OTEL_TRACES_EXPORTER=console)
 *        |-- SimpleSpanProcessor -> TraceFileExporter (--trace-file F, written at shutdown)
 *        '-- metric readers from OTEL_METRICS_EXPORTER & co (when metrics are on)
 *
 *   await telemetry.shutdown()             writes the trace file, flushes the exporters
 *
 * A dead or silent collector costs at most plan.exportTimeoutMs (5 s by default): every OTLP
 * export, of spans and of metrics, gives up after it (retries included), the batch processor's
 * last batches go out at once (in parallel), and shutdown stops waiting then. Failures are
 * counted (span batches by the exporter, the rest through the SDK's global error handler) for the
 * report the CLI prints once.
 */
import { accessSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { context, metrics, propagation, trace, type Exception } from '@opentelemetry/api';
import { ExportResultCode, loggingErrorHandler, setGlobalErrorHandler, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { envDetector, hostDetector, processDetector, type ResourceDetector } from '@opentelemetry/resources';
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
import {
  inactiveTelemetry,
  wantsNoTelemetry,
  type OtlpReport,
  type Telemetry,
  type TelemetryOptions,
  type TelemetryShutdownReport,
} from './telemetry.js';
import { TraceFileExporter, type TraceFileReport } from './trace-file-exporter.js';

export type { OtlpReport, Telemetry, TelemetryOptions, TelemetryShutdownReport } from './telemetry.js';

let running = false;

export function startTelemetry(options: TelemetryOptions = {}): Telemetry {
  const plan = telemetryPlan(process.env);
  const traceFile = options.traceFile === undefined ? undefined : checkTraceFile(options.traceFile);
  if (plan.disabled && traceFile !== undefined) {
    throw new InvalidOptionError(
      'traceFile (--trace-file)',
      'OTEL_SDK_DISABLED unset: it turns all tracing off',
      traceFile,
    );
  }
  if (wantsNoTelemetry(plan, traceFile)) return inactiveTelemetry(plan);
  assert(!running, 'startTelemetry called while telemetry is running: shut it down first');

  const serviceName = options.serviceName ?? (process.env.OTEL_SERVICE_NAME?.trim() || 'moetier');
  const timeoutMs = options.shutdownTimeoutMs ?? plan.exportTimeoutMs;
  const errors = new SdkErrors();
  setGlobalErrorHandler(errors.handler);
  const exporters = buildExporters(plan.traceExporters, traceFile, serviceName, timeoutMs);
  // The metric readers are built from OTEL_* inside the constructor; their exports get the same bound.
  const sdk = withEnvDefaults(
    { OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: String(timeoutMs), OTEL_METRIC_EXPORT_TIMEOUT: String(timeoutMs) },
    () =>
      new NodeSDK({
        serviceName,
        resourceDetectors: [envDetector, hostDetector, processWithoutCommandLine],
        spanProcessors: exporters.processors,
        ...(plan.metricsFromEnv ? {} : { metricReaders: [] }),
        logRecordProcessors: [],
        instrumentations: [],
      }),
  );
  sdk.start();
  running = true;

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
    setGlobalErrorHandler(loggingErrorHandler());
    running = false;
    if (fileError !== undefined) throw fileError;
    const otlp = exporters.otlp?.report(errors) ?? errors.report(plan.metricsFromEnv ? metricsEndpoint() : undefined);
    return {
      flushed,
      timeoutMs,
      ...(otlp ? { otlp } : {}),
      ...(fileReport ? { traceFile: fileReport } : {}),
    };
  };
  return {
    traceExporters: plan.traceExporters,
    metrics: plan.metricsFromEnv,
    warnings: plan.warnings,
    active: true,
    ...(traceFile ? { traceFile } : {}),
    shutdown: () => (report ??= shutdown()),
  };
}

interface Exporters {
  processors: SpanProcessor[];
  otlp?: CountingExporter;
  writeTraceFile(): Promise<TraceFileReport | undefined>;
}

/** OTLP batches (the network is slow and may be down); console and file export span by span (cheap, local). */
function buildExporters(
  kinds: readonly TraceExporterKind[],
  traceFile: string | undefined,
  serviceName: string,
  timeoutMs: number,
): Exporters {
  const processors: SpanProcessor[] = [];
  const otlp = kinds.includes('otlp')
    ? new CountingExporter(new OTLPTraceExporter({ timeoutMillis: timeoutMs }))
    : undefined;
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

/**
 * The process detector's attributes without `process.command_args`: the command line carries
 * the prompt (`moetier run --prompt ...`), and no prompt text leaves the process unasked.
 */
const processWithoutCommandLine: ResourceDetector = {
  detect(config) {
    const detected = processDetector.detect(config);
    const { ['process.command_args']: _args, ...attributes } = detected.attributes ?? {};
    return { ...detected, attributes };
  },
};

/** Runs `build` with these variables set where the user left them unset, then puts the environment back. */
function withEnvDefaults<T>(defaults: Record<string, string>, build: () => T): T {
  const added = Object.keys(defaults).filter((k) => process.env[k] === undefined || process.env[k]!.trim() === '');
  for (const k of added) process.env[k] = defaults[k];
  try {
    return build();
  } finally {
    for (const k of added) delete process.env[k];
  }
}

/** Errors the SDK reports through its global handler (a failed metric export, a span batch the processor gave up on). */
class SdkErrors {
  count = 0;
  last: string | undefined;
  readonly handler = (error: Exception): void => {
    this.count++;
    this.last = typeof error === 'string' ? error : (error.message ?? String(error));
  };

  /** Metrics only (no OTLP traces): a report when something failed. */
  report(endpoint: string | undefined): OtlpReport | undefined {
    if (endpoint === undefined || this.count === 0) return undefined;
    return { endpoint, failedBatches: 0, errors: this.count, ...(this.last ? { lastError: this.last } : {}) };
  }
}

/** The folder must exist and be writable now, not after a long run. */
function checkTraceFile(file: string): string {
  if (typeof file !== 'string' || file.trim() === '')
    throw new InvalidOptionError('traceFile (--trace-file)', 'a file path', file);
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

  report(errors: SdkErrors): OtlpReport {
    const lastError = this.lastError ?? errors.last;
    return {
      endpoint: otlpTracesEndpoint(),
      failedBatches: this.failed,
      errors: errors.count,
      ...(lastError ? { lastError } : {}),
    };
  }
}

/** The URL the OTLP/HTTP exporter posts to, by the standard's rules. */
export function otlpTracesEndpoint(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const signal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (signal) return signal;
  const general = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || 'http://localhost:4318';
  return `${general.replace(/\/+$/, '')}/v1/traces`;
}

/** Where metrics go (for the report only; the SDK reads the variables itself). */
function metricsEndpoint(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return (
    env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT?.trim() ||
    env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() ||
    'http://localhost:4318'
  );
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
