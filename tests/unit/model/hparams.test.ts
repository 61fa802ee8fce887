import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError, UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf, type GgufTensorSource } from '../../../src/model/gguf/writer.js';
import { readHParams } from '../../../src/model/hparams.js';
import type { Arch, GgufFile, HParams } from '../../../src/model/types.js';
import { gpt2Vocab, hparamKeys, modelTensors, tinyHp, type Kv } from './gguf-fixture.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-hp-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const vocab = gpt2Vocab(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'], []);

async function build(kv: Kv, tensors: GgufTensorSource[]): Promise<GgufFile> {
  const path = join(dir, `m${n++}.gguf`);
  await writeGguf(path, kv, tensors);
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

/** Replace (or with value undefined, drop) one key. */
function withKey(kv: Kv, key: string, value?: Kv[number][1]): Kv {
  const rest = kv.filter(([k]) => k !== key);
  return value === undefined ? rest : [...rest, [key, value]];
}

describe('readHParams: rope.dimension_count', () => {
  const hp = tinyHp('qwen3moe');
  const u32 = (value: number) => ({ type: 'u32' as const, value });
  it('accepts the head dim (the whole head rotates) and no key at all', async () => {
    for (const extra of [[['qwen3moe.rope.dimension_count', u32(hp.headDim)]], []] as Kv[]) {
      expect(readHParams(await build([...hparamKeys(hp), ...extra, ...vocab], modelTensors(hp, 'Q8_0'))).headDim).toBe(
        hp.headDim,
      );
    }
  });
  it('refuses partial rotary (8 of 16) as unsupported, and 0, 17 or 1000 as corrupt, naming the key', async () => {
    const partial = refusal(
      await build([...hparamKeys(hp), ['qwen3moe.rope.dimension_count', u32(8)], ...vocab], modelTensors(hp, 'Q8_0')),
    );
    expect(partial).toBeInstanceOf(UnsupportedModelError);
    expect(partial.message).toMatch(/rope\.dimension_count.*rotates the whole head: partial rotary.*got 8/);
    for (const bad of [0, 17, 1000]) {
      const err = refusal(
        await build(
          [...hparamKeys(hp), ['qwen3moe.rope.dimension_count', u32(bad)], ...vocab],
          modelTensors(hp, 'Q8_0'),
        ),
      );
      expect(err).toBeInstanceOf(GgufFormatError);
      expect(err.message).toContain(`rope.dimension_count: expected an even integer in [2, head dim 16], got ${bad}`);
    }
  });
});

describe('readHParams', () => {
  for (const arch of ['qwen3moe', 'qwen2moe', 'olmoe', 'llama'] as Arch[]) {
    it(`read ${arch} keys and validate its tensors`, async () => {
      const hp = tinyHp(arch);
      const file = await build([...hparamKeys(hp), ...vocab], modelTensors(hp, 'Q8_0'));
      const expected: HParams = { ...hp, rmsEps: Math.fround(hp.rmsEps) };
      expect(readHParams(file)).toEqual(expected);
    });
  }

  it('default key_length, head_count_kv and rope.freq_base; tied output without output.weight', async () => {
    const hp = tinyHp('qwen3moe', { tiedOutput: true, nHeadKv: 4, ropeBase: 10000 });
    let kv = withKey(hparamKeys(hp), 'qwen3moe.attention.key_length');
    kv = withKey(withKey(kv, 'qwen3moe.attention.head_count_kv'), 'qwen3moe.rope.freq_base');
    const got = readHParams(await build([...kv, ...vocab], modelTensors(hp)));
    expect(got.headDim).toBe(16);
    expect(got.nHeadKv).toBe(4);
    expect(got.ropeBase).toBe(10000);
    expect(got.tiedOutput).toBe(true);
  });

  it('refuse another architecture, listing the supported ones', async () => {
    const hp = tinyHp('qwen3moe');
    const file = await build(
      withKey(hparamKeys(hp), 'general.architecture', { type: 'string', value: 'qwen3next' }),
      modelTensors(hp),
    );
    const e = refusal(file);
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e.message).toMatch(
      /key general.architecture: expected one of qwen3moe, qwen2moe, olmoe, llama, glm4moe, gpt-oss, deepseek2 .*got "qwen3next"/,
    );
  });

  it('refuse a dense llama', async () => {
    const hp = tinyHp('llama');
    const e = refusal(
      await build(withKey(hparamKeys(hp), 'llama.expert_count', { type: 'u32', value: 0 }), modelTensors(hp)),
    );
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e.message).toMatch(/llama.expert_count: expected a value > 0/);
  });

  it('refuse a missing key and a key of the wrong type, naming the key', async () => {
    const hp = tinyHp('olmoe');
    const missing = refusal(await build(withKey(hparamKeys(hp), 'olmoe.expert_used_count'), modelTensors(hp)));
    expect(missing).toBeInstanceOf(GgufFormatError);
    expect(missing.message).toMatch(
      /key olmoe.expert_used_count: expected an unsigned integer .* but the key is missing/,
    );
    const typed = refusal(
      await build(withKey(hparamKeys(hp), 'olmoe.block_count', { type: 'string', value: '2' }), modelTensors(hp)),
    );
    expect(typed.message).toMatch(
      /key olmoe.block_count: expected an unsigned integer from 1 to \d+, but got string "2"/,
    );
    const eps = refusal(
      await build(
        withKey(hparamKeys(hp), 'olmoe.attention.layer_norm_rms_epsilon', { type: 'f32', value: 0 }),
        modelTensors(hp),
      ),
    );
    expect(eps.message).toMatch(/layer_norm_rms_epsilon: expected a finite float > 0/);
    // An absurd epsilon zeroed every logit and the run printed NUL tokens with exit 0 (issue 27): refused at load.
    const huge = refusal(
      await build(
        withKey(hparamKeys(hp), 'olmoe.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e30 }),
        modelTensors(hp),
      ),
    );
    expect(huge).toBeInstanceOf(GgufFormatError);
    expect(huge.message).toMatch(/layer_norm_rms_epsilon: expected a finite float > 0 and <= 1/);
  });

  it('refuse inconsistent hyper-parameters', async () => {
    const hp = tinyHp('qwen3moe');
    const used = refusal(
      await build(withKey(hparamKeys(hp), 'qwen3moe.expert_used_count', { type: 'u32', value: 5 }), modelTensors(hp)),
    );
    expect(used.message).toMatch(/expert_used_count: expected at most expert_count 4, got 5/);
    const kvHeads = refusal(
      await build(
        withKey(hparamKeys(hp), 'qwen3moe.attention.head_count_kv', { type: 'u32', value: 3 }),
        modelTensors(hp),
      ),
    );
    expect(kvHeads.message).toMatch(/head_count_kv: expected a divisor of head_count 4, got 3/);
    const layers = refusal(
      await build(withKey(hparamKeys(hp), 'qwen3moe.block_count', { type: 'u32', value: 1 << 19 }), modelTensors(hp)),
    );
    expect(layers.message).toMatch(/block_count: expected at most the tensor count/);
    const vocabSize = refusal(await build([...hparamKeys(hp), ...gpt2Vocab(['a'], [])], modelTensors(hp)));
    expect(vocabSize.message).toMatch(
      /tokenizer.ggml.tokens: expected one token per row of token_embd.weight \(12\), got 3/,
    );
  });

  it('refuse a missing tensor, wrong dims, and a non-F32 norm', async () => {
    const hp = tinyHp('qwen2moe');
    const tensors = modelTensors(hp);
    const missing = refusal(
      await build(
        hparamKeys(hp),
        tensors.filter((t) => t.name !== 'blk.1.attn_k.bias'),
      ),
    );
    expect(missing.message).toMatch(
      /tensor blk.1.attn_k.bias: expected a tensor of dims \[32\], which qwen2moe needs, but it is missing/,
    );
    const bad = tensors.map((t) =>
      t.name === 'blk.0.ffn_down_exps.weight'
        ? { ...t, dims: [64, 32, 4], data: () => new Uint8Array(64 * 32 * 4 * 4) }
        : t,
    );
    const dims = refusal(await build(hparamKeys(hp), bad));
    expect(dims.message).toMatch(
      /tensor blk.0.ffn_down_exps.weight: expected dims \[32, 64, 4\] \(from the hyper-parameters\), got \[64, 32, 4\]/,
    );
    const f16 = tensors.map((t) =>
      t.name === 'output_norm.weight' ? { ...t, type: 'F16' as const, data: () => new Uint8Array(128) } : t,
    );
    const norm = refusal(await build(hparamKeys(hp), f16));
    expect(norm).toBeInstanceOf(UnsupportedModelError);
    expect(norm.message).toMatch(/tensor output_norm.weight: expected type F32 for a 1-D norm, got F16/);
  });
});
