/**
 * GGUF metadata of a synthetic model: the keys llama.cpp's loader reads for qwen3moe,
 * qwen2moe, olmoe and llama (Mixtral), and the tokenizer.
 * feed_forward_length is the expert FFN width for every arch: olmoe and llama size their
 * expert tensors from it, qwen*moe read expert_feed_forward_length (written too); with leading
 * dense layers (glm4moe) it is theirs, as llama.cpp reads it (n_ff).
 */
import type { GgufTypedValue } from '../model/gguf/values.js';
import type { HParams } from '../model/types.js';
import type { SynthVocab } from './vocab.js';

export type Metadata = Array<[string, GgufTypedValue]>;

const u32 = (value: number): GgufTypedValue => ({ type: 'u32', value });
const f32 = (value: number): GgufTypedValue => ({ type: 'f32', value });
const str = (value: string): GgufTypedValue => ({ type: 'string', value });
const bool = (value: boolean): GgufTypedValue => ({ type: 'bool', value });

export function synthMetadata(hp: HParams, vocab: SynthVocab, name: string): Metadata {
  const a = hp.arch;
  const meta: Metadata = [
    ['general.architecture', str(a)],
    ['general.name', str(name)],
    ['general.alignment', u32(32)],
    [`${a}.context_length`, u32(hp.nCtxTrain)],
    [`${a}.embedding_length`, u32(hp.nEmbd)],
    [`${a}.block_count`, u32(hp.nLayer)],
    [`${a}.feed_forward_length`, u32(hp.denseLayers?.nFf ?? hp.nFfExp)], // the dense layers' width where there are some
    [`${a}.attention.head_count`, u32(hp.nHead)],
    [`${a}.attention.head_count_kv`, u32(hp.nHeadKv)],
    [`${a}.attention.key_length`, u32(hp.headDim)],
    [`${a}.attention.value_length`, u32(hp.mla?.kvLora ?? hp.headDim)], // MLA: the latent
    [`${a}.attention.layer_norm_rms_epsilon`, f32(hp.rmsEps)],
    [`${a}.rope.freq_base`, f32(hp.ropeBase)],
    [`${a}.rope.dimension_count`, u32(hp.ropeDims ?? hp.headDim)],
    [`${a}.expert_count`, u32(hp.nExpert)],
    [`${a}.expert_used_count`, u32(hp.nExpertUsed)],
    [`${a}.expert_feed_forward_length`, u32(hp.nFfExp)],
  ];
  const s = hp.ropeScaling;
  if (s)
    meta.push(
      [`${a}.rope.scaling.type`, str(s.type)],
      [`${a}.rope.scaling.factor`, f32(s.factor)],
      [`${a}.rope.scaling.original_context_length`, u32(s.origContext)],
      [`${a}.rope.scaling.attn_factor`, f32(s.attnFactor)],
    );
  if (hp.arch === 'glm4moe') meta.push(...glm4moeKeys(hp));
  else if (hp.arch === 'deepseek2') meta.push(...deepseek2Keys(hp));
  else if (hp.arch === 'gpt-oss' && hp.slidingWindow) {
    // conversion/gpt_oss.py writes the window; llama.cpp's period defaults to 2.
    meta.push([`${a}.attention.sliding_window`, u32(hp.slidingWindow.window)]);
    if (hp.slidingWindow.period !== 2)
      meta.push([`${a}.attention.sliding_window_pattern`, u32(hp.slidingWindow.period)]);
  }
  // Only qwen2moe: llama would then expect Granite-style shared-expert tensors.
  else if (hp.sharedExpert) meta.push([`${a}.expert_shared_feed_forward_length`, u32(hp.nFfShexp)]);
  return meta.concat(tokenizerMetadata(vocab));
}

/** The keys llama.cpp's deepseek2 loader reads, as convert_hf_to_gguf.py writes them (MLA split). */
function deepseek2Keys(hp: HParams): Metadata {
  const a = hp.arch;
  const { qLora, kvLora, nope, vHead } = hp.mla!;
  const meta: Metadata = [
    [`${a}.attention.q_lora_rank`, u32(qLora)],
    [`${a}.attention.kv_lora_rank`, u32(kvLora)],
    [`${a}.attention.key_length_mla`, u32(nope + (hp.ropeDims ?? 0))],
    [`${a}.attention.value_length_mla`, u32(vHead)],
    [`${a}.expert_shared_count`, u32(hp.nFfShexp / hp.nFfExp)],
    [`${a}.leading_dense_block_count`, u32(hp.denseLayers?.count ?? 0)],
    [`${a}.expert_weights_scale`, f32(hp.expertWeightsScale ?? 1)],
    [`${a}.expert_gating_func`, u32(hp.gating === 'sigmoid' ? 2 : 1)],
    [`${a}.expert_group_count`, u32(hp.expertGroups?.count ?? 1)],
    [`${a}.expert_group_used_count`, u32(hp.expertGroups?.used ?? 1)],
  ];
  // The converter writes expert_weights_norm only when norm_topk_prob is true.
  if (hp.normTopK) meta.push([`${a}.expert_weights_norm`, { type: 'bool', value: true }]);
  return meta;
}

/** The keys llama.cpp's glm4moe loader reads, as convert_hf_to_gguf.py writes them for GLM-4.5. */
function glm4moeKeys(hp: HParams): Metadata {
  const a = hp.arch;
  return [
    [`${a}.expert_shared_count`, u32(hp.nFfShexp / hp.nFfExp)],
    [`${a}.leading_dense_block_count`, u32(hp.denseLayers?.count ?? 0)],
    [`${a}.nextn_predict_layers`, u32(0)],
    [`${a}.expert_weights_norm`, { type: 'bool', value: hp.normTopK }],
    [`${a}.expert_weights_scale`, f32(hp.expertWeightsScale ?? 1)],
    [`${a}.expert_gating_func`, u32(hp.gating === 'softmax' ? 1 : 2)],
    [`${a}.expert_group_count`, u32(hp.expertGroups?.count ?? 1)],
    [`${a}.expert_group_used_count`, u32(hp.expertGroups?.used ?? 1)],
  ];
}

function tokenizerMetadata(vocab: SynthVocab): Metadata {
  const meta: Metadata = [
    ['tokenizer.ggml.model', str(vocab.model)],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: vocab.tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', values: Int32Array.from(vocab.types) }],
    ['tokenizer.ggml.bos_token_id', u32(vocab.bosId)],
    ['tokenizer.ggml.eos_token_id', u32(vocab.eosId)],
  ];
  if (vocab.model === 'gpt2') {
    meta.push(
      ['tokenizer.ggml.pre', str(vocab.pre)],
      ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: vocab.merges }],
      ['tokenizer.ggml.padding_token_id', u32(vocab.padId)],
      ['tokenizer.ggml.add_bos_token', bool(false)],
    );
    if (vocab.chatTemplate !== undefined) meta.push(['tokenizer.chat_template', str(vocab.chatTemplate)]);
  } else {
    meta.push(
      ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', values: Float32Array.from(vocab.scores) }],
      ['tokenizer.ggml.unknown_token_id', u32(0)],
      ['tokenizer.ggml.add_bos_token', bool(true)],
      ['tokenizer.ggml.add_eos_token', bool(false)],
      ['tokenizer.ggml.add_space_prefix', bool(true)],
    );
  }
  return meta;
}
