/**
 * The expert tier on a k-quant mix through openEngine (issue 16 point 2): llama-quantize's Q4_K_M
 * gives some layers' ffn_down Q6_K (use_more_bits: layers 0, 3, 6, 7 of 8), so experts differ in
 * size between layers and a slot takes the largest. There is no exact int8 host copy of a k-quant
 * expert: misses are computed from the container. The tokens must not depend on the budget, the
 * backend or the policy.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { expertContainerBytes } from '../../src/engine/tier/experts.js';
import { writeGguf } from '../../src/model/gguf/writer.js';
import type { HParams } from '../../src/model/types.js';
import { PlantedModel } from '../../src/synth/planted.js';
import { synthMetadata } from '../../src/synth/metadata.js';
import { presetHParams } from '../../src/synth/presets.js';
import { buildVocab } from '../../src/synth/vocab.js';
import { synthTensors } from '../../src/synth/weights.js';
import { collect, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-kquant-tier-');
afterAll(cleanup);
/** Every row a multiple of 256 (real k-quants, no fallback types), 8 layers for use_more_bits. */
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
const model = join(dir, 'q4_k_m.gguf');
const maxTokens = 24;
let reference: number[];
let prompt: number[];

beforeAll(async () => {
  const vocab = buildVocab('gpt2', hp.nVocab, 4, 1);
  await writeGguf(
    model,
    synthMetadata(hp, vocab, 'kquant-tier'),
    synthTensors(new PlantedModel(hp, vocab, 1, 'planted'), 'q4_k_m'),
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

describe('tier on a Q4_K_M mix', () => {
  it('the mix gives layers of two expert sizes (Q6_K down where use_more_bits holds)', async () => {
    const e = await openEngine({ model, threads: 1, contextTokens: 128, slotsPerLayer: 2, heat: false });
    try {
      const { file, hparams } = (
        e as unknown as { model: { file: Parameters<typeof expertContainerBytes>[0]; hparams: HParams } }
      ).model;
      const downTypes = new Set(
        Array.from({ length: hparams.nLayer }, (_, l) => file.tensors.get(`blk.${l}.ffn_down_exps.weight`)!.type),
      );
      expect([...downTypes].sort()).toEqual(['Q4_K', 'Q6_K']);
      // The slot size is the largest layer's expert, and the layers do differ.
      const perLayer = Array.from({ length: hparams.nLayer }, (_, l) =>
        ['gate', 'up', 'down'].reduce(
          (sum, m) => sum + file.tensors.get(`blk.${l}.ffn_${m}_exps.weight`)!.byteLength / hparams.nExpert,
          0,
        ),
      );
      expect(new Set(perLayer).size).toBeGreaterThan(1);
      expect(expertContainerBytes(file, hparams)).toBe(Math.max(...perLayer));
      expect(e.hostCopies()).toBeUndefined(); // no host copies: misses read the container
    } finally {
      await e.close();
    }
  });

  const cases: Array<[string, Partial<EngineOptions>]> = [
    ['cpu, 1 slot', { slotsPerLayer: 1 }],
    ['cpu, 37 %, replan', { resident: 0.37, prefillReplan: { enabled: true } }],
    ['cpu, every expert', { slotsPerLayer: 8 }],
    ['fake, 3 slots', { backend: 'fake', slotsPerLayer: 3 }],
    ['disk, 2 slots', { backend: 'disk', slotsPerLayer: 2 }],
    ['cpu, 2 slots, dlfu', { slotsPerLayer: 2, placementPolicy: 'dlfu' }],
  ];
  it.each(cases)('%s: the tokens of the engine without a tier', async (_name, o) => {
    const e = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, ...o });
    try {
      expect(await collect(e, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      if (o.slotsPerLayer !== 8) expect(e.lastStats!.decodeHitRate).toBeLessThan(1);
    } finally {
      await e.close();
    }
  });
});
