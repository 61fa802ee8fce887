/**
 * glm4moe on the expert tiers (issue 30, item 6): gen-model's tiny glm4moe (GLM-4.5's layer:
 * sigmoid routing with the selection bias, x2.5, ungated shared expert, partial rotary) gives
 * the untiered engine's tokens on cpu slots (2 of 8 a layer) and on the disk tier under memory
 * budgets of 1 and 4 slots a layer.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-glm4moe-tier-');
afterAll(cleanup);
const text = 'the ship sails over the deep sea and the crew sings';
const options = { maxTokens: 24, stopAtEos: false };
let model: string;
let reference: number[];
beforeAll(async () => {
  model = path.join(dir, 'tiny-glm4moe.gguf');
  await writeSynthModel({ preset: 'tiny', arch: 'glm4moe', quant: 'q8_0', seed: 3 }, model);
  const plain = await openEngine({ model, threads: 2, contextTokens: 128 });
  try {
    reference = await collect(plain, plain.tokenize(text), options);
  } finally {
    await plain.close();
  }
});

describe('glm4moe on the tiers', () => {
  it('cpu slots: the untiered tokens', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 128, slotsPerLayer: 2, heat: false });
    try {
      expect(await collect(engine, engine.tokenize(text), options)).toEqual(reference);
      expect(engine.tierStats()!.misses).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });

  it('the disk tier under a memory budget: the untiered tokens', async () => {
    const probe = await openEngine({ model, threads: 2, contextTokens: 128, memoryBudgetBytes: 1 << 30 });
    const plan = probe.memoryPlan!;
    await probe.close();
    for (const slots of [1, 4]) {
      const engine = await openEngine({
        model,
        threads: 2,
        contextTokens: 128,
        heat: false,
        memoryBudgetBytes: fixedPlanBytes(plan) + slots * 4 * plan.slotStrideBytes,
      });
      try {
        expect(engine.config.tier?.backend).toBe('disk');
        expect(await collect(engine, engine.tokenize(text), options)).toEqual(reference);
      } finally {
        await engine.close();
      }
    }
  });
});
