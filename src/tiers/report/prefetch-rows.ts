/** One row per (trace, budget, prefetch mode) of the prefetch replay, and its text table. */
import { expertBytes, type ModelGeometry } from '../geometry.js';
import type { PrefetchReplayMode, PrefetchReplayResult } from '../prefetch-replay.js';
import { readMs, steadyWindowExperts, type TimingModel } from '../prefetch-timing.js';
import type { Scenario } from '../scenario.js';
import type { TransferWindowLimits } from '../transfer-window.js';

export interface PrefetchRow {
  trace: string;
  model: string;
  geometry: string;
  scope: 'layer' | 'global';
  start: string;
  skippedTokens: number;
  /** Slots per layer (a global budget shown per layer). */
  budget: number;
  mode: PrefetchReplayMode;
  /** The oracle's recall: assumed, not measured. */
  recall: number;
  seed: number;
  timing: TimingModel & { readMs: number };
  window: TransferWindowLimits;
  /** Experts each layer's window admits once calibrated, nothing in flight (layer l's serves layer l + 1). */
  windowExperts: number[];
  expertBytes: number;
  tokens: number;
  decodeMsPerToken: number;
  stallMsPerToken: number;
  /** Demand reads plus prefetch reads, per decode token. */
  readsPerToken: number;
  readBytesPerToken: number;
  demandReadsPerToken: number;
  prefetchReadsPerToken: number;
  /** The ledger's counts (counts and bytes; lateMs: the waits the late ones cost); observe: wouldIssue / wouldCover. */
  prefetch: {
    issued: number;
    covered: number;
    late: number;
    lateMs: number;
    wasted: number;
    uncovered: number;
    cancelled: number;
    dropped: number;
    refused: number;
    landedUnrouted: number;
    wouldIssue: number;
    wouldCover: number;
    issuedBytes: number;
    coveredBytes: number;
    lateBytes: number;
    wastedBytes: number;
    uncoveredBytes: number;
    cancelledBytes: number;
    /** Per layer (the layer predicted or routed): counts. */
    byLayer: Record<'issued' | 'covered' | 'late' | 'wasted' | 'uncovered' | 'cancelled', number[]>;
  };
}

export function toPrefetchRow(
  sc: Scenario,
  g: ModelGeometry,
  r: PrefetchReplayResult,
  o: { recall: number; seed: number; timing: TimingModel; window: TransferWindowLimits },
): PrefetchRow {
  const bytes = expertBytes(g);
  const slots = sc.budget.scope === 'layer' ? sc.budget.slots * sc.layers : sc.budget.slots;
  const perToken = (x: number): number => x / r.tokens;
  const t = r.ledger;
  const reads = r.demandReads + r.prefetchReads;
  return {
    trace: sc.source,
    model: sc.model,
    geometry: g.name,
    scope: sc.budget.scope,
    start: sc.startKind,
    skippedTokens: sc.skippedTokens,
    budget: slots / sc.layers,
    mode: r.mode,
    recall: o.recall,
    seed: o.seed,
    timing: { ...o.timing, readMs: readMs(o.timing, bytes) },
    window: o.window,
    windowExperts: steadyWindowExperts(o.timing, bytes, o.window),
    expertBytes: bytes,
    tokens: r.tokens,
    decodeMsPerToken: perToken(r.decodeMs),
    stallMsPerToken: perToken(r.stallMs),
    readsPerToken: perToken(reads),
    readBytesPerToken: perToken(reads * bytes),
    demandReadsPerToken: perToken(r.demandReads),
    prefetchReadsPerToken: perToken(r.prefetchReads),
    prefetch: {
      issued: t.issued.count,
      covered: t.covered.count,
      late: t.late.count,
      lateMs: t.lateMs,
      wasted: t.wasted.count,
      uncovered: t.uncovered.count,
      cancelled: t.cancelled.count,
      dropped: t.dropped.count,
      refused: t.refusedQueueFull.count + t.refusedBytesFull.count + t.refusedDuplicate.count,
      landedUnrouted: r.landedUnrouted,
      wouldIssue: r.wouldIssue,
      wouldCover: r.wouldCover,
      issuedBytes: t.issued.bytes,
      coveredBytes: t.covered.bytes,
      lateBytes: t.late.bytes,
      wastedBytes: t.wasted.bytes,
      uncoveredBytes: t.uncovered.bytes,
      cancelledBytes: t.cancelled.bytes,
      byLayer: {
        issued: r.layers.map((x) => x.issued.count),
        covered: r.layers.map((x) => x.covered.count),
        late: r.layers.map((x) => x.late.count),
        wasted: r.layers.map((x) => x.wasted.count),
        uncovered: r.layers.map((x) => x.uncovered.count),
        cancelled: r.layers.map((x) => x.cancelled.count),
      },
    },
  };
}

const fmt = (n: number, digits: number): string => n.toFixed(digits);
const spread = (xs: readonly number[]): string => {
  const [lo, hi] = [Math.min(...xs), Math.max(...xs)];
  return lo === hi ? String(lo) : `${lo}..${hi}`;
};

export function formatPrefetchTable(rows: readonly PrefetchRow[]): string {
  if (rows.length === 0) return '';
  const r0 = rows[0];
  const tm = r0.timing;
  const [cLo, cHi] = [fmt(Math.min(...tm.computeMs), 3), fmt(Math.max(...tm.computeMs), 3)];
  const out = [
    `trace ${r0.trace} (${r0.model}): ${r0.tokens} decode tokens, prefetch replay` +
      (r0.skippedTokens > 0 ? ` after a ${r0.skippedTokens}-token prefix` : ''),
    `host-less (every miss read before it runs), LRU residency, budget per ${r0.scope === 'layer' ? 'layer' : 'model (global, shown per layer)'}, start ${r0.start}`,
    `timing ${tm.source}: compute ${cLo === cHi ? cLo : `${cLo}..${cHi}`} ms/layer, ` +
      `read ${fmt(tm.readMs, 3)} ms per expert (${fmt(tm.transferFixedMs, 3)} ms fixed + ${fmt(r0.expertBytes / 1e6, 2)} MB at ${fmt(tm.bandwidthBytesPerS / 1e9, 2)} GB/s), one lane`,
    `prediction: an oracle of the next layer's routing at recall ${r0.recall} (assumed, not measured), seed ${r0.seed}`,
    `window (transferWindowBytes, safety ${r0.window.safety}): ${spread(r0.windowExperts)} expert(s) per layer once calibrated, one before (cold start)`,
    '',
  ];
  const head = [
    'mode',
    'budget',
    'ms/tok',
    'stall ms/tok',
    'reads/tok',
    'MB read/tok',
    'prefetch/tok',
    'covered',
    'late',
    'late ms',
    'wasted',
    'uncovered',
    'cancelled',
    'would issue',
    'would cover',
  ];
  const body = rows.map((r) => {
    const p = r.prefetch;
    return [
      r.mode,
      String(r.budget),
      fmt(r.decodeMsPerToken, 3),
      fmt(r.stallMsPerToken, 3),
      fmt(r.readsPerToken, 2),
      fmt(r.readBytesPerToken / 1e6, 2),
      fmt(r.prefetchReadsPerToken, 2),
      String(p.covered),
      String(p.late),
      fmt(p.lateMs, 1),
      String(p.wasted),
      String(p.uncovered),
      String(p.cancelled),
      String(p.wouldIssue),
      String(p.wouldCover),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  out.push(
    line(head),
    ...body.map(line),
    'covered: prefetched, landed before its route; late: still reading at its route (late ms: the waits); wasted: landed, evicted unrouted;',
    "uncovered: routed misses no prefetch read; cancelled: queued, never started; off counts none of these (as the engine's tier)",
  );
  return out.join('\n');
}
