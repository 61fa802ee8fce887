/**
 * openEngine's placementPolicy: 'dlfu' (decayed LFU) runs the pure policy of src/tiers in the
 * engine on every backend with the tokens of the engine without a tier; its options are checked
 * where they enter, and what only LFRU has (replan, LFRU tuning) is refused beside it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-placement-policy-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 40;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 5);
  ({ prompt, reference } = await referenceRun(
    model,
    'the ship will sail and we compile the function then the rocket will launch',
    maxTokens,
  ));
});

const options = (o: Partial<EngineOptions>): EngineOptions => ({
  model,
  threads: 1,
  contextTokens: 128,
  slotsPerLayer: 2,
  heat: false,
  ...o,
});

describe('placementPolicy dlfu', () => {
  it.each(['cpu', 'fake', 'disk'] as const)(
    'on the %s backend: the tokens are unchanged, misses are kept as they come',
    async (backend) => {
      const engine = await openEngine(options({ backend, placementPolicy: 'dlfu', dlfu: { halfLifeTokens: 8 } }));
      try {
        expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
        const s = engine.lastStats!;
        // A demand policy uploads (or, on the disk tier, admits) its misses: the decode moved experts.
        expect(s.uploads! + (engine.tierStats()!.admittedReads ?? 0)).toBeGreaterThan(0);
        expect(s.replanGuard).toBeUndefined(); // the guard watches a replan, which dlfu has not
        expect(() => engine.tune({ lfru: { tickTokens: 2 } })).toThrow(/tune.lfru/);
        expect(() => engine.tune({ prefillReplan: { enabled: true } })).toThrow(/tune.prefillReplan/);
        engine.tune({ uploadInflightTransfersMax: 2 }); // the upload queue's limits stay tunable
      } finally {
        await engine.close();
      }
    },
  );

  it('refuses a bad policy, a half-life out of range or without dlfu, and replan beside it', async () => {
    const refused = async (o: Partial<EngineOptions>, option: string) => {
      const err = await openEngine(options(o)).then(
        async (e) => {
          await e.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect((err as InvalidOptionError).option).toBe(option);
    };
    await refused({ placementPolicy: 'lru' as never }, 'placementPolicy');
    await refused({ placementPolicy: 'dlfu', dlfu: { halfLifeTokens: 0 } }, 'dlfu.halfLifeTokens');
    await refused({ placementPolicy: 'dlfu', dlfu: { halfLife: 8 } as never }, 'dlfu.halfLife');
    await refused({ dlfu: { halfLifeTokens: 8 } }, 'dlfu');
    await refused({ placementPolicy: 'dlfu', prefillReplan: { enabled: true } }, 'prefillReplan.enabled');
  });
});
