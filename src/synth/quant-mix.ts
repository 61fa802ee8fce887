/**
 * Which tensor type each tensor of a synthetic model gets, per `--quant`.
 *
 * Plain quants (q8_0, q4_0, f16, bf16, f32): every matrix and expert tensor gets the one type,
 * norms, biases and the router stay F32 (as before).
 *
 * K-quant mixes (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, and iq4_xs, whose default is IQ4_XS): the
 * per-tensor choice llama-quantize makes for that ftype without an importance matrix, from llama.cpp src/llama-quant.cpp (read at
 * ggml-org/llama.cpp 007dbbf3): tensor_allows_quantization, llama_tensor_get_type_impl,
 * tensor_type_fallback. Each rule below names the function it comes from. Not modelled: the
 * Falcon and 70B special cases (no such synthetic model) and user overrides (--tensor-type, --pure).
 * One rule is older llama.cpp's instead: Q2_K and Q3_K fall back to IQ4_NL (see FALLBACK).
 *
 * mxfp4: llama-quantize's LLAMA_FTYPE_MOSTLY_MXFP4_MOE, the type of gpt-oss's published files: the
 * 3-D expert matrices MXFP4, every other matrix it quantises Q8_0 (see mxfp4MoeType).
 */
import { assert } from '../core/assert.js';
import type { TensorSpec } from '../model/arch.js';
import { GGML_BLOCK, type GgmlTypeName, type HParams } from '../model/types.js';

export type PlainQuantName = 'q8_0' | 'q4_0' | 'f16' | 'bf16' | 'f32';
export type KMixName = 'q2_k' | 'q3_k_m' | 'q4_k_m' | 'q5_k_m' | 'q6_k' | 'iq4_xs';
export type QuantName = PlainQuantName | KMixName | 'mxfp4';

export const PLAIN_QUANT_TYPE: Record<PlainQuantName, GgmlTypeName> = {
  q8_0: 'Q8_0',
  q4_0: 'Q4_0',
  f16: 'F16',
  bf16: 'BF16',
  f32: 'F32',
};
export const K_MIX_NAMES: readonly KMixName[] = ['q2_k', 'q3_k_m', 'q4_k_m', 'q5_k_m', 'q6_k', 'iq4_xs'];
export const QUANT_NAMES: readonly QuantName[] = [
  ...(Object.keys(PLAIN_QUANT_TYPE) as PlainQuantName[]),
  ...K_MIX_NAMES,
  'mxfp4',
];

/** llama_ftype_get_default_type: the type of every tensor no rule changes. */
const MIX_DEFAULT: Record<KMixName, GgmlTypeName> = {
  q2_k: 'Q2_K',
  q3_k_m: 'Q3_K',
  q4_k_m: 'Q4_K',
  q5_k_m: 'Q5_K',
  q6_k: 'Q6_K',
  iq4_xs: 'IQ4_XS',
};

/**
 * tensor_type_fallback: a row that is not a whole number of the type's blocks (dims[0] % 256 for
 * the k-quants) falls back to a 32-element type, and to F16 if that does not fit either.
 * Q2_K and Q3_K go to IQ4_NL as in llama.cpp's llama_tensor_get_type before tensor_type_fallback
 * took its place ("using fallback quantization": IQ1_* .. IQ3_*, Q2_K, Q3_K, IQ4_XS -> IQ4_NL),
 * which made the Q2_K / Q3_K_M files published so far; llama.cpp at 007dbbf3 (and the v0.4.0 build
 * node-llama-cpp bundles) sends them to Q4_0 instead. IQ4_NL is the case moetier must read; Q4_0
 * it reads anyway.
 */
const FALLBACK: Partial<Record<GgmlTypeName, GgmlTypeName>> = {
  Q2_K: 'IQ4_NL',
  Q3_K: 'IQ4_NL',
  Q4_K: 'Q5_0',
  Q5_K: 'Q5_1',
  Q6_K: 'Q8_0',
  IQ4_XS: 'IQ4_NL',
};

export function isKMix(quant: QuantName): quant is KMixName {
  return (K_MIX_NAMES as readonly string[]).includes(quant);
}

/** The type `spec` is written as under `quant`. */
export function tensorQuantType(quant: QuantName, spec: TensorSpec, hp: HParams): GgmlTypeName {
  if (quant === 'mxfp4') return mxfp4MoeType(spec);
  if (!isKMix(quant)) return spec.role === 'matrix' || spec.role === 'experts' ? PLAIN_QUANT_TYPE[quant] : 'F32';
  if (!allowsQuantization(spec)) return 'F32';
  return fallback(mixType(quant, spec, hp), spec.dims[0]);
}

/**
 * tensor_allows_quantization: only 2- and 3-D tensors whose name ends in "weight", never a
 * "_norm.weight" nor the router "ffn_gate_inp.weight" (they keep their source type: F32 here).
 * 1-D tensors (norms, biases, qwen2moe's ffn_gate_inp_shexp [nEmbd]) are never quantised.
 */
function allowsQuantization(spec: TensorSpec): boolean {
  return (
    spec.dims.length >= 2 &&
    spec.name.endsWith('weight') &&
    !spec.name.includes('_norm.weight') &&
    !spec.name.includes('ffn_gate_inp.weight')
  );
}

/**
 * LLAMA_FTYPE_MOSTLY_MXFP4_MOE (llama_tensor_get_type_impl): of the tensors it quantises
 * (tensor_allows_quantization), those with ne[2] > 1 (the experts' gate / up / down) MXFP4, the others
 * Q8_0, output.weight (and a tied token_embd) too. Norms, the router, biases and the sinks stay F32.
 * Every preset's rows are a multiple of 32 (MXFP4's block), so no fallback is reached.
 */
function mxfp4MoeType(spec: TensorSpec): GgmlTypeName {
  if (!allowsQuantization(spec)) return 'F32';
  const type = spec.dims.length === 3 && spec.dims[2] > 1 ? 'MXFP4' : 'Q8_0';
  assert(
    spec.dims[0] % GGML_BLOCK[type].elements === 0,
    `quant-mix: ${spec.name}: ${spec.dims[0]} columns for ${type}`,
  );
  return type;
}

/** llama_tensor_get_type_impl's use_more_bits: the first and last eighth of the layers and every third between. */
export function useMoreBits(layer: number, nLayer: number): boolean {
  const eighth = Math.trunc(nLayer / 8);
  return layer < eighth || layer >= Math.trunc((7 * nLayer) / 8) || (layer - eighth) % 3 === 2;
}

function layerOf(name: string): number {
  const m = /^blk\.(\d+)\./.exec(name);
  return m ? Number(m[1]) : -1;
}

/** llama_tensor_get_type_impl for the five k-quant ftypes and IQ4_XS, by tensor_get_category. */
function mixType(mix: KMixName, spec: TensorSpec, hp: HParams): GgmlTypeName {
  const base = MIX_DEFAULT[mix];
  const name = spec.name;
  const layer = layerOf(name);
  const eightExperts = hp.nExpert === 8; // llama-quant tests n_expert == 8 exactly (Mixtral 8x7B), not >= 8
  const nGqa = hp.nHead / hp.nHeadKv;
  // OUTPUT (and TOKEN_EMBD when tied): Q8_0 if the row is not a whole number of the default
  // type's blocks, else Q6_K (for every ftype here, as none of them defaults to Q8_0).
  if (name === 'output.weight' || (hp.tiedOutput && name === 'token_embd.weight')) {
    return spec.dims[0] % GGML_BLOCK[base].elements !== 0 ? 'Q8_0' : 'Q6_K';
  }
  // TOKEN_EMBD (untied): these ftypes have no rule (only IQ1_* .. IQ3_*, TQ* and Q2_0 do): the default.
  if (name === 'token_embd.weight') return base;
  if (name.includes('attn_v.weight')) {
    // category_is_attn_v; i_attention_wv counts attn_v tensors in file order, which llama's
    // loader sorts by layer (weight_name_comparer), so it is the layer; n_attention_wv = nLayer.
    let type = base;
    if (mix === 'q2_k') type = nGqa >= 4 ? 'Q4_K' : 'Q3_K';
    else if (mix === 'q3_k_m') type = layer < 2 ? 'Q5_K' : 'Q4_K';
    else if (mix === 'iq4_xs' && nGqa >= 4) type = 'Q5_K';
    else if ((mix === 'q4_k_m' || mix === 'q5_k_m') && useMoreBits(layer, hp.nLayer)) type = 'Q6_K';
    if (eightExperts) type = 'Q8_0'; // "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
    return type;
  }
  if (name.includes('attn_k.weight')) return eightExperts ? 'Q8_0' : base; // ATTENTION_K: the same 8-expert bump
  if (name.includes('ffn_down')) {
    // FFN_DOWN (the experts' ffn_down_exps and qwen2moe's ffn_down_shexp alike): with n_expert > 1
    // the layer is parsed from the name and n_layer is the model's layer count.
    if (mix === 'q2_k') return 'Q3_K';
    if (mix === 'q3_k_m') return layer < Math.trunc(hp.nLayer / 16) ? 'Q5_K' : 'Q4_K'; // not Falcon: Q4_K past the first 16th
    if (mix === 'q4_k_m' && useMoreBits(layer, hp.nLayer)) return 'Q6_K';
    if (mix === 'iq4_xs' && layer < Math.trunc(hp.nLayer / 8)) return 'Q5_K'; // without an imatrix
    if (mix === 'q5_k_m' && useMoreBits(layer, hp.nLayer)) return 'Q6_K';
    return base;
  }
  if (name.includes('attn_output.weight')) {
    // ATTENTION_OUTPUT (not Falcon): with 8 experts Q5_K for Q2_K, Q3_K_M, Q4_K_M, IQ4_XS (among
    // others); otherwise Q3_K for Q2_K and Q4_K for Q3_K_M.
    if (eightExperts) return mix === 'q2_k' || mix === 'q3_k_m' || mix === 'q4_k_m' || mix === 'iq4_xs' ? 'Q5_K' : base;
    if (mix === 'q2_k') return 'Q3_K';
    if (mix === 'q3_k_m') return 'Q4_K';
    return base;
  }
  return base; // attn_q, ffn_gate / ffn_up (experts and shared): only IQ ftypes have rules
}

function fallback(type: GgmlTypeName, cols: number): GgmlTypeName {
  if (cols % GGML_BLOCK[type].elements === 0) return type;
  const next = FALLBACK[type];
  // llama-quant throws "no tensor type fallback is defined" here; the presets never reach it.
  assert(next !== undefined, `quant-mix: no fallback for ${type} with ${cols} columns`);
  return cols % GGML_BLOCK[next].elements === 0 ? next : 'F16';
}
