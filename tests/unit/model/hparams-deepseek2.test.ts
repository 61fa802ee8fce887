/**
 * deepseek2's keys as llama.cpp's llama_model_deepseek2::load_arch_hparams and graph read them (issue
 * 30, item 2): a converter-shaped file gives gen-model's hyper-parameters back (latent attention's
 * ranks and head split, the scores' scale, a leading dense layer, two ungated shared experts, V2-Lite's
 * softmax routing); YaRN with DeepSeek's log multiplier moves its magnitude from cos / sin into the
 * scores' scale (V2-Lite's numbers); files from before the MLA split and attention temperature tuning
 * are refused by name.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import type { GgufTypedValue } from '../../../src/model/gguf/values.js';
import { readHParams } from '../../../src/model/hparams.js';
import { ropeTable } from '../../../src/model/rope.js';
import type { GgufFile } from '../../../src/model/types.js';
import { tinySynth, writeConverted, type LayoutEdit } from '../../fixtures/converted-layout.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-ds2-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function build(edit: LayoutEdit = {}): Promise<GgufFile> {
  const path = await writeConverted(tinySynth('deepseek2'), join(dir, `m${n++}.gguf`), edit);
  return parseGguf(new Uint8Array(await readFile(path)), path);
}
const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value });
const f32 = (value: number): GgufTypedValue => ({ type: 'f32', value });

describe('readHParams: deepseek2', () => {
  it("gives gen-model's hyper-parameters back", async () => {
    const hp = tinySynth('deepseek2').hparams;
    const read = readHParams(await build());
    expect(read).toEqual({ ...hp, rmsEps: Math.fround(hp.rmsEps) });
    expect(read).toMatchObject({
      headDim: 80, // the cached row: a latent of 64 and a shared roped key of 16
      nHeadKv: 1,
      ropeDims: 16,
      ropeType: 'norm',
      mla: { qLora: 0, kvLora: 64, nope: 32, vHead: 32 },
      attnScale: 1 / Math.sqrt(48),
      denseLayers: { count: 1, nFf: 4 * hp.nFfExp },
      sharedExpert: true,
      sharedExpertGate: false,
      nFfShexp: 2 * hp.nFfExp,
      gating: 'softmax',
      normTopK: false,
    });
  });

  it("YaRN with a log multiplier: V2-Lite's scale (mscale^2 / sqrt(key_length_mla)) and cos / sin unscaled", async () => {
    const read = readHParams(
      await build({
        set: [
          ['deepseek2.rope.scaling.type', { type: 'string', value: 'yarn' }],
          ['deepseek2.rope.scaling.factor', f32(40)],
          ['deepseek2.rope.scaling.original_context_length', u32(4096)],
          ['deepseek2.rope.scaling.yarn_log_multiplier', f32(0.0707)],
        ],
      }),
    );
    const mscale = 1 + 0.1 * (Math.fround(0.0707) / 0.1) * Math.log(40); // V2-Lite: 1.2608
    expect(mscale).toBeCloseTo(1.2608, 4);
    expect(read.attnScale).toBeCloseTo((mscale * mscale) / Math.sqrt(48), 12);
    expect(ropeTable(read).magnitude).toBe(1);
    // Without the multiplier, YaRN's magnitude stays on cos / sin and enters the scale as well (llama.cpp's graph).
    const plain = readHParams(
      await build({
        set: [
          ['deepseek2.rope.scaling.type', { type: 'string', value: 'yarn' }],
          ['deepseek2.rope.scaling.factor', f32(40)],
        ],
      }),
    );
    const m1 = 1 + 0.1 * Math.log(40);
    expect(ropeTable(plain).magnitude).toBeCloseTo(m1, 6);
    expect(plain.attnScale).toBeCloseTo((m1 * m1) / Math.sqrt(48), 12);
  });

  it('refuses files from before the MLA split and attention temperature tuning, by name', async () => {
    const legacy = await build({ drop: ['attention.key_length_mla'] });
    expect(() => readHParams(legacy)).toThrow(UnsupportedModelError);
    expect(() => readHParams(legacy)).toThrow(/key deepseek2\.attention\.key_length_mla: expected an MLA file/);
    const tuned = await build({ set: [['deepseek2.attention.temperature_scale', f32(0.1)]] });
    expect(() => readHParams(tuned)).toThrow(/key deepseek2\.attention\.temperature_scale: expected none/);
  });
});
