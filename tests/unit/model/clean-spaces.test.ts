/**
 * llama.cpp's clean-spaces rule on detokenizing (src/model/tokenizer/clean-spaces.ts): which
 * vocabularies clean, and the three passes, byte for byte as llama_detokenize gives them.
 */
import { describe, expect, it } from 'vitest';
import { cleanSpaces, cleansSpaces } from '../../../src/model/tokenizer/clean-spaces.js';

const clean = (s: string): string => new TextDecoder().decode(cleanSpaces(new TextEncoder().encode(s)));

describe('clean spaces', () => {
  it.each([
    ['Hello , world !', 'Hello, world!'],
    ['Why ? Because .', 'Why? Because.'],
    [' .', '.'], // a leading space goes too: llama.cpp's first pass keeps byte 0, then takes it back
    ['a  .', 'a .'], // only the one space right before
    ["rock ' n roll", "rock'n roll"],
    ["a ' ' b", "a'' b"], // the blanked space after a match is no left neighbour for the next
    ["it 's here", "it's here"],
    ["I 'm , we 're , you 've", "I'm, we're, you've"],
    ["don 't , he 'd , we 'll", "don 't, he 'd, we 'll"], // 't 'd 'll keep their space
    ["it 'S", "it 'S"], // case-sensitive, as llama.cpp
    ['café , naïve !', 'café, naïve!'], // multi-byte characters pass through
    ['', ''],
  ])('%j -> %j', (input, expected) => {
    expect(clean(input)).toBe(expected);
  });

  it('applies to BPE vocabularies except the pre-tokenizers llama.cpp exempts, never to SentencePiece', () => {
    expect(cleansSpaces('gpt2', 'llama-bpe')).toBe(true);
    expect(cleansSpaces('gpt2', 'default')).toBe(true);
    expect(cleansSpaces('gpt2', 'olmo')).toBe(true);
    expect(cleansSpaces('gpt2', 'qwen2')).toBe(false);
    expect(cleansSpaces('gpt2', 'deepseek-v3')).toBe(false);
    expect(cleansSpaces('llama', 'default')).toBe(false);
  });
});
