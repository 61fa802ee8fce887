/**
 * What a routing sequence looks like, one layer at a time: the statistics that tell real
 * routing (a trained model's) from planted routing (a synthetic model locked into a topic).
 *
 *   steps [T][k] expert ids of one layer, T tokens in order  ->  LayerRouteStats
 *
 * Every statistic here is pure counting over the ids; hit rates under a cache need a policy
 * and live beside the policies (src/tiers/layer-hit-rates.ts).
 */

export interface LayerRouteStats {
  /** Entropy of the expert-use distribution over the steps, over log(E): 1 = even use. */
  entropy: number;
  /** Share of all picks that went to the 16 most-used experts (all of them when E <= 16). */
  top16Share: number;
  /** Share of all picks that went to the E/4 most-used experts. */
  topQuarterShare: number;
  /** Share of a token's experts that the previous token also picked, at this layer. */
  reuse: number;
  /** reuse over chance (k / E, the reuse of independent uniform picks). */
  reuseOverChance: number;
  /** Distinct experts touched in 16 consecutive tokens, as a share of E (mean over windows). */
  window16Share: number;
  /** The same over 64 consecutive tokens (over the whole sequence when it is shorter). */
  window64Share: number;
}

export const STAT_FIELDS: readonly (keyof LayerRouteStats)[] = [
  'entropy',
  'top16Share',
  'topQuarterShare',
  'reuse',
  'reuseOverChance',
  'window16Share',
  'window64Share',
];

/** The statistics of one layer's steps; `experts` is E, `topK` the picks per step. */
export function layerRouteStats(steps: readonly (readonly number[])[], experts: number, topK: number): LayerRouteStats {
  const counts = new Array<number>(experts).fill(0);
  for (const ids of steps) for (const e of ids) counts[e]++;
  const reuse = nextStepReuseOfLayer(steps);
  return {
    entropy: normalizedEntropy(counts),
    top16Share: topShare(counts, 16),
    topQuarterShare: topShare(counts, Math.max(1, Math.floor(experts / 4))),
    reuse,
    reuseOverChance: reuse / (topK / experts),
    window16Share: windowDistinctShare(steps, 16, experts),
    window64Share: windowDistinctShare(steps, 64, experts),
  };
}

/** -sum p log p / log E over the use counts; 0 for no picks or E = 1. */
export function normalizedEntropy(counts: readonly number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0 || counts.length < 2) return 0;
  let h = 0;
  for (const c of counts) {
    if (c > 0) h -= (c / total) * Math.log(c / total);
  }
  return h / Math.log(counts.length);
}

/** Share of the picks on the `n` most-used experts. */
export function topShare(counts: readonly number[], n: number): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  const top = [...counts].sort((a, b) => b - a).slice(0, n);
  return top.reduce((a, b) => a + b, 0) / total;
}

/** Share of the picks of step t (t >= 1) that step t - 1 also made. */
export function nextStepReuseOfLayer(steps: readonly (readonly number[])[]): number {
  let reused = 0;
  let picks = 0;
  for (let t = 1; t < steps.length; t++) {
    const previous = new Set(steps[t - 1]);
    for (const e of steps[t]) if (previous.has(e)) reused++;
    picks += steps[t].length;
  }
  return picks === 0 ? 0 : reused / picks;
}

/**
 * Distinct experts in each window of `width` consecutive steps, over E, averaged over every
 * window position (sliding by one); one window of all the steps when there are fewer.
 */
export function windowDistinctShare(steps: readonly (readonly number[])[], width: number, experts: number): number {
  if (steps.length === 0) return 0;
  const w = Math.min(width, steps.length);
  // Sliding counts: each step enters once and leaves once, so this is O(T k), not O(T w k).
  const inWindow = new Array<number>(experts).fill(0);
  let distinct = 0;
  let sum = 0;
  let windows = 0;
  for (let t = 0; t < steps.length; t++) {
    for (const e of steps[t]) if (inWindow[e]++ === 0) distinct++;
    if (t >= w) for (const e of steps[t - w]) if (--inWindow[e] === 0) distinct--;
    if (t >= w - 1) {
      sum += distinct / experts;
      windows++;
    }
  }
  return sum / windows;
}

/** Field-wise mean of several layers' (or traces') statistics. */
export function meanStats<T extends object>(rows: readonly T[], fields: readonly (keyof T)[]): T {
  const out = {} as Record<keyof T, number>;
  for (const f of fields) out[f] = rows.reduce((s, r) => s + (r[f] as number), 0) / Math.max(1, rows.length);
  return out as T;
}
