/**
 * The architectures of issue 30 on the expert tiers: gen-model's tiny file of each gives the untiered
 * engine's tokens on cpu slots (2 of 8 a layer) and on the disk tier under memory budgets of 1 and 4
 * slots a layer.
 *   glm4moe    GLM-4.5's layer: sigmoid routing with the selection bias, x2.5, an ungated shared
 *              expert, partial rotary
 *   deepseek2  latent attention with its one cached row per token, a leading dense layer (so 3 MoE
 *              layers of slots), two ungated shared experts, V2-Lite's softmax routing
 *   gpt-oss    sinks, a window of 8 on the even layers (the text and 24 tokens cross it), YaRN x32,
 *              the router bias, softmax over the top-k logits, swiglu_oai, per-expert biases that stay
 *              in the model's memory while the tier moves only the expert matrices; a device backend's
 *              resident experts (Down (silu(Gate x) * (Up x)) only) are refused by name when they run
 */
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { moeLayers, type Arch } from '../../src/model/types.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-arch-tiers-');
afterAll(cleanup);
const text = 'the ship sails over the deep sea and the crew sings';
const options = { maxTokens: 24, stopAtEos: false };

/** The arch's tiny file and the untiered engine's tokens for `text`. */
async function untiered(arch: Arch): Promise<{ model: string; reference: number[] }> {
  const model = path.join(dir, `tiny-${arch}.gguf`);
  await writeSynthModel({ preset: 'tiny', arch, quant: 'q8_0', seed: 3 }, model);
  const plain = await openEngine({ model, threads: 2, contextTokens: 128 });
  try {
    return { model, reference: await collect(plain, plain.tokenize(text), options) };
  } finally {
    await plain.close();
  }
}

describe.each(['glm4moe', 'deepseek2', 'gpt-oss'] as const)('%s on the tiers', (arch) => {
  it('cpu slots, then the disk tier under 1 and 4 slots a layer: the untiered tokens', async () => {
    const { model, reference } = await untiered(arch);
    const slotted = await openEngine({ model, threads: 2, contextTokens: 128, slotsPerLayer: 2, heat: false });
    const moe = moeLayers(slotted.hparams);
    try {
      expect(await collect(slotted, slotted.tokenize(text), options)).toEqual(reference);
      expect(slotted.tierStats()!.misses).toBeGreaterThan(0);
      expect(slotted.tierStats()!.slotsBudget).toEqual(new Array<number>(moe).fill(2));
    } finally {
      await slotted.close();
    }
    const probe = await openEngine({ model, threads: 2, contextTokens: 128, memoryBudgetBytes: 1 << 30 });
    const plan = probe.memoryPlan!;
    await probe.close();
    for (const slots of [1, 4]) {
      const engine = await openEngine({
        model,
        threads: 2,
        contextTokens: 128,
        heat: false,
        memoryBudgetBytes: fixedPlanBytes(plan) + slots * moe * plan.slotStrideBytes,
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

  it.runIf(arch === 'gpt-oss')(
    'a device backend (cuda-sim): its resident experts would skip the biases and swiglu_oai, so the eval fails by name',
    async () => {
      const { model } = await untiered(arch);
      const engine = await openEngine({ model, threads: 2, contextTokens: 128, backend: 'cuda-sim', slotsPerLayer: 3 });
      try {
        await expect(collect(engine, engine.tokenize(text), options)).rejects.toThrow(/swiglu_oai.*use the cpu expert/);
      } finally {
        await engine.close();
      }
    },
  );
});
