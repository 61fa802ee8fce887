import { firstValueFrom, lastValueFrom, take, toArray } from 'rxjs';
import { InvalidOptionError } from '../../src/core/errors.js';
import type { CalibrationSnapshot } from '../../src/actors/calibration/messages.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-obs-');
let engine: Engine;
const prompt = 'one two three four five';

beforeAll(async () => {
  engine = await openEngine({
    model: await tinyModel(dir),
    threads: 1,
    contextTokens: 96,
    slotsPerLayer: 3,
    heat: false,
    lfru: { tickTokens: 2 },
  });
});
afterAll(async () => {
  await engine.close();
  cleanup();
});

describe('engine.generate$()', () => {
  it('emits the tokens of generate()', async () => {
    const ids = await collect(engine, prompt, { maxTokens: 20, stopAtEos: false });
    const viaObservable = await firstValueFrom(
      engine.generate$(prompt, { maxTokens: 20, stopAtEos: false }).pipe(toArray()),
    );
    expect(viaObservable.map((t) => t.id)).toEqual(ids);
  });

  it('unsubscribing cancels the request: aborted, no lease left, the engine serves the next request', async () => {
    const first = await firstValueFrom(
      engine.generate$(prompt, { maxTokens: 30, stopAtEos: false }).pipe(take(4), toArray()),
    );
    expect(first).toHaveLength(4);
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.lastStats!.finishReason).toBe('aborted');
    expect(engine.lastStats!.generatedTokens).toBeLessThan(30);
    // The cancel lands between tokens; the next request queues behind it and sees its end.
    const next = await collect(engine, prompt, { maxTokens: 6, stopAtEos: false });
    expect(next).toEqual(
      first
        .map((t) => t.id)
        .concat(next.slice(4))
        .slice(0, 6),
    );
    expect(engine.tierStats()!.leases).toBe(0);
  });

  it('a bad option is the stream error, typed', async () => {
    await expect(firstValueFrom(engine.generate$(prompt, { maxTokens: 0 }))).rejects.toMatchObject({
      option: 'maxTokens',
    });
  });
});

describe('engine.calibration$()', () => {
  it("publishes the calibration actor's snapshots while a request runs: compute per layer, and on the fake backend its configured bandwidth; completes on close", async () => {
    const bandwidthBytesPerS = 2e9;
    const fake = await openEngine({
      model: await tinyModel(dir),
      threads: 1,
      contextTokens: 96,
      slotsPerLayer: 2,
      heat: false,
      lfru: { tickTokens: 1 },
      backend: 'fake',
      fake: { bandwidthBytesPerS },
    });
    const seen: CalibrationSnapshot[] = [];
    const done = lastValueFrom(fake.calibration$().pipe(toArray())).then((all) => seen.push(...all));
    try {
      await collect(fake, prompt, { maxTokens: 24, stopAtEos: false });
      expect(fake.lastStats!.uploads).toBeGreaterThan(0);
    } finally {
      await fake.close();
    }
    await done;
    // One snapshot per step at least (every step times its layers); accepted counts only grow.
    expect(seen.length).toBeGreaterThanOrEqual(23);
    for (let i = 1; i < seen.length; i++) expect(seen[i].samplesAccepted).toBeGreaterThan(seen[i - 1].samplesAccepted);
    const last = seen.at(-1)!;
    expect(last.invocation).toBe(1);
    expect(last.computeMsEwma).toHaveLength(fake.hparams.nLayer);
    for (const ms of last.computeMsEwma) expect(ms).toBeGreaterThan(0);
    // The fake moves bytes at its configured rate on its virtual clock, after its fixed cost per
    // transfer (330 us in its preset), which the calibration reads as start - issued (with any queue wait).
    expect(Math.abs(last.bandwidthBytesPerSEwma! / bandwidthBytesPerS - 1)).toBeLessThan(0.001);
    expect(last.transferFixedMsEwma!).toBeGreaterThanOrEqual(0.33 - 1e-9);
  });

  it('throws a typed error on an engine without a tier', async () => {
    const plain = await openEngine({ model: await tinyModel(dir), threads: 1, contextTokens: 96 });
    try {
      expect(() => plain.calibration$()).toThrow(InvalidOptionError);
    } finally {
      await plain.close();
    }
  });
});
