export { createTokenizer } from './tokenizer.js';
export type { DecodeOptions, EncodeOptions, StreamDecoder, Tokenizer } from './tokenizer.js';
