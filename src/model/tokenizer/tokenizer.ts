/**
 * createTokenizer(file): the tokenizer a GGUF file describes, "gpt2" (byte-level
 * BPE) or "llama" (SentencePiece), behaving like llama.cpp's llama_tokenize /
 * llama_detokenize for those kinds.
 */
import { InvalidOptionError, UnsupportedModelError } from '../../core/errors.js';
import { metaBool, metaString } from '../gguf/metadata.js';
import type { GgufFile } from '../types.js';
import { BpeModel } from './bpe.js';
import { concatBytes } from './bytes.js';
import { PRE_TOKENIZER_NAMES, preTokenizer } from './pretokenize.js';
import { SpmModel } from './spm.js';
import { TOKEN_TYPE, partitionSpecials, readVocab, type Vocab } from './vocab.js';
import { cleanSpaces, cleansSpaces } from './clean-spaces.js';

export interface EncodeOptions {
  /** Prepend the BOS token; default: tokenizer.ggml.add_bos_token (gpt2: false, llama: true). */
  addBos?: boolean;
  /** Match control tokens written literally in the text ("<|im_start|>"); default true. */
  parseSpecial?: boolean;
}

export interface DecodeOptions {
  /** Render control tokens' text (as llama.cpp's unparse_special); default true. */
  special?: boolean;
}

/** Streaming detokenizer: holds back an incomplete UTF-8 sequence until its last byte arrives. */
export interface StreamDecoder {
  push(id: number): string;
  flush(): string;
}

export interface Tokenizer {
  readonly kind: 'gpt2' | 'llama';
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  /** Tokens that end generation (eos, eot, <|im_end|>...). */
  readonly eogIds: ReadonlySet<number>;
  encode(text: string, options?: EncodeOptions): number[];
  decode(ids: number[], options?: DecodeOptions): string;
  /** The text of one token on its own (a lone byte token of a multi-byte character gives U+FFFD: stream with createStreamDecoder). */
  tokenPiece(id: number): string;
  tokenBytes(id: number): Uint8Array;
  createStreamDecoder(options?: DecodeOptions): StreamDecoder;
}

const MODELS = ['gpt2', 'llama'];
/** Pre-tokenizers for which llama.cpp sets ignore_merges. */
const IGNORE_MERGES = new Set(['llama-bpe']);

export function createTokenizer(file: GgufFile): Tokenizer {
  const model = metaString(file, 'tokenizer.ggml.model');
  if (model === 'gpt2') {
    const pre = metaString(file, 'tokenizer.ggml.pre', 'default');
    const preTokenize = preTokenizer(pre);
    if (preTokenize === undefined) {
      throw new UnsupportedModelError(
        file.path,
        'key tokenizer.ggml.pre',
        `one of ${PRE_TOKENIZER_NAMES.join(', ')}, got ${JSON.stringify(pre)}`,
      );
    }
    const vocab = readVocab(file, { addBos: false });
    // llama.cpp's ignore_merges (Llama 3): a pre-token that is itself a token is that token, unmerged.
    const bpe = new BpeModel(file, vocab, preTokenize, IGNORE_MERGES.has(pre));
    return new GgufTokenizer(
      'gpt2',
      vocab,
      (text, _first, out) => bpe.encodeText(text, out),
      (id) => bpe.tokenBytes(id),
      false,
      cleansSpaces('gpt2', pre),
    );
  }
  if (model === 'llama') {
    const vocab = readVocab(file, { unk: 0, bos: 1, eos: 2, addBos: true });
    const spm = new SpmModel(vocab, metaBool(file, 'tokenizer.ggml.add_space_prefix', true));
    return new GgufTokenizer(
      'llama',
      vocab,
      (text, prefix, out) => spm.encodeText(text, prefix, out),
      (id) => spm.tokenBytes(id),
      spm.addSpacePrefix,
      cleansSpaces('llama', 'default'),
    );
  }
  throw new UnsupportedModelError(
    file.path,
    'key tokenizer.ggml.model',
    `one of ${MODELS.join(', ')}, got ${JSON.stringify(model)}`,
  );
}

/** A leading U+FEFF is text, not a byte-order mark to drop (tokens such as "\ufeffusing" keep it). */
const utf8Text = (): TextDecoder => new TextDecoder('utf-8', { ignoreBOM: true });

type EncodeText = (text: string, afterSpecial: boolean, out: number[]) => void;

class GgufTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly eogIds: ReadonlySet<number>;

  constructor(
    readonly kind: 'gpt2' | 'llama',
    private readonly vocab: Vocab,
    private readonly encodeText: EncodeText,
    private readonly bytesOf: (id: number) => Uint8Array,
    /** SPM with add_space_prefix: detokenizing drops the first token's leading space. */
    private readonly stripFirstSpace: boolean,
    /** decode applies llama.cpp's clean-spaces rule (clean-spaces.ts); streamed pieces stay verbatim, as llama.cpp's. */
    private readonly cleanSpaces: boolean,
  ) {
    this.vocabSize = vocab.tokens.length;
    this.bosId = vocab.bosId;
    this.eosId = vocab.eosId;
    this.eogIds = vocab.eogIds;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const out: number[] = [];
    if (options.addBos ?? this.vocab.addBos) {
      if (this.bosId === undefined) throw new InvalidOptionError('addBos', 'a model with a BOS token', true);
      out.push(this.bosId);
    }
    // SPM prefixes a space to text at the start and after a special token (llama.cpp's is_prev_special).
    let afterSpecial = true;
    for (const fragment of partitionSpecials(text, this.vocab, options.parseSpecial ?? true)) {
      if ('id' in fragment) {
        out.push(fragment.id);
        afterSpecial = true;
      } else {
        this.encodeText(fragment.text, afterSpecial, out);
        afterSpecial = false;
      }
    }
    return out;
  }

  tokenBytes(id: number): Uint8Array {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new InvalidOptionError('token id', `an integer from 0 to ${this.vocabSize - 1}`, id);
    }
    return this.bytesOf(id);
  }

  tokenPiece(id: number): string {
    return utf8Text().decode(this.tokenBytes(id));
  }

  decode(ids: number[], options: DecodeOptions = {}): string {
    const parts = ids.map((id) => this.renderedBytes(id, options.special ?? true));
    if (this.stripFirstSpace && parts.length > 0 && parts[0][0] === 0x20) parts[0] = parts[0].subarray(1);
    const joined = concatBytes(parts);
    return utf8Text().decode(this.cleanSpaces ? cleanSpaces(joined) : joined);
  }

  createStreamDecoder(options: DecodeOptions = {}): StreamDecoder {
    const decoder = utf8Text();
    const special = options.special ?? true;
    return {
      push: (id) => decoder.decode(this.renderedBytes(id, special), { stream: true }),
      flush: () => decoder.decode(),
    };
  }

  /** A token's bytes as detokenizing shows them: control / unknown tokens only when `special`. */
  private renderedBytes(id: number, special: boolean): Uint8Array {
    const bytes = this.tokenBytes(id);
    const type = this.vocab.types[id];
    if (!special && (type === TOKEN_TYPE.control || type === TOKEN_TYPE.unknown)) return new Uint8Array(0);
    return bytes;
  }
}
