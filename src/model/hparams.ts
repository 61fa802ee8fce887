/**
 * GgufFile -> HParams, then validation: every tensor the architecture needs
 * (src/model/arch.ts) must exist with the dims the hyper-parameters imply (check-tensors.ts).
 * Keys are `<arch>.<name>`; flags per architecture follow docs/FORWARD.md.
 *
 * Which keys are required, and the default of each optional one, follow llama.cpp's loader:
 * llama-model.cpp `load_hparams` (the part shared by every arch) and each arch's own reads
 * (`case LLM_ARCH_<ARCH>` there, `load_arch_hparams` in src/models/<arch>.cpp in newer trees),
 * with the expert widths as `load_arch_tensors` sizes the expert tensors:
 *
 *   key (after `<arch>.`)              required  default (llama.cpp's source of it)
 *   context_length                     yes       get_key(LLM_KV_CONTEXT_LENGTH) without `required = false`
 *   embedding_length, block_count      yes       likewise
 *   attention.head_count               yes       optional in llama.cpp (0 = no attention), but every arch here attends
 *   attention.head_count_kv            no        head_count ("n_head_kv is optional, default to n_head")
 *   attention.key_length               no        embedding_length / head_count (n_embd_head_k = n_embd / n_head())
 *   attention.value_length             no        embedding_length / head_count (n_embd_head_v); must equal key_length,
 *                                                as the graphs assert n_embd_head_v == n_embd_head_k
 *   rope.dimension_count               no        key_length (n_rot = n_embd_head_k); fewer is refused: each arch
 *                                                here rotates the whole head (llama.cpp asserts n_rot == head dim)
 *   rope.freq_base                     no        10000 (rope_freq_base_train = 10000.0f)
 *   rope.scaling.type / .factor        no        "linear" with factor 0, i.e. freq_scale 1 (no scaling); "linear" or
 *   (old name rope.scale_linear)                 "yarn" with a factor scale as llama.cpp does (src/model/rope.ts);
 *                                                another type (longrope...) is refused
 *   rope.scaling.original_context_length no      context_length (yarn's n_ctx_orig)
 *   rope.scaling.attn_factor           no        1
 *   attention.layer_norm_rms_epsilon   yes       every arch here reads LLM_KV_ATTENTION_LAYERNORM_RMS_EPS as required
 *   expert_count, expert_used_count    yes       optional in load_hparams (0), but each arch's load_arch_tensors
 *                                                throws "n_expert must be > 0" (a llama without experts is dense)
 *   feed_forward_length                olmoe and llama: yes, it is the expert width (ffn_*_exps are {n_embd, n_ff,
 *                                                n_expert}); qwen2moe / qwen3moe: only the fallback below. May be a
 *                                                per-layer array (get_key_or_arr); all layers must then agree
 *   expert_feed_forward_length         qwen2moe / qwen3moe: no, default feed_forward_length / expert_used_count
 *                                                (n_ff_exp ? n_ff_exp : n_ff / n_expert_used); olmoe / llama: never
 *                                                read (real OLMoE files lack it), the width is feed_forward_length
 *   expert_shared_feed_forward_length  qwen2moe: no, default feed_forward_length (n_ff_shexp ? n_ff_shexp : n_ff);
 *                                                llama: a value > 0 means Granite-style shared experts, refused
 *   gpt-oss: expert_feed_forward_length and attention.sliding_window required; attention.sliding_window_pattern
 *                                                default 2; rope.freq_base_swa must equal rope.freq_base
 *   expert_weights_norm, expert_weights_scale, expert_gating_func: not read for these archs. llama.cpp fixes them
 *                                                per arch: top-k renormalised for qwen3moe and llama (Mixtral), not
 *                                                for qwen2moe and olmoe; softmax gating; no scale (ARCH_FLAGS)
 */
import { GgufFormatError, UnsupportedModelError } from '../core/errors.js';
import { ARCH_EXTRAS, ARCH_FLAGS } from './arch.js';
import { checkTensors, significantDims } from './check-tensors.js';
import { metaBool, metaFloat, metaString, metaUint } from './gguf/metadata.js';
import type { Arch, GgufFile, HParams, RopeScaling } from './types.js';

const SUPPORTED_ARCHS = Object.keys(ARCH_FLAGS) as Arch[];

/** Caps that keep a corrupt header from implying absurd work; real MoE models stay far below. */
const DIM_MAX = 1 << 20;
const EXPERTS_MAX = 1 << 12;
/** llama.cpp's rope_freq_base_train default. */
const ROPE_FREQ_BASE_DEFAULT = 10000;

/**
 * The largest rms epsilon a model may carry: real ones use 1e-6..1e-5. One far above the activations'
 * mean square (1e30 was seen in a mutated file) zeroes every normalised row, every logit with it, and
 * a run printed NUL tokens with exit 0: refused at load.
 */
export const RMS_EPS_MAX = 1;

export function readHParams(file: GgufFile): HParams {
  const arch = readArch(file);
  const hp = readKeys(file, arch);
  checkConsistency(file, hp);
  checkTensors(file, hp);
  return hp;
}

function readArch(file: GgufFile): Arch {
  const arch = metaString(file, 'general.architecture');
  if (!(SUPPORTED_ARCHS as string[]).includes(arch)) {
    throw new UnsupportedModelError(
      file.path,
      'key general.architecture',
      `one of ${SUPPORTED_ARCHS.join(', ')} (llama only with experts, e.g. Mixtral), got ${JSON.stringify(arch)}`,
    );
  }
  return arch as Arch;
}

function readKeys(file: GgufFile, arch: Arch): HParams {
  const k = (name: string): string => `${arch}.${name}`;
  const dim = (name: string, fallback?: number): number => metaUint(file, k(name), { min: 1, max: DIM_MAX, fallback });
  if (arch === 'llama' && metaUint(file, k('expert_count'), { fallback: 0 }) === 0) {
    throw new UnsupportedModelError(
      file.path,
      `key ${k('expert_count')}`,
      'a value > 0: moetier runs Mixture-of-Experts models only, and this llama model is dense',
    );
  }
  // glm4moe's block_count counts its NextN (MTP) blocks too, which llama.cpp's decoder never runs.
  const nLayer =
    dim('block_count') - (arch === 'glm4moe' || arch === 'deepseek2' ? nextnLayers(file, k, dim('block_count')) : 0);
  const perLayer = (name: string, fallback?: number): number => layerUniform(file, k(name), nLayer, fallback);
  const nEmbd = dim('embedding_length');
  const nHead = perLayer('attention.head_count');
  const token = file.tensors.get('token_embd.weight');
  const tokenDims = token === undefined ? [] : significantDims(token.dims);
  if (tokenDims.length !== 2) {
    throw new GgufFormatError(file.path, 'tensor token_embd.weight', `a tensor of dims [${nEmbd}, nVocab]`);
  }
  const nExpertUsed = metaUint(file, k('expert_used_count'), { min: 1, max: EXPERTS_MAX });
  const flags = ARCH_FLAGS[arch];
  const headDim = dim('attention.key_length', Math.max(1, Math.floor(nEmbd / nHead)));
  return {
    arch,
    nLayer,
    nEmbd,
    nHead,
    nHeadKv: perLayer('attention.head_count_kv', nHead),
    headDim,
    nVocab: tokenDims[1],
    nCtxTrain: dim('context_length'),
    nExpert: metaUint(file, k('expert_count'), { min: 1, max: EXPERTS_MAX }),
    nExpertUsed,
    ...ffnWidths(file, arch, nLayer, nExpertUsed),
    rmsEps: metaFloat(file, k('attention.layer_norm_rms_epsilon'), { positive: true, max: RMS_EPS_MAX }),
    ropeBase: metaFloat(file, k('rope.freq_base'), { positive: true, fallback: ROPE_FREQ_BASE_DEFAULT }),
    ...readRope(file, arch, headDim, dim('context_length')),
    tiedOutput: !file.tensors.has('output.weight'),
    ...flags,
    ...(arch === 'glm4moe' ? glm4moeParams(file, k, nLayer) : {}),
    ...(arch === 'deepseek2' ? deepseek2Params(file, k, nLayer, headDim) : {}),
    ...(arch === 'gpt-oss' ? gptOssParams(file, k) : {}),
  };
}

/**
 * What a gpt-oss file says of itself (llama.cpp's llama_model_openai_moe::load_arch_hparams): the
 * sliding window (required) and its layer period (default 2: layers 0, 2, 4, ... windowed); the rest
 * of its layer is fixed (ARCH_EXTRAS). A rope.freq_base_swa unlike rope.freq_base is refused by name.
 */
function gptOssParams(file: GgufFile, k: (name: string) => string): Partial<HParams> {
  const window = metaUint(file, k('attention.sliding_window'), { min: 1, max: DIM_MAX });
  const period = metaUint(file, k('attention.sliding_window_pattern'), { max: 4096, fallback: 2 });
  const base = metaFloat(file, k('rope.freq_base'), { positive: true, fallback: ROPE_FREQ_BASE_DEFAULT });
  const baseSwa = metaFloat(file, k('rope.freq_base_swa'), { positive: true, fallback: base });
  if (baseSwa !== base)
    throw new UnsupportedModelError(
      file.path,
      `key ${k('rope.freq_base_swa')}`,
      `rope.freq_base ${base} (a separate base for the windowed layers is not implemented), got ${baseSwa}`,
    );
  return { ...ARCH_EXTRAS['gpt-oss'], slidingWindow: { window, period } };
}

/**
 * leading_dense_block_count (default 0): layers below it have a plain FFN of feed_forward_length
 * (llama.cpp's n_ff) and no experts; at least one layer must keep its experts.
 */
function denseLayers(file: GgufFile, k: (name: string) => string, nLayer: number): Partial<HParams> {
  const count = metaUint(file, k('leading_dense_block_count'), { max: nLayer - 1, fallback: 0 });
  if (count === 0) return {};
  return { denseLayers: { count, nFf: layerUniform(file, k('feed_forward_length'), nLayer) } };
}

/**
 * What a deepseek2 file says of itself (llama.cpp's llama_model_deepseek2::load_arch_hparams and graph):
 * its attention (MLA: the latent's and q-LoRA's ranks, the nope / rope split of a query head, the value
 * head; files from before the attn_k_b / attn_v_b split are refused), leading dense layers, routing
 * (expert_gating_func: none means softmax, as llama.cpp takes it; the exp_probs_b selection bias when its
 * tensor exists; expert_weights_norm; scale; groups), the ungated shared experts, and the scores' scale
 * (mscale^2 / sqrt(nope + rope), mscale from YaRN's log multiplier).
 */
function deepseek2Params(
  file: GgufFile,
  k: (name: string) => string,
  nLayer: number,
  headDim: number,
): Partial<HParams> {
  const dim = (name: string, fallback?: number): number => metaUint(file, k(name), { min: 1, max: DIM_MAX, fallback });
  for (const name of ['attention.temperature_scale', 'attention.temperature_length'])
    if (file.metadata.has(k(name)))
      throw new UnsupportedModelError(
        file.path,
        `key ${k(name)}`,
        'none (attention temperature tuning is not computed)',
      );
  if (!file.metadata.has(k('attention.key_length_mla')) || !file.metadata.has(k('attention.value_length_mla')))
    throw new UnsupportedModelError(
      file.path,
      `key ${k('attention.key_length_mla')}`,
      'an MLA file (attn_k_b / attn_v_b, key_length_mla and value_length_mla): files with attn_kv_b, from converters before 2025, are not read; reconvert with a current convert_hf_to_gguf.py',
    );
  const kMla = dim('attention.key_length_mla');
  const vHead = dim('attention.value_length_mla');
  const kvLora = dim('attention.kv_lora_rank');
  const rope = metaUint(file, k('rope.dimension_count'), { min: 2, max: DIM_MAX, fallback: headDim });
  if (kvLora + rope !== headDim || kMla <= rope)
    throw new GgufFormatError(
      file.path,
      `key ${k('attention.key_length')}`,
      `kv_lora_rank ${kvLora} + rope.dimension_count ${rope} (the cached latent and shared key), with key_length_mla ${kMla} > rope, got ${headDim}`,
    );
  const first = metaUint(file, k('leading_dense_block_count'), { max: nLayer - 1, fallback: 0 });
  // The graph decides per layer by the tensor (is_lite = wq != null): so does moetier.
  const qLora = file.tensors.has('blk.0.attn_q.weight') ? 0 : dim('attention.q_lora_rank');
  const gatingFunc = metaUint(file, k('expert_gating_func'), { max: 2, fallback: 0 });
  const scale = metaFloat(file, k('expert_weights_scale'), { fallback: 0 });
  const groups = metaUint(file, k('expert_group_count'), { fallback: 0 });
  const groupsUsed = metaUint(file, k('expert_group_used_count'), { fallback: 0 });
  const mscale = deepseek2Mscale(readRope(file, 'deepseek2', headDim, dim('context_length')).ropeScaling);
  return {
    ...ARCH_EXTRAS.deepseek2,
    ...denseLayers(file, k, nLayer),
    mla: { qLora, kvLora, nope: kMla - rope, vHead },
    attnScale: (mscale * mscale) / Math.sqrt(kMla),
    normTopK: metaBool(file, k('expert_weights_norm'), false),
    gating: gatingFunc === 2 ? 'sigmoid' : 'softmax',
    ...(file.tensors.has(`blk.${first}.exp_probs_b.bias`) ? { expertBias: true } : {}),
    ...(scale !== 0 && scale !== 1 ? { expertWeightsScale: scale } : {}),
    ...(groups > 1 ? { expertGroups: { count: groups, used: groupsUsed } } : {}),
  };
}

/**
 * deepseek2's mscale as its graph computes it (kq_scale = mscale^2 / sqrt(key_length_mla)): the
 * attention factor llama_context gives the rope (YaRN's magnitude cancelled, or left as
 * 1 + 0.1 ln f without a log multiplier), times 1 + 0.1 ln f back, times 1 + 0.1 M ln f.
 */
function deepseek2Mscale(s: RopeScaling | undefined): number {
  if (!s) return 1;
  const lnF = Math.log(s.factor);
  const mscale1 = s.factor <= 1 ? 1 : 1 + 0.1 * lnF;
  const contextFactor =
    s.type === 'yarn' ? ((s.yarnLogMul ? 1 : mscale1) / (1 + 0.1 * lnF)) * s.attnFactor : s.attnFactor;
  return contextFactor * (1 + 0.1 * lnF) * (1 + 0.1 * (s.yarnLogMul ?? 0) * lnF);
}

/** nextn_predict_layers: the trailing blocks of block_count that are MTP heads (skipped, as llama.cpp does). */
function nextnLayers(file: GgufFile, k: (name: string) => string, blocks: number): number {
  return metaUint(file, k('nextn_predict_layers'), { max: blocks - 1, fallback: 0 });
}

/**
 * What a glm4moe file says of itself (llama.cpp's llama_model_glm4_moe::load_arch_hparams): its
 * routing (sigmoid unless expert_gating_func says softmax, the exp_probs_b selection bias,
 * expert_weights_norm, expert_weights_scale, expert groups), qk norm when its tensors exist, the
 * ungated shared expert, post_attention_norm and its leading dense layers.
 */
function glm4moeParams(file: GgufFile, k: (name: string) => string, nLayer: number): Partial<HParams> {
  const gatingFunc = metaUint(file, k('expert_gating_func'), { max: 2, fallback: 0 });
  const scale = metaFloat(file, k('expert_weights_scale'), { fallback: 0 });
  const groups = metaUint(file, k('expert_group_count'), { fallback: 0 });
  const groupsUsed = metaUint(file, k('expert_group_used_count'), { fallback: 0 });
  return {
    ...ARCH_EXTRAS.glm4moe,
    ...denseLayers(file, k, nLayer),
    qkNorm: file.tensors.has('blk.0.attn_q_norm.weight') ? 'head' : 'none',
    normTopK: metaBool(file, k('expert_weights_norm'), false),
    gating: gatingFunc === 1 ? 'softmax' : 'sigmoid', // 0 (none) is forced to sigmoid, as llama.cpp does
    ...(scale !== 0 && scale !== 1 ? { expertWeightsScale: scale } : {}),
    ...(groups > 1 ? { expertGroups: { count: groups, used: groupsUsed } } : {}),
  };
}

/**
 * Partial rotary and rope scaling as llama.cpp reads them (the table above): each only when it
 * changes the rotation, so an unscaled whole-head file's HParams carry neither.
 */
function readRope(
  file: GgufFile,
  arch: Arch,
  headDim: number,
  nCtxTrain: number,
): Pick<HParams, 'ropeDims' | 'ropeScaling'> {
  const key = (name: string): string => `${arch}.${name}`;
  const out: Pick<HParams, 'ropeDims' | 'ropeScaling'> = {};
  const dims = file.metadata.get(key('rope.dimension_count'));
  if (dims !== undefined) {
    if (typeof dims !== 'number' || !Number.isInteger(dims) || dims < 2 || dims > headDim || dims % 2 !== 0)
      throw new GgufFormatError(
        file.path,
        `key ${key('rope.dimension_count')}`,
        `an even integer in [2, head dim ${headDim}], got ${String(dims)}`,
      );
    // llama.cpp's qwen2moe, qwen3moe, olmoe and llama graphs assert n_rot == n_embd_head; glm4moe
    // rotates the first rope.dimension_count dims of each head (partial rotary, HParams.ropeDims);
    // deepseek2's are its query's and shared key's rope part (MLA).
    if (dims !== headDim && (arch === 'glm4moe' || arch === 'deepseek2')) out.ropeDims = dims;
    else if (dims !== headDim)
      throw new UnsupportedModelError(
        file.path,
        `key ${key('rope.dimension_count')}`,
        `the head dim ${headDim} (llama.cpp's ${arch} rotates the whole head: partial rotary embeddings are for other architectures), got ${dims}`,
      );
  }
  const type = metaString(file, key('rope.scaling.type'), 'linear');
  if (type !== 'none' && type !== 'linear' && type !== 'yarn')
    throw new UnsupportedModelError(
      file.path,
      `key ${key('rope.scaling.type')}`,
      `none, linear or yarn (another rope scaling is not implemented), got ${JSON.stringify(type)}`,
    );
  const factorKey = file.metadata.has(key('rope.scaling.factor'))
    ? key('rope.scaling.factor')
    : key('rope.scale_linear');
  const factor = metaFloat(file, factorKey, { fallback: 0 });
  if (!(factor >= 0) || !Number.isFinite(factor))
    throw new GgufFormatError(file.path, `key ${factorKey}`, `a finite factor >= 0, got ${factor}`);
  if (type !== 'none' && factor !== 0 && factor !== 1) {
    out.ropeScaling = {
      type,
      factor,
      origContext: metaUint(file, key('rope.scaling.original_context_length'), {
        min: 1,
        max: DIM_MAX,
        fallback: nCtxTrain,
      }),
      attnFactor: metaFloat(file, key('rope.scaling.attn_factor'), { positive: true, fallback: 1 }),
      betaFast: 32,
      betaSlow: 1,
    };
    const logMul = arch === 'deepseek2' ? metaFloat(file, key('rope.scaling.yarn_log_multiplier'), { fallback: 0 }) : 0;
    if (type === 'yarn' && logMul !== 0) out.ropeScaling.yarnLogMul = logMul / 0.1;
  }
  return out;
}

/** Expert and shared-expert widths, sized as each arch's load_arch_tensors sizes them (see the table above). */
function ffnWidths(
  file: GgufFile,
  arch: Arch,
  nLayer: number,
  nExpertUsed: number,
): Pick<HParams, 'nFfExp' | 'nFfShexp'> {
  const k = (name: string): string => `${arch}.${name}`;
  const dim = (name: string, fallback?: number): number => metaUint(file, k(name), { min: 1, max: DIM_MAX, fallback });
  const hasFf = file.metadata.has(k('feed_forward_length'));
  const nFf = (): number => layerUniform(file, k('feed_forward_length'), nLayer);
  if (arch === 'olmoe' || arch === 'llama') {
    if (arch === 'llama' && metaUint(file, k('expert_shared_feed_forward_length'), { fallback: 0 }) > 0) {
      throw new UnsupportedModelError(
        file.path,
        `key ${k('expert_shared_feed_forward_length')}`,
        'none for llama (a value > 0 means Granite-style shared experts, which moetier does not compute)',
      );
    }
    return { nFfExp: nFf(), nFfShexp: 0 };
  }
  const fromFf = (what: string): number => {
    if (!hasFf) {
      throw new GgufFormatError(
        file.path,
        `key ${k(what)}`,
        `an unsigned integer from 1 to ${DIM_MAX} (or ${k('feed_forward_length')}, from which llama.cpp derives it), but both keys are missing`,
      );
    }
    return nFf();
  };
  // gpt-oss: llama.cpp reads expert_feed_forward_length as required (no fallback).
  const nFfExp =
    file.metadata.has(k('expert_feed_forward_length')) || arch === 'gpt-oss'
      ? dim('expert_feed_forward_length')
      : Math.floor(fromFf('expert_feed_forward_length') / nExpertUsed);
  if (nFfExp < 1) {
    throw new GgufFormatError(
      file.path,
      `key ${k('feed_forward_length')}`,
      `at least expert_used_count ${nExpertUsed} (the expert width defaults to feed_forward_length / expert_used_count)`,
    );
  }
  if (!ARCH_FLAGS[arch].sharedExpert) return { nFfExp, nFfShexp: 0 };
  // glm4moe, deepseek2: expert_shared_count shared experts of the routed width, one FFN (llama.cpp sizes it so).
  if (arch === 'glm4moe' || arch === 'deepseek2')
    return { nFfExp, nFfShexp: nFfExp * metaUint(file, k('expert_shared_count'), { min: 1, max: 64 }) };
  const nFfShexp = file.metadata.has(k('expert_shared_feed_forward_length'))
    ? dim('expert_shared_feed_forward_length')
    : fromFf('expert_shared_feed_forward_length');
  return { nFfExp, nFfShexp };
}

/**
 * A key llama.cpp reads with get_key_or_arr: one unsigned integer, or an array of one per layer.
 * moetier's layers are all alike, so an array must hold one value throughout.
 */
function layerUniform(file: GgufFile, key: string, nLayer: number, fallback?: number): number {
  const value = file.metadata.get(key);
  if (!Array.isArray(value)) return metaUint(file, key, { min: 1, max: DIM_MAX, fallback });
  const ok =
    value.length === nLayer &&
    value.every((v) => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= DIM_MAX);
  if (!ok)
    throw new GgufFormatError(
      file.path,
      `key ${key}`,
      `an unsigned integer from 1 to ${DIM_MAX}, or an array of ${nLayer} of them (one per layer)`,
    );
  if (value.some((v) => v !== value[0])) {
    throw new UnsupportedModelError(
      file.path,
      `key ${key}`,
      `the same value for every layer (layers of different shapes are not implemented), got [${value.join(', ')}]`,
    );
  }
  return value[0] as number;
}

function checkConsistency(file: GgufFile, hp: HParams): void {
  const k = (name: string): string => `key ${hp.arch}.${name}`;
  const fail = (where: string, expected: string): never => {
    throw new GgufFormatError(file.path, where, expected);
  };
  if (hp.nHead % hp.nHeadKv !== 0)
    fail(k('attention.head_count_kv'), `a divisor of head_count ${hp.nHead}, got ${hp.nHeadKv}`);
  if (hp.headDim < 2 || hp.headDim % 2 !== 0)
    fail(k('attention.key_length'), `an even head dim (rope rotates pairs), got ${hp.headDim}`);
  checkRope(file);
  // llama.cpp defaults value_length to embedding_length / head_count, not to key_length.
  const valueLength = file.metadata.get(`${hp.arch}.attention.value_length`) ?? Math.floor(hp.nEmbd / hp.nHead);
  // MLA (deepseek2): the value is the cached latent, kv_lora_rank wide.
  if (valueLength !== (hp.mla ? hp.mla.kvLora : hp.headDim)) {
    const shown = file.metadata.has(`${hp.arch}.attention.value_length`)
      ? String(valueLength)
      : `${String(valueLength)} (the default, embedding_length / head_count)`;
    throw new UnsupportedModelError(
      file.path,
      k('attention.value_length'),
      `${hp.mla ? `kv_lora_rank ${hp.mla.kvLora} (MLA's value is the latent)` : `the key length ${hp.headDim}`}, got ${shown}`,
    );
  }
  if (hp.nExpertUsed > hp.nExpert)
    fail(k('expert_used_count'), `at most expert_count ${hp.nExpert}, got ${hp.nExpertUsed}`);
  // Each layer needs a dozen tensors: a block count beyond the tensor count is corrupt (and would make us loop).
  if (hp.nLayer > file.tensors.size)
    fail(k('block_count'), `at most the tensor count ${file.tensors.size}, got ${hp.nLayer}`);
  const tokens = file.metadata.get('tokenizer.ggml.tokens');
  if (Array.isArray(tokens) && tokens.length !== hp.nVocab) {
    fail('key tokenizer.ggml.tokens', `one token per row of token_embd.weight (${hp.nVocab}), got ${tokens.length}`);
  }
}

/** Per-frequency rope factors (llama3-style scaling) are not computed: refused, not run wrong. */
function checkRope(file: GgufFile): void {
  if (file.tensors.has('rope_freqs.weight')) {
    throw new UnsupportedModelError(
      file.path,
      'tensor rope_freqs.weight',
      'no per-frequency rope factors (llama3-style rope scaling is not implemented)',
    );
  }
}
