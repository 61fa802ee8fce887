/**
 * Scans a model's tensors for NaN and inf (`moetier inspect --check-weights`): one of them in a
 * weight makes logits non-finite (the engine then stops the request with NonFiniteLogitsError),
 * so a user can find which tensor of a download is broken. Pure: reads the file's bytes only.
 *   F32 / F16 / BF16: every element (exponent all ones);
 *   Q8_0 / Q4_0: each block's f16 scale (the 8- and 4-bit quants are finite by construction).
 */
import { GGML_BLOCK, type GgufFile, type TensorInfo } from './types.js';

export interface NonFiniteWeight {
  tensor: string;
  /** Element index (float types) or block index (quantised types) of the first non-finite value. */
  index: number;
  unit: 'element' | 'block scale';
  /** Non-finite values in the tensor (elements or block scales). */
  count: number;
}

export function findNonFiniteWeights(file: GgufFile): NonFiniteWeight[] {
  const view = new DataView(file.bytes.buffer, file.bytes.byteOffset, file.bytes.byteLength);
  const found: NonFiniteWeight[] = [];
  for (const t of file.tensors.values()) {
    const r = scanTensor(view, t);
    if (r) found.push({ tensor: t.name, ...r });
  }
  return found;
}

function scanTensor(view: DataView, t: TensorInfo): Omit<NonFiniteWeight, 'tensor'> | undefined {
  const { bytes: blockBytes } = GGML_BLOCK[t.type];
  // [stride between values, test of the value's bits]
  const plan: [number, (at: number) => boolean, NonFiniteWeight['unit']] =
    t.type === 'F32' ? [4, (at) => (view.getUint32(at, true) & 0x7f800000) === 0x7f800000, 'element']
    : t.type === 'F16' ? [2, (at) => (view.getUint16(at, true) & 0x7c00) === 0x7c00, 'element']
    : t.type === 'BF16' ? [2, (at) => (view.getUint16(at, true) & 0x7f80) === 0x7f80, 'element']
    : [blockBytes, (at) => (view.getUint16(at, true) & 0x7c00) === 0x7c00, 'block scale'];
  const [stride, nonFinite, unit] = plan;
  let first = -1, count = 0;
  for (let at = t.offset, i = 0; at + stride <= t.offset + t.byteLength; at += stride, i++) {
    if (nonFinite(at)) {
      if (first < 0) first = i;
      count++;
    }
  }
  return first < 0 ? undefined : { index: first, unit, count };
}
