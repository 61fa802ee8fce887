/**
 * Every limit in one place, with its reason. Checked where input enters.
 */
export const limits = {
  /** Largest GGUF metadata string we accept (bytes); real files stay far below. */
  ggufStringBytesMax: 16 * 1024 * 1024,
  /** Largest metadata array (elements); a 256k-token vocabulary fits. */
  ggufArrayLengthMax: 4 * 1024 * 1024,
  /** Largest tensor count in one file. */
  ggufTensorCountMax: 1 << 20,
  /** Largest metadata key/value count. */
  ggufKvCountMax: 1 << 16,
  /** Largest tensor rank GGUF allows. */
  ggufDimsMax: 4,
  /**
   * Default context length of an engine (tokens of KV cache per request). A conversation's whole
   * history shares it: a turn whose cached + new tokens + maxTokens pass it is refused (ContextFullError).
   */
  contextTokensDefault: 2048,
  /** Hard cap on the context length we allocate. */
  contextTokensMax: 32768,
  /** Default and hard cap on generated tokens per request. */
  maxTokensDefault: 128,
  maxTokensMax: 32768,
  /** Requests that may wait behind the running one on an engine (default, and the most an option may ask for). */
  requestQueueDepthDefault: 64,
  requestQueueDepthMax: 65_536,
  /** A request whose consumer asks for no token for this long is cancelled (a dropped iterator held the engine for ever). */
  requestIdleMs: 60_000,
  /** Native compute threads. */
  threadsMax: 64,
  /**
   * Sequences an engine runs together (openEngine `parallel`, continuous batching): each has its own
   * contextTokens of KV cache. At most this many, and at most sequencesTokensMax cache rows in all
   * (parallel x contextTokens; the native context's MT_CONTEXT_TOKENS_MAX).
   */
  parallelMax: 64,
  sequencesTokensMax: 1 << 20,
  /**
   * Rows one batched step evaluates at most (openEngine `batchTokensMax`): decode rows first, then
   * chunks of new prompts, so a long prompt cannot stall the others' decode for more than one such
   * step. Default one eval chunk (256); at most one layer-by-layer group of chunks (mt_forward kGroupRowsMax).
   */
  batchTokensDefault: 256,
  batchTokensMax: 2048,
  /** Items that a chat template's range() calls may make in one render (real templates make none or a few). */
  chatTemplateRangeItemsMax: 100_000,
  /** Longest text a chat template may render (a 32k-token context is ~150k characters). */
  chatTemplateOutputCharsMax: 4 * 1024 * 1024,
  /** Largest route-trace file replayed (the shared 1,000-token OLMoE trace is ~1 MB). */
  traceFileBytesMax: 512 * 1024 * 1024,
  /** Largest calibration snapshot `moetier replay --timing` reads (one is a few KB). */
  timingFileBytesMax: 16 * 1024 * 1024,
  /** Largest heat file read (a 256-expert, 94-layer model's counts take ~250 KB). */
  heatFileBytesMax: 64 * 1024 * 1024,
  /** How long a heat-file merge waits for another process's lock before it skips (the heat only warms a start). */
  heatLockWaitMs: 5000,
  /** A heat-file lock older than this was left by a process that died mid-merge (a merge takes ~1 ms). */
  heatLockStaleMs: 10_000,
} as const;
