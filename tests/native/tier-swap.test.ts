/**
 * Swaps through the native tier: issued at the boundary after their layer, in place or by
 * free-then-upload, reported once by tierPoll; the newcomer resident from the layer's next
 * start, the victim a miss from its eviction on. Results never change (cpu kernels on every
 * backend). On the fake backend's virtual clock, an upload for layer L starts after L's compute
 * and overlaps L + 1's.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { NativeBackendHandle, NativeTierUpload } from '../../src/native/binding.js';
import { cpuBackend, fakeBackend, greedyRun, native, range, tinyModel, type Step } from './tier-helpers.js';
import { LAYER_STAT_FIELDS as F } from '../../src/native/constants.js';

const m = tinyModel('Q8_0');
const hp = m.model.hparams;
const SLOTS = 3;
afterAll(() => m.close());

async function baseline(decode: number): Promise<Step[]> {
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  try {
    return await greedyRun(m, ctx, decode);
  } finally {
    native.freeContext(ctx);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Warm experts 0..SLOTS-1 everywhere; after the prefill, swap 0 -> 5 and 1 -> 6 in every layer. */
async function swapRun(backend: NativeBackendHandle, decode: number) {
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
  const uploads: NativeTierUpload[] = [];
  const evicted: Array<{ layer: number; expert: number }> = [];
  const drain = () => {
    const p = native.tierPoll(tier);
    uploads.push(...p.uploads);
    evicted.push(...p.evicted);
  };
  try {
    for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(SLOTS));
    const before = native.tierExpertStates(tier).slots;
    const steps = await greedyRun(m, ctx, decode, async (s) => {
      const stats = native.tierStats(tier);
      expect(stats.leases).toBe(0);
      stats.slotsUsed.forEach((used, l) => expect(used).toBeLessThanOrEqual(stats.slotsBudget[l]));
      if (s === 0)
        for (let l = 0; l < hp.nLayer; l++) {
          expect(native.tierRequestSwap(tier, l, 0, 5, 100 + l)).toBe(0);
          expect(native.tierRequestSwap(tier, l, 1, 6, 200 + l)).toBe(0);
        }
      // The cpu backend copies on its own thread: let the copies finish between steps.
      for (let i = 0; i < 50 && native.backendStats(backend).uploadsInFlight > 0; i++) await sleep(2);
      drain();
    });
    drain();
    const container = native.tierExpertBytes(tier).container;
    return {
      steps,
      uploads,
      evicted,
      before,
      after: native.tierExpertStates(tier).slots,
      stats: native.tierStats(tier),
      container,
    };
  } finally {
    native.freeTier(tier);
    native.freeContext(ctx);
  }
}

function expectLanded(r: Awaited<ReturnType<typeof swapRun>>, expected: Step[]): void {
  expect(r.steps.map((s) => s.token)).toEqual(expected.map((s) => s.token));
  r.steps.forEach((s, i) =>
    expect(Buffer.from(s.logits.buffer).equals(Buffer.from(expected[i].logits.buffer))).toBe(true),
  );
  // Each upload reported once, every one landed, in the victim's slot.
  expect(r.uploads.map((u) => u.taskId).sort()).toEqual(
    [...range(hp.nLayer)].flatMap((l) => [100 + l, 200 + l]).sort(),
  );
  for (const u of r.uploads) {
    expect(u.ok).toBe(true);
    expect(u.bytes).toBe(r.container);
    expect(u.issuedNs).toBeLessThanOrEqual(u.startNs);
    expect(u.startNs).toBeLessThanOrEqual(u.endNs);
    expect(u.victim).toBe(u.expert === 5 ? 0 : 1);
    expect(r.after[u.layer * hp.nExpert + u.expert]).toBe(r.before[u.layer * hp.nExpert + u.victim]);
    expect(r.after[u.layer * hp.nExpert + u.victim]).toBe(-1);
  }
  expect(r.evicted.map((e) => `${e.layer}:${e.expert}`).sort()).toEqual(
    [...range(hp.nLayer)].flatMap((l) => [`${l}:0`, `${l}:1`]).sort(),
  );
  // The newcomers compute from slots in the last steps: every layer's pairs to 5 or 6 are hits.
  const last = r.steps[r.steps.length - 1];
  for (let l = 0; l < hp.nLayer; l++) {
    const routed = Array.from(last.routes.subarray(l * hp.nExpertUsed, (l + 1) * hp.nExpertUsed));
    expect(last.stats[l * F + 4]).toBe(routed.filter((x) => x === 2 || x === 5 || x === 6).length);
  }
  expect(r.stats.leases).toBe(0);
}

describe('tier swaps', () => {
  it('cpu: in place; residency moves, victims are evicted once, tokens unchanged', async () => {
    const expected = await baseline(6);
    const backend = cpuBackend();
    const r = await swapRun(backend, 6);
    expectLanded(r, expected);
    expect(r.uploads.every((u) => u.inPlace && !u.fellBack)).toBe(true);
    expect(native.backendStats(backend).leases).toBe(0);
    native.destroyBackend(backend);
  });

  it('fake refusing overwrite: free-then-upload (fellBack), the swaps still land', async () => {
    const expected = await baseline(6);
    const backend = fakeBackend({ overwriteSupported: false });
    const r = await swapRun(backend, 6);
    expectLanded(r, expected);
    expect(r.uploads.every((u) => !u.inPlace && u.fellBack)).toBe(true);
    native.destroyBackend(backend);
  });

  it('fake failing a transfer half-way: that swap is retried as free-then-upload and lands', async () => {
    const expected = await baseline(6);
    const container = await (async () => {
      const ctx = native.createContext(m.handle, { nCtx: 8, threads: 1 });
      const b = cpuBackend();
      const t = native.createTier(ctx, b, { slotsPerLayer: Array(hp.nLayer).fill(0) });
      const bytes = native.tierExpertBytes(t).container;
      native.freeTier(t);
      native.freeContext(ctx);
      native.destroyBackend(b);
      return bytes;
    })();
    const warmBytes = hp.nLayer * SLOTS * container;
    const backend = fakeBackend({ failTransferAfterBytes: warmBytes + container / 2 });
    const r = await swapRun(backend, 6);
    expectLanded(r, expected);
    expect(native.backendStats(backend).uploadsFailed).toBe(1);
    const retried = r.uploads.filter((u) => u.fellBack);
    expect(retried).toHaveLength(1);
    expect(retried[0]).toMatchObject({ layer: 0, taskId: 100, inPlace: false, ok: true });
    expect(r.uploads.filter((u) => u.inPlace)).toHaveLength(2 * hp.nLayer - 1);
    native.destroyBackend(backend);
  });

  it('fake clock: an upload for layer L starts after L computes and overlaps L + 1', async () => {
    const backend = fakeBackend({ bandwidthBytesPerS: 1e9, transferFixedUs: 2, computeBytesPerS: 2e9 });
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
    try {
      for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(SLOTS));
      const steps = await greedyRun(m, ctx, 2, (s) => {
        if (s === 0) for (let l = 0; l < hp.nLayer - 1; l++) expect(native.tierRequestSwap(tier, l, 0, 4, l)).toBe(0);
      });
      await sleep(20);
      const { uploads } = native.tierPoll(tier);
      expect(uploads).toHaveLength(hp.nLayer - 1);
      const stats = steps[1].stats; // the step whose boundaries issued them
      for (const u of uploads) {
        const at = (l: number, i: number) => stats[l * F + i];
        expect(u.issuedNs).toBe(at(u.layer, 1)); // the boundary: layer L's end stamp
        expect(u.startNs).toBeGreaterThanOrEqual(at(u.layer, 1));
        expect(u.startNs).toBeLessThan(at(u.layer + 1, 1)); // overlaps layer L + 1 ...
        expect(u.endNs).toBeGreaterThan(at(u.layer + 1, 0));
        expect(u.endNs).toBeGreaterThan(u.startNs);
      }
      // Layers on the virtual clock: back to back, each moving it by its weight bytes.
      for (let l = 1; l < hp.nLayer; l++) expect(stats[l * F]).toBe(stats[(l - 1) * F + 1]);
      expect(stats[1]).toBeGreaterThan(stats[0]);
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
  });
});
