/**
 * The gpt-4o pre-tokenizer (gpt-oss's tokenizer.ggml.pre) on hand strings, piece by piece, as
 * llama.cpp splits them: its regex
 *
 *   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|...)?
 *   |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|...)?
 *   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * run by std::regex on collapsed text (every code point >= 128 one byte for its category): a
 * non-ASCII letter is "not a-z" and "not A-Z" at once, a combining mark is no letter. The pieces
 * below are worked out from that by hand; tokenizer-corpus.test.ts checks the same strings' ids
 * against llama.cpp's on the real gpt-oss vocabulary, and bench/tokenizer.mjs adds random strings.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnsupportedModelError } from '../../../src/core/errors.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { cleansSpaces } from '../../../src/model/tokenizer/clean-spaces.js';
import { createTokenizer } from '../../../src/model/tokenizer/index.js';
import { preTokenizer } from '../../../src/model/tokenizer/pretokenize.js';
import { CORPUS } from '../../fixtures/tokenizers/corpus.mjs';
import type { Kv } from './gguf-fixture.js';

const split = preTokenizer('gpt-4o') as (text: string) => string[];

describe('gpt-4o pieces, as llama.cpp cuts them', () => {
  it.each<[string, string, string[]]>([
    ['ASCII words, a space kept before each', 'Hello world', ['Hello', ' world']],
    ['a capital run then lower case: one piece', 'HELLOworld', ['HELLOworld']],
    ['lower case then capitals: two pieces', 'helloWORLD', ['hello', 'WORLD']],
    ['camel case', 'camelCaseWords', ['camel', 'Case', 'Words']],
    ['contractions join the word, in any case', "I'M don't THEY'LL we'Ve", ["I'M", " don't", " THEY'LL", " we'Ve"]],
    ['an apostrophe at the start is the one character before a word', "'s 're", ["'s", " '", 're']],
    ['numbers in groups of 1 to 3 digits, no space attached', '1234567 89', ['123', '456', '7', ' ', '89']],
    ['digits and letters part', 'abc123def', ['abc', '123', 'def']],
    ['accented letters are letters', 'naïve café Ångström', ['naïve', ' café', ' Ångström']],
    ['aÉ: a non-ASCII capital continues a lower-case run (tiktoken: "a", "É")', 'aÉ', ['aÉ']],
    ['ÉÉa and aÉb: one piece each', 'ÉÉa aÉb', ['ÉÉa', ' aÉb']],
    ['a capital run after non-ASCII letters', 'ÀÉÎõüABC', ['ÀÉÎõü', 'ABC']],
    ['CJK runs are one piece, ASCII capitals after them too', '日本語テキストABCdef', ['日本語テキストABCdef']],
    ['Cyrillic capitals then lower case', 'ПРИВЕТмир мирПРИВЕТ', ['ПРИВЕТмир', ' мирПРИВЕТ']],
    ['a combining mark is no letter: it opens the next piece', 'cafe\u0301s', ['cafe', '\u0301s']],
    ['a lone combining mark at the end', 'e\u0301', ['e', '\u0301']],
    ['two marks: the first opens a symbol run, the second follows it', 'x\u0301\u0302y', ['x', '\u0301\u0302', 'y']],
    ['emoji are symbols; a space joins the symbol run', '👍🏽 ok 😀😃', ['👍🏽', ' ok', ' 😀😃']],
    ['punctuation takes the newlines and slashes after it', '!!/\n/x', ['!!/\n/', 'x']],
    ['newlines with the spaces before them', 'a  \n\nb', ['a', '  \n\n', 'b']],
    ['runs of spaces: all but the last, which joins the word', 'a    b', ['a', '   ', ' b']],
    ['trailing spaces are one piece', 'a   ', ['a', '   ']],
    ['\\r\\n and tabs', 'x\r\n\ty', ['x', '\r\n', '\ty']],
    [
      'Unicode white space is white space (U+3000, U+0085), U+FEFF is not',
      'a\u3000b\u0085c\ufeffd',
      ['a', '\u3000b', '\u0085c', '\ufeffd'],
    ],
  ])('%s', (_why, text, pieces) => {
    expect(split(text)).toEqual(pieces);
    expect(split(text).join('')).toBe(text);
    expect(CORPUS, "in the corpus whose ids llama.cpp's are checked against").toContain(text);
  });
});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-tok-gpt4o-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A byte-level vocabulary of the 256 GPT-2 byte characters and no merges, declaring `pre`. */
async function bytesOnly(pre: string) {
  const printable = (x: number) => (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
  let next = 0x100;
  const tokens = Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : next++));
  const kv: Kv = [
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: pre }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', values: tokens }],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', values: [] }],
  ];
  const path = join(dir, `${pre}.gguf`);
  await writeGguf(path, kv, []);
  return parseGguf(new Uint8Array(await readFile(path)), path);
}

describe('the gpt-4o vocabulary kind', () => {
  it('is read, and detokenizes verbatim (llama.cpp sets clean_spaces false for it)', async () => {
    const tok = createTokenizer(await bytesOnly('gpt-4o'));
    expect(cleansSpaces('gpt2', 'gpt-4o')).toBe(false);
    const text = "Hello , world ! it 's aÉ 123";
    expect(tok.decode(tok.encode(text))).toBe(text);
  });

  it('an unknown pre-tokenizer is still refused by name', async () => {
    const file = await bytesOnly('gpt-5o');
    expect(() => createTokenizer(file)).toThrow(UnsupportedModelError);
    expect(() => createTokenizer(file)).toThrow(/key tokenizer.ggml.pre: expected one of .*gpt-4o.*, got "gpt-5o"/);
  });
});
