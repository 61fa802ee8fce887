/**
 * Telemetry for applications that may not have the OpenTelemetry SDK: the SDK is an optional
 * peer dependency of moetier, loaded here, and only when the environment (OTEL_*) or a trace file
 * asks for it. `moetier run` starts telemetry through this; so can an app (`moetier/otel`).
 *
 *   loadTelemetry(options)   plan.ts reads OTEL_* (pure) -> nothing asked: a no-op Telemetry, no import
 *                            else import('./setup.js') (the SDK)    -> startTelemetry(options)
 *                                 missing package -> TelemetryUnavailableError (what to install)
 */
import { TelemetryUnavailableError } from '../src/core/errors.js';
import { telemetryPlan, type TelemetryPlan } from './plan.js';
import { inactiveTelemetry, wantsNoTelemetry, type Telemetry, type TelemetryOptions } from './telemetry.js';

/** The optional peers otel/ imports (package.json peerDependencies). */
export const telemetrySdkPackages = [
  '@opentelemetry/sdk-node',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/core',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/resources',
] as const;

export async function loadTelemetry(options: TelemetryOptions = {}): Promise<Telemetry> {
  const plan = telemetryPlan(process.env);
  if (wantsNoTelemetry(plan, options.traceFile)) return inactiveTelemetry(plan);
  let setup: typeof import('./setup.js');
  try {
    setup = await import('./setup.js');
  } catch (error) {
    const missing = missingPackage(error);
    if (missing === undefined) throw error;
    throw new TelemetryUnavailableError(askedBy(plan, options.traceFile), missing, telemetrySdkPackages, {
      cause: error,
    });
  }
  return setup.startTelemetry(options);
}

/** The @opentelemetry package a failed import could not find, if that is why it failed. */
function missingPackage(error: unknown): string | undefined {
  const e = error as { code?: string; message?: string };
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' && e?.code !== 'MODULE_NOT_FOUND') return undefined;
  return /(@opentelemetry\/[a-z0-9-]+)/.exec(e.message ?? '')?.[1];
}

function askedBy(plan: TelemetryPlan, traceFile: string | undefined): string {
  if (traceFile !== undefined) return `the trace file ${traceFile} (--trace-file)`;
  if (plan.traceExporters.length > 0) return `trace export (${plan.traceExporters.join(', ')}, from OTEL_*)`;
  return 'metric export (from OTEL_*)';
}
