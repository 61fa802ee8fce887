/**
 * Prefetch on the disk tier (issue 13, first slice): off makes no prediction and counts nothing;
 * observe predicts and counts what enforce would read, and reads nothing ahead; enforce reads
 * predicted experts a layer ahead within the window. The tokens are the same in every mode, and
 * the accounting keeps its invariants (covered + late <= issued, wasted <= issued).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-disk-prefetch-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 32;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 29);
  ({ prompt, reference } = await referenceRun(model, 'red green blue yellow red green blue', maxTokens));
});

async function run(mode: 'off' | 'observe' | 'enforce') {
  const engine = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, backend: 'disk', slotsPerLayer: 3, prefetch: { mode } });
  try {
    const tokens = await collect(engine, prompt, { maxTokens, stopAtEos: false });
    return { tokens, prefetch: engine.tierStats()!.prefetch!, mode: engine.prefetchMode, uploads: engine.lastStats!.uploads! };
  } finally {
    await engine.close();
  }
}

describe('prefetch on the disk tier', () => {
  it('off, observe and enforce give the plain tokens; only enforce reads ahead, and its accounting holds', async () => {
    const off = await run('off');
    const observe = await run('observe');
    const enforce = await run('enforce');
    for (const r of [off, observe, enforce]) expect(r.tokens).toEqual(reference);
    expect(off.mode).toBe('off');
    expect(Object.values(off.prefetch).every((v) => v === 0)).toBe(true); // no prediction was even made
    expect(observe.prefetch.issued).toBe(0);
    expect(observe.prefetch.wouldIssue).toBeGreaterThan(0);
    expect(observe.prefetch.wouldCover).toBeLessThanOrEqual(observe.prefetch.wouldIssue);
    const p = enforce.prefetch;
    expect(p.issued).toBeGreaterThan(0);
    expect(p.covered + p.late).toBeGreaterThan(0);
    expect(p.covered + p.late).toBeLessThanOrEqual(p.issued);
    expect(p.wasted).toBeLessThanOrEqual(p.issued);
    expect(p.late > 0 ? p.lateNs > 0 : p.lateNs === 0).toBe(true);
  });

  it('is refused off the disk tier and for a bad mode, by name', async () => {
    await expect(openEngine({ model, threads: 1, slotsPerLayer: 3, heat: false, prefetch: { mode: 'enforce' } })).rejects.toThrow(/option prefetch\.mode: expected "off" without the disk tier/);
    await expect(openEngine({ model, threads: 1, slotsPerLayer: 3, heat: false, backend: 'disk', prefetch: { mode: 'on' as never } })).rejects.toThrow(InvalidOptionError);
  });
});
