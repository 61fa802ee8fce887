/**
 * The engine's view of the expert tier: the contract of the native tier verbs
 * (src/native/binding.ts, NativeTierVerbs) as one interface (native-port.ts implements it).
 *
 *   warmstart(layer, ids)          fill free slots, wait for the uploads
 *   requestSwap(l, victim, new)    queued at the gate; issued at the boundary after layer l next computes, budget allowing
 *   setGate / cancelSwaps          the one gate's budget; a request's queued swaps dropped
 *   setPolicy / policyTick         the tier's eviction policy, which decides each eviction at need
 *   expertStates()                 none / incoming / resident / outgoing per expert (the tier owns them)
 *   poll()                         uploads settled and experts evicted since the last poll
 *   resize(layer, slots, victims)  between evals: the layer's slot budget grows (free slots) or shrinks (victims evicted)
 */
import type {
  NativeGateStats,
  NativeTierExpertStates,
  NativeTierRead,
  NativeTierStats,
  NativeTierUpload,
  TierPolicyMode,
} from '../../native/binding.js';
import type { ExpertKey } from '../../tiers/keys.js';

export type TierUpload = NativeTierUpload;
export type TierRead = NativeTierRead;
export type TierStats = NativeTierStats;
export type TierExpertStates = NativeTierExpertStates;

export interface TierPoll {
  uploads: TierUpload[];
  evicted: ExpertKey[];
  /** Streamed misses' reads (the disk tier): spans and calibration samples, nothing else. */
  reads: TierRead[];
}

export interface TierPort {
  readonly nLayer: number;
  readonly nExpert: number;
  /** Device slots per layer now (resize changes them). */
  readonly slotsPerLayer: readonly number[];
  readonly expertBytes: { container: number; hostCopy: number };
  /** Misses are read from the model file before they run (the disk tier): every step's poll has reads to report. */
  readonly readsMisses: boolean;
  warmstart(layer: number, experts: Int32Array): Promise<void>;
  /**
   * 0, or a negative code (victim not resident, newcomer already resident). issueNow:
   * started at once (1) when the layer is not being computed.
   */
  requestSwap(
    layer: number,
    victim: number,
    newcomer: number,
    taskId: number,
    options?: { issueNow?: boolean },
  ): number;
  poll(): TierPoll;
  /** Between evals: the tier's eviction policy (decayed LFU, decided at need; NativeTierVerbs.tierSetPolicy). */
  setPolicy(mode: TierPolicyMode, halfLifeTokens: number, prior?: Float64Array): void;
  /** Between evals: one decode token passed (the tier policy's clock). */
  policyTick(): void;
  /** Between evals: the tier policy's score of every expert [nLayer * nExpert] (higher: keep). */
  policyScores(): Float64Array;
  /** Between evals (a tier that reads its misses): how the next prefill reads them (prefill-path.ts). */
  setPrefillPath(path: 'on-demand' | 'whole-layer'): void;
  /** Between evals: the prefetch mode, predicted experts per layer, each layer's budget of reads ([nLayer]), and its queue's length (its bytes in flight are the gate's). */
  setPrefetch(mode: 'off' | 'observe' | 'enforce', predictK: number, budget?: Int32Array, queueMax?: number): void;
  /** The one gate's budget: bytes and transfers in flight at once, swaps queued at most (NativeTierVerbs.tierSetGate). */
  setGate(inflightBytesMax: number, inflightTransfersMax: number, queueDepthMax: number): void;
  /** Between evals: the swaps still queued at the gate are dropped; how many. */
  cancelSwaps(): number;
  /** The one gate now: budget, bytes and transfers in flight, swaps queued, ledger by class. */
  gate(): NativeGateStats;
  /** Between evals and warmstarts; throws with nothing changed (e.g. every candidate victim has a swap pending). */
  resize(layer: number, slots: number, victims: Int32Array): void;
  /**
   * Every expert's state (ExpertState) and slot, one snapshot, read into the port's own arrays
   * (valid until the next call): the tier owns residency; the placement reads it once per step.
   */
  expertStates(): TierExpertStates;
  stats(): TierStats;
  resetStats(): void;
  free(): void;
}

/** Resident expert ids per layer, from the tier's expert states (an expert with a slot). */
export function residentSets(port: Pick<TierPort, 'nLayer' | 'nExpert' | 'expertStates'>): number[][] {
  const r = port.expertStates().slots;
  return Array.from({ length: port.nLayer }, (_, l) => {
    const ids: number[] = [];
    for (let e = 0; e < port.nExpert; e++) if (r[l * port.nExpert + e] >= 0) ids.push(e);
    return ids;
  });
}

/** Fields per layer of the eval's layerStats (defined in src/native/constants.ts, checked against the addon). */
export { LAYER_STAT_FIELDS } from '../../native/constants.js';

/** What one step produced, for traces: the layer timing and the settled uploads. */
export interface StepReport {
  phase: 'prefill' | 'decode';
  /** Position of the step's first token in the request; -1 for the request's final poll. */
  position: number;
  layerStats: Float64Array | undefined;
  poll: TierPoll;
}
