/**
 * GGUF value vocabulary shared by the reader and the writer: the on-disk value
 * type ids, typed values for writing, and the byte size of a tensor.
 */
import { GGML_BLOCK, type GgmlTypeName } from '../types.js';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_ALIGNMENT_DEFAULT = 32;

/** GGUF metadata value type ids (gguf.h `enum gguf_type`). */
export const GGUF_VALUE_TYPE = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;
export type GgufValueTypeName = keyof typeof GGUF_VALUE_TYPE;
export type GgufItemTypeName = Exclude<GgufValueTypeName, 'array'>;

/** Fixed byte size of each numeric / bool value type (strings and arrays are variable). */
export const GGUF_SCALAR_BYTES: Partial<Record<GgufValueTypeName, number>> = {
  u8: 1,
  i8: 1,
  bool: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  u64: 8,
  i64: 8,
  f64: 8,
};

export function valueTypeName(id: number): GgufValueTypeName | undefined {
  for (const [name, value] of Object.entries(GGUF_VALUE_TYPE)) if (value === id) return name as GgufValueTypeName;
  return undefined;
}

/** A metadata value with its explicit on-disk type, as the writer takes it. */
export type GgufTypedValue =
  | { type: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: bigint | number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | {
      type: 'array';
      itemType: GgufItemTypeName;
      values: Array<number | bigint | boolean | string> | Float32Array | Int32Array;
    };

/** ggml type ids that exist in llama.cpp but that moetier does not read; named in refusals. */
export const GGML_TYPE_NAMES_OTHER: Record<number, string> = {
  3: 'Q4_1',
  9: 'Q8_1',
  15: 'Q8_K',
  16: 'IQ2_XXS',
  17: 'IQ2_XS',
  18: 'IQ3_XXS',
  19: 'IQ1_S',
  21: 'IQ3_S',
  22: 'IQ2_S',
  24: 'I8',
  25: 'I16',
  26: 'I32',
  27: 'I64',
  28: 'F64',
  29: 'IQ1_M',
  34: 'TQ1_0',
  35: 'TQ2_0',
};

/**
 * Bytes of a tensor of `type` with `dims`, or a string saying why the shape is
 * invalid (zero dims, a row not divisible by the block size, over 2^53 bytes).
 * Blocks run along dims[0] (ggml quantises rows), so dims[0] must be a multiple of the block.
 */
export function tensorByteLength(type: GgmlTypeName, dims: readonly number[]): number | string {
  const block = GGML_BLOCK[type];
  let elements = 1;
  for (const d of dims) {
    if (!Number.isSafeInteger(d) || d <= 0) return `positive integer dims, got [${dims.join(', ')}]`;
    elements *= d;
    if (!Number.isSafeInteger(elements)) return `an element count below 2^53, got dims [${dims.join(', ')}]`;
  }
  if (dims.length === 0) return 'at least one dim';
  if (dims[0] % block.elements !== 0) {
    return `dims[0] (${dims[0]}) divisible by the ${type} block size ${block.elements}`;
  }
  const bytes = (elements / block.elements) * block.bytes;
  if (!Number.isSafeInteger(bytes)) return `a byte length below 2^53, got dims [${dims.join(', ')}]`;
  return bytes;
}

export function alignUp(offset: number, alignment: number): number {
  return Math.ceil(offset / alignment) * alignment;
}
