/**
 * Byte helpers: the GPT-2 byte <-> unicode alphabet (byte-level BPE stores every
 * byte as a printable code point: 0x20 ' ' -> 'Ġ' U+0120, 0x0A -> 'Ċ' U+010A) and UTF-8.
 */
const byteToChar: string[] = [];
const charToByte = new Map<string, number>();
{
  // Printable latin-1 bytes map to themselves; the other 68 bytes to U+0100 + n, in byte order.
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const ch = String.fromCodePoint(printable(b) ? b : 0x100 + n++);
    byteToChar[b] = ch;
    charToByte.set(ch, b);
  }
}

export const utf8Encoder = new TextEncoder();

/** 'a b' -> 'aĠb': the byte-level form of a text, one code point per UTF-8 byte. */
export function bytesToUnicode(text: string): string {
  let out = '';
  for (const b of utf8Encoder.encode(text)) out += byteToChar[b];
  return out;
}

/** Inverse of bytesToUnicode; a code point outside the alphabet keeps its own UTF-8 bytes. */
export function unicodeToBytes(text: string): Uint8Array {
  const out: number[] = [];
  for (const ch of text) {
    const b = charToByte.get(ch);
    if (b !== undefined) out.push(b);
    else out.push(...utf8Encoder.encode(ch));
  }
  return Uint8Array.from(out);
}

export function concatBytes(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
