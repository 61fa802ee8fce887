/**
 * Details where moetier's tokenizers once differed from llama.cpp (issue 16 point 4), each on a
 * small vocabulary written as GGUF: a leading U+FEFF, Unicode white space in the pre-tokenizer,
 * code points newer than llama.cpp's Unicode tables, llama-bpe's ignore_merges, and the
 * end-of-generation / special-token sets llama.cpp builds from token texts. tokenizer-corpus.test.ts
 * checks the same on the real vocabularies.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { createTokenizer, type Tokenizer } from '../../../src/model/tokenizer/index.js';
import { preTokenizer } from '../../../src/model/tokenizer/pretokenize.js';
import type { Kv } from './gguf-fixture.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-tok-llamacpp-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A byte-level BPE vocabulary: the 256 byte characters, `extra` tokens (text, type), then merges. */
async function bpe(extra: Array<[string, number]>, merges: string[], pre = 'qwen2', more: Kv = []): Promise<Tokenizer> {
  const bytes = Array.from({ length: 256 }, (_, b) => byteChar(b));
  const tokens = [...bytes, ...extra.map(([t]) => t)];
  const types = [...bytes.map(() => 1), ...extra.map(([, type]) => type)];
  const kv: Kv = [
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: pre }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', values: types }],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: merges }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: false }],
    ...more,
  ];
  const path = join(dir, `t${n++}.gguf`);
  await writeGguf(path, kv, []);
  return createTokenizer(parseGguf(new Uint8Array(await readFile(path)), path));
}

/** The GPT-2 alphabet character of one byte (printable latin-1 is itself, the rest from U+0100 on). */
function byteChar(b: number): string {
  const printable = (x: number) => (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
  let k = 0;
  for (let x = 0; x < b; x++) if (!printable(x)) k++;
  return String.fromCodePoint(printable(b) ? b : 0x100 + k);
}

const NORMAL = 1;
const CONTROL = 3;
const USER_DEFINED = 4;

describe('a leading U+FEFF is text, not a byte-order mark', () => {
  it('a token that is exactly "\\ufeff" reads as itself, and "\\ufeffusing" keeps its first character', async () => {
    const tok = await bpe(
      [
        ['\ufeff', USER_DEFINED],
        ['\ufeffusing', USER_DEFINED],
      ],
      [],
    );
    expect(tok.tokenPiece(256)).toBe('\ufeff');
    expect(tok.tokenPiece(257)).toBe('\ufeffusing');
    expect(tok.encode('\ufeffusing x')).toEqual([257, ...tok.encode(' x')]);
    expect(tok.decode([257, 256])).toBe('\ufeffusing\ufeff');
    const stream = tok.createStreamDecoder();
    expect(stream.push(257) + stream.push(256) + stream.flush()).toBe('\ufeffusing\ufeff');
  });

  it('a byte-level "\\ufeff" (ï»¿) decodes to U+FEFF at the start of a text', async () => {
    const tok = await bpe([], ['ï »', 'ï» ¿']);
    const ids = tok.encode('\ufeff//');
    expect(tok.decode(ids)).toBe('\ufeff//');
  });
});

describe('pre-tokenizer white space is Unicode White_Space (llama.cpp), not JavaScript \\s', () => {
  it('U+0085 is white space, U+FEFF is not', () => {
    for (const name of ['qwen2', 'llama-bpe']) {
      const pre = preTokenizer(name) as (text: string) => string[];
      expect(pre("\u0085're")).toEqual(['\u0085', "'re"]);
      expect(pre('\ufeff//')).toEqual(['\ufeff//']);
      expect(pre('a\u0085\u0085b')).toEqual(['a', '\u0085', '\u0085b']);
    }
    const gpt2 = preTokenizer('gpt2') as (text: string) => string[];
    expect(gpt2('a\u0085\u0085b')).toEqual(['a', '\u0085', '\u0085', 'b']);
    expect(gpt2('a \ufeffb')).toEqual(['a', ' \ufeff', 'b']);
  });
});

describe("letters, digits and punctuation newer than llama.cpp's Unicode 15.1 tables are unassigned to it", () => {
  // U+13AFF (Egyptian hieroglyph, Unicode 16), U+A7CB (Latin capital, 16), U+1CCF0 (outlined digit zero, 16):
  // Node 20's tables call them \p{L} / \p{L} / \p{N}, llama.cpp's none of these. The pieces below are the
  // ones llama.cpp gives (node-llama-cpp 3.21.1: 655 strings around 162 such code points, 0 mismatches in
  // ids on Qwen3, Llama 3, Llama 2 and gpt-oss; 120-141 on the BPE ones before they were taken out).
  it.each(['qwen2', 'llama-bpe', 'gpt-4o', 'gpt2'])('%s', (name) => {
    const pre = preTokenizer(name) as (text: string) => string[];
    expect(pre("x\u{13aff}'re")).toEqual(['x', "\u{13aff}'", 're']);
    expect(pre('a\u{a7cb}b')).toEqual(name === 'gpt2' ? ['a', '\u{a7cb}', 'b'] : ['a', '\u{a7cb}b']);
    expect(pre('1\u{1ccf0}2')).toEqual(['1', '\u{1ccf0}', '2']);
    // Letters llama.cpp's tables have stay letters: U+1C80 (Cyrillic, Unicode 9), U+A7C0 (Latin, 14).
    expect(pre('x\u{1c80}\u{a7c0}')).toEqual(['x\u{1c80}\u{a7c0}']);
  });
});

describe('llama-bpe ignores merges (Llama 3)', () => {
  // Merges make "abc" into "ab" + "c"; the vocabulary has "abc" itself.
  const extra: Array<[string, number]> = [
    ['ab', NORMAL],
    ['bc', NORMAL],
    ['abc', NORMAL],
  ];
  const merges = ['a b', 'b c'];

  it('a pre-token that is a token is that token, without merging', async () => {
    const tok = await bpe(extra, merges, 'llama-bpe');
    expect(tok.encode('abc')).toEqual([258]);
    expect(tok.encode('abcab')).toEqual([256, 99, 256]); // 'abcab' is no token: merged, 'a b' first
  });

  it('other pre-tokenizers merge as before', async () => {
    const tok = await bpe(extra, merges, 'qwen2');
    expect(tok.encode('abc')).toEqual([256, 99]);
  });
});

describe('end of generation and special tokens, as llama.cpp finds them by text', () => {
  const qwenLike: Array<[string, number]> = [
    ['<|endoftext|>', CONTROL],
    ['<|im_start|>', CONTROL],
    ['<|im_end|>', CONTROL],
    ['</s>', NORMAL],
    ['<|fim_prefix|>', USER_DEFINED],
    ['<|fim_pad|>', USER_DEFINED],
    ['<|repo_name|>', USER_DEFINED],
    ['<|file_sep|>', USER_DEFINED],
    ['<think>', USER_DEFINED],
  ];
  const ids = {
    endoftext: 256,
    imEnd: 258,
    s: 259,
    fimPrefix: 260,
    fimPad: 261,
    repoName: 262,
    fileSep: 263,
    think: 264,
  };

  it('eos, the EOG texts (a NORMAL "</s>" too) and the FIM pad / repo / sep tokens end generation', async () => {
    const tok = await bpe(qwenLike, [], 'qwen2', [['tokenizer.ggml.eos_token_id', { type: 'u32', value: ids.imEnd }]]);
    expect([...tok.eogIds].sort((a, b) => a - b)).toEqual([
      ids.endoftext,
      ids.imEnd,
      ids.s,
      ids.fimPad,
      ids.repoName,
      ids.fileSep,
    ]);
  });

  it('"</s>" becomes a control token: one token when specials are parsed, text otherwise, hidden without special', async () => {
    const tok = await bpe(qwenLike, []);
    expect(tok.encode('a</s>b')).toEqual([97, ids.s, 98]);
    expect(tok.encode('a</s>b', { parseSpecial: false })).toEqual([...'a</s>b'].map((c) => c.charCodeAt(0)));
    expect(tok.decode([97, ids.s, 98], { special: false })).toBe('ab');
    expect(tok.decode([97, ids.s, 98])).toBe('a</s>b');
  });

  it('every control and user-defined token is matched in the text, FIM ones as controls', async () => {
    const tok = await bpe(qwenLike, []);
    expect(tok.encode('<think>x<|fim_prefix|>')).toEqual([ids.think, 120, ids.fimPrefix]);
    // user-defined tokens are matched even when control ones are not (llama.cpp's parse_special = false)
    expect(tok.encode('<think><|fim_prefix|>', { parseSpecial: false })).toEqual([
      ids.think,
      ...[...'<|fim_prefix|>'].map((c) => c.charCodeAt(0)),
    ]);
  });

  it('names in the file come first: tokenizer.ggml.eot_token_id and fim_*_token_id', async () => {
    const tok = await bpe([...qwenLike, ['<custom_end>', CONTROL]], [], 'qwen2', [
      ['tokenizer.ggml.eot_token_id', { type: 'u32', value: 265 }],
      ['tokenizer.ggml.fim_pad_token_id', { type: 'u32', value: ids.think }],
    ]);
    expect(tok.eogIds.has(265)).toBe(true);
    expect(tok.eogIds.has(ids.think)).toBe(true);
    expect(tok.eogIds.has(ids.fimPad)).toBe(false);
  });
});
