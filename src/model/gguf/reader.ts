/**
 * GGUF v3 reader: parses the header, metadata and tensor infos of a whole file
 * held in memory (memory-mapped by the addon, or read for tests) and checks
 * every tensor's data lies, aligned and without overlap, inside the file.
 *
 *   u32 magic "GGUF" | u32 version (3) | u64 tensor count | u64 kv count
 *   kv:     string key | u32 value type | value
 *   tensor: string name | u32 n_dims | u64 dims[n_dims] | u32 ggml type | u64 offset (from data section)
 *   data section at alignUp(end of infos, general.alignment)
 */
import { GgufFormatError, UnsupportedModelError } from '../../core/errors.js';
import { limits } from '../../core/limits.js';
import {
  GGML_TYPE,
  type GgmlTypeName,
  type GgufFile,
  type GgufScalar,
  type GgufValue,
  type TensorInfo,
} from '../types.js';
import { Cursor } from './cursor.js';
import {
  GGML_TYPE_NAMES_OTHER,
  GGUF_ALIGNMENT_DEFAULT,
  GGUF_MAGIC,
  GGUF_SCALAR_BYTES,
  GGUF_VERSION,
  alignUp,
  tensorByteLength,
  valueTypeName,
  type GgufValueTypeName,
} from './values.js';

const SUPPORTED_TYPES = Object.keys(GGML_TYPE).join(', ');

/**
 * `bytes` holds the file from its start, at least through the header; `size` is the whole file's
 * (default: bytes.length, the file read whole), against which tensor data is placed.
 */
export function parseGguf(bytes: Uint8Array, path: string, size: number = bytes.length): GgufFile {
  const cur = new Cursor(bytes, path);
  cur.need(4, 'magic "GGUF"');
  if (cur.u32('magic') !== GGUF_MAGIC) cur.fail('magic "GGUF"', 0);
  const version = cur.u32('version');
  if (version !== GGUF_VERSION)
    cur.fail(`GGUF version ${GGUF_VERSION} (the only version supported), got ${version}`, 4);
  const tensorCount = cur.count('tensor count', limits.ggufTensorCountMax);
  const kvCount = cur.count('metadata kv count', limits.ggufKvCountMax);

  const metadata = readMetadata(cur, kvCount);
  const alignment = readAlignment(cur, metadata);
  const infos = readTensorInfos(cur, tensorCount, alignment);
  const dataOffset = alignUp(cur.pos, alignment);
  cur.context = 'data section';
  if (tensorCount > 0 && dataOffset > size) {
    cur.fail(`the data section at byte ${dataOffset} inside the file, but the file ends at byte ${size}`);
  }
  const tensors = placeTensors(path, infos, dataOffset, size);
  return { path, version, metadata, tensors, alignment, dataOffset, bytes, size };
}

function readMetadata(cur: Cursor, kvCount: number): Map<string, GgufValue> {
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    cur.context = `metadata kv ${i}`;
    const keyAt = cur.pos;
    const key = cur.string('key', limits.ggufStringBytesMax);
    cur.context = `key ${key}`;
    if (metadata.has(key)) cur.fail('a key not seen before (duplicate key)', keyAt);
    const typeAt = cur.pos;
    const type = valueTypeName(cur.u32('value type'));
    if (type === undefined) cur.fail('a value type id from 0 to 12', typeAt);
    metadata.set(key, type === 'array' ? readArray(cur) : readScalar(cur, type));
  }
  return metadata;
}

function readScalar(cur: Cursor, type: Exclude<GgufValueTypeName, 'array'>): GgufScalar {
  switch (type) {
    case 'u8':
      return cur.u8('u8 value');
    case 'i8':
      return cur.i8('i8 value');
    case 'u16':
      return cur.u16('u16 value');
    case 'i16':
      return cur.i16('i16 value');
    case 'u32':
      return cur.u32('u32 value');
    case 'i32':
      return cur.i32('i32 value');
    case 'f32':
      return cur.f32('f32 value');
    case 'f64':
      return cur.f64('f64 value');
    case 'u64':
      return cur.u64('u64 value');
    case 'i64':
      return cur.i64('i64 value');
    case 'string':
      return cur.string('string value', limits.ggufStringBytesMax);
    case 'bool': {
      const at = cur.pos;
      const b = cur.u8('bool value');
      if (b > 1) cur.fail(`a bool (0 or 1), got ${b}`, at);
      return b === 1;
    }
  }
}

function readArray(cur: Cursor): GgufScalar[] {
  const typeAt = cur.pos;
  const itemType = valueTypeName(cur.u32('array item type'));
  if (itemType === undefined || itemType === 'array') cur.fail('an array item type from 0 to 12, not an array', typeAt);
  const count = cur.count('array length', limits.ggufArrayLengthMax);
  // Each item takes at least its fixed size (a string at least its u64 length):
  // refuse a count the remaining bytes cannot hold before allocating anything.
  const minItemBytes = GGUF_SCALAR_BYTES[itemType] ?? 8;
  cur.need(count * minItemBytes, `${count} items of type ${itemType}`);
  const values = new Array<GgufScalar>(count);
  for (let i = 0; i < count; i++) values[i] = readScalar(cur, itemType);
  return values;
}

function readAlignment(cur: Cursor, metadata: Map<string, GgufValue>): number {
  const value = metadata.get('general.alignment');
  if (value === undefined) return GGUF_ALIGNMENT_DEFAULT;
  cur.context = 'key general.alignment';
  // The GGUF spec: a multiple of 8 (and ggml: a power of two). A wrong value that still divides every
  // tensor offset cannot be told from the header: its misread weights end as NonFiniteLogitsError or wrong text.
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < 8 ||
    value > 1 << 16 ||
    (value & (value - 1)) !== 0
  ) {
    cur.fail(`a power of two from 8 to 65536 (the GGUF spec asks for a multiple of 8), got ${String(value)}`);
  }
  return value;
}

interface RawTensor {
  name: string;
  type: GgmlTypeName;
  dims: number[];
  relOffset: number;
  byteLength: number;
}

function readTensorInfos(cur: Cursor, tensorCount: number, alignment: number): RawTensor[] {
  const names = new Set<string>();
  const infos: RawTensor[] = [];
  for (let i = 0; i < tensorCount; i++) {
    cur.context = `tensor info ${i}`;
    const nameAt = cur.pos;
    const name = cur.string('tensor name', limits.ggufStringBytesMax);
    cur.context = `tensor ${name}`;
    if (names.has(name)) cur.fail('a tensor name not seen before (duplicate tensor)', nameAt);
    names.add(name);
    const nDimsAt = cur.pos;
    const nDims = cur.u32('n_dims');
    if (nDims < 1 || nDims > limits.ggufDimsMax)
      cur.fail(`n_dims from 1 to ${limits.ggufDimsMax}, got ${nDims}`, nDimsAt);
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) {
      const dimAt = cur.pos;
      const dim = cur.i64(`dims[${d}]`);
      if (typeof dim !== 'number' || dim <= 0) cur.fail(`dims[${d}] a positive integer below 2^53, got ${dim}`, dimAt);
      dims.push(dim);
    }
    const typeAt = cur.pos;
    const type = ggmlTypeName(cur, name, cur.u32('ggml type'), typeAt);
    const byteLength = tensorByteLength(type, dims);
    if (typeof byteLength === 'string') cur.fail(byteLength, nDimsAt);
    const offsetAt = cur.pos;
    const relOffset = cur.u64('data offset');
    if (typeof relOffset !== 'number' || relOffset % alignment !== 0) {
      cur.fail(`a data offset that is a multiple of the alignment ${alignment}, got ${relOffset}`, offsetAt);
    }
    infos.push({ name, type, dims, relOffset, byteLength });
  }
  return infos;
}

function ggmlTypeName(cur: Cursor, tensor: string, id: number, at: number): GgmlTypeName {
  for (const [name, value] of Object.entries(GGML_TYPE)) if (value === id) return name as GgmlTypeName;
  const other = GGML_TYPE_NAMES_OTHER[id];
  if (other !== undefined) {
    throw new UnsupportedModelError(
      cur.path,
      `tensor ${tensor}`,
      `a tensor type among ${SUPPORTED_TYPES}, got ${other} (ggml type ${id})`,
    );
  }
  return cur.fail(`a known ggml type id, got ${id}`, at);
}

/** Absolute offsets; data must lie inside the file and tensors must not overlap. */
function placeTensors(
  path: string,
  infos: RawTensor[],
  dataOffset: number,
  fileBytes: number,
): Map<string, TensorInfo> {
  const tensors = new Map<string, TensorInfo>();
  for (const t of infos) {
    const offset = dataOffset + t.relOffset;
    if (offset + t.byteLength > fileBytes) {
      throw new GgufFormatError(
        path,
        `tensor ${t.name}`,
        `${t.byteLength} bytes of data from byte ${offset} inside the file, but the file ends at byte ${fileBytes}`,
      );
    }
    tensors.set(t.name, { name: t.name, type: t.type, dims: t.dims, offset, byteLength: t.byteLength });
  }
  const sorted = [...tensors.values()].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    if (sorted[i].offset < prev.offset + prev.byteLength) {
      throw new GgufFormatError(
        path,
        `tensor ${sorted[i].name}`,
        `data that does not overlap tensor ${prev.name} (bytes ${prev.offset}..${prev.offset + prev.byteLength})`,
      );
    }
  }
  return tensors;
}
