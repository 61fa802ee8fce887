/**
 * Seeded random strings for the tokenizer parity check (bench/tokenizer.mjs): each string is 1 to
 * 12 runs, each run drawn from one kind of text where pre-tokenizers disagree, glued without
 * separators so that the kinds meet in every order:
 *
 *   ASCII words in every case pattern, digits (1-12), ASCII punctuation with / and contractions,
 *   white space (ASCII, \r\n, U+0085, NBSP, ideographic, em space), Latin-1 / Latin Extended /
 *   Greek / Cyrillic letters of both cases, combining marks after a letter, CJK, kana, Hangul,
 *   Arabic and Devanagari (with their marks), non-ASCII digits, symbols, emoji (skin tones, ZWJ,
 *   VS16), format characters (U+200B, U+FEFF, U+00AD), special-token text, and any code point of
 *   the BMP or the SMP's first blocks (no surrogates, no noncharacters).
 */
const range = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => String.fromCodePoint(lo + i));
const chars = (s) => [...s];

const LOWER = chars('abcdefghijklmnopqrstuvwxyz');
const UPPER = chars('ABCDEFGHIJKLMNOPQRSTUVWXYZ');
const DIGITS = chars('0123456789');
const PUNCT = chars('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~');
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D"];
const SPACES = [
  ' ',
  ' ',
  ' ',
  '  ',
  '\t',
  '\n',
  '\n\n',
  '\r\n',
  '\r',
  ' \n',
  '\u00a0',
  '\u3000',
  '\u0085',
  '\u2003',
  '\u000b',
  '\u000c',
  '\u2028',
];
const LATIN = [
  ...range(0xc0, 0xff).filter((c) => c !== '\u00d7' && c !== '\u00f7'),
  ...range(0x100, 0x17f),
  ...range(0x180, 0x24f),
];
const GREEK_CYRILLIC = [...range(0x391, 0x3a9), ...range(0x3b1, 0x3c9), ...range(0x410, 0x44f), ...range(0x450, 0x45f)];
const MARKS = [...range(0x300, 0x36f), '\u0483', '\u05b0', '\u064b', '\u0941', '\u093f', '\u20d7', '\ufe0f'];
const CJK = [
  ...range(0x4e00, 0x4fff),
  ...range(0x3041, 0x3096),
  ...range(0x30a1, 0x30fa),
  ...range(0xac00, 0xac80),
  '\u3001',
  '\u3002',
  '\uff01',
  '\uff0c',
];
const ARABIC_INDIC = [...range(0x621, 0x64a), ...range(0x905, 0x939), '\u093e', '\u094d', '\u0640'];
const OTHER_DIGITS = [
  ...range(0x660, 0x669),
  ...range(0x966, 0x96f),
  ...range(0xff10, 0xff19),
  '\u00b2',
  '\u00bd',
  '\u2160',
  '\u2463',
];
const SYMBOLS = chars('©®™°±µ¶§€£¥→←⇒∑∫√∞≠≤≥♠♥★✓…—–‘’“”«»¿¡');
const EMOJI = ['😀', '🙂', '👍', '👍🏽', '❤️', '👨‍👩‍👧', '🏳️‍🌈', '🇫🇷', '1️⃣', '🤖', '☕️', '🧪', '✨'];
const FORMAT = ['\u200b', '\u200c', '\u200d', '\ufeff', '\u00ad', '\u2060', '\u200e'];
const SPECIALS = [
  '<|start|>',
  '<|end|>',
  '<|message|>',
  '<|channel|>',
  '<|return|>',
  '<|endoftext|>',
  '<|im_start|>',
  '</s>',
  '<s>',
  '<|call|>',
];

/** One run of each kind, from the generator `rnd` (a function returning [0, 1)). */
function kinds(rnd) {
  const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = (list) => list[Math.floor(rnd() * list.length)];
  const many = (list, lo, hi) => Array.from({ length: int(lo, hi) }, () => pick(list)).join('');
  const word = (letters) => many(letters, 1, 8);
  return [
    () => word(LOWER),
    () => word(UPPER),
    () => pick(UPPER) + word(LOWER),
    () => word(LOWER) + word(UPPER) + (rnd() < 0.5 ? word(LOWER) : ''),
    () => many([...LOWER, ...UPPER], 2, 10),
    () => many(DIGITS, 1, 12),
    () => many(PUNCT, 1, 4),
    () => pick(CONTRACTIONS),
    () => word(LOWER) + pick(CONTRACTIONS),
    () => pick(['/', '//', '?/', '!\n', '.\n/', '/\r\n', ':/']),
    () => many(SPACES, 1, 3),
    () => pick([' ', ' ', '\n']) + word(LOWER),
    () => many(LATIN, 1, 6),
    () => many([...LOWER, ...LATIN], 2, 8),
    () => many(GREEK_CYRILLIC, 1, 8),
    () => pick([...LOWER, ...UPPER, ...LATIN]) + many(MARKS, 1, 2) + (rnd() < 0.5 ? word(LOWER) : ''),
    () => many(CJK, 1, 8),
    () => many(ARABIC_INDIC, 1, 8),
    () => many(OTHER_DIGITS, 1, 5),
    () => many(SYMBOLS, 1, 3),
    () => many(EMOJI, 1, 3),
    () => pick(FORMAT),
    () => pick(SPECIALS),
    () => String.fromCodePoint(anyCodePoint(rnd)),
  ];
}

/** A code point of the BMP or U+10000..U+1FFFF: no surrogate, no noncharacter. */
function anyCodePoint(rnd) {
  for (;;) {
    const cp = Math.floor(rnd() * 0x20000);
    const surrogate = cp >= 0xd800 && cp <= 0xdfff;
    const nonCharacter = (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe;
    if (!surrogate && !nonCharacter && cp !== 0) return cp;
  }
}

/** `count` strings from the seeded generator `rnd` (src/core/prng.ts mulberry32: the same strings for the same seed). */
export function randomStrings(count, rnd) {
  const runs = kinds(rnd);
  const out = [];
  for (let i = 0; i < count; i++) {
    const n = 1 + Math.floor(rnd() * 12);
    let s = '';
    for (let r = 0; r < n; r++) s += runs[Math.floor(rnd() * runs.length)]();
    out.push(s);
  }
  return out;
}
