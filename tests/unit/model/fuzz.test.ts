/**
 * Fuzz: tiny valid qwen3moe files (F32 + Q8_0, and F32 + Q4_K for the k-quants' super-block
 * geometry: issue 27; gpt2 vocabulary) written by the real writer, then truncated and mutated
 * (seeded) in a few thousand ways. Every
 * variant must either load (parseGguf + readHParams + createTokenizer) or be
 * refused with a GgufFormatError / UnsupportedModelError naming the file;
 * anything else (RangeError, TypeError, a hang) is a bug.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError, UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { readHParams } from '../../../src/model/hparams.js';
import { createTokenizer } from '../../../src/model/tokenizer/index.js';
import { gpt2Vocab, hparamKeys, modelTensors, prng, tinyHp } from './gguf-fixture.js';

const PATH = 'fuzz.gguf';
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const MESSAGE_CHARS_MAX = 1200;
const VARIANT_MS_MAX = 1000; // a hang, not a slow machine: a variant takes well under 1 ms
let dir: string;
let valid: Uint8Array;
const validByType = new Map<string, Uint8Array>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-fuzz-'));
  const letters = 'abcdefghijklmnopqrstuvwxyz'.split('');
  const tokens = [...letters, 'Ġ', 'Ċ', 'he', 'll', 'hell', 'hello', 'Ġw', 'Ġwo'];
  const merges = ['h e', 'l l', 'he ll', 'hell o', 'Ġ w', 'Ġw o'];
  const small = tinyHp('qwen3moe', { nLayer: 2, nEmbd: 64, nExpert: 4, nExpertUsed: 2, nVocab: tokens.length + 2 });
  // k-quant rows hold whole 256-weight super-blocks: every matrix's width is 256.
  const kq = tinyHp('qwen3moe', {
    nLayer: 2,
    nEmbd: 256,
    headDim: 64,
    nExpert: 4,
    nExpertUsed: 2,
    nFfExp: 256,
    nFfShexp: small.nFfShexp ? 256 : 0,
    nVocab: tokens.length + 2,
  });
  for (const [type, hp] of [
    ['Q8_0', small],
    ['Q4_K', kq],
  ] as const) {
    const path = join(dir, `tiny-${type}.gguf`);
    await writeGguf(path, [...hparamKeys(hp), ...gpt2Vocab(tokens, merges)], modelTensors(hp, type, 11));
    validByType.set(type, new Uint8Array(await readFile(path)));
  }
  valid = validByType.get('Q8_0')!;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Load a variant; return 'ok' or the typed refusal's class name; rethrow anything else. */
function load(bytes: Uint8Array): string {
  try {
    const file = parseGguf(bytes, PATH);
    readHParams(file);
    const tok = createTokenizer(file);
    tok.decode(tok.encode('hello world <|im_start|>'));
    return 'ok';
  } catch (error) {
    if (
      (error instanceof GgufFormatError || error instanceof UnsupportedModelError) &&
      error.message.startsWith(`${PATH}: `)
    ) {
      // Text quoted from the file is escaped and cut (src/core/errors.ts printable).
      if (UNSAFE.test(error.message))
        throw new Error(`refusal prints a control character: ${JSON.stringify(error.message)}`);
      if (error.message.length > MESSAGE_CHARS_MAX) throw new Error(`refusal of ${error.message.length} characters`);
      return error.constructor.name;
    }
    throw error;
  }
}

function check(bytes: Uint8Array, label: string, outcomes: Map<string, number>): void {
  const started = performance.now();
  let outcome: string;
  try {
    outcome = load(bytes);
  } catch (error) {
    throw new Error(`${label}: untyped failure: ${(error as Error).stack}`);
  }
  const ms = performance.now() - started;
  if (ms > VARIANT_MS_MAX) throw new Error(`${label}: took ${ms.toFixed(0)} ms`);
  outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
}

type Field = { at: number; bytes: 4 | 8; kind: string };

/** Offsets of every count, length, type, dim and offset field in the valid header. */
function headerFields(bytes: Uint8Array): { fields: Field[]; headerEnd: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fields: Field[] = [];
  let pos = 0;
  const field = (bytes: 4 | 8, kind: string): number => {
    fields.push({ at: pos, bytes, kind });
    const v = bytes === 4 ? view.getUint32(pos, true) : Number(view.getBigUint64(pos, true));
    pos += bytes;
    return v;
  };
  const string = (kind: string): void => {
    const length = field(8, kind); // read first: `pos += field()` would add to the stale pos
    pos += length;
  };
  const scalarBytes = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
  field(4, 'magic');
  field(4, 'version');
  const nTensors = field(8, 'tensor count');
  const nKv = field(8, 'kv count');
  for (let i = 0; i < nKv; i++) {
    string('key length');
    const type = field(4, 'value type');
    if (type === 8) string('string length');
    else if (type !== 9) pos += scalarBytes[type];
    else {
      const item = field(4, 'item type');
      const count = field(8, 'array length');
      for (let j = 0; j < count; j++) {
        if (item === 8) string('item length');
        else pos += scalarBytes[item];
      }
    }
  }
  for (let i = 0; i < nTensors; i++) {
    string('tensor name length');
    const nDims = field(4, 'n_dims');
    for (let d = 0; d < nDims; d++) field(8, 'dim');
    field(4, 'ggml type');
    field(8, 'tensor offset');
  }
  return { fields, headerEnd: pos };
}

const INTERESTING = [
  0n,
  1n,
  2n,
  3n,
  7n,
  8n,
  9n,
  12n,
  13n,
  30n,
  31n,
  32n,
  33n,
  255n,
  256n,
  0x7fffffffn,
  0x80000000n,
  0xffffffffn,
  0x100000000n,
  1n << 53n,
  (1n << 63n) - 1n,
  1n << 63n,
  (1n << 64n) - 1n,
];

describe('GGUF fuzz', () => {
  it('the unmutated file loads', () => {
    expect(load(valid)).toBe('ok');
    // Its vocabulary has letters only: 'é' has no byte token, and is refused as the model's fault (not dropped).
    const tok = createTokenizer(parseGguf(valid, PATH));
    expect(() => tok.encode('caf\u00e9')).toThrow(UnsupportedModelError);
    expect(() => tok.encode('caf\u00e9')).toThrow(
      /fuzz\.gguf: key tokenizer\.ggml\.tokens: expected a token \(or a byte fallback\) for every byte of the text; it has none for byte 0xc3/,
    );
  });

  it.each(['Q8_0', 'Q4_K'])(
    '%s: every truncation of the header and sampled truncations of the data are refused, typed',
    (type) => {
      const valid = validByType.get(type)!;
      expect(load(valid)).toBe('ok');
      const { headerEnd } = headerFields(valid);
      const outcomes = new Map<string, number>();
      for (let n = 0; n <= headerEnd + 64; n++) check(valid.subarray(0, n), `truncated at ${n}`, outcomes);
      const random = prng(101);
      for (let i = 0; i < 300; i++) {
        const n = headerEnd + Math.floor(random() * (valid.length - headerEnd));
        check(valid.subarray(0, n), `truncated at ${n}`, outcomes);
      }
      expect(outcomes.get('ok')).toBeUndefined();
      expect(outcomes.get('GgufFormatError')).toBe(headerEnd + 65 + 300);
    },
  );

  it.each(['Q8_0', 'Q4_K'])(
    '%s: field mutations (counts, lengths, types, dims, offsets) and random byte flips load or are refused, typed',
    (type) => {
      const valid = validByType.get(type)!;
      const { fields, headerEnd } = headerFields(valid);
      const random = prng(202);
      const outcomes = new Map<string, number>();
      // Each variant has its own time bound (check: VARIANT_MS_MAX, a hang guard); the whole loop's wall
      // time is no claim (it failed once at 15.8 s of a 15 s bound on a busy machine).
      for (let i = 0; i < 3000; i++) {
        const bytes = valid.slice();
        const view = new DataView(bytes.buffer);
        let label: string;
        if (i % 5 !== 4) {
          const f = fields[Math.floor(random() * fields.length)];
          const old = f.bytes === 4 ? BigInt(view.getUint32(f.at, true)) : view.getBigUint64(f.at, true);
          const choice = random();
          let value =
            choice < 0.5
              ? INTERESTING[Math.floor(random() * INTERESTING.length)]
              : choice < 0.8
                ? old + BigInt(Math.floor(random() * 9) - 4)
                : BigInt(Math.floor(random() * 2 ** 32));
          value = BigInt.asUintN(f.bytes * 8, value);
          if (f.bytes === 4) view.setUint32(f.at, Number(value), true);
          else view.setBigUint64(f.at, value, true);
          label = `${f.kind} at byte ${f.at}: ${old} -> ${value}`;
        } else {
          const flips = 1 + Math.floor(random() * 4);
          const at: number[] = [];
          for (let k = 0; k < flips; k++) {
            const p = Math.floor(random() * headerEnd);
            bytes[p] = Math.floor(random() * 256);
            at.push(p);
          }
          label = `bytes changed at ${at.join(', ')}`;
        }
        check(bytes, label, outcomes);
      }
      // The mutations must reach every outcome, or the fuzz is not exercising the checks.
      expect(outcomes.get('GgufFormatError')).toBeGreaterThan(500);
      expect(outcomes.get('UnsupportedModelError')).toBeGreaterThan(10);
      expect(outcomes.get('ok')).toBeGreaterThan(10);
    },
  );

  it('quotes names from the file escaped and cut: a key with terminal escapes, a key length grown into the data', async () => {
    const hp = tinyHp('qwen3moe', { nLayer: 1 });
    const evil = 'evil\u001b[2J\u001b]0;pwned\u0007\u202ekey';
    const path = join(dir, 'evil.gguf');
    const u32 = (value: number) => ({ type: 'u32' as const, value });
    // The writer refuses duplicate keys: write "...keyA" and "...keyB", then make B an A.
    await writeGguf(
      path,
      [...hparamKeys(hp), [`${evil}A`, u32(1)], [`${evil}B`, u32(2)], ...gpt2Vocab(['a', 'b'], [])],
      modelTensors(hp, 'Q8_0', 3),
    );
    const bytes = new Uint8Array(await readFile(path));
    const second = Buffer.from(bytes).indexOf(Buffer.from(`${evil}B`));
    expect(second).toBeGreaterThan(0);
    bytes[second + Buffer.byteLength(evil)] = 'A'.charCodeAt(0);
    let message = '';
    try {
      parseGguf(bytes, PATH);
    } catch (error) {
      expect(error).toBeInstanceOf(GgufFormatError);
      message = (error as Error).message;
    }
    expect(message).toContain('duplicate key');
    expect(message).toContain('evil\\x1b[2J\\x1b]0;pwned\\x07\\u{202e}keyA');
    expect(UNSAFE.test(message)).toBe(false);
    // Every key length grown by 20,000 bytes: the "key" swallows data, and each refusal stays short.
    const { fields } = headerFields(valid);
    const outcomes = new Map<string, number>();
    for (const f of fields.filter((x) => x.kind === 'key length')) {
      const grown = valid.slice();
      const view = new DataView(grown.buffer);
      view.setBigUint64(f.at, view.getBigUint64(f.at, true) + 20_000n, true);
      check(grown, `key length at ${f.at} + 20000`, outcomes);
    }
    expect(outcomes.get('GgufFormatError')).toBeGreaterThan(0);
  });
});
