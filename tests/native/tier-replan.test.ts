/**
 * The native side of prefill replan: evalAsync's onLayerRouted hook posts each layer's rows per
 * expert while later layers compute, and tierRequestSwap's issueNow starts a layer's swaps at
 * once when that layer is not being computed (else at its end). On the fake backend's virtual
 * clock, the swaps requested from layer L's counts start after L's compute ends and overlap
 * L + 1's; swaps started while evals run never change a result (cpu backend).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { NativeContextHandle, NativeTierHandle, NativeTierUpload } from '../../src/native/binding.js';
import { mapModel } from './forward-helpers.js';
import { cpuBackend, fakeBackend, greedyRun, native, range, tinyModel } from './tier-helpers.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { LAYER_STAT_FIELDS } from '../../src/native/constants.js';

const SLOTS = 3;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Victim-first pairs for one layer: residents by count ascending vs non-residents by count descending. */
function pairs(counts: Int32Array, resident: (e: number) => boolean, cap: number): Array<[number, number]> {
  const ids = Array.from(counts, (_, e) => e);
  const victims = ids.filter(resident).sort((a, b) => counts[a] - counts[b] || a - b);
  const newcomers = ids.filter((e) => !resident(e)).sort((a, b) => counts[b] - counts[a] || a - b);
  const out: Array<[number, number]> = [];
  for (let i = 0; i < Math.min(victims.length, newcomers.length, cap) && counts[newcomers[i]] > counts[victims[i]]; i++)
    out.push([victims[i], newcomers[i]]);
  return out;
}

function prompt(n: number, nVocab: number): Int32Array {
  return Int32Array.from({ length: n }, (_, i) => (i * 37 + 11) % nVocab);
}

describe('onLayerRouted', () => {
  const m = tinyModel('Q8_0', { nExpert: 8 });
  const hp = m.model.hparams;
  afterAll(() => m.close());

  it("posts every layer's counts (they match the routes) before the eval settles; its cost is counted", async () => {
    const ctx = native.createContext(m.handle, { nCtx: 64, threads: 2 });
    const backend = cpuBackend();
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
    try {
      const tokens = prompt(40, hp.nVocab);
      const routes = new Int32Array(tokens.length * hp.nLayer * hp.nExpertUsed);
      const seen: Array<{ layer: number; counts: number[] }> = [];
      await native.evalAsync(ctx, tokens, 0, new Float32Array(hp.nVocab), {
        routes,
        onLayerRouted: (layer, counts) => seen.push({ layer, counts: Array.from(counts) }),
      });
      expect(seen.map((s) => s.layer)).toEqual(Array.from(range(hp.nLayer)));
      for (const { layer, counts } of seen) {
        const expected = new Array<number>(hp.nExpert).fill(0);
        for (let t = 0; t < tokens.length; t++)
          for (let k = 0; k < hp.nExpertUsed; k++) expected[routes[(t * hp.nLayer + layer) * hp.nExpertUsed + k]]++;
        expect(counts).toEqual(expected);
      }
      const stats = native.tierStats(tier);
      expect(stats.layerHookCalls).toBe(hp.nLayer);
      expect(stats.layerHookNs).toBeGreaterThan(0);
      expect(stats.layerHookDropped).toBe(0);
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
  });

  it('a throw in the hook rejects the eval; bad uses are refused', async () => {
    const ctx = native.createContext(m.handle, { nCtx: 64, threads: 1 });
    const logits = new Float32Array(hp.nVocab);
    const tokens = prompt(4, hp.nVocab);
    await expect(native.evalAsync(ctx, tokens, 0, logits, { onLayerRouted: () => {} })).rejects.toThrow(/needs a tier/);
    const backend = cpuBackend();
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
    try {
      expect(() => native.evalSync(ctx, tokens, 0, logits, { onLayerRouted: () => {} })).toThrow(/needs evalAsync/);
      await expect(native.evalAsync(ctx, tokens, 0, logits, { onLayerRouted: 5 as never })).rejects.toThrow(
        /must be a function/,
      );
      await expect(
        native.evalAsync(ctx, tokens, 0, logits, {
          onLayerRouted: () => {
            throw new Error('hook broke');
          },
        }),
      ).rejects.toThrow('hook broke');
      await native.evalAsync(ctx, tokens, 0, logits); // the context is usable again
      expect(native.tierStats(tier).leases).toBe(0);
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
  });
});

describe('tierRequestSwap issueNow', () => {
  const m = tinyModel('Q8_0');
  const hp = m.model.hparams;
  afterAll(() => m.close());

  it('between evals: started at once (1), in place; without issueNow: queued (0) until the layer computes', async () => {
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 1 });
    const backend = cpuBackend();
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
    try {
      for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(SLOTS));
      expect(native.tierRequestSwap(tier, 0, 0, 5, 1, { issueNow: true })).toBe(1);
      expect(native.tierRequestSwap(tier, 1, 0, 5, 2)).toBe(0);
      for (let i = 0; i < 100 && native.backendStats(backend).uploadsInFlight > 0; i++) await sleep(2);
      const polled = native.tierPoll(tier);
      expect(polled.uploads.map((u) => [u.taskId, u.ok, u.inPlace])).toEqual([[1, true, true]]);
      expect(polled.evicted).toEqual([{ layer: 0, expert: 0 }]);
      expect(native.tierStats(tier).swapsStartedNow).toBe(1);
      await native.evalAsync(ctx, Int32Array.of(3), 0, new Float32Array(hp.nVocab));
      // The boundary hands the queued swap to the tier's issuer thread: it is issued soon after.
      const late: number[] = [];
      for (let i = 0; i < 200 && late.length === 0; i++, await sleep(2))
        late.push(...native.tierPoll(tier).uploads.map((u) => u.taskId));
      expect(late).toEqual([2]);
      expect(native.tierStats(tier).swapsIssuedByIssuer).toBe(1);
      await native.evalAsync(ctx, Int32Array.of(4), 1, new Float32Array(hp.nVocab)); // promotes both
      const r = native.tierExpertStates(tier).slots;
      for (const l of [0, 1]) {
        expect(r[l * hp.nExpert + 5]).toBeGreaterThanOrEqual(0);
        expect(r[l * hp.nExpert + 0]).toBe(-1);
      }
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
  });

  it('cpu: swaps started from the hook while evals run (any layer, current ones included) never change a result', async () => {
    const baseCtx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
    const expected = await greedyRun(m, baseCtx, 8);
    native.freeContext(baseCtx);
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
    const backend = cpuBackend();
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
    try {
      for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(SLOTS));
      let task = 1;
      let started = 0;
      const churn = (layer: number) => {
        const r = native.tierExpertStates(tier).slots;
        for (const target of [layer, (layer + 1) % hp.nLayer]) {
          const victim = [...range(hp.nExpert)].find((e) => r[target * hp.nExpert + e] >= 0);
          const newcomer = [...range(hp.nExpert)].find((e) => r[target * hp.nExpert + e] < 0 && e !== victim);
          if (victim === undefined || newcomer === undefined) continue;
          if (native.tierRequestSwap(tier, target, victim, newcomer, task++, { issueNow: true }) === 1) started++;
        }
      };
      // greedyRun's own evals carry no hook: route every eval through one that does.
      const evalAsync = native.evalAsync;
      (native as { evalAsync: typeof evalAsync }).evalAsync = (c: NativeContextHandle, t, p, l, o) =>
        evalAsync(c, t, p, l, { ...o, onLayerRouted: (layer) => churn(layer) });
      let steps;
      try {
        steps = await greedyRun(m, ctx, 8, async () => {
          for (let i = 0; i < 100 && native.backendStats(backend).uploadsInFlight > 0; i++) await sleep(1);
          native.tierPoll(tier);
        });
      } finally {
        (native as { evalAsync: typeof evalAsync }).evalAsync = evalAsync;
      }
      expect(started).toBeGreaterThan(0);
      expect(steps.map((s) => s.token)).toEqual(expected.map((s) => s.token));
      steps.forEach((s, i) =>
        expect(Buffer.from(s.logits.buffer).equals(Buffer.from(expected[i].logits.buffer))).toBe(true),
      );
      expect(native.tierStats(tier).leases).toBe(0);
      native.tierStats(tier).slotsUsed.forEach((used) => expect(used).toBeLessThanOrEqual(SLOTS));
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
  });
});

describe('prefill replan timing (fake backend, virtual clock)', () => {
  // Layers heavy enough (a 256-row prefill through 256 x 512 experts on one thread: tens of ms
  // each) that the JS thread answers a layer's counts while the next layer is still computing.
  const m = mapModel(
    tinyHParams('qwen3moe', { nLayer: 4, nEmbd: 256, nFfExp: 512, nHead: 4, nHeadKv: 2, headDim: 64 }),
    {
      type: 'Q8_0',
      seed: 9,
      routerScale: 8,
    },
  );
  const hp = m.model.hparams;
  afterAll(() => m.close());

  async function replanPrefill(tier: NativeTierHandle, ctx: NativeContextHandle) {
    const residency = native.tierExpertStates(tier).slots;
    const requested = new Map<number, number>(); // taskId -> layer
    let task = 1;
    const tokens = prompt(256, hp.nVocab);
    const layerStats = new Float64Array(hp.nLayer * LAYER_STAT_FIELDS);
    await native.evalAsync(ctx, tokens, 0, new Float32Array(hp.nVocab), {
      layerStats,
      onLayerRouted: (layer, counts) => {
        for (const [victim, newcomer] of pairs(counts, (e) => residency[layer * hp.nExpert + e] >= 0, 2)) {
          expect(
            native.tierRequestSwap(tier, layer, victim, newcomer, task, { issueNow: true }),
          ).toBeGreaterThanOrEqual(0);
          requested.set(task++, layer);
        }
      },
    });
    return { requested, layerStats };
  }

  it('the swaps of layer L start after L computes and overlap L + 1; each lands in place, once', async () => {
    const ctx = native.createContext(m.handle, { nCtx: 288, threads: 1 });
    const backend = fakeBackend({ bandwidthBytesPerS: 4e9, computeBytesPerS: 2e9 });
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(SLOTS) });
    try {
      for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(SLOTS));
      const { requested, layerStats } = await replanPrefill(tier, ctx);
      expect(requested.size).toBeGreaterThanOrEqual(hp.nLayer); // the prompt's routing disagrees with experts 0..2
      for (let i = 0; i < 200 && native.backendStats(backend).uploadsInFlight > 0; i++) await sleep(2);
      const uploads: NativeTierUpload[] = native.tierPoll(tier).uploads;
      expect(uploads.map((u) => u.taskId).sort((a, b) => a - b)).toEqual([...requested.keys()]);
      const end = (l: number) => layerStats[l * LAYER_STAT_FIELDS + 1];
      for (const u of uploads) {
        expect(u.ok && u.inPlace).toBe(true);
        expect(u.layer).toBe(requested.get(u.taskId));
        expect(u.startNs).toBeGreaterThanOrEqual(end(u.layer)); // never while its own layer computes
        if (u.layer + 1 < hp.nLayer && uploads.filter((v) => v.layer === u.layer)[0] === u)
          expect(u.startNs).toBeLessThan(end(u.layer + 1)); // the layer's first swap overlaps L + 1's compute
      }
      expect(native.tierStats(tier).leases).toBe(0);
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
  });
});
