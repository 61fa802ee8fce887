/**
 * Trace context through an actor message's carrier: with the W3C propagator the SDK
 * registers, and without any propagator (a worker's fresh API globals).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTraceState, propagation, ROOT_CONTEXT, trace, TraceFlags, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { startTelemetry } from '../../otel/setup.js';
import { extractContext, injectContext, parseTraceparent } from '../../src/telemetry/propagation.js';
import { recordTimedSpan } from '../../src/telemetry/spans.js';
import { useOtelEnv } from './env.js';

function localTracer(): { tracer: Tracer; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { tracer: provider.getTracer('test'), exporter };
}

/** Parent span -> carrier -> (structured clone, as postMessage does) -> child span. */
function sendThroughMessage(tracer: Tracer) {
  const parent = tracer.startSpan('sender');
  const carrier = injectContext(trace.setSpan(ROOT_CONTEXT, parent));
  const received = structuredClone({ kind: 'upload', layer: 3, traceCarrier: carrier });
  const child = tracer.startSpan('receiver', {}, extractContext(received.traceCarrier));
  child.end();
  parent.end();
  return { parent, child, carrier };
}

describe('trace context in actor messages', () => {
  afterEach(() => propagation.disable());

  it('links child to parent without a registered propagator (direct traceparent)', () => {
    expect(propagation.fields()).toEqual([]);
    const { tracer, exporter } = localTracer();
    const { parent, child, carrier } = sendThroughMessage(tracer);
    expect(carrier.traceparent).toBe(`00-${parent.spanContext().traceId}-${parent.spanContext().spanId}-01`);
    expect(child.spanContext().traceId).toBe(parent.spanContext().traceId);
    const finished = exporter.getFinishedSpans().find((s) => s.name === 'receiver')!;
    expect(finished.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    expect(finished.parentSpanContext?.isRemote).toBe(true);
  });

  it('links child to parent through the W3C propagator, trace state included', () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const { tracer, exporter } = localTracer();
    const parent = tracer.startSpan('sender');
    const withState = trace.setSpanContext(ROOT_CONTEXT, {
      ...parent.spanContext(),
      traceState: createTraceState('moetier=l3'),
    });
    const carrier = injectContext(withState);
    expect(carrier.tracestate).toBe('moetier=l3');
    const child = tracer.startSpan('receiver', {}, extractContext(structuredClone(carrier)));
    child.end();
    const finished = exporter.getFinishedSpans()[0];
    expect(finished.spanContext().traceId).toBe(parent.spanContext().traceId);
    expect(finished.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    expect(finished.spanContext().traceState?.get('moetier')).toBe('l3');
  });

  it('parents timed spans built from a carrier (the actor side of a layer compute)', () => {
    const { tracer, exporter } = localTracer();
    const parent = tracer.startSpan('decode step');
    const carrier = injectContext(trace.setSpan(ROOT_CONTEXT, parent));
    const t = process.hrtime.bigint();
    const sc = recordTimedSpan(tracer, 'moetier.layer.compute', t - 1000n, t, {}, extractContext(carrier));
    expect(sc.traceId).toBe(parent.spanContext().traceId);
    expect(exporter.getFinishedSpans()[0].parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
  });

  it('uses the propagator the SDK setup registers', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'moetier-prop-'));
    const restoreEnv = useOtelEnv({});
    const telemetry = startTelemetry({ traceFile: path.join(dir, 't.json') });
    try {
      expect(propagation.fields()).toContain('traceparent');
      const { tracer } = localTracer();
      const { parent, child } = sendThroughMessage(tracer);
      expect(child.spanContext().traceId).toBe(parent.spanContext().traceId);
    } finally {
      await telemetry.shutdown();
      restoreEnv();
    }
    expect(propagation.fields()).toEqual([]);
  });

  it('gives an empty carrier without a span, and ignores malformed or all-zero ones', () => {
    expect(injectContext(ROOT_CONTEXT)).toEqual({});
    expect(extractContext(undefined)).toBe(ROOT_CONTEXT);
    expect(extractContext({ traceparent: 'garbage' })).toBe(ROOT_CONTEXT);
    expect(extractContext({ traceparent: `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01` })).toBe(ROOT_CONTEXT);
    const sc = parseTraceparent(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`);
    expect(sc).toMatchObject({
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
      traceFlags: TraceFlags.NONE,
      isRemote: true,
    });
  });
});
