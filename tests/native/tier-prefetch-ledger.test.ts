/**
 * One prefetch ledger: the engine's tier and `moetier replay --prefetch` run the same queue-and-ledger
 * state machine, include/mt_prefetch_ledger.h (native/policy/prefetch_ledger.cc).
 *
 *   the tier    native/tier/tier_prefetch.cc keeps the ledger's tables and counts its outcomes; on the
 *               debug build (this file runs there too) every admit, route, eviction and retire asserts
 *               the ledger's answer against the tier's own marks, so a tier whose prefetched experts
 *               and the ledger's live tasks disagree aborts the run
 *   the replay  src/tiers/prefetch-ledger.ts holds a handle to the native ledger and nothing else: every
 *               event is the addon's prefetchLedgerEvent, every figure its prefetchLedgerRead
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadNative } from '../../src/native/binding.js';
import { PrefetchLedger } from '../../src/tiers/prefetch-ledger.js';
import { ledgerViolations, maxTokens, promptText, runPrefetch } from '../engine/prefetch-helpers.js';
import { referenceRun, tempDir, tinyModel } from '../engine/tier-helpers.js';

const root = path.resolve(import.meta.dirname, '../..');
const { dir, cleanup } = tempDir('moetier-one-ledger-');
afterAll(cleanup);
const expertBytes = 6528; // a tiny Q8_0 expert
let model: string;
let prompt: number[];
let reference: number[];
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 29);
  ({ prompt, reference } = await referenceRun(model, promptText, maxTokens));
});

describe('the tier runs the native ledger', () => {
  it('under a two-expert gate and a one-task queue every end happens, and the ledger agrees with the tier at each', async () => {
    for (const backend of ['fake', 'disk'] as const) {
      const fake = backend === 'fake' ? { fake: { computeBytesPerS: 3e7 } } : {};
      const r = await runPrefetch(
        model,
        prompt,
        {
          backend,
          ...fake,
          upload: { inflightBytesMax: 2 * expertBytes },
          prefetch: { mode: 'enforce', windowBytesMax: 2 * expertBytes, queueMax: 1 },
        },
        1,
      );
      expect(r.tokens, backend).toEqual(reference);
      expect(ledgerViolations(r.report), backend).toEqual([]);
      expect(r.report.issued, backend).toBeGreaterThan(0);
      expect(r.report.cancelled + r.report.refused + r.report.dropped, backend).toBeGreaterThan(0);
    }
  });
});

describe('the replay runs the native ledger', () => {
  it('a PrefetchLedger holds a native handle and no queue, task or tally of its own', () => {
    const native = loadNative();
    const events = vi.spyOn(native, 'prefetchLedgerEvent');
    const reads = vi.spyOn(native, 'prefetchLedgerRead');
    try {
      const l = new PrefetchLedger(2, 4, { queueLengthMax: 2, inflightBytesMax: 300 });
      expect(Object.keys(l).sort()).toEqual(['experts', 'handle', 'lastMs', 'layers', 'limits', 'native']);
      const a = l.admit(1, 2, 100, 0)!;
      l.admit(1, 3, 100, 0);
      expect(l.admit(0, 0, 100, 0)).toBeUndefined(); // the queue is full
      l.issue(a, 1);
      expect(l.route(1, 2, 100, 2, true)).toBe('awaiting');
      l.complete(a, 5);
      expect(l.beginStep(1, 5)).toBe(1);
      expect(events.mock.calls.map((c) => c[1])).toEqual([
        'admit',
        'admit',
        'admit',
        'issue',
        'route',
        'complete',
        'begin',
      ]);
      // The figures are the native ledger's, read back: nothing is counted in TypeScript.
      reads.mockClear();
      const t = l.tallies();
      expect(reads.mock.calls.map((c) => c[1])).toEqual(['tallies']);
      expect([
        t.admitted.count,
        t.refusedQueueFull.count,
        t.issued.count,
        t.late.count,
        t.lateMs,
        t.cancelled.count,
      ]).toEqual([2, 1, 1, 1, 3, 1]);
      expect(t.retired.bytes).toBe(200);
    } finally {
      events.mockRestore();
      reads.mockRestore();
    }
  });

  it('the transitions are written once: native/policy/prefetch_ledger.cc defines them, the tier and the addon call them', () => {
    const verbs = ['admit', 'begin', 'issue', 'cancel', 'drop', 'complete', 'fail', 'route', 'evict'].map(
      (v) => `mt_prefetch_${v}`,
    );
    const definers = (dir: string) =>
      readdirSync(path.join(root, dir))
        .filter((n) => n.endsWith('.cc'))
        .filter((n) =>
          verbs.some((v) => new RegExp(`int32_t ${v}\\(`).test(readFileSync(path.join(root, dir, n), 'utf8'))),
        );
    expect(definers('native/policy')).toEqual(['prefetch_ledger.cc']);
    for (const d of ['native/tier', 'native/addon']) expect(definers(d), d).toEqual([]);
    const tier = readFileSync(path.join(root, 'native/tier/tier_prefetch.cc'), 'utf8');
    for (const v of verbs.filter((v) => v !== 'mt_prefetch_cancel' && v !== 'mt_prefetch_drop'))
      expect(tier, v).toContain(`${v}(`);
    expect(tier).toMatch(/mt_prefetch_cancel\b/);
    expect(tier).toMatch(/mt_prefetch_drop\b/);
    // No second ledger in TypeScript: the replay's face keeps no task map, queue array or tally sums.
    const face = readFileSync(path.join(root, 'src/tiers/prefetch-ledger.ts'), 'utf8');
    expect(face).not.toMatch(/new Map|\.push\(|\.splice\(|\+\+|\+= /);
  });
});
