/**
 * The engine's view of an expert tier: the contract of the native tier verbs
 * (src/native/binding.ts, NativeTierVerbs) as one interface, so the engine drives
 * either the native tier or the TypeScript fallback (shadow-port.ts) the same way.
 *
 *   warmstart(layer, ids)          fill free slots, wait for the uploads
 *   requestSwap(l, victim, new)    queued; issued at the boundary after layer l next computes
 *   afterEval(routes, nTokens)     the step's routing [nTokens][nLayer][k] (the fallback counts hits from it)
 *   poll()                         uploads settled and experts evicted since the last poll
 */
import type { NativeTierStats, NativeTierUpload } from '../../native/binding.js';
import type { ExpertKey } from '../../tiers/keys.js';

export type TierUpload = NativeTierUpload;
export type TierStats = NativeTierStats;

export interface TierPoll {
  uploads: TierUpload[];
  evicted: ExpertKey[];
}

export interface TierPort {
  /** 'native': the addon's tier (hits computed on the backend); 'shadow': the TypeScript fallback. */
  readonly kind: 'native' | 'shadow';
  readonly nLayer: number;
  readonly nExpert: number;
  readonly slotsPerLayer: readonly number[];
  readonly expertBytes: { container: number; hostCopy: number };
  /** True when evaluation fills `layerStats` (per-layer timing, hits and misses). */
  readonly hasLayerStats: boolean;
  warmstart(layer: number, experts: Int32Array): Promise<void>;
  /**
   * 0, or a negative code (queue full, victim not resident, newcomer already resident). issueNow:
   * started at once (1) when the layer is not being computed (native; the fallback queues it).
   */
  requestSwap(layer: number, victim: number, newcomer: number, taskId: number, options?: { issueNow?: boolean }): number;
  afterEval(routes: Int32Array, nTokens: number): void;
  poll(): TierPoll;
  /** [nLayer * nExpert]: slot id or -1. */
  residency(): Int32Array;
  stats(): TierStats;
  resetStats(): void;
  free(): void;
}

/** Resident expert ids per layer, from a residency array. */
export function residentSets(port: Pick<TierPort, 'nLayer' | 'nExpert' | 'residency'>): number[][] {
  const r = port.residency();
  return Array.from({ length: port.nLayer }, (_, l) => {
    const ids: number[] = [];
    for (let e = 0; e < port.nExpert; e++) if (r[l * port.nExpert + e] >= 0) ids.push(e);
    return ids;
  });
}

/** Fields per layer of the eval's layerStats: [startNs, endNs, moeStartNs, moeEndNs, hits, misses]. */
export const LAYER_STAT_FIELDS = 6;

/** What one step produced, for traces: the layer timing (when native) and the settled uploads. */
export interface StepReport {
  phase: 'prefill' | 'decode';
  /** Position of the step's first token in the request; -1 for the request's final poll. */
  position: number;
  layerStats: Float64Array | undefined;
  poll: TierPoll;
}
