/**
 * Every request is traced, with or without a tier, over real OTLP/HTTP to a receiver on loopback:
 * the request, prefill and decode-step spans with the GenAI conventions' attributes, the gen_ai
 * metrics; no prompt or generated text anywhere (attributes or resource) unless content capture
 * is on; and, with a tier over Q4_0, the rebuild spans of the host copies.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AttrNames, GenAiNames, MetricSpecs, SpanNames } from '../../otel/semconv.js';
import { startTelemetry } from '../../otel/setup.js';
import { openEngine } from '../../src/engine/engine.js';
import { startOtlpReceiver, type OtlpReceiver } from '../otel/otlp-receiver.js';
import { useOtelEnv } from '../otel/env.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-request-otlp-');
const prompt = 'violin orchestra secretword';
let model: string;
let receiver: OtlpReceiver;
let restoreEnv: (() => void) | undefined;

beforeAll(async () => {
  model = await tinyModel(dir, 'q4_0', 21);
});
afterAll(() => cleanup());
afterEach(async () => {
  restoreEnv?.();
  await receiver?.close();
});

async function tracedRun(env: Record<string, string>, engineOptions: Record<string, unknown> = {}) {
  receiver = await startOtlpReceiver();
  restoreEnv = useOtelEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
    ...env,
  });
  const telemetry = startTelemetry();
  const engine = await openEngine({ model, threads: 1, contextTokens: 128, ...engineOptions });
  let text = '';
  try {
    for await (const t of engine.generate(prompt, { maxTokens: 20, stopAtEos: false, temperature: 0.5, seed: 3 }))
      text += t.text;
  } finally {
    await engine.close();
  }
  const report = await telemetry.shutdown();
  expect(report.flushed).toBe(true);
  const spans = await receiver.waitForSpans((s) => s.some((x) => x.name === SpanNames.request));
  return { spans, stats: engine.lastStats!, text, metrics: receiver.metrics, engine };
}

describe('request tracing over OTLP', () => {
  it('without a tier: request, prefill and one decode step per token after the first, with gen_ai attributes and metrics', async () => {
    const { spans, stats, text, metrics } = await tracedRun({});
    const request = spans.find((s) => s.name === SpanNames.request)!;
    const prefill = spans.filter((s) => s.name === SpanNames.prefill);
    const steps = spans.filter((s) => s.name === SpanNames.decodeStep);
    expect(stats.generatedTokens).toBe(20);
    expect(prefill).toHaveLength(1);
    expect(steps).toHaveLength(19);
    expect(spans.filter((s) => s.name === SpanNames.layerCompute)).toEqual([]); // no tier: no layer timing
    expect(request.attributes).toEqual({
      [GenAiNames.operationName]: 'text_completion',
      [GenAiNames.requestModel]: 'moetier-synth-tiny-qwen3moe-q4_0-s21', // the synthetic model's general.name
      [GenAiNames.requestMaxTokens]: 20,
      [GenAiNames.requestTemperature]: 0.5,
      [GenAiNames.requestSeed]: 3,
      [GenAiNames.usageInputTokens]: stats.promptTokens,
      [GenAiNames.usageOutputTokens]: 20,
      [GenAiNames.responseFinishReasons]: ['length'],
    });
    // Steps in order, one per position after the prompt, inside the request and after the prefill.
    expect(steps.map((s) => s.attributes[AttrNames.tokenIndex])).toEqual(
      Array.from({ length: 19 }, (_, i) => stats.promptTokens + i),
    );
    for (const s of [...prefill, ...steps]) {
      expect(s.parentSpanId).toBe(request.spanId);
      expect(s.startNs >= request.startNs && s.endNs <= request.endNs && s.endNs > s.startNs).toBe(true);
    }
    for (let i = 1; i < steps.length; i++) expect(steps[i].startNs >= steps[i - 1].endNs).toBe(true);
    expect(steps[0].startNs >= prefill[0].endNs).toBe(true);

    // No prompt or generated text in any attribute, nor in the resource (the command line is left out).
    const everything = JSON.stringify(spans.map((s) => ({ a: s.attributes, r: s.resource })));
    expect(everything).not.toContain('secretword');
    expect(text.trim().length).toBeGreaterThan(0);
    expect(everything).not.toContain(text.trim().split(' ')[0]);
    expect(Object.keys(request.resource)).not.toContain('process.command_args');
    expect(request.resource['process.pid']).toBe(process.pid);

    const metric = (name: string) => metrics.find((m) => m.name === name)!;
    const model = request.attributes[GenAiNames.requestModel];
    expect(metric(MetricSpecs.timeToFirstToken.name).points).toEqual([
      {
        sum: expect.closeTo(stats.ttftMs / 1000, 6),
        count: 1,
        attributes: { [GenAiNames.operationName]: 'text_completion', [GenAiNames.requestModel]: model },
      },
    ]);
    expect(metric(MetricSpecs.timePerOutputToken.name).points[0]).toMatchObject({
      sum: expect.closeTo(stats.msPerToken / 1000, 6),
      count: 1,
    });
    const usage = Object.fromEntries(
      metric(MetricSpecs.tokenUsage.name).points.map((p) => [p.attributes[GenAiNames.tokenType], p.sum]),
    );
    expect(usage).toEqual({ input: stats.promptTokens, output: 20 });
    expect(metrics.find((m) => m.name === MetricSpecs.decodeHitRatio.name)).toBeUndefined(); // a tier's figure
  });

  it('puts the prompt and the completion in gen_ai.input/output.messages only when content capture is on', async () => {
    const { spans, text } = await tracedRun({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' });
    const request = spans.find((s) => s.name === SpanNames.request)!;
    expect(JSON.parse(request.attributes[GenAiNames.inputMessages] as string)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: prompt }] },
    ]);
    expect(JSON.parse(request.attributes[GenAiNames.outputMessages] as string)).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: text }], finish_reason: 'length' },
    ]);
  });

  it('with a tier over Q4_0: layer computes under the steps, and a rebuild span per host copy a request asked for', async () => {
    const { spans, stats, engine } = await tracedRun({}, { slotsPerLayer: 2, heat: false, lfru: { tickTokens: 1 } });
    const request = spans.find((s) => s.name === SpanNames.request)!;
    expect(request.attributes[AttrNames.backend]).toBe('cpu');
    const stepIds = new Set(
      spans.filter((s) => s.name === SpanNames.decodeStep || s.name === SpanNames.prefill).map((s) => s.spanId),
    );
    const computes = spans.filter((s) => s.name === SpanNames.layerCompute);
    expect(computes.length).toBeGreaterThanOrEqual(4 * stats.generatedTokens);
    expect(computes.every((c) => stepIds.has(c.parentSpanId))).toBe(true);
    // Evictions inside the request get host copies, traced under the request.
    const rebuilds = spans.filter((s) => s.name === SpanNames.rebuild);
    expect(stats.uploads).toBeGreaterThan(0);
    expect(rebuilds.length).toBeGreaterThan(0);
    expect(rebuilds.length).toBeLessThanOrEqual(engine.hostCopies()!.built);
    for (const r of rebuilds) {
      expect(r.parentSpanId).toBe(request.spanId);
      expect(r.attributes).toEqual({
        [AttrNames.layer]: expect.any(Number),
        [AttrNames.expert]: expect.any(Number),
        [AttrNames.rebuildSize]: expect.any(Number),
      });
      expect(r.attributes[AttrNames.rebuildSize] as number).toBeGreaterThan(0);
      expect(r.endNs > r.startNs).toBe(true);
    }
  });
});

// The engine's per-request metrics: a request that fails is not counted as a success.
describe('request metrics', () => {
  it('records nothing for a request without an SDK (no-op) and does not throw', async () => {
    restoreEnv = useOtelEnv({});
    receiver = await startOtlpReceiver();
    const engine = await openEngine({ model, threads: 1, contextTokens: 64 });
    try {
      expect((await collect(engine, 'red', { maxTokens: 3, stopAtEos: false })).length).toBe(3);
    } finally {
      await engine.close();
    }
    expect(receiver.requests).toEqual([]);
  });
});
