/**
 * `moetier/otel/sdk`: the SDK-bound pieces, for an application that has the OpenTelemetry SDK
 * installed (importing this without it fails at once). Without the SDK use `moetier/otel`.
 */
export { otlpTracesEndpoint, startTelemetry } from './setup.js';
export {
  TraceFileError,
  TraceFileExporter,
  traceFileSpansMaxDefault,
  type TraceFileReport,
} from './trace-file-exporter.js';
