/**
 * The tier's one gate (issue 26; mt_tier.h, native/tier/tier_gate.cc): every upload into a slot is
 * counted under one budget and one ledger by class; the placement's swaps wait, in order, for room
 * (issued at their layer's boundary or an issueNow; one held back goes once room frees); a full queue refuses; a request's end cancels
 * what still waits; the bits never change.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend, greedyRun, native, range, tinyModel } from './tier-helpers.js';

const m = tinyModel('Q8_0');
const hp = m.model.hparams;
const SLOTS = 3;
afterAll(() => m.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const STARTED = 1,
  QUEUED = 0,
  QUEUE_FULL = -4;

async function setup() {
  const backend = cpuBackend();
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
  for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(SLOTS));
  const settle = async () => {
    for (let i = 0; i < 100 && native.backendStats(backend).uploadsInFlight > 0; i++) await sleep(2);
    return native.tierPoll(tier);
  };
  const free = () => {
    native.freeTier(tier);
    native.freeContext(ctx);
    native.destroyBackend(backend);
  };
  return { backend, ctx, tier, settle, free };
}

describe("the tier's one gate", () => {
  it('counts the warm start, holds swaps past its budget in order, refuses past its queue, cancels on request', async () => {
    const { tier, settle, free } = await setup();
    try {
      const bytes = native.tierExpertBytes(tier).container;
      let g = native.tierGate(tier);
      expect(g).toMatchObject({
        inflightBytesMax: 512 * 2 ** 20,
        inflightTransfersMax: 8,
        queueDepthMax: 4096,
        inflightBytes: 0,
        inflightTransfers: 0,
        swapsQueued: 0,
      });
      expect(g.byClass.warm).toMatchObject({ issued: hp.nLayer * SLOTS, completed: hp.nLayer * SLOTS, failed: 0 });

      native.tierSetGate(tier, 1 << 30, 1, 2); // one transfer at a time, two swaps queued at most
      expect(native.tierRequestSwap(tier, 0, 0, 5, 11, { issueNow: true })).toBe(STARTED);
      expect(native.tierRequestSwap(tier, 0, 1, 6, 12, { issueNow: true })).toBe(QUEUED); // no room: it waits
      expect(native.tierRequestSwap(tier, 0, 2, 7, 13)).toBe(QUEUED);
      g = native.tierGate(tier);
      expect(g).toMatchObject({ inflightTransfers: 1, inflightBytes: bytes, swapsQueued: 2 });
      expect(native.tierRequestSwap(tier, 1, 0, 5, 14)).toBe(QUEUE_FULL);
      expect(native.tierGate(tier).byClass.swap.refused).toBe(1);

      // The first lands and its bytes leave the count; the swap held back at its issueNow is due
      // at once and the poll issues it; 13, queued since and never held, waits for its boundary.
      const first = await settle();
      expect(first.uploads.map((u) => u.taskId)).toEqual([11]);
      expect(native.tierGate(tier)).toMatchObject({ inflightTransfers: 1, swapsQueued: 1 });
      const second = await settle();
      expect(second.uploads.map((u) => u.taskId)).toEqual([12]);
      g = native.tierGate(tier);
      expect(g).toMatchObject({ inflightTransfers: 0, inflightBytes: 0, swapsQueued: 1 });
      expect(g.byClass.swap).toMatchObject({ issued: 2, completed: 2 });

      // A request ended: what still waits is dropped, its victim resident again.
      expect(native.tierCancelSwaps(tier)).toBe(1);
      const { states } = native.tierExpertStates(tier);
      expect(states[0 * hp.nExpert + 2]).toBe(2); // resident
      expect(states[0 * hp.nExpert + 7]).toBe(0); // none
      g = native.tierGate(tier);
      expect(g).toMatchObject({ swapsQueued: 0 });
      expect(g.byClass.swap.cancelled).toBe(1);
      expect(() => native.tierSetGate(tier, 0, 1, 1)).toThrow(/inflightBytesMax/);
      expect(() => native.tierSetGate(tier, 1, 0, 1)).toThrow(/inflightTransfersMax/);
    } finally {
      free();
    }
  });

  it('under a one-transfer budget, swaps queued in every layer go out at their boundaries one at a time, and the bits are unchanged', async () => {
    const plain = await (async () => {
      const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
      try {
        return await greedyRun(m, ctx, 6);
      } finally {
        native.freeContext(ctx);
      }
    })();
    const { ctx, tier, settle, free } = await setup();
    try {
      native.tierSetGate(tier, 1 << 30, 1, 4096);
      let peak = 0;
      const steps = await greedyRun(m, ctx, 6, async (s) => {
        if (s === 0)
          for (let l = 0; l < hp.nLayer; l++) expect(native.tierRequestSwap(tier, l, 0, 5, 100 + l)).toBe(QUEUED);
        peak = Math.max(peak, native.tierGate(tier).inflightTransfers);
        await settle();
      });
      expect(steps.map((s) => s.token)).toEqual(plain.map((s) => s.token));
      await settle();
      const g = native.tierGate(tier);
      expect(peak).toBeLessThanOrEqual(1);
      expect(g.byClass.swap.issued + g.swapsQueued).toBe(hp.nLayer);
      expect(g.byClass.swap.issued).toBeGreaterThan(0);
      expect(g.inflightTransfers).toBe(0);
    } finally {
      free();
    }
  });
});
