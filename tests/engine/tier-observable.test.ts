import { firstValueFrom, take, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-obs-');
let engine: Engine;
const prompt = 'one two three four five';

beforeAll(async () => {
  engine = await openEngine({ model: await tinyModel(dir), threads: 1, contextTokens: 96, slotsPerLayer: 3, heat: false, lfru: { tickTokens: 2 } });
});
afterAll(async () => {
  await engine.close();
  cleanup();
});

describe('engine.generate$()', () => {
  it('emits the tokens of generate()', async () => {
    const ids = await collect(engine, prompt, { maxTokens: 20, stopAtEos: false });
    const viaObservable = await firstValueFrom(engine.generate$(prompt, { maxTokens: 20, stopAtEos: false }).pipe(toArray()));
    expect(viaObservable.map((t) => t.id)).toEqual(ids);
  });

  it('unsubscribing cancels the request: aborted, no lease left, the engine serves the next request', async () => {
    const first = await firstValueFrom(engine.generate$(prompt, { maxTokens: 30, stopAtEos: false }).pipe(take(4), toArray()));
    expect(first).toHaveLength(4);
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.lastStats!.finishReason).toBe('aborted');
    expect(engine.lastStats!.generatedTokens).toBeLessThan(30);
    // The cancel lands between tokens; the next request queues behind it and sees its end.
    const next = await collect(engine, prompt, { maxTokens: 6, stopAtEos: false });
    expect(next).toEqual(first.map((t) => t.id).concat(next.slice(4)).slice(0, 6));
    expect(engine.tierStats()!.leases).toBe(0);
  });

  it('a bad option is the stream error, typed', async () => {
    await expect(firstValueFrom(engine.generate$(prompt, { maxTokens: 0 }))).rejects.toMatchObject({ option: 'maxTokens' });
  });
});
