/**
 * Turns generated token ids into text pieces as they arrive, without splitting a multi-byte
 * character across pieces: a piece that would end in U+FFFD (an incomplete UTF-8 sequence)
 * is held back until the next token completes it.
 *
 * Each piece is decoded after one token of committed context, so a tokenizer that strips the
 * leading space of the first token of a decode (SentencePiece) still yields the space mid-text.
 */
export interface Detokenizer {
  decode(ids: number[]): string;
}

const REPLACEMENT = '\uFFFD';

export class TextStreamer {
  private context: number[];
  private pending: number[] = [];

  constructor(
    private readonly tokenizer: Detokenizer,
    contextIds: number[] = [],
  ) {
    this.context = contextIds.slice(-1);
  }

  /** Text completed by this token ('' while a character is still incomplete). */
  push(id: number): string {
    this.pending.push(id);
    const delta = this.delta();
    if (delta.endsWith(REPLACEMENT) && this.pending.length < 4) return '';
    this.commit();
    return delta;
  }

  /** Whatever is still held back (at the end of generation). */
  flush(): string {
    if (this.pending.length === 0) return '';
    const delta = this.delta();
    this.commit();
    return delta;
  }

  private delta(): string {
    const base = this.tokenizer.decode(this.context);
    const full = this.tokenizer.decode([...this.context, ...this.pending]);
    return full.startsWith(base) ? full.slice(base.length) : this.tokenizer.decode(this.pending);
  }

  private commit(): void {
    this.context = this.pending.slice(-1);
    this.pending = [];
  }
}
