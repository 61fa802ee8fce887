/**
 * The layer-compute actor on a real native context (no tier): one step per message, its routes
 * and per-layer timing in alternating buffers, the report on the bus before the step resolves,
 * beforeReuse before a pair is overwritten; and its pure logic.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LayerComputeActor } from '../../src/actors/layer-compute/actor.js';
import { moeNs, nextBuffer, routedExperts, routesLength } from '../../src/actors/layer-compute/logic.js';
import { LAYER_STAT_FIELDS, type LayerStepReport } from '../../src/actors/layer-compute/messages.js';
import { loadModel, type LoadedModel } from '../../src/engine/load.js';
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
  it('alternates buffer pairs, sizes routes, sums MoE time, views a token-layer route', () => {
    expect([nextBuffer(undefined), nextBuffer(0), nextBuffer(1)]).toEqual([0, 1, 0]);
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
  it('publishes each step\'s routes and layer timing on the bus before the step resolves; the next step uses the other buffers', async () => {
    const hp = model.hparams;
    const actor = new LayerComputeActor(native, context, { nLayer: hp.nLayer, k: hp.nExpertUsed });
    const seen: LayerStepReport[] = [];
    const sub = actor.reports$().subscribe((r) => seen.push({ ...r, routes: r.routes.slice(), layerStats: r.layerStats.slice() }));
    const reused: number[] = [];
    const logits = new Float32Array(hp.nVocab);
    const prompt = Int32Array.from([1, 5, 9, 13]);
    const prefill = await actor.evaluate({ kind: 'evaluate', phase: 'prefill', tokens: prompt, position: 0, logits }, (old) => reused.push(old.position));
    expect(seen).toHaveLength(1);
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

    const d1 = await actor.evaluate({ kind: 'evaluate', phase: 'decode', tokens: Int32Array.of(7), position: 4, logits }, (old) => reused.push(old.position));
    const d2 = await actor.evaluate({ kind: 'evaluate', phase: 'decode', tokens: Int32Array.of(8), position: 5, logits }, (old) => reused.push(old.position));
    expect([prefill.buffer, d1.buffer, d2.buffer]).toEqual([0, 1, 0]);
    expect(reused).toEqual([0]); // d2 overwrote the prefill's pair, after saying so
    expect(actor.last).toBe(d2);
    expect(seen.map((r) => [r.phase, r.position, r.nTokens])).toEqual([['prefill', 0, 4], ['decode', 4, 1], ['decode', 5, 1]]);
    expect(Array.from(seen[1].routes)).toEqual(Array.from(d1.routes));
    sub.unsubscribe();
    // A later subscriber sees only later steps (never an earlier request's, whose buffers are reused).
    const late: LayerStepReport[] = [];
    actor.reports$().subscribe((r) => late.push(r));
    expect(late).toHaveLength(0);
    actor.close();
  });
});
