/**
 * The tier's invariants and refusals: no lease outlives an eval (after success, after an
 * error, after freeTier), the slot budget is never exceeded, and bad arguments throw instead
 * of crashing.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { buildHostCopies, cpuBackend, native, range, TIER_SWAP_CODES, tinyModel } from './tier-helpers.js';

const m = tinyModel('Q4_0');
const f32 = tinyModel('F32');
const hp = m.model.hparams;
afterAll(() => {
  m.close();
  f32.close();
});

function setup(slots = 3) {
  const ctx = native.createContext(m.handle, { nCtx: 16, threads: 2 });
  const backend = cpuBackend();
  const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(slots) });
  return {
    ctx,
    backend,
    tier,
    close() {
      try {
        native.freeTier(tier);
      } catch {
        // freed by the test already
      }
      native.freeContext(ctx);
      native.destroyBackend(backend);
    },
  };
}

describe('tier invariants', () => {
  it('no lease after an eval, after an eval that fails, and after freeTier; the budget holds', async () => {
    const ctx = native.createContext(m.handle, { nCtx: 16, threads: 2 });
    const backend = cpuBackend();
    let tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(3) });
    const arena = buildHostCopies(m, tier);
    native.freeTier(tier);
    tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(3), ...arena });
    for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(3));
    const logits = new Float32Array(hp.nVocab);
    await native.evalAsync(ctx, Int32Array.of(1, 2, 3), 0, logits);
    expect(native.tierStats(tier).leases).toBe(0);
    expect(native.leaseCount(backend)).toBe(0);
    // A host copy offset past the arena: the eval fails with a message naming it, and leaves no lease.
    const saved = Int32Array.from(arena.hostCopyOffsets);
    for (let i = 0; i < saved.length; i++) Atomics.store(arena.hostCopyOffsets, i, arena.hostCopies.length);
    await expect(native.evalAsync(ctx, Int32Array.of(4), 3, logits)).rejects.toThrow(
      /hostCopyOffsets\[\d+\] \(layer 0, expert \d\)/,
    );
    expect(() => native.evalSync(ctx, Int32Array.of(4), 3, logits)).toThrow(/hostCopyOffsets/);
    expect(native.leaseCount(backend)).toBe(0);
    expect(native.tierStats(tier).leases).toBe(0);
    // Repaired, the context works again.
    arena.hostCopyOffsets.set(saved);
    await native.evalAsync(ctx, Int32Array.of(4), 3, logits);
    expect(logits.some((v) => v !== 0)).toBe(true);
    const stats = native.tierStats(tier);
    stats.slotsUsed.forEach((used, l) => expect(used).toBeLessThanOrEqual(stats.slotsBudget[l]));
    expect(native.backendStats(backend).reservedBytes).toBeLessThanOrEqual(native.backendStats(backend).budgetBytes);
    // Warmstart cannot pass the budget.
    await expect(native.tierWarmstart(tier, 0, Int32Array.of(3))).rejects.toThrow(/0 free slots of 3/);
    native.freeTier(tier);
    expect(native.leaseCount(backend)).toBe(0);
    const slots = native.backendStats(backend).slots;
    for (let s = slots - 3 * hp.nLayer; s < slots; s++) expect(native.slotState(backend, s)).toBe('empty');
    native.freeContext(ctx);
    native.destroyBackend(backend);
  });

  it('answers swap requests with codes: not resident, already resident', async () => {
    const t = setup();
    try {
      await native.tierWarmstart(t.tier, 1, range(3));
      expect(native.tierRequestSwap(t.tier, 1, 7, 6, 1)).toBe(TIER_SWAP_CODES.notResident);
      expect(native.tierRequestSwap(t.tier, 1, 0, 2, 1)).toBe(TIER_SWAP_CODES.alreadyResident);
      expect(native.tierRequestSwap(t.tier, 1, 0, 5, 1)).toBe(TIER_SWAP_CODES.ok);
      expect(native.tierRequestSwap(t.tier, 1, 0, 6, 1)).toBe(TIER_SWAP_CODES.notResident); // 0 is already leaving
      expect(native.tierRequestSwap(t.tier, 1, 1, 5, 1)).toBe(TIER_SWAP_CODES.alreadyResident); // 5 is already coming
      expect(native.tierRequestSwap(t.tier, 0, 0, 1, 1)).toBe(TIER_SWAP_CODES.notResident); // layer 0 has none
      expect(native.tierExpertStates(t.tier).slots[1 * hp.nExpert + 0]).toBeGreaterThanOrEqual(0); // queued, not issued yet
    } finally {
      t.close();
    }
  });

  it('queues every resident of a layer for a swap at once; the gate issues them as its budget frees (8 transfers by default)', async () => {
    const big = tinyModel('Q8_0', { nExpert: 40, nExpertUsed: 2, nLayer: 1 });
    const ctx = native.createContext(big.handle, { nCtx: 8, threads: 1 });
    const backend = cpuBackend();
    const tier = native.createTier(ctx, backend, { slotsPerLayer: [20] });
    try {
      await native.tierWarmstart(tier, 0, range(20));
      const codes = Array.from({ length: 20 }, (_, i) => native.tierRequestSwap(tier, 0, i, 20 + i, i));
      expect(codes.every((c) => c === TIER_SWAP_CODES.ok)).toBe(true);
      // The 21st swap has no resident victim left: the structure bounds the queue, not a limit.
      expect(native.tierRequestSwap(tier, 0, 0, 39, 99)).toBe(TIER_SWAP_CODES.notResident);
      await native.evalAsync(ctx, Int32Array.of(1), 0, new Float32Array(big.model.hparams.nVocab));
      const late: number[] = [];
      for (let i = 0; i < 500 && late.length < 20; i++, await new Promise((r) => setTimeout(r, 2)))
        late.push(...native.tierPoll(tier).uploads.map((u) => u.taskId));
      expect(late.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      expect(native.tierStats(tier).slotsUsed[0]).toBe(20);
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
      big.close();
    }
  });
});

describe('tier refusals', () => {
  it('createTier: bad handles and options throw', () => {
    const ctx = native.createContext(m.handle, { nCtx: 8, threads: 1 });
    const backend = cpuBackend();
    const slots = Array(hp.nLayer).fill(1);
    try {
      expect(() => native.createTier(m.handle as never, backend, { slotsPerLayer: slots })).toThrow(TypeError);
      expect(() => native.createTier(ctx, ctx as never, { slotsPerLayer: slots })).toThrow(TypeError);
      expect(() => native.createTier(ctx, backend, undefined as never)).toThrow(/options/);
      expect(() => native.createTier(ctx, backend, { slotsPerLayer: [1] })).toThrow(/expected 3 counts/);
      expect(() => native.createTier(ctx, backend, { slotsPerLayer: [1, -1, 1] })).toThrow(/slotsPerLayer\[1\]/);
      expect(() => native.createTier(ctx, backend, { slotsPerLayer: [1, 9, 1] })).toThrow(/slotsPerLayer\[1\]/);
      expect(() => native.createTier(ctx, backend, { slotsPerLayer: [1, 1.5, 1] })).toThrow(/slotsPerLayer\[1\]/);
      expect(() => native.createTier(ctx, backend, { slotsPerLayer: slots, hostCopies: new Uint8Array(8) })).toThrow(
        /both or neither/,
      );
      expect(() =>
        native.createTier(ctx, backend, {
          slotsPerLayer: slots,
          hostCopies: new Uint8Array(8),
          hostCopyOffsets: new Int32Array(3),
        }),
      ).toThrow(/nLayer x nExpert/);
      const tiny = native.createBackend('cpu', { budgetBytes: 4096 });
      expect(() => native.createTier(ctx, tiny, { slotsPerLayer: Array(hp.nLayer).fill(8) })).toThrow(/budget/);
      native.destroyBackend(tiny);
      const tier = native.createTier(ctx, backend, { slotsPerLayer: slots });
      expect(() => native.createTier(ctx, backend, { slotsPerLayer: slots })).toThrow(/already has a tier/);
      expect(() => native.createModel(tier as never, { hparams: hp, tensors: [] })).toThrow(TypeError);
      native.freeTier(tier);
      expect(() => native.freeTier(tier)).toThrow(/already freed/);
      expect(() => native.tierStats(tier)).toThrow(/already freed/);
      expect(() => native.tierRequestSwap(tier, 0, 0, 1, 0)).toThrow(/already freed/);
    } finally {
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
    // An F32 container has no exact int8 copy.
    const fctx = native.createContext(f32.handle, { nCtx: 8, threads: 1 });
    const fb = cpuBackend();
    const offsets = new Int32Array(hp.nLayer * hp.nExpert).fill(-1);
    expect(() =>
      native.createTier(fctx, fb, { slotsPerLayer: slots, hostCopies: new Uint8Array(8), hostCopyOffsets: offsets }),
    ).toThrow(/Q4_0 \/ Q8_0/);
    expect(() => native.requantizeExpertToQ8(f32.handle, 0, 0, new Uint8Array(1 << 16), 0)).toThrow(/not Q4_0/);
    native.freeContext(fctx);
    native.destroyBackend(fb);
  });

  it('the other verbs refuse bad arguments', async () => {
    const t = setup();
    try {
      for (const [layer, victim, newcomer, task] of [
        [-1, 0, 1, 0],
        [3, 0, 1, 0],
        [0, 8, 1, 0],
        [0, 0, -1, 0],
        [0, 0, 1, 0.5],
        [0.5, 0, 1, 0],
      ])
        expect(() => native.tierRequestSwap(t.tier, layer, victim, newcomer, task)).toThrow(RangeError);
      expect(() => native.tierStats(t.ctx as never)).toThrow(TypeError);
      await expect(native.tierWarmstart(t.tier, 5, range(1))).rejects.toThrow(RangeError);
      await expect(native.tierWarmstart(t.tier, 0, [0] as never)).rejects.toThrow(TypeError);
      await expect(native.tierWarmstart(t.tier, 0, Int32Array.of(1, 1))).rejects.toThrow(/twice/);
      await expect(native.tierWarmstart(t.tier, 0, Int32Array.of(8))).rejects.toThrow(/experts\[0\]/);
      await expect(native.tierWarmstart(t.tier, 0, range(4))).rejects.toThrow(/free slots/);
      expect(native.tierExpertStates(t.tier).slots.every((s) => s === -1)).toBe(true); // refused: nothing changed
      const need = native.tierExpertBytes(t.tier).hostCopy;
      expect(need).toBeGreaterThan(0);
      expect(() => native.requantizeExpertToQ8(m.handle, 0, 0, new Uint8Array(need - 1), 0)).toThrow(/room for/);
      expect(() => native.requantizeExpertToQ8(m.handle, 0, 0, new Uint8Array(need), 1)).toThrow(/room for/);
      expect(() => native.requantizeExpertToQ8(m.handle, 3, 0, new Uint8Array(need), 0)).toThrow(RangeError);
      expect(() => native.requantizeExpertToQ8(m.handle, 0, 0, new Float32Array(need) as never, 0)).toThrow(TypeError);
      expect(() => native.requantizeExpertToQ8(t.ctx as never, 0, 0, new Uint8Array(need), 0)).toThrow(TypeError);
      expect(() =>
        native.evalSync(t.ctx, Int32Array.of(1), 0, new Float32Array(hp.nVocab), { layerStats: new Float64Array(5) }),
      ).toThrow(/layerStats/);
      expect(() =>
        native.evalSync(t.ctx, Int32Array.of(1), 0, new Float32Array(hp.nVocab), {
          layerStats: new Float32Array(18) as never,
        }),
      ).toThrow(/Float64Array/);
      const running = native.evalAsync(t.ctx, Int32Array.of(1), 0, new Float32Array(hp.nVocab));
      expect(() => native.freeTier(t.tier)).toThrow(/eval is running/);
      await running;
    } finally {
      t.close();
    }
  });
});
