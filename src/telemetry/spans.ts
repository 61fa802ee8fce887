/**
 * Spans through @opentelemetry/api only. Two ways to time one:
 *  - after the fact, from a backend's timing events (layer compute, uploads, rebuilds):
 *    `recordTimedSpan` with monotonic start and end nanoseconds;
 *  - live, around JS work (request, prefill, decode step): `inSpan`, or `startSpan` +
 *    `endSpan` in a `finally` where the work is a generator.
 * Both time on the same clock bridge, so live parents and converted children line up.
 * Without a registered SDK every call is a no-op of the API (non-recording spans).
 */
import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { instrumentationScope } from '../../otel/semconv.js';
import { assert } from '../core/assert.js';
import { clockBridge, type ClockBridge, type MonotonicNs } from './clock.js';

/** moetier's tracer from the global provider (a no-op tracer until otel/setup.ts registers the SDK). */
export function moetierTracer(): Tracer {
  return trace.getTracer(instrumentationScope);
}

/**
 * A span with explicit monotonic start and end times, ended at once. Returns its span
 * context, so later timed spans can name it as their parent.
 */
export function recordTimedSpan(
  tracer: Tracer,
  name: string,
  startNs: MonotonicNs,
  endNs: MonotonicNs,
  attributes: Attributes,
  parentContext: Context = context.active(),
  clock: ClockBridge = clockBridge(),
): SpanContext {
  assert(BigInt(endNs) >= BigInt(startNs), `${name}: end ${endNs} ns before start ${startNs} ns`);
  const span = tracer.startSpan(
    name,
    { kind: SpanKind.INTERNAL, startTime: clock.toHrTime(startNs), attributes },
    parentContext,
  );
  span.end(clock.toHrTime(endNs));
  return span.spanContext();
}

/** Starts a span now (on the bridge's clock); the caller ends it with `endSpan` in a `finally`. */
export function startSpan(
  tracer: Tracer,
  name: string,
  attributes: Attributes = {},
  parentContext: Context = context.active(),
  clock: ClockBridge = clockBridge(),
): Span {
  return tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: clock.nowHrTime(), attributes }, parentContext);
}

/** Ends a span now; an error marks it failed (and is recorded as an exception event). */
export function endSpan(span: Span, error?: unknown, clock: ClockBridge = clockBridge()): void {
  if (error !== undefined) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  }
  span.end(clock.nowHrTime());
}

/** Runs `work` inside a new active span (children started in it are its children); ends it in `finally`. */
export async function inSpan<T>(
  tracer: Tracer,
  name: string,
  attributes: Attributes,
  work: (span: Span) => Promise<T>,
  parentContext: Context = context.active(),
): Promise<T> {
  const span = startSpan(tracer, name, attributes, parentContext);
  let failure: { error: unknown } | undefined;
  try {
    return await context.with(trace.setSpan(parentContext, span), () => work(span));
  } catch (error) {
    failure = { error };
    throw error;
  } finally {
    endSpan(span, failure ? (failure.error ?? 'thrown undefined') : undefined);
  }
}
