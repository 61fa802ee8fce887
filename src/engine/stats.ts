/** Per-request statistics, the same figures `moetier run --json` prints. */
export interface GenerationStats {
  promptTokens: number;
  generatedTokens: number;
  /** From the call to generate() until the first generated token is ready (includes waiting in the queue). */
  ttftMs: number;
  prefillMs: number;
  decodeMs: number;
  prefillTokPerS: number;
  /** Decode steps (tokens after the first) per second of decode time. */
  decodeTokPerS: number;
  finishReason: 'stop' | 'length' | 'context' | 'aborted';
}

export function rate(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : 0;
}
