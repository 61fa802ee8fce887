/** One result row per (trace, policy, budget): counts, rates and the cost estimate with its assumptions. */
import { assert } from '../../core/assert.js';
import { phaseMs, unitCosts, type CostParams, type Offload, type UnitCosts } from '../cost.js';
import { expertBytes, hostExpertBytes, type ModelGeometry } from '../geometry.js';
import type { ReplayCounts } from '../replay.js';
import type { Scenario } from '../scenario.js';
import { engineDefaultPolicy } from '../policies/index.js';
import type { Policy } from '../types.js';

export interface ReplayRow {
  trace: string;
  model: string;
  geometry: string;
  offload: Offload;
  scope: 'layer' | 'global';
  start: string;
  skippedTokens: number;
  policy: string;
  policyKind: string;
  offline: boolean;
  /** The engine's default policy for this offload mode (policies/index.ts engineDefaultPolicy). */
  default: boolean;
  /** Slots per layer (a global budget is reported per layer too: total / layers). */
  budget: number;
  budgetSlotsTotal: number;
  tokens: number;
  hitRate: number;
  hits: number;
  misses: number;
  uploads: number;
  aheadUploads: number;
  swaps: number;
  fills: number;
  setupUploads: number;
  uploadsPerToken: number;
  bytesPerToken: number;
  expertBytes: number;
  hostExpertBytes: number;
  msPerTokenEstimate: number;
  /** MoE part of TTFT from the prefill counts; null when the scenario has no prefill. */
  ttftMsEstimate: number | null;
  /**
   * Host-less (the disk tier: no host copy): experts read from the model file per decode token,
   * each miss once for its call plus each upload ahead of use; setup and prefill reads are not
   * per token. Null when hosted (uploads come from host copies there).
   */
  readsPerToken: number | null;
  /** readsPerToken x expertBytes; null when hosted. */
  readBytesPerToken: number | null;
  /** Host-less: Belady MIN's misses per decode token on the same scenario, the fewest reads of a demand policy; null when hosted. */
  beladyMissesPerToken: number | null;
  /** readsPerToken / beladyMissesPerToken (1 for Belady itself); null when hosted or when Belady has no miss. */
  readsOverBelady: number | null;
  /** hitRate / Belady's hit rate on the same scenario (1 for Belady itself); null when Belady has no hit. */
  hitRateOverBelady: number | null;
  /** Guarded policies: layers the guard kept and switched (reverted, or took the held-back replan), watched at the end. */
  guardKept: number | null;
  guardSwitched: number | null;
  /** Decode tokens replayed as a warm-up before the scored ones (--score-from). */
  scoreFrom: number;
  costModel: CostParams & UnitCosts;
}

/** `belady`: Belady's replay of the same scenario, required host-less (the bound of the read figures). */
export function toRow(
  policy: Policy,
  sc: Scenario,
  c: ReplayCounts,
  offload: Offload,
  g: ModelGeometry,
  cost: CostParams,
  belady?: ReplayCounts,
): ReplayRow {
  const u = unitCosts(g, cost);
  const bytes = expertBytes(g);
  const slots = sc.budget.scope === 'layer' ? sc.budget.slots * sc.layers : sc.budget.slots;
  return {
    trace: sc.source,
    model: sc.model,
    geometry: g.name,
    offload,
    scope: sc.budget.scope,
    start: sc.startKind,
    skippedTokens: sc.skippedTokens,
    policy: policy.name,
    policyKind: policy.kind,
    offline: policy.offline,
    default: engineDefaultPolicy[offload] === policy.name,
    budget: slots / sc.layers,
    budgetSlotsTotal: slots,
    tokens: c.tokens,
    hitRate: c.routed === 0 ? 0 : c.hits / c.routed,
    hits: c.hits,
    misses: c.misses,
    uploads: c.uploads,
    aheadUploads: c.aheadUploads,
    swaps: c.swaps,
    fills: c.fills,
    setupUploads: c.setupUploads,
    uploadsPerToken: c.uploads / c.tokens,
    bytesPerToken: (c.uploads * bytes) / c.tokens,
    expertBytes: bytes,
    hostExpertBytes: hostExpertBytes(g),
    msPerTokenEstimate: phaseMs(c.decode, u) / c.tokens,
    ttftMsEstimate: c.prefill ? phaseMs(c.prefill, u) : null,
    ...readFields(c, offload, bytes, belady),
    hitRateOverBelady: belady && belady.hits > 0 ? c.hits / c.routed / (belady.hits / belady.routed) : null,
    guardKept: c.guard ? c.guard.kept + c.guard.watching : null,
    guardSwitched: c.guard ? c.guard.switched : null,
    scoreFrom: sc.scoreFrom,
    costModel: { ...cost, ...u },
  };
}

type ReadFields = Pick<ReplayRow, 'readsPerToken' | 'readBytesPerToken' | 'beladyMissesPerToken' | 'readsOverBelady'>;

/**
 * Host-less, every decode upload is a read of the model file: the calls streamed for their miss
 * plus the uploads that serve no miss, as the cost model counts them (c.decode). Belady's misses
 * bound that for a demand policy: a kept miss rides on its call's read, a read ahead is a demand
 * read moved earlier.
 */
function readFields(c: ReplayCounts, offload: Offload, bytes: number, belady?: ReplayCounts): ReadFields {
  if (offload === 'hosted')
    return { readsPerToken: null, readBytesPerToken: null, beladyMissesPerToken: null, readsOverBelady: null };
  assert(
    belady !== undefined && belady.tokens === c.tokens,
    'host-less rows come with Belady replayed on the same tokens',
  );
  const reads = c.decode.streamedCalls + c.decode.extraUploads;
  return {
    readsPerToken: reads / c.tokens,
    readBytesPerToken: (reads * bytes) / c.tokens,
    beladyMissesPerToken: belady.misses / c.tokens,
    readsOverBelady: belady.misses === 0 ? null : reads / belady.misses,
  };
}
