/**
 * The disk tier's two prefill paths (issue 14): a prompt of at most shortPrefillTokens reads its
 * routed misses on demand, a longer one reads each layer whole (the next layer's while this one
 * computes). Each test asserts the path every layer really took, from the tier's own per-layer
 * counts, and that the tokens are the plain ones (an engine without a tier) on both paths.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-prefill-path-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 12;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 29, 'planted'); // a short prompt routes within its topic's experts
  ({ prompt, reference } = await referenceRun(model, 'red green blue yellow red green blue yellow red', maxTokens));
});

async function run(options: Partial<EngineOptions>) {
  const engine = await openEngine({
    model,
    threads: 1,
    contextTokens: 128,
    heat: false,
    backend: 'disk',
    slotsPerLayer: 2,
    ...options,
  });
  try {
    const tokens = await collect(engine, prompt, { maxTokens, stopAtEos: false });
    return { tokens, stats: engine.lastStats!, tier: engine.tierStats()! };
  } finally {
    await engine.close();
  }
}

describe('prefill paths on the disk tier', () => {
  it('a prompt within shortPrefillTokens reads on demand on every layer, a longer one whole layers; the same tokens', async () => {
    const onDemand = await run({ shortPrefillTokens: prompt.length });
    const whole = await run({ shortPrefillTokens: prompt.length - 1 });
    for (const r of [onDemand, whole]) expect(r.tokens).toEqual(reference);
    expect(onDemand.stats.prefillPath).toBe('on-demand');
    expect(whole.stats.prefillPath).toBe('whole-layer');
    const nLayer = onDemand.stats.prefillPathCalls!.onDemand.length;
    // Each layer of the one-chunk prefill took the one path asked for, never the other.
    expect(onDemand.stats.prefillPathCalls).toEqual({
      onDemand: new Array(nLayer).fill(1),
      wholeLayer: new Array(nLayer).fill(0),
    });
    expect(whole.stats.prefillPathCalls).toEqual({
      onDemand: new Array(nLayer).fill(0),
      wholeLayer: new Array(nLayer).fill(1),
    });
    // On demand reads what the prompt routes to, once; whole layers read every expert without a slot
    // (2 of 8 per layer are resident from the start, and nothing can evict them during the prefill).
    expect(onDemand.stats.prefillExpertReads).toBe(onDemand.stats.prefillDistinctExpertsRead);
    expect(onDemand.stats.prefillExpertReads).toBeLessThan(nLayer * 6);
    expect(whole.stats.prefillExpertReads).toBe(nLayer * 6);
    expect(whole.stats.prefillDistinctExpertsRead).toBe(nLayer * 6);
    expect(whole.tier.bulkLayers).toBe(nLayer);
    // The decode after a whole-layer prefill reads on demand (its calls are counted from the mark).
    expect(whole.tier.pathCalls!.wholeLayer.every((n) => n === 0)).toBe(true);
  });

  it('0 reads whole layers for every prompt, and a prompt longer than a chunk reads each layer once (its chunks run layer by layer)', async () => {
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 640,
      heat: false,
      backend: 'disk',
      slotsPerLayer: 2,
      shortPrefillTokens: 0,
    });
    try {
      const long = Array.from({ length: 300 }, (_, i) => prompt[i % prompt.length]); // two chunks of rows (256 + 44)
      const plain = await openEngine({ model, threads: 1, contextTokens: 640 });
      const expected = await collect(plain, long, { maxTokens: 4, stopAtEos: false });
      await plain.close();
      expect(await collect(engine, long, { maxTokens: 4, stopAtEos: false })).toEqual(expected);
      const s = engine.lastStats!;
      expect(s.prefillPathCalls!.wholeLayer.every((n) => n === 2)).toBe(true); // two chunks per layer
      expect(s.prefillExpertReads).toBe(s.prefillDistinctExpertsRead); // the second chunk found the layer read
    } finally {
      await engine.close();
    }
  });

  it('on demand, a prompt longer than a chunk reads each routed miss once too: the same tokens', async () => {
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 640,
      heat: false,
      backend: 'disk',
      slotsPerLayer: 1,
      shortPrefillTokens: 1000,
    });
    try {
      const long = Array.from({ length: 300 }, (_, i) => (prompt[i % prompt.length] + 7 * (i % 5)) % 2000);
      const plain = await openEngine({ model, threads: 1, contextTokens: 640 });
      const expected = await collect(plain, long, { maxTokens: 4, stopAtEos: false });
      await plain.close();
      expect(await collect(engine, long, { maxTokens: 4, stopAtEos: false })).toEqual(expected);
      const s = engine.lastStats!;
      expect(s.prefillPathCalls!.onDemand.every((n) => n === 2)).toBe(true);
      expect(s.prefillExpertReads).toBeGreaterThan(0);
      expect(s.prefillExpertReads).toBe(s.prefillDistinctExpertsRead); // streamed misses kept for the layer's next chunk
    } finally {
      await engine.close();
    }
  });

  it('a memory budget with auto drops the whole-layer buffer where it would displace over a quarter of the slots; a number keeps it', async () => {
    const long = Array.from({ length: 40 }, (_, i) => prompt[i % prompt.length]);
    // The fixed parts of a plan with and without the buffer (the whole-layer path also bounces larger pieces).
    const fixedOf = async (shortPrefillTokens: number) => {
      const probe = await openEngine({
        model,
        threads: 1,
        contextTokens: 128,
        heat: false,
        memoryBudgetBytes: 1 << 30,
        shortPrefillTokens,
      });
      const { parts, slotStrideBytes } = probe.memoryPlan!;
      await probe.close();
      return {
        fixed: parts.dense + parts.kvCache + parts.scratch + parts.ioBuffers + parts.workingSet + parts.prefillBuffer,
        stride: slotStrideBytes,
      };
    };
    const onDemand = await fixedOf(1000),
      whole = await fixedOf(0);
    // Room for 3 slots per layer: without the buffer for auto (with it, the buffer, a whole tiny layer, would take more than 3), with it for 0.
    for (const [asked, buffer, path, fixed] of [
      ['auto', false, 'on-demand', onDemand.fixed],
      [0, true, 'whole-layer', whole.fixed],
    ] as const) {
      const engine = await openEngine({
        model,
        threads: 1,
        contextTokens: 128,
        heat: false,
        memoryBudgetBytes: fixed + 3 * 4 * onDemand.stride,
        shortPrefillTokens: asked,
      });
      try {
        expect(engine.memoryPlan!.parts.prefillBuffer > 0).toBe(buffer);
        expect(engine.memoryPlan!.slotsPerLayer).toBe(3);
        await collect(engine, long, { maxTokens: 2, stopAtEos: false });
        expect(engine.lastStats!.prefillPath).toBe(path); // auto without the buffer: every prompt on demand
      } finally {
        await engine.close();
      }
    }
  });

  it('refuses a bad shortPrefillTokens by name, and one off the disk tier', async () => {
    await expect(run({ shortPrefillTokens: -1 })).rejects.toThrow(
      /option shortPrefillTokens: expected an integer >= 0/,
    );
    await expect(run({ shortPrefillTokens: 1.5 })).rejects.toThrow(InvalidOptionError);
    await expect(run({ backend: 'cpu', shortPrefillTokens: 4 })).rejects.toThrow(
      /shortPrefillTokens: expected unset without the disk tier/,
    );
  });
});
