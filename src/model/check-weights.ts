/**
 * Scans a model's tensors for NaN and inf (`moetier inspect --check-weights`): one of them in a
 * weight makes logits non-finite (the engine then stops the request with NonFiniteLogitsError),
 * so a user can find which tensor of a download is broken. Reads the file's bytes only: the mapped
 * view, and past it (a model bigger than the view) the file in 64 MiB chunks.
 *   F32 / F16 / BF16: every element (exponent all ones);
 *   block types: each block's f16 scales (d, and dmin / m where the type has one; the integer
 *   quants and the k-quants' 4- to 8-bit sub-block scales are finite by construction); MXFP4: each
 *   block's E8M0 exponent, bad when 0xFF (the MX format's NaN; ggml_validate_row_data refuses it).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { GGML_BLOCK, type GgmlTypeName, type GgufFile, type TensorInfo } from './types.js';

/** Byte offsets of the f16 scales inside one block of each block type (ggml-common.h layouts). */
export const BLOCK_F16_SCALES: Partial<Record<GgmlTypeName, readonly number[]>> = {
  Q8_0: [0],
  Q4_0: [0],
  Q5_0: [0],
  Q5_1: [0, 2],
  Q2_K: [80, 82],
  Q3_K: [108],
  Q4_K: [0, 2],
  Q5_K: [0, 2],
  Q6_K: [208],
  IQ4_NL: [0],
  IQ4_XS: [0],
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
  const found: NonFiniteWeight[] = [];
  const reader = new TensorChunks(file);
  try {
    for (const t of file.tensors.values()) {
      const r = scanTensor(reader, t);
      if (r) found.push({ tensor: t.name, ...r });
    }
  } finally {
    reader.close();
  }
  return found;
}

/** A tensor's bytes in chunks: views of file.bytes where it covers them, else read from the file (a model past the mapped view). */
class TensorChunks {
  static readonly chunkBytes = 64 << 20;
  private fd: number | undefined;

  constructor(private readonly file: GgufFile) {}

  /** [offset, offset + length) as a DataView (length at most chunkBytes). */
  read(offset: number, length: number): DataView {
    const { bytes } = this.file;
    if (offset + length <= bytes.length) return new DataView(bytes.buffer, bytes.byteOffset + offset, length);
    this.fd ??= openSync(this.file.path, 'r');
    const out = Buffer.allocUnsafe(length);
    let done = 0;
    while (done < length) {
      const n = readSync(this.fd, out, done, length - done, offset + done);
      if (n === 0)
        throw new Error(
          `check-weights: ${this.file.path} ended at byte ${offset + done}, inside a tensor (the file changed?)`,
        );
      done += n;
    }
    return new DataView(out.buffer, out.byteOffset, length);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
  }
}

function scanTensor(reader: TensorChunks, t: TensorInfo): Omit<NonFiniteWeight, 'tensor'> | undefined {
  const float = t.type === 'F32' || t.type === 'F16' || t.type === 'BF16';
  const stride = t.type === 'F32' ? 4 : float ? 2 : GGML_BLOCK[t.type].bytes;
  const unit: NonFiniteWeight['unit'] = float ? 'element' : 'block scale';
  // Chunks hold whole values: a multiple of the stride.
  const chunk = Math.floor(TensorChunks.chunkBytes / stride) * stride;
  let first = -1,
    count = 0,
    index = 0;
  for (let start = 0; start + stride <= t.byteLength; start += chunk) {
    const view = reader.read(t.offset + start, Math.min(chunk, t.byteLength - start));
    const nonFinite = valueTest(view, t.type);
    for (let at = 0; at + stride <= view.byteLength; at += stride, index++) {
      if (nonFinite(at)) {
        if (first < 0) first = index;
        count++;
      }
    }
  }
  return first < 0 ? undefined : { index: first, unit, count };
}

/** The test of one value's bits at a byte offset of `view`: an element (float types) or a block's f16 scales. */
function valueTest(view: DataView, type: GgmlTypeName): (at: number) => boolean {
  if (type === 'F32') return (at) => (view.getUint32(at, true) & 0x7f800000) === 0x7f800000;
  if (type === 'F16') return (at) => (view.getUint16(at, true) & 0x7c00) === 0x7c00;
  if (type === 'BF16') return (at) => (view.getUint16(at, true) & 0x7f80) === 0x7f80;
  return blockScaleTest(view, type);
}

function blockScaleTest(view: DataView, type: GgmlTypeName): (at: number) => boolean {
  if (type === 'MXFP4') return (at) => view.getUint8(at) === 0xff;
  const offsets = BLOCK_F16_SCALES[type];
  if (offsets === undefined) throw new Error(`check-weights: no f16 scale offsets for block type ${type}`); // a new type must be added above
  return (at) => offsets.some((o) => (view.getUint16(at + o, true) & 0x7c00) === 0x7c00);
}
