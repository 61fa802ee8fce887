/**
 * Special tokens found by their text, as llama.cpp's llama_vocab::load finds them (its
 * "auto-detect special tokens by text" step): end-of-turn, FIM and end-of-generation
 * tokens are recognised by name, forced to CONTROL when the model file gave them another
 * type, and the end-of-generation set is
 *
 *   fim_pad + fim_rep + fim_sep + every token whose text is in EOG_TEXTS + eos + eot + eom
 *
 * Converted vocabularies often carry such tokens as NORMAL ("</s>" in Qwen3's is a plain BPE
 * token): llama.cpp then both stops on them and matches them as one special token in the text.
 */
import { TOKEN_TYPE } from './token-type.js';

/** Texts that name an end-of-turn token when tokenizer.ggml.eot_token_id is absent. */
const EOT_TEXTS = [
  '<|eot_id|>',
  '<|im_end|>',
  '<|end|>',
  '<end_of_turn>',
  '<|endoftext|>',
  '<|end_of_text|>',
  '<EOT>',
  '_<EOT>',
  '[EOT]',
  '<｜end▁of▁sentence｜>',
  '<end_of_utterance>',
];
const EOM_TEXTS = ['<|eom_id|>'];
const FIM_PRE_TEXTS = [
  '<|fim_prefix|>',
  '<fim-prefix>',
  '<fim_prefix>',
  '<｜fim▁begin｜>',
  '<PRE>',
  '▁<PRE>',
  '<|code_prefix|>',
  '<|prefix|>',
];
const FIM_SUF_TEXTS = [
  '<|fim_suffix|>',
  '<fim-suffix>',
  '<fim_suffix>',
  '<｜fim▁hole｜>',
  '<SUF>',
  '▁<SUF>',
  '<|code_suffix|>',
  '<|suffix|>',
];
const FIM_MID_TEXTS = [
  '<|fim_middle|>',
  '<fim-middle>',
  '<fim_middle>',
  '<｜fim▁end｜>',
  '<MID>',
  '▁<MID>',
  '<|code_middle|>',
  '<|middle|>',
];
const FIM_PAD_TEXTS = ['<|fim_pad|>', '<fim-pad>', '<fim_pad>', '<PAD>', '[PAD]'];
const FIM_REP_TEXTS = ['<|fim_repo|>', '<|repo_name|>', '<fim-repo>', '<REPO>', '<reponame>'];
const FIM_SEP_TEXTS = ['<|file_sep|>'];

/** Texts of tokens that end generation wherever they are in the vocabulary. */
const EOG_TEXTS = new Set([
  '<|eot_id|>',
  '<|im_end|>',
  '<|end|>',
  '<|return|>',
  '<|call|>',
  '<|flush|>',
  '<|calls|>',
  '<end_of_turn>',
  '<|endoftext|>',
  '</s>',
  '<|eom_id|>',
  '<EOT>',
  '_<EOT>',
  '[EOT]',
  '[EOS]',
  '<|end_of_text|>',
  '<end_of_utterance>',
  '<eos>',
  '<turn|>',
  '<|tool_response>',
  '<｜end▁of▁sentence｜>',
  '[e~[',
]);

/** gpt-oss (o200k_harmony) markers that llama.cpp always renders: forced to USER_DEFINED. */
const ALWAYS_RENDERED = new Set(['<|channel|>', '<|message|>', '<|start|>', '<|constrain|>']);

/** Ids the model file names (tokenizer.ggml.*_token_id); undefined when the key is absent. */
export interface NamedSpecialIds {
  eos: number | undefined;
  eot: number | undefined;
  eom: number | undefined;
  fimPad: number | undefined;
  fimRep: number | undefined;
  fimSep: number | undefined;
}

/**
 * The end-of-generation ids; `types` is updated in place where llama.cpp overrides a token's type
 * (to CONTROL for the recognised names, USER_DEFINED for ALWAYS_RENDERED, NORMAL for the gemma4 "</s>").
 */
export function detectSpecials(
  tokens: string[],
  types: number[],
  ids: ReadonlyMap<string, number>,
  named: NamedSpecialIds,
): Set<number> {
  const toControl = (id: number): void => {
    if (types[id] !== TOKEN_TYPE.control) types[id] = TOKEN_TYPE.control;
  };
  // Each role takes the first of its names present in the vocabulary (llama.cpp takes the first it
  // meets in a hash map; vocabularies hold at most one of each list) unless the file named the id.
  const byText = (given: number | undefined, texts: string[]): number | undefined => {
    if (given !== undefined) return given;
    for (const text of texts) {
      const id = ids.get(text);
      if (id !== undefined) {
        toControl(id);
        return id;
      }
    }
    return undefined;
  };
  const eot = byText(named.eot, EOT_TEXTS);
  const eom = byText(named.eom, EOM_TEXTS);
  byText(undefined, FIM_PRE_TEXTS);
  byText(undefined, FIM_SUF_TEXTS);
  byText(undefined, FIM_MID_TEXTS);
  const fimPad = byText(named.fimPad, FIM_PAD_TEXTS);
  const fimRep = byText(named.fimRep, FIM_REP_TEXTS);
  const fimSep = byText(named.fimSep, FIM_SEP_TEXTS);

  const eog = new Set<number>();
  for (const id of [fimPad, fimRep, fimSep]) if (id !== undefined) eog.add(id);
  for (const [text, id] of ids) {
    if (EOG_TEXTS.has(text)) {
      eog.add(id);
      toControl(id);
    }
  }
  for (const [text, id] of ids) if (ALWAYS_RENDERED.has(text)) types[id] = TOKEN_TYPE.userDefined;
  for (const id of [named.eos, eot, eom]) if (id !== undefined) eog.add(id);
  dropHarmonyEnd(tokens, types, eog);
  dropGemmaEndOfSentence(tokens, types, eog);
  return eog;
}

/** o200k_harmony / solar-open: with <|return|> and <|call|> (or <|calls|> and <|flush|>), <|end|> does not end generation. */
function dropHarmonyEnd(tokens: string[], types: number[], eog: Set<number>): void {
  const texts = new Map([...eog].map((id) => [tokens[id], id]));
  const end = texts.get('<|end|>');
  const hasCall = texts.has('<|call|>') || texts.has('<|calls|>');
  if (end !== undefined && hasCall && (texts.has('<|return|>') || texts.has('<|flush|>'))) {
    eog.delete(end);
    types[end] = TOKEN_TYPE.userDefined;
  }
}

/** gemma4 / paddleocr: with <|tool_response>, "</s>" is a plain token. */
function dropGemmaEndOfSentence(tokens: string[], types: number[], eog: Set<number>): void {
  const texts = new Map([...eog].map((id) => [tokens[id], id]));
  const s = texts.get('</s>');
  if (s !== undefined && texts.has('<|tool_response>')) {
    eog.delete(s);
    types[s] = TOKEN_TYPE.normal;
  }
}
