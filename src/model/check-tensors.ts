/**
 * The tensor table against the hyper-parameters: every tensor the architecture needs
 * (arch.ts) exists with the dims they imply, 1-D norms and biases are F32, and a layout or
 * an optional tensor that llama.cpp would use but moetier does not compute is refused by name.
 *
 * Dims compare as llama.cpp's loader compares them (llama-model-loader.cpp check_tensor_dims):
 * ggml pads every shape to 4 dims with 1s, so [256] and [256, 1] are the same tensor. Converters
 * differ here: convert_hf_to_gguf.py keeps qwen2moe's shared-expert gate (HF [1, n_embd]) as
 * [n_embd, 1], moetier's synthetic writer stores [n_embd]. The native pass compares the same way,
 * and the reference reads a [n, 1] tensor as its n values, so both compute the same from either.
 */
import { GgufFormatError, UnsupportedModelError } from '../core/errors.js';
import { expectedTensors } from './arch.js';
import type { GgufFile, HParams } from './types.js';

/** dims without trailing 1s (at least one dim kept): what ggml's 4-dim shape says. */
export function significantDims(dims: readonly number[]): number[] {
  let n = dims.length;
  while (n > 1 && dims[n - 1] === 1) n--;
  return dims.slice(0, n);
}

export function sameDims(a: readonly number[], b: readonly number[]): boolean {
  const x = significantDims(a),
    y = significantDims(b);
  return x.length === y.length && x.every((d, i) => d === y[i]);
}

export function checkTensors(file: GgufFile, hp: HParams): void {
  refuseSplitExperts(file, hp);
  refuseUnusedOptional(file, hp);
  for (const spec of expectedTensors(hp)) {
    const info = file.tensors.get(spec.name);
    const dims = `[${spec.dims.join(', ')}]`;
    if (info === undefined) {
      throw new GgufFormatError(
        file.path,
        `tensor ${spec.name}`,
        `a tensor of dims ${dims}, which ${hp.arch} needs, but it is missing`,
      );
    }
    if (!sameDims(info.dims, spec.dims)) {
      throw new GgufFormatError(
        file.path,
        `tensor ${spec.name}`,
        `dims ${dims} (from the hyper-parameters), got [${info.dims.join(', ')}]`,
      );
    }
    if ((spec.role === 'norm' || spec.role === 'bias') && info.type !== 'F32') {
      // The shared-expert gate is a norm-like vector to the forward pass; a [n, 1] one could be quantized.
      const what = spec.name.endsWith('ffn_gate_inp_shexp.weight')
        ? 'the shared-expert gate (a quantized gate is not computed)'
        : `a 1-D ${spec.role}`;
      throw new UnsupportedModelError(file.path, `tensor ${spec.name}`, `type F32 for ${what}, got ${info.type}`);
    }
  }
}

/**
 * Older Mixtral conversions (llama.cpp's convert.py before the merged layout of April 2024) store
 * each expert as its own tensor, blk.N.ffn_gate.E.weight. The native pass addresses an expert as
 * a slice of one [.., .., nExpert] tensor, so that layout is refused by name, with the way out.
 */
function refuseSplitExperts(file: GgufFile, hp: HParams): void {
  for (let l = hp.denseLayers?.count ?? 0; l < hp.nLayer; l++) {
    if (file.tensors.has(`blk.${l}.ffn_gate_exps.weight`)) continue;
    for (const part of ['gate', 'up', 'down']) {
      const name = `blk.${l}.ffn_${part}.0.weight`;
      if (!file.tensors.has(name)) continue;
      throw new UnsupportedModelError(
        file.path,
        `tensor ${name}`,
        `merged expert tensors (blk.N.ffn_gate_exps.weight [${hp.nEmbd}, ${hp.nFfExp}, ${hp.nExpert}] and its up / down), but this file ` +
          'stores one tensor per expert (blk.N.ffn_gate.E.weight, the layout of older Mixtral conversions), which moetier does not read: ' +
          're-convert the model with a current llama.cpp convert_hf_to_gguf.py',
      );
    }
  }
}

/**
 * Tensors llama.cpp creates as optional (TENSOR_NOT_REQUIRED) and then uses when present, which
 * this forward pass does not compute: running without them would silently differ.
 */
function refuseUnusedOptional(file: GgufFile, hp: HParams): void {
  // olmoe's graph passes no attention-output bias; llama, qwen2moe and qwen3moe add wo_b when it exists;
  // gpt-oss's is required, and computed (HParams.attnOutBias).
  if (hp.arch === 'olmoe' || hp.attnOutBias) return;
  for (let l = 0; l < hp.nLayer; l++) {
    const name = `blk.${l}.attn_output.bias`;
    if (file.tensors.has(name)) {
      throw new UnsupportedModelError(
        file.path,
        `tensor ${name}`,
        'no attention-output bias (moetier does not add one; llama.cpp would)',
      );
    }
  }
}
