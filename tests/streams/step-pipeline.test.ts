/**
 * The per-step pipeline's edges (src/streams/step-pipeline.ts), in marbles: each passes its
 * values on in order, ends the stream with a stage's throw (nothing after it runs), and on
 * teardown unsubscribes from its source. Then the whole pipeline: the stages in the documented
 * order, once per step.
 */
import { EMPTY, map, of, throwError, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { STEP_LAYER_FIELDS, type StepTimings } from '../../src/actors/calibration/messages.js';
import type { EvaluateStep, LayerStepReport } from '../../src/actors/layer-compute/messages.js';
import { calibrationUpdates } from '../../src/streams/calibration.js';
import { batchEdge, evaluateEdge, placementEdge, settleEdge, stepPipeline, StepRunner, type SettledStep, type StepStages } from '../../src/streams/step-pipeline.js';
import type { Decision } from '../../src/tiers/types.js';
import { initialCalibration } from '../../src/actors/calibration/logic.js';

const scheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
const boom = new Error('stage failed');

const step = (position: number): EvaluateStep => ({ kind: 'evaluate', phase: 'decode', tokens: Int32Array.of(position), position, logits: new Float32Array(1) });
const report = (position: number): LayerStepReport => ({ phase: 'decode', position, nTokens: 1, firstToken: position, routes: new Int32Array(0), layerStats: new Float64Array(0), slot: 0 });
const settled = (position: number): SettledStep => ({ report: report(position), poll: { uploads: [], evicted: [] }, decisions: [] });
const swap: Decision = { kind: 'swap', victim: { layer: 0, expert: 1 }, newcomer: { layer: 0, expert: 2 } };
const timings = (ms: number): StepTimings => {
  const layerStats = new Float64Array(STEP_LAYER_FIELDS);
  layerStats[0] = 1e9;
  layerStats[1] = 1e9 + ms * 1e6;
  return { kind: 'step', invocation: 1, layerStats, uploads: [], traced: false };
};

describe('evaluate edge', () => {
  it('runs one step at a time, in order; a failed eval is the stream error', () => {
    scheduler().run(({ cold, hot, expectObservable }) => {
      const steps = hot('a-b---c', { a: step(1), b: step(2), c: step(3) });
      // Each eval takes 3 frames; b waits for a.
      const evaluate = (s: EvaluateStep): Observable<LayerStepReport> => (s.position === 3 ? cold('--#', undefined, boom) : cold('---r|', { r: report(s.position) }));
      expectObservable(steps.pipe(evaluateEdge(evaluate), map((r) => r.position))).toBe('---a---b--#', { a: 1, b: 2 }, boom);
    });
  });
  it('on teardown unsubscribes from the steps and the running eval', () => {
    scheduler().run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const steps = hot('a-b', { a: step(1), b: step(2) });
      const running = cold('-----r|', { r: report(1) });
      expectObservable(steps.pipe(evaluateEdge(() => running)), '^--!').toBe('---');
      expectSubscriptions(steps.subscriptions).toBe('^--!');
      expectSubscriptions(running.subscriptions).toBe('^--!');
    });
  });
});

describe('settle edge (settle, then rebuild)', () => {
  it('hands each poll to the rebuild; a throw in either is the stream error', () => {
    const rebuilt: number[] = [];
    scheduler().run(({ hot, expectObservable }) => {
      const reports = hot('a-b-c', { a: report(1), b: report(2), c: report(3) });
      const settle = (r: LayerStepReport) => ({ uploads: [r.position], evicted: [] });
      const rebuild = (poll: { uploads: readonly unknown[] }) => {
        if (poll.uploads[0] === 3) throw boom;
        rebuilt.push(poll.uploads[0] as number);
      };
      expectObservable(reports.pipe(settleEdge(settle, rebuild), map((s) => s.report.position))).toBe('a-b-#', { a: 1, b: 2 }, boom);
    });
    expect(rebuilt).toEqual([1, 2]);
  });
  it('on teardown unsubscribes from the reports', () => {
    scheduler().run(({ hot, expectObservable, expectSubscriptions }) => {
      const reports = hot('a-b-c', { a: report(1), b: report(2), c: report(3) });
      expectObservable(reports.pipe(settleEdge(() => ({ uploads: [], evicted: [] }), () => undefined), map((s) => s.report.position)), '^--!').toBe('a-b', { a: 1, b: 2 });
      expectSubscriptions(reports.subscriptions).toBe('^--!');
    });
  });
});

describe('placement edge (observe, decide, issue)', () => {
  it('issues what the tick decided; a throw in the tick is the stream error and nothing is issued', () => {
    const issued: Decision[][] = [];
    scheduler().run(({ hot, expectObservable }) => {
      const steps = hot('a-b-c', { a: settled(1), b: settled(2), c: settled(3) });
      const stages = {
        observe: () => undefined,
        decide: (r: LayerStepReport) => {
          if (r.position === 2) throw boom;
          return [swap];
        },
        issue: (d: readonly Decision[]) => void issued.push([...d]),
      };
      expectObservable(steps.pipe(placementEdge(stages), map((s) => s.decisions.length))).toBe('a-#', { a: 1 }, boom);
    });
    expect(issued).toEqual([[swap]]);
  });
  it('on teardown unsubscribes from the settled steps', () => {
    scheduler().run(({ hot, expectObservable, expectSubscriptions }) => {
      const steps = hot('a-b-c', { a: settled(1), b: settled(2), c: settled(3) });
      const stages = { observe: () => undefined, decide: () => [], issue: () => undefined };
      expectObservable(steps.pipe(placementEdge(stages), map((s) => s.report.position)), '^-!').toBe('a-', { a: 1 });
      expectSubscriptions(steps.subscriptions).toBe('^-!');
    });
  });
});

describe('batch edge -> calibration edge', () => {
  const config = { alpha: 0.5, nLayer: 1 };
  it('folds the batch\'s timings on from the actor\'s estimates and passes the step on; a throw while recording is the stream error', () => {
    let current = initialCalibration(config);
    const recorded: number[] = [];
    scheduler().run(({ hot, expectObservable }) => {
      const steps = hot('a-b-c', { a: settled(1), b: settled(2), c: settled(3) });
      const stages = {
        // Step 1 has no batch yet; step 2 hands over two steps' timings; step 3's recording throws.
        batch: (s: SettledStep) => (s.report.position === 1 ? [] : s.report.position === 2 ? [timings(4), timings(2)] : [timings(8)]),
        calibrate: calibrationUpdates(config, () => 0n, () => current, (s) => (current = s)),
        record: (u: { snapshot: { computeMsEwma: (number | undefined)[] } }) => {
          if (recorded.length === 2) throw boom;
          recorded.push(u.snapshot.computeMsEwma[0]!);
        },
      };
      expectObservable(steps.pipe(batchEdge(stages as never), map((s) => s.report.position))).toBe('a-b-#', { a: 1, b: 2 }, boom);
    });
    expect(recorded).toEqual([4, 3]); // EWMA 0.5: 4, then (4 + 2) / 2
    expect(current.computeMsEwma[0]).toBe(5.5); // step 3 folded (3 + 8) / 2 before its record threw
  });
  it('on teardown unsubscribes from the steps', () => {
    scheduler().run(({ hot, expectObservable, expectSubscriptions }) => {
      const steps = hot('a-b-c', { a: settled(1), b: settled(2), c: settled(3) });
      const stages = { batch: () => [], calibrate: () => EMPTY, record: () => undefined };
      expectObservable(steps.pipe(batchEdge(stages as never), map((s) => s.report.position)), '^---!').toBe('a-b-', { a: 1, b: 2 });
      expectSubscriptions(steps.subscriptions).toBe('^---!');
    });
  });
});

describe('the whole step pipeline', () => {
  it('calls the stages in the documented order, once per step; an eval failure skips every later stage', async () => {
    const calls: string[] = [];
    const stages: StepStages = {
      evaluate: (s) => (s.position === 9 ? throwError(() => boom) : (calls.push('evaluate'), of(report(s.position)))),
      settle: () => (calls.push('settle'), { uploads: [], evicted: [] }),
      rebuild: () => void calls.push('rebuild'),
      observe: () => void calls.push('observe'),
      decide: () => (calls.push('decide'), [swap]),
      issue: () => void calls.push('issue'),
      batch: () => (calls.push('batch'), [timings(1)]),
      calibrate: calibrationUpdates({ alpha: 0.5, nLayer: 1 }, () => 0n),
      record: () => void calls.push('record'),
    };
    const out: SettledStep[] = [];
    await new Promise<void>((resolve, reject) => of(step(1)).pipe(stepPipeline(stages)).subscribe({ next: (s) => out.push(s), complete: resolve, error: reject }));
    expect(calls).toEqual(['evaluate', 'settle', 'rebuild', 'observe', 'decide', 'issue', 'batch', 'record']);
    expect(out.map((s) => [s.report.position, s.decisions])).toEqual([[1, [swap]]]);
    calls.length = 0;
    await expect(new Promise((resolve, reject) => of(step(9)).pipe(stepPipeline(stages)).subscribe({ complete: () => resolve(undefined), error: reject }))).rejects.toBe(boom);
    expect(calls).toEqual([]);
  });
});

describe('StepRunner (one subscription per request)', () => {
  it('resolves each step with its settled report; an error rejects that step and every later one', async () => {
    let fail = false;
    const stages: StepStages = {
      evaluate: (s) => of(report(s.position)),
      settle: () => ({ uploads: [], evicted: [] }),
      rebuild: () => undefined,
      observe: () => {
        if (fail) throw boom;
      },
      decide: () => [],
      issue: () => undefined,
      batch: () => [],
      calibrate: () => EMPTY,
      record: () => undefined,
    };
    const runner = new StepRunner(stages);
    expect((await runner.run(step(1))).report.position).toBe(1);
    expect((await runner.run(step(2))).report.position).toBe(2);
    fail = true;
    await expect(runner.run(step(3))).rejects.toBe(boom);
    fail = false;
    await expect(runner.run(step(4))).rejects.toBe(boom); // the request is over
    runner.close();
  });
});
