/**
 * gpt-oss's layer in the native forward pass against the f32 reference (issue 30): attention sinks,
 * sliding-window attention on the even layers (window 3, so a 9-token run crosses it), q/k/v and
 * output biases, YaRN, post_attention_norm, the router bias, top-k of the raw logits weighted by the
 * softmax over the k, per-expert biases and the clamped SwiGLU. Every route equal and logits within
 * 1e-4 on an F32 model over a prefill and decode steps; and each of those features moves the
 * logits (the reference without it is far from the native pass), so neither side can drop one.
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import type { HParams } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

const yarn = { type: 'yarn', factor: 4, origContext: 8, attnFactor: 1, betaFast: 32, betaSlow: 1 } as const;
const prompt = [5, 17, 3, 90, 42, 0];
const steps = [7, 64, 95];

function open(hp: HParams): MappedModel {
  const m = mapModel(hp, { type: 'F32', seed: 11, routerScale: 8 });
  opened.push(m);
  return m;
}

/** The native pass over the prompt then the decode steps: every row's logits and routes. */
async function runNative(m: MappedModel): Promise<{ logits: Float32Array[]; routes: number[][] }> {
  const hp = m.model.hparams;
  const ctx = native.createContext(m.handle, { nCtx: 16, threads: 2 });
  onTestFinished(() => native.freeContext(ctx));
  const perRow = hp.nLayer * hp.nExpertUsed;
  const logits = new Float32Array(prompt.length * hp.nVocab);
  const routes = new Int32Array(prompt.length * perRow);
  native.evalSync(ctx, Int32Array.from(prompt), 0, logits, { allLogits: true, routes });
  const out = {
    logits: prompt.map((_, r) => logits.slice(r * hp.nVocab, (r + 1) * hp.nVocab)),
    routes: prompt.map((_, r) => Array.from(routes.subarray(r * perRow, (r + 1) * perRow))),
  };
  let pos = prompt.length;
  for (const token of steps) {
    const row = new Float32Array(hp.nVocab);
    const rowRoutes = new Int32Array(perRow);
    await native.evalAsync(ctx, Int32Array.of(token), pos++, row, { routes: rowRoutes });
    out.logits.push(row);
    out.routes.push(Array.from(rowRoutes));
  }
  return out;
}

describe('gpt-oss: native forward vs reference', () => {
  const hp = tinyHParams('gpt-oss', { nLayer: 3, ropeScaling: yarn, slidingWindow: { window: 3, period: 2 } });

  it('the same routes, logits within 1e-4 (prefill and decode, across the window)', async () => {
    const m = open(hp);
    const got = await runNative(m);
    const reference = createReferenceSession(m.model, 16);
    const expected = reference.eval([...prompt, ...steps]);
    got.logits.forEach((row, r) => {
      expect(got.routes[r]).toEqual(expected.routes[r].flat());
      expect(relativeError(row, expected.logits[r])).toBeLessThan(1e-4);
    });
  });

  // Each feature off in the reference (the same weights): the last rows' logits move well past 1e-4.
  const ablations: Array<[string, Partial<HParams>]> = [
    ['attention sinks', { attnSinks: false }],
    ['sliding window', { slidingWindow: undefined }],
    ['output bias', { attnOutBias: false }],
    ['router bias', { routerBias: false }],
    ['softmax over the chosen k', { gating: 'softmax' }],
    ['expert biases', { expertFfnBias: false }],
    ['swiglu_oai', { expertAct: 'silu' }],
  ];
  it.each(ablations)('without %s the reference is not the native pass', async (_name, off) => {
    const m = open(hp);
    const got = await runNative(m);
    const reference = createReferenceSession({ ...m.model, hparams: { ...hp, ...off } }, 16);
    const expected = reference.eval([...prompt, ...steps]);
    const last = got.logits.length - 1;
    expect(relativeError(got.logits[last], expected.logits[last])).toBeGreaterThan(1e-3);
  });

  it('forced routes: the softmax over the forced ids logits, as the reference weights them', async () => {
    const m = open(hp);
    const ctx = native.createContext(m.handle, { nCtx: 16, threads: 1 });
    onTestFinished(() => native.freeContext(ctx));
    const forced = prompt.map((_, r) =>
      Array.from({ length: hp.nLayer }, (_, l) => [(r + l) % 8, (r + 2 * l + 3) % 8]),
    );
    const logits = new Float32Array(prompt.length * hp.nVocab);
    native.evalSync(ctx, Int32Array.from(prompt), 0, logits, {
      allLogits: true,
      forcedRoutes: Int32Array.from(forced.flat(2)),
    });
    const expected = createReferenceSession(m.model, 16).eval(prompt, forced);
    prompt.forEach((_, r) => {
      expect(relativeError(logits.subarray(r * hp.nVocab, (r + 1) * hp.nVocab), expected.logits[r])).toBeLessThan(1e-4);
    });
  });
});
