/**
 * `moetier routes stats`: a trace's routing statistics per layer and averaged over layers,
 * decode and prefill rows apart, with per-layer LRU and Belady hit rates at fixed shares of E.
 *
 *   Trace -> { decode?, prefill? } each { layers: LayerRow[nLayer], mean: LayerRow }
 *
 * Several traces (prompts) of one model are summarised by the mean of their layer means
 * (each prompt weighs the same, however long).
 */
import { layerRouteStats, meanStats, STAT_FIELDS, type LayerRouteStats } from '../routes/stats.js';
import type { Phase, RouteStep, Trace } from '../routes/types.js';
import { layerHitRates } from './layer-hit-rates.js';
import { belady } from './policies/belady.js';
import { lru } from './policies/lru.js';
import type { Policy } from './types.js';

/** Cache sizes the hit rates are taken at, as shares of E. */
export const HIT_RATE_SHARES: readonly number[] = [0.125, 0.25, 0.375, 0.5];
/** Steps replayed before hits are scored (a cold cache fills first). */
export const HIT_RATE_WARMUP_STEPS = 16;

export interface LayerRow extends LayerRouteStats {
  /** LRU hit rate at each of HIT_RATE_SHARES (null: the phase is not longer than the warm-up). */
  lruHitRate: (number | null)[];
  /** Belady MIN's hit rate at the same sizes: the bound a demand policy cannot pass. */
  beladyHitRate: (number | null)[];
}

export interface PhaseStats {
  phase: Phase;
  steps: number;
  layers: LayerRow[];
  mean: LayerRow;
}

export interface TraceRouteStats {
  source: string;
  model: string;
  layers: number;
  experts: number;
  topK: number;
  /** Slots per layer at each of HIT_RATE_SHARES. */
  slots: number[];
  decode?: PhaseStats;
  prefill?: PhaseStats;
}

export function slotsAtShares(experts: number): number[] {
  return HIT_RATE_SHARES.map((s) => Math.max(1, Math.round(s * experts)));
}

export function traceRouteStats(trace: Trace): TraceRouteStats {
  const { layers, experts, topK, model } = trace.header;
  const out: TraceRouteStats = { source: trace.source, model, layers, experts, topK, slots: slotsAtShares(experts) };
  if (trace.decode.length > 0) out.decode = phaseStats('decode', trace.decode, experts, topK);
  if (trace.prefill.length > 0) out.prefill = phaseStats('prefill', trace.prefill, experts, topK);
  return out;
}

function phaseStats(phase: Phase, steps: readonly RouteStep[], experts: number, topK: number): PhaseStats {
  const nLayer = steps[0].layers.length;
  const scored = steps.length > HIT_RATE_WARMUP_STEPS;
  const rates = (policy: Policy): (number | null)[][] =>
    slotsAtShares(experts).map((slots) => {
      if (!scored) return new Array<number | null>(nLayer).fill(null);
      return layerHitRates(policy, steps, { experts, topK, slots, scoreFrom: HIT_RATE_WARMUP_STEPS });
    });
  const lruRates = rates(lru);
  const beladyRates = rates(belady);
  const layers = Array.from(
    { length: nLayer },
    (_, l): LayerRow => ({
      ...layerRouteStats(
        steps.map((s) => s.layers[l]),
        experts,
        topK,
      ),
      lruHitRate: lruRates.map((r) => r[l]),
      beladyHitRate: beladyRates.map((r) => r[l]),
    }),
  );
  return { phase, steps: steps.length, layers, mean: meanRow(layers) };
}

/** Field-wise mean of rows (hit rates by share; a share with any null stays null). */
export function meanRow(rows: readonly LayerRow[]): LayerRow {
  const stats: LayerRouteStats = meanStats<LayerRouteStats>(rows, STAT_FIELDS);
  const byShare = (pick: (r: LayerRow) => (number | null)[]): (number | null)[] =>
    HIT_RATE_SHARES.map((_, i) => {
      const xs = rows.map((r) => pick(r)[i]);
      return xs.some((x) => x === null) ? null : (xs as number[]).reduce((a, b) => a + b, 0) / xs.length;
    });
  return { ...stats, lruHitRate: byShare((r) => r.lruHitRate), beladyHitRate: byShare((r) => r.beladyHitRate) };
}

/** The mean over traces of their layer means, per phase (traces without the phase left out). */
export function pooledPhase(
  all: readonly TraceRouteStats[],
  phase: Phase,
): { traces: number; mean: LayerRow } | undefined {
  const means = all.map((t) => t[phase]?.mean).filter((m): m is LayerRow => m !== undefined);
  return means.length === 0 ? undefined : { traces: means.length, mean: meanRow(means) };
}
