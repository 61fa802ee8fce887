/**
 * Where one expert's bytes live in the container: gate | up | down, each a contiguous
 * slice of its layer's [cols, rows, nExpert] tensor (ggml order: the expert is the slowest dim).
 *
 *   ffn_gate_exps [nEmbd, nFfExp, nExpert] -> expert e: bytes [e * per, (e + 1) * per)
 */
import { UnsupportedModelError } from '../../core/errors.js';
import type { GgufFile, HParams } from '../../model/types.js';

const parts = ['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'] as const;

/** The three container slices of one expert, views over the mapped file (never copied). */
export function expertSources(file: GgufFile, hp: Pick<HParams, 'nExpert'>, layer: number, expert: number): Uint8Array[] {
  return parts.map((part) => {
    const name = `blk.${layer}.${part}.weight`;
    const t = file.tensors.get(name);
    if (!t) throw new UnsupportedModelError(file.path, name, 'an expert tensor (the tier needs a MoE layer)');
    const per = t.byteLength / hp.nExpert;
    return file.bytes.subarray(t.offset + expert * per, t.offset + (expert + 1) * per);
  });
}

/**
 * Bytes of one slot: the largest expert of any layer in the container type. A k-quant mix may give
 * some layers' experts another type (llama-quantize's Q4_K_M: a Q6_K ffn_down where use_more_bits
 * holds), so layers differ; every slot takes the largest, as the native tier sizes them.
 */
export function expertContainerBytes(file: GgufFile, hp: Pick<HParams, 'nExpert' | 'nLayer'>): number {
  let bytes = 0;
  for (let l = 0; l < hp.nLayer; l++) bytes = Math.max(bytes, expertSources(file, hp, l, 0).reduce((s, v) => s + v.byteLength, 0));
  return bytes;
}
