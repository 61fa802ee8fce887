/**
 * A model's identity, for files keyed by model (heat files): what the model is, not what its
 * file is called, so a rename or a copy keeps its heat and two different `model.gguf` files
 * never share one.
 *
 *   sha256( u64 file size | header bytes [0, dataOffset) | first MiB of tensor data ) -> 32 hex
 *
 * The header holds the architecture, shapes, tokenizer and tensor table; two seeds or
 * fine-tunes of one shape share it, so the first MiB of weights tells them apart. The cost is
 * the header plus 1 MiB read from the mapped file, not the whole (multi-GB) file.
 */
import { createHash } from 'node:crypto';
import type { GgufFile } from './types.js';

export const IDENTITY_DATA_BYTES = 1 << 20;

export function modelIdentity(file: Pick<GgufFile, 'bytes' | 'dataOffset' | 'size'>): string {
  const { bytes, dataOffset } = file;
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(file.size));
  const end = Math.min(bytes.length, dataOffset + IDENTITY_DATA_BYTES);
  return createHash('sha256').update(size).update(bytes.subarray(0, end)).digest('hex').slice(0, 32);
}
