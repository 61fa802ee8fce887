/** The application side of telemetry: what `moetier run` (and an embedding app) calls. */
export { otlpTracesEndpoint, shutdownTimeoutMsDefault, startTelemetry } from './setup.js';
export type { OtlpReport, Telemetry, TelemetryOptions, TelemetryShutdownReport } from './setup.js';
export { telemetryPlan, type TelemetryPlan, type TraceExporterKind } from './plan.js';
export { TraceFileError, TraceFileExporter, traceFileSpansMaxDefault, type TraceFileReport } from './trace-file-exporter.js';
export * from './semconv.js';
