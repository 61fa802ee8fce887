/**
 * Tiny, valid model files written with the real GGUF writer: hyper-parameter keys
 * for an architecture, every tensor it needs (random bytes), and a vocabulary.
 */
import { ARCH_FLAGS, expectedTensors } from '../../../src/model/arch.js';
import { tensorByteLength, type GgufTypedValue } from '../../../src/model/gguf/values.js';
import type { GgufTensorSource } from '../../../src/model/gguf/writer.js';
import type { Arch, GgmlTypeName, HParams } from '../../../src/model/types.js';
import { mulberry32 } from '../../../src/core/prng.js';

export type Kv = Array<[string, GgufTypedValue]>;

export function tinyHp(arch: Arch, overrides: Partial<HParams> = {}): HParams {
  return {
    arch,
    nLayer: 2,
    nEmbd: 64,
    nHead: 4,
    nHeadKv: 2,
    headDim: 16,
    nVocab: 12,
    nCtxTrain: 128,
    nExpert: 4,
    nExpertUsed: 2,
    nFfExp: 32,
    nFfShexp: ARCH_FLAGS[arch].sharedExpert ? 32 : 0,
    rmsEps: 1e-6,
    ropeBase: 1e6,
    tiedOutput: false,
    ...ARCH_FLAGS[arch],
    ...overrides,
  };
}

export function hparamKeys(hp: HParams): Kv {
  const k = (name: string) => `${hp.arch}.${name}`;
  const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value });
  const kv: Kv = [
    ['general.architecture', { type: 'string', value: hp.arch }],
    [k('block_count'), u32(hp.nLayer)],
    [k('embedding_length'), u32(hp.nEmbd)],
    [k('context_length'), u32(hp.nCtxTrain)],
    [k('attention.head_count'), u32(hp.nHead)],
    [k('attention.head_count_kv'), u32(hp.nHeadKv)],
    [k('attention.key_length'), u32(hp.headDim)],
    [k('attention.layer_norm_rms_epsilon'), { type: 'f32', value: hp.rmsEps }],
    [k('rope.freq_base'), { type: 'f32', value: hp.ropeBase }],
    [k('expert_count'), u32(hp.nExpert)],
    [k('expert_used_count'), u32(hp.nExpertUsed)],
    // llama (Mixtral) and olmoe size their experts from feed_forward_length; qwen*moe from expert_feed_forward_length.
    [
      k(hp.arch === 'llama' || hp.arch === 'olmoe' ? 'feed_forward_length' : 'expert_feed_forward_length'),
      u32(hp.nFfExp),
    ],
  ];
  if (hp.sharedExpert) kv.push([k('expert_shared_feed_forward_length'), u32(hp.nFfShexp)]);
  return kv;
}

/** Seeded uniform PRNG (mulberry32). */
export const prng = mulberry32;

/** Every tensor the architecture needs: 1-D and routers F32, matrices and experts `type`, random bytes. */
export function modelTensors(hp: HParams, type: GgmlTypeName = 'F32', seed = 7): GgufTensorSource[] {
  const random = prng(seed);
  return expectedTensors(hp).map((spec) => {
    const tensorType: GgmlTypeName = spec.role === 'matrix' || spec.role === 'experts' ? type : 'F32';
    const bytes = tensorByteLength(tensorType, spec.dims) as number;
    return {
      name: spec.name,
      type: tensorType,
      dims: spec.dims,
      data: () => Uint8Array.from({ length: bytes }, () => Math.floor(random() * 256)),
    };
  });
}

/** A byte-level BPE vocabulary ('Ġ' is the GPT-2 alphabet's space) with two control tokens. */
export function gpt2Vocab(
  tokens: string[],
  merges: string[],
  specials: string[] = ['<|endoftext|>', '<|im_start|>'],
): Kv {
  const all = [...tokens, ...specials];
  return [
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: 'qwen2' }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: all }],
    [
      'tokenizer.ggml.token_type',
      { type: 'array', itemType: 'i32', values: all.map((_, i) => (i < tokens.length ? 1 : 3)) },
    ],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: merges }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: tokens.length }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: tokens.length }],
  ];
}
