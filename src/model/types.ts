/**
 * Model-file vocabulary shared by the GGUF reader, the reference forward pass,
 * the native binding and the synthetic-model writer.
 *
 * Dimension order follows ggml: dims[0] (ne0) is the contiguous one. A weight
 * matrix used as y = W x with x of length n and y of length d has dims [n, d]:
 * d rows of n elements each. Expert tensors add the expert index last:
 * ffn_gate_exps / ffn_up_exps are [nEmbd, nFfExp, nExpert],
 * ffn_down_exps is [nFfExp, nEmbd, nExpert].
 */

/** Tensor element types we read, with their GGML type ids. */
export const GGML_TYPE = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  IQ4_NL: 20,
  IQ4_XS: 23,
  BF16: 30,
  MXFP4: 39,
} as const;
export type GgmlTypeName = keyof typeof GGML_TYPE;

/** Elements per block and bytes per block of each supported type. */
export const GGML_BLOCK: Record<GgmlTypeName, { elements: number; bytes: number }> = {
  F32: { elements: 1, bytes: 4 },
  F16: { elements: 1, bytes: 2 },
  BF16: { elements: 1, bytes: 2 },
  Q8_0: { elements: 32, bytes: 34 }, // f16 scale + 32 x int8
  Q4_0: { elements: 32, bytes: 18 }, // f16 scale + 16 bytes of nibbles (low nibbles: elements 0..15, high: 16..31)
  Q5_0: { elements: 32, bytes: 22 }, // f16 d, u32 of 5th bits, 16 bytes of nibbles
  Q5_1: { elements: 32, bytes: 24 }, // f16 d, f16 m, u32 of 5th bits, 16 bytes of nibbles
  // k-quants: 256-element super-blocks, ggml-common.h block_q*_K (layouts in quant-k.ts)
  Q2_K: { elements: 256, bytes: 84 }, // scales[16], qs[64], d, dmin
  Q3_K: { elements: 256, bytes: 110 }, // hmask[32], qs[64], scales[12], d
  Q4_K: { elements: 256, bytes: 144 }, // d, dmin, scales[12], qs[128]
  Q5_K: { elements: 256, bytes: 176 }, // d, dmin, scales[12], qh[32], qs[128]
  Q6_K: { elements: 256, bytes: 210 }, // ql[128], qh[64], scales[16] (int8), d
  // the non-linear 4-bit table of ggml's kvalues_iq4nl (layouts in quant-iq4.ts)
  IQ4_NL: { elements: 32, bytes: 18 }, // d, 16 bytes of table indices (as Q4_0's nibbles)
  IQ4_XS: { elements: 256, bytes: 136 }, // d, scales_h, scales_l[4], qs[128]
  MXFP4: { elements: 32, bytes: 17 }, // E8M0 exponent, 16 bytes of E2M1 codes (layout in quant-mxfp4.ts)
};

export type Arch = 'qwen3moe' | 'qwen2moe' | 'olmoe' | 'llama' | 'glm4moe' | 'gpt-oss' | 'deepseek2';

export interface TensorInfo {
  name: string;
  type: GgmlTypeName;
  /** ggml order: dims[0] is contiguous. */
  dims: number[];
  /** Absolute byte offset of the tensor's data in the file. */
  offset: number;
  byteLength: number;
}

export type GgufScalar = number | bigint | boolean | string;
export type GgufValue = GgufScalar | GgufScalar[];

export interface GgufFile {
  path: string;
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: Map<string, TensorInfo>;
  alignment: number;
  /** Absolute offset of the tensor data section. */
  dataOffset: number;
  /**
   * The file's first bytes (memory-mapped by the addon, or read for tests): the header and the
   * identity's first MiB of weights always, the whole file when it is under 4 GiB (mapFile).
   */
  bytes: Uint8Array;
  /** The file's size: tensors are placed and checked against it, not against `bytes`. */
  size: number;
}

/** A file's rope scaling (rope.scaling.*): 'linear' or 'yarn', with llama.cpp's defaults. */
export interface RopeScaling {
  type: 'linear' | 'yarn';
  /** rope.scaling.factor (> 0): frequencies are divided by it. */
  factor: number;
  /** rope.scaling.original_context_length (default: the training context). */
  origContext: number;
  /** rope.scaling.attn_factor (default 1). */
  attnFactor: number;
  /** llama.cpp's yarn_beta_fast / yarn_beta_slow defaults (32, 1): not read from the file for these archs. */
  betaFast: number;
  betaSlow: number;
  /**
   * deepseek2's rope.scaling.yarn_log_multiplier / 0.1 (mscale_all_dim; llama.cpp divides what the
   * converter wrote by 0.1): set, YaRN's magnitude leaves cos / sin (only attnFactor stays) and goes
   * into the attention's scale instead (HParams.attnScale).
   */
  yarnLogMul?: number;
}

/**
 * Hyper-parameters that decide the forward pass. Architecture differences are
 * expressed as flags so that the reference and the native pass read the same switches.
 */
export interface HParams {
  arch: Arch;
  nLayer: number;
  nEmbd: number;
  nHead: number;
  nHeadKv: number;
  headDim: number;
  nVocab: number;
  nCtxTrain: number;
  nExpert: number;
  nExpertUsed: number;
  nFfExp: number;
  /** Shared-expert FFN width (qwen2moe); 0 when the arch has none. */
  nFfShexp: number;
  /**
   * Leading dense layers (leading_dense_block_count > 0: GLM-4.5, DeepSeek-V2-Lite): layers l < count
   * have a plain SiLU-gated FFN of width nFf (blk.l.ffn_gate / ffn_up / ffn_down) and no router or
   * experts. Absent: every layer has experts. Whatever is indexed by layer for the experts (routes,
   * heat, the tier's slots, traces, layer stats) counts the MoE layers only: moeLayers(hp) of them,
   * MoE layer m being layer firstMoeLayer(hp) + m.
   */
  denseLayers?: { count: number; nFf: number };
  /**
   * Multi-head latent attention (deepseek2; docs/FORWARD.md): the cache keeps one row per token of the
   * latent c (kvLora, normed) and the shared roped key k_pe (ropeDims): headDim = kvLora + ropeDims,
   * nHeadKv = 1. Each head's query is [K_b q_nope | roped q_pe] (nope + ropeDims from Wq h, or
   * Wq_b rmsnorm(Wq_a h) with qLora > 0); its output V_b (softmax-weighted latents) of vHead, into Wo.
   */
  mla?: { qLora: number; kvLora: number; nope: number; vHead: number };
  /** The attention scores' scale (deepseek2: mscale^2 / sqrt(nope + ropeDims), mscale 1 without YaRN); absent: 1 / sqrt(headDim). */
  attnScale?: number;
  rmsEps: number;
  ropeBase: number;
  /** 'norm': rotate adjacent pairs (x[2i], x[2i+1]); 'neox': rotate (x[i], x[i + ropeDims/2]). */
  ropeType: 'norm' | 'neox';
  /** Rotated dims of each head (rope.dimension_count; partial rotary below headDim); absent: headDim. */
  ropeDims?: number;
  /** The file's rope scaling (src/model/rope.ts); absent: none. */
  ropeScaling?: RopeScaling;
  /** 'head': RMSNorm over each head's headDim (qwen3moe); 'full': over the whole q / k vector (olmoe). */
  qkNorm: 'none' | 'head' | 'full';
  /** Renormalise the top-k weights to sum to 1 (qwen3moe, llama/Mixtral; expert_weights_norm). */
  normTopK: boolean;
  /**
   * How the router's logits become expert probabilities (llama.cpp's expert_gating_func): softmax
   * (absent: every arch read today) or sigmoid (glm4moe, DeepSeek-V3-style files); softmax_weight
   * (gpt-oss): the top-k of the raw logits, weighted by the softmax over those k. docs/FORWARD.md, routing.
   */
  gating?: 'softmax' | 'sigmoid' | 'softmax_weight';
  /** blk.l.ffn_gate_inp.bias [nExpert] is added to the router's logits (gpt-oss). */
  routerBias?: boolean;
  /** blk.l.exp_probs_b.bias [nExpert] is added to the probabilities to choose the experts, not to weight them. */
  expertBias?: boolean;
  /** Expert groups (count > 1): the experts of all but the `used` best groups are not chosen (group score: top-2 sum). */
  expertGroups?: { count: number; used: number };
  /** The routed experts' weights are multiplied by it (expert_weights_scale; absent or 1: none). */
  expertWeightsScale?: number;
  /** q, k, v projections have biases (qwen2moe). */
  attnBias: boolean;
  /** Shared expert with a sigmoid gate (qwen2moe), or without one (glm4moe: sharedExpertGate false). */
  sharedExpert: boolean;
  /** false: the shared expert has no ffn_gate_inp_shexp and is added as it is (glm4moe); absent: gated. */
  sharedExpertGate?: boolean;
  /** The MoE half's norm tensor (glm4moe: post_attention_norm); absent: ffn_norm. */
  ffnNorm?: 'ffn_norm' | 'post_attention_norm';
  /** blk.l.attn_output.bias [nEmbd] is added to the attention's output projection (gpt-oss). */
  attnOutBias?: boolean;
  /** blk.l.attn_sinks.weight [nHead]: each head's sink logit joins its softmax's denominator, unscaled (gpt-oss). */
  attnSinks?: boolean;
  /**
   * Sliding-window attention (gpt-oss): on layer l with period 0 or l % period < period - 1 (llama.cpp's
   * set_swa_pattern), a row at position p sees the keys at positions j with p - j < window; the other layers all.
   */
  slidingWindow?: { window: number; period: number };
  /** ffn_gate_exps / ffn_up_exps .bias [nFfExp, nExpert], ffn_down_exps.bias [nEmbd, nExpert] (gpt-oss). */
  expertFfnBias?: boolean;
  /**
   * The experts' activation: silu(g) * u (absent), or gpt-oss's swiglu_oai: with g' = min(g, 7),
   * u' = clamp(u, -7, 7): g' * sigmoid(1.702 g') * (u' + 1).
   */
  expertAct?: 'silu' | 'swiglu_oai';
  /** No output.weight: the LM head reuses token_embd. */
  tiedOutput: boolean;
}

/** The layers with experts (the tier's, the routes' and the heat's layer count). */
export function moeLayers(hp: Pick<HParams, 'nLayer' | 'denseLayers'>): number {
  return hp.nLayer - (hp.denseLayers?.count ?? 0);
}

/** The model layer of MoE layer 0 (leading dense layers come first). */
export function firstMoeLayer(hp: Pick<HParams, 'denseLayers'>): number {
  return hp.denseLayers?.count ?? 0;
}

/** The width of the attention's output, attn_output's input: nHead value heads (MLA's vHead, else headDim). */
export function attnOutDim(hp: Pick<HParams, 'nHead' | 'headDim' | 'mla'>): number {
  return hp.nHead * (hp.mla ? hp.mla.vHead : hp.headDim);
}
