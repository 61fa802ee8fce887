/**
 * The memory plan (src/engine/memory-plan.ts) on a real model's byte counts: the parts add up
 * within the budget, a budget at the model's size holds every expert, the smallest one holds
 * none but one layer's working set, and a smaller one is refused with the numbers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadNative } from '../../src/native/binding.js';
import { loadModel, type LoadedModel } from '../../src/model/load.js';
import {
  autoBudget,
  MemoryBudgetError,
  modelBytes,
  parseByteSize,
  planMemory,
  slotStride,
  type MemoryPlanInput,
} from '../../src/engine/memory-plan.js';
import { expertContainerBytes } from '../../src/engine/tier/experts.js';
import { InvalidOptionError } from '../../src/core/errors.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-memory-plan-');
const native = loadNative();
let model: LoadedModel;
let input: Omit<MemoryPlanInput, 'budgetBytes'>;

beforeAll(async () => {
  model = loadModel(native, await tinyModel(dir));
  const hp = model.hparams;
  const { denseBytes } = modelBytes(
    [...model.file.tensors.entries()].map(([name, t]) => ({ name, byteLength: t.byteLength })),
  );
  const { kvBytes, scratchBytes } = native.contextBytes(model.nativeModel, { nCtx: 128, threads: 1 });
  input = {
    denseBytes,
    kvCacheBytes: kvBytes,
    scratchBytes,
    ioBufferBytes: 4 << 20,
    expertBytes: expertContainerBytes(model.file, hp),
    nLayer: hp.nLayer,
    nExpert: hp.nExpert,
    nExpertUsed: hp.nExpertUsed,
  };
});
afterAll(cleanup);

const fixedOf = (i: Omit<MemoryPlanInput, 'budgetBytes'>) =>
  i.denseBytes + i.kvCacheBytes + i.scratchBytes + i.ioBufferBytes + i.nExpertUsed * slotStride(i.expertBytes);

describe('memory plan', () => {
  it('counts the KV cache as the context allocates it, and the dense tensors apart from the experts', () => {
    const hp = model.hparams;
    expect(input.kvCacheBytes).toBe(2 * hp.nLayer * 128 * hp.nHeadKv * hp.headDim * 4);
    expect(input.scratchBytes).toBeGreaterThan(0);
    const { denseBytes, expertTensorBytes } = modelBytes(
      [...model.file.tensors.entries()].map(([name, t]) => ({ name, byteLength: t.byteLength })),
    );
    expect(expertTensorBytes).toBe(hp.nLayer * hp.nExpert * input.expertBytes);
    expect(denseBytes).toBeGreaterThan(0);
  });

  it('a budget of the whole model holds every expert; the parts stay within the budget', () => {
    const whole = fixedOf(input) + input.nLayer * input.nExpert * slotStride(input.expertBytes);
    const plan = planMemory({ ...input, budgetBytes: whole });
    expect(plan.holdsEveryExpert).toBe(true);
    expect(plan.slotsPerLayer).toBe(input.nExpert);
    const sum = Object.values(plan.parts).reduce((a, b) => a + b, 0);
    expect(sum + plan.unusedBytes).toBe(whole);
    // More budget than the model: still every expert, the rest unused.
    expect(planMemory({ ...input, budgetBytes: 2 * whole }).slotsPerLayer).toBe(input.nExpert);
  });

  it('between the two, slots follow the room left, evenly over the layers', () => {
    const stride = slotStride(input.expertBytes);
    for (const perLayer of [0, 1, 3, input.nExpert - 1]) {
      const plan = planMemory({
        ...input,
        budgetBytes: fixedOf(input) + perLayer * input.nLayer * stride + stride - 1,
      });
      expect(plan.slotsPerLayer).toBe(perLayer);
      expect(plan.holdsEveryExpert).toBe(false);
    }
  });

  it("refuses a budget below the fixed parts and one layer's working set, with the numbers", () => {
    const minimum = fixedOf(input);
    expect(() => planMemory({ ...input, budgetBytes: minimum - 1 })).toThrow(MemoryBudgetError);
    try {
      planMemory({ ...input, budgetBytes: minimum - 1 });
    } catch (e) {
      const err = e as MemoryBudgetError;
      expect(err.minimumBytes).toBe(minimum);
      expect(err.message).toMatch(/dense .* \+ kvCache .* \+ scratch .* \+ ioBuffers .* \+ workingSet/);
    }
  });

  it('parses byte sizes as users type them', () => {
    expect(parseByteSize('memoryBudget', '1.5G')).toBe(1.5 * 1024 ** 3);
    expect(parseByteSize('memoryBudget', '800M')).toBe(800 * 1024 ** 2);
    expect(parseByteSize('memoryBudget', '64k')).toBe(64 * 1024);
    expect(parseByteSize('memoryBudget', '512MiB')).toBe(512 * 1024 ** 2);
    expect(parseByteSize('memoryBudget', '1000')).toBe(1000);
    for (const bad of ['', '-1G', '1.5X', 'lots', '0'])
      expect(() => parseByteSize('memoryBudget', bad)).toThrow(InvalidOptionError);
    expect(autoBudget(1000)).toBe(750);
  });

  it('contextBytes refuses what createContext refuses', () => {
    expect(() => native.contextBytes(model.nativeModel, { nCtx: 0, threads: 1 })).toThrow(/nCtx/);
  });
});
