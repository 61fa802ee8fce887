/**
 * Tensor bytes of a synthetic model, one tensor at a time (the writer pulls them in order,
 * so at most one tensor is in memory: 27 MB for a medium expert tensor).
 *
 * Scales (D = nEmbd, |h| = sqrt(D) after rmsnorm, |x| ~ |e| the embedding norm):
 *   q, k, v, gate, up        std 1/sqrt(D)  -> pre-activations of std ~1
 *   attn_output [qDim -> D]  |out| ~ attentionShare |x|
 *   down [F -> D]            |out| ~ expertShare |x|   (E[(silu(g) u)^2] ~ 0.35 for g, u ~ N(0, 1);
 *                                                      gpt-oss's swiglu_oai 0.84)
 */
import { expectedTensors, type TensorSpec } from '../model/arch.js';
import { quantizeRow, rowBytes } from '../model/quant.js';
import { attnOutDim, type GgmlTypeName, type HParams } from '../model/types.js';
import type { PlantedModel } from './planted.js';
import { PLANT } from './presets.js';
import { Rng } from './prng.js';
import { tensorQuantType, type QuantName } from './quant-mix.js';

export { QUANT_NAMES, type QuantName } from './quant-mix.js';

export interface SynthTensor {
  name: string;
  type: GgmlTypeName;
  dims: number[];
  data: () => Uint8Array;
}

/** Fills one row; a uniform filler also says what it draws, so weights-native.ts can draw the same rows natively. */
export type RowFill = ((row: number, out: Float32Array) => void) & { uniform?: { rng: Rng; sd: number } };

export function synthTensors(plant: PlantedModel, quant: QuantName): SynthTensor[] {
  return expectedTensors(plant.hp).map((spec) => {
    // Norms, biases and the router stay F32 (llama.cpp and our reader expect it); k-quant mixes as llama-quantize.
    const type = tensorQuantType(quant, spec, plant.hp);
    return { name: spec.name, type, dims: spec.dims, data: () => tensorBytes(spec, type, rowFiller(spec, plant)) };
  });
}

function tensorBytes(spec: TensorSpec, type: GgmlTypeName, fill: RowFill): Uint8Array {
  const cols = spec.dims[0];
  const rows = spec.dims.slice(1).reduce((a, b) => a * b, 1);
  const stride = rowBytes(type, cols);
  const bytes = new Uint8Array(rows * stride);
  const row = new Float32Array(cols);
  for (let r = 0; r < rows; r++) {
    fill(r, row);
    quantizeRow(type, row, 0, cols, bytes, r * stride);
  }
  return bytes;
}

export function rowFiller(spec: TensorSpec, plant: PlantedModel): RowFill {
  const hp = plant.hp;
  const rng = new Rng(plant.seed, spec.name);
  const uniform = (sd: number): RowFill =>
    Object.assign((_row: number, out: Float32Array) => rng.fillUniform(out, sd), { uniform: { rng, sd } });
  const unit = 1 / Math.sqrt(hp.nEmbd);
  const layered = /^blk\.(\d+)\.(.+)$/.exec(spec.name);
  const kind = layered ? layered[2] : spec.name;
  switch (kind) {
    case 'token_embd.weight':
      return (v, out) => plant.embeddingRow(v, out);
    case 'output.weight':
      return (w, out) => plant.headRow(w, out);
    case 'ffn_gate_inp.weight':
      return (e, out) => plant.routerRow(Number(layered![1]), e, rng, out);
    case 'attn_output.weight': {
      const sd = (PLANT.attentionShare * plant.embedNorm) / Math.sqrt(attnOutDim(hp) * hp.nEmbd);
      return (r, out) => plant.attentionOutputRow(Number(layered![1]), r, sd, rng, out);
    }
    case 'ffn_down_exps.weight':
      return uniform(downStd(hp, hp.nFfExp, PLANT.expertShare, plant.embedNorm));
    case 'ffn_down_shexp.weight':
      return uniform(downStd(hp, hp.nFfShexp, PLANT.sharedExpertShare, plant.embedNorm));
    case 'ffn_down.weight': // a leading dense layer's FFN: as much as the routed experts together
      return uniform(downStd(hp, hp.denseLayers!.nFf, PLANT.expertShare, plant.embedNorm));
    case 'attn_q.bias':
    case 'attn_k.bias':
    case 'attn_v.bias':
    case 'exp_probs_b.bias': // glm4moe's selection bias: small beside the planted router's bonus
    case 'ffn_gate_inp.bias': // gpt-oss's router bias, likewise
    case 'attn_output.bias':
    case 'ffn_gate_exps.bias':
    case 'ffn_up_exps.bias':
    case 'ffn_down_exps.bias':
      return uniform(PLANT.biasStd);
    case 'attn_sinks.weight': // gpt-oss: sink logits of the order of the heads' scores
      return uniform(PLANT.sinkStd);
  }
  if (spec.role === 'norm' && kind !== 'ffn_gate_inp_shexp.weight') {
    return (_row, out) => {
      rng.fillUniform(out, PLANT.normJitter / Math.sqrt(3));
      for (let i = 0; i < out.length; i++) out[i] += 1;
    };
  }
  return uniform(unit); // q, k, v, gate, up (experts and shared), shared-expert gate input
}

function downStd(hp: HParams, width: number, share: number, embedNorm: number): number {
  // E[act^2] for g, u ~ N(0, 1): silu(g) u 0.35; gpt-oss's swiglu_oai (its + 1 on up) 0.84.
  const actSquare = hp.expertAct === 'swiglu_oai' ? 0.84 : 0.35;
  return (share * embedNorm) / (Math.sqrt(actSquare * width) * Math.sqrt(hp.nEmbd));
}
