import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError, InvalidOptionError, UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf, type GgufTypedValue } from '../../../src/model/gguf/writer.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-gguf-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function bytesOf(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

const metadata: Array<[string, GgufTypedValue]> = [
  ['general.architecture', { type: 'string', value: 'qwen3moe' }],
  ['general.name', { type: 'string', value: 'tiny ünïcödé ✓' }],
  ['a.u8', { type: 'u8', value: 200 }],
  ['a.i8', { type: 'i8', value: -100 }],
  ['a.u16', { type: 'u16', value: 60000 }],
  ['a.i16', { type: 'i16', value: -30000 }],
  ['a.u32', { type: 'u32', value: 4_000_000_000 }],
  ['a.i32', { type: 'i32', value: -2_000_000_000 }],
  ['a.f32', { type: 'f32', value: 1.5 }],
  ['a.f64', { type: 'f64', value: Math.PI }],
  ['a.u64', { type: 'u64', value: 1n << 60n }],
  ['a.i64', { type: 'i64', value: -5 }],
  ['a.bool', { type: 'bool', value: true }],
  ['a.strings', { type: 'array', itemType: 'string', values: ['x', 'Ġy', ''] }],
  ['a.f32s', { type: 'array', itemType: 'f32', values: new Float32Array([0.25, -1]) }],
  ['a.i32s', { type: 'array', itemType: 'i32', values: new Int32Array([1, -3]) }],
];

describe('GGUF writer and reader', () => {
  it('round-trip metadata of every value type and tensors of every supported type', async () => {
    const path = join(dir, 'round.gguf');
    const progress: number[] = [];
    const tensors = [
      { name: 'f32', type: 'F32' as const, dims: [3, 2], data: () => bytesOf(24, 1) },
      { name: 'q8', type: 'Q8_0' as const, dims: [64, 2], data: () => bytesOf(4 * 34, 2) },
      { name: 'q4', type: 'Q4_0' as const, dims: [32], data: () => bytesOf(18, 3) },
      { name: 'f16', type: 'F16' as const, dims: [5], data: () => bytesOf(10, 4) },
      { name: 'bf16', type: 'BF16' as const, dims: [1, 1, 1, 3], data: () => bytesOf(6, 5) },
      { name: 'q5_0', type: 'Q5_0' as const, dims: [64], data: () => bytesOf(44, 6) },
      { name: 'q5_1', type: 'Q5_1' as const, dims: [32, 2], data: () => bytesOf(48, 7) },
      { name: 'q2k', type: 'Q2_K' as const, dims: [256, 2], data: () => bytesOf(2 * 84, 8) },
      { name: 'q3k', type: 'Q3_K' as const, dims: [512], data: () => bytesOf(2 * 110, 9) },
      { name: 'q4k', type: 'Q4_K' as const, dims: [256, 1, 3], data: () => bytesOf(3 * 144, 10) },
      { name: 'q5k', type: 'Q5_K' as const, dims: [256], data: () => bytesOf(176, 11) },
      { name: 'q6k', type: 'Q6_K' as const, dims: [768, 2], data: () => bytesOf(6 * 210, 12) },
      { name: 'mxfp4', type: 'MXFP4' as const, dims: [64, 3, 2], data: () => bytesOf(12 * 17, 13) },
    ];
    await writeGguf(path, metadata, tensors, { onProgress: (written) => progress.push(written) });
    const bytes = new Uint8Array(await readFile(path));
    const file = parseGguf(bytes, path);
    expect(file.version).toBe(3);
    expect(file.alignment).toBe(32);
    expect(file.dataOffset % 32).toBe(0);
    expect(file.metadata.get('general.name')).toBe('tiny ünïcödé ✓');
    expect(file.metadata.get('a.u8')).toBe(200);
    expect(file.metadata.get('a.i8')).toBe(-100);
    expect(file.metadata.get('a.u16')).toBe(60000);
    expect(file.metadata.get('a.i16')).toBe(-30000);
    expect(file.metadata.get('a.u32')).toBe(4_000_000_000);
    expect(file.metadata.get('a.i32')).toBe(-2_000_000_000);
    expect(file.metadata.get('a.f32')).toBe(1.5);
    expect(file.metadata.get('a.f64')).toBe(Math.PI);
    expect(file.metadata.get('a.u64')).toBe(1n << 60n);
    expect(file.metadata.get('a.i64')).toBe(-5);
    expect(file.metadata.get('a.bool')).toBe(true);
    expect(file.metadata.get('a.strings')).toEqual(['x', 'Ġy', '']);
    expect(file.metadata.get('a.f32s')).toEqual([0.25, -1]);
    expect(file.metadata.get('a.i32s')).toEqual([1, -3]);
    expect([...file.tensors.keys()]).toEqual(tensors.map((t) => t.name));
    for (const [i, t] of tensors.entries()) {
      const info = file.tensors.get(t.name)!;
      expect(info.type).toBe(t.type);
      expect(info.dims).toEqual(t.dims);
      expect(info.offset % 32).toBe(0);
      expect(bytes.subarray(info.offset, info.offset + info.byteLength)).toEqual(t.data());
      expect(info.byteLength).toBe(t.data().length);
      expect(progress[i]).toBe(info.offset + info.byteLength);
    }
    expect(progress.at(-1)).toBe(bytes.length);
  });

  it('refuse an alignment the GGUF spec forbids (not a multiple of 8, not a power of two), naming the key', async () => {
    const base = join(dir, 'align-base.gguf');
    await writeGguf(base, [['general.alignment', { type: 'u32', value: 64 }]], [], { alignment: 64 });
    const bytes = new Uint8Array(await readFile(base));
    // The u32 value of general.alignment is the last 4 bytes before the tensor infos: find it by its value.
    const view = new DataView(bytes.buffer);
    let at = -1;
    for (let p = 24; p + 4 <= bytes.length; p++)
      if (view.getUint32(p, true) === 64) {
        at = p;
        break;
      }
    expect(at).toBeGreaterThan(0);
    for (const bad of [1, 2, 4, 24]) {
      view.setUint32(at, bad, true);
      expect(() => parseGguf(bytes, 'a.gguf')).toThrow(
        /key general\.alignment .*expected a power of two from 8 to 65536/,
      );
    }
    await expect(writeGguf(join(dir, 'a4.gguf'), [], [], { alignment: 4 })).rejects.toThrow(/a power of two from 8/);
  });

  it('honour a non-default alignment', async () => {
    const path = join(dir, 'align.gguf');
    await writeGguf(
      path,
      [],
      [
        { name: 'a', type: 'F32', dims: [3], data: () => bytesOf(12, 0) },
        { name: 'b', type: 'F32', dims: [1], data: () => bytesOf(4, 0) },
      ],
      { alignment: 64 },
    );
    const file = parseGguf(new Uint8Array(await readFile(path)), path);
    expect(file.alignment).toBe(64);
    expect(file.metadata.get('general.alignment')).toBe(64);
    expect(file.tensors.get('b')!.offset - file.tensors.get('a')!.offset).toBe(64);
  });

  it('refuse a tensor whose data has the wrong length and leave no file behind', async () => {
    const path = join(dir, 'bad-length.gguf');
    const write = writeGguf(path, [], [{ name: 'w', type: 'Q8_0', dims: [32, 2], data: () => new Uint8Array(67) }]);
    await expect(write).rejects.toThrow(InvalidOptionError);
    await expect(write).rejects.toThrow(/tensor w data.*68 bytes/);
    expect((await readdir(dir)).filter((f) => f.startsWith('bad-length'))).toEqual([]);
  });

  it('refuse dims that are not a multiple of the block size, and duplicate tensors', async () => {
    await expect(
      writeGguf(join(dir, 'x.gguf'), [], [{ name: 'w', type: 'Q4_0', dims: [16], data: () => new Uint8Array(9) }]),
    ).rejects.toThrow(/divisible by the Q4_0 block size 32/);
    await expect(
      writeGguf(join(dir, 'x.gguf'), [], [{ name: 'w', type: 'Q4_K', dims: [64, 4], data: () => new Uint8Array(144) }]),
    ).rejects.toThrow(/tensor w dims.*divisible by the Q4_K block size 256/);
    const t = { name: 'w', type: 'F32' as const, dims: [1], data: () => new Uint8Array(4) };
    await expect(writeGguf(join(dir, 'x.gguf'), [], [t, t])).rejects.toThrow(/unique tensor names/);
  });
});

/** Hand-assembled headers, to reach states the writer refuses to produce. */
class Raw {
  private parts: number[] = [];
  u8(v: number): this {
    this.parts.push(v);
    return this;
  }
  u32(v: number): this {
    for (let i = 0; i < 4; i++) this.parts.push((v >>> (8 * i)) & 0xff);
    return this;
  }
  u64(v: bigint | number): this {
    let b = BigInt.asUintN(64, BigInt(v));
    for (let i = 0; i < 8; i++) {
      this.parts.push(Number(b & 0xffn));
      b >>= 8n;
    }
    return this;
  }
  str(s: string | number[]): this {
    const b = typeof s === 'string' ? [...new TextEncoder().encode(s)] : s;
    this.u64(b.length);
    this.parts.push(...b);
    return this;
  }
  header(tensors: number | bigint, kvs: number | bigint): this {
    return this.u32(0x46554747).u32(3).u64(tensors).u64(kvs);
  }
  tensor(name: string, dims: Array<number | bigint>, type: number, offset: number): this {
    this.str(name).u32(dims.length);
    for (const d of dims) this.u64(d);
    return this.u32(type).u64(offset);
  }
  pad(to: number): this {
    while (this.parts.length < to) this.parts.push(0);
    return this;
  }
  get length(): number {
    return this.parts.length;
  }
  bytes(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

function refusal(bytes: Uint8Array): Error {
  try {
    parseGguf(bytes, 'raw.gguf');
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected parseGguf to refuse the file');
}

describe('GGUF reader refusals', () => {
  it('bad magic and unsupported versions', () => {
    const magic = refusal(new Raw().u32(0x46554746).u32(3).u64(0).u64(0).bytes());
    expect(magic).toBeInstanceOf(GgufFormatError);
    expect(magic.message).toBe('raw.gguf: header (byte 0): expected magic "GGUF"');
    const v2 = refusal(new Raw().u32(0x46554747).u32(2).u64(0).u64(0).bytes());
    expect(v2.message).toMatch(/GGUF version 3 \(the only version supported\), got 2/);
  });

  it('truncation at every byte of a valid header', () => {
    const raw = new Raw()
      .header(1, 2)
      .str('general.architecture')
      .u32(8)
      .str('qwen3moe')
      .str('a')
      .u32(9)
      .u32(5)
      .u64(2)
      .u32(7)
      .u32(8)
      .tensor('w', [4], 0, 0);
    const full = raw.pad(raw.length + 64).bytes();
    expect(parseGguf(full, 'raw.gguf').tensors.get('w')!.byteLength).toBe(16);
    for (let n = 0; n < full.length - 48; n++) {
      const e = refusal(full.subarray(0, n));
      expect(e, `truncated at ${n}`).toBeInstanceOf(GgufFormatError);
      expect(e.message).toContain('raw.gguf');
    }
  });

  it('counts and lengths over the named limits, without allocating them', () => {
    expect(refusal(new Raw().header(2 ** 40, 0).bytes()).message).toMatch(/tensor count at most 1048576/);
    expect(refusal(new Raw().header(0, 2n ** 63n).bytes()).message).toMatch(/kv count at most 65536/);
    const hugeString = new Raw()
      .header(0, 1)
      .u64(2 ** 50)
      .bytes();
    expect(refusal(hugeString).message).toMatch(/key length at most 16777216/);
    const hugeArray = new Raw().header(0, 1).str('k').u32(9).u32(4).u64(4_000_000).bytes();
    expect(refusal(hugeArray).message).toMatch(/key k \(byte \d+\): expected 4000000 items of type u32/);
  });

  it('invalid UTF-8, unknown value types, nested arrays, bad bools, duplicate keys', () => {
    expect(refusal(new Raw().header(0, 1).str([0x61, 0xff]).u32(0).bytes()).message).toMatch(/key in valid UTF-8/);
    expect(refusal(new Raw().header(0, 1).str('k').u32(13).bytes()).message).toMatch(
      /key k .*value type id from 0 to 12/,
    );
    expect(refusal(new Raw().header(0, 1).str('k').u32(9).u32(9).u64(0).bytes()).message).toMatch(/not an array/);
    expect(refusal(new Raw().header(0, 1).str('k').u32(7).u8(2).bytes()).message).toMatch(
      /key k .*a bool \(0 or 1\), got 2/,
    );
    const dup = new Raw().header(0, 2).str('k').u32(4).u32(1).str('k').u32(4).u32(2).bytes();
    expect(refusal(dup).message).toMatch(/key k \(byte 41\): expected a key not seen before/);
  });

  it('bad tensor infos: dims, types, offsets, overlap, data past the end', () => {
    const one = (dims: Array<number | bigint>, type: number, offset: number, fileBytes = 256): Error => {
      const r = new Raw().header(1, 0).tensor('w', dims, type, offset);
      return refusal(r.pad(fileBytes).bytes());
    };
    expect(one([0], 0, 0).message).toMatch(/tensor w .*dims\[0\] a positive integer/);
    expect(one([-1n], 0, 0).message).toMatch(/dims\[0\] a positive integer/);
    expect(one([], 0, 0).message).toMatch(/n_dims from 1 to 4, got 0/);
    expect(one([48], 8, 0).message).toMatch(/divisible by the Q8_0 block size 32/);
    expect(one([4], 0, 8).message).toMatch(/multiple of the alignment 32, got 8/);
    expect(one([4], 0, 0, 70).message).toMatch(/tensor w: expected 16 bytes of data from byte 64 inside the file/);
    expect(one([4], 77, 0).message).toMatch(/known ggml type id, got 77/);
    const supported = 'F32, F16, Q4_0, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16, MXFP4';
    for (const [id, name] of [
      [16, 'IQ2_XXS'],
      [21, 'IQ3_S'],
      [3, 'Q4_1'],
      [15, 'Q8_K'],
      [35, 'TQ2_0'],
    ] as const) {
      const refused = one([256], id, 0, 2048);
      expect(refused).toBeInstanceOf(UnsupportedModelError);
      expect(refused.message).toBe(
        `raw.gguf: tensor w: expected a tensor type among ${supported}, got ${name} (ggml type ${id})`,
      );
    }
    // k-quant rows are whole 256-element super-blocks: 255 or 32 columns are refused, naming the tensor
    for (const [id, name] of [
      [10, 'Q2_K'],
      [11, 'Q3_K'],
      [12, 'Q4_K'],
      [13, 'Q5_K'],
      [14, 'Q6_K'],
      [23, 'IQ4_XS'],
    ] as const) {
      for (const cols of [32, 255, 288]) {
        const refused = one([cols, 2], id, 0, 4096);
        expect(refused).toBeInstanceOf(GgufFormatError);
        expect(refused.message).toMatch(
          new RegExp(
            `tensor w \\(byte \\d+\\): expected dims\\[0\\] \\(${cols}\\) divisible by the ${name} block size 256`,
          ),
        );
      }
    }
    const two = new Raw().header(2, 0).tensor('a', [16], 0, 0).tensor('b', [4], 0, 32).pad(512).bytes();
    expect(refusal(two).message).toMatch(/tensor b: expected data that does not overlap tensor a/);
    const dupe = new Raw().header(2, 0).tensor('a', [4], 0, 0).tensor('a', [4], 0, 32).pad(512).bytes();
    expect(refusal(dupe).message).toMatch(/tensor a .*duplicate tensor/);
  });
});
