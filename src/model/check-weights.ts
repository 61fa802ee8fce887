/**
 * Scans a model's tensors for NaN and inf (`moetier inspect --check-weights`): one of them in a
 * weight makes logits non-finite (the engine then stops the request with NonFiniteLogitsError),
 * so a user can find which tensor of a download is broken. Pure: reads the file's bytes only.
 *   F32 / F16 / BF16: every element (exponent all ones);
 *   block types: each block's f16 scales (d, and dmin / m where the type has one; the integer
 *   quants and the k-quants' 4- to 8-bit sub-block scales are finite by construction).
 */
import { GGML_BLOCK, type GgmlTypeName, type GgufFile, type TensorInfo } from './types.js';

/** Byte offsets of the f16 scales inside one block of each block type (ggml-common.h layouts). */
export const BLOCK_F16_SCALES: Partial<Record<GgmlTypeName, readonly number[]>> = {
  Q8_0: [0], Q4_0: [0], Q5_0: [0], Q5_1: [0, 2],
  Q2_K: [80, 82], Q3_K: [108], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208],
};

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
    : [blockBytes, blockScaleTest(view, t.type), 'block scale'];
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

function blockScaleTest(view: DataView, type: GgmlTypeName): (at: number) => boolean {
  const offsets = BLOCK_F16_SCALES[type];
  if (offsets === undefined) throw new Error(`check-weights: no f16 scale offsets for block type ${type}`); // a new type must be added above
  return (at) => offsets.some((o) => (view.getUint16(at + o, true) & 0x7c00) === 0x7c00);
}
