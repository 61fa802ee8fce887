/** Per-request statistics, the same figures `moetier run --json` prints. */
export interface GenerationStats {
  /** Tokens the prefill evaluated (a conversation's turn: only those not in the cache yet). */
  promptTokens: number;
  /** A conversation's turn (src/engine/conversation.ts): the cached prefix it reused, positions not evaluated again. */
  cachedTokens?: number;
  /** A conversation's turn: of promptTokens, the history evaluated again from position 0 after an eviction (onEvicted 'replay'). */
  replayedTokens?: number;
  generatedTokens: number;
  /** From the call to generate() until the first generated token is ready (includes waiting in the queue). */
  ttftMs: number;
  prefillMs: number;
  decodeMs: number;
  prefillTokPerS: number;
  /** Decode steps (tokens after the first) per second of decode time. */
  decodeTokPerS: number;
  /** error: the request failed (an eval error, or the consumer threw into the iterator with it.throw()). */
  finishReason: 'stop' | 'length' | 'context' | 'aborted' | 'error';
  /** Decode time per decode step (the tokens after the first). */
  msPerToken: number;
  /** With an expert tier attached (openEngine `resident` / `slotsPerLayer`): */
  /** Resident hits / routed (token, expert) pairs, counted from the first decode token. */
  decodeHitRate?: number;
  prefillHitRate?: number;
  /** Time in the MoE FFNs per decode step (from the native per-layer timing; NaN without it). */
  moeMsPerToken?: number;
  /** Experts uploaded into device slots during the request, and their bytes. */
  uploads?: number;
  uploadBytes?: number;
  /** Of uploadBytes, those settled after the prefill (on the disk tier: the decode's reads into slots). */
  decodeUploadBytes?: number;
  /** Uploads that failed (their expert stayed or went back to a miss). */
  failedUploads?: number;
  /** The disk tier: the prefill's path (src/engine/tier/prefill-path.ts) and its layer calls by path. */
  prefillPath?: 'on-demand' | 'whole-layer';
  prefillPathCalls?: { onDemand: number[]; wholeLayer: number[] };
  /** The disk tier: routed misses the prefill read from the file, and the distinct experts among them (reads per distinct expert: 1.0 at best). */
  prefillExpertReads?: number;
  prefillDistinctExpertsRead?: number;
  /**
   * The replan guard's layers for this request's prefill (src/tiers/policies/replan-guard.ts): with replan
   * on, kept vs reverted to the residents before it; with replan off, those that took the held-back replan
   * late (appliedLate); watching: the request ended before the guard's last checkpoint. Absent with the guard off.
   */
  replanGuard?: { mode: 'replan' | 'shadow'; kept: number; reverted: number; appliedLate: number; watching: number };
  /** The tier's counters at the end of the request (leases, slots used vs budget). */
  tier?: { hits: number; misses: number; leases: number; slotsUsed: number[]; slotsBudget: number[] };
  /** Why the heat file could not be saved (a read-only or full cache: "<file>: EACCES"); the request itself succeeded. */
  heatFileError?: string;
}

export function rate(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : 0;
}
