/**
 * Routing as llama.cpp's build_moe_ffn computes it (src/reference/routing.ts, issue 30's second
 * building block): sigmoid gating, a selection bias (exp_probs_b) that chooses but does not weight,
 * expert groups, and a scale on the weights. The native route_phase against the f32 reference on
 * F32 models: every route equal and logits within 1e-4, row by row over a prefill and decode
 * steps, forced routes included; and each variant routes differently from plain softmax top-k
 * (the switch reaches the forward pass).
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import type { Arch, HParams } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { route, selection } from '../../src/reference/routing.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const cases: Array<{ name: string; arch: Arch; routing: Partial<HParams> }> = [
  {
    name: 'sigmoid, selection bias, renormalised, scaled x2.5 (glm4moe)',
    arch: 'qwen3moe',
    routing: { gating: 'sigmoid', expertBias: true, normTopK: true, expertWeightsScale: 2.5 },
  },
  {
    name: 'softmax, selection bias, 4 groups of which 2 (DeepSeek-style)',
    arch: 'olmoe',
    routing: { expertBias: true, expertGroups: { count: 4, used: 2 } },
  },
  { name: 'sigmoid, not renormalised', arch: 'qwen2moe', routing: { gating: 'sigmoid' } },
];

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

interface Row {
  logits: Float32Array;
  expected: Float32Array;
  routes: number[];
  expectedRoutes: number[];
}

/** A prefill of 6 rows, then 3 decode steps (forced: these experts in every row and layer). */
async function rows(hp: HParams, forced?: number[]): Promise<Row[]> {
  const m = mapModel(hp, { type: 'F32', seed: 5, routerScale: 8 });
  opened.push(m);
  const nCtx = 16;
  const ctx = native.createContext(m.handle, { nCtx, threads: 2 });
  onTestFinished(() => native.freeContext(ctx));
  const reference = createReferenceSession(m.model, nCtx);
  const perRow = hp.nLayer * hp.nExpertUsed;
  const forcedOf = (n: number) =>
    forced ? Int32Array.from({ length: n * perRow }, (_, i) => forced[i % forced.length]) : undefined;
  const forcedRef = (n: number) =>
    forced ? Array.from({ length: n }, () => Array.from({ length: hp.nLayer }, () => forced)) : undefined;
  const out: Row[] = [];
  const prompt = [5, 17, 3, 90, 42, 0];
  const logits = new Float32Array(prompt.length * hp.nVocab);
  const routes = new Int32Array(prompt.length * perRow);
  const fp = forcedOf(prompt.length);
  native.evalSync(ctx, Int32Array.from(prompt), 0, logits, {
    allLogits: true,
    routes,
    ...(fp ? { forcedRoutes: fp } : {}),
  });
  const expected = reference.eval(prompt, forcedRef(prompt.length));
  prompt.forEach((_, r) =>
    out.push({
      logits: logits.slice(r * hp.nVocab, (r + 1) * hp.nVocab),
      expected: expected.logits[r],
      routes: Array.from(routes.subarray(r * perRow, (r + 1) * perRow)),
      expectedRoutes: expected.routes[r].flat(),
    }),
  );
  let pos = prompt.length;
  for (const token of [7, 64, 95]) {
    const row = new Float32Array(hp.nVocab);
    const rowRoutes = new Int32Array(perRow);
    const f = forcedOf(1);
    await native.evalAsync(ctx, Int32Array.of(token), pos++, row, {
      routes: rowRoutes,
      ...(f ? { forcedRoutes: f } : {}),
    });
    const step = reference.eval([token], forcedRef(1));
    out.push({
      logits: row,
      expected: step.logits[0],
      routes: Array.from(rowRoutes),
      expectedRoutes: step.routes[0].flat(),
    });
  }
  return out;
}

describe('routing variants: native against the reference', () => {
  for (const c of cases) {
    it(`${c.name}: the same routes, logits within 1e-4, and not softmax top-k's routes`, async () => {
      const varied = await rows(tinyHParams(c.arch, c.routing));
      for (const r of varied) {
        expect(r.routes).toEqual(r.expectedRoutes);
        expect(relativeError(r.logits, r.expected)).toBeLessThan(1e-4);
      }
      const plain = await rows(tinyHParams(c.arch, { normTopK: c.routing.normTopK ?? tinyHParams(c.arch).normTopK }));
      expect(varied.some((r, i) => r.routes.join() !== plain[i].routes.join())).toBe(true);
    });
  }

  it('forced routes take the variant weights (sigmoid, renormalised over them, scaled)', async () => {
    const hp = tinyHParams('qwen3moe', {
      gating: 'sigmoid',
      expertBias: true,
      normTopK: true,
      expertWeightsScale: 2.5,
    });
    for (const r of await rows(hp, [6, 1])) {
      expect(r.routes).toEqual(r.expectedRoutes);
      expect(relativeError(r.logits, r.expected)).toBeLessThan(1e-4);
    }
  });

  it('the native model refuses groups that do not divide the experts or leave no room for top-k', () => {
    const m = mapModel(tinyHParams('qwen3moe'), { type: 'F32', seed: 5 });
    opened.push(m);
    for (const expertGroups of [
      { count: 3, used: 1 },
      { count: 4, used: 0 },
      { count: 8, used: 1 },
    ])
      expect(() => native.createModel(m.file, { ...m.desc, hparams: { ...m.desc.hparams, expertGroups } })).toThrow(
        /hparams\.expertGroups: expected count dividing nExpert/,
      );
  });
});

describe('routing.ts', () => {
  it('the bias chooses but does not weight; the weights renormalise and scale', () => {
    const logits = Float32Array.of(0, 1, 2, 3);
    const bias = Float32Array.of(5, 0, 0, 0); // expert 0 is chosen by its bias alone
    const { ids, weights } = route(
      { nExpertUsed: 2, normTopK: true, gating: 'sigmoid', expertWeightsScale: 2 },
      logits,
      bias,
    );
    expect(ids).toEqual([0, 3]);
    const s = (z: number) => 1 / (1 + Math.exp(-z));
    expect(weights[0]).toBeCloseTo((2 * s(0)) / (s(0) + s(3)), 6);
    expect(weights[1]).toBeCloseTo((2 * s(3)) / (s(0) + s(3)), 6);
  });

  it('groups: only the experts of the best groups by their top-2 sums remain', () => {
    const probs = Float32Array.of(0.9, 0.0, 0.5, 0.5, 0.1, 0.1, 0.2, 0.2); // group sums 0.9, 1.0, 0.2, 0.4
    const sel = selection({ expertGroups: { count: 4, used: 2 } }, probs, undefined);
    expect(Array.from(sel)).toEqual([Math.fround(0.9), 0, 0.5, 0.5, -Infinity, -Infinity, -Infinity, -Infinity]);
  });
});
