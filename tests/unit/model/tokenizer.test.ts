import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgufFormatError, UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { bytesToUnicode } from '../../../src/model/tokenizer/bytes.js';
import { createTokenizer, type Tokenizer } from '../../../src/model/tokenizer/index.js';
import { preTokenizer } from '../../../src/model/tokenizer/pretokenize.js';
import type { GgufFile } from '../../../src/model/types.js';
import { prng, type Kv } from './gguf-fixture.js';
import { cleanSpaces, cleansSpaces } from '../../../src/model/tokenizer/clean-spaces.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-tok-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fileWith(kv: Kv): Promise<GgufFile> {
  const path = join(dir, `t${n++}.gguf`);
  await writeGguf(path, kv, []);
  return parseGguf(new Uint8Array(await readFile(path)), path);
}

/** The 256 byte-level characters, then the merge results, then control tokens. */
function bpeKv(merges: string[], options: { pre?: string; model?: string } = {}): Kv {
  const base = Array.from({ length: 256 }, (_, b) => byteChar(b));
  const merged = merges.map((m) => m.replace(' ', ''));
  const tokens = [
    ...base,
    ...merged.filter((t, i) => merged.indexOf(t) === i),
    '<|endoftext|>',
    '<|im_start|>',
    '<|im_end|>',
  ];
  const nControl = 3;
  return [
    ['tokenizer.ggml.model', { type: 'string', value: options.model ?? 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: options.pre ?? 'qwen2' }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: tokens }],
    [
      'tokenizer.ggml.token_type',
      { type: 'array', itemType: 'i32', values: tokens.map((_, i) => (i >= tokens.length - nControl ? 3 : 1)) },
    ],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: merges }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: tokens.length - 3 }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: tokens.length - 1 }],
  ];
}

/** The GPT-2 alphabet character of one byte, computed independently of src/ (printable latin-1 is itself). */
function byteChar(b: number): string {
  const printable = (x: number) => (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
  let k = 0;
  for (let x = 0; x < b; x++) if (!printable(x)) k++;
  return String.fromCodePoint(printable(b) ? b : 0x100 + k);
}

const pieces = (tok: Tokenizer, ids: number[]) => ids.map((id) => tok.tokenPiece(id));

describe('byte-level BPE (gpt2)', () => {
  const merges = ['h e', 'l l', 'he ll', 'hell o', 'Ġ w', 'o r', 'Ġw or', 'Ġwor l', 'Ġworl d', 'Ã ©'];

  it('encode a known text into the merged tokens, and decode it back', async () => {
    const tok = createTokenizer(await fileWith(bpeKv(merges)));
    const ids = tok.encode('hello world!');
    expect(pieces(tok, ids)).toEqual(['hello', ' world', '!']);
    expect(tok.decode(ids)).toBe('hello world!');
    expect(tok.kind).toBe('gpt2');
    expect(tok.vocabSize).toBe(256 + 9 + 1 + 3);
    expect(tok.encode('hello', { addBos: true })[0]).toBe(tok.bosId);
    expect(tok.encode('hello').length).toBe(1); // add_bos defaults to false for gpt2
  });

  it('merge by rank, lowest first', async () => {
    const bcFirst = createTokenizer(await fileWith(bpeKv(['b c', 'a b'])));
    expect(pieces(bcFirst, bcFirst.encode('abc'))).toEqual(['a', 'bc']);
    const abFirst = createTokenizer(await fileWith(bpeKv(['a b', 'b c'])));
    expect(pieces(abFirst, abFirst.encode('abc'))).toEqual(['ab', 'c']);
  });

  it('map bytes to the GPT-2 alphabet (space is Ġ, newline is Ċ)', () => {
    expect(bytesToUnicode(' \n')).toBe('ĠĊ');
    for (let b = 0; b < 128; b++) expect(bytesToUnicode(String.fromCharCode(b))).toBe(byteChar(b));
  });

  it('merge multi-byte characters in the byte alphabet ("é" is Ã©)', async () => {
    const tok = createTokenizer(await fileWith(bpeKv(merges)));
    const ids = tok.encode('é');
    expect(ids).toHaveLength(1);
    expect(tok.tokenPiece(ids[0])).toBe('é');
    expect(tok.encode('😀')).toHaveLength(4); // no merges: one token per byte
  });

  it('match control tokens written in the text, unless parseSpecial is false', async () => {
    const tok = createTokenizer(await fileWith(bpeKv(merges)));
    const imStart = tok.vocabSize - 2;
    const ids = tok.encode('<|im_start|>hello<|im_end|>');
    expect(ids).toEqual([imStart, ...tok.encode('hello'), tok.eosId]);
    expect(tok.decode(ids)).toBe('<|im_start|>hello<|im_end|>');
    expect(tok.decode(ids, { special: false })).toBe('hello');
    const literal = tok.encode('<|im_start|>', { parseSpecial: false });
    expect(literal).not.toContain(imStart);
    expect(tok.decode(literal)).toBe('<|im_start|>');
    expect(tok.eogIds.has(tok.vocabSize - 1)).toBe(true);
    expect(tok.eogIds.has(tok.vocabSize - 3)).toBe(true); // <|endoftext|>
  });

  it('round-trip arbitrary text through every supported pre-tokenizer', async () => {
    const random = prng(3);
    const alphabet = [
      'a',
      'Z',
      ' ',
      '  ',
      '\n',
      '\t',
      "'s",
      '9',
      '42',
      'é',
      'ß',
      '中',
      '😀',
      '!',
      '<',
      '|',
      '\r\n',
      'hello',
      'world',
    ];
    for (const pre of ['qwen2', 'gpt2', 'default', 'llama-bpe', 'gpt-4o']) {
      const tok = createTokenizer(await fileWith(bpeKv(merges, { pre })));
      for (let i = 0; i < 200; i++) {
        const text = Array.from(
          { length: 1 + Math.floor(random() * 12) },
          () => alphabet[Math.floor(random() * alphabet.length)],
        ).join('');
        // Every pre-tokenizer but qwen2 and gpt-4o cleans spaces on decode, as llama.cpp's detokenizer does.
        const expected = cleansSpaces('gpt2', pre) ? new TextDecoder().decode(cleanSpaces(Buffer.from(text))) : text;
        expect(tok.decode(tok.encode(text)), `${pre}: ${JSON.stringify(text)}`).toBe(expected);
      }
    }
  });

  it('stream multi-byte characters without breaking them', async () => {
    const tok = createTokenizer(await fileWith(bpeKv(merges)));
    const ids = tok.encode('a😀é中');
    expect(tok.tokenPiece(tok.encode('😀')[0])).toBe('\uFFFD'); // a lone lead byte is not text
    const stream = tok.createStreamDecoder();
    const out = ids.map((id) => stream.push(id));
    expect(out.join('') + stream.flush()).toBe('a😀é中');
    expect(out.filter((s) => s !== '')).toEqual(['a', '😀', 'é', '中']);
    expect(out.every((s) => !s.includes('\uFFFD'))).toBe(true);
  });

  it('refuse an unknown tokenizer model or pre-tokenizer, naming the key', async () => {
    const model = await fileWith(bpeKv(merges, { model: 'bert' }));
    expect(() => createTokenizer(model)).toThrow(UnsupportedModelError);
    expect(() => createTokenizer(model)).toThrow(/key tokenizer.ggml.model: expected one of gpt2, llama, got "bert"/);
    const pre = await fileWith(bpeKv(merges, { pre: 'tekken' }));
    expect(() => createTokenizer(pre)).toThrow(
      /key tokenizer.ggml.pre: expected one of default, .*qwen2.*, got "tekken"/,
    );
    const broken = await fileWith(bpeKv(['nospace']));
    expect(() => createTokenizer(broken)).toThrow(GgufFormatError);
    expect(() => createTokenizer(broken)).toThrow(
      /tokenizer.ggml.merges: expected "left right" pairs, got "nospace" at index 0/,
    );
  });
});

describe('pre-tokenizers', () => {
  it('qwen2 splits like its tokenizer.json regex', () => {
    expect(preTokenizer('qwen2')!("Hello world's 123 ab\n\n  x")).toEqual([
      'Hello',
      ' world',
      "'s",
      ' ',
      '1',
      '2',
      '3',
      ' ab',
      '\n\n',
      ' ',
      ' x',
    ]);
  });
  it('gpt2 keeps digit runs and a space before words', () => {
    expect(preTokenizer('gpt2')!("Hello world's 123  x ")).toEqual(['Hello', ' world', "'s", ' 123', ' ', ' x', ' ']);
  });
});

/** SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces with scores. */
function spmKv(pieces: Array<[string, number]>, extra: Kv = []): Kv {
  const bytes = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const tokens = ['<unk>', '<s>', '</s>', ...bytes, ...pieces.map(([p]) => p)];
  const types = [2, 3, 3, ...bytes.map(() => 6), ...pieces.map(() => 1)];
  const scores = [0, 0, 0, ...bytes.map(() => 0), ...pieces.map(([, s]) => s)];
  return [
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', values: types }],
    ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', values: scores }],
    ...extra,
  ];
}

describe('SentencePiece (llama)', () => {
  const words: Array<[string, number]> = [
    ['▁', -1],
    ['H', -2],
    ['i', -2],
    ['t', -2],
    ['h', -2],
    ['e', -2],
    ['r', -2],
    ['▁H', -3],
    ['▁Hi', -4],
    ['▁t', -3],
    ['▁th', -4],
    ['▁the', -5],
    ['▁ther', -7],
    ['▁there', -6],
    ['er', -8],
    ['re', -9],
  ];

  it('encode with a space prefix and BOS, merging by score', async () => {
    const tok = createTokenizer(await fileWith(spmKv(words)));
    const ids = tok.encode('Hi there');
    expect(ids[0]).toBe(1);
    expect(pieces(tok, ids.slice(1))).toEqual([' Hi', ' there']);
    expect(tok.decode(ids.slice(1))).toBe('Hi there');
    expect(tok.decode(ids, { special: false })).toBe(' Hi there'); // llama.cpp: BOS consumes the first-space strip
    expect([tok.bosId, tok.eosId, tok.kind]).toEqual([1, 2, 'llama']);
  });

  it('merge the highest-scoring pair first', async () => {
    const base: Array<[string, number]> = [
      ['a', -1],
      ['b', -1],
      ['c', -1],
    ];
    const noPrefix: Kv = [['tokenizer.ggml.add_space_prefix', { type: 'bool', value: false }]];
    const bc = createTokenizer(await fileWith(spmKv([...base, ['ab', -2], ['bc', -1.5]], noPrefix)));
    expect(pieces(bc, bc.encode('abc', { addBos: false }))).toEqual(['a', 'bc']);
    const ab = createTokenizer(await fileWith(spmKv([...base, ['ab', -1.5], ['bc', -2]], noPrefix)));
    expect(pieces(ab, ab.encode('abc', { addBos: false }))).toEqual(['ab', 'c']);
  });

  it('fall back to byte tokens and stream them back into characters', async () => {
    const tok = createTokenizer(await fileWith(spmKv(words)));
    const ids = tok.encode('Hi é😀', { addBos: false });
    const names = ids.map((id) => tok.tokenPiece(id));
    expect(names.slice(0, 2)).toEqual([' Hi', ' ']);
    expect(ids.slice(2)).toEqual([0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80].map((b) => 3 + b));
    expect(tok.decode(ids)).toBe('Hi é😀');
    const stream = tok.createStreamDecoder();
    const out = ids.map((id) => stream.push(id));
    expect(out.filter((s) => s !== '')).toEqual([' Hi', ' ', 'é', '😀']);
  });

  it('round-trip arbitrary text', async () => {
    const tok = createTokenizer(await fileWith(spmKv(words)));
    const random = prng(5);
    const alphabet = ['Hi', ' ', 'there', 'x', 'é', '中', '😀', '\n', 'the', 'r'];
    for (let i = 0; i < 300; i++) {
      const text = Array.from(
        { length: 1 + Math.floor(random() * 10) },
        () => alphabet[Math.floor(random() * alphabet.length)],
      ).join('');
      expect(tok.decode(tok.encode(text, { addBos: false })), JSON.stringify(text)).toBe(text);
    }
  });

  it('match <s> in the text as a special, and prefix a space after it', async () => {
    const tok = createTokenizer(await fileWith(spmKv(words)));
    const ids = tok.encode('Hi<s>Hi', { addBos: false });
    expect(ids[1]).toBe(1);
    expect(ids[0]).toBe(ids[2]);
  });

  it('refuse an out-of-range special id and a wrongly sized scores array', async () => {
    const badBos = await fileWith(spmKv(words, [['tokenizer.ggml.bos_token_id', { type: 'u32', value: 100000 }]]));
    expect(() => createTokenizer(badBos)).toThrow(
      /key tokenizer.ggml.bos_token_id: expected an unsigned integer from 0 to 274/,
    );
    const kv = spmKv(words).map(([k, v]): Kv[number] =>
      k === 'tokenizer.ggml.scores' ? [k, { type: 'array', itemType: 'f32', values: [1] }] : [k, v],
    );
    const badScores = await fileWith(kv);
    expect(() => createTokenizer(badScores)).toThrow(/tokenizer.ggml.scores: expected an array of 275 numbers/);
  });
});
