/**
 * Forced routes (mt_eval_args.forced_routes, the engine's routesFrom): each row runs the experts
 * it is given instead of the router's top-k, weighted by the router's softmax renormalised over
 * them. Checked against the reference forward pass given the same routes (F32: within 1e-4), on a
 * model that normalises its top-k (qwen3moe) and one that does not (qwen2moe, with its shared
 * expert); the routes the eval reports are the forced ones; bad routes fail before anything runs.
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import type { Arch } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

function open(arch: Arch): MappedModel {
  const m = mapModel(tinyHParams(arch), { type: 'F32', seed: 5 });
  opened.push(m);
  return m;
}

/** rows x [layer][k] distinct ids, deterministic, not the router's choice. */
function routesFor(rows: number, nLayer: number, nExpert: number, k: number, seed: number): number[][][] {
  return Array.from({ length: rows }, (_, r) =>
    Array.from({ length: nLayer }, (_, l) =>
      Array.from({ length: k }, (_, j) => (r * 3 + l * 5 + seed + j * 3) % nExpert),
    ),
  );
}

describe('native forward with forced routes', () => {
  for (const arch of ['qwen3moe', 'qwen2moe'] as const) {
    it(`${arch}: a prefill of 5 rows and 3 decode steps run the given experts, as the reference does`, async () => {
      const m = open(arch);
      const hp = m.model.hparams;
      const nCtx = 16;
      const ctx = native.createContext(m.handle, { nCtx, threads: 2 });
      onTestFinished(() => native.freeContext(ctx));
      const reference = createReferenceSession(m.model, nCtx);
      const perRow = hp.nLayer * hp.nExpertUsed;

      const prompt = [5, 17, 3, 90, 42];
      const forced = routesFor(prompt.length, hp.nLayer, hp.nExpert, hp.nExpertUsed, 1);
      const logits = new Float32Array(prompt.length * hp.nVocab);
      const routes = new Int32Array(prompt.length * perRow);
      native.evalSync(ctx, Int32Array.from(prompt), 0, logits, {
        allLogits: true,
        routes,
        forcedRoutes: Int32Array.from(forced.flat(2)),
      });
      const expected = reference.eval(prompt, forced);
      expect(Array.from(routes)).toEqual(forced.flat(2));
      expect(expected.routes).toEqual(forced);
      prompt.forEach((_, r) =>
        expect(relativeError(logits.subarray(r * hp.nVocab, (r + 1) * hp.nVocab), expected.logits[r])).toBeLessThan(
          1e-4,
        ),
      );

      let pos = prompt.length;
      for (const [i, token] of [7, 64, 95].entries()) {
        const step = routesFor(1, hp.nLayer, hp.nExpert, hp.nExpertUsed, 10 + i);
        const row = new Float32Array(hp.nVocab);
        const rowRoutes = new Int32Array(perRow);
        await native.evalAsync(ctx, Int32Array.of(token), pos++, row, {
          routes: rowRoutes,
          forcedRoutes: Int32Array.from(step.flat(2)),
        });
        expect(Array.from(rowRoutes)).toEqual(step.flat(2));
        expect(relativeError(row, reference.eval([token], step).logits[0])).toBeLessThan(1e-4);
      }
    });
  }

  it("forced routes that are the router's own top-k give its logits (a normalising model)", async () => {
    const m = open('qwen3moe');
    const hp = m.model.hparams;
    const ctxA = native.createContext(m.handle, { nCtx: 8, threads: 1 });
    const ctxB = native.createContext(m.handle, { nCtx: 8, threads: 1 });
    onTestFinished(() => (native.freeContext(ctxA), native.freeContext(ctxB)));
    const tokens = Int32Array.of(4, 8, 15);
    const own = new Int32Array(tokens.length * hp.nLayer * hp.nExpertUsed);
    const plain = new Float32Array(hp.nVocab);
    native.evalSync(ctxA, tokens, 0, plain, { routes: own });
    const forced = new Float32Array(hp.nVocab);
    native.evalSync(ctxB, tokens, 0, forced, { forcedRoutes: own });
    expect(Array.from(forced)).toEqual(Array.from(plain));
  });

  it('bad forced routes fail the eval before anything runs, naming row, layer and id', () => {
    const m = open('olmoe');
    const hp = m.model.hparams;
    const ctx = native.createContext(m.handle, { nCtx: 8, threads: 1 });
    onTestFinished(() => native.freeContext(ctx));
    const logits = new Float32Array(hp.nVocab);
    const ok = Int32Array.from(routesFor(2, hp.nLayer, hp.nExpert, hp.nExpertUsed, 0).flat(2));
    const evalWith = (forcedRoutes: Int32Array) => () =>
      native.evalSync(ctx, Int32Array.of(1, 2), 0, logits, { forcedRoutes });
    const outOfRange = ok.slice();
    outOfRange[hp.nLayer * hp.nExpertUsed + 1] = hp.nExpert; // row 1, layer 0, rank 1
    expect(evalWith(outOfRange)).toThrow(
      /forcedRoutes: row 1 layer 0: expected 2 distinct expert ids in \[0, 8\) \(got 8 at rank 1\)/,
    );
    const repeated = ok.slice();
    repeated[3] = repeated[2]; // row 0, layer 1
    expect(evalWith(repeated)).toThrow(/forcedRoutes: row 0 layer 1/);
    expect(evalWith(ok.subarray(1))).toThrow(/forcedRoutes: expected 8 ids/);
    expect(() =>
      native.evalSync(ctx, Int32Array.of(1), 0, logits, { forcedRoutes: new Float32Array(4) as unknown as Int32Array }),
    ).toThrow(/forcedRoutes must be an Int32Array/);
  });
});
