/**
 * The layer-compute actor on a real native context (no tier): one step per message, its routes
 * and per-layer timing in the ring (a decode step's slot stays unwritten for stepRingSlots - 1
 * steps), the report on the bus before the step resolves; and its pure logic.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LayerComputeActor } from '../../src/actors/layer-compute/actor.js';
import {
  moeNs,
  nextRingSlot,
  routedExperts,
  routesLength,
  stepRingSlots,
} from '../../src/actors/layer-compute/logic.js';
import { LAYER_STAT_FIELDS, type LayerStepReport } from '../../src/actors/layer-compute/messages.js';
import { loadModel, type LoadedModel } from '../../src/model/load.js';
import { loadNative, type NativeContextHandle } from '../../src/native/binding.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-layer-compute-');
const native = loadNative();
let model: LoadedModel;
let context: NativeContextHandle;

beforeAll(async () => {
  model = loadModel(native, await tinyModel(dir, 'q8_0', 3));
  context = native.createContext(model.nativeModel, { nCtx: 64, threads: 1 });
});
afterAll(() => {
  native.freeContext(context);
  native.freeModel(model.nativeModel);
  native.unmapFile(model.mapping);
  cleanup();
});

describe('layer-compute logic', () => {
  it('cycles ring slots, sizes routes, sums MoE time, views a token-layer route', () => {
    expect([
      nextRingSlot(undefined),
      nextRingSlot(0),
      nextRingSlot(stepRingSlots - 2),
      nextRingSlot(stepRingSlots - 1),
    ]).toEqual([0, 1, stepRingSlots - 1, 0]);
    const shape = { nLayer: 2, k: 3 };
    expect(routesLength(shape, 4)).toBe(24);
    const stats = new Float64Array(2 * LAYER_STAT_FIELDS);
    stats.set([10, 50, 20, 45, 0, 0], 0);
    stats.set([50, 90, 60, 80, 0, 0], LAYER_STAT_FIELDS);
    expect(moeNs(stats)).toBe(25 + 20);
    const routes = Int32Array.from({ length: 12 }, (_, i) => i);
    expect(Array.from(routedExperts(routes, shape, 1, 0))).toEqual([6, 7, 8]);
  });
});

describe('layer-compute actor', () => {
  it("returns each step's routes and layer timing (the step's next stage reads them); decode steps cycle the ring and keep their reports readable", async () => {
    const hp = model.hparams;
    const actor = new LayerComputeActor(native, context, { nLayer: hp.nLayer, k: hp.nExpertUsed });
    const seen: LayerStepReport[] = [];
    const copy = (r: LayerStepReport) => (
      seen.push({ ...r, routes: r.routes.slice(), layerStats: r.layerStats.slice() }),
      r
    );
    const logits = new Float32Array(hp.nVocab);
    const prompt = Int32Array.from([1, 5, 9, 13]);
    const prefill = copy(
      await actor.evaluate({ kind: 'evaluate', phase: 'prefill', tokens: prompt, position: 0, logits }),
    );
    expect(seen).toHaveLength(1);
    expect(prefill.slot).toBe(-1);
    expect(prefill.firstToken).toBe(1);
    expect(prefill.routes).toHaveLength(prompt.length * hp.nLayer * hp.nExpertUsed);
    for (const e of prefill.routes) expect(e >= 0 && e < hp.nExpert).toBe(true);
    for (let l = 0; l < hp.nLayer; l++) {
      const at = l * LAYER_STAT_FIELDS;
      expect(prefill.layerStats[at]).toBeGreaterThan(0);
      expect(prefill.layerStats[at + 1]).toBeGreaterThanOrEqual(prefill.layerStats[at]);
      if (l > 0) expect(prefill.layerStats[at]).toBeGreaterThanOrEqual(prefill.layerStats[at - LAYER_STAT_FIELDS + 1]); // layers in order
    }
    // The logits are the plain eval's.
    const plain = new Float32Array(hp.nVocab);
    await native.evalAsync(context, prompt, 0, plain);
    expect(logits).toEqual(plain);

    // More decode steps than ring slots, one token array reused (as the engine does).
    const token = new Int32Array(1);
    const decodes: LayerStepReport[] = [];
    for (let i = 0; i < stepRingSlots + 2; i++) {
      token[0] = 7 + i;
      decodes.push(
        copy(await actor.evaluate({ kind: 'evaluate', phase: 'decode', tokens: token, position: 4 + i, logits })),
      );
    }
    expect(decodes.map((d) => d.slot)).toEqual(Array.from({ length: stepRingSlots + 2 }, (_, i) => i % stepRingSlots));
    expect(decodes.map((d) => d.firstToken)).toEqual(Array.from({ length: stepRingSlots + 2 }, (_, i) => 7 + i));
    expect(actor.last).toBe(decodes.at(-1));
    expect(seen.map((r) => [r.phase, r.position, r.nTokens])).toEqual([
      ['prefill', 0, 4],
      ...decodes.map((d) => ['decode', d.position, 1]),
    ]);
    // Each decode report read in place equals what it held at its step, for the last
    // stepRingSlots steps (the older ones' slots were written again), and the prefill's buffers
    // were never touched by a decode step.
    for (let i = 2; i < decodes.length; i++) {
      expect(Array.from(decodes[i].routes)).toEqual(Array.from(seen[1 + i].routes));
      expect(Array.from(decodes[i].layerStats)).toEqual(Array.from(seen[1 + i].layerStats));
    }
    expect(Array.from(prefill.routes)).toEqual(Array.from(seen[0].routes));
    expect(decodes[0].routes).toBe(decodes[stepRingSlots].routes); // the same slot's view, reused
    actor.close();
    await expect(
      actor.evaluate({ kind: 'evaluate', phase: 'decode', tokens: token, position: 30, logits }),
    ).rejects.toThrow(/no step after close/);
  });
});
