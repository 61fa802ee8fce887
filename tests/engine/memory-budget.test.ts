/**
 * memoryBudgetBytes (issue 12, part 1): the engine plans its memory. A budget that holds every
 * expert runs the plain engine; a smaller one runs the disk tier with the slots that fit (the
 * misses read from the file), a budget below the fixed parts is refused with the numbers; the
 * tokens are the same for every budget. On a cuda backend the budget bounds the host's parts and
 * the device holds the slots asked for (below).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { MemoryBudgetError } from '../../src/engine/memory-plan.js';
import { expertContainerBytes } from '../../src/engine/tier/experts.js';
import type { LoadedModel } from '../../src/model/load.js';
import { IO_QUEUE_DEPTH_DEFAULT } from '../../src/native/constants.js';
import { collect, referenceRun, tempDir, tinyModel, fixedPlanBytes } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-memory-budget-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 16;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 5);
  ({ prompt, reference } = await referenceRun(model, 'one two three four five', maxTokens));
});

const open = (memoryBudgetBytes: number) =>
  openEngine({ model, threads: 1, contextTokens: 64, heat: false, memoryBudgetBytes });

describe('memory budget', () => {
  it('plans the slots that fit, runs them on the disk tier, and keeps the tokens for every budget', async () => {
    const whole = await open(1 << 30);
    let plan;
    try {
      plan = whole.memoryPlan!;
      expect(plan.holdsEveryExpert).toBe(true);
      expect(whole.tierStats()).toBeUndefined(); // every expert fits: the plain engine
      expect(await collect(whole, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
    } finally {
      await whole.close();
    }
    const fixed = fixedPlanBytes(plan);
    const perLayerSlot = 4 * plan.slotStrideBytes; // 4 layers
    for (const slots of [1, 3, 6]) {
      const engine = await open(fixed + slots * perLayerSlot);
      try {
        expect(engine.memoryPlan!.slotsPerLayer).toBe(slots);
        expect(engine.memoryPlan!.slotsOnDevice).toBe(false);
        expect(engine.tierStats()!.slotsBudget).toEqual([slots, slots, slots, slots]);
        expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
        expect(engine.tierStats()!.lazyMisses).toBe(0); // misses read from the file, never from the mapping
      } finally {
        await engine.close();
      }
    }
    await expect(open(fixed + perLayerSlot - 1)).rejects.toThrow(MemoryBudgetError);
    await expect(open(fixed - 1)).rejects.toThrow(/memory budget .* is below what the engine needs at least: dense/);
  });

  it("counts one read engine's bounce buffers on the disk tier: the backend and the tier share the engine", async () => {
    const engine = await open(1 << 30);
    const loaded = (engine as unknown as { model: LoadedModel }).model;
    const plan = engine.memoryPlan!;
    await engine.close();
    expect(plan.parts.prefillBuffer).toBe(0); // no whole-layer path: every read is at most an expert's piece
    // One bounce buffer per read in flight, each at most an expert and two blocks: one engine's, not two.
    const expertBytes = expertContainerBytes(loaded.file, loaded.hparams);
    expect(plan.parts.ioBuffers).toBe(IO_QUEUE_DEPTH_DEFAULT * (expertBytes + 2 * 4096));
  });

  it('refuses a bad value and tier options beside it', async () => {
    await expect(open(0)).rejects.toThrow(InvalidOptionError);
    await expect(open(1.5)).rejects.toThrow(InvalidOptionError);
    await expect(openEngine({ model, memoryBudgetBytes: 1 << 30, slotsPerLayer: 2 })).rejects.toThrow(
      /memoryBudgetBytes/,
    );
  });
});

const openSim = (o: Partial<EngineOptions>) =>
  openEngine({ model, threads: 1, contextTokens: 64, heat: false, backend: 'cuda-sim', ...o });

/**
 * On a cuda backend (here cuda-sim, the cuda host code on the simulated runtime) the slots are
 * device memory, outside the budget, as many as resident / slotsPerLayer ask; the budget bounds
 * the host's parts (dense weights, KV cache, scratch, the read engines' and the staging ring's
 * buffers, one layer call's streamed misses). The tier reads the model file instead of its
 * mapping: every miss for its call, into host scratch, computed on the CPU (never admitted into
 * a device slot); every upload into the pinned staging ring.
 */
describe('memory budget on cuda-sim', () => {
  it('plans the host parts only, puts the asked slots on the device, reads every miss from the file, keeps the tokens', async () => {
    for (const slotsPerLayer of [1, 3]) {
      const engine = await openSim({ slotsPerLayer, memoryBudgetBytes: 1 << 30 });
      try {
        const plan = engine.memoryPlan!;
        expect(plan.slotsPerLayer).toBe(slotsPerLayer);
        expect(plan.parts.slots).toBe(0); // device memory is not the host's budget
        expect(plan.holdsEveryExpert).toBe(false);
        expect(plan.slotsOnDevice).toBe(true);
        expect(engine.tierStats()!.slotsBudget).toEqual([slotsPerLayer, slotsPerLayer, slotsPerLayer, slotsPerLayer]);
        expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
        const s = engine.tierStats()!;
        expect(s.hits).toBeGreaterThan(0); // residents ran on the (simulated) device
        expect(s.lazyMisses).toBe(0); // misses read from the file, never from the mapping
        expect(s.streamedReads).toBeGreaterThan(0);
        expect(s.admittedReads).toBe(0); // a device slot takes no miss: the host computes it
      } finally {
        await engine.close();
      }
    }
  });

  it('refuses a budget below the host parts with the numbers', async () => {
    const engine = await openSim({ slotsPerLayer: 2, memoryBudgetBytes: 1 << 30 });
    const p = engine.memoryPlan!.parts;
    await engine.close();
    const fixed = p.dense + p.kvCache + p.scratch + p.ioBuffers + p.workingSet + p.prefillBuffer;
    await expect(openSim({ slotsPerLayer: 2, memoryBudgetBytes: fixed - 1 })).rejects.toThrow(MemoryBudgetError);
    const exact = await openSim({ slotsPerLayer: 2, memoryBudgetBytes: fixed });
    await exact.close();
  });

  it('refuses a budget without the device share, enforce prefetch, shortPrefillTokens and readsFile beside it', async () => {
    await expect(openSim({ memoryBudgetBytes: 1 << 30 })).rejects.toThrow(
      /resident or slotsPerLayer beside it on backend "cuda-sim"/,
    );
    await expect(
      openSim({ slotsPerLayer: 2, memoryBudgetBytes: 1 << 30, prefetch: { mode: 'enforce' } }),
    ).rejects.toThrow(InvalidOptionError);
    await expect(openSim({ slotsPerLayer: 2, memoryBudgetBytes: 1 << 30, shortPrefillTokens: 4 })).rejects.toThrow(
      /shortPrefillTokens/,
    );
    await expect(openSim({ slotsPerLayer: 2, memoryBudgetBytes: 1 << 30, readsFile: true })).rejects.toThrow(
      /readsFile/,
    );
    await expect(openEngine({ model, heat: false, slotsPerLayer: 2, readsFile: true })).rejects.toThrow(/readsFile/); // the cpu backend copies from the mapping
  });

  it('readsFile without a budget: the same reads, the same tokens', async () => {
    const engine = await openSim({ slotsPerLayer: 2, readsFile: true });
    try {
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      expect(engine.tierStats()!.streamedReads).toBeGreaterThan(0);
      expect(engine.tierStats()!.lazyMisses).toBe(0);
    } finally {
      await engine.close();
    }
  });
});
