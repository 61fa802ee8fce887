/**
 * The prefetch's figures for a report (moetier run --json prefetch, the benchmarks): the tier's
 * counters by expert (src/native/binding.ts NativePrefetchStats) with the bytes they stand for and
 * the shares a reader wants first. Every expert of these models has the same stored size.
 *
 *   coverage   covered / (covered + late + uncovered): of the routed experts that needed bytes
 *              moved, the share a prefetch had landed in time (null when none needed any)
 *   lateMs     the waits late prefetches cost (the disk tier's runs wait; elsewhere they run from
 *              the host copy or the container, and wait nothing)
 *   precision  (covered + late) / issued since the mark: the share of issued reads a route used
 */
import type { NativePrefetchStats } from '../../native/binding.js';

export interface PrefetchReport extends NativePrefetchStats {
  coverage: number | null;
  precision: number | null;
  lateMs: number;
  expertBytes: number;
  coveredBytes: number;
  lateBytes: number;
  uncoveredBytes: number;
  wastedBytes: number;
  cancelledBytes: number;
}

export function prefetchReport(p: NativePrefetchStats, expertBytes: number): PrefetchReport {
  const needed = p.covered + p.late + p.uncovered;
  const used = p.covered + p.late;
  return {
    ...p,
    coverage: needed > 0 ? round(p.covered / needed) : null,
    precision: p.issued > 0 ? round(Math.min(1, used / p.issued)) : null,
    lateMs: round(p.lateNs / 1e6),
    expertBytes,
    coveredBytes: p.covered * expertBytes,
    lateBytes: p.late * expertBytes,
    uncoveredBytes: p.uncovered * expertBytes,
    wastedBytes: p.wasted * expertBytes,
    cancelledBytes: p.cancelled * expertBytes,
  };
}

function round(x: number): number {
  return Math.round(x * 1e4) / 1e4;
}
