/**
 * gpt-oss on the expert tiers (issue 30): gen-model's tiny gpt-oss in Q8_0 (sinks, a window of 8
 * on the even layers, YaRN x32, the router bias, softmax over the top-k logits, swiglu_oai, and
 * per-expert biases that stay in the model's memory while the tier moves only the expert matrices)
 * gives the untiered engine's tokens on cpu slots (2 of 8 a layer) and on the disk tier under
 * memory budgets of 1 and 4 slots a layer. The text and 24 tokens cross the window. A device
 * backend's resident experts (Down (silu(Gate x) * (Up x)) only) are refused by name when they run.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-gptoss-tier-');
afterAll(cleanup);
const text = 'the ship sails over the deep sea and the crew sings';
const options = { maxTokens: 24, stopAtEos: false };
let model: string;
let reference: number[];
beforeAll(async () => {
  model = path.join(dir, 'tiny-gpt-oss.gguf');
  await writeSynthModel({ preset: 'tiny', arch: 'gpt-oss', quant: 'q8_0', seed: 3 }, model);
  const plain = await openEngine({ model, threads: 2, contextTokens: 128 });
  try {
    reference = await collect(plain, plain.tokenize(text), options);
  } finally {
    await plain.close();
  }
});

describe('gpt-oss on the tiers', () => {
  it('cpu slots: the untiered tokens', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 128, slotsPerLayer: 2, heat: false });
    try {
      expect(await collect(engine, engine.tokenize(text), options)).toEqual(reference);
      expect(engine.tierStats()!.misses).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });

  it('a device backend (cuda-sim): its resident experts would skip the biases and swiglu_oai, so the eval fails by name', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 128, backend: 'cuda-sim', slotsPerLayer: 3 });
    try {
      await expect(collect(engine, engine.tokenize(text), options)).rejects.toThrow(/swiglu_oai.*use the cpu expert/);
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
        expect(engine.tierStats()!.misses).toBeGreaterThan(0);
      } finally {
        await engine.close();
      }
    }
  });
});
