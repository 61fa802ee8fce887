/**
 * The expert tier on IQ4 experts through openEngine (issue 30 item 4): gen-model's iq4_xs mix on a
 * model whose rows are multiples of 256, so the experts are IQ4_XS itself (ffn_down of layer 0 Q5_K:
 * llama-quantize's rule below n_layer / 8 without an importance matrix, so the layers' experts differ
 * in size). No exact int8 host copy of an IQ4 expert exists: none is offered, misses are computed from
 * the container. The tokens must not depend on the budget, the backend or the policy: cpu slots, the
 * fake device, the cuda-sim device (residents run through the device's expert entry), the disk
 * backend, and the disk tier under memoryBudgetBytes (misses read from the file).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { writeGguf } from '../../src/model/gguf/writer.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import type { HParams } from '../../src/model/types.js';
import { PlantedModel } from '../../src/synth/planted.js';
import { synthMetadata } from '../../src/synth/metadata.js';
import { presetHParams } from '../../src/synth/presets.js';
import { buildVocab } from '../../src/synth/vocab.js';
import { synthTensors } from '../../src/synth/weights.js';
import { readFileSync } from 'node:fs';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-iq4-tier-');
afterAll(cleanup);
/** Every row a multiple of 256 (IQ4_XS itself, no IQ4_NL fallback), 8 layers. */
const hp: HParams = {
  ...presetHParams('tiny', 'qwen3moe'),
  nEmbd: 256,
  nLayer: 8,
  nExpert: 8,
  nExpertUsed: 2,
  nFfExp: 256,
  nHead: 4,
  nHeadKv: 2,
  headDim: 64,
  nVocab: 1024,
};
const model = join(dir, 'iq4_xs.gguf');
const maxTokens = 24;
let reference: number[];
let prompt: number[];

beforeAll(async () => {
  const vocab = buildVocab('gpt2', hp.nVocab, 4, 1);
  await writeGguf(
    model,
    synthMetadata(hp, vocab, 'iq4-tier'),
    synthTensors(new PlantedModel(hp, vocab, 1, 'planted'), 'iq4_xs'),
    { alignment: 32 },
  );
  const plain = await openEngine({ model, threads: 1, contextTokens: 128 });
  try {
    prompt = plain.tokenize('the ship will sail across the sea and the rocket will launch');
    reference = await collect(plain, prompt, { maxTokens, stopAtEos: false });
  } finally {
    await plain.close();
  }
}, 60_000);

describe('tier on IQ4_XS experts', () => {
  it('the file holds IQ4_XS gate / up / down (layer 0 down Q5_K); the tier offers no host copies', async () => {
    const file = parseGguf(new Uint8Array(readFileSync(model)), model);
    const type = (name: string): string => file.tensors.get(name)!.type;
    expect([
      type('blk.3.ffn_gate_exps.weight'),
      type('blk.3.ffn_up_exps.weight'),
      type('blk.3.ffn_down_exps.weight'),
    ]).toEqual(['IQ4_XS', 'IQ4_XS', 'IQ4_XS']);
    expect(type('blk.0.ffn_down_exps.weight')).toBe('Q5_K');
    const e = await openEngine({ model, threads: 1, contextTokens: 128, slotsPerLayer: 2, heat: false });
    try {
      expect(e.hostCopies()).toBeUndefined();
    } finally {
      await e.close();
    }
  });

  const cases: Array<[string, Partial<EngineOptions>]> = [
    ['cpu, 1 slot', { slotsPerLayer: 1 }],
    ['cpu, 2 slots, dlfu', { slotsPerLayer: 2, placementPolicy: 'dlfu' }],
    ['fake, 3 slots', { backend: 'fake', slotsPerLayer: 3 }],
    ['cuda-sim, 3 slots', { backend: 'cuda-sim', slotsPerLayer: 3, threads: 2 }],
    ['disk, 2 slots', { backend: 'disk', slotsPerLayer: 2 }],
  ];
  it.each(cases)('%s: the tokens of the engine without a tier', async (_name, o) => {
    const e = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, ...o });
    try {
      expect(await collect(e, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      expect(e.lastStats!.decodeHitRate).toBeLessThan(1);
    } finally {
      await e.close();
    }
  });

  it('the disk tier (memoryBudgetBytes: 2 slots a layer, misses read from the file): the tokens of no budget', async () => {
    const probe = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, memoryBudgetBytes: 1 << 30 });
    const plan = probe.memoryPlan!;
    await probe.close();
    const budget = fixedPlanBytes(plan) + 2 * hp.nLayer * plan.slotStrideBytes;
    const e = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, memoryBudgetBytes: budget });
    try {
      expect(e.memoryPlan!.slotsPerLayer).toBe(2);
      expect(await collect(e, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      const s = e.tierStats()!;
      expect(s.streamedReads! + s.admittedReads!).toBeGreaterThan(0); // misses were read from the file
      expect(s.lazyMisses).toBe(0);
    } finally {
      await e.close();
    }
  });
});
