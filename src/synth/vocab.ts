/**
 * The synthetic vocabulary and its tokenizer metadata.
 *
 * gpt2, ChatML (qwen3moe, qwen2moe, olmoe, glm4moe): [256 byte tokens in byte order]
 *   [<|endoftext|> <|im_start|> <|im_end|>] then "Ġ"-prefixed pieces; pre-tokenizer qwen2.
 * gpt2, Harmony (gpt-oss): [256 byte tokens][<|startoftext|> <|endoftext|> <|return|>] then the
 *   pieces, then Harmony's markers last (<|constrain|> ... <|call|>), o200k_harmony's order; pre-
 *   tokenizer gpt-4o, bos <|startoftext|>, eos <|return|>, padding <|endoftext|>, as gpt-oss files
 *   declare them. The three in ChatML's places keep every word at its ChatML id, and so its planted
 *   vectors (planted.ts seeds them by id).
 * gpt2 pieces: a word w adds "Ġw1", "Ġw1w2", ... "Ġw" with one merge per piece ("Ġ w1",
 *   "Ġw1 w2", ...): only Ġ-prefixed multi-character tokens exist, so exactly one merge applies at
 *   each step and every known word becomes one token.
 * llama (SentencePiece): [<unk> <s> </s>][<0x00>..<0xFF>][▁ a..z] then "▁"-prefixed pieces,
 *   scored by length so longer pieces win.
 * Words: the preset's real topic words, the function words, then seeded pseudo-words dealt
 * round-robin to the topics until the vocabulary has exactly nVocab tokens.
 */
import { assert } from '../core/assert.js';
import { Rng } from './prng.js';
import { HARMONY_TEMPLATE } from './harmony-template.js';
import { FUNCTION_WORDS, TOPICS } from './topics.js';

export type TokenizerModel = 'gpt2' | 'llama';
/** The chat format a gpt2 vocabulary's special tokens and template are for. */
export type ChatFormat = 'chatml' | 'harmony';

/** llama.cpp token types. */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, unused: 5, byte: 6 } as const;

export interface SynthVocab {
  model: TokenizerModel;
  tokens: string[];
  types: number[];
  /** llama only: one score per token. */
  scores: number[];
  /** gpt2 only: "left right" pairs, in rank order. */
  merges: string[];
  bosId: number;
  eosId: number;
  /** gpt2 only: tokenizer.ggml.padding_token_id. */
  padId: number;
  /** gpt2 only: tokenizer.ggml.pre. */
  pre: string;
  /** gpt2 only: tokenizer.chat_template. */
  chatTemplate: string | undefined;
  /** Topic of each token; -1 for bytes, control tokens, prefixes and function words. */
  topicOf: Int32Array;
  /** Each topic's word tokens in cycle order (real words first). */
  cycles: number[][];
  /** pred[w]: the word before w in its topic's cycle; -1 for tokens without a topic. */
  pred: Int32Array;
  /** Token id of every word (topic, function and pseudo-words). */
  wordToken: Map<string, number>;
}

const GPT2_SPACE = '\u0120'; // Ġ: the byte 0x20 in GPT-2's byte-to-unicode alphabet
const SPM_SPACE = '\u2581'; // ▁

/** GPT-2 byte -> printable unicode character (printable Latin-1 bytes map to themselves). */
export function gpt2ByteToUnicode(): string[] {
  const printable = (b: number): boolean =>
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) out.push(String.fromCharCode(printable(b) ? b : next++));
  return out;
}

class Builder {
  readonly tokens: string[] = [];
  readonly types: number[] = [];
  readonly scores: number[] = [];
  readonly merges: string[] = [];
  readonly index = new Map<string, number>();
  readonly wordTopic = new Map<number, number>(); // word token -> topic (-1: function word)
  readonly wordToken = new Map<string, number>();

  constructor(
    readonly model: TokenizerModel,
    readonly space: string,
  ) {}

  add(text: string, type: number, score = 0): number {
    assert(!this.index.has(text), `duplicate token ${text}`);
    const id = this.tokens.length;
    this.tokens.push(text);
    this.types.push(type);
    this.scores.push(score);
    this.index.set(text, id);
    return id;
  }

  /** Tokens that adding `word` would create. */
  cost(word: string): number {
    let missing = 0;
    for (let i = 1; i <= word.length; i++) if (!this.index.has(this.space + word.slice(0, i))) missing++;
    return missing;
  }

  /** Adds the word's pieces; returns its token, or -1 when the word is already known. */
  addWord(word: string, topic: number): number {
    if (this.wordToken.has(word)) return -1;
    let prev = this.space;
    for (let i = 1; i <= word.length; i++) {
      const piece = this.space + word.slice(0, i);
      if (!this.index.has(piece)) {
        this.add(piece, TOKEN_TYPE.normal, piece.length);
        if (this.model === 'gpt2') this.merges.push(`${prev} ${word[i - 1]}`);
      }
      prev = piece;
    }
    const id = this.index.get(prev)!;
    this.wordToken.set(word, id);
    this.wordTopic.set(id, topic);
    return id;
  }
}

/** gpt-oss's named special tokens, in o200k_harmony's order (its reserved ones left out). */
export const HARMONY_SPECIALS = [
  '<|startoftext|>',
  '<|endoftext|>',
  '<|return|>',
  '<|constrain|>',
  '<|channel|>',
  '<|start|>',
  '<|end|>',
  '<|message|>',
  '<|call|>',
];

function baseTokens(model: TokenizerModel, chat: ChatFormat): { b: Builder; bosId: number; eosId: number } {
  if (model === 'gpt2') {
    const b = new Builder(model, GPT2_SPACE);
    for (const ch of gpt2ByteToUnicode()) b.add(ch, TOKEN_TYPE.normal);
    if (chat === 'harmony') {
      // Bos, padding and eos where ChatML has its three; the markers come last (buildVocab).
      for (const text of HARMONY_SPECIALS.slice(0, 3)) b.add(text, TOKEN_TYPE.control);
      return { b, bosId: b.index.get('<|startoftext|>')!, eosId: b.index.get('<|return|>')! };
    }
    const eos = b.add('<|endoftext|>', TOKEN_TYPE.control);
    b.add('<|im_start|>', TOKEN_TYPE.control);
    b.add('<|im_end|>', TOKEN_TYPE.control);
    return { b, bosId: eos, eosId: eos };
  }
  const b = new Builder(model, SPM_SPACE);
  b.add('<unk>', TOKEN_TYPE.unknown);
  const bos = b.add('<s>', TOKEN_TYPE.control);
  const eos = b.add('</s>', TOKEN_TYPE.control);
  for (let i = 0; i < 256; i++) b.add(`<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`, TOKEN_TYPE.byte);
  b.add(SPM_SPACE, TOKEN_TYPE.normal, -1);
  for (let c = 97; c <= 122; c++) b.add(String.fromCharCode(c), TOKEN_TYPE.normal, -1);
  return { b, bosId: bos, eosId: eos };
}

const CONSONANTS = 'bdfgklmnprstvz';
const VOWELS = 'aeiou';
const FINALS = 'nrslt';

function pseudoWord(rng: Rng): string {
  let word = '';
  const syllables = 2 + rng.int(2);
  for (let s = 0; s < syllables; s++) word += CONSONANTS[rng.int(CONSONANTS.length)] + VOWELS[rng.int(VOWELS.length)];
  if (rng.uniform() < 0.35) word += FINALS[rng.int(FINALS.length)];
  return word;
}

export function buildVocab(
  model: TokenizerModel,
  nVocab: number,
  nTopics: number,
  seed: number,
  chat: ChatFormat = 'chatml',
): SynthVocab {
  assert(nTopics >= 1 && nTopics <= TOPICS.length, `1..${TOPICS.length} topics, got ${nTopics}`);
  assert(model === 'gpt2' || chat === 'chatml', 'a SentencePiece vocabulary has no chat format');
  const { b, bosId, eosId } = baseTokens(model, chat);
  // Harmony's markers take the last ids, as in o200k_harmony: the words fill the rows before them.
  const markers = chat === 'harmony' ? HARMONY_SPECIALS.slice(3) : [];
  const wordsEnd = nVocab - markers.length;
  for (let t = 0; t < nTopics; t++) for (const word of TOPICS[t].words) b.addWord(word, t);
  for (const word of FUNCTION_WORDS) b.addWord(word, -1);
  assert(
    b.tokens.length <= wordsEnd,
    `vocabulary of ${nVocab} cannot hold the ${b.tokens.length} tokens of the real words`,
  );
  fillPseudoWords(b, wordsEnd, nTopics, seed);
  if (chat === 'harmony') {
    for (const text of markers) b.add(text, TOKEN_TYPE.control);
    const padId = b.index.get('<|endoftext|>')!;
    return finish(b, nTopics, { bosId, eosId, padId, pre: 'gpt-4o', chatTemplate: HARMONY_TEMPLATE });
  }
  return finish(b, nTopics, {
    bosId,
    eosId,
    padId: eosId,
    pre: 'qwen2',
    chatTemplate: model === 'gpt2' ? CHATML_TEMPLATE : undefined,
  });
}

/** Seeded pseudo-words dealt round-robin to the topics until the vocabulary has `end` tokens. */
function fillPseudoWords(b: Builder, end: number, nTopics: number, seed: number): void {
  const rng = new Rng(seed, 'pseudo-words');
  let dealt = 0;
  for (let tries = 0; tries < 64 * end && b.tokens.length < end; tries++) {
    const word = pseudoWord(rng);
    if (b.wordToken.has(word) || b.cost(word) > end - b.tokens.length) continue;
    b.addWord(word, dealt++ % nTopics);
  }
  // Practically never: pad with unused tokens rather than loop without end.
  for (let i = 0; b.tokens.length < end; i++)
    b.add(b.model === 'gpt2' ? `<|unused_${i}|>` : `<unused_${i}>`, TOKEN_TYPE.unused);
}

type Specials = Pick<SynthVocab, 'bosId' | 'eosId' | 'padId' | 'pre' | 'chatTemplate'>;

function finish(b: Builder, nTopics: number, specials: Specials): SynthVocab {
  const n = b.tokens.length;
  const topicOf = new Int32Array(n).fill(-1);
  const cycles: number[][] = Array.from({ length: nTopics }, () => []);
  for (const [id, topic] of b.wordTopic) {
    if (topic < 0) continue;
    topicOf[id] = topic;
    cycles[topic].push(id);
  }
  const pred = new Int32Array(n).fill(-1);
  for (const cycle of cycles) {
    assert(cycle.length >= 2, 'every topic has at least two words');
    for (let i = 0; i < cycle.length; i++) pred[cycle[i]] = cycle[(i + cycle.length - 1) % cycle.length];
  }
  return {
    model: b.model,
    tokens: b.tokens,
    types: b.types,
    scores: b.scores,
    merges: b.merges,
    ...specials,
    topicOf,
    cycles,
    pred,
    wordToken: b.wordToken,
  };
}

/** Qwen-style ChatML, for the gpt2-tokenizer architectures. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
