/** The disk tier's token invariance property (disk-invariance*.test.ts): random budgets against the plain engine. */
import { expect, it } from 'vitest';
import { mulberry32, randomInt } from '../../src/core/prng.js';
import { openEngine } from '../../src/engine/engine.js';
import { collect, referenceRun, fixedPlanBytes } from './tier-helpers.js';

const prompt = 'alpha beta gamma delta alpha beta gamma';

export function diskInvariance(
  model: () => Promise<string>,
  o: { cases: number; seed: number; maxTokens: number; timeoutMs?: number },
): void {
  it(
    `${o.cases} random memory budgets give the tokens of the engine without one`,
    async () => {
      const file = await model();
      const { prompt: ids, reference } = await referenceRun(file, prompt, o.maxTokens);
      const rng = mulberry32(o.seed);
      let streamed = 0,
        admitted = 0;
      for (let i = 0; i < o.cases; i++) {
        const threads = randomInt(rng, 1, 2);
        // Every prompt on demand (the context), or every prompt reading whole layers (0): a number is
        // planned as given, so the fixed parts below are the plan's (auto may drop the whole-layer buffer).
        const shortPrefillTokens = randomInt(rng, 0, 1) === 1 ? 128 : 0;
        // The plan of a budget that holds every expert (its fixed parts depend on the threads' scratch), then a random share of its slots.
        const probe = await openEngine({
          model: file,
          threads,
          contextTokens: 128,
          heat: false,
          memoryBudgetBytes: 1 << 30,
          shortPrefillTokens,
        });
        const plan = probe.memoryPlan!;
        await probe.close();
        const fixed = fixedPlanBytes(plan);
        const layers =
          plan.slotsPerLayer > 0 ? Math.round(plan.parts.slots / (plan.slotsPerLayer * plan.slotStrideBytes)) : 1;
        const slots = randomInt(rng, 1, Math.max(1, plan.slotsPerLayer - 1));
        const budget = fixed + slots * layers * plan.slotStrideBytes + randomInt(rng, 0, plan.slotStrideBytes - 1);
        const config = {
          memoryBudgetBytes: budget,
          disk: { admitMisses: randomInt(rng, 0, 1) === 1 },
          lfru: { tickTokens: randomInt(rng, 1, 6) },
          threads,
          shortPrefillTokens,
        };
        const engine = await openEngine({ model: file, contextTokens: 128, heat: false, ...config });
        try {
          expect(engine.memoryPlan!.slotsPerLayer, JSON.stringify(config)).toBe(slots);
          expect(
            await collect(engine, ids, { maxTokens: o.maxTokens, stopAtEos: false }),
            JSON.stringify(config),
          ).toEqual(reference);
          const s = engine.tierStats()!;
          expect(s.lazyMisses).toBe(0); // never from the mapping
          expect(s.leases).toBe(0);
          streamed += s.streamedReads!;
          admitted += s.admittedReads!;
        } finally {
          await engine.close();
        }
      }
      // The cases ran both kinds of read.
      expect(streamed).toBeGreaterThan(0);
      expect(admitted).toBeGreaterThan(0);
    },
    o.timeoutMs,
  );
}
