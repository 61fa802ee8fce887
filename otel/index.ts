/**
 * `moetier/otel`, the application side of telemetry: what `moetier run` (and an embedding app)
 * calls. Loads without the OpenTelemetry SDK; `loadTelemetry` imports it when asked for.
 */
export { loadTelemetry, telemetrySdkPackages } from './load.js';
export { exportTimeoutMsDefault } from './plan.js';
export {
  exportProblem,
  type OtlpReport,
  type Telemetry,
  type TelemetryOptions,
  type TelemetryShutdownReport,
  type TraceFileReport,
} from './telemetry.js';
export { telemetryPlan, type TelemetryPlan, type TraceExporterKind } from './plan.js';
export * from './semconv.js';
