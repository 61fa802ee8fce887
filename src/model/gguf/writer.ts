/**
 * GGUF v3 writer. Layout:
 *   header (magic, version, tensor count, kv count) | kv pairs | tensor infos
 *   | pad to alignment | tensor 0 | pad | tensor 1 | ... (each tensor aligned)
 * The header is built in memory (it is small); tensor bytes are streamed, one
 * tensor at a time, to a unique temporary file beside `path` (core/output-file.ts), which is renamed
 * to `path` only when complete, and only over a regular file or nothing.
 */
import { open, rename, rm, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { checkOutputPath, tempPathBeside } from '../../core/output-file.js';
import { DiskSpaceError, InvalidOptionError, RequestAbortedError } from '../../core/errors.js';
import { limits } from '../../core/limits.js';
import { GGML_BLOCK, GGML_TYPE, type GgmlTypeName } from '../types.js';
import {
  GGUF_ALIGNMENT_DEFAULT,
  GGUF_MAGIC,
  GGUF_SCALAR_BYTES,
  GGUF_VALUE_TYPE,
  GGUF_VERSION,
  alignUp,
  tensorByteLength,
  type GgufItemTypeName,
  type GgufTypedValue,
} from './values.js';

export type { GgufTypedValue } from './values.js';

export interface GgufTensorSource {
  name: string;
  type: GgmlTypeName;
  dims: number[];
  /** produces the tensor's bytes (at once or later); called once, in order, while writing */
  data: () => Uint8Array | Promise<Uint8Array>;
}

export interface GgufWriteOptions {
  /** default 32; must be a power of two (GGUF stores it as general.alignment) */
  alignment?: number;
  onProgress?: (bytesWritten: number, bytesTotal: number) => void;
  /**
   * Free bytes for an unprivileged writer in a folder; default statfs's bavail * bsize. The file's
   * whole size must be free there before anything is written (DiskSpaceError); a filesystem whose
   * free space cannot be read (the function throws) is not checked.
   */
  diskFreeBytes?: (dir: string) => Promise<number>;
  /** Aborted: the write stops before its next tensor, its temporary file removed (RequestAbortedError). */
  signal?: AbortSignal;
}

async function statfsFreeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

const utf8 = new TextEncoder();

/** Growable little-endian byte buffer for the header. */
class ByteSink {
  private buf = new Uint8Array(4096);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void {
    this.reserve(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, v, true);
    this.length += 4;
  }
  u64(v: bigint | number): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }
  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }
  string(s: string): void {
    const b = utf8.encode(s);
    this.u64(b.length);
    this.bytes(b);
  }
  /** One scalar of `type`; the caller has checked the JS type. */
  scalar(type: GgufItemTypeName, v: number | bigint | boolean | string): void {
    if (type === 'string') return this.string(v as string);
    const n = GGUF_SCALAR_BYTES[type]!;
    this.reserve(n);
    const at = this.length;
    switch (type) {
      case 'u8':
        this.view.setUint8(at, v as number);
        break;
      case 'i8':
        this.view.setInt8(at, v as number);
        break;
      case 'bool':
        this.view.setUint8(at, v ? 1 : 0);
        break;
      case 'u16':
        this.view.setUint16(at, v as number, true);
        break;
      case 'i16':
        this.view.setInt16(at, v as number, true);
        break;
      case 'u32':
        this.view.setUint32(at, v as number, true);
        break;
      case 'i32':
        this.view.setInt32(at, v as number, true);
        break;
      case 'f32':
        this.view.setFloat32(at, v as number, true);
        break;
      case 'f64':
        this.view.setFloat64(at, v as number, true);
        break;
      case 'u64':
        this.view.setBigUint64(at, BigInt(v as number | bigint), true);
        break;
      case 'i64':
        this.view.setBigInt64(at, BigInt(v as number | bigint), true);
        break;
    }
    this.length += n;
  }
  contents(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

function checkScalar(key: string, type: GgufItemTypeName, v: unknown): void {
  const ok =
    type === 'string'
      ? typeof v === 'string'
      : type === 'bool'
        ? typeof v === 'boolean'
        : type === 'u64' || type === 'i64'
          ? typeof v === 'bigint' || Number.isInteger(v)
          : type === 'f32' || type === 'f64'
            ? typeof v === 'number'
            : Number.isInteger(v);
  if (!ok) throw new InvalidOptionError(`metadata ${key}`, `a ${type} value`, v);
}

function writeKv(sink: ByteSink, key: string, tv: GgufTypedValue): void {
  sink.string(key);
  sink.u32(GGUF_VALUE_TYPE[tv.type]);
  if (tv.type !== 'array') {
    checkScalar(key, tv.type, tv.value);
    sink.scalar(tv.type, tv.value);
    return;
  }
  if (tv.values.length > limits.ggufArrayLengthMax) {
    throw new InvalidOptionError(`metadata ${key}`, `at most ${limits.ggufArrayLengthMax} items`, tv.values.length);
  }
  sink.u32(GGUF_VALUE_TYPE[tv.itemType]);
  sink.u64(tv.values.length);
  for (const v of tv.values) {
    checkScalar(key, tv.itemType, v);
    sink.scalar(tv.itemType, v);
  }
}

interface PlannedTensor {
  source: GgufTensorSource;
  offset: number;
  byteLength: number;
}

/** Check each tensor and assign its offset relative to the data section. */
function planTensors(tensors: GgufTensorSource[], alignment: number): { planned: PlannedTensor[]; dataBytes: number } {
  const names = new Set<string>();
  const planned: PlannedTensor[] = [];
  let offset = 0;
  for (const source of tensors) {
    if (names.has(source.name)) throw new InvalidOptionError('tensors', 'unique tensor names', source.name);
    names.add(source.name);
    if (!(source.type in GGML_BLOCK))
      throw new InvalidOptionError(`tensor ${source.name} type`, 'a GgmlTypeName', source.type);
    if (source.dims.length < 1 || source.dims.length > limits.ggufDimsMax) {
      throw new InvalidOptionError(`tensor ${source.name} dims`, `1 to ${limits.ggufDimsMax} dims`, source.dims);
    }
    const byteLength = tensorByteLength(source.type, source.dims);
    if (typeof byteLength === 'string')
      throw new InvalidOptionError(`tensor ${source.name} dims`, byteLength, source.dims);
    offset = alignUp(offset, alignment);
    planned.push({ source, offset, byteLength });
    offset += byteLength;
  }
  return { planned, dataBytes: offset };
}

function buildHeader(
  metadata: Array<[string, GgufTypedValue]>,
  planned: PlannedTensor[],
  alignment: number,
): Uint8Array {
  const keys = new Set<string>();
  const kvs = metadata.filter(([key]) => key !== 'general.alignment');
  if (alignment !== GGUF_ALIGNMENT_DEFAULT) kvs.push(['general.alignment', { type: 'u32', value: alignment }]);
  const sink = new ByteSink();
  sink.u32(GGUF_MAGIC);
  sink.u32(GGUF_VERSION);
  sink.u64(planned.length);
  sink.u64(kvs.length);
  for (const [key, value] of kvs) {
    if (keys.has(key)) throw new InvalidOptionError('metadata', 'unique keys', key);
    keys.add(key);
    writeKv(sink, key, value);
  }
  for (const { source, offset } of planned) {
    sink.string(source.name);
    sink.u32(source.dims.length);
    for (const d of source.dims) sink.u64(d);
    sink.u32(GGML_TYPE[source.type]);
    sink.u64(offset);
  }
  return sink.contents();
}

/**
 * Write a GGUF v3 file. `general.alignment` in `metadata` is replaced by
 * `options.alignment` (written only when it is not the default 32).
 */
export async function writeGguf(
  path: string,
  metadata: Array<[string, GgufTypedValue]>,
  tensors: GgufTensorSource[],
  options: GgufWriteOptions = {},
): Promise<void> {
  const alignment = options.alignment ?? GGUF_ALIGNMENT_DEFAULT;
  if (!Number.isInteger(alignment) || alignment < 8 || alignment > 1 << 16 || (alignment & (alignment - 1)) !== 0) {
    throw new InvalidOptionError(
      'alignment',
      'a power of two from 8 to 65536 (the GGUF spec asks for a multiple of 8)',
      alignment,
    );
  }
  const { planned, dataBytes } = planTensors(tensors, alignment);
  const header = buildHeader(metadata, planned, alignment);
  const dataOffset = alignUp(header.length, alignment);
  const bytesTotal = dataOffset + dataBytes;
  checkOutputPath(path, 'path');
  let freeBytes: number | undefined;
  try {
    freeBytes = await (options.diskFreeBytes ?? statfsFreeBytes)(dirname(path));
  } catch {
    freeBytes = undefined;
  }
  if (freeBytes !== undefined && freeBytes < bytesTotal) throw new DiskSpaceError(path, bytesTotal, freeBytes);
  const tmpPath = tempPathBeside(path);
  const handle = await open(tmpPath, 'wx');
  try {
    let position = 0;
    const put = async (bytes: Uint8Array): Promise<void> => {
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position);
        done += bytesWritten;
        position += bytesWritten;
      }
    };
    await put(header);
    for (const t of planned) {
      if (options.signal?.aborted) throw new RequestAbortedError();
      await put(new Uint8Array(dataOffset + t.offset - position)); // zero padding
      const bytes = await t.source.data();
      if (!(bytes instanceof Uint8Array) || bytes.length !== t.byteLength) {
        throw new InvalidOptionError(
          `tensor ${t.source.name} data`,
          `${t.byteLength} bytes for ${t.source.type} [${t.source.dims.join(', ')}]`,
          bytes?.length,
        );
      }
      await put(bytes);
      options.onProgress?.(position, bytesTotal);
    }
    if (planned.length === 0) options.onProgress?.(position, bytesTotal);
    await handle.close();
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(tmpPath, { force: true });
    throw error;
  }
  try {
    checkOutputPath(path, 'path'); // again: something else may have been put there meanwhile
  } catch (error) {
    await rm(tmpPath, { force: true });
    throw error;
  }
  await rename(tmpPath, path);
}
