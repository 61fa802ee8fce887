/**
 * readHParams follows llama.cpp's loader key by key (the table in src/model/hparams.ts): which keys
 * may be absent and what they then default to, which stay required, and what is refused rather
 * than run wrong. Files are converter-shaped (tests/fixtures/converted-layout.ts), parsed from disk.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError, UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import type { GgufTypedValue } from '../../../src/model/gguf/values.js';
import { readHParams } from '../../../src/model/hparams.js';
import type { Arch, GgufFile, HParams } from '../../../src/model/types.js';
import { tinySynth, writeConverted, type LayoutEdit } from '../../fixtures/converted-layout.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-hpd-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function build(arch: Arch, edit: LayoutEdit = {}): Promise<GgufFile> {
  const path = await writeConverted(tinySynth(arch), join(dir, `m${n++}.gguf`), edit);
  return parseGguf(new Uint8Array(await readFile(path)), path);
}

function refusal(file: GgufFile): Error {
  try {
    readHParams(file);
  } catch (error) {
    expect((error as Error).message).toContain(file.path);
    return error as Error;
  }
  throw new Error('expected readHParams to refuse the model');
}

const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value });
const f32 = (value: number): GgufTypedValue => ({ type: 'f32', value });
const str = (value: string): GgufTypedValue => ({ type: 'string', value });
const expected = (arch: Arch): HParams => {
  const hp = tinySynth(arch).hparams;
  return { ...hp, rmsEps: Math.fround(hp.rmsEps) };
};

describe("readHParams: the converter's keys give the synthetic hyper-parameters", () => {
  for (const arch of ['qwen3moe', 'qwen2moe', 'olmoe', 'llama'] as Arch[]) {
    it(arch, async () => {
      expect(readHParams(await build(arch))).toEqual(expected(arch));
    });
  }
});

describe("readHParams: llama.cpp's defaults for absent keys", () => {
  it('qwen3moe / qwen2moe: expert width = feed_forward_length / expert_used_count, shared width = feed_forward_length', async () => {
    for (const arch of ['qwen3moe', 'qwen2moe'] as Arch[]) {
      const got = readHParams(
        await build(arch, { drop: ['expert_feed_forward_length', 'expert_shared_feed_forward_length'] }),
      );
      expect(got.nFfExp).toBe(expected(arch).nFfExp);
      expect(got.nFfShexp).toBe(expected(arch).nFfShexp);
    }
  });

  it('olmoe and llama size experts from feed_forward_length; expert_feed_forward_length is not read', async () => {
    for (const arch of ['olmoe', 'llama'] as Arch[]) {
      const got = readHParams(await build(arch, { set: [[`${arch}.expert_feed_forward_length`, u32(999)]] }));
      expect(got.nFfExp).toBe(expected(arch).nFfExp);
    }
  });

  it('head_count_kv = head_count, key_length = value_length = embedding_length / head_count, rope.freq_base = 10000', async () => {
    // olmoe has no GQA (nHeadKv = nHead) and the tiny preset's rope base is 10000: the defaults reproduce it.
    const got = readHParams(await build('olmoe', { drop: ['attention.head_count_kv', 'rope.freq_base'] }));
    expect(got).toEqual(expected('olmoe'));
    expect(got.headDim).toBe(64 / 4);
    // qwen3moe has 2 kv heads of 4: without the key, k is sized for 4 and the tensor check says so.
    const noKv = refusal(await build('qwen3moe', { drop: ['attention.head_count_kv'] }));
    expect(noKv.message).toMatch(
      /tensor blk\.0\.attn_k\.weight: expected dims \[64, 64\] \(from the hyper-parameters\), got \[64, 32\]/,
    );
  });

  it('per-layer arrays (get_key_or_arr) are read when every layer agrees, refused when they differ', async () => {
    const arr = (values: number[]): GgufTypedValue => ({ type: 'array', itemType: 'u32', values });
    const same = await build('olmoe', {
      set: [
        ['olmoe.feed_forward_length', arr([32, 32, 32, 32])],
        ['olmoe.attention.head_count', arr([4, 4, 4, 4])],
      ],
    });
    expect(readHParams(same)).toEqual(expected('olmoe'));
    const differ = refusal(await build('olmoe', { set: [['olmoe.feed_forward_length', arr([32, 32, 64, 32])]] }));
    expect(differ).toBeInstanceOf(UnsupportedModelError);
    expect(differ.message).toMatch(
      /key olmoe\.feed_forward_length: expected the same value for every layer .* got \[32, 32, 64, 32\]/,
    );
    const short = refusal(await build('olmoe', { set: [['olmoe.feed_forward_length', arr([32, 32])]] }));
    expect(short).toBeInstanceOf(GgufFormatError);
  });

  it('rope scaling that does not scale (factor 0 or 1, or type none) is accepted', async () => {
    for (const set of [
      [
        ['qwen3moe.rope.scaling.type', str('linear')],
        ['qwen3moe.rope.scaling.factor', f32(1)],
      ],
      [
        ['qwen3moe.rope.scaling.type', str('yarn')],
        ['qwen3moe.rope.scaling.factor', f32(1)],
      ],
      [
        ['qwen3moe.rope.scaling.type', str('none')],
        ['qwen3moe.rope.scaling.factor', f32(4)],
      ],
      [['qwen3moe.rope.scale_linear', f32(0)]],
    ] as LayoutEdit['set'][]) {
      expect(readHParams(await build('qwen3moe', { set }))).toEqual(expected('qwen3moe'));
    }
  });
});

describe('readHParams: keys llama.cpp requires stay required', () => {
  for (const key of [
    'context_length',
    'embedding_length',
    'block_count',
    'attention.head_count',
    'attention.layer_norm_rms_epsilon',
    'expert_count',
    'expert_used_count',
  ]) {
    it(key, async () => {
      const e = refusal(await build('olmoe', { drop: [key] }));
      expect(e).toBeInstanceOf(GgufFormatError);
      expect(e.message).toContain(`key olmoe.${key}: expected`);
      expect(e.message).toContain('the key is missing');
    });
  }

  it('olmoe without feed_forward_length, and qwen3moe without it and without expert_feed_forward_length', async () => {
    const olmoe = refusal(await build('olmoe', { drop: ['feed_forward_length'] }));
    expect(olmoe.message).toMatch(
      /key olmoe\.feed_forward_length: expected an unsigned integer .* but the key is missing/,
    );
    const qwen = refusal(await build('qwen3moe', { drop: ['feed_forward_length', 'expert_feed_forward_length'] }));
    expect(qwen.message).toMatch(
      /key qwen3moe\.expert_feed_forward_length: expected .* \(or qwen3moe\.feed_forward_length, from which llama.cpp derives it\), but both keys are missing/,
    );
  });
});

describe('readHParams: rope scaling as llama.cpp reads it', () => {
  it('YaRN with its factor, original context and attention factor; linear; the old rope.scale_linear; factor 0 or 1 is none', async () => {
    const yarn = readHParams(
      await build('qwen3moe', {
        set: [
          ['qwen3moe.rope.scaling.type', str('yarn')],
          ['qwen3moe.rope.scaling.factor', f32(4)],
          ['qwen3moe.rope.scaling.original_context_length', u32(64)],
        ],
      }),
    );
    expect(yarn.ropeScaling).toEqual({
      type: 'yarn',
      factor: 4,
      origContext: 64,
      attnFactor: 1,
      betaFast: 32,
      betaSlow: 1,
    });
    const linear = readHParams(await build('llama', { set: [['llama.rope.scaling.factor', f32(2)]] }));
    expect(linear.ropeScaling).toMatchObject({ type: 'linear', factor: 2 });
    const old = readHParams(await build('llama', { set: [['llama.rope.scale_linear', f32(2)]] }));
    expect(old.ropeScaling).toMatchObject({ type: 'linear', factor: 2 });
    for (const factor of [0, 1])
      expect(readHParams(await build('llama', { set: [['llama.rope.scaling.factor', f32(factor)]] })).ropeScaling).toBe(
        undefined,
      );
    const none = readHParams(
      await build('llama', {
        set: [
          ['llama.rope.scaling.type', str('none')],
          ['llama.rope.scaling.factor', f32(8)],
        ],
      }),
    );
    expect(none.ropeScaling).toBeUndefined();
  });
});

describe('readHParams: what would run wrong is refused, naming the key or tensor', () => {
  it('a rope scaling other than linear or yarn, and llama3 rope_freqs', async () => {
    const longrope = refusal(
      await build('qwen3moe', {
        set: [
          ['qwen3moe.rope.scaling.type', str('longrope')],
          ['qwen3moe.rope.scaling.factor', f32(4)],
        ],
      }),
    );
    expect(longrope).toBeInstanceOf(UnsupportedModelError);
    expect(longrope.message).toMatch(
      /key qwen3moe\.rope\.scaling\.type: expected none, linear or yarn .* got "longrope"/,
    );
    const negative = refusal(await build('llama', { set: [['llama.rope.scaling.factor', f32(-2)]] }));
    expect(negative.message).toMatch(/key llama\.rope\.scaling\.factor: expected a finite factor >= 0, got -2/);
    const freqs = refusal(
      await build('llama', {
        tensors: (ts) => [...ts, { name: 'rope_freqs.weight', type: 'F32', dims: [8], data: () => new Uint8Array(32) }],
      }),
    );
    expect(freqs.message).toMatch(/tensor rope_freqs\.weight: expected no per-frequency rope factors/);
  });

  it('a value_length other than the key length, given or defaulted', async () => {
    const given = refusal(await build('qwen3moe', { set: [['qwen3moe.attention.value_length', u32(8)]] }));
    expect(given).toBeInstanceOf(UnsupportedModelError);
    expect(given.message).toMatch(/key qwen3moe\.attention\.value_length: expected the key length 16, got 8$/);
    // key_length 32 with 64 / 4 heads: llama.cpp's value_length default is still 16.
    const defaulted = refusal(await build('qwen3moe', { set: [['qwen3moe.attention.key_length', u32(32)]] }));
    expect(defaulted.message).toMatch(
      /value_length: expected the key length 32, got 16 \(the default, embedding_length \/ head_count\)/,
    );
  });

  it('llama with Granite-style shared experts, and an attention-output bias llama.cpp would add', async () => {
    const granite = refusal(await build('llama', { set: [['llama.expert_shared_feed_forward_length', u32(64)]] }));
    expect(granite).toBeInstanceOf(UnsupportedModelError);
    expect(granite.message).toMatch(/key llama\.expert_shared_feed_forward_length: expected none for llama/);
    for (const arch of ['llama', 'qwen3moe'] as Arch[]) {
      const bias = refusal(
        await build(arch, {
          tensors: (ts) => [
            ...ts,
            { name: 'blk.1.attn_output.bias', type: 'F32', dims: [64], data: () => new Uint8Array(256) },
          ],
        }),
      );
      expect(bias.message).toMatch(/tensor blk\.1\.attn_output\.bias: expected no attention-output bias/);
    }
  });

  it('a quantized [nEmbd, 1] shared-expert gate, naming the tensor and its type', async () => {
    const q8 = refusal(
      await build('qwen2moe', {
        tensors: (ts) =>
          ts.map((t) =>
            t.name === 'blk.0.ffn_gate_inp_shexp.weight'
              ? { ...t, type: 'Q8_0' as const, data: () => new Uint8Array(68) }
              : t,
          ),
      }),
    );
    expect(q8).toBeInstanceOf(UnsupportedModelError);
    expect(q8.message).toMatch(
      /tensor blk\.0\.ffn_gate_inp_shexp\.weight: expected type F32 for the shared-expert gate .* got Q8_0$/,
    );
  });

  it('dims compare up to trailing 1s only: [64, 1] is [64], [64, 2] is not', async () => {
    const pad = (dims: number[]): LayoutEdit => ({
      tensors: (ts) => ts.map((t) => (t.name === 'blk.0.attn_norm.weight' ? { ...t, dims } : t)),
    });
    expect(readHParams(await build('olmoe', pad([64, 1, 1])))).toEqual(expected('olmoe'));
    const wrong = refusal(
      await build('olmoe', {
        tensors: (ts) => ts.map((t) => (t.name === 'blk.0.attn_norm.weight' ? { ...t, dims: [32, 2] } : t)),
      }),
    );
    expect(wrong.message).toMatch(
      /tensor blk\.0\.attn_norm\.weight: expected dims \[64\] \(from the hyper-parameters\), got \[32, 2\]/,
    );
  });
});
