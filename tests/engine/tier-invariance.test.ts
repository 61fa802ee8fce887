/**
 * Issue 4, invariant 9: on the cpu backend the generated tokens are byte-identical for every
 * budget and policy setting (placement never changes routing nor the arithmetic). A property
 * test over random budgets, LFRU intervals and upload limits, on a Q8_0 and a Q4_0 container.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mulberry32, randomInt } from '../../src/core/prng.js';
import { openEngine } from '../../src/engine/engine.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-inv-');
afterAll(cleanup);
const prompt = 'alpha beta gamma delta alpha beta gamma';
const steps = 32;
const cases = 6;

describe.each(['q8_0', 'q4_0'] as const)('token invariance over random budgets (%s)', (quant) => {
  let model: string;
  let reference: number[];
  beforeAll(async () => {
    model = await tinyModel(dir, quant, 21);
    const plain = await openEngine({ model, threads: 2, contextTokens: 96 });
    try {
      reference = await collect(plain, prompt, { maxTokens: steps, stopAtEos: false });
    } finally {
      await plain.close();
    }
  });

  it(`${cases} random configurations give the tokens of the engine without a tier`, async () => {
    const rng = mulberry32(quant === 'q8_0' ? 41 : 43);
    let swapped = 0;
    for (let i = 0; i < cases; i++) {
      const config = {
        slotsPerLayer: randomInt(rng, 1, 8),
        lfru: { tickTokens: randomInt(rng, 1, 6), swapsPerTick: randomInt(rng, 1, 3) },
        upload: { inflightTransfersMax: randomInt(rng, 1, 4) },
        threads: randomInt(rng, 1, 2),
      };
      const engine = await openEngine({ model, contextTokens: 96, heat: false, ...config });
      try {
        expect({ config, tokens: await collect(engine, prompt, { maxTokens: steps, stopAtEos: false }) }).toEqual({
          config,
          tokens: reference,
        });
        const s = engine.lastStats!;
        swapped += s.uploads!;
        expect(s.tier!.leases).toBe(0);
        s.tier!.slotsUsed.forEach((used, l) => expect(used).toBeLessThanOrEqual(s.tier!.slotsBudget[l]));
      } finally {
        await engine.close();
      }
    }
    expect(swapped).toBeGreaterThan(0); // the property was tested with placement moving
  });
});

describe('host int8 copies (native tier, Q4_0 container)', () => {
  it('are built for every non-resident expert, freed for residents, and the tokens do not change', async () => {
    const model = await tinyModel(dir, 'q4_0', 23);
    const plain = await openEngine({ model, threads: 1, contextTokens: 96 });
    let reference: number[];
    try {
      reference = await collect(plain, prompt, { maxTokens: steps, stopAtEos: false });
    } finally {
      await plain.close();
    }
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 96,
      heat: false,
      slotsPerLayer: 3,
      lfru: { tickTokens: 2 },
    });
    try {
      expect(await collect(engine, prompt, { maxTokens: steps, stopAtEos: false })).toEqual(reference);
      const settled = async () => {
        for (let i = 0; i < 200 && engine.hostCopies()!.published !== 4 * (8 - 3); i++)
          await new Promise((r) => setTimeout(r, 25));
      };
      await settled();
      const firstUploads = engine.lastStats!.uploads!;
      // After the copies landed, a second request computes its misses from them: same tokens.
      expect(await collect(engine, prompt, { maxTokens: steps, stopAtEos: false })).toEqual(reference);
      expect(firstUploads + engine.lastStats!.uploads!).toBeGreaterThan(0);
      await settled();
      const h = engine.hostCopies();
      expect(h!.built).toBeGreaterThanOrEqual(4 * (8 - 3)); // every non-resident expert at open
      expect(h!.published).toBe(4 * (8 - 3)); // residents' copies freed: exactly the non-residents hold one
    } finally {
      await engine.close();
    }
  });
});
