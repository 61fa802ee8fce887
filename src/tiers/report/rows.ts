/** One result row per (trace, policy, budget): counts, rates and the cost estimate with its assumptions. */
import { phaseMs, unitCosts, type CostParams, type Offload, type UnitCosts } from '../cost.js';
import { expertBytes, hostExpertBytes, type ModelGeometry } from '../geometry.js';
import type { ReplayCounts } from '../replay.js';
import type { Scenario } from '../scenario.js';
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
  costModel: CostParams & UnitCosts;
}

export function toRow(
  policy: Policy, sc: Scenario, c: ReplayCounts, offload: Offload, g: ModelGeometry, cost: CostParams,
): ReplayRow {
  const u = unitCosts(g, cost);
  const bytes = expertBytes(g);
  const slots = sc.budget.scope === 'layer' ? sc.budget.slots * sc.layers : sc.budget.slots;
  return {
    trace: sc.source, model: sc.model, geometry: g.name, offload, scope: sc.budget.scope,
    start: sc.startKind, skippedTokens: sc.skippedTokens,
    policy: policy.name, policyKind: policy.kind, offline: policy.offline,
    budget: slots / sc.layers, budgetSlotsTotal: slots,
    tokens: c.tokens, hitRate: c.routed === 0 ? 0 : c.hits / c.routed, hits: c.hits, misses: c.misses,
    uploads: c.uploads, aheadUploads: c.aheadUploads, swaps: c.swaps, fills: c.fills, setupUploads: c.setupUploads,
    uploadsPerToken: c.uploads / c.tokens, bytesPerToken: (c.uploads * bytes) / c.tokens,
    expertBytes: bytes, hostExpertBytes: hostExpertBytes(g),
    msPerTokenEstimate: phaseMs(c.decode, u) / c.tokens,
    ttftMsEstimate: c.prefill ? phaseMs(c.prefill, u) : null,
    costModel: { ...cost, ...u },
  };
}
