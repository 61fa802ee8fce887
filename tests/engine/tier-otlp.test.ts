/**
 * A real request on the fake backend, traced over loopback OTLP: the tier's spans arrive at a
 * real receiver, and an upload issued after layer L overlaps the compute of layer L+1.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCommand } from '../../src/cli/commands/run.js';
import { AttrNames, SpanNames } from '../../otel/semconv.js';
import { startTelemetry } from '../../otel/setup.js';
import { openEngine } from '../../src/engine/engine.js';
import { loadNative } from '../../src/native/binding.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../otel/otlp-receiver.js';
import { useOtelEnv } from '../otel/env.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-otlp-');
let receiver: OtlpReceiver;
let restoreEnv: () => void;
let model: string;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 13);
  receiver = await startOtlpReceiver();
  restoreEnv = useOtelEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'moetier-tier-test',
    OTEL_METRICS_EXPORTER: 'none',
  });
});
afterAll(async () => {
  restoreEnv();
  await receiver.close();
  cleanup();
});

const overlaps = (a: ReceivedSpan, b: ReceivedSpan): boolean => a.startNs < b.endNs && b.startNs < a.endNs;
const num = (s: ReceivedSpan, key: string): number => s.attributes[key] as number;

describe('tier tracing over OTLP (native tier, fake backend)', () => {
  it('exports layer, upload and calibration spans; an upload for layer L overlaps the compute of layer L+1', async () => {
    const traceFile = path.join(dir, 'trace.json');
    const telemetry = startTelemetry({ traceFile });
    // The fake's clock in proportion: a tiny model's decode layer streams ~14 kB of expert weights
    // (its experts ~6.5 kB each), so compute at 200 MB/s makes a layer last ~70 us and a swap (5 us
    // fixed cost, then its bytes at 25 GB/s) move while the next layer computes, as a real model's
    // would on a GPU. With the preset's 330 us fixed cost, a tiny layer ends before the bytes start.
    const fake = { transferFixedUs: 5, computeBytesPerS: 2e8 };
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 128,
      backend: 'fake',
      fake,
      slotsPerLayer: 2,
      heat: false,
      lfru: { tickTokens: 1 },
    });
    try {
      await collect(engine, 'red green blue red green blue yellow', { maxTokens: 24, stopAtEos: false });
      expect(engine.lastStats!.uploads).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
    const report = await telemetry.shutdown();
    expect(report.flushed).toBe(true);
    const spans = await receiver.waitForSpans((s) => s.some((x) => x.name === SpanNames.request));
    const computes = spans.filter((s) => s.name === SpanNames.layerCompute);
    const uploads = spans.filter((s) => s.name === SpanNames.upload);
    const request = spans.find((s) => s.name === SpanNames.request)!;
    expect(computes.length).toBeGreaterThanOrEqual(4 * 20); // 4 layers x (prefill + decode steps), first stamps at 0 skipped
    expect(uploads.length).toBe(engine.lastStats!.uploads! + engine.lastStats!.failedUploads!);
    const calibrations = spans.filter((s) => s.name === SpanNames.calibrationUpdate);
    expect(calibrations.length).toBeGreaterThan(0);
    // The calibration actor's spans: the request's context travelled in its messages.
    for (const s of [...uploads, ...calibrations]) {
      expect(s.traceId).toBe(request.traceId);
      expect(s.parentSpanId).toBe(request.spanId);
    }
    // Layer computes hang under the engine's prefill and decode-step spans, the step of their token.
    const steps = new Map(
      spans.filter((s) => s.name === SpanNames.prefill || s.name === SpanNames.decodeStep).map((s) => [s.spanId, s]),
    );
    expect(spans.filter((s) => s.name === SpanNames.decodeStep)).toHaveLength(engine.lastStats!.generatedTokens - 1);
    for (const c of computes) {
      const step = steps.get(c.parentSpanId)!;
      expect(step.parentSpanId).toBe(request.spanId);
      if (c.attributes[AttrNames.phase] === 'prefill') expect(step.name).toBe(SpanNames.prefill);
      else
        expect([step.name, step.attributes[AttrNames.tokenIndex]]).toEqual([
          SpanNames.decodeStep,
          c.attributes[AttrNames.tokenIndex],
        ]);
    }
    const decode = computes.filter((c) => c.attributes[AttrNames.phase] === 'decode');
    expect(decode.every((c) => num(c, AttrNames.expertHits) + num(c, AttrNames.expertMisses) === 2)).toBe(true); // top-2, one token
    const overlapping = uploads.filter((u) =>
      computes.some((c) => num(c, AttrNames.layer) === num(u, AttrNames.layer) + 1 && overlaps(u, c)),
    );
    expect(overlapping.length).toBeGreaterThan(0);
    // The fake's virtual stamps are moved onto the request's timeline: every step lies after its start.
    for (const c of computes) expect(c.startNs >= request.startNs).toBe(true);
    // The same spans in the Perfetto trace file.
    const events = JSON.parse(readFileSync(traceFile, 'utf8')).traceEvents as { name: string; ph: string }[];
    expect(events.filter((e) => e.ph === 'X' && e.name === SpanNames.upload).length).toBe(uploads.length);
  });

  it('moetier run --trace-file writes the layer and upload spans as Perfetto trace events', async () => {
    const traceFile = path.join(dir, 'cli-trace.json');
    const restore = useOtelEnv({}); // no collector: only the file
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
    const err = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const args = [
        '--model',
        model,
        '--prompt',
        'red green blue',
        '-n',
        '12',
        '--json',
        '--threads',
        '1',
        '--ctx',
        '64',
      ];
      expect(
        await runCommand.run([
          ...args,
          '--backend',
          'fake',
          '--slots-per-layer',
          '2',
          '--heat',
          'none',
          '--trace-file',
          traceFile,
        ]),
      ).toBe(0);
    } finally {
      spy.mockRestore();
      err.mockRestore();
      restore();
    }
    const out = JSON.parse(lines.at(-1)!) as { generatedTokens: number };
    const events = JSON.parse(readFileSync(traceFile, 'utf8')).traceEvents as {
      name: string;
      ph: string;
      args?: Record<string, unknown>;
    }[];
    const layers = events.filter((e) => e.ph === 'X' && e.name === SpanNames.layerCompute);
    expect(layers.length).toBeGreaterThanOrEqual(4 * (out.generatedTokens - 1));
    expect(events.filter((e) => e.ph === 'X' && e.name === SpanNames.request)).toHaveLength(1);
  });
});
