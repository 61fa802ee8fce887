/**
 * Overlap-aware prefetch admission (docs/SPEC.md section 4), pure: which of the experts
 * predicted for the next layer may start reading now, given the bytes the transfer window admits
 * (transferWindowBytes in src/actors/calibration/logic.ts: undefined while a compute or a
 * transfer sample is missing). The same code serves the engine and the replay.
 *
 *   order      stable by score, highest first (equal scores keep the prediction's order)
 *   free       a resident, or one already in flight, costs nothing: it is named, never re-issued
 *   unknown    a candidate whose bytes are unknown (or not a positive number) is never admitted
 *   cold       no window yet: at most one expert (the first of known cost), whatever its size
 *   packing    whole experts, greedily: each that still fits the window is admitted, one that
 *              does not is skipped and smaller ones after it may still fit
 * The router, the weights and the experts that run stay authoritative: an admission only starts
 * a read early.
 */
export interface PrefetchCandidate {
  expert: number;
  /** The prediction's score (e.g. the next layer's router logit on the current state). */
  score: number;
  /** The expert's stored bytes, or undefined when its cost is unknown. */
  bytes: number | undefined;
  resident: boolean;
  inflight: boolean;
}

export interface PrefetchAdmission {
  /** Experts to read now, in admission order. */
  admitted: number[];
  /** Their bytes, at most the window (or one expert's at a cold start). */
  bytes: number;
  /** Candidates that cost nothing: resident, or in flight (counted once, where they were issued). */
  free: number[];
  /** Candidates refused: unknown cost; no room left in the window. */
  unknownCost: number;
  noRoom: number;
}

/**
 * How many experts of `expertBytes` each the window admits: the count packPrefetch reaches when
 * every candidate has that size (the engine's models: one size per expert), one at a cold start.
 */
export function prefetchCount(windowBytes: number | undefined, expertBytes: number): number {
  if (windowBytes === undefined) return 1;
  return expertBytes > 0 ? Math.floor(Math.max(0, windowBytes) / expertBytes) : 0;
}

export function packPrefetch(
  candidates: readonly PrefetchCandidate[],
  windowBytes: number | undefined,
): PrefetchAdmission {
  const order = candidates.map((c, i) => ({ c, i })).sort((a, b) => b.c.score - a.c.score || a.i - b.i);
  const out: PrefetchAdmission = { admitted: [], bytes: 0, free: [], unknownCost: 0, noRoom: 0 };
  const cold = windowBytes === undefined;
  const room = cold ? Infinity : Math.max(0, windowBytes);
  for (const { c } of order) {
    if (c.resident || c.inflight) {
      out.free.push(c.expert);
      continue;
    }
    if (c.bytes === undefined || !(c.bytes > 0) || !Number.isFinite(c.bytes)) {
      out.unknownCost++;
      continue;
    }
    if ((cold && out.admitted.length >= 1) || out.bytes + c.bytes > room) {
      out.noRoom++;
      continue;
    }
    out.admitted.push(c.expert);
    out.bytes += c.bytes;
  }
  return out;
}
