/**
 * Napkin math of decode: the weight bytes one decode token reads.
 *
 * per layer:  attention (q, k, v, o, their norms and biases) + router (ffn_gate_inp)
 *             + top-k of E experts: k/E of each *_exps tensor [cols, rows, E]
 *             + the shared expert, when there is one (all of it, every token)
 * once:       one row of token_embd + output_norm + the head (output, or token_embd when tied)
 *
 * bandwidth bound (tok/s) = read bandwidth (bytes/s) / bytes per token
 */

import { GGML_BLOCK, GGML_TYPE } from '../../dist/src/model/types.js';

/** ggml type id -> [block elements, block bytes]: the engine's own table (src/model/types.ts), so
 * the napkin math sizes exactly the types moetier reads, k-quants included. */
const GGML_BLOCKS = new Map(
  Object.entries(GGML_TYPE).map(([name, id]) => [id, [GGML_BLOCK[name].elements, GGML_BLOCK[name].bytes]]),
);

/** Stored bytes of a tensor; dims in ggml order (dims[0] = row length). */
export function tensorBytes({ name, ggmlType, dims }) {
  const block = GGML_BLOCKS.get(ggmlType);
  if (!block) throw new RangeError(`tensor ${name}: ggml type ${ggmlType} is not in the bench's size table`);
  const [elements, bytes] = block;
  const cols = Number(dims[0]);
  if (cols % elements !== 0)
    throw new RangeError(`tensor ${name}: row length ${cols} is not a multiple of ${elements}`);
  const rows = dims.slice(1).reduce((n, d) => n * Number(d), 1);
  return (cols / elements) * bytes * rows;
}

function category(name) {
  if (name === 'token_embd.weight') return 'embedding';
  if (name === 'output.weight' || name === 'output_norm.weight') return 'head';
  if (/\.ffn_(gate|up|down)_exps\.weight$/.test(name)) return 'experts';
  if (/\.ffn_gate_inp\.weight$/.test(name)) return 'router';
  if (/_shexp(\.weight)?$/.test(name)) return 'sharedExpert';
  if (/\.attn_/.test(name)) return 'attention';
  if (/\.ffn_norm\.weight$/.test(name)) return 'norms';
  throw new RangeError(`tensor ${name}: the bench does not know whether decode reads it`);
}

/**
 * tensors: [{ name, ggmlType, dims }], { nExpert, nExpertUsed, nVocab }
 * -> { bytesPerToken, breakdown: { attention, router, experts, sharedExpert, norms, head, embeddingRow }, fileWeightBytes }
 */
export function decodeBytesPerToken(tensors, { nExpert, nExpertUsed, nVocab }) {
  const breakdown = { attention: 0, router: 0, experts: 0, sharedExpert: 0, norms: 0, head: 0, embeddingRow: 0 };
  const tied = !tensors.some((t) => t.name === 'output.weight');
  let fileWeightBytes = 0;
  for (const tensor of tensors) {
    const bytes = tensorBytes(tensor);
    fileWeightBytes += bytes;
    const kind = category(tensor.name);
    if (kind === 'experts') breakdown.experts += (bytes * nExpertUsed) / nExpert;
    else if (kind === 'embedding') {
      breakdown.embeddingRow += bytes / nVocab;
      if (tied) breakdown.head += bytes;
    } else breakdown[kind] += bytes;
  }
  const bytesPerToken = Object.values(breakdown).reduce((a, b) => a + b, 0);
  return { bytesPerToken, breakdown, fileWeightBytes };
}
