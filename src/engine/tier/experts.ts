/**
 * How big one expert is in the container: gate | up | down, each a contiguous slice of its
 * layer's [cols, rows, nExpert] tensor (ggml order: the expert is the slowest dim).
 *
 *   ffn_gate_exps [nEmbd, nFfExp, nExpert] -> expert e: bytes [e * per, (e + 1) * per)
 */
import { UnsupportedModelError } from '../../core/errors.js';
import { firstMoeLayer, moeLayers, type GgufFile, type HParams } from '../../model/types.js';

const parts = ['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'] as const;

/** The byte lengths of one expert's three container slices at MoE layer `layer` (gate, up, down). */
export function expertPartBytes(file: GgufFile, hp: Pick<HParams, 'nExpert' | 'denseLayers'>, layer: number): number[] {
  return parts.map((part) => {
    const name = `blk.${firstMoeLayer(hp) + layer}.${part}.weight`;
    const t = file.tensors.get(name);
    if (!t) throw new UnsupportedModelError(file.path, name, 'an expert tensor (the tier needs a MoE layer)');
    return t.byteLength / hp.nExpert;
  });
}

/**
 * Bytes of one slot: the largest expert of any layer in the container type. A k-quant mix may give
 * some layers' experts another type (llama-quantize's Q4_K_M: a Q6_K ffn_down where use_more_bits
 * holds), so layers differ; every slot takes the largest, as the native tier sizes them.
 */
export function expertContainerBytes(file: GgufFile, hp: Pick<HParams, 'nExpert' | 'nLayer' | 'denseLayers'>): number {
  let bytes = 0;
  for (let l = 0; l < moeLayers(hp); l++)
    bytes = Math.max(
      bytes,
      expertPartBytes(file, hp, l).reduce((s, v) => s + v, 0),
    );
  return bytes;
}

/** Where expert `expert` of MoE layer `layer` starts in the file: its gate slice (the first its copy reads). */
export function expertFileOffset(
  file: GgufFile,
  hp: Pick<HParams, 'nExpert' | 'denseLayers'>,
  layer: number,
  expert: number,
): number {
  const name = `blk.${firstMoeLayer(hp) + layer}.${parts[0]}.weight`;
  const t = file.tensors.get(name);
  if (!t) throw new UnsupportedModelError(file.path, name, 'an expert tensor (the tier needs a MoE layer)');
  return t.offset + expert * (t.byteLength / hp.nExpert);
}
