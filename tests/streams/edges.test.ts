import { firstValueFrom, map, take, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import type { CalibrationMessage } from '../../src/actors/calibration/messages.js';
import { calibrationSnapshots } from '../../src/streams/calibration.js';
import { fromCancellable } from '../../src/streams/tokens.js';

const scheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

describe('calibration edge (marbles)', () => {
  const config = { alpha: 0.5, nLayer: 2 };
  const compute = (layer: number, ms: number): CalibrationMessage => ({ kind: 'compute', invocation: 0, layer, startNs: 0, endNs: ms * 1e6 });

  it('emits a snapshot per accepted sample, skips rejected ones, passes an error through', () => {
    scheduler().run(({ cold, expectObservable }) => {
      const samples = cold('a-b-c-#', { a: compute(0, 4), b: compute(0, 0), c: compute(0, 2) }, new Error('backend died'));
      const ms = samples.pipe(calibrationSnapshots(config), map((s) => [s.computeMsEwma[0], s.samplesRejected]));
      expectObservable(ms).toBe('a---c-#', { a: [4, 0], c: [3, 1] }, new Error('backend died'));
    });
  });

  it('unsubscribes from its source on teardown', () => {
    scheduler().run(({ hot, expectObservable, expectSubscriptions }) => {
      const samples = hot('-a-b-c-', { a: compute(1, 2), b: compute(1, 4), c: compute(1, 8) });
      expectObservable(samples.pipe(calibrationSnapshots(config), map((s) => s.computeMsEwma[1])), '^---!').toBe('-a-b', { a: 2, b: 3 });
      expectSubscriptions(samples.subscriptions).toBe('^---!');
    });
  });
});

describe('token edge (async iterable -> Observable)', () => {
  function source(log: string[], fail?: Error) {
    return (signal: AbortSignal) =>
      (async function* () {
        try {
          for (let i = 0; i < 5; i++) {
            if (signal.aborted) throw new Error('aborted');
            if (fail && i === 2) throw fail;
            yield i;
            await new Promise((r) => setTimeout(r, 1));
          }
        } finally {
          log.push(signal.aborted ? 'finally:aborted' : 'finally');
        }
      })();
  }

  it('emits every value, then completes', async () => {
    const log: string[] = [];
    expect(await firstValueFrom(fromCancellable(source(log)).pipe(toArray()))).toEqual([0, 1, 2, 3, 4]);
    expect(log).toEqual(['finally']);
  });

  it('an error of the source is the stream error', async () => {
    const log: string[] = [];
    await expect(firstValueFrom(fromCancellable(source(log, new Error('E_NATIVE'))).pipe(toArray()))).rejects.toThrow('E_NATIVE');
    expect(log).toEqual(['finally']);
  });

  it('teardown (take) aborts the signal and returns the iterator', async () => {
    const log: string[] = [];
    expect(await firstValueFrom(fromCancellable(source(log)).pipe(take(2), toArray()))).toEqual([0, 1]);
    await new Promise((r) => setTimeout(r, 10));
    expect(log).toEqual(['finally:aborted']);
  });
});
