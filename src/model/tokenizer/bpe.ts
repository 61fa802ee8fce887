/**
 * Byte-level BPE (tokenizer.ggml.model = "gpt2"), after llama.cpp's
 * llm_tokenizer_bpe_session: pre-tokenize, map each piece's UTF-8 bytes into the
 * GPT-2 alphabet, then repeatedly merge the adjacent pair of lowest merge rank
 * (ties: leftmost) until no pair has a rank.
 *   "hello world" -> ["hello", " world"] -> ["hello", "Ġworld"] -> merges -> ids
 */
import { GgufFormatError } from '../../core/errors.js';
import { metaStringArray } from '../gguf/metadata.js';
import type { GgufFile } from '../types.js';
import { bytesToUnicode, unicodeToBytes, utf8Encoder } from './bytes.js';
import { Heap } from './heap.js';
import type { PreTokenizer } from './pretokenize.js';
import { TOKEN_TYPE, unencodable, type Vocab } from './vocab.js';

const PAIR_SEP = '\u0000';

export class BpeModel {
  private readonly ranks = new Map<string, number>();

  constructor(
    file: GgufFile,
    private readonly vocab: Vocab,
    private readonly preTokenize: PreTokenizer,
    /** A pre-token that is a vocabulary entry is emitted whole, without merging (llama.cpp's ignore_merges). */
    private readonly ignoreMerges = false,
  ) {
    const merges = metaStringArray(file, 'tokenizer.ggml.merges');
    merges.forEach((merge, rank) => {
      // llama.cpp splits at the first space after the first character.
      const space = merge.indexOf(' ', 1);
      if (space < 0)
        throw new GgufFormatError(
          file.path,
          'key tokenizer.ggml.merges',
          `"left right" pairs, got ${JSON.stringify(merge)} at index ${rank}`,
        );
      const key = merge.slice(0, space) + PAIR_SEP + merge.slice(space + 1);
      if (!this.ranks.has(key)) this.ranks.set(key, rank);
    });
  }

  /** Token ids of plain text (no specials inside). */
  encodeText(text: string, out: number[]): void {
    for (const piece of this.preTokenize(text)) {
      const word = bytesToUnicode(piece);
      const whole = this.ignoreMerges ? this.vocab.ids.get(word) : undefined;
      if (whole !== undefined) out.push(whole);
      else this.encodeWord(word, out);
    }
  }

  private encodeWord(word: string, out: number[]): void {
    const symbols = Array.from(word);
    // Linked list over symbols; a merged-away symbol becomes ''.
    const next = symbols.map((_, i) => (i + 1 < symbols.length ? i + 1 : -1));
    const prev = symbols.map((_, i) => i - 1);
    type Bigram = { left: number; right: number; text: string; rank: number };
    const queue = new Heap<Bigram>((a, b) => a.rank < b.rank || (a.rank === b.rank && a.left < b.left));
    const addBigram = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const rank = this.ranks.get(symbols[left] + PAIR_SEP + symbols[right]);
      if (rank !== undefined) queue.push({ left, right, text: symbols[left] + symbols[right], rank });
    };
    for (let i = 1; i < symbols.length; i++) addBigram(i - 1, i);
    for (let b = queue.pop(); b !== undefined; b = queue.pop()) {
      const l = symbols[b.left];
      const r = symbols[b.right];
      if (l === '' || r === '' || l + r !== b.text) continue; // outdated
      symbols[b.left] = b.text;
      symbols[b.right] = '';
      next[b.left] = next[b.right];
      if (next[b.right] >= 0) prev[next[b.right]] = b.left;
      addBigram(prev[b.left], b.left);
      addBigram(b.left, next[b.left]);
    }
    for (const symbol of symbols) {
      if (symbol === '') continue;
      const id = this.vocab.ids.get(symbol);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      // No token for the merged symbol: fall back to one token per byte; a byte without a token is
      // the vocabulary's fault (llama.cpp drops it silently, which changes the prompt).
      for (const ch of symbol) {
        const byteId = this.vocab.ids.get(ch);
        if (byteId === undefined) throw unencodable(this.vocab, unicodeToBytes(ch)[0], symbol);
        out.push(byteId);
      }
    }
  }

  /** Raw bytes of a token: byte-level tokens decode through the GPT-2 alphabet, specials are literal. */
  tokenBytes(id: number): Uint8Array {
    const text = this.vocab.tokens[id];
    const type = this.vocab.types[id];
    if (
      type === TOKEN_TYPE.normal ||
      type === TOKEN_TYPE.undefined ||
      type === TOKEN_TYPE.unused ||
      type === TOKEN_TYPE.byte
    ) {
      return unicodeToBytes(text);
    }
    return utf8Encoder.encode(text);
  }
}
