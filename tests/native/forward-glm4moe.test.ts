/**
 * glm4moe's layer in the native forward pass against the f32 reference (issue 30, item 3): q/k/v
 * biases, partial NEOX rotary (8 of 16 dims), post_attention_norm, sigmoid routing with the
 * selection bias, renormalised and scaled x2.5, and the ungated shared expert; every route equal
 * and logits within 1e-4 on an F32 model, over a prefill and decode steps.
 */
import { afterAll, describe, it } from 'vitest';
import { tinyHParams } from '../fixtures/random-model.js';
import { expectReferenceLogits, mapModel, type MappedModel } from './forward-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

describe('glm4moe: native forward vs reference', () => {
  for (const qkNorm of ['none', 'head'] as const) {
    it(`qk norm ${qkNorm}: the same routes, logits within 1e-4`, async () => {
      const hp = tinyHParams('glm4moe', { ropeDims: 8, expertWeightsScale: 2.5, qkNorm, nFfShexp: 32 });
      const m = mapModel(hp, { type: 'F32', seed: 9, routerScale: 8 });
      opened.push(m);
      await expectReferenceLogits(m, {
        prompt: [5, 17, 3, 90, 42, 0],
        steps: [7, 64, 95],
        tolerance: 1e-4,
        routes: true,
      });
    });
  }
});
