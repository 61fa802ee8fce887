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
/**
 * The letters, numbers and punctuation that Unicode 16.0 and 17.0 assigned: llama.cpp's category
 * tables (unicode-data.cpp) are Unicode 15.1's, so to it these are unassigned code points, while the
 * JavaScript engine's \p{...} (Node 20.20: Unicode 17) knows them. Taken out of \p{L}, \p{N} and
 * \p{P} below ("x\u{13aff}'re": llama.cpp cuts "x", "\u{13aff}'", "re"). Found by comparing every
 * code point's category in the two tables; none differs otherwise. An engine with older tables
 * already has them unassigned.
 */
const NEWER_THAN_LLAMA_CPP = [
  String.raw`\u{88f}\u{c5c}\u{cdc}\u{1b4e}-\u{1b4f}\u{1b7f}\u{1c89}-\u{1c8a}\u{a7cb}-\u{a7cf}\u{a7d2}\u{a7d4}`,
  String.raw`\u{a7da}-\u{a7dc}\u{a7f1}\u{105c0}-\u{105f3}\u{10940}-\u{10959}\u{10d40}-\u{10d65}\u{10d6e}-\u{10d85}`,
  String.raw`\u{10ec2}-\u{10ec7}\u{10ed0}\u{11380}-\u{11389}\u{1138b}\u{1138e}\u{11390}-\u{113b5}\u{113b7}\u{113d1}`,
  String.raw`\u{113d3}-\u{113d5}\u{113d7}-\u{113d8}\u{116d0}-\u{116e3}\u{11bc0}-\u{11be1}\u{11bf0}-\u{11bf9}`,
  String.raw`\u{11db0}-\u{11ddb}\u{11de0}-\u{11de9}\u{13460}-\u{143fa}\u{16100}-\u{1611d}\u{16130}-\u{16139}`,
  String.raw`\u{16d40}-\u{16d79}\u{16ea0}-\u{16eb8}\u{16ebb}-\u{16ed3}\u{16ff2}-\u{16ff6}\u{187f8}-\u{187ff}\u{18cff}`,
  String.raw`\u{18d09}-\u{18d1e}\u{18d80}-\u{18df2}\u{1ccf0}-\u{1ccf9}\u{1e5d0}-\u{1e5ed}\u{1e5f0}-\u{1e5fa}\u{1e5ff}`,
  String.raw`\u{1e6c0}-\u{1e6de}\u{1e6e0}-\u{1e6e2}\u{1e6e4}-\u{1e6e5}\u{1e6e7}-\u{1e6ed}\u{1e6f0}-\u{1e6f4}`,
  String.raw`\u{1e6fe}-\u{1e6ff}\u{2b73a}-\u{2b73f}\u{2cea2}-\u{2cead}\u{323b0}-\u{33479}`,
].join('');
// Classes in the regexes' v (unicodeSets) mode, which subtracts one set from another.
const L = String.raw`[\p{L}--[${NEWER_THAN_LLAMA_CPP}]]`;
const N = String.raw`[\p{N}--[${NEWER_THAN_LLAMA_CPP}]]`;
const P = String.raw`[\p{P}--[${NEWER_THAN_LLAMA_CPP}]]`;
const CONTRACTIONS_CI = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const GPT2 = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?${L}+| ?${N}+| ?[^${WS}${L}${N}]+|${WS}+(?!${NOT_WS})`;
const LLAMA3_LIKE = (digits: string) =>
  CONTRACTIONS_CI +
  String.raw`|[^\r\n${L}${N}]?${L}+|${N}${digits}| ?[^${WS}${L}${N}]+[\r\n]*|${WS}*[\r\n]+|${WS}+(?!${NOT_WS})|${WS}+`;

/**
 * gpt-4o (o200k, gpt-oss's o200k_harmony) as llama.cpp runs it, which is not tiktoken's o200k.
 * llama.cpp rewrites o200k's letter classes as lookaheads,
 *   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+  ->  ((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+
 * and, having no fast path for it, runs std::regex on "collapsed" text (unicode.cpp
 * unicode_regex_split: each code point >= 128 becomes one byte for its category, 0xD2 for any
 * letter). So a non-ASCII letter is both "not a-z" and "not A-Z" ("aÉ" is one piece, two in
 * tiktoken), and a combining mark is no letter ("e\u0301t" -> "e", "\u0301t"). The same lookaheads
 * over L (\p{L} as llama.cpp's tables have it) give those pieces; white space stays Unicode
 * White_Space, which is what the collapsed \s means (ASCII \t-\r and space; every other White_Space
 * code point becomes 0x0B).
 */
const NOT_LOWER_LETTER = String.raw`(?:(?=${L})[^a-z])`;
const NOT_UPPER_LETTER = String.raw`(?:(?=${L})[^A-Z])`;
const GPT4O =
  String.raw`[^\r\n${L}${N}]?${NOT_LOWER_LETTER}*${NOT_UPPER_LETTER}+${CONTRACTIONS_CI}?` +
  String.raw`|[^\r\n${L}${N}]?${NOT_LOWER_LETTER}+${NOT_UPPER_LETTER}*${CONTRACTIONS_CI}?` +
  String.raw`|${N}{1,3}| ?[^${WS}${L}${N}]+[\r\n\/]*|${WS}*[\r\n]+|${WS}+(?!${NOT_WS})|${WS}+`;

/** Pre-tokenizer name -> its regexes, applied in order. */
const PRE_TOKENIZERS: Record<string, string[]> = {
  default: [String.raw`[${P}\$\+<=>\^~\|]+`, GPT2, String.raw`${N}+`, '[0-9][0-9][0-9]'],
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
  const regexes = sources.map((s) => new RegExp(s, 'gv'));
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
