/**
 * What telemetry to set up, read from the standard OTEL_* variables (pure: env in, plan out).
 *
 * Off unless asked for, so that the CLI never waits on a collector nobody runs:
 *  - traces go to OTLP when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 *    is set, or OTEL_TRACES_EXPORTER names `otlp` (then the standard default endpoint,
 *    http://localhost:4318, applies); `console` prints them; `none` turns them off;
 *  - metrics follow the traces' OTLP endpoint unless OTEL_METRICS_EXPORTER is `none`, or
 *    are on wherever OTEL_METRICS_EXPORTER is set (the Node SDK reads the metrics variables,
 *    protocol included: http/protobuf by default, http/json, grpc);
 *  - OTEL_SDK_DISABLED=true turns everything off.
 * Traces travel as OTLP/HTTP JSON (`@opentelemetry/exporter-trace-otlp-http`); every
 * OTLP/HTTP receiver (Jaeger on 4318, the Collector) accepts it. `http/protobuf` is answered
 * with JSON and a warning; `grpc` is refused.
 *
 * A dead or silent collector costs a run at most exportTimeoutMs at its end: each OTLP export
 * gives up after it (OTEL_EXPORTER_OTLP_TIMEOUT, else 5 s here, half the standard's 10 s), and so
 * does the shutdown's flush (setup.ts).
 */
import { InvalidOptionError } from '../src/core/errors.js';

export type TraceExporterKind = 'otlp' | 'console';

/** The OTLP export timeout and shutdown bound when OTEL_EXPORTER_OTLP_TIMEOUT is unset (ms). */
export const exportTimeoutMsDefault = 5000;

export interface TelemetryPlan {
  readonly disabled: boolean;
  readonly traceExporters: readonly TraceExporterKind[];
  /** Let the Node SDK build its metric readers from OTEL_METRICS_EXPORTER & co. */
  readonly metricsFromEnv: boolean;
  /** How long one OTLP export (and the shutdown's flush) may wait for the collector, ms. */
  readonly exportTimeoutMs: number;
  /** Things the user should know (printed by the CLI), e.g. a protocol we answer differently. */
  readonly warnings: readonly string[];
}

type Env = Readonly<Record<string, string | undefined>>;

/** The OTLP endpoint variables: each, when set, an absolute http(s) URL (refused by name before the SDK starts). */
const endpointVariables = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
] as const;

function checkEndpoints(env: Env): void {
  for (const variable of endpointVariables) {
    const raw = env[variable]?.trim();
    if (!raw) continue;
    let url: URL | undefined;
    try {
      url = new URL(raw);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
      throw new InvalidOptionError(variable, 'an absolute http:// or https:// URL (e.g. http://localhost:4318)', raw);
    }
  }
}

export function telemetryPlan(env: Env): TelemetryPlan {
  const exportTimeoutMs = exportTimeoutOf(env);
  checkEndpoints(env);
  if (isTrue(env.OTEL_SDK_DISABLED))
    return { disabled: true, traceExporters: [], metricsFromEnv: false, exportTimeoutMs, warnings: [] };
  const warnings: string[] = [];
  const traceExporters = traceExportersOf(env);
  if (traceExporters.includes('otlp')) {
    const protocol = checkProtocol(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL');
    if (protocol === 'http/protobuf') {
      warnings.push(
        `${protocolVariable(env)}=http/protobuf: moetier sends traces as OTLP/HTTP JSON, which OTLP/HTTP receivers accept as well`,
      );
    }
  }
  const metricsNamed = list(env.OTEL_METRICS_EXPORTER);
  const metricsFromEnv =
    metricsNamed.length > 0
      ? !(metricsNamed.length === 1 && metricsNamed[0] === 'none')
      : traceExporters.includes('otlp');
  return { disabled: false, traceExporters, metricsFromEnv, exportTimeoutMs, warnings };
}

/** OTEL_EXPORTER_OTLP_TIMEOUT (ms, > 0), the standard's variable for every signal's export. */
function exportTimeoutOf(env: Env): number {
  const raw = env.OTEL_EXPORTER_OTLP_TIMEOUT?.trim();
  if (!raw) return exportTimeoutMsDefault;
  const ms = Number(raw);
  if (!Number.isFinite(ms) || ms <= 0)
    throw new InvalidOptionError('OTEL_EXPORTER_OTLP_TIMEOUT', 'a number of milliseconds > 0', raw);
  return ms;
}

function traceExportersOf(env: Env): TraceExporterKind[] {
  const named = list(env.OTEL_TRACES_EXPORTER);
  if (named.length === 0)
    return nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
      ? ['otlp']
      : [];
  if (named.includes('none')) {
    if (named.length > 1)
      throw new InvalidOptionError(
        'OTEL_TRACES_EXPORTER',
        '"none" alone, or a list of otlp and console',
        env.OTEL_TRACES_EXPORTER,
      );
    return [];
  }
  for (const name of named) {
    if (name !== 'otlp' && name !== 'console') {
      throw new InvalidOptionError(
        'OTEL_TRACES_EXPORTER',
        'otlp, console or none (comma-separated)',
        env.OTEL_TRACES_EXPORTER,
      );
    }
  }
  return [...new Set(named as TraceExporterKind[])];
}

/** The signal's protocol variable, else the general one; grpc is another transport (port 4317) we do not ship. */
function checkProtocol(env: Env, signalVariable: string): string {
  const variable = nonEmpty(env[signalVariable]) ? signalVariable : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = (env[variable] ?? 'http/json').trim() || 'http/json';
  if (protocol !== 'http/json' && protocol !== 'http/protobuf') {
    throw new InvalidOptionError(
      variable,
      'http/json or http/protobuf (moetier exports OTLP over HTTP, port 4318)',
      protocol,
    );
  }
  return protocol;
}

function protocolVariable(env: Env): string {
  return nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
}

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
}

function nonEmpty(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}

function isTrue(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}
