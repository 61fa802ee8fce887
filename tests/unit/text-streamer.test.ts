import { describe, expect, it } from 'vitest';
import { TextStreamer } from '../../src/engine/text-streamer.js';

/** A byte-level toy tokenizer: id = byte; decode is UTF-8 with replacement of broken sequences. */
const bytes = { decode: (ids: number[]) => Buffer.from(ids).toString('utf8') };

/** A SentencePiece-like toy: '▁' is a space, and a decode drops the first leading space. */
const pieces = ['▁hello', '▁world', '!'];
const spm = { decode: (ids: number[]) => ids.map((i) => pieces[i]).join('').replaceAll('▁', ' ').replace(/^ /, '') };

describe('TextStreamer', () => {
  it('holds back an incomplete multi-byte character', () => {
    const s = new TextStreamer(bytes);
    const out = [...Buffer.from('aé€b')].map((b) => s.push(b));
    expect(out.join('')).toBe('aé€b');
    expect(out).toContain('');
    expect(out.every((piece) => !piece.includes('\uFFFD'))).toBe(true);
  });

  it('keeps the leading space of a word after the prompt', () => {
    const s = new TextStreamer(spm, [0]);
    expect([s.push(1), s.push(2)]).toEqual([' world', '!']);
  });

  it('flush returns what is held back', () => {
    const s = new TextStreamer(bytes);
    expect(s.push(0xe2)).toBe('');
    expect(s.flush()).toBe('\uFFFD');
  });
});
