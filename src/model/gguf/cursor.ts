/**
 * Bounds-checked little-endian reads over a file's bytes. Every read checks the
 * remaining length first, so a truncated or corrupt file becomes a
 * GgufFormatError naming the file, the context (key / tensor) and the byte offset,
 * never a RangeError.
 */
import { GgufFormatError } from '../../core/errors.js';

// ignoreBOM: a string that starts with U+FEFF keeps it (a vocabulary piece can be exactly "\ufeff").
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export class Cursor {
  pos = 0;
  /** What is being read (`header`, `key general.name`, `tensor blk.0.attn_q.weight`). */
  context = 'header';
  private readonly view: DataView;

  constructor(
    readonly bytes: Uint8Array,
    readonly path: string,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  where(at = this.pos): string {
    return `${this.context} (byte ${at})`;
  }

  fail(expected: string, at = this.pos): never {
    throw new GgufFormatError(this.path, this.where(at), expected);
  }

  need(n: number, what: string): void {
    if (n > this.remaining) this.fail(`${what} (${n} bytes), but the file ends at byte ${this.bytes.length}`);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.pos++);
  }
  i8(what: string): number {
    this.need(1, what);
    return this.view.getInt8(this.pos++);
  }
  u16(what: string): number {
    this.need(2, what);
    const v = this.view.getUint16(this.pos, true);
    this.pos += 2;
    return v;
  }
  i16(what: string): number {
    this.need(2, what);
    const v = this.view.getInt16(this.pos, true);
    this.pos += 2;
    return v;
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  i32(what: string): number {
    this.need(4, what);
    const v = this.view.getInt32(this.pos, true);
    this.pos += 4;
    return v;
  }
  f32(what: string): number {
    this.need(4, what);
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }
  f64(what: string): number {
    this.need(8, what);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** u64 as a number when it is a safe integer, else as a bigint. */
  u64(what: string): number | bigint {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  }

  i64(what: string): number | bigint {
    this.need(8, what);
    const v = this.view.getBigInt64(this.pos, true);
    this.pos += 8;
    const safe = v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER);
    return safe ? Number(v) : v;
  }

  /** A u64 count or length that must be at most `max`. */
  count(what: string, max: number): number {
    const at = this.pos;
    const v = this.u64(what);
    if (typeof v !== 'number' || v > max) this.fail(`${what} at most ${max}, got ${v}`, at);
    return v;
  }

  /** GGUF string: u64 byte length, then UTF-8 bytes (no terminator). */
  string(what: string, maxBytes: number): string {
    const at = this.pos;
    const length = this.count(`${what} length`, maxBytes);
    this.need(length, `${what} bytes`);
    const slice = this.bytes.subarray(this.pos, this.pos + length);
    this.pos += length;
    try {
      return utf8.decode(slice);
    } catch {
      return this.fail(`${what} in valid UTF-8`, at);
    }
  }
}
