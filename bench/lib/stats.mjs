/** Small statistics for repeated runs. */

export function median(values) {
  if (values.length === 0) throw new RangeError('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The q-quantile (0..1) by linear interpolation between the sorted values. */
export function quantile(values, q) {
  if (values.length === 0) throw new RangeError('quantile of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const at = q * (sorted.length - 1);
  const lo = Math.floor(at);
  return lo + 1 < sorted.length ? sorted[lo] + (at - lo) * (sorted[lo + 1] - sorted[lo]) : sorted[lo];
}

/** { threads -> [runs] } -> the best thread count by median of `field`: { threads, median }. */
export function bestByMedian(runsByThreads, field) {
  let best;
  for (const [threads, runs] of Object.entries(runsByThreads)) {
    const m = median(runs.map((r) => r[field]));
    if (!best || m > best.median) best = { threads: Number(threads), median: m };
  }
  return best;
}
