/**
 * Real OTLP/HTTP exports to a receiver on 127.0.0.1: the SDK set up by otel/setup.ts from
 * OTEL_* variables, spans built after the fact from monotonic timestamps, metrics from a
 * request's statistics. The overlap check is the shape the tier reuses with engine spans.
 */
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { trace } from '@opentelemetry/api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MetricSpecs, SpanNames, AttrNames, layerComputeAttributes, uploadAttributes } from '../../otel/semconv.js';
import { startTelemetry } from '../../otel/setup.js';
import { GenAiMetrics, RequestMetrics } from '../../src/telemetry/metrics.js';
import { inSpan, moetierTracer, recordTimedSpan } from '../../src/telemetry/spans.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
import { useOtelEnv } from './env.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function overlaps(a: ReceivedSpan, b: ReceivedSpan): boolean {
  return a.startNs < b.endNs && b.startNs < a.endNs;
}

describe('OTLP/HTTP export over loopback', () => {
  let receiver: OtlpReceiver;
  let restoreEnv: () => void;

  beforeEach(async () => {
    receiver = await startOtlpReceiver();
    restoreEnv = useOtelEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: 'moetier-test',
      OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
    });
  });

  afterEach(async () => {
    restoreEnv();
    await receiver.close();
  });

  it('receives an upload for layer L that overlaps the compute of layer L+1', async () => {
    const telemetry = startTelemetry();
    expect(telemetry).toMatchObject({ active: true, traceExporters: ['otlp'], metrics: true, warnings: [] });
    const tracer = moetierTracer();
    const layer = 5;
    // Timeline in us after t0, as a backend's timing events would report it:
    //   compute L   [  0, 200]   compute L+1 [200, 500]
    //   upload  L         [120 ........ 380]            (L's swap, in flight while L+1 computes)
    await inSpan(tracer, SpanNames.request, {}, async () => {
      await sleep(2);
      const t0 = process.hrtime.bigint() - 1_000_000n; // 1 ms ago: inside the request span
      const us = (n: number) => t0 + BigInt(n) * 1000n;
      recordTimedSpan(
        tracer,
        SpanNames.layerCompute,
        us(0),
        us(200),
        layerComputeAttributes({ layer, phase: 'decode', tokenIndex: 42, hits: 6, misses: 2 }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.layerCompute,
        us(200),
        us(500),
        layerComputeAttributes({ layer: layer + 1, phase: 'decode', tokenIndex: 42, hits: 7, misses: 1 }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.upload,
        us(120),
        us(380),
        uploadAttributes({ layer, expert: 17, bytes: 3_407_872, inPlace: true }),
      );
    });
    new RequestMetrics().record({
      decodeHitRate: 0.62,
      prefillHitRate: 0.41,
      moeMsPerToken: 7.5,
      uploads: 3,
      uploadBytes: 10_223_616,
    });
    new GenAiMetrics().record(
      { ttftMs: 350, msPerToken: 12, promptTokens: 11, generatedTokens: 5 },
      { 'gen_ai.request.model': 'm' },
    );

    const report = await telemetry.shutdown();
    expect(report.flushed).toBe(true);
    expect(report.otlp).toEqual({ endpoint: `${receiver.url}/v1/traces`, failedBatches: 0, errors: 0 });
    expect(receiver.rejected).toBe(0);

    const spans = await receiver.waitForSpans((s) => s.length >= 4);
    const request = spans.find((s) => s.name === SpanNames.request)!;
    const computeNext = spans.find(
      (s) => s.name === SpanNames.layerCompute && s.attributes[AttrNames.layer] === layer + 1,
    )!;
    const computeThis = spans.find(
      (s) => s.name === SpanNames.layerCompute && s.attributes[AttrNames.layer] === layer,
    )!;
    const upload = spans.find((s) => s.name === SpanNames.upload)!;
    expect(request.resource['service.name']).toBe('moetier-test');
    expect(upload.scope).toBe('moetier');
    expect(computeNext.attributes).toEqual({
      [AttrNames.layer]: layer + 1,
      [AttrNames.phase]: 'decode',
      [AttrNames.tokenIndex]: 42,
      [AttrNames.expertHits]: 7,
      [AttrNames.expertMisses]: 1,
    });
    expect(upload.attributes).toEqual({
      [AttrNames.layer]: layer,
      [AttrNames.expert]: 17,
      [AttrNames.uploadSize]: 3_407_872,
      [AttrNames.uploadInPlace]: true,
    });

    // The overlap the tier must show, and exact nanoseconds through the clock bridge and the wire.
    expect(overlaps(upload, computeNext)).toBe(true);
    expect(upload.startNs > computeThis.startNs && upload.startNs < computeThis.endNs).toBe(true);
    expect(computeNext.endNs - computeNext.startNs).toBe(300_000n);
    expect(upload.startNs - computeNext.startNs).toBe(-80_000n);
    expect(upload.endNs - computeNext.startNs).toBe(180_000n);

    // One trace; the timed spans are children of the live request span and lie inside it.
    for (const child of [computeThis, computeNext, upload]) {
      expect(child.traceId).toBe(request.traceId);
      expect(child.parentSpanId).toBe(request.spanId);
      expect(child.startNs >= request.startNs && child.endNs <= request.endNs).toBe(true);
    }

    const metric = (name: string) => receiver.metrics.find((m) => m.name === name);
    expect(metric(MetricSpecs.decodeHitRatio.name)?.points[0]).toMatchObject({ sum: 0.62, count: 1 });
    expect(metric(MetricSpecs.timeToFirstToken.name)).toMatchObject({
      unit: 's',
      points: [{ sum: 0.35, count: 1, attributes: { 'gen_ai.request.model': 'm' } }],
    });
    expect(metric(MetricSpecs.timePerOutputToken.name)).toMatchObject({
      unit: 's',
      points: [{ sum: 0.012, count: 1 }],
    });
    const usage = metric(MetricSpecs.tokenUsage.name)!;
    expect(usage.unit).toBe('{token}');
    expect(Object.fromEntries(usage.points.map((p) => [p.attributes['gen_ai.token.type'], p.sum]))).toEqual({
      input: 11,
      output: 5,
    });
    expect(metric(MetricSpecs.uploadIo.name)).toMatchObject({ unit: 'By', points: [{ sum: 10_223_616 }] });
    expect(metric(MetricSpecs.uploads.name)?.points[0].sum).toBe(3);
  });

  it('is off without an endpoint or exporter: no SDK, non-recording spans', async () => {
    restoreEnv();
    restoreEnv = useOtelEnv({});
    const telemetry = startTelemetry();
    expect(telemetry.active).toBe(false);
    const span = moetierTracer().startSpan(SpanNames.request);
    expect(span.isRecording()).toBe(false);
    span.end();
    expect(await telemetry.shutdown()).toEqual({ flushed: true });
    expect(receiver.requests).toEqual([]);
  });

  it('does not hold the shutdown on a dead collector, and still writes the trace file', async () => {
    const deadUrl = await closedPortUrl();
    restoreEnv();
    restoreEnv = useOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: deadUrl, OTEL_METRICS_EXPORTER: 'none' });
    const traceFile = path.join(mkdtempSync(path.join(tmpdir(), 'moetier-otel-')), 'dead.json');
    const telemetry = startTelemetry({ traceFile, shutdownTimeoutMs: 1000 });
    expect(telemetry.metrics).toBe(false);
    const t = process.hrtime.bigint();
    recordTimedSpan(moetierTracer(), SpanNames.rebuild, t - 50_000n, t, {});
    const startedMs = Date.now();
    const report = await telemetry.shutdown();
    expect(Date.now() - startedMs).toBeLessThan(2500);
    expect(report.flushed === false || (report.otlp?.failedBatches ?? 0) > 0).toBe(true);
    expect(report.traceFile).toEqual({ file: traceFile, spans: 1, droppedSpans: 0 });
    const events = JSON.parse(readFileSync(traceFile, 'utf8')).traceEvents;
    expect(events.filter((e: { ph: string }) => e.ph === 'X').map((e: { name: string }) => e.name)).toEqual([
      SpanNames.rebuild,
    ]);
    expect(trace.getTracer('x').startSpan('after shutdown').isRecording()).toBe(false);
  });
});

/** A loopback URL where nothing listens (a port just released). */
async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}`;
}
