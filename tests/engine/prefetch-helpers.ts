/** Shared by the prefetch tests: one tiny model, its plain tokens, and a run under a prefetch mode. */
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import type { PrefetchReport } from '../../src/engine/tier/prefetch-report.js';
import { collect } from './tier-helpers.js';

export const maxTokens = 32;
export const promptText = 'red green blue yellow red green blue';

export interface PrefetchRun {
  tokens: number[];
  report: PrefetchReport;
  mode: string;
  /** The disk backend's failed reads (its own stats, not the engine's API), 0 elsewhere. */
  diskReadsFailed: number;
}

/** A request on a tier of `slots` per layer (no heat, no LFRU swaps unless options add them), and the prefetch's figures after it. */
export async function runPrefetch(
  model: string,
  prompt: number[] | string,
  options: Partial<EngineOptions>,
  slots = 3,
): Promise<PrefetchRun> {
  const engine = await openEngine({
    model,
    threads: 1,
    contextTokens: 128,
    heat: false,
    slotsPerLayer: slots,
    ...options,
  });
  try {
    const tokens = await collect(engine, prompt, { maxTokens, stopAtEos: false });
    const backend = (engine as unknown as { tier?: { backend: { stats(): { disk?: { readsFailed: number } } } } }).tier
      ?.backend;
    return {
      tokens,
      report: engine.prefetchReport()!,
      mode: engine.prefetchMode,
      diskReadsFailed: backend?.stats().disk?.readsFailed ?? 0,
    };
  } finally {
    await engine.close();
  }
}

/**
 * The ledger's and the routes' invariants (docs/SPEC.md section 4), whatever the run did: every queued task
 * ends once (issued, cancelled, dropped) or is still queued; bytes admitted = retired + in flight +
 * queued; completed and failed <= issued; a route uses a prefetch at most once (covered + late <=
 * issued); only a landed prefetch can be evicted unrouted (wasted <= completed).
 */
export function ledgerViolations(p: PrefetchReport): string[] {
  const out: string[] = [];
  const check = (ok: boolean, what: string) => ok || out.push(what);
  check(
    p.queued === p.issued + p.cancelled + p.dropped + p.queueLength,
    `queued ${p.queued} = issued ${p.issued} + cancelled ${p.cancelled} + dropped ${p.dropped} + queue ${p.queueLength}`,
  );
  check(
    p.admittedBytes === p.retiredBytes + p.inflightBytes + p.queueLength * p.expertBytes,
    `admitted ${p.admittedBytes} B = retired ${p.retiredBytes} + in flight ${p.inflightBytes} + queued`,
  );
  check(
    p.completed + p.failed + p.inflightBytes / p.expertBytes === p.issued,
    `completed ${p.completed} + failed ${p.failed} + in flight = issued ${p.issued}`,
  );
  check(p.covered + p.late <= p.issued, `covered ${p.covered} + late ${p.late} <= issued ${p.issued}`);
  check(p.wasted <= p.completed, `wasted ${p.wasted} <= completed ${p.completed}`);
  check(p.late > 0 || p.lateNs === 0, 'no wait without a late prefetch');
  for (const k of ['covered', 'late', 'wasted', 'uncovered'] as const) {
    const sum = p.byLayer[k].reduce((a, b) => a + b, 0);
    check(sum === p[k], `byLayer.${k} sums to ${sum}, not ${p[k]}`);
  }
  return out;
}
