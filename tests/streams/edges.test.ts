import { firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { fromCancellable } from '../../src/streams/tokens.js';

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
    await expect(firstValueFrom(fromCancellable(source(log, new Error('E_NATIVE'))).pipe(toArray()))).rejects.toThrow(
      'E_NATIVE',
    );
    expect(log).toEqual(['finally']);
  });

  it('teardown (take) aborts the signal and returns the iterator', async () => {
    const log: string[] = [];
    expect(await firstValueFrom(fromCancellable(source(log)).pipe(take(2), toArray()))).toEqual([0, 1]);
    await new Promise((r) => setTimeout(r, 10));
    expect(log).toEqual(['finally:aborted']);
  });
});
