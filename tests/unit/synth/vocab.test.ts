import { describe, expect, it } from 'vitest';
import { DEMO_PROMPT, PARITY_PROMPTS, promptText } from '../../../src/synth/prompts.js';
import { PRESETS } from '../../../src/synth/presets.js';
import { FUNCTION_WORDS, TOPICS } from '../../../src/synth/topics.js';
import { HARMONY_TEMPLATE } from '../../../src/synth/harmony-template.js';
import {
  CHATML_TEMPLATE,
  HARMONY_SPECIALS,
  TOKEN_TYPE,
  buildVocab,
  gpt2ByteToUnicode,
  type SynthVocab,
} from '../../../src/synth/vocab.js';

/** Byte-level BPE as llama.cpp applies it to one pre-token: lowest-rank merge first. */
function bpe(vocab: SynthVocab, piece: string): string[] {
  const rank = new Map(vocab.merges.map((m, i) => [m, i]));
  let symbols = [...piece];
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < symbols.length; i++) {
      const r = rank.get(`${symbols[i]} ${symbols[i + 1]}`);
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) return symbols;
    symbols = [...symbols.slice(0, best), symbols[best] + symbols[best + 1], ...symbols.slice(best + 2)];
  }
}

/** SentencePiece-style merging: the highest-scoring adjacent pair that is a token, first. */
function spm(vocab: SynthVocab, piece: string): string[] {
  const index = new Map(vocab.tokens.map((t, i) => [t, i]));
  let symbols = [...piece];
  for (;;) {
    let best = -1;
    let bestScore = -Infinity;
    for (let i = 0; i + 1 < symbols.length; i++) {
      const id = index.get(symbols[i] + symbols[i + 1]);
      if (id !== undefined && vocab.scores[id] > bestScore) [best, bestScore] = [i, vocab.scores[id]];
    }
    if (best < 0) return symbols;
    symbols = [...symbols.slice(0, best), symbols[best] + symbols[best + 1], ...symbols.slice(best + 2)];
  }
}

describe('topic words', () => {
  it('are lowercase a-z, unique across topics and function words, a few dozen per topic', () => {
    const all = [...TOPICS.flatMap((t) => t.words), ...FUNCTION_WORDS];
    expect(new Set(all).size).toBe(all.length);
    for (const w of all) expect(w).toMatch(/^[a-z]+$/);
    expect(TOPICS.length).toBeGreaterThanOrEqual(PRESETS.medium.nTopics);
    for (const t of TOPICS) expect(t.words.length).toBeGreaterThanOrEqual(24);
  });
});

describe('gpt2 vocabulary', () => {
  const vocab = buildVocab('gpt2', PRESETS.tiny.nVocab, PRESETS.tiny.nTopics, 1);

  it('has exactly nVocab tokens: bytes in byte order, then the control tokens', () => {
    expect(vocab.tokens.length).toBe(PRESETS.tiny.nVocab);
    expect(vocab.tokens.slice(0, 256)).toEqual(gpt2ByteToUnicode());
    expect(vocab.tokens[0x20]).toBe('Ġ');
    expect(vocab.tokens[0x0a]).toBe('Ċ');
    expect(vocab.tokens[0x41]).toBe('A');
    expect(vocab.tokens.slice(256, 259)).toEqual(['<|endoftext|>', '<|im_start|>', '<|im_end|>']);
    expect(vocab.types.slice(256, 259)).toEqual([3, 3, 3]);
    expect(vocab.eosId).toBe(256);
    expect(new Set(vocab.tokens).size).toBe(vocab.tokens.length);
  });

  it('has merges whose parts and results are tokens, one per multi-character piece', () => {
    const index = new Set(vocab.tokens);
    for (const m of vocab.merges) {
      const [left, right] = m.split(' ');
      expect(index.has(left) && index.has(right) && index.has(left + right)).toBe(true);
      expect(left.startsWith('Ġ')).toBe(true);
    }
    expect(new Set(vocab.merges).size).toBe(vocab.merges.length);
  });

  it('turns every word into its one token by BPE', () => {
    expect(vocab.wordToken.size).toBeGreaterThan(300);
    for (const [word, id] of vocab.wordToken) expect(bpe(vocab, 'Ġ' + word)).toEqual([vocab.tokens[id]]);
  });

  it('deals words to topics with cycles that start with the real words', () => {
    expect(vocab.cycles.length).toBe(PRESETS.tiny.nTopics);
    vocab.cycles.forEach((cycle, t) => {
      expect(cycle.length).toBeGreaterThan(TOPICS[t].words.length);
      expect(cycle.slice(0, TOPICS[t].words.length)).toEqual(TOPICS[t].words.map((w) => vocab.wordToken.get(w)));
      for (let i = 0; i < cycle.length; i++) {
        expect(vocab.topicOf[cycle[i]]).toBe(t);
        expect(vocab.pred[cycle[(i + 1) % cycle.length]]).toBe(cycle[i]);
      }
    });
    for (const w of FUNCTION_WORDS) expect(vocab.topicOf[vocab.wordToken.get(w)!]).toBe(-1);
  });

  it('is deterministic for a seed and differs across seeds', () => {
    expect(buildVocab('gpt2', 2048, 4, 1).tokens).toEqual(vocab.tokens);
    expect(buildVocab('gpt2', 2048, 4, 2).tokens).not.toEqual(vocab.tokens);
  });
});

describe('gpt2 vocabulary for Harmony (gpt-oss)', () => {
  const vocab = buildVocab('gpt2', PRESETS.tiny.nVocab, PRESETS.tiny.nTopics, 1, 'harmony');
  const chatml = buildVocab('gpt2', PRESETS.tiny.nVocab, PRESETS.tiny.nTopics, 1);

  it("has the bytes, bos / padding / eos where ChatML's three are, the words, then Harmony's markers last", () => {
    const n = PRESETS.tiny.nVocab;
    expect(vocab.tokens.length).toBe(n);
    expect(vocab.tokens.slice(0, 256)).toEqual(gpt2ByteToUnicode());
    expect(vocab.tokens.slice(256, 259)).toEqual(['<|startoftext|>', '<|endoftext|>', '<|return|>']);
    expect(vocab.tokens.slice(n - 6)).toEqual(HARMONY_SPECIALS.slice(3));
    for (const t of HARMONY_SPECIALS) expect(vocab.types[vocab.tokens.indexOf(t)], t).toBe(TOKEN_TYPE.control);
    expect(vocab.tokens).not.toContain('<|im_start|>');
    const id = (t: string) => vocab.tokens.indexOf(t);
    expect([vocab.bosId, vocab.eosId, vocab.padId]).toEqual([
      id('<|startoftext|>'),
      id('<|return|>'),
      id('<|endoftext|>'),
    ]);
    expect([vocab.pre, vocab.chatTemplate]).toEqual(['gpt-4o', HARMONY_TEMPLATE]);
    expect([chatml.pre, chatml.chatTemplate, chatml.padId]).toEqual(['qwen2', CHATML_TEMPLATE, chatml.eosId]);
    expect(new Set(vocab.tokens).size).toBe(vocab.tokens.length);
  });

  it('turns every word into its one token by BPE, each at its ChatML id (the planted vectors are seeded by id)', () => {
    for (const [word, id] of vocab.wordToken) expect(bpe(vocab, 'Ġ' + word)).toEqual([vocab.tokens[id]]);
    expect(vocab.tokens.slice(259, PRESETS.tiny.nVocab - 6)).toEqual(chatml.tokens.slice(259, PRESETS.tiny.nVocab - 6));
    for (const t of TOPICS.slice(0, PRESETS.tiny.nTopics))
      for (const w of t.words) expect(vocab.wordToken.get(w)).toBe(chatml.wordToken.get(w));
  });
});

describe('llama vocabulary', () => {
  const vocab = buildVocab('llama', PRESETS.tiny.nVocab, PRESETS.tiny.nTopics, 1);

  it('has <unk> <s> </s>, the byte tokens, then ▁ and the letters', () => {
    expect(vocab.tokens.length).toBe(PRESETS.tiny.nVocab);
    expect(vocab.tokens.slice(0, 3)).toEqual(['<unk>', '<s>', '</s>']);
    expect(vocab.types.slice(0, 3)).toEqual([TOKEN_TYPE.unknown, TOKEN_TYPE.control, TOKEN_TYPE.control]);
    expect(vocab.tokens[3]).toBe('<0x00>');
    expect(vocab.tokens[3 + 0x0a]).toBe('<0x0A>');
    expect(vocab.tokens[258]).toBe('<0xFF>');
    expect(vocab.types[100]).toBe(TOKEN_TYPE.byte);
    expect(vocab.tokens[259]).toBe('▁');
    expect([vocab.bosId, vocab.eosId]).toEqual([1, 2]);
    expect(vocab.merges).toEqual([]);
  });

  it('turns every word into its one token by score-ordered merging', () => {
    for (const [word, id] of vocab.wordToken) expect(spm(vocab, '▁' + word)).toEqual([vocab.tokens[id]]);
  });
});

describe('built-in prompts', () => {
  const prompts = [DEMO_PROMPT, ...PARITY_PROMPTS];
  it('use topics every preset has, three different ones for parity, and end on a topic word', () => {
    expect(new Set(PARITY_PROMPTS.map((p) => p.topic)).size).toBe(3);
    for (const p of prompts) {
      expect(p.topic).toBeGreaterThanOrEqual(0);
      expect(p.topic).toBeLessThan(PRESETS.tiny.nTopics);
      expect(TOPICS[p.topic].words).toContain(p.words[p.words.length - 1]);
    }
  });
  for (const model of ['gpt2', 'llama'] as const) {
    it(`are one token per word (${model})`, () => {
      const vocab = buildVocab(model, PRESETS.tiny.nVocab, PRESETS.tiny.nTopics, 1);
      const space = model === 'gpt2' ? 'Ġ' : '▁';
      const merge = model === 'gpt2' ? bpe : spm;
      for (const p of prompts) {
        const text = promptText(p, model);
        // Both tokenizers see each word with its space marker (SentencePiece adds the first one).
        const words = (model === 'gpt2' ? text.slice(1) : text).split(' ');
        expect(words).toEqual(p.words);
        for (const w of words) {
          const pieces = merge(vocab, space + w);
          expect(pieces).toHaveLength(1);
          expect(vocab.wordToken.get(w)).toBe(vocab.tokens.indexOf(pieces[0]));
        }
      }
    });
  }
});
