/** llama.cpp `llama_token_type`, the values of tokenizer.ggml.token_type. */
export const TOKEN_TYPE = {
  undefined: 0,
  normal: 1,
  unknown: 2,
  control: 3,
  userDefined: 4,
  unused: 5,
  byte: 6,
} as const;
