/**
 * The prefetch queue's ledger under pressure and failure (issue 13 item 5): a small gate budget
 * and a one-task queue make tasks wait, get cancelled when a newer layer or eval begins, and be
 * refused; an injected transfer failure fails a prefetch in flight. In every case the tokens are
 * the plain ones, each task ends once and its bytes retire once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExpertReadError } from '../../src/core/errors.js';
import { referenceRun, tempDir, tinyModel } from './tier-helpers.js';
import { ledgerViolations, maxTokens, promptText, runPrefetch } from './prefetch-helpers.js';
import { withTierFaults } from '../../src/engine/tier/fault-injection.js';

const { dir, cleanup } = tempDir('moetier-prefetch-ledger-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
/** One tiny expert's stored bytes (gate | up | down as Q8_0: 3 x 64 x 32 weights, 34 bytes per 32). */
const expertBytes = 6528;
const noSwaps = { lfru: { tickTokens: 100000 } }; // only warmstart and prefetch uploads: their order is the eval's
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 29);
  ({ prompt, reference } = await referenceRun(model, promptText, maxTokens));
});

describe('the prefetch ledger', () => {
  it('waits, cancels and refuses under a two-expert cap and a one-task queue; every byte retires once', async () => {
    // A slow compute clock (a wide window) beside 330 us per upload: a layer's prefetches are still in flight when the next layer predicts.
    const r = await runPrefetch(
      model,
      prompt,
      {
        backend: 'fake',
        fake: { computeBytesPerS: 3e7 },
        upload: { inflightBytesMax: 2 * expertBytes }, // the one gate's budget: every upload counts, misses first
        prefetch: { mode: 'enforce', windowBytesMax: 2 * expertBytes, queueMax: 1 },
      },
      1,
    );
    expect(r.tokens).toEqual(reference);
    const p = r.report;
    expect(p.expertBytes).toBe(expertBytes);
    expect(p.issued).toBeGreaterThan(0);
    expect(p.cancelled).toBeGreaterThan(0); // queued, then its layer (or a newer eval) began first
    expect(p.refused).toBeGreaterThan(0); // the one-task queue was full
    expect(p.dropped).toBeGreaterThan(0); // no slot could take it (one slot, its resident predicted)
    expect(p.cancelledBytes).toBe(p.cancelled * expertBytes);
    expect(ledgerViolations(p)).toEqual([]);
  });

  it('a prefetch upload that fails costs nothing but its bytes: the tokens stand and it retires as failed', async () => {
    const warmstart = 4 * 3 * expertBytes; // 4 layers x 3 slots
    // No overwrite: every upload is free-then-upload, so a failure is final (an in-place one is retried at the boundary).
    const fake = { overwriteSupported: false };
    const r = await withTierFaults({ transferAfterBytes: warmstart + 5 * expertBytes }, () =>
      runPrefetch(model, prompt, { backend: 'fake', fake, ...noSwaps, prefetch: { mode: 'enforce' } }),
    );
    expect(r.tokens).toEqual(reference);
    expect(r.report.failed).toBe(1);
    expect(ledgerViolations(r.report)).toEqual([]);
  });

  it("on the disk tier a failed read is the request's failure only when it was the request's own read: never wrong tokens", async () => {
    const warmstart = 4 * 3 * expertBytes;
    let survived = 0;
    for (let k = 1; k <= 10; k++) {
      try {
        const r = await withTierFaults({ transferAfterBytes: warmstart + k * expertBytes }, () =>
          runPrefetch(model, prompt, { backend: 'disk', ...noSwaps, prefetch: { mode: 'enforce' } }),
        );
        expect(r.tokens).toEqual(reference);
        expect(ledgerViolations(r.report)).toEqual([]);
        // The failed read was a prefetch (retried in place at its boundary) or an earlier one a run waited on (read again).
        if (r.diskReadsFailed > 0) survived++;
      } catch (err) {
        expect(err).toBeInstanceOf(ExpertReadError); // an admitted miss's own read: typed, named
      }
    }
    expect(survived).toBeGreaterThan(0); // some failure hit a prefetch, and the request went on
  });
});
