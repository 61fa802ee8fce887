/**
 * The expert tier on MXFP4 experts through openEngine (issue 30, gpt-oss's expert type): gen-model's
 * mxfp4 (llama-quantize's MXFP4_MOE: MXFP4 experts, the other matrices Q8_0). No exact int8 host copy
 * of an MXFP4 expert is made (host copies are for Q4_0 experts only: src/engine/tier/tier.ts
 * wantsHostCopies), so none is offered and misses are computed from the container. The tokens must not
 * depend on the budget, the backend or the policy:
 *  - a qwen3moe (Down (silu(Gate x) * (Up x)) experts, which every backend computes): cpu slots, the
 *    fake device, the cuda-sim device (residents run through the device's expert entry), the disk
 *    backend, and the disk tier under memoryBudgetBytes (misses read from the file);
 *  - gpt-oss itself (biases and swiglu_oai beside the MXFP4 matrices, which the device backends refuse
 *    by name: gptoss-tier.test.ts): cpu slots, and the disk tier under budgets of 1 and 4 slots a layer.
 */
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-mxfp4-tier-');
afterAll(cleanup);
const text = 'the ship will sail across the sea and the rocket will launch';
const options = { maxTokens: 24, stopAtEos: false };
const qwen = join(dir, 'tiny-qwen3moe-mxfp4.gguf');
const gptoss = join(dir, 'tiny-gpt-oss-mxfp4.gguf');
const reference = new Map<string, number[]>();

beforeAll(async () => {
  await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'mxfp4', seed: 1 }, qwen);
  await writeSynthModel({ preset: 'tiny', arch: 'gpt-oss', quant: 'mxfp4', seed: 3 }, gptoss);
  for (const model of [qwen, gptoss]) {
    const plain = await openEngine({ model, threads: 1, contextTokens: 128 });
    try {
      reference.set(model, await collect(plain, plain.tokenize(text), options));
    } finally {
      await plain.close();
    }
  }
}, 60_000);

/** The disk tier with `slots` a layer: the budget the memory plan gives them. */
async function diskTierEngine(model: string, slots: number, threads = 1) {
  const probe = await openEngine({ model, threads, contextTokens: 128, heat: false, memoryBudgetBytes: 1 << 30 });
  const plan = probe.memoryPlan!;
  await probe.close();
  const nLayer = 4; // the tiny preset
  return openEngine({
    model,
    threads,
    contextTokens: 128,
    heat: false,
    memoryBudgetBytes: fixedPlanBytes(plan) + slots * nLayer * plan.slotStrideBytes,
  });
}

describe('tier on MXFP4 experts', () => {
  it('the files hold MXFP4 gate / up / down in every layer; the tier offers no host copies', async () => {
    for (const model of [qwen, gptoss]) {
      const file = parseGguf(new Uint8Array(readFileSync(model)), model);
      for (let l = 0; l < 4; l++)
        for (const m of ['gate', 'up', 'down'])
          expect(file.tensors.get(`blk.${l}.ffn_${m}_exps.weight`)!.type, `${model} ${l} ${m}`).toBe('MXFP4');
      const e = await openEngine({ model, threads: 1, contextTokens: 128, slotsPerLayer: 2, heat: false });
      try {
        expect(e.hostCopies()).toBeUndefined();
      } finally {
        await e.close();
      }
    }
  });

  const cases: Array<[string, Partial<EngineOptions>]> = [
    ['cpu, 1 slot', { slotsPerLayer: 1 }],
    ['cpu, 2 slots, dlfu', { slotsPerLayer: 2, placementPolicy: 'dlfu' }],
    ['fake, 3 slots', { backend: 'fake', slotsPerLayer: 3 }],
    ['cuda-sim, 3 slots', { backend: 'cuda-sim', slotsPerLayer: 3, threads: 2 }],
    ['disk, 2 slots', { backend: 'disk', slotsPerLayer: 2 }],
  ];
  it.each(cases)('qwen3moe, %s: the tokens of the engine without a tier', async (_name, o) => {
    const e = await openEngine({ model: qwen, threads: 1, contextTokens: 128, heat: false, ...o });
    try {
      expect(await collect(e, e.tokenize(text), options)).toEqual(reference.get(qwen));
      expect(e.lastStats!.decodeHitRate).toBeLessThan(1);
    } finally {
      await e.close();
    }
  });

  it('qwen3moe, the disk tier (memoryBudgetBytes: 2 slots a layer, misses read from the file): the tokens of no budget', async () => {
    const e = await diskTierEngine(qwen, 2);
    try {
      expect(e.memoryPlan!.slotsPerLayer).toBe(2);
      expect(await collect(e, e.tokenize(text), options)).toEqual(reference.get(qwen));
      const s = e.tierStats()!;
      expect(s.streamedReads! + s.admittedReads!).toBeGreaterThan(0); // misses were read from the file
      expect(s.lazyMisses).toBe(0);
    } finally {
      await e.close();
    }
  });

  it('gpt-oss, cpu slots (2 of 8 a layer): the untiered tokens', async () => {
    const e = await openEngine({ model: gptoss, threads: 2, contextTokens: 128, slotsPerLayer: 2, heat: false });
    try {
      expect(await collect(e, e.tokenize(text), options)).toEqual(reference.get(gptoss));
      expect(e.tierStats()!.misses).toBeGreaterThan(0);
    } finally {
      await e.close();
    }
  });

  it('gpt-oss, the disk tier under 1 and 4 slots a layer: the untiered tokens', async () => {
    for (const slots of [1, 4]) {
      const e = await diskTierEngine(gptoss, slots, 2);
      try {
        expect(e.config.tier?.backend).toBe('disk');
        expect(e.memoryPlan!.slotsPerLayer).toBe(slots);
        expect(await collect(e, e.tokenize(text), options)).toEqual(reference.get(gptoss));
        expect(e.tierStats()!.misses).toBeGreaterThan(0);
      } finally {
        await e.close();
      }
    }
  });
});
