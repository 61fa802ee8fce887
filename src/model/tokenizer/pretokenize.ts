/**
 * Byte-level BPE pre-tokenizers (llama.cpp `llm_tokenizer_bpe` regexes per
 * `tokenizer.ggml.pre`). Each regex splits every fragment left by the previous
 * one into its matches and the unmatched gaps between them (both kept, as
 * llama.cpp's unicode_regex_split does).
 */
// White space is Unicode's White_Space property, as in llama.cpp's unicode tables (25 code points:
// U+0085 is one, U+FEFF is not), not JavaScript's \s (which has U+FEFF and lacks U+0085).
const WS = String.raw`\p{White_Space}`;
const NOT_WS = String.raw`\P{White_Space}`;
const CONTRACTIONS_CI = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const GPT2 = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^${WS}\p{L}\p{N}]+|${WS}+(?!${NOT_WS})`;
const LLAMA3_LIKE = (digits: string) =>
  CONTRACTIONS_CI +
  String.raw`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}${digits}| ?[^${WS}\p{L}\p{N}]+[\r\n]*|${WS}*[\r\n]+|${WS}+(?!${NOT_WS})|${WS}+`;

/**
 * gpt-4o (o200k, gpt-oss's o200k_harmony) as llama.cpp runs it, which is not tiktoken's o200k.
 * llama.cpp rewrites o200k's letter classes as lookaheads,
 *   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+  ->  ((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+
 * and, having no fast path for it, runs std::regex on "collapsed" text (unicode.cpp
 * unicode_regex_split: each code point >= 128 becomes one byte for its category, 0xD2 for any
 * letter). So a non-ASCII letter is both "not a-z" and "not A-Z" ("aÉ" is one piece, two in
 * tiktoken), and a combining mark is no letter ("e\u0301t" -> "e", "\u0301t"). The same lookaheads
 * over JavaScript's \p{L} give those pieces; white space stays Unicode White_Space, which is what
 * the collapsed \s means (ASCII \t-\r and space; every other White_Space code point becomes 0x0B).
 */
const NOT_LOWER_LETTER = String.raw`(?:(?=\p{L})[^a-z])`;
const NOT_UPPER_LETTER = String.raw`(?:(?=\p{L})[^A-Z])`;
const GPT4O =
  String.raw`[^\r\n\p{L}\p{N}]?${NOT_LOWER_LETTER}*${NOT_UPPER_LETTER}+${CONTRACTIONS_CI}?` +
  String.raw`|[^\r\n\p{L}\p{N}]?${NOT_LOWER_LETTER}+${NOT_UPPER_LETTER}*${CONTRACTIONS_CI}?` +
  String.raw`|\p{N}{1,3}| ?[^${WS}\p{L}\p{N}]+[\r\n/]*|${WS}*[\r\n]+|${WS}+(?!${NOT_WS})|${WS}+`;

/** Pre-tokenizer name -> its regexes, applied in order. */
const PRE_TOKENIZERS: Record<string, string[]> = {
  default: [String.raw`[\p{P}\$\+<=>\^~\|]+`, GPT2, String.raw`\p{N}+`, '[0-9][0-9][0-9]'],
  // llama.cpp's hand-written gpt2 splitter also takes lone whitespace as a piece.
  gpt2: [GPT2 + `|${WS}+`],
  'gpt-2': [GPT2 + `|${WS}+`],
  olmo: [GPT2 + `|${WS}+`],
  qwen2: [LLAMA3_LIKE('')],
  'llama-bpe': [LLAMA3_LIKE('{1,3}')],
  'gpt-4o': [GPT4O],
};

export const PRE_TOKENIZER_NAMES = Object.keys(PRE_TOKENIZERS);

export type PreTokenizer = (text: string) => string[];

export function preTokenizer(name: string): PreTokenizer | undefined {
  const sources = PRE_TOKENIZERS[name];
  if (sources === undefined) return undefined;
  const regexes = sources.map((s) => new RegExp(s, 'gu'));
  return (text) => {
    let fragments = [text];
    for (const re of regexes) fragments = fragments.flatMap((f) => splitKeepingGaps(f, re));
    return fragments;
  };
}

function splitKeepingGaps(text: string, re: RegExp): string[] {
  const out: string[] = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m[0].length === 0) continue;
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(m[0]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
