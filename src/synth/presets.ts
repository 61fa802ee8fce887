/**
 * Synthetic model shapes and the planted-structure strengths.
 *
 * Sizes at Q8_0 (34 bytes per 32 weights): tiny ~1.1 MB (tests), small ~120 MB (the demo),
 * medium ~2.0 GB (benchmarks: 24 x 128 experts x 3 x 768 x 256 weights dominate).
 * The shapes of real models, with their geometry (layers, experts, top-k, hidden and expert FFN
 * widths, heads, head dim, vocabulary; not their rope base nor context length) and their own
 * architecture by default: olmoe-1b-7b (OLMoE-1B-7B: 16 x 64 experts, top-8; ~7 GB at Q8_0,
 * ~4 GB at Q4_K_M) and qwen3-30b-a3b (Qwen3-30B-A3B: 48 x 128 experts, top-8; ~18.6 GB at Q4_K_M).
 * All matrix widths (dims[0]) are multiples of 32, as Q8_0 / Q4_0 rows need (and of 256 in the
 * real shapes, as the k-quants need).
 */
import { InvalidOptionError } from '../core/errors.js';
import { ARCH_EXTRAS, ARCH_FLAGS } from '../model/arch.js';
import type { Arch, HParams } from '../model/types.js';

export type PresetName =
  | 'tiny'
  | 'tiny-yarn'
  | 'tiny-dense'
  | 'small'
  | 'medium'
  | 'olmoe-1b-7b'
  | 'qwen3-30b-a3b'
  | 'gpt-oss-20b'
  | 'deepseek-v2-lite'
  | 'glm-4.5-air';
export const PRESET_NAMES: readonly PresetName[] = [
  'tiny',
  'tiny-yarn',
  'tiny-dense',
  'small',
  'medium',
  'olmoe-1b-7b',
  'qwen3-30b-a3b',
  'gpt-oss-20b',
  'deepseek-v2-lite',
  'glm-4.5-air',
];
export const ARCHS: readonly Arch[] = ['qwen3moe', 'qwen2moe', 'olmoe', 'llama', 'glm4moe', 'gpt-oss', 'deepseek2'];

export interface PresetShape {
  nEmbd: number;
  nLayer: number;
  nExpert: number;
  nExpertUsed: number;
  nFfExp: number;
  nFfShexp: number;
  nHead: number;
  nHeadKv: number;
  headDim: number;
  nVocab: number;
  nTopics: number;
  /**
   * The architecture gen-model writes when --arch is not given (default qwen3moe). Any other works
   * too: olmoe drops GQA (llama.cpp's olmoe has none), qwen2moe adds a shared expert of nFfShexp.
   */
  arch?: Arch;
  /** RoPE other than the plain whole-head rotation (partial rotary, scaling: src/model/rope.ts). */
  rope?: Pick<HParams, 'ropeDims' | 'ropeScaling'>;
  /** gpt-oss's sliding window (default 8, short enough for parity's prompts to cross; the real files' is 128). */
  slidingWindow?: number;
  /**
   * Leading dense layers (HParams.denseLayers): the first `count` layers have a plain FFN of nFf and no
   * experts. Only the archs whose files declare them (glm4moe) take it; gen-model refuses the others.
   */
  denseLayers?: { count: number; nFf: number };
  /** A real file's own values past what the shape implies (deepseek2's latent attention dims), applied last. */
  hparams?: Partial<HParams>;
}

/** The archs whose llama.cpp loader reads leading_dense_block_count. */
export const DENSE_LAYER_ARCHS: readonly Arch[] = ['glm4moe', 'deepseek2'];

/** The tiny preset's shape (tiny-yarn shares it). */
const TINY: PresetShape = {
  nEmbd: 64,
  nLayer: 4,
  nExpert: 8,
  nExpertUsed: 2,
  nFfExp: 32,
  nFfShexp: 64,
  nHead: 4,
  nHeadKv: 2,
  headDim: 16,
  nVocab: 2048,
  nTopics: 4,
};

export const PRESETS: Record<PresetName, PresetShape> = {
  tiny: TINY,
  // tiny as GLM-4.5 is laid out: glm4moe, whose first layer is dense (GLM-4.5-Air has 1, GLM-4.5 3)
  // with an FFN 4x the expert width; checked against llama.cpp by npm run parity.
  'tiny-dense': { ...TINY, arch: 'glm4moe', denseLayers: { count: 1, nFf: 128 } },
  // tiny with YaRN-scaled RoPE (x4 from a 64-token original context, as Qwen3's long-context files
  // declare): the rotation llama.cpp computes for such a file (src/model/rope.ts), checked by npm run parity.
  'tiny-yarn': {
    ...TINY,
    rope: {
      ropeScaling: { type: 'yarn', factor: 4, origContext: 64, attnFactor: 1, betaFast: 32, betaSlow: 1 },
    },
  },
  small: {
    nEmbd: 512,
    nLayer: 8,
    nExpert: 32,
    nExpertUsed: 4,
    nFfExp: 256,
    nFfShexp: 512,
    nHead: 8,
    nHeadKv: 4,
    headDim: 64,
    nVocab: 8192,
    nTopics: 8,
  },
  medium: {
    nEmbd: 768,
    nLayer: 24,
    nExpert: 128,
    nExpertUsed: 8,
    nFfExp: 256,
    nFfShexp: 512,
    nHead: 12,
    nHeadKv: 4,
    headDim: 64,
    nVocab: 32000,
    nTopics: 16,
  },
  // nFfShexp (qwen2moe only, neither model has one): 4 x nFfExp, Qwen1.5-MoE-A2.7B's ratio.
  'olmoe-1b-7b': {
    nEmbd: 2048,
    nLayer: 16,
    nExpert: 64,
    nExpertUsed: 8,
    nFfExp: 1024,
    nFfShexp: 4096,
    nHead: 16,
    nHeadKv: 16,
    headDim: 128,
    nVocab: 50304,
    nTopics: 16,
    arch: 'olmoe',
  },
  'qwen3-30b-a3b': {
    nEmbd: 2048,
    nLayer: 48,
    nExpert: 128,
    nExpertUsed: 8,
    nFfExp: 768,
    nFfShexp: 3072,
    nHead: 32,
    nHeadKv: 4,
    headDim: 128,
    nVocab: 151936,
    nTopics: 16,
    arch: 'qwen3moe',
  },
  // gpt-oss-20b's geometry (its config.json): 24 layers of 32 experts, top-4, hidden 2880 = the
  // expert width, 64 query heads / 8 KV heads of 64, the o200k vocabulary's 201088 rows, a window of
  // 128 on the even layers. Its experts are MXFP4 in the published file; gen-model writes the other
  // types (q4_0: 11.8 GB).
  'gpt-oss-20b': {
    nEmbd: 2880,
    nLayer: 24,
    nExpert: 32,
    nExpertUsed: 4,
    nFfExp: 2880,
    nFfShexp: 0,
    nHead: 64,
    nHeadKv: 8,
    headDim: 64,
    nVocab: 201088,
    nTopics: 16,
    arch: 'gpt-oss',
    slidingWindow: 128,
  },
  // DeepSeek-V2-Lite's geometry (its config.json): 27 layers, the first dense (an FFN of 10944), then
  // 64 experts of 1408, top-6, two shared experts; 16 heads of latent attention (a latent of 512, a
  // roped key of 64, query heads of 128 + 64, values of 128, no q-LoRA), its 102400-row vocabulary,
  // softmax routing without renormalisation. Not its YaRN x40 (the synthetic context is short).
  // q4_0: 8.7 GB.
  'deepseek-v2-lite': {
    nEmbd: 2048,
    nLayer: 27,
    nExpert: 64,
    nExpertUsed: 6,
    nFfExp: 1408,
    nFfShexp: 2816,
    nHead: 16,
    nHeadKv: 1,
    headDim: 128,
    nVocab: 102400,
    nTopics: 16,
    arch: 'deepseek2',
    denseLayers: { count: 1, nFf: 10944 },
    hparams: {
      headDim: 576,
      ropeDims: 64,
      mla: { qLora: 0, kvLora: 512, nope: 128, vHead: 128 },
      attnScale: 1 / Math.sqrt(192),
      gating: 'softmax',
      normTopK: false,
    },
  },
  // GLM-4.5-Air's geometry (its config.json): 46 layers (its NextN block left out), the first dense
  // (an FFN of 10944), then 128 experts of 1408, top-8, one shared expert; 96 query / 8 KV heads of 128
  // with half of each rotated; a 151552-row vocabulary. q4_0: about 62 GB (more than this machine's disk).
  'glm-4.5-air': {
    nEmbd: 4096,
    nLayer: 46,
    nExpert: 128,
    nExpertUsed: 8,
    nFfExp: 1408,
    nFfShexp: 1408,
    nHead: 96,
    nHeadKv: 8,
    headDim: 128,
    nVocab: 151552,
    nTopics: 16,
    arch: 'glm4moe',
    denseLayers: { count: 1, nFf: 10944 },
    hparams: { expertWeightsScale: 1 }, // Air's routed_scaling_factor (GLM-4.5's is 2.5)
  },
};

/** A preset's own architecture (PresetShape.arch), or undefined for a name that is not a preset or has none. */
export function presetDefaultArch(preset: unknown): Arch | undefined {
  return typeof preset === 'string' && Object.hasOwn(PRESETS, preset) ? PRESETS[preset as PresetName].arch : undefined;
}

/**
 * How strongly the structure is planted (see planted.ts for where each enters).
 * Residual x = a c_t + b u_v has norm ~sqrt(a^2 + b^2); rmsnorm scales it to sqrt(nEmbd).
 */
export const PLANT = {
  /** Embedding: topic-centroid weight a and token-specific weight b. */
  topicWeight: 1,
  tokenWeight: 1,
  /** LM head row of w = alpha c_t(w) + beta u_pred(w); both scaled to logits by sqrt(nEmbd) / |x|. */
  headTopic: 1.5,
  headSuccessor: 2.5,
  /** Router: a preferred expert's logit bonus over the others, and the noise logit's std. */
  routerBonusLogits: 4,
  routerNoiseLogits: 1,
  /** Each (layer, topic) prefers this many times top-k experts. */
  preferredPerTopk: 2,
  /** Norm of each sublayer's output relative to |x|: small, so the residual stays near the embedding. */
  attentionShare: 0.08,
  expertShare: 0.12,
  sharedExpertShare: 0.06,
  /** Norm weights are 1 +- this (uniform), biases uniform with this std. */
  normJitter: 0.05,
  biasStd: 0.05,
  /** gpt-oss's attention sink logits: uniform with this std. */
  sinkStd: 1,
} as const;

/** The HParams a preset implies for an architecture. olmoe has no GQA in llama.cpp (k_norm is [nEmbd]). */
export function presetHParams(preset: PresetName, arch: Arch): HParams {
  const s = PRESETS[preset];
  const flags = ARCH_FLAGS[arch];
  return {
    arch,
    nLayer: s.nLayer,
    nEmbd: s.nEmbd,
    nHead: s.nHead,
    nHeadKv: arch === 'olmoe' ? s.nHead : s.nHeadKv,
    headDim: s.headDim,
    nVocab: s.nVocab,
    nCtxTrain: 4096,
    nExpert: s.nExpert,
    nExpertUsed: s.nExpertUsed,
    nFfExp: s.nFfExp,
    // glm4moe's shared expert is expert_shared_count (1) experts of the routed width.
    nFfShexp: !flags.sharedExpert ? 0 : arch === 'glm4moe' ? s.nFfExp : s.nFfShexp,
    rmsEps: 1e-6,
    ropeBase: 10000,
    ...s.rope,
    tiedOutput: false,
    ...flags,
    ...ARCH_EXTRAS[arch],
    // glm4moe rotates half of each head (GLM-4.5's partial_rotary_factor), as its converter writes,
    // and scales its routed weights (GLM-4.5's routed_scaling_factor 2.5; Air's is 1).
    ...(arch === 'glm4moe' ? { ropeDims: s.headDim / 2, expertWeightsScale: 2.5 } : {}),
    ...(arch === 'gpt-oss' ? { ...GPT_OSS, slidingWindow: { window: s.slidingWindow ?? 8, period: 2 } } : {}),
    ...(s.denseLayers ? { denseLayers: denseFor(preset, arch, s.denseLayers) } : {}),
    ...(arch === 'deepseek2' ? deepseek2Shape(s) : {}),
    ...(arch === s.arch ? s.hparams : {}),
  };
}

/**
 * deepseek2 as its files are laid out, scaled to the preset: latent attention (a latent of 4 head
 * dims, a shared roped key of one head dim, query heads of 2 + 1 head dims, values of 2; q-LoRA of
 * half the width past the tiny preset, as V3-shaped files have), one leading dense layer of 4x the
 * expert width and two shared experts (V2-Lite's), and V2-Lite's routing (softmax, no
 * renormalisation) on tiny, V3's (sigmoid with the selection bias, renormalised, x2.5, 4 groups
 * of which 2) past it.
 */
function deepseek2Shape(s: PresetShape): Partial<HParams> {
  const rope = s.headDim;
  const kvLora = 4 * s.headDim;
  const tiny = s.nEmbd <= 64;
  const nope = 2 * s.headDim;
  return {
    headDim: kvLora + rope,
    nHeadKv: 1,
    ropeDims: rope,
    mla: { qLora: tiny ? 0 : s.nEmbd / 2, kvLora, nope, vHead: 2 * s.headDim },
    attnScale: 1 / Math.sqrt(nope + rope),
    nFfShexp: 2 * s.nFfExp,
    denseLayers: s.denseLayers ?? { count: 1, nFf: 4 * s.nFfExp },
    ...(tiny
      ? { gating: 'softmax' as const, normTopK: false }
      : {
          gating: 'sigmoid' as const,
          expertBias: true,
          normTopK: true,
          expertWeightsScale: 2.5,
          ...(s.nExpert % 4 === 0 && s.nExpertUsed <= s.nExpert / 2 ? { expertGroups: { count: 4, used: 2 } } : {}),
        }),
  };
}

/**
 * gpt-oss's rotation as its files declare it (base 150000, YaRN x32 from a 4096-token original
 * context, so context_length 131072), and a sliding window of 8 on the even layers (gpt-oss's is
 * 128): shorter than parity's prompts (11 to 14 tokens), so the first step's logits already depend on it.
 */
const GPT_OSS: Partial<HParams> = {
  nCtxTrain: 131072,
  ropeBase: 150000,
  ropeScaling: { type: 'yarn', factor: 32, origContext: 4096, attnFactor: 1, betaFast: 32, betaSlow: 1 },
  slidingWindow: { window: 8, period: 2 },
};

/** A preset's dense layers for an arch that has them; another arch is refused by name. */
function denseFor(preset: PresetName, arch: Arch, dense: NonNullable<PresetShape['denseLayers']>) {
  if (!DENSE_LAYER_ARCHS.includes(arch))
    throw new InvalidOptionError(
      'arch',
      `one whose files declare leading dense layers (${DENSE_LAYER_ARCHS.join(', ')}) for preset ${preset}`,
      arch,
    );
  return dense;
}
