/**
 * RoPE's partial rotation and scaling (src/model/rope.ts, issue 30's first building block): the
 * native forward pass rotates the first ropeDims dims of each head by the table ropeTable gives
 * (linear or YaRN-scaled, with YaRN's magnitude), as the f32 reference does: logits within 1e-4
 * on F32 models, row by row over a prefill and decode steps, and different from the plain rotation
 * (the table reaches the kernels). The table itself: YaRN keeps the fast frequencies, divides the
 * slow ones by the factor, ramps between, and scales cos / sin by 1 + 0.1 ln factor.
 */
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { ropeTable, type RopeScaling } from '../../src/model/rope.js';
import type { Arch, HParams } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const yarn: RopeScaling = { type: 'yarn', factor: 4, origContext: 16, attnFactor: 1, betaFast: 32, betaSlow: 1 };
const cases: Array<{ name: string; arch: Arch; rope: Partial<HParams> }> = [
  { name: 'partial rotary, neox (8 of 16 dims)', arch: 'qwen3moe', rope: { ropeDims: 8 } },
  { name: 'partial rotary, norm, YaRN x4', arch: 'llama', rope: { ropeDims: 8, ropeScaling: yarn } },
  {
    name: 'whole head, neox, YaRN x4, attention factor 1.5',
    arch: 'qwen3moe',
    rope: { ropeScaling: { ...yarn, attnFactor: 1.5 } },
  },
  { name: 'whole head, norm, linear x2', arch: 'olmoe', rope: { ropeScaling: { ...yarn, type: 'linear', factor: 2 } } },
];

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

/** Logits of a prefill of 6 rows, then 3 decode steps, natively and in the reference. */
async function rows(hp: HParams): Promise<Array<{ native: Float32Array; reference: Float32Array }>> {
  const m = mapModel(hp, { type: 'F32', seed: 3, routerScale: 8 });
  opened.push(m);
  const nCtx = 16;
  const ctx = native.createContext(m.handle, { nCtx, threads: 2 });
  onTestFinished(() => native.freeContext(ctx));
  const reference = createReferenceSession(m.model, nCtx);
  const prompt = [5, 17, 3, 90, 42, 0];
  const logits = new Float32Array(prompt.length * hp.nVocab);
  native.evalSync(ctx, Int32Array.from(prompt), 0, logits, { allLogits: true });
  const expected = reference.eval(prompt);
  const out = prompt.map((_, r) => ({
    native: logits.slice(r * hp.nVocab, (r + 1) * hp.nVocab),
    reference: expected.logits[r],
  }));
  let pos = prompt.length;
  for (const token of [7, 64, 95]) {
    const row = new Float32Array(hp.nVocab);
    await native.evalAsync(ctx, Int32Array.of(token), pos++, row);
    out.push({ native: row, reference: reference.eval([token]).logits[0] });
  }
  return out;
}

describe('RoPE: partial rotation and scaling', () => {
  for (const c of cases) {
    it(`${c.name}: native within 1e-4 of the reference, and not the plain rotation`, async () => {
      const scaled = await rows(tinyHParams(c.arch, c.rope));
      for (const r of scaled) expect(relativeError(r.native, r.reference)).toBeLessThan(1e-4);
      const plain = await rows(tinyHParams(c.arch));
      // Position 0 rotates nothing: the later rows tell the rotations apart.
      expect(relativeError(scaled.at(-1)!.native, plain.at(-1)!.native)).toBeGreaterThan(1e-3);
    });
  }

  it('the native model refuses hparams with a scaling but no table, naming what is missing', () => {
    const hp = tinyHParams('qwen3moe', { ropeScaling: yarn });
    const m = mapModel(tinyHParams('qwen3moe'), { type: 'F32', seed: 3 });
    opened.push(m);
    expect(() => native.createModel(m.file, { ...m.desc, hparams: hp, rope: undefined })).toThrow(
      /rope: expected the rotation table .* beside hparams\.ropeScaling/,
    );
  });
});

describe('ropeTable', () => {
  it('plain: base^(-2i / dims) over the rotated dims, magnitude 1', () => {
    const t = ropeTable({ headDim: 16, ropeBase: 10000, ropeDims: 8 });
    expect(t.dims).toBe(8);
    expect(Array.from(t.invFreq)).toEqual([0, 1, 2, 3].map((i) => Math.pow(10000, (-2 * i) / 8)));
    expect(t.magnitude).toBe(1);
  });

  it('YaRN: the fast pairs extrapolate, the slow ones interpolate by the factor, a ramp between', () => {
    const dims = 64;
    const t = ropeTable({ headDim: dims, ropeBase: 10000, ropeScaling: { ...yarn, origContext: 4096 } });
    const plain = ropeTable({ headDim: dims, ropeBase: 10000 });
    const ratio = Array.from(t.invFreq, (f, i) => f / plain.invFreq[i]);
    expect(ratio[0]).toBeCloseTo(1, 12); // below lo: extrapolated, unchanged
    expect(ratio.at(-1)).toBeCloseTo(1 / 4, 12); // above hi: interpolated, divided by the factor
    const between = ratio.filter((r) => r < 1 - 1e-9 && r > 0.25 + 1e-9);
    expect(between.length).toBeGreaterThan(0);
    for (let i = 1; i < ratio.length; i++) expect(ratio[i]).toBeLessThanOrEqual(ratio[i - 1] + 1e-12);
    expect(t.magnitude).toBeCloseTo(1 + 0.1 * Math.log(4), 12);
  });
});
