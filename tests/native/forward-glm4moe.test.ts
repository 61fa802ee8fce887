/**
 * glm4moe's layer in the native forward pass against the f32 reference (issue 30, item 3): q/k/v
 * biases, partial NEOX rotary (8 of 16 dims), post_attention_norm, sigmoid routing with the
 * selection bias, renormalised and scaled x2.5, and the ungated shared expert; every route equal
 * and logits within 1e-4 on an F32 model, over a prefill and decode steps.
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { createReferenceSession } from '../../src/reference/forward.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

describe('glm4moe: native forward vs reference', () => {
  for (const qkNorm of ['none', 'head'] as const) {
    it(`qk norm ${qkNorm}: the same routes, logits within 1e-4`, async () => {
      const hp = tinyHParams('glm4moe', { ropeDims: 8, expertWeightsScale: 2.5, qkNorm, nFfShexp: 32 });
      const m = mapModel(hp, { type: 'F32', seed: 9, routerScale: 8 });
      opened.push(m);
      const ctx = native.createContext(m.handle, { nCtx: 16, threads: 2 });
      onTestFinished(() => native.freeContext(ctx));
      const reference = createReferenceSession(m.model, 16);
      const perRow = hp.nLayer * hp.nExpertUsed;
      const prompt = [5, 17, 3, 90, 42, 0];
      const logits = new Float32Array(prompt.length * hp.nVocab);
      const routes = new Int32Array(prompt.length * perRow);
      native.evalSync(ctx, Int32Array.from(prompt), 0, logits, { allLogits: true, routes });
      const expected = reference.eval(prompt);
      prompt.forEach((_, r) => {
        expect(Array.from(routes.subarray(r * perRow, (r + 1) * perRow))).toEqual(expected.routes[r].flat());
        expect(relativeError(logits.subarray(r * hp.nVocab, (r + 1) * hp.nVocab), expected.logits[r])).toBeLessThan(
          1e-4,
        );
      });
      let pos = prompt.length;
      for (const token of [7, 64, 95]) {
        const row = new Float32Array(hp.nVocab);
        const rowRoutes = new Int32Array(perRow);
        await native.evalAsync(ctx, Int32Array.of(token), pos++, row, { routes: rowRoutes });
        const step = reference.eval([token]);
        expect(Array.from(rowRoutes)).toEqual(step.routes[0].flat());
        expect(relativeError(row, step.logits[0])).toBeLessThan(1e-4);
      }
    });
  }
});
