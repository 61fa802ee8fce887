/**
 * Trace context inside actor messages. A message carries a small string map (the carrier,
 * structured-clone safe for postMessage and piscina):
 *
 *   { traceparent: '00-<trace id 32 hex>-<span id 16 hex>-<flags 2 hex>', tracestate?: '...' }
 *
 * With a propagator registered (otel/setup.ts registers W3C trace context and baggage),
 * the API's propagation fills and reads it. Without one (a worker thread has its own,
 * empty, API globals; a library used without the SDK), the span context is written and
 * read directly in the same W3C format, so the parent/child link survives either way.
 */
import {
  context,
  createTraceState,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Context,
  type SpanContext,
} from '@opentelemetry/api';

export type TraceCarrier = Record<string, string>;

const traceparentKey = 'traceparent';
const tracestateKey = 'tracestate';
const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The carrier for `ctx` (the active context by default); empty when there is no valid span. */
export function injectContext(ctx: Context = context.active()): TraceCarrier {
  const carrier: TraceCarrier = {};
  if (propagation.fields().length > 0) {
    propagation.inject(ctx, carrier);
    return carrier;
  }
  const span = trace.getSpanContext(ctx);
  if (span && isSpanContextValid(span)) {
    carrier[traceparentKey] = formatTraceparent(span);
    const state = span.traceState?.serialize();
    if (state) carrier[tracestateKey] = state;
  }
  return carrier;
}

/** A context whose (remote) parent span is the one the carrier names; `base` unchanged if it names none. */
export function extractContext(carrier: TraceCarrier | undefined, base: Context = ROOT_CONTEXT): Context {
  if (!carrier) return base;
  if (propagation.fields().length > 0) {
    const extracted = propagation.extract(base, carrier);
    if (trace.getSpanContext(extracted)) return extracted;
  }
  const span = parseTraceparent(carrier[traceparentKey], carrier[tracestateKey]);
  return span ? trace.setSpanContext(base, span) : base;
}

export function formatTraceparent(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** The span context a W3C traceparent names, or undefined for a malformed or all-zero one. */
export function parseTraceparent(traceparent: string | undefined, tracestate?: string): SpanContext | undefined {
  const match = traceparent === undefined ? null : traceparentPattern.exec(traceparent.trim());
  if (!match) return undefined;
  const span: SpanContext = {
    traceId: match[1],
    spanId: match[2],
    traceFlags: Number.parseInt(match[3], 16),
    isRemote: true,
    ...(tracestate ? { traceState: createTraceState(tracestate) } : {}),
  };
  return isSpanContextValid(span) ? span : undefined;
}
