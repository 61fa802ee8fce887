/**
 * The vocabulary shared by both tokenizer kinds, read from `tokenizer.ggml.*`
 * and checked (lengths agree, ids in range, token types known), plus the
 * special-token partition of an input text.
 */
import { GgufFormatError, UnsupportedModelError } from '../../core/errors.js';
import { metaBool, metaNumberArray, metaStringArray, metaUint } from '../gguf/metadata.js';
import type { GgufFile } from '../types.js';
import { utf8Encoder } from './bytes.js';
import { detectSpecials } from './specials.js';
import { TOKEN_TYPE } from './token-type.js';

export { TOKEN_TYPE };

export interface Vocab {
  /** The model file it was read from (named when the vocabulary cannot encode a text). */
  file: string;
  tokens: string[];
  types: number[];
  scores: number[] | undefined;
  /** text -> id (the last id wins on duplicates, as in llama.cpp's token_to_id) */
  ids: Map<string, number>;
  bosId: number | undefined;
  eosId: number | undefined;
  unkId: number | undefined;
  addBos: boolean;
  /** Every control / user-defined / unknown token, matched literally in input text, longest (in UTF-8 bytes) first. */
  specials: Array<{ id: number; text: string }>;
  /** End-of-generation ids, as llama.cpp builds them (specials.ts). */
  eogIds: Set<number>;
}

export function readVocab(
  file: GgufFile,
  defaults: { bos?: number; eos?: number; unk?: number; addBos: boolean },
): Vocab {
  const tokens = metaStringArray(file, 'tokenizer.ggml.tokens');
  const n = tokens.length;
  if (n === 0) throw new GgufFormatError(file.path, 'key tokenizer.ggml.tokens', 'at least one token');
  // A copy: special-token detection overrides some types, and the file's metadata stays as read.
  const types = [
    ...(metaNumberArray(file, 'tokenizer.ggml.token_type', n) ?? new Array<number>(n).fill(TOKEN_TYPE.normal)),
  ];
  const badType = types.findIndex((t) => !Number.isInteger(t) || t < 0 || t > 6);
  if (badType >= 0) {
    throw new GgufFormatError(
      file.path,
      'key tokenizer.ggml.token_type',
      `token types 0 to 6, got ${types[badType]} at index ${badType}`,
    );
  }
  const scores = metaNumberArray(file, 'tokenizer.ggml.scores', n);
  const id = (key: string, fallback: number | undefined): number | undefined => {
    if (!file.metadata.has(`tokenizer.ggml.${key}`) && (fallback === undefined || fallback >= n)) return undefined;
    return metaUint(file, `tokenizer.ggml.${key}`, { max: n - 1, fallback });
  };
  const bosId = id('bos_token_id', defaults.bos);
  const eosId = id('eos_token_id', defaults.eos);
  const unkId = id('unknown_token_id', defaults.unk);
  const addBos = metaBool(file, 'tokenizer.ggml.add_bos_token', defaults.addBos);
  if (addBos && bosId === undefined) {
    throw new GgufFormatError(
      file.path,
      'key tokenizer.ggml.bos_token_id',
      'a BOS token id, since tokenizer.ggml.add_bos_token is true',
    );
  }
  const ids = new Map<string, number>();
  tokens.forEach((text, i) => ids.set(text, i));
  // Before the special list: detection may turn a NORMAL token (Qwen3's "</s>") into a CONTROL one.
  const eogIds = detectSpecials(tokens, types, ids, {
    eos: eosId,
    eot: id('eot_token_id', undefined),
    eom: id('eom_token_id', undefined),
    fimPad: id('fim_pad_token_id', undefined),
    fimRep: id('fim_rep_token_id', undefined),
    fimSep: id('fim_sep_token_id', undefined),
  });
  const specials = tokens
    .map((text, i) => ({ id: i, text }))
    .filter(({ id: i, text }) => text.length > 0 && isSpecialType(types[i]))
    .map((s) => ({ ...s, bytes: utf8Encoder.encode(s.text).length }))
    .sort((a, b) => b.bytes - a.bytes || a.id - b.id)
    .map(({ id: i, text }) => ({ id: i, text }));
  return { file: file.path, tokens, types, scores, ids, bosId, eosId, unkId, addBos, specials, eogIds };
}

function isSpecialType(type: number): boolean {
  return type === TOKEN_TYPE.control || type === TOKEN_TYPE.userDefined || type === TOKEN_TYPE.unknown;
}

/** A run of plain text, or one special token found literally in the input. */
export type Fragment = { text: string } | { id: number };

/**
 * Split `text` at literal occurrences of special tokens, longest first
 * (llama.cpp tokenizer_st_partition): "<|im_start|>user\nhi" -> [{id}, {text: 'user\nhi'}].
 */
export function partitionSpecials(text: string, vocab: Vocab, parseSpecial: boolean): Fragment[] {
  let fragments: Fragment[] = text.length > 0 ? [{ text }] : [];
  for (const special of vocab.specials) {
    // Control and unknown tokens count only when asked to parse specials; user-defined ones always.
    if (!parseSpecial && vocab.types[special.id] !== TOKEN_TYPE.userDefined) continue;
    const next: Fragment[] = [];
    for (const f of fragments) {
      if (!('text' in f) || !f.text.includes(special.text)) {
        next.push(f);
        continue;
      }
      const parts = f.text.split(special.text);
      parts.forEach((part, i) => {
        if (i > 0) next.push({ id: special.id });
        if (part.length > 0) next.push({ text: part });
      });
    }
    fragments = next;
  }
  return fragments;
}

/**
 * A text this vocabulary cannot encode: a byte with no token and no fallback (real gpt2 vocabularies
 * have all 256 byte tokens; SPM ones <0xNN> tokens or <unk>). llama.cpp drops such bytes silently;
 * here the model is named as at fault, with the byte and where it was.
 */
export function unencodable(vocab: Vocab, byte: number, text: string): UnsupportedModelError {
  return new UnsupportedModelError(
    vocab.file,
    'key tokenizer.ggml.tokens',
    `a token (or a byte fallback) for every byte of the text; it has none for byte 0x${byte.toString(16).padStart(2, '0')} in ${JSON.stringify(text.slice(0, 40))}`,
  );
}
