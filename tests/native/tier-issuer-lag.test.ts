/**
 * A late issuer (debug build: MOETIER_DEBUG_ISSUER_LAG_US makes the issuer thread sleep between
 * taking a layer's boundary post and handling it, as a preempted thread would on a busy machine)
 * never issues a swap outside the eval whose boundary posted it. Issued later, it would evict its
 * victim before the layer runs again, after the poll that orders the victims' host copies, and
 * that layer's misses would be computed from the container (lazy). Such a post is stale: counted,
 * nothing issued; the layer's next boundary issues the swap. Runs in the debug-asserts project only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from '../engine/tier-helpers.js';

const debugBuild = process.env.MOETIER_EXPECT_DEBUG_ASSERTS === '1';
const decodeTokens = 24;

describe.runIf(debugBuild)('the issuer, late by more than a step (debug build)', () => {
  const { dir, cleanup } = tempDir('moetier-issuer-lag-');
  let model: string;
  let prompt: number[];
  let reference: number[];
  beforeAll(async () => {
    model = await tinyModel(dir, 'q4_0', 13);
    ({ prompt, reference } = await referenceRun(
      model,
      'the ship will sail across the sea and we compile the function to debug the program then the rocket will launch',
      decodeTokens,
    ));
  });
  afterAll(() => {
    delete process.env.MOETIER_DEBUG_ISSUER_LAG_US;
    cleanup();
  });

  // Lags from a fraction of a decode step to several: which ones catch a post in hand across a
  // poll is up to the scheduler, so every lag must keep the copies, and some lag must go stale.
  it('issues no stale post: no decode miss computed from the container, the same tokens', async () => {
    let stale = 0;
    for (const lagUs of [100, 300, 1000, 3000]) {
      process.env.MOETIER_DEBUG_ISSUER_LAG_US = String(lagUs); // read when the tier starts its issuer
      const engine = await openEngine({
        model,
        threads: 1,
        contextTokens: 128,
        slotsPerLayer: 2,
        heat: false,
        lfru: { tickTokens: 4 },
        prefillReplan: { enabled: true, guard: false },
        upload: { inflightTransfersMax: 1 }, // the replan's swaps wait at the gate, and the issuer issues them in the decode
      });
      try {
        const ids = await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false });
        const tier = engine.tierStats()!;
        expect(ids).toEqual(reference);
        expect(tier.swapsIssuedByIssuer).toBeGreaterThan(0);
        expect(tier.misses).toBeGreaterThan(0);
        expect({ lagUs, lazyMisses: tier.lazyMisses }).toEqual({ lagUs, lazyMisses: 0 });
        stale += tier.issuerStalePosts!;
      } finally {
        await engine.close();
      }
    }
    expect(stale).toBeGreaterThan(0); // the lags made posts stale: the path ran
  });
});
