/**
 * glm4moe's keys as llama.cpp's llama_model_glm4_moe::load_arch_hparams reads them (issue 30, item 3):
 * a converter-shaped file gives gen-model's hyper-parameters back (sigmoid routing with the
 * selection bias, renormalised and scaled, the ungated shared expert of expert_shared_count
 * experts, partial rotary, post_attention_norm); the NextN blocks are not part of the trunk;
 * leading dense layers are read with feed_forward_length as their width, and at least one layer
 * must keep its experts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import type { GgufTypedValue } from '../../../src/model/gguf/values.js';
import { readHParams } from '../../../src/model/hparams.js';
import type { GgufFile } from '../../../src/model/types.js';
import { tinySynth, writeConverted, type LayoutEdit } from '../../fixtures/converted-layout.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-glm-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function build(edit: LayoutEdit = {}): Promise<GgufFile> {
  const path = await writeConverted(tinySynth('glm4moe'), join(dir, `m${n++}.gguf`), edit);
  return parseGguf(new Uint8Array(await readFile(path)), path);
}
const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value });

describe('readHParams: glm4moe', () => {
  it("gives gen-model's hyper-parameters back", async () => {
    const hp = tinySynth('glm4moe').hparams;
    const read = readHParams(await build());
    expect(read).toEqual({ ...hp, rmsEps: Math.fround(hp.rmsEps) });
    expect(read).toMatchObject({
      gating: 'sigmoid',
      expertBias: true,
      normTopK: true,
      expertWeightsScale: 2.5,
      sharedExpert: true,
      sharedExpertGate: false,
      nFfShexp: hp.nFfExp,
      ffnNorm: 'post_attention_norm',
      ropeDims: hp.headDim / 2,
      attnBias: true,
      qkNorm: 'none',
    });
  });

  it('leaves the NextN blocks out of the trunk, reads softmax gating and leading dense layers', async () => {
    const blocks = tinySynth('glm4moe').hparams.nLayer;
    const nextn = readHParams(await build({ set: [['glm4moe.nextn_predict_layers', u32(1)]] }));
    expect(nextn.nLayer).toBe(blocks - 1);
    const softmax = readHParams(await build({ set: [['glm4moe.expert_gating_func', u32(1)]] }));
    expect(softmax.gating).toBe('softmax');
    // A file that declares a dense layer 0 must hold its FFN (gen-model's tiny-dense does: the tier
    // tests read it); this one keeps layer 0's experts instead.
    await expect(
      build({
        set: [
          ['glm4moe.leading_dense_block_count', u32(1)],
          ['glm4moe.feed_forward_length', u32(96)],
        ],
      }).then(readHParams),
    ).rejects.toThrow(
      /tensor blk\.0\.ffn_gate\.weight: expected a tensor of dims \[64, 96\], which glm4moe needs, but it is missing/,
    );
    let refused: unknown;
    try {
      readHParams(await build({ set: [['glm4moe.leading_dense_block_count', u32(blocks)]] }));
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(GgufFormatError); // every layer dense: no MoE layer left
    expect(String(refused)).toMatch(/key glm4moe\.leading_dense_block_count: expected/);
  });
});
