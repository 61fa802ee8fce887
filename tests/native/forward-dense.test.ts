/**
 * Leading dense layers (issue 30: GLM-4.5's and DeepSeek-V2's first layers have a plain FFN and no
 * experts) in the native forward pass against the f32 reference: routes (MoE layers only, so
 * [row][nLayer - count][k]) equal, logits within 1e-4, over a prefill and decode steps, for one and
 * for all but one layer dense; forced routes and layer stats are indexed by MoE layer too; and the
 * model's checks name what a dense layer needs.
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { createReferenceSession } from '../../src/reference/forward.js';
import { moeLayers } from '../../src/model/types.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { expectReferenceLogits, mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

describe('leading dense layers: native forward vs reference', () => {
  for (const [nLayer, count] of [
    [3, 1],
    [4, 3],
  ] as const) {
    it(`${count} of ${nLayer} layers dense: the MoE layers' routes, logits within 1e-4`, async () => {
      const hp = tinyHParams('glm4moe', { nLayer, ropeDims: 8, nFfShexp: 32, denseLayers: { count, nFf: 96 } });
      const m = mapModel(hp, { type: 'F32', seed: 11, routerScale: 8 });
      opened.push(m);
      expect(moeLayers(hp)).toBe(nLayer - count);
      await expectReferenceLogits(m, {
        prompt: [5, 17, 3, 90, 42, 0],
        steps: [7, 64, 95],
        tolerance: 1e-4,
        routes: true,
      });
    });
  }

  it('forced routes index the MoE layers: the reference logits with the same forced experts', () => {
    const dense = tinyHParams('glm4moe', { nLayer: 3, nFfShexp: 32, denseLayers: { count: 1, nFf: 96 } });
    const m = mapModel(dense, { type: 'F32', seed: 11, routerScale: 8 });
    opened.push(m);
    const ctx = native.createContext(m.handle, { nCtx: 8, threads: 1 });
    onTestFinished(() => native.freeContext(ctx));
    const perRow = moeLayers(dense) * dense.nExpertUsed;
    const forced = Int32Array.from({ length: 2 * perRow }, (_, i) => (i % 2 === 0 ? 6 : 1));
    const logits = new Float32Array(2 * dense.nVocab);
    const routes = new Int32Array(2 * perRow);
    native.evalSync(ctx, Int32Array.of(4, 9), 0, logits, { allLogits: true, routes, forcedRoutes: forced });
    expect(Array.from(routes)).toEqual(Array.from(forced));
    const expected = createReferenceSession(m.model, 8).eval(
      [4, 9],
      [
        [
          [6, 1],
          [6, 1],
        ],
        [
          [6, 1],
          [6, 1],
        ],
      ],
    );
    expect(relativeError(logits.subarray(0, dense.nVocab), expected.logits[0])).toBeLessThan(1e-4);
    // Too few forced routes for the MoE layers: refused by name.
    expect(() =>
      native.evalSync(ctx, Int32Array.of(4), 0, new Float32Array(dense.nVocab), {
        forcedRoutes: new Int32Array(perRow - 1),
      }),
    ).toThrow(/forcedRoutes: expected 4 ids \(tokens x MoE layers x nExpertUsed/);
  });

  it('refuses a dense layer without its FFN, and a model with no MoE layer', () => {
    const hp = tinyHParams('glm4moe', { nLayer: 2, nFfShexp: 32, denseLayers: { count: 1, nFf: 96 } });
    const ok = mapModel(hp, { type: 'F32', seed: 2 });
    opened.push(ok);
    const wrongWidth = { ...hp, denseLayers: { count: 1, nFf: 64 } };
    expect(() => mapModel(hp, { type: 'F32', seed: 2 }, (model) => (model.hparams = wrongWidth))).toThrow(
      /blk\.0\.ffn_gate\.weight: expected dims \[64, 64\] \(got \[64, 96\]\)/,
    );
    const allDense = { ...hp, denseLayers: { count: 2, nFf: 96 } };
    expect(() => mapModel(allDense, { type: 'F32', seed: 2 })).toThrow(
      /hparams\.nLayerDenseLead: expected 0\.\.nLayer - 1/,
    );
  });
});
