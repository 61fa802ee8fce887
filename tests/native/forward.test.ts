/**
 * The native forward pass against the TypeScript reference (src/reference/forward.ts) on small
 * random models of all four architectures: a prefill of several rows, then decode steps, with
 * logits and routes compared row by row.
 *
 * F32 and F16 weights, real top-k routing: every route equal, logits within 1e-4 of the
 * reference (largest |native - reference| / largest |reference logit|; f32 vs f64 sums only).
 *
 * Q8_0 / Q4_0 / IQ4_NL / MXFP4 weights: the kernels also quantise activations to 8 bits, which moves these
 * 64-wide models' logits by 2-4 %. That noise is relative, so no router scale separates a
 * near-tie from it: about 1 in 20 (row, layer) top-k choices flips on these random models, and
 * a flipped row changes every later row through the KV cache. So the quantised cases route to
 * all experts (nExpertUsed = nExpert) through a plain (unsharpened) router, whose softmax
 * weights do not amplify the noise: the set cannot flip, the rank order may, and the logits
 * of every row must be within 5e-2 (a wrong stride or type would be off by ~100 %).
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import type { Arch, GgmlTypeName } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const cases: Array<{ arch: Arch; type: GgmlTypeName; tiedOutput?: boolean }> = [
  { arch: 'qwen3moe', type: 'Q8_0' },
  { arch: 'qwen2moe', type: 'Q4_0' },
  { arch: 'olmoe', type: 'F16' },
  { arch: 'qwen3moe', type: 'Q4_0' },
  { arch: 'olmoe', type: 'IQ4_NL' }, // llama-quantize's fallback type (src/model/quant-iq4.ts writes it)
  { arch: 'gpt-oss', type: 'MXFP4' }, // gpt-oss's expert type, here in every matrix (src/model/quant-mxfp4.ts writes it)
  { arch: 'llama', type: 'Q8_0', tiedOutput: true },
  { arch: 'qwen3moe', type: 'F32' },
  { arch: 'qwen2moe', type: 'F32' },
  { arch: 'olmoe', type: 'F32' },
  { arch: 'llama', type: 'F32' },
];

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

function open(arch: Arch, type: GgmlTypeName, tiedOutput = false, seed = 3): MappedModel {
  const allExperts = type === 'Q8_0' || type === 'Q4_0' || type === 'IQ4_NL' || type === 'MXFP4';
  const m = mapModel(tinyHParams(arch, { tiedOutput, ...(allExperts ? { nExpertUsed: 8 } : {}) }), {
    type,
    seed,
    routerScale: allExperts ? 1 : 8,
  });
  opened.push(m);
  return m;
}

function sortedPerLayer(routes: number[], k: number): number[][] {
  return Array.from({ length: routes.length / k }, (_, l) => routes.slice(l * k, (l + 1) * k).sort((x, y) => x - y));
}

describe('native forward vs reference', () => {
  for (const { arch, type, tiedOutput } of cases) {
    it(`${arch} ${type}${tiedOutput ? ' tied' : ''}: prefill 6 rows, then 3 decode steps`, async () => {
      const m = open(arch, type, tiedOutput);
      const hp = m.model.hparams;
      const exact = type === 'F32' || type === 'F16';
      const nCtx = 16;
      const ctx = native.createContext(m.handle, { nCtx, threads: 2 });
      onTestFinished(() => native.freeContext(ctx));
      const reference = createReferenceSession(m.model, nCtx);
      const perRow = hp.nLayer * hp.nExpertUsed;
      const rows: Array<{
        logits: Float32Array;
        expected: Float32Array;
        routes: number[];
        expectedRoutes: number[][];
      }> = [];

      const prompt = [5, 17, 3, 90, 42, 0];
      const logits = new Float32Array(prompt.length * hp.nVocab);
      const routes = new Int32Array(prompt.length * perRow);
      native.evalSync(ctx, Int32Array.from(prompt), 0, logits, { allLogits: true, routes });
      const expected = reference.eval(prompt);
      prompt.forEach((_, r) =>
        rows.push({
          logits: logits.subarray(r * hp.nVocab, (r + 1) * hp.nVocab),
          expected: expected.logits[r],
          routes: Array.from(routes.subarray(r * perRow, (r + 1) * perRow)),
          expectedRoutes: expected.routes[r],
        }),
      );
      let pos = prompt.length;
      for (const token of [7, 64, 95]) {
        const row = new Float32Array(hp.nVocab);
        const rowRoutes = new Int32Array(perRow);
        await native.evalAsync(ctx, Int32Array.of(token), pos++, row, { routes: rowRoutes });
        const step = reference.eval([token]);
        rows.push({
          logits: row,
          expected: step.logits[0],
          routes: Array.from(rowRoutes),
          expectedRoutes: step.routes[0],
        });
      }

      for (const row of rows) {
        if (exact) expect(row.routes).toEqual(row.expectedRoutes.flat());
        else
          expect(sortedPerLayer(row.routes, hp.nExpertUsed)).toEqual(
            row.expectedRoutes.map((ids) => [...ids].sort((x, y) => x - y)),
          );
        expect(relativeError(row.logits, row.expected)).toBeLessThan(exact ? 1e-4 : 5e-2);
      }
    });
  }
});
