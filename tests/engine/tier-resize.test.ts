/**
 * engine.tune({ residentSlotsPerLayer }): the slot budget changes at the next boundary (before the
 * next step, or the next request). Growing fills the new slots hottest first, shrinking evicts the
 * coldest residents (host copies rebuilt); the tokens never change on the cpu backend, the budget
 * is never exceeded, no lease is left, and a bad value changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine, type Engine, type EngineOptions } from '../../src/engine/engine.js';
import type { TierPlacement } from '../../src/engine/tier/placement.js';
import { residentSets } from '../../src/engine/tier/port.js';
import type { TierPort } from '../../src/engine/tier/port.js';
import type { EngineTier } from '../../src/engine/tier/tier.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-resize-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const decodeTokens = 40;
const nLayer = 4;
const nExpert = 8;

beforeAll(async () => {
  model = await tinyModel(dir, 'q4_0', 13);
  ({ prompt, reference } = await referenceRun(model, 'one two three four five six seven eight nine', decodeTokens));
});

const tierOf = (engine: Engine) => (engine as unknown as { tier: { placement: TierPlacement; port: TierPort } }).tier;
const options = (o: Partial<EngineOptions> = {}): EngineOptions => ({
  model,
  threads: 1,
  contextTokens: 128,
  slotsPerLayer: 2,
  heat: false,
  lfru: { tickTokens: 2 },
  ...o,
});

function expectWithinBudget(engine: Engine, slots?: number): void {
  const s = engine.tierStats()!;
  s.slotsUsed.forEach((used, l) => expect(used).toBeLessThanOrEqual(s.slotsBudget[l]));
  if (slots !== undefined) expect(s.slotsBudget).toEqual(new Array(nLayer).fill(slots));
}

/** Generates; `at[i]` is tuned after token i; the budget is checked after every token. */
async function tunedRun(engine: Engine, at: Record<number, number> = {}, maxTokens = decodeTokens): Promise<number[]> {
  const ids: number[] = [];
  let expected: number | undefined;
  for await (const t of engine.generate(prompt, { maxTokens, stopAtEos: false })) {
    ids.push(t.id);
    // The tune of the previous token applied before this token's step.
    expectWithinBudget(engine, expected);
    expected = undefined;
    if (at[t.index] !== undefined) {
      engine.tune({ residentSlotsPerLayer: at[t.index] });
      expected = at[t.index];
    }
  }
  expect(engine.tierStats()!.leases).toBe(0);
  return ids;
}

async function hostCopiesSettled(engine: Engine, published: number): Promise<void> {
  for (let i = 0; i < 200 && engine.hostCopies()!.published !== published; i++)
    await new Promise((r) => setTimeout(r, 25));
  expect(engine.hostCopies()!.published).toBe(published);
}

describe.each(['cpu', 'fake'] as const)('tune residentSlotsPerLayer on the %s backend', (backend) => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await openEngine(options({ backend }));
  });
  afterAll(() => engine.close());

  it('grows and shrinks in the middle of a request, never past the budget; the tokens are unchanged', async () => {
    const ids = await tunedRun(engine, { 4: 5, 14: 1, 24: 3 });
    expect(ids).toEqual(reference); // the fake computes with the cpu kernels: its tokens are real too
    expectWithinBudget(engine, 3);
    // The slots a shrink left are reused before more are reserved.
    const spare = engine.tierStats()!.slotsSpare!;
    expect(spare).toBe(nLayer * (5 - 3));
  });

  it('between requests: a full budget hits every expert, one slot keeps every other expert as a host copy', async () => {
    engine.tune({ residentSlotsPerLayer: nExpert });
    const full = await tunedRun(engine);
    expect(full).toEqual(reference);
    expectWithinBudget(engine, nExpert);
    expect(engine.tierStats()!.slotsUsed).toEqual(new Array(nLayer).fill(nExpert));
    expect(engine.lastStats!.decodeHitRate).toBe(1);
    expect(engine.lastStats!.uploads).toBe(0); // nothing left to swap
    await hostCopiesSettled(engine, 0); // residents' host copies are freed

    const backendOf = () => (engine as unknown as { tier: EngineTier }).tier.backend;
    const discardsBefore = backendOf().stats().discards;
    engine.tune({ residentSlotsPerLayer: 1 });
    const one = await tunedRun(engine);
    expect(one).toEqual(reference);
    expectWithinBudget(engine, 1);
    await hostCopiesSettled(engine, nLayer * (nExpert - 1));
    // The slots the shrink gave up stay reserved (spare) with their memory given back.
    expect(backendOf().stats().discards - discardsBefore).toBe(nLayer * (nExpert - 1));
  });
});

describe('tune residentSlotsPerLayer: choices and refusals', () => {
  it('a shrink keeps the highest-scored residents and a grow fills the highest-scored others', async () => {
    // No swaps (a huge tick interval): the residents are the warmstart's until a tune changes them.
    const engine = await openEngine(options({ slotsPerLayer: 4, lfru: { tickTokens: 1000 } }));
    try {
      expect(await tunedRun(engine)).toEqual(reference);
      const tier = tierOf(engine);
      const order = Array.from({ length: nLayer }, (_, l) => tier.placement.coldestResidents(l));
      engine.tune({ residentSlotsPerLayer: 1 });
      await tunedRun(engine, {}, 1); // a prefill only: no decode tick moves a score before the check
      expect(residentSets(tier.port)).toEqual(order.map((ids) => [ids.at(-1)]));
      const hottest = Array.from({ length: nLayer }, (_, l) => tier.placement.hottestOutside(l, 2));
      engine.tune({ residentSlotsPerLayer: 3 });
      await tunedRun(engine, {}, 1);
      expect(residentSets(tier.port)).toEqual(
        order.map((ids, l) => [ids.at(-1)!, ...hottest[l]].sort((a, b) => a - b)),
      );
    } finally {
      await engine.close();
    }
  });

  it('a shrink waits while every candidate of a layer has a swap queued, and applies at a later boundary', async () => {
    // tickTokens 1000: the policy decides no swap of its own in this request.
    const engine = await openEngine(options({ lfru: { tickTokens: 1000 } }));
    try {
      const tier = (engine as unknown as { tier: EngineTier }).tier;
      const [a, b] = residentSets(tier.port)[0];
      const outside = Array.from({ length: nExpert }, (_, e) => e).filter((e) => e !== a && e !== b);
      // Both residents of layer 0 are victims of swaps, queued until layer 0 next computes.
      expect(tier.port.requestSwap(0, a, outside[0], 9001)).toBeGreaterThanOrEqual(0);
      expect(tier.port.requestSwap(0, b, outside[1], 9002)).toBeGreaterThanOrEqual(0);
      engine.tune({ residentSlotsPerLayer: 1 });
      // The boundary: every other layer shrinks; layer 0 has no plainly resident expert to give up.
      expect(await tier.applyResize()).toBe(true);
      expect(tier.port.slotsPerLayer).toEqual([2, 1, 1, 1]);
      expect(tier.targetSlotsPerLayer).toBe(1);
      expect(engine.tierStats()!.slotsUsed).toEqual([2, 1, 1, 1]);
      // A request: its evaluations issue the two swaps and land them; a later boundary shrinks layer 0.
      const maxTokens = 8;
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference.slice(0, maxTokens));
      // The swaps land on the backend's copier thread: on loaded cores (seen once in a fresh-clone
      // CI run) after the request's last boundary. Then a later request's boundary shrinks layer 0.
      for (let i = 0; i < 50 && tier.port.slotsPerLayer[0] !== 1; i++) {
        await new Promise((r) => setTimeout(r, 20));
        expect(await collect(engine, prompt, { maxTokens: 2, stopAtEos: false })).toEqual(reference.slice(0, 2));
      }
      expect(tier.port.slotsPerLayer).toEqual([1, 1, 1, 1]);
      expect(engine.tierStats()!.slotsUsed).toEqual([1, 1, 1, 1]);
      expect(engine.tierStats()!.slotsBudget).toEqual([1, 1, 1, 1]);
      expect(engine.tierStats()!.leases).toBe(0);
      // The expert kept in layer 0 is one of the two newcomers: the swaps landed before the shrink.
      expect(outside.slice(0, 2)).toContain(residentSets(tier.port)[0][0]);
    } finally {
      await engine.close();
    }
  });

  it('a bad value is refused with a typed error and nothing changes', async () => {
    const engine = await openEngine(options());
    try {
      for (const bad of [0, nExpert + 1, 2.5, Number.NaN, '3' as unknown as number]) {
        expect(() => engine.tune({ residentSlotsPerLayer: bad })).toThrow(InvalidOptionError);
      }
      // A valid slot count next to a bad value: refused as a whole.
      expect(() => engine.tune({ residentSlotsPerLayer: 4, lfru: { tickTokens: 0 } })).toThrow(InvalidOptionError);
      expect(await tunedRun(engine)).toEqual(reference);
      expectWithinBudget(engine, 2);
    } finally {
      await engine.close();
    }
  });
});
