import { describe, expect, it } from 'vitest';
import { InvalidOptionError, LimitExceededError } from '../../../src/core/errors.js';
import { dequantizeRow } from '../../../src/model/quant.js';
import type { Arch } from '../../../src/model/types.js';
import { createReferenceSession } from '../../../src/reference/forward.js';
import { buildRandomModel, tinyHParams, type RandomModel } from '../../fixtures/random-model.js';

/** A tensor as f32 rows, read independently of the reference's WeightCache. */
function rowsOf(model: RandomModel, name: string): Float32Array[] {
  const info = model.tensors.get(name)!;
  const cols = info.dims[0];
  const count = info.dims.slice(1).reduce((a, b) => a * b, 1);
  const stride = info.byteLength / count;
  return Array.from({ length: count }, (_, r) => {
    const out = new Float32Array(cols);
    dequantizeRow(info.type, model.bytes, info.offset + r * stride, cols, out);
    return out;
  });
}

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};
const norm = (x: number[], w: Float32Array, eps: number) => {
  const r = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + eps);
  return x.map((v, i) => v * r * w[i]);
};

/**
 * Position 0 computed a second way: with one key, attention returns v for every head, so the
 * whole first row reduces to norms, matrix products and the MoE written out longhand.
 */
function firstRowLonghand(model: RandomModel, token: number): number[] {
  const hp = model.hparams;
  let x = Array.from(rowsOf(model, 'token_embd.weight')[token]);
  for (let l = 0; l < hp.nLayer; l++) {
    const p = `blk.${l}.`;
    const h = norm(x, rowsOf(model, p + 'attn_norm.weight')[0], hp.rmsEps);
    const v = rowsOf(model, p + 'attn_v.weight').map((row) => dot(row, h));
    if (hp.attnBias) rowsOf(model, p + 'attn_v.bias')[0].forEach((b, i) => (v[i] += b));
    const group = hp.nHead / hp.nHeadKv;
    const o: number[] = [];
    for (let head = 0; head < hp.nHead; head++) {
      const kv = Math.floor(head / group);
      o.push(...v.slice(kv * hp.headDim, (kv + 1) * hp.headDim));
    }
    x = x.map((xi, i) => xi + dot(rowsOf(model, p + 'attn_output.weight')[i], o));
    const g = norm(x, rowsOf(model, p + 'ffn_norm.weight')[0], hp.rmsEps);
    const logits = rowsOf(model, p + 'ffn_gate_inp.weight').map((row) => dot(row, g));
    const max = Math.max(...logits);
    const exps = logits.map((z) => Math.exp(z - max));
    const probs = exps.map((e) => e / exps.reduce((a, b) => a + b, 0));
    const chosen = probs
      .map((pr, e) => [pr, e])
      .sort((a, b) => b[0] - a[0] || a[1] - b[1])
      .slice(0, hp.nExpertUsed)
      .map(([, e]) => e);
    const total = hp.normTopK ? chosen.reduce((s, e) => s + probs[e], 0) : 1;
    const gate = rowsOf(model, p + 'ffn_gate_exps.weight');
    const up = rowsOf(model, p + 'ffn_up_exps.weight');
    const down = rowsOf(model, p + 'ffn_down_exps.weight');
    const ffn = (gr: Float32Array[], ur: Float32Array[], dr: Float32Array[], nFf: number, e: number) => {
      const act = Array.from({ length: nFf }, (_, j) => {
        const a = dot(gr[e * nFf + j], g);
        return (a / (1 + Math.exp(-a))) * dot(ur[e * nFf + j], g);
      });
      return Array.from({ length: hp.nEmbd }, (_, i) => dot(dr[e * hp.nEmbd + i], act));
    };
    const moe = new Array(hp.nEmbd).fill(0);
    for (const e of chosen) ffn(gate, up, down, hp.nFfExp, e).forEach((y, i) => (moe[i] += (probs[e] / total) * y));
    if (hp.sharedExpert) {
      const s = 1 / (1 + Math.exp(-dot(rowsOf(model, p + 'ffn_gate_inp_shexp.weight')[0], g)));
      const y = ffn(
        rowsOf(model, p + 'ffn_gate_shexp.weight'),
        rowsOf(model, p + 'ffn_up_shexp.weight'),
        rowsOf(model, p + 'ffn_down_shexp.weight'),
        hp.nFfShexp,
        0,
      );
      y.forEach((yi, i) => (moe[i] += s * yi));
    }
    x = x.map((xi, i) => xi + moe[i]);
  }
  const h = norm(x, rowsOf(model, 'output_norm.weight')[0], hp.rmsEps);
  return rowsOf(model, 'output.weight').map((row) => dot(row, h));
}

const archs: Arch[] = ['qwen3moe', 'qwen2moe', 'olmoe', 'llama'];

describe('reference forward pass', () => {
  for (const arch of archs) {
    it(`${arch}: the first row equals the longhand computation`, () => {
      const model = buildRandomModel(tinyHParams(arch), { seed: 3 });
      const session = createReferenceSession(model, 16);
      const { logits } = session.eval([5]);
      const expected = firstRowLonghand(model, 5);
      // Both accumulate in f64 from the same f32 weights; they differ only in f32 rounding of intermediates.
      for (let i = 0; i < expected.length; i++) expect(logits[0][i]).toBeCloseTo(expected[i], 3);
    });
  }

  it('later positions depend on the context and the position; earlier rows do not change', () => {
    const model = buildRandomModel(tinyHParams('qwen3moe'), { seed: 4, type: 'Q8_0' });
    const a = createReferenceSession(model, 16).eval([5, 9, 9]);
    const b = createReferenceSession(model, 16).eval([5]);
    const c = createReferenceSession(model, 16).eval([7, 9, 9]);
    expect(Array.from(a.logits[0])).toEqual(Array.from(b.logits[0]));
    expect(Array.from(a.logits[1])).not.toEqual(Array.from(a.logits[2])); // same token, new position and context
    expect(Array.from(a.logits[1])).not.toEqual(Array.from(c.logits[1])); // same token, different context
    expect(a.routes).toHaveLength(3);
    expect(a.routes[0]).toHaveLength(2);
    expect(a.routes[0][0]).toHaveLength(2);
  });

  it('refuses an out-of-range token and a full context', () => {
    const model = buildRandomModel(tinyHParams('olmoe'), { seed: 5 });
    const session = createReferenceSession(model, 2);
    expect(() => session.eval([96])).toThrow(InvalidOptionError);
    expect(() => session.eval([1, 2, 3])).toThrow(LimitExceededError);
  });
});
