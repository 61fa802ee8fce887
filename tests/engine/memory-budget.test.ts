/**
 * memoryBudgetBytes (issue 12, part 1): the engine plans its memory. A budget that holds every
 * expert runs the plain engine; a smaller one runs the disk tier with the slots that fit (the
 * misses read from the file), a budget below the fixed parts is refused with the numbers; the
 * tokens are the same for every budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { MemoryBudgetError } from '../../src/engine/memory-plan.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

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

const open = (memoryBudgetBytes: number) => openEngine({ model, threads: 1, contextTokens: 64, heat: false, memoryBudgetBytes });

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
    const fixed = plan.parts.dense + plan.parts.kvCache + plan.parts.scratch + plan.parts.ioBuffers + plan.parts.workingSet + plan.parts.prefillBuffer;
    const perLayerSlot = 4 * plan.slotStrideBytes; // 4 layers
    for (const slots of [1, 3, 6]) {
      const engine = await open(fixed + slots * perLayerSlot);
      try {
        expect(engine.memoryPlan!.slotsPerLayer).toBe(slots);
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

  it('refuses a bad value and tier options beside it', async () => {
    await expect(open(0)).rejects.toThrow(InvalidOptionError);
    await expect(open(1.5)).rejects.toThrow(InvalidOptionError);
    await expect(openEngine({ model, memoryBudgetBytes: 1 << 30, slotsPerLayer: 2 })).rejects.toThrow(/memoryBudgetBytes/);
  });
});
