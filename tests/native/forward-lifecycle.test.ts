/**
 * The native forward's contract beyond the math: thread-count independence, chunked prefill,
 * rewinding by position, and typed refusals (bad descs, bad evals, handle misuse) that never crash.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { GGML_TYPE } from '../../src/model/types.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { descOf, mapModel, native, relativeError, type MappedModel } from './forward-helpers.js';

const m: MappedModel = mapModel(tinyHParams('qwen3moe'), { type: 'F32', seed: 9 });
const q8: MappedModel = mapModel(tinyHParams('qwen2moe'), { type: 'Q8_0', seed: 4 });
const hp = m.model.hparams;
afterAll(() => {
  m.close();
  q8.close();
});

function run(
  model: MappedModel,
  tokens: number[],
  options: { threads?: number; nCtx?: number; pos?: number } = {},
): Float32Array {
  const ctx = native.createContext(model.handle, { nCtx: options.nCtx ?? 32, threads: options.threads ?? 2 });
  try {
    const logits = new Float32Array(tokens.length * model.model.hparams.nVocab);
    native.evalSync(ctx, Int32Array.from(tokens), 0, logits, { allLogits: true });
    return logits;
  } finally {
    native.freeContext(ctx);
  }
}

const prompt = [1, 2, 3, 50, 60, 70, 80, 95];

describe('native forward: results', () => {
  it('gives bit-identical logits on 1, 2 and 3 threads (every output element has one owner)', () => {
    for (const model of [m, q8]) {
      const one = run(model, prompt, { threads: 1 });
      expect(run(model, prompt, { threads: 2 })).toEqual(one);
      expect(run(model, prompt, { threads: 3 })).toEqual(one);
    }
  });

  it('prefills past one chunk (256 rows) and matches the reference on the rows after it', () => {
    const tokens = Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % hp.nVocab);
    const logits = run(m, tokens, { nCtx: 320 });
    const expected = createReferenceSession(m.model, 320).eval(tokens).logits;
    for (const r of [0, 255, 256, 299]) {
      expect(relativeError(logits.subarray(r * hp.nVocab, (r + 1) * hp.nVocab), expected[r])).toBeLessThan(1e-4);
    }
  });

  it('rewinds: evaluating again from an earlier position overwrites the later rows', () => {
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
    const last = new Float32Array(hp.nVocab);
    native.evalSync(ctx, Int32Array.from(prompt), 0, last);
    native.evalSync(ctx, Int32Array.of(9, 8, 7), 3, last);
    native.freeContext(ctx);
    const fresh = run(m, [...prompt.slice(0, 3), 9, 8, 7]);
    // Not bit-equal: the kernels may sum a 3-row batch in another order than a 6-row one.
    expect(relativeError(last, fresh.subarray(5 * hp.nVocab))).toBeLessThan(1e-5);
  });

  it('writes only the last row without allLogits, and routes in [row][layer][rank] order', () => {
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
    const last = new Float32Array(hp.nVocab);
    const routes = new Int32Array(prompt.length * hp.nLayer * hp.nExpertUsed).fill(-1);
    native.evalSync(ctx, Int32Array.from(prompt), 0, last, { routes });
    native.freeContext(ctx);
    expect(relativeError(last, run(m, prompt).subarray((prompt.length - 1) * hp.nVocab))).toBeLessThan(1e-5);
    const expected = createReferenceSession(m.model, 32).eval(prompt).routes.flat(2);
    expect(Array.from(routes)).toEqual(expected);
  });
});

describe('native forward: refusals', () => {
  const ctx = native.createContext(m.handle, { nCtx: 8, threads: 2 });
  afterAll(() => native.freeContext(ctx));
  const logits = new Float32Array(hp.nVocab);

  it('refuses positions past nCtx, bad token ids and short outputs', () => {
    expect(() => native.evalSync(ctx, Int32Array.of(1, 2, 3), 6, logits)).toThrow(/nCtx 8 \(got pos 6 \+ 3 tokens\)/);
    expect(() => native.evalSync(ctx, Int32Array.of(1, hp.nVocab), 0, logits)).toThrow(
      /tokens\[1\]: expected a token id in \[0, 96\)/,
    );
    expect(() => native.evalSync(ctx, Int32Array.of(-1), 0, logits)).toThrow(/tokens\[0\]/);
    expect(() => native.evalSync(ctx, Int32Array.of(1, 2), 0, logits, { allLogits: true })).toThrow(
      /logits: expected room for 192/,
    );
    expect(() => native.evalSync(ctx, Int32Array.of(1), 0, logits, { routes: new Int32Array(1) })).toThrow(
      /routes: expected room/,
    );
    expect(() => native.evalSync(ctx, new Int32Array(0), 0, logits)).toThrow(/at least one token/);
  });

  it('refuses a second evalAsync while one runs, and freeing a running context', async () => {
    const first = native.evalAsync(ctx, Int32Array.of(1, 2, 3, 4), 0, logits);
    await expect(native.evalAsync(ctx, Int32Array.of(5), 4, new Float32Array(hp.nVocab))).rejects.toThrow(
      /already running/,
    );
    expect(() => native.freeContext(ctx)).toThrow(/await it first/);
    await first;
    await expect(native.evalAsync(ctx, Int32Array.of(1), 8, logits)).rejects.toThrow(/nCtx/);
  });

  it('names the tensor and what was expected for a bad desc', () => {
    const desc = descOf(m.model);
    const file = m.file;
    const without = { ...desc, tensors: desc.tensors.filter((t) => t.name !== 'blk.1.ffn_up_exps.weight') };
    expect(() => native.createModel(file, without)).toThrow(
      /blk\.1\.ffn_up_exps\.weight: expected a tensor of dims \[64, 32, 8\] \(missing\)/,
    );
    const edit = (name: string, change: object) => ({
      ...desc,
      tensors: desc.tensors.map((t) => (t.name === name ? { ...t, ...change } : t)),
    });
    expect(() => native.createModel(file, edit('blk.0.attn_k.weight', { dims: [64, 16] }))).toThrow(
      /blk\.0\.attn_k\.weight: expected dims \[64, 32\] \(got \[64, 16\]\)/,
    );
    expect(() => native.createModel(file, edit('output.weight', { offset: m.model.bytes.length - 100 }))).toThrow(
      /output\.weight: expected offset \+ bytes inside the file/,
    );
    expect(() => native.createModel(file, edit('blk.0.attn_norm.weight', { typeId: GGML_TYPE.Q8_0 }))).toThrow(
      /attn_norm\.weight: expected type F32, F16 or BF16/,
    );
    expect(() => native.createModel(file, edit('blk.0.attn_q.weight', { typeId: 77 }))).toThrow(
      /attn_q\.weight: expected type F32/,
    );
    expect(() => native.createModel(file, { ...desc, hparams: { ...hp, nHeadKv: 3 } })).toThrow(
      /nHead a multiple of nHeadKv/,
    );
    expect(() => native.createModel(file, { ...desc, hparams: { ...hp, ropeType: 'yarn' as 'neox' } })).toThrow(
      /ropeType: expected/,
    );
  });

  it('refuses wrong handles, bad context options and freeing a model that has contexts', () => {
    expect(() => native.createContext(ctx as never, { nCtx: 8, threads: 1 })).toThrow(TypeError);
    expect(() => native.createModel(ctx as never, descOf(m.model))).toThrow(/expected a mapped file handle/);
    expect(() => native.evalSync(m.handle as never, Int32Array.of(1), 0, logits)).toThrow(TypeError);
    expect(() => native.createContext(m.handle, { nCtx: 0, threads: 1 })).toThrow(/nCtx: expected 1\.\./);
    expect(() => native.createContext(m.handle, { nCtx: 8, threads: 65 })).toThrow(/threads: expected 1\.\.64/);
    expect(() => native.freeModel(m.handle)).toThrow(/context\(s\) still use this model/);
    const extra = native.createContext(m.handle, { nCtx: 4, threads: 1 });
    native.freeContext(extra);
    expect(() => native.evalSync(extra, Int32Array.of(1), 0, logits)).toThrow(/already freed/);
  });
});

describe('native forward: non-finite logits', () => {
  it('fails the eval with an error naming the position and the vocabulary id, never returns the logits', () => {
    // A NaN in the output norm's weights makes every logit NaN (before: greedy gave token 0 for ever).
    const poisoned = mapModel(tinyHParams('qwen3moe'), { type: 'F32', seed: 9 }, (model) => {
      const norm = model.tensors.get('output_norm.weight')!;
      new DataView(model.bytes.buffer, model.bytes.byteOffset).setFloat32(norm.offset + 4 * 5, NaN, true);
    });
    const ctx = native.createContext(poisoned.handle, { nCtx: 32, threads: 2 });
    try {
      const logits = new Float32Array(hp.nVocab);
      expect(() => native.evalSync(ctx, Int32Array.from([1, 2, 3]), 0, logits)).toThrow(
        /logits: a non-finite value \(NaN\) at token position 2, vocabulary id \d+/,
      );
    } finally {
      native.freeContext(ctx);
      poisoned.close();
    }
  });

  it('names inf and the exact id when one head row overflows, and the same context then runs a healthy model', () => {
    const id = 17;
    const overflow = mapModel(tinyHParams('qwen3moe'), { type: 'F32', seed: 9 }, (model) => {
      const head = model.tensors.get('output.weight')!;
      const view = new DataView(model.bytes.buffer, model.bytes.byteOffset);
      for (let c = 0; c < hp.nEmbd; c++) view.setFloat32(head.offset + 4 * (id * hp.nEmbd + c), 3e38, true);
    });
    const ctx = native.createContext(overflow.handle, { nCtx: 32, threads: 1 });
    try {
      expect(() =>
        native.evalSync(ctx, Int32Array.from([4, 5]), 0, new Float32Array(2 * hp.nVocab), { allLogits: true }),
      ).toThrow(new RegExp(`non-finite value \\((inf|NaN)\\) at token position 0, vocabulary id ${id}:`));
    } finally {
      native.freeContext(ctx);
      overflow.close();
    }
    expect(run(m, [4, 5]).every(Number.isFinite)).toBe(true);
  });
});
