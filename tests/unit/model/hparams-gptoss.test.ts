/**
 * gpt-oss's keys as llama.cpp's llama_model_openai_moe::load_arch_hparams reads them (issue 30): a
 * converter-shaped file (conversion/gpt_oss.py: sliding_window, expert_feed_forward_length, HF's yarn
 * rope scaling) gives gen-model's hyper-parameters back, with the layer llama.cpp fixes for the arch
 * (sinks, q/k/v/o biases, router bias, softmax over the top-k logits, expert biases, swiglu_oai);
 * the window's period defaults to 2 and is read when present; a missing window and a separate SWA
 * rope base are refused by name; MXFP4 experts (ggml type 39) are read, a type moetier does not read
 * (Q4_1) is refused naming the tensor and type.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError, UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import type { GgufTypedValue } from '../../../src/model/gguf/values.js';
import { readHParams } from '../../../src/model/hparams.js';
import type { GgufFile } from '../../../src/model/types.js';
import { tinySynth, writeConverted, type LayoutEdit } from '../../fixtures/converted-layout.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-gptoss-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function bytesOf(edit: LayoutEdit = {}): Promise<{ bytes: Uint8Array; path: string }> {
  const path = await writeConverted(tinySynth('gpt-oss'), join(dir, `m${n++}.gguf`), edit);
  return { bytes: new Uint8Array(await readFile(path)), path };
}
async function build(edit: LayoutEdit = {}): Promise<GgufFile> {
  const { bytes, path } = await bytesOf(edit);
  return parseGguf(bytes, path);
}
const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value });
const f32 = (value: number): GgufTypedValue => ({ type: 'f32', value });

async function refusal(load: () => Promise<unknown>): Promise<unknown> {
  try {
    await load();
  } catch (e) {
    return e;
  }
  return undefined;
}

describe('readHParams: gpt-oss', () => {
  it("gives gen-model's hyper-parameters back", async () => {
    const hp = tinySynth('gpt-oss').hparams;
    const read = readHParams(await build());
    expect(read).toEqual({ ...hp, rmsEps: Math.fround(hp.rmsEps) });
    expect(read).toMatchObject({
      gating: 'softmax_weight',
      routerBias: true,
      normTopK: false,
      attnBias: true,
      attnOutBias: true,
      attnSinks: true,
      expertFfnBias: true,
      expertAct: 'swiglu_oai',
      ffnNorm: 'post_attention_norm',
      slidingWindow: { window: 8, period: 2 },
      ropeScaling: { type: 'yarn', factor: 32, origContext: 4096 },
      sharedExpert: false,
    });
  });

  it('reads sliding_window_pattern; refuses a missing window and a separate SWA rope base', async () => {
    const period = readHParams(await build({ set: [['gpt-oss.attention.sliding_window_pattern', u32(3)]] }));
    expect(period.slidingWindow).toEqual({ window: 8, period: 3 });
    const missing = await refusal(async () => readHParams(await build({ drop: ['attention.sliding_window'] })));
    expect(missing).toBeInstanceOf(GgufFormatError);
    expect(String(missing)).toMatch(/gpt-oss\.attention\.sliding_window/);
    const swa = await refusal(async () => readHParams(await build({ set: [['gpt-oss.rope.freq_base_swa', f32(5)]] })));
    expect(swa).toBeInstanceOf(UnsupportedModelError);
    expect(String(swa)).toMatch(/key gpt-oss\.rope\.freq_base_swa: expected rope\.freq_base 150000/);
  });

  it('reads MXFP4 experts (ggml type 39); refuses Q4_1 ones (type 3) naming the tensor and the type', async () => {
    const { bytes, path } = await bytesOf();
    // The tensor info after the name "blk.0.ffn_up_exps.weight": n_dims u32, 3 dims u64, then the type u32.
    const name = new TextEncoder().encode('blk.0.ffn_up_exps.weight');
    const at = Buffer.from(bytes).indexOf(Buffer.from(name)) + name.length + 4 + 3 * 8;
    const view = new DataView(bytes.buffer, bytes.byteOffset);
    expect(view.getUint32(at, true)).toBe(8); // Q8_0: the field found
    view.setUint32(at, 39, true); // 17 bytes a block where Q8_0 has 34: a smaller tensor, still inside the file
    expect(parseGguf(bytes, path).tensors.get('blk.0.ffn_up_exps.weight')!.type).toBe('MXFP4');
    view.setUint32(at, 3, true);
    const refused = await refusal(async () => parseGguf(bytes, path));
    expect(refused).toBeInstanceOf(UnsupportedModelError);
    expect(String(refused)).toMatch(/tensor blk\.0\.ffn_up_exps\.weight: .*got Q4_1 \(ggml type 3\)/);
  });
});
