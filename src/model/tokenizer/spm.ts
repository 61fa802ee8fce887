/**
 * SentencePiece BPE (tokenizer.ggml.model = "llama"), after llama.cpp's
 * llm_tokenizer_spm_session: spaces become '▁' (U+2581), a leading '▁' is added,
 * then adjacent symbols are merged greedily by the highest score of the merged
 * piece (ties: leftmost); symbols that are no token fall back to <0xXX> byte tokens.
 *   "Hi there" -> "▁Hi▁there" -> ["▁Hi", "▁there"]
 */
import { utf8Encoder } from './bytes.js';
import { Heap } from './heap.js';
import { TOKEN_TYPE, unencodable, type Vocab } from './vocab.js';

const SPACE = '\u2581';

export class SpmModel {
  private readonly byteIds: Array<number | undefined> = [];
  private readonly byteValues = new Map<number, number>();

  constructor(
    private readonly vocab: Vocab,
    readonly addSpacePrefix: boolean,
  ) {
    for (let b = 0; b < 256; b++) {
      const hex = b.toString(16).toUpperCase().padStart(2, '0');
      this.byteIds[b] = vocab.ids.get(`<0x${hex}>`) ?? (b < 0x80 ? vocab.ids.get(String.fromCharCode(b)) : undefined);
    }
    vocab.tokens.forEach((text, id) => {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
      if (vocab.types[id] === TOKEN_TYPE.byte && m) this.byteValues.set(id, parseInt(m[1], 16));
    });
  }

  /** Token ids of one plain-text fragment; `prefixSpace` when it starts the input or follows a special. */
  encodeText(text: string, prefixSpace: boolean, out: number[]): void {
    const escaped = ((prefixSpace && this.addSpacePrefix ? ' ' : '') + text).replaceAll(' ', SPACE);
    const symbols = Array.from(escaped);
    const next = symbols.map((_, i) => (i + 1 < symbols.length ? i + 1 : -1));
    const prev = symbols.map((_, i) => i - 1);
    type Bigram = { left: number; right: number; score: number; size: number };
    const queue = new Heap<Bigram>((a, b) => a.score > b.score || (a.score === b.score && a.left < b.left));
    const tryAdd = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const text = symbols[left] + symbols[right];
      const id = this.vocab.ids.get(text);
      if (id === undefined) return;
      queue.push({ left, right, score: this.vocab.scores?.[id] ?? 0, size: text.length });
    };
    for (let i = 1; i < symbols.length; i++) tryAdd(i - 1, i);
    for (let b = queue.pop(); b !== undefined; b = queue.pop()) {
      const l = symbols[b.left];
      const r = symbols[b.right];
      if (l === '' || r === '' || l.length + r.length !== b.size) continue; // outdated
      symbols[b.left] = l + r;
      symbols[b.right] = '';
      next[b.left] = next[b.right];
      if (next[b.right] >= 0) prev[next[b.right]] = b.left;
      tryAdd(prev[b.left], b.left);
      tryAdd(b.left, next[b.left]);
    }
    // A merged symbol is always a token (pairs are queued only when their text is one);
    // a single character that is no token falls back to its UTF-8 bytes.
    for (let i = 0; i >= 0 && symbols.length > 0; i = next[i]) {
      const id = this.vocab.ids.get(symbols[i]);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      for (const byte of utf8Encoder.encode(symbols[i])) {
        const byteId = this.byteIds[byte] ?? this.vocab.unkId;
        if (byteId === undefined) throw unencodable(this.vocab, byte, symbols[i]);
        out.push(byteId);
      }
    }
  }

  /** Raw bytes of a token: byte tokens are their byte, '▁' is a space, specials are literal. */
  tokenBytes(id: number): Uint8Array {
    const byte = this.byteValues.get(id);
    if (byte !== undefined) return Uint8Array.of(byte);
    const text = this.vocab.tokens[id];
    const type = this.vocab.types[id];
    if (type === TOKEN_TYPE.normal || type === TOKEN_TYPE.undefined || type === TOKEN_TYPE.unused) {
      return utf8Encoder.encode(text.replaceAll(SPACE, ' '));
    }
    return utf8Encoder.encode(text);
  }
}
