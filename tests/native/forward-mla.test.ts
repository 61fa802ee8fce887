/**
 * deepseek2's multi-head latent attention (issue 30, item 2) in the native forward pass against the
 * f32 reference, which writes it as the multi-head attention it equals (per head the key K_b^T c with
 * the shared roped k_pe, the value V_b c) while the native pass absorbs K_b into the query and V_b
 * after the softmax, llama.cpp's way: every route equal and logits within 1e-4 over a prefill and
 * decode steps, without and with q-LoRA, with a leading dense layer, on F32 and Q8_0 weights (the
 * per-head K_b / V_b quantised); the cache keeps one row of kvLora + rope per token and layer.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { HParams } from '../../src/model/types.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { expectReferenceLogits, mapModel, native, type MappedModel } from './forward-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

function mlaHParams(qLora: number, overrides: Partial<HParams> = {}): HParams {
  const kvLora = 64,
    rope = 16,
    nope = 32;
  return tinyHParams('deepseek2', {
    nLayer: 3,
    headDim: kvLora + rope,
    nHeadKv: 1,
    ropeDims: rope,
    mla: { qLora, kvLora, nope, vHead: 32 },
    attnScale: 1 / Math.sqrt(nope + rope),
    nFfShexp: 64,
    sharedExpertGate: false,
    denseLayers: { count: 1, nFf: 96 },
    ...overrides,
  });
}

describe('MLA: native forward vs reference', () => {
  for (const [name, hp, type, tolerance] of [
    ['lite (attn_q), F32', mlaHParams(0), 'F32', 1e-4],
    ['q-LoRA, F32', mlaHParams(32), 'F32', 1e-4],
    [
      'q-LoRA, sigmoid routing with bias and groups, F32',
      mlaHParams(32, {
        gating: 'sigmoid',
        expertBias: true,
        normTopK: true,
        expertWeightsScale: 2.5,
        expertGroups: { count: 4, used: 2 },
      }),
      'F32',
      1e-4,
    ],
    // As forward.test.ts's quantised cases: 8-bit activations move these 64-wide logits by a few %, so
    // every expert is routed (no top-k choice to flip) through a plain router; within 5e-2.
    ['lite, Q8_0 (K_b and V_b quantised per head)', mlaHParams(0, { nExpertUsed: 8 }), 'Q8_0', 5e-2],
  ] as const) {
    it(`${name}: the same routes, logits within ${tolerance}`, async () => {
      const m = mapModel(hp, { type, seed: 21, routerScale: type === 'F32' ? 8 : 1 });
      opened.push(m);
      const prompt = [5, 17, 3, 90, 42, 0, 11];
      await expectReferenceLogits(m, { prompt, steps: [7, 64, 95], tolerance, routes: type === 'F32' });
    });
  }

  it('keeps one cache row of kvLora + rope per token and layer (no V cache)', () => {
    const hp = mlaHParams(0);
    const m = mapModel(hp, { type: 'F32', seed: 3 });
    opened.push(m);
    const bytes = native.contextBytes(m.handle, { nCtx: 100, threads: 1 });
    expect(bytes.kvBytes).toBe(hp.nLayer * 100 * (64 + 16) * 4);
  });

  it('refuses inconsistent MLA shapes by name', () => {
    const hp = mlaHParams(0);
    expect(() =>
      mapModel(hp, { type: 'F32', seed: 3 }, (model) => (model.hparams = { ...hp, nHeadKv: 2, nHead: 4 })),
    ).toThrow(
      /hparams\.mla: expected kvLora, nope, vHead >= 1, qLora >= 0, nHeadKv 1 and headDim = kvLora \+ ropeDims/,
    );
  });
});
