/**
 * The native prefetch ledger's invariants over random tiers, budgets and routes (issue 13 item 4):
 * seeded draws of a model (its routing), a backend, slots per layer, the window, the in-flight cap,
 * the queue's length and the candidates; in every draw the tokens are the plain ones and
 * ledgerViolations (completed <= issued, covered + late <= issued, wasted <= completed, each task
 * ended once, bytes retired once, the per-layer counts summing to the totals) finds nothing.
 * The pure ledger's own property test is tests/unit/tiers/prefetch-ledger.property.test.ts.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/core/prng.js';
import { referenceRun, tempDir, tinyModel } from './tier-helpers.js';
import { ledgerViolations, maxTokens, promptText, runPrefetch } from './prefetch-helpers.js';

const { dir, cleanup } = tempDir('moetier-prefetch-random-');
afterAll(cleanup);
const expertBytes = 6528; // a tiny Q8_0 expert
const backends = ['disk', 'cpu', 'fake'] as const;

describe('the prefetch ledger over random draws', () => {
  it('holds its invariants and the plain tokens in every draw', async () => {
    const rng = mulberry32(20261202);
    const pick = (n: number) => Math.floor(rng() * n);
    let issued = 0,
      cancelled = 0;
    for (const seed of [3, 11, 29]) {
      const model = await tinyModel(dir, 'q8_0', seed);
      const { prompt, reference } = await referenceRun(model, promptText, maxTokens);
      for (let draw = 0; draw < 6; draw++) {
        const backend = backends[pick(backends.length)];
        const windowExperts = 1 + pick(4);
        const prefetch = {
          mode: 'enforce' as const,
          windowBytesMax: windowExperts * expertBytes,
          queueMax: 1 + pick(8),
          candidates: 1 + pick(8),
          safety: 0.2 + 0.8 * rng(),
        };
        const fake = backend === 'fake' ? { fake: { computeBytesPerS: [3e7, 1e9, 448e9][pick(3)] } } : {};
        // The one gate's budget, shared with every other upload into a slot (misses first).
        const upload = { inflightBytesMax: (windowExperts + pick(3)) * expertBytes };
        const r = await runPrefetch(
          model,
          prompt,
          { backend, prefetch, upload, lfru: { tickTokens: 1 + pick(8) }, ...fake },
          1 + pick(6),
        );
        const where = JSON.stringify({ seed, backend, prefetch, upload });
        expect(r.tokens, where).toEqual(reference);
        expect(ledgerViolations(r.report), where).toEqual([]);
        issued += r.report.issued;
        cancelled += r.report.cancelled;
      }
    }
    expect(issued).toBeGreaterThan(0); // the draws did prefetch
    expect(cancelled).toBeGreaterThan(0); // and some queued tasks were cancelled
  });
});
