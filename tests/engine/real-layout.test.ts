/**
 * Real-file layouts through the public path (issue 16 point 3): files written with the metadata
 * llama.cpp's convert_hf_to_gguf.py writes for each architecture (tests/fixtures/converted-layout.ts)
 * open with openEngine and generate the very tokens of the synthetic file with every key; files
 * whose optional keys are all absent (llama.cpp's defaults apply) do too. Layouts and tensor types
 * the engine cannot compute are refused by name, with nothing left mapped. A published-style Q4_0
 * file (Q6_K output head) loads and computes as the reference does.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UnsupportedModelError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { writeGguf } from '../../src/model/gguf/writer.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { readHParams } from '../../src/model/hparams.js';
import { quantizeRow, rowBytes } from '../../src/model/quant.js';
import type { Arch, HParams } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { synthMetadata } from '../../src/synth/metadata.js';
import { PlantedModel } from '../../src/synth/planted.js';
import { presetHParams } from '../../src/synth/presets.js';
import { buildVocab } from '../../src/synth/vocab.js';
import { synthTensors } from '../../src/synth/weights.js';
import { relativeError } from '../native/forward-helpers.js';
import { convertedTensors, tinySynth, writeConverted } from '../fixtures/converted-layout.js';
import { collect, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-real-layout-');
afterAll(cleanup);

const PROMPT = 'red green blue';
const TOKENS = 6;

async function tokensOf(model: string): Promise<number[]> {
  const engine = await openEngine({ model, threads: 1, contextTokens: 64, heat: false });
  try {
    return await collect(engine, PROMPT, { maxTokens: TOKENS, stopAtEos: false });
  } finally {
    await engine.close();
  }
}

const mappingsOf = (file: string): number =>
  readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .filter((l) => l.endsWith(file)).length;

async function refusal(model: string): Promise<Error> {
  const error = await openEngine({ model, threads: 1, heat: false }).then(
    async (engine) => {
      await engine.close();
      return undefined;
    },
    (e: unknown) => e as Error,
  );
  if (error === undefined) throw new Error(`expected openEngine to refuse ${model}`);
  expect(mappingsOf(model)).toBe(0);
  return error;
}

/** Optional keys whose llama.cpp default equals the tiny preset's value, per arch. */
const DEFAULTED: Record<Arch, string[]> = {
  qwen3moe: ['rope.freq_base', 'expert_feed_forward_length'],
  qwen2moe: ['rope.freq_base', 'expert_feed_forward_length', 'expert_shared_feed_forward_length'],
  olmoe: ['rope.freq_base', 'attention.head_count_kv'],
  llama: ['rope.freq_base', 'rope.dimension_count', 'vocab_size'],
  glm4moe: ['rope.freq_base', 'leading_dense_block_count', 'nextn_predict_layers', 'expert_gating_func'],
  // llama.cpp's openai_moe never reads feed_forward_length (its experts are expert_feed_forward_length wide).
  'gpt-oss': ['feed_forward_length'],
  // Tiny deepseek2 has V2-Lite's softmax routing, no q-LoRA, groups or scale.
  deepseek2: ['rope.freq_base', 'expert_gating_func', 'expert_weights_scale'],
};

describe("real-file layouts generate the synthetic model's tokens", () => {
  for (const arch of ['olmoe', 'qwen2moe', 'qwen3moe', 'llama', 'glm4moe', 'gpt-oss', 'deepseek2'] as Arch[]) {
    it(`${arch}: the converter's keys, then every optional key absent`, async () => {
      const model = tinySynth(arch);
      const full = path.join(dir, `${arch}-full.gguf`);
      await writeGguf(full, model.metadata, model.tensors, { alignment: 32 });
      const expected = await tokensOf(full);
      expect(expected).toHaveLength(TOKENS);
      const converted = await writeConverted(model, path.join(dir, `${arch}-converted.gguf`));
      expect(await tokensOf(converted)).toEqual(expected);
      const bare = await writeConverted(model, path.join(dir, `${arch}-bare.gguf`), { drop: DEFAULTED[arch] });
      expect(await tokensOf(bare)).toEqual(expected);
    }, 60_000);
  }

  it('olmoe: feed_forward_length sizes the experts, as in llama.cpp, whatever expert_feed_forward_length says', async () => {
    const model = tinySynth('olmoe');
    const expected = await tokensOf(await writeConverted(model, path.join(dir, 'olmoe-ref.gguf')));
    const stray = await writeConverted(model, path.join(dir, 'olmoe-stray.gguf'), {
      set: [['olmoe.expert_feed_forward_length', { type: 'u32', value: 4 * model.hparams.nFfExp }]],
    });
    expect(await tokensOf(stray)).toEqual(expected);
  }, 60_000);

  it('qwen2moe: the shared-expert gate as [nEmbd] and as [nEmbd, 1] computes the same', async () => {
    const model = tinySynth('qwen2moe');
    const flat = await writeConverted(model, path.join(dir, 'qwen2moe-flat.gguf'), {
      tensors: (ts) =>
        ts.map((t) => (t.name.endsWith('ffn_gate_inp_shexp.weight') ? { ...t, dims: [model.hparams.nEmbd] } : t)),
    });
    const column = await writeConverted(model, path.join(dir, 'qwen2moe-column.gguf'));
    expect(convertedTensors(model).find((t) => t.name === 'blk.0.ffn_gate_inp_shexp.weight')?.dims).toEqual([
      model.hparams.nEmbd,
      1,
    ]);
    expect(await tokensOf(column)).toEqual(await tokensOf(flat));
  }, 60_000);

  // Published Q4_0 files keep output.weight in Q6_K: llama-quantize gives the output tensor Q6_K
  // for every ftype below Q8_0 unless --pure (llama_tensor_get_type_impl), so `gen-model --quant
  // q4_0` (pure) never writes one. Rows are 256 wide so the Q6_K is real (no Q8_0 fallback).
  it('a Q4_0 file whose output.weight is Q6_K (as published) loads, computes the head as the reference does, and keeps Q4_0 host copies', async () => {
    const file = await writeQ4_0WithQ6KOutput(path.join(dir, 'q4_0-q6k-output.gguf'));
    const parsed = parseGguf(new Uint8Array(readFileSync(file)), file);
    expect(parsed.tensors.get('output.weight')?.type).toBe('Q6_K');
    expect(parsed.tensors.get('blk.0.ffn_up_exps.weight')?.type).toBe('Q4_0');
    const prompt = [5, 17, 3, 90, 42, 7];
    const reference = createReferenceSession(
      { hparams: readHParams(parsed), tensors: parsed.tensors, bytes: parsed.bytes },
      32,
    ).eval(prompt).logits;
    const engine = await openEngine({ model: file, threads: 1, contextTokens: 64, heat: false });
    let plain: number[];
    try {
      const logits = await engine.logits(prompt);
      // Q8_0 / Q8_K activations against the f32 reference: the tolerance of tests/native/forward.test.ts.
      expect(relativeError(logits, reference[prompt.length - 1])).toBeLessThan(5e-2);
      plain = await collect(engine, prompt, { maxTokens: TOKENS, stopAtEos: false });
      expect(plain).toHaveLength(TOKENS);
    } finally {
      await engine.close();
    }
    // The head's type does not make the experts' host copies exact or not: they are all Q4_0.
    const tiered = await openEngine({ model: file, threads: 1, contextTokens: 64, heat: false, slotsPerLayer: 2 });
    try {
      expect(await collect(tiered, prompt, { maxTokens: TOKENS, stopAtEos: false })).toEqual(plain);
      expect(tiered.hostCopies()).toBeDefined();
    } finally {
      await tiered.close();
    }
  }, 60_000);
});

describe('what the engine cannot compute is refused by name', () => {
  it('Mixtral with one tensor per expert (blk.N.ffn_gate.E.weight): UnsupportedModelError naming the layout', async () => {
    const model = tinySynth('llama');
    const { nExpert } = model.hparams;
    const file = await writeConverted(model, path.join(dir, 'mixtral-split.gguf'), {
      tensors: (ts) =>
        ts.flatMap((t) => {
          const m = /^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$/.exec(t.name);
          if (!m) return [t];
          const bytes = t.data();
          const each = bytes.length / nExpert;
          return Array.from({ length: nExpert }, (_, e) => ({
            name: `blk.${m[1]}.ffn_${m[2]}.${e}.weight`,
            type: t.type,
            dims: t.dims.slice(0, 2),
            data: () => bytes.subarray(e * each, (e + 1) * each),
          }));
        }),
    });
    const error = await refusal(file);
    expect(error).toBeInstanceOf(UnsupportedModelError);
    expect(error.message).toContain(
      'tensor blk.0.ffn_gate.0.weight: expected merged expert tensors (blk.N.ffn_gate_exps.weight',
    );
    expect(error.message).toContain('one tensor per expert');
  }, 60_000);

  it('a tensor of an IQ type (IQ2_XXS, ggml type 16): UnsupportedModelError naming the tensor and its type', async () => {
    const file = await writeConverted(tinySynth('qwen3moe'), path.join(dir, 'iq2.gguf'));
    retypeTensor(file, 'blk.1.ffn_down_exps.weight', 16);
    const error = await refusal(file);
    expect(error).toBeInstanceOf(UnsupportedModelError);
    expect(error.message).toContain('tensor blk.1.ffn_down_exps.weight: expected a tensor type among');
    expect(error.message).toContain('got IQ2_XXS (ggml type 16)');
  }, 60_000);
});

/** A 256-wide qwen3moe in plain Q4_0 whose output.weight is the same f32 head quantised to Q6_K. */
async function writeQ4_0WithQ6KOutput(file: string): Promise<string> {
  const hp: HParams = {
    ...presetHParams('tiny', 'qwen3moe'),
    nEmbd: 256,
    nLayer: 2,
    nExpert: 8,
    nExpertUsed: 2,
    nFfExp: 256,
    nHead: 4,
    nHeadKv: 2,
    headDim: 64,
    nVocab: 1024,
  };
  const vocab = buildVocab('gpt2', hp.nVocab, 4, 1);
  const plant = new PlantedModel(hp, vocab, 1, 'planted');
  const f32Head = synthTensors(plant, 'f32').find((t) => t.name === 'output.weight')!;
  const tensors = synthTensors(plant, 'q4_0').map((t) =>
    t.name !== 'output.weight'
      ? t
      : {
          ...t,
          type: 'Q6_K' as const,
          data: () => requantize(f32Head.data(), t.dims[0], 'Q6_K'),
        },
  );
  await writeGguf(file, synthMetadata(hp, vocab, 'q4_0-q6k-output'), tensors, { alignment: 32 });
  return file;
}

function requantize(f32: Uint8Array, cols: number, type: 'Q6_K'): Uint8Array {
  const values = new Float32Array(f32.buffer.slice(f32.byteOffset, f32.byteOffset + f32.byteLength));
  const rows = values.length / cols;
  const out = new Uint8Array(rows * rowBytes(type, cols));
  for (let r = 0; r < rows; r++) quantizeRow(type, values, r * cols, cols, out, r * rowBytes(type, cols));
  return out;
}

/**
 * Overwrites a tensor's ggml type id in the header (the writer only writes types moetier reads).
 * Tensor info: u64 name length | name | u32 n_dims | u64 dims[n_dims] | u32 type | u64 offset.
 */
function retypeTensor(file: string, name: string, typeId: number): void {
  const bytes = readFileSync(file);
  const key = Buffer.alloc(8 + Buffer.byteLength(name));
  key.writeBigUInt64LE(BigInt(Buffer.byteLength(name)));
  key.write(name, 8);
  const at = bytes.indexOf(key);
  expect(at).toBeGreaterThan(0);
  const nDims = bytes.readUInt32LE(at + key.length);
  bytes.writeUInt32LE(typeId, at + key.length + 4 + 8 * nDims);
  writeFileSync(file, bytes);
}
