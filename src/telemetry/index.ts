/** Library-side tracing and metrics helpers (@opentelemetry/api only; the SDK is set up in otel/). */
export { ClockBridge, clockBridge, msToNs, sampleClockAnchor, type ClockAnchor, type MonotonicNs } from './clock.js';
export { endSpan, inSpan, moetierTracer, recordTimedSpan, startSpan } from './spans.js';
export {
  extractContext,
  formatTraceparent,
  injectContext,
  parseTraceparent,
  type TraceCarrier,
} from './propagation.js';
export { GenAiMetrics, RequestMetrics, type RequestGenAiStats, type RequestTierStats } from './metrics.js';
export {
  AttrNames,
  calibrationAttributes,
  captureContentVariable,
  GenAiNames,
  genAiOperation,
  layerComputeAttributes,
  MetricSpecs,
  rebuildAttributes,
  SpanNames,
  uploadAttributes,
  expertReadAttributes,
  type Phase,
} from '../../otel/semconv.js';
