/**
 * The disk tier traced over loopback OTLP and in the trace file: every routed miss read before
 * its layer ran it is one moetier.expert_read span (mode admitted or streamed, its bytes and queue
 * wait), lying inside the compute span of its layer (the layer waited for it while its other runs
 * computed); the calibration has a bandwidth estimate (it folds the reads with the uploads).
 */
import { readFileSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttrNames, SpanNames } from '../../otel/semconv.js';
import type { CalibrationSnapshot } from '../../src/actors/calibration/messages.js';
import { startTelemetry } from '../../otel/setup.js';
import { openEngine } from '../../src/engine/engine.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../otel/otlp-receiver.js';
import { useOtelEnv } from '../otel/env.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

// Off tmpfs where it can be (tier-helpers' folder is under tmpdir): the read engine's O_DIRECT path.
const onTmpfs = statfsSync(tmpdir()).type === 0x01021994;
const { dir, cleanup } = tempDir('moetier-disk-otlp-');
let receiver: OtlpReceiver;
let restoreEnv: () => void;
let model: string;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 17);
  receiver = await startOtlpReceiver();
  restoreEnv = useOtelEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'moetier-disk-test',
    OTEL_METRICS_EXPORTER: 'none',
  });
});
afterAll(async () => {
  restoreEnv();
  await receiver.close();
  cleanup();
});

const num = (s: ReceivedSpan, key: string): number => s.attributes[key] as number;

describe('disk tier tracing', () => {
  it(`exports a span per expert read, inside its layer's compute span, and calibrates from the reads${onTmpfs ? ' (buffered reads: tmpfs)' : ''}`, async () => {
    const traceFile = path.join(dir, 'trace.json');
    const telemetry = startTelemetry({ traceFile });
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 128,
      backend: 'disk',
      slotsPerLayer: 1,
      heat: false,
    });
    // One slot a layer: a call's first miss is admitted into it (evicting by dlfu), its others are streamed.
    let stats;
    let calibration: CalibrationSnapshot | undefined;
    const sub = engine.calibration$().subscribe((s) => (calibration = s));
    try {
      await collect(engine, 'red green blue red green blue yellow', { maxTokens: 16, stopAtEos: false });
      stats = engine.tierStats()!;
    } finally {
      sub.unsubscribe();
      await engine.close();
    }
    await telemetry.shutdown();
    const spans = await receiver.waitForSpans((s) => s.some((x) => x.name === SpanNames.request));
    const request = spans.find((s) => s.name === SpanNames.request)!;
    const reads = spans.filter((s) => s.name === SpanNames.expertRead);
    const streamed = reads.filter((s) => s.attributes[AttrNames.readMode] === 'streamed');
    const admitted = reads.filter((s) => s.attributes[AttrNames.readMode] === 'admitted');
    expect(streamed.length).toBeGreaterThan(0);
    expect(admitted.length).toBeGreaterThan(0);
    // The stats count from the prefill mark on; the spans cover the whole request.
    expect(streamed.length).toBeGreaterThanOrEqual(stats.streamedReads!);
    expect(admitted.length + streamed.length).toBe(reads.length);
    const computes = spans.filter((s) => s.name === SpanNames.layerCompute);
    for (const r of reads) {
      expect(r.parentSpanId).toBe(request.spanId);
      expect(num(r, AttrNames.readSize)).toBeGreaterThan(0);
      expect(num(r, AttrNames.readQueueWait)).toBeGreaterThanOrEqual(0);
    }
    // A streamed read is issued at its layer's bind and waited for before the layer ends.
    const inside = streamed.filter((r) =>
      computes.some(
        (c) => num(c, AttrNames.layer) === num(r, AttrNames.layer) && c.startNs <= r.startNs && r.endNs <= c.endNs,
      ),
    );
    expect(inside.length).toBe(streamed.length);
    expect(calibration?.bandwidthBytesPerSEwma).toBeGreaterThan(0);
    const events = JSON.parse(readFileSync(traceFile, 'utf8')).traceEvents as { name: string; ph: string }[];
    expect(events.filter((e) => e.ph === 'X' && e.name === SpanNames.expertRead).length).toBe(reads.length);
  });
});
