/**
 * The calibration actor, fed step timings through the calibration edge (fold: what the step
 * pipeline's batch does): one update (and one span) per step whose samples moved an estimate,
 * the request's trace context as the span's parent, stale steps ignored, a tracing failure
 * thrown to the step that folded it, completion on close.
 */
import { context, trace, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { firstValueFrom, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { CalibrationActor } from '../../src/actors/calibration/actor.js';
import { STEP_LAYER_FIELDS as F, type StepTimings } from '../../src/actors/calibration/messages.js';
import { SpanNames } from '../../src/telemetry/index.js';

const nLayer = 2;
const ms = 1e6;

/** A step whose layer l computed for computeMs[l] ms, starting at 1 s. */
function step(
  invocation: number,
  computeMs: number[],
  uploads: StepTimings['uploads'] = [],
  traced = false,
  traceContext = context.active(),
): StepTimings {
  const ls = new Float64Array(nLayer * F);
  computeMs.forEach((c, l) => {
    ls[l * F] = 1e9 + l * 10 * ms;
    ls[l * F + 1] = ls[l * F] + c * ms;
  });
  return { kind: 'step', invocation, layerStats: ls, uploads, traced, traceContext };
}

function setup(tracer?: Tracer) {
  const exporter = new InMemorySpanExporter();
  const real = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const actor = new CalibrationActor({ alpha: 0.5, nLayer }, () => tracer ?? real.getTracer('test'));
  const bus = { publish: (s: StepTimings) => actor.fold(s) };
  return { bus, actor, exporter };
}

describe('calibration actor', () => {
  it('folds each step into EWMAs and publishes one snapshot per step that moved them', async () => {
    const { bus, actor } = setup();
    const seen = firstValueFrom(actor.snapshots$().pipe(toArray()));
    bus.publish(step(1, [4, 8]));
    bus.publish(
      step(
        1,
        [2, 8],
        [{ layer: 0, bytes: 1e6, ok: true, issuedNs: 5e9, startNs: 5e9 + 0.5 * ms, endNs: 5e9 + 1.5 * ms }],
      ),
    );
    // A step of an older request is stale: counted, no update.
    bus.publish(step(0, [100, 100]));
    // Uploads that failed are no samples.
    bus.publish({
      kind: 'step',
      invocation: 1,
      layerStats: undefined,
      uploads: [{ layer: 1, bytes: 5, ok: false, issuedNs: 1, startNs: 2, endNs: 3 }],
      traced: false,
    });
    expect(actor.updates).toBe(2);
    // The next update carries the stale count.
    bus.publish(step(1, [3, 8]));
    actor.close();
    const snapshots = await seen;
    expect(snapshots).toHaveLength(3);
    expect(snapshots[0].computeMsEwma).toEqual([4, 8]);
    expect(snapshots[1].computeMsEwma).toEqual([3, 8]);
    expect(snapshots[1].bandwidthBytesPerSEwma).toBeCloseTo(1e9, 3); // 1 MB in 1 ms
    expect(snapshots[1].transferFixedMsEwma).toBeCloseTo(0.5, 9);
    expect(snapshots[2].samplesStale).toBe(2);
    expect(snapshots[2].samplesAccepted).toBe(7);
    expect(actor.snapshot).toBe(snapshots[2]);
  });

  it('a late subscriber gets the latest snapshot first', async () => {
    const { bus, actor } = setup();
    bus.publish(step(1, [6, 6]));
    expect((await firstValueFrom(actor.snapshots$())).computeMsEwma).toEqual([6, 6]);
    actor.close();
  });

  it('traces a span per update, a child of the trace context in the message; only traced steps', () => {
    const { bus, actor, exporter } = setup();
    const parentTracer = new BasicTracerProvider().getTracer('parent');
    const parent = parentTracer.startSpan('request');
    const ctx = trace.setSpan(context.active(), parent);
    bus.publish(step(1, [1, 2], [], true, ctx));
    bus.publish(step(1, [1, 2], [], false, ctx));
    bus.publish(step(1, [3, 2], [], true, ctx));
    const spans = exporter.getFinishedSpans().filter((s) => s.name === SpanNames.calibrationUpdate);
    expect(spans).toHaveLength(2);
    for (const s of spans) {
      expect(s.spanContext().traceId).toBe(parent.spanContext().traceId);
      expect(s.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    }
    actor.close();
  });

  it('a throw while tracing is thrown to the step that folded it; the actor keeps folding', () => {
    const boom = new Error('exporter broke');
    const throwing = {
      startSpan: () => {
        throw boom;
      },
    } as unknown as Tracer;
    const { bus, actor } = setup(throwing);
    expect(() => bus.publish(step(1, [1, 1], [], true))).toThrow(boom);
    bus.publish(step(1, [3, 3], [], false));
    expect(actor.snapshot.computeMsEwma).toEqual([2, 2]);
    actor.close();
  });
});
