/**
 * deepseek2 on the expert tiers (issue 30, items 2 and 6): gen-model's tiny deepseek2 (latent
 * attention with its one cached row per token, a leading dense layer, two ungated shared experts,
 * V2-Lite's softmax routing) gives the untiered engine's tokens on cpu slots (2 of 8 a layer) and on
 * the disk tier under memory budgets of 1 and 4 slots a layer.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-deepseek2-tier-');
afterAll(cleanup);
const text = 'the ship sails over the deep sea and the crew sings';
const options = { maxTokens: 24, stopAtEos: false };
let model: string;
let reference: number[];
beforeAll(async () => {
  model = path.join(dir, 'tiny-deepseek2.gguf');
  await writeSynthModel({ preset: 'tiny', arch: 'deepseek2', quant: 'q8_0', seed: 3 }, model);
  const plain = await openEngine({ model, threads: 2, contextTokens: 128 });
  try {
    reference = await collect(plain, plain.tokenize(text), options);
  } finally {
    await plain.close();
  }
});

describe('deepseek2 on the tiers', () => {
  it('cpu slots: the untiered tokens', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 128, slotsPerLayer: 2, heat: false });
    try {
      expect(await collect(engine, engine.tokenize(text), options)).toEqual(reference);
      expect(engine.tierStats()!.misses).toBeGreaterThan(0);
      expect(engine.tierStats()!.slotsBudget).toEqual([2, 2, 2]); // 3 MoE layers after the dense one
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
        memoryBudgetBytes: fixedPlanBytes(plan) + slots * 3 * plan.slotStrideBytes,
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
