/**
 * llama.cpp's clean-spaces rule (llama_vocab detokenize with clean_spaces, Hugging Face's
 * clean_up_tokenization_spaces): after the tokens' bytes are joined, three passes over them,
 * each keeping the first byte and deciding for every later one by its neighbours in that pass's
 * input:
 *   1. a space before ? ! . , is dropped                      ("Hello , world !"  -> "Hello, world!")
 *   2. a lone apostrophe between two spaces loses both spaces ("rock ' n roll"    -> "rock'n roll")
 *   3. a space before the contractions 's 'm 're 've is dropped ("it 's"           -> "it's"); 't 'd 'll keep it
 * The bytes involved are ASCII, which never occur inside a UTF-8 sequence, so the passes work on
 * bytes as llama.cpp's do, and give the same bytes.
 *
 * Which vocabularies clean: a BPE (gpt2) vocabulary unless its pre-tokenizer is one llama.cpp
 * exempts (noCleanPreTokenizers); never a SentencePiece (llama) one.
 */

/** BPE pre-tokenizers for which llama.cpp turns clean_spaces off (llama-vocab.cpp, load). */
const noCleanPreTokenizers = new Set([
  'deepseek-llm',
  'deepseek-coder',
  'deepseek-v3',
  'command-r',
  'qwen2',
  'deepseek-r1-qwen',
  'poro-chat',
  'viking',
  'tekken',
  'smollm',
  'chameleon',
  'gpt-4o',
  'llama4',
  'superbpe',
  'trillion',
  'bailingmoe',
  'llada-moe',
  'seed-coder',
  'hunyuan',
  'hunyuan-dense',
  'kimi-k2',
  'grok-2',
]);

/** Whether detokenizing cleans spaces for this vocabulary (model gpt2 / llama, tokenizer.ggml.pre). */
export function cleansSpaces(model: 'gpt2' | 'llama', pre: string): boolean {
  return model === 'gpt2' && !noCleanPreTokenizers.has(pre);
}

const SPACE = 0x20;
const APOSTROPHE = 0x27;
const code = (c: string): number => c.charCodeAt(0);

/** The three passes over `text` (a new array; `text` is left as it was). */
export function cleanSpaces(text: Uint8Array): Uint8Array {
  return contractions(loneApostrophes(spaceBeforePunctuation(text)));
}

const punctuation = new Set(['?', '!', '.', ','].map(code));

function spaceBeforePunctuation(t: Uint8Array): Uint8Array {
  const out: number[] = t.length > 0 ? [t[0]] : [];
  for (let i = 1; i < t.length; i++) {
    if (t[i - 1] === SPACE && punctuation.has(t[i])) out.pop();
    out.push(t[i]);
  }
  return Uint8Array.from(out);
}

function loneApostrophes(input: Uint8Array): Uint8Array {
  const t = input.slice(); // the space after a match is blanked: the next byte's left neighbour is no space
  const out: number[] = t.length > 0 ? [t[0]] : [];
  for (let i = 1; i < t.length; i++) {
    const x = t[i];
    if (x === APOSTROPHE && i + 1 < t.length && t[i - 1] === SPACE && t[i + 1] === SPACE) {
      out.pop(); // the space before
      t[++i] = 0; // the space after, skipped
    }
    out.push(x);
  }
  return Uint8Array.from(out);
}

function contractions(t: Uint8Array): Uint8Array {
  const out: number[] = t.length > 0 ? [t[0]] : [];
  for (let i = 1; i < t.length; i++) {
    const x = t[i];
    if (t[i - 1] === SPACE && x === APOSTROPHE && i + 1 < t.length) {
      const x1 = t[i + 1];
      const x2 = i + 2 < t.length ? t[i + 2] : -1;
      const drop = x1 === code('s') || x1 === code('m') || (x2 === code('e') && (x1 === code('r') || x1 === code('v')));
      if (drop) out.pop();
    }
    out.push(x);
  }
  return Uint8Array.from(out);
}
