import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expertContainerBytes } from '../../src/engine/tier/experts.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { readHParams } from '../../src/model/hparams.js';
import { InvalidOptionError, RequestAbortedError } from '../../src/core/errors.js';
import { openEngine, type Engine, type EngineOptions } from '../../src/engine/engine.js';
import { referenceRun, tempDir, tinyModel } from './tier-helpers.js';
import { withTierFaults } from '../../src/engine/tier/fault-injection.js';

const { dir, cleanup } = tempDir('moetier-tier-swaps-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const decodeTokens = 48;

/** Generates, checking the slot budget and the leases after every token. */
async function checkedRun(engine: Engine, options = {}): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of engine.generate(prompt, { maxTokens: decodeTokens, stopAtEos: false, ...options })) {
    ids.push(t.id);
    const s = engine.tierStats()!;
    s.slotsUsed.forEach((used, l) => expect(used).toBeLessThanOrEqual(s.slotsBudget[l]));
  }
  return ids;
}

function expectClean(engine: Engine): void {
  const s = engine.tierStats()!;
  expect(s.leases).toBe(0);
  s.slotsUsed.forEach((used, l) => expect(used).toBeLessThanOrEqual(s.slotsBudget[l]));
}

beforeAll(async () => {
  model = await tinyModel(dir, 'q4_0', 11);
  ({ prompt, reference } = await referenceRun(model, 'one two three four five six seven eight nine ten', decodeTokens));
});

const tierOptions = (o: Partial<EngineOptions> = {}): EngineOptions => ({
  model,
  threads: 1,
  contextTokens: 128,
  slotsPerLayer: 2,
  heat: false,
  lfru: { tickTokens: 2 },
  ...o,
});

describe.each(['cpu', 'fake'] as const)('the LFRU tick on the %s backend', (backend) => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await openEngine(tierOptions({ backend }));
    expect(engine.config.tier?.backend).toBe(backend);
  });
  afterAll(() => engine.close());

  it('swaps during a long decode, never past the budget, and the tokens are unchanged', async () => {
    const ids = await checkedRun(engine);
    expect(ids).toEqual(reference);
    const s = engine.lastStats!;
    expect(s.uploads).toBeGreaterThan(0);
    expect(s.uploadBytes).toBeGreaterThan(0);
    expect(s.uploadBytes! % s.uploads!).toBe(0); // whole experts
    expectClean(engine);
  });

  it('a cancel mid-decode leaves no lease, and the next request gets the same tokens', async () => {
    const controller = new AbortController();
    await expect(
      (async () => {
        let n = 0;
        for await (const _ of engine.generate(prompt, {
          maxTokens: decodeTokens,
          stopAtEos: false,
          signal: controller.signal,
        })) {
          if (++n === 20) controller.abort();
        }
      })(),
    ).rejects.toBeInstanceOf(RequestAbortedError);
    expect(engine.lastStats!.finishReason).toBe('aborted');
    expectClean(engine);
    expect(await checkedRun(engine)).toEqual(reference);
  });

  it('a consumer that throws mid-stream ends the request cleanly; the engine serves the next one', async () => {
    const boom = new Error('consumer failed');
    await expect(
      (async () => {
        let n = 0;
        for await (const _ of engine.generate(prompt, { maxTokens: decodeTokens, stopAtEos: false }))
          if (++n === 9) throw boom;
      })(),
    ).rejects.toBe(boom);
    expectClean(engine);
    expect(await checkedRun(engine)).toEqual(reference);
  });
});

describe('failures and tuning', () => {
  it('a swap upload that fails half-way leaves the tokens unchanged and the budget kept; the slot is in use again by the next request (fake)', async () => {
    const gguf = parseGguf(new Uint8Array(readFileSync(model)), model);
    const hp = readHParams(gguf);
    const warmstartBytes = hp.nLayer * 2 * expertContainerBytes(gguf, hp);
    const engine = await withTierFaults({ transferAfterBytes: warmstartBytes + 100 }, () =>
      openEngine(tierOptions({ backend: 'fake' })),
    );
    try {
      expect(await checkedRun(engine)).toEqual(reference);
      const s = engine.lastStats!;
      const budget = s.tier!.slotsBudget.reduce((a, b) => a + b, 0);
      // The failed upload left its slot free, or the tier retried it free-then-upload.
      expect(s.tier!.slotsUsed.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(budget - 1);
      expect(s.uploadBytes).toBe(s.uploads! * expertContainerBytes(gguf, hp));
      expectClean(engine);
      // The next request starts by refilling the free slot.
      expect(await checkedRun(engine)).toEqual(reference);
      expect(engine.tierStats()!.slotsUsed.reduce((a, b) => a + b, 0)).toBe(budget);
    } finally {
      await engine.close();
    }
  });

  it('tune: bad values change nothing; good ones apply before the next step', async () => {
    const engine = await openEngine(tierOptions());
    try {
      expect(() => engine.tune({ uploadInflightTransfersMax: 0 })).toThrow(InvalidOptionError);
      expect(() => engine.tune({ lfru: { tickTokens: 1.5 } })).toThrow(InvalidOptionError);
      expect(() => engine.tune({ residentSlotsPerLayer: 9 })).toThrow(InvalidOptionError);
      expect(() => engine.tune({ bogus: 1 } as never)).toThrow(InvalidOptionError);
      expect(() => engine.tune({ prefillReplan: { gaurd: false } as never })).toThrow(/tune.prefillReplan.gaurd/);
      expect(() => engine.tune({ prefillReplan: { guard: 'no' as never } })).toThrow(/tune.prefillReplan.guard/);
      // A huge tick interval and the guard off (its late replan would swap): no swap decision in this request.
      engine.tune({ lfru: { tickTokens: 1000 }, uploadInflightTransfersMax: 1, prefillReplan: { guard: false } });
      expect(await checkedRun(engine)).toEqual(reference);
      expect(engine.lastStats!.uploads).toBe(0);
      engine.tune({ lfru: { tickTokens: 2 } });
      expect(await checkedRun(engine)).toEqual(reference);
      expect(engine.lastStats!.uploads).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });
});
