/**
 * --trace-file: spans written as Chrome/Perfetto trace-event JSON, through the real SDK
 * setup (no collector), and the exporter's bounds and failures.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import {
  AttrNames,
  calibrationAttributes,
  layerComputeAttributes,
  rebuildAttributes,
  SpanNames,
  uploadAttributes,
} from '../../otel/semconv.js';
import { startTelemetry } from '../../otel/setup.js';
import { TraceFileError, TraceFileExporter } from '../../otel/trace-file-exporter.js';
import { tidOf, toTraceEventFile, type TraceEvent } from '../../otel/trace-events.js';
import { clockBridge } from '../../src/telemetry/clock.js';
import { inSpan, moetierTracer, recordTimedSpan } from '../../src/telemetry/spans.js';
import { useOtelEnv } from './env.js';

const tempFile = (name: string) => path.join(mkdtempSync(path.join(tmpdir(), 'moetier-trace-')), name);
const complete = (events: TraceEvent[]) => events.filter((e) => e.ph === 'X');
const threadNames = (events: TraceEvent[]) =>
  Object.fromEntries(events.filter((e) => e.name === 'thread_name').map((e) => [e.tid, e.args?.name]));

describe('--trace-file (Chrome / Perfetto trace events)', () => {
  let restoreEnv: () => void;
  beforeEach(() => (restoreEnv = useOtelEnv({})));
  afterEach(() => restoreEnv());

  it('writes complete events with ts/dur in microseconds, one track per kind', async () => {
    const file = tempFile('run.json');
    const telemetry = startTelemetry({ traceFile: file, serviceName: 'moetier-file-test' });
    expect(telemetry).toMatchObject({ active: true, traceExporters: [], metrics: false, traceFile: file });
    const tracer = moetierTracer();
    const t0 = process.hrtime.bigint() - 10_000_000n;
    const at = (us: number) => t0 + BigInt(Math.round(us * 1000));
    // compute 0 [0,100] compute 1 [100,250.5]; upload A [40,180] and upload B [60,200] in flight together.
    await inSpan(tracer, SpanNames.decodeStep, {}, async () => {
      recordTimedSpan(
        tracer,
        SpanNames.layerCompute,
        at(0),
        at(100),
        layerComputeAttributes({ layer: 0, phase: 'decode', tokenIndex: 9, hits: 3, misses: 5 }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.layerCompute,
        at(100),
        at(250.5),
        layerComputeAttributes({ layer: 1, phase: 'decode', tokenIndex: 9, hits: 8, misses: 0 }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.upload,
        at(40),
        at(180),
        uploadAttributes({ layer: 0, expert: 2, bytes: 4096, inPlace: false }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.upload,
        at(60),
        at(200),
        uploadAttributes({ layer: 0, expert: 7, bytes: 4096, inPlace: true }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.rebuild,
        at(10),
        at(30),
        rebuildAttributes({ layer: 3, expert: 5, bytes: 8192 }),
      );
      recordTimedSpan(
        tracer,
        SpanNames.calibrationUpdate,
        at(250.5),
        at(251),
        calibrationAttributes({
          bandwidthBytesPerS: 1.2e10,
          fixedCostMs: 0.02,
          layerComputeMs: [0.1, 0.15],
          samples: 4,
        }),
      );
    });
    const report = await telemetry.shutdown();
    expect(report.traceFile).toEqual({ file, spans: 7, droppedSpans: 0 });

    const json = JSON.parse(readFileSync(file, 'utf8'));
    expect(json.displayTimeUnit).toBe('ns');
    const events: TraceEvent[] = json.traceEvents;
    const spans = complete(events);
    expect(spans).toHaveLength(7);
    for (const e of spans)
      expect(e).toMatchObject({ ph: 'X', pid: 1, ts: expect.any(Number), dur: expect.any(Number) });

    // ts counts from the earliest span (the first compute), whose epoch time is in otherData.
    expect(BigInt(json.otherData.epochNsAtZero)).toBe(clockBridge().toEpochNs(t0));
    const byExpert = (expert: number) => spans.find((e) => e.args?.[AttrNames.expert] === expert)!;
    const compute1 = spans.find((e) => e.name === SpanNames.layerCompute && e.args?.[AttrNames.layer] === 1)!;
    expect(compute1.ts).toBeCloseTo(100, 6);
    expect(compute1.dur).toBeCloseTo(150.5, 6);
    expect(byExpert(7).ts).toBeCloseTo(60, 6);
    expect(byExpert(7).dur).toBeCloseTo(140, 6);

    // Tracks: computes share one; the two uploads overlap without nesting, so B gets lane 2.
    const computeTid = tidOf('layer compute', 0);
    expect(spans.filter((e) => e.name === SpanNames.layerCompute).map((e) => e.tid)).toEqual([computeTid, computeTid]);
    expect(byExpert(2).tid).toBe(tidOf('uploads', 0));
    expect(byExpert(7).tid).toBe(tidOf('uploads', 1));
    expect(spans.find((e) => e.name === SpanNames.rebuild)!.tid).toBe(tidOf('rebuilds', 0));
    expect(spans.find((e) => e.name === SpanNames.calibrationUpdate)!.tid).toBe(tidOf('calibration', 0));
    expect(spans.find((e) => e.name === SpanNames.decodeStep)!.tid).toBe(tidOf('request', 0));
    expect(threadNames(events)).toMatchObject({
      [tidOf('layer compute', 0)]: 'layer compute',
      [tidOf('uploads', 0)]: 'uploads',
      [tidOf('uploads', 1)]: 'uploads #2',
      [tidOf('calibration', 0)]: 'calibration',
    });
    expect(events.find((e) => e.name === 'process_name')?.args).toEqual({ name: 'moetier-file-test' });

    // Attributes in args, with the span ids that tie them to the trace.
    expect(byExpert(7).args).toMatchObject({
      [AttrNames.uploadInPlace]: true,
      [AttrNames.uploadSize]: 4096,
      trace_id: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(
      spans.find((e) => e.name === SpanNames.calibrationUpdate)!.args?.[AttrNames.calibrationLayerCompute],
    ).toEqual([0.1, 0.15]);
    const step = spans.find((e) => e.name === SpanNames.decodeStep)!;
    expect(compute1.args?.parent_span_id).toBe(step.args?.span_id);
  });

  it('keeps properly nested spans on one lane', () => {
    const span = (name: string, start: bigint, end: bigint, id: string) => ({
      name,
      startEpochNs: start,
      endEpochNs: end,
      traceId: 't',
      spanId: id,
      attributes: {},
    });
    const file = toTraceEventFile(
      [
        span(SpanNames.request, 1_000n, 9_000n, 'r'),
        span(SpanNames.prefill, 1_000n, 4_000n, 'p'),
        span(SpanNames.decodeStep, 4_000n, 6_000n, 'd1'),
        span(SpanNames.decodeStep, 6_000n, 8_500n, 'd2'),
      ],
      'moetier',
      0,
    );
    const x = complete(file.traceEvents);
    expect(x.map((e) => e.tid)).toEqual([1, 1, 1, 1]);
    expect(x.map((e) => [e.args?.span_id, e.ts, e.dur])).toEqual([
      ['r', 0, 8],
      ['p', 0, 3],
      ['d1', 3, 2],
      ['d2', 5, 2.5],
    ]);
  });

  it('drops and counts spans past its bound', async () => {
    const file = tempFile('bounded.json');
    const provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(new TraceFileExporter(file, 'moetier', 2))],
    });
    const tracer = provider.getTracer('test');
    const t = process.hrtime.bigint();
    for (let i = 0; i < 3; i++)
      recordTimedSpan(tracer, SpanNames.upload, t + BigInt(i) * 1000n, t + BigInt(i) * 1000n + 500n, {});
    await provider.shutdown();
    const json = JSON.parse(readFileSync(file, 'utf8'));
    expect(complete(json.traceEvents)).toHaveLength(2);
    expect(json.otherData).toMatchObject({ spans: 2, droppedSpans: 1 });
  });

  it('refuses a trace file in a missing folder up front, and names the file when writing fails', async () => {
    expect(() => startTelemetry({ traceFile: '/nonexistent-moetier-dir/t.json' })).toThrow(InvalidOptionError);
    expect(() => startTelemetry({ traceFile: '/nonexistent-moetier-dir/t.json' })).toThrow(
      /--trace-file.*nonexistent-moetier-dir/,
    );
    const dir = path.dirname(tempFile('x'));
    const exporter = new TraceFileExporter(dir); // a folder: open(..., 'w') fails
    await expect(exporter.write()).rejects.toThrow(TraceFileError);
    await expect(exporter.write()).rejects.toThrow(dir);
  });
});
