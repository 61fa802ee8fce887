/**
 * Prefetch (issue 13) on every tier: the disk tier (reads of the model file into slots), the cpu
 * backend (copies from the container) and the fake card (a simulated PCIe link). On each: the
 * tokens are the plain ones in every mode; off makes no prediction and counts nothing; observe
 * counts what enforce would read and issues nothing; enforce reads ahead and its ledger and route
 * accounting hold. Bad settings are refused by name, and a tune changes the mode from the next step.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';
import { ledgerViolations, maxTokens, promptText, runPrefetch } from './prefetch-helpers.js';

const { dir, cleanup } = tempDir('moetier-prefetch-modes-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 29);
  ({ prompt, reference } = await referenceRun(model, promptText, maxTokens));
});

describe.each(['disk', 'cpu', 'fake'] as const)('prefetch on the %s tier', (backend) => {
  it('off, observe and enforce give the plain tokens; off counts nothing, observe issues nothing, enforce reads ahead and its ledger holds', async () => {
    const off = await runPrefetch(model, prompt, { backend, prefetch: { mode: 'off' } });
    const observe = await runPrefetch(model, prompt, { backend, prefetch: { mode: 'observe' } });
    const enforce = await runPrefetch(model, prompt, { backend, prefetch: { mode: 'enforce' } });
    for (const r of [off, observe, enforce]) expect(r.tokens).toEqual(reference);
    expect(off.mode).toBe('off');
    const { byLayer, expertBytes: _bytes, coverage, precision, ...counts } = off.report;
    expect(Object.values(counts).every((v) => v === 0)).toBe(true); // no prediction was even made
    expect(coverage).toBeNull();
    expect(precision).toBeNull();
    expect(
      Object.values(byLayer)
        .flat()
        .every((v) => v === 0),
    ).toBe(true);
    expect(observe.report.queued + observe.report.issued).toBe(0);
    expect(observe.report.wouldIssue).toBeGreaterThan(0);
    expect(observe.report.wouldCover).toBeLessThanOrEqual(observe.report.wouldIssue);
    const p = enforce.report;
    expect(p.issued).toBeGreaterThan(0);
    expect(p.covered + p.late).toBeGreaterThan(0);
    expect(p.uncovered).toBeGreaterThan(0); // some routes are never predicted in time: the accounting sees them
    expect(ledgerViolations(p)).toEqual([]);
    expect(p.coverage).toBeCloseTo(p.covered / (p.covered + p.late + p.uncovered), 3);
    expect(p.wastedBytes).toBe(p.wasted * p.expertBytes);
    if (backend === 'disk') expect(p.late > 0 ? p.lateNs > 0 : p.lateNs === 0).toBe(true);
    else expect(p.lateNs).toBe(0); // elsewhere a late prefetch's expert runs from where it lies: nothing waits
  });
});

describe('prefetch settings', () => {
  it('are refused by name, and nothing opens', async () => {
    const open = (o: object) => openEngine({ model, threads: 1, slotsPerLayer: 3, heat: false, ...o });
    await expect(openEngine({ model, threads: 1, prefetch: { mode: 'enforce' } })).rejects.toThrow(
      /option prefetch\.mode: expected "off" without an expert tier/,
    );
    await expect(open({ backend: 'disk', prefetch: { mode: 'on' } })).rejects.toThrow(InvalidOptionError);
    await expect(open({ prefetch: { mode: 'enforce', queueMax: 65 } })).rejects.toThrow(
      /prefetch\.queueMax: expected an integer in \[1, 64\]/,
    );
    await expect(open({ prefetch: { mode: 'enforce', depth: 2 } })).rejects.toThrow(/prefetch\.depth/);
    await expect(open({ prefetch: { mode: 'enforce', safety: 0 } })).rejects.toThrow(/prefetch\.safety/);
    await expect(open({ prefetch: { mode: 'enforce', candidates: 9 } })).rejects.toThrow(
      /prefetch\.candidates: expected an integer in \[1, 8\]/,
    );
    await expect(
      open({ backend: 'disk', disk: { admitMisses: false }, prefetch: { mode: 'enforce' } }),
    ).rejects.toThrow(/prefetch\.mode: expected "off" or "observe" with disk\.admitMisses false/);
  });

  it('a tune turns it on and off between requests, and a bad tune changes nothing', async () => {
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 128,
      heat: false,
      backend: 'fake',
      slotsPerLayer: 3,
    });
    try {
      expect(engine.prefetchMode).toBe('off');
      expect(() => engine.tune({ prefetch: { mode: 'sometimes' as never } })).toThrow(/tune\.prefetch\.mode/);
      expect(() => engine.tune({ prefetch: { windowBytesMax: 0 } })).toThrow(/tune\.prefetch\.windowBytesMax/);
      expect(engine.prefetchMode).toBe('off');
      engine.tune({ prefetch: { mode: 'enforce' } });
      expect(engine.prefetchMode).toBe('enforce');
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      const on = engine.prefetchReport()!;
      expect(on.issued).toBeGreaterThan(0);
      engine.tune({ prefetch: { mode: 'off' } });
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      const after = engine.prefetchReport()!;
      expect(after.queued).toBe(on.queued); // the ledger never resets: nothing more was queued once off
      expect(after.covered + after.late + after.uncovered).toBe(0); // and no route was counted
      expect(ledgerViolations(after)).toEqual([]);
    } finally {
      await engine.close();
    }
  });
});
