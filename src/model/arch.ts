/**
 * Which tensors an architecture needs, with the dims its hyper-parameters imply (ggml order).
 * One list for the validator, the synthetic writer, the native desc and the test fixtures.
 */
import { attnOutDim, type HParams } from './types.js';

/** norm / bias: 1-D f32; router: f32 matrix; matrix and experts: stored in the model's quant type. */
export type TensorRole = 'norm' | 'bias' | 'router' | 'matrix' | 'experts';

export interface TensorSpec {
  name: string;
  dims: number[];
  role: TensorRole;
}

export function expectedTensors(hp: HParams): TensorSpec[] {
  const specs: TensorSpec[] = [{ name: 'token_embd.weight', dims: [hp.nEmbd, hp.nVocab], role: 'matrix' }];
  const qDim = hp.nHead * hp.headDim;
  const kvDim = hp.nHeadKv * hp.headDim;
  for (let l = 0; l < hp.nLayer; l++) {
    const p = `blk.${l}.`;
    specs.push({ name: p + 'attn_norm.weight', dims: [hp.nEmbd], role: 'norm' });
    if (hp.mla) specs.push(...mlaTensors(hp, p));
    else
      specs.push(
        { name: p + 'attn_q.weight', dims: [hp.nEmbd, qDim], role: 'matrix' },
        { name: p + 'attn_k.weight', dims: [hp.nEmbd, kvDim], role: 'matrix' },
        { name: p + 'attn_v.weight', dims: [hp.nEmbd, kvDim], role: 'matrix' },
      );
    specs.push({ name: p + 'attn_output.weight', dims: [attnOutDim(hp), hp.nEmbd], role: 'matrix' });
    if (hp.attnOutBias) specs.push({ name: p + 'attn_output.bias', dims: [hp.nEmbd], role: 'bias' });
    if (hp.attnSinks) specs.push({ name: p + 'attn_sinks.weight', dims: [hp.nHead], role: 'bias' });
    if (hp.attnBias) {
      specs.push(
        { name: p + 'attn_q.bias', dims: [qDim], role: 'bias' },
        { name: p + 'attn_k.bias', dims: [kvDim], role: 'bias' },
        { name: p + 'attn_v.bias', dims: [kvDim], role: 'bias' },
      );
    }
    if (hp.qkNorm === 'head') {
      specs.push(
        { name: p + 'attn_q_norm.weight', dims: [hp.headDim], role: 'norm' },
        { name: p + 'attn_k_norm.weight', dims: [hp.headDim], role: 'norm' },
      );
    } else if (hp.qkNorm === 'full') {
      specs.push(
        { name: p + 'attn_q_norm.weight', dims: [qDim], role: 'norm' },
        { name: p + 'attn_k_norm.weight', dims: [kvDim], role: 'norm' },
      );
    }
    specs.push({ name: p + `${hp.ffnNorm ?? 'ffn_norm'}.weight`, dims: [hp.nEmbd], role: 'norm' });
    if (l < (hp.denseLayers?.count ?? 0)) {
      // A leading dense layer: a plain FFN, no router, no experts, no shared expert.
      const nFf = hp.denseLayers!.nFf;
      specs.push(
        { name: p + 'ffn_gate.weight', dims: [hp.nEmbd, nFf], role: 'matrix' },
        { name: p + 'ffn_up.weight', dims: [hp.nEmbd, nFf], role: 'matrix' },
        { name: p + 'ffn_down.weight', dims: [nFf, hp.nEmbd], role: 'matrix' },
      );
      continue;
    }
    specs.push(
      { name: p + 'ffn_gate_inp.weight', dims: [hp.nEmbd, hp.nExpert], role: 'router' },
      ...(hp.routerBias ? [{ name: p + 'ffn_gate_inp.bias', dims: [hp.nExpert], role: 'bias' as const }] : []),
      ...(hp.expertBias ? [{ name: p + 'exp_probs_b.bias', dims: [hp.nExpert], role: 'bias' as const }] : []),
      { name: p + 'ffn_gate_exps.weight', dims: [hp.nEmbd, hp.nFfExp, hp.nExpert], role: 'experts' },
      { name: p + 'ffn_up_exps.weight', dims: [hp.nEmbd, hp.nFfExp, hp.nExpert], role: 'experts' },
      { name: p + 'ffn_down_exps.weight', dims: [hp.nFfExp, hp.nEmbd, hp.nExpert], role: 'experts' },
    );
    // gpt-oss's per-expert biases: small f32, kept with the dense weights (the tier moves only the matrices).
    if (hp.expertFfnBias) {
      specs.push(
        { name: p + 'ffn_gate_exps.bias', dims: [hp.nFfExp, hp.nExpert], role: 'bias' },
        { name: p + 'ffn_up_exps.bias', dims: [hp.nFfExp, hp.nExpert], role: 'bias' },
        { name: p + 'ffn_down_exps.bias', dims: [hp.nEmbd, hp.nExpert], role: 'bias' },
      );
    }
    if (hp.sharedExpert) {
      // [nEmbd] or, as convert_hf_to_gguf.py writes it, [nEmbd, 1]: the same tensor (check-tensors.ts).
      if (hp.sharedExpertGate !== false)
        specs.push({ name: p + 'ffn_gate_inp_shexp.weight', dims: [hp.nEmbd], role: 'norm' });
      specs.push(
        { name: p + 'ffn_gate_shexp.weight', dims: [hp.nEmbd, hp.nFfShexp], role: 'matrix' },
        { name: p + 'ffn_up_shexp.weight', dims: [hp.nEmbd, hp.nFfShexp], role: 'matrix' },
        { name: p + 'ffn_down_shexp.weight', dims: [hp.nFfShexp, hp.nEmbd], role: 'matrix' },
      );
    }
  }
  specs.push({ name: 'output_norm.weight', dims: [hp.nEmbd], role: 'norm' });
  if (!hp.tiedOutput) specs.push({ name: 'output.weight', dims: [hp.nEmbd, hp.nVocab], role: 'matrix' });
  return specs;
}

/**
 * deepseek2's attention (MLA, as convert_hf_to_gguf.py writes it since 2025: attn_k_b / attn_v_b split):
 * the query from attn_q (q_lora_rank 0: V2-Lite, Moonlight) or attn_q_a, its norm and attn_q_b; the
 * latent and shared roped key from attn_kv_a_mqa, the latent's norm; per head K_b [kvLora x nope] and
 * V_b [vHead x kvLora], one matrix per head.
 */
function mlaTensors(hp: HParams, p: string): TensorSpec[] {
  const { qLora, kvLora, nope, vHead } = hp.mla!;
  const rope = hp.ropeDims ?? 0;
  const qDim = hp.nHead * (nope + rope);
  const query: TensorSpec[] =
    qLora > 0
      ? [
          { name: p + 'attn_q_a.weight', dims: [hp.nEmbd, qLora], role: 'matrix' },
          { name: p + 'attn_q_a_norm.weight', dims: [qLora], role: 'norm' },
          { name: p + 'attn_q_b.weight', dims: [qLora, qDim], role: 'matrix' },
        ]
      : [{ name: p + 'attn_q.weight', dims: [hp.nEmbd, qDim], role: 'matrix' }];
  return [
    ...query,
    { name: p + 'attn_kv_a_mqa.weight', dims: [hp.nEmbd, kvLora + rope], role: 'matrix' },
    { name: p + 'attn_kv_a_norm.weight', dims: [kvLora], role: 'norm' },
    { name: p + 'attn_k_b.weight', dims: [nope, kvLora, hp.nHead], role: 'matrix' },
    { name: p + 'attn_v_b.weight', dims: [kvLora, vHead, hp.nHead], role: 'matrix' },
  ];
}

/** The flags of each architecture (docs/FORWARD.md's table). */
export const ARCH_FLAGS = {
  qwen3moe: { ropeType: 'neox', qkNorm: 'head', normTopK: true, attnBias: false, sharedExpert: false },
  qwen2moe: { ropeType: 'neox', qkNorm: 'none', normTopK: false, attnBias: true, sharedExpert: true },
  olmoe: { ropeType: 'neox', qkNorm: 'full', normTopK: false, attnBias: false, sharedExpert: false },
  llama: { ropeType: 'norm', qkNorm: 'none', normTopK: true, attnBias: false, sharedExpert: false },
  // GLM-4.5: q/k/v biases, an ungated shared expert, sigmoid routing with a selection bias; its
  // qk norm, renormalisation, scale and partial rotary come from the file (hparams.ts glm4moeParams).
  glm4moe: { ropeType: 'neox', qkNorm: 'none', normTopK: true, attnBias: true, sharedExpert: true },
  // gpt-oss: q/k/v (and output) biases; its sinks, window, router and experts are ARCH_EXTRAS'.
  'gpt-oss': { ropeType: 'neox', qkNorm: 'none', normTopK: false, attnBias: true, sharedExpert: false },
  // DeepSeek-V2 / V3-shaped files: MLA (HParams.mla), ungated shared experts, NORM rotation of the
  // rope dims; routing, renormalisation, scale, groups and leading dense layers from the file.
  deepseek2: { ropeType: 'norm', qkNorm: 'none', normTopK: false, attnBias: false, sharedExpert: true },
} as const satisfies Record<
  HParams['arch'],
  Pick<HParams, 'ropeType' | 'qkNorm' | 'normTopK' | 'attnBias' | 'sharedExpert'>
>;

/**
 * The optional HParams an architecture always has (its routing, tensor names): the loader reads a
 * file's own values over them (hparams.ts), the synthetic writer and the test fixtures start from them.
 */
export const ARCH_EXTRAS: Partial<Record<HParams['arch'], Partial<HParams>>> = {
  glm4moe: { gating: 'sigmoid', expertBias: true, sharedExpertGate: false, ffnNorm: 'post_attention_norm' },
  deepseek2: { sharedExpertGate: false },
  // llama.cpp's llama_model_openai_moe: fixed, not read from the file (its sliding window is: hparams.ts).
  'gpt-oss': {
    gating: 'softmax_weight',
    routerBias: true,
    ffnNorm: 'post_attention_norm',
    attnOutBias: true,
    attnSinks: true,
    expertFfnBias: true,
    expertAct: 'swiglu_oai',
  },
};
