/**
 * A decode row's logits are the same bits on 1, 2 and 3 threads (issue 31 item 3): each matrix
 * phase's pieces are claimed by whichever thread is free (native/cpu/forward.h run_phase), and a
 * row's result must not depend on which thread computed it or where the pieces split. Every expert
 * type family (Q8_0, Q4_0, MXFP4 with gpt-oss's biases and clamped SwiGLU, Q4_K with Q6_K down)
 * decodes 6 tokens after a prompt on each thread count, all 8 experts routed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Arch, GgmlTypeName } from '../../src/model/types.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, type MappedModel } from './forward-helpers.js';
import { kquantModels } from './kquant-helpers.js';

const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

function decodeLogits(m: MappedModel, threads: number): Float32Array[] {
  const nVocab = m.model.hparams.nVocab;
  const ctx = native.createContext(m.handle, { nCtx: 16, threads });
  try {
    const prompt = [5, 17, 3, 90];
    native.evalSync(ctx, Int32Array.from(prompt), 0, new Float32Array(nVocab));
    return [7, 64, 95, 11, 2, 40].map((token, i) => {
      const row = new Float32Array(nVocab);
      native.evalSync(ctx, Int32Array.of(token), prompt.length + i, row);
      return row;
    });
  } finally {
    native.freeContext(ctx);
  }
}

const plain: Array<{ arch: Arch; type: GgmlTypeName }> = [
  { arch: 'qwen3moe', type: 'Q8_0' },
  { arch: 'olmoe', type: 'Q4_0' },
  { arch: 'gpt-oss', type: 'MXFP4' },
];

describe('decode on 1, 2 and 3 threads', () => {
  const check = (m: MappedModel): void => {
    expect(m.model.hparams.nExpertUsed).toBe(8);
    const one = decodeLogits(m, 1);
    expect(one[0].some((v) => v !== 0)).toBe(true);
    for (const threads of [2, 3]) expect(decodeLogits(m, threads), `${threads} threads`).toEqual(one);
  };

  for (const { arch, type } of plain)
    it(`${arch} ${type}: every decode row's logits are the same bits`, () => {
      const m = mapModel(tinyHParams(arch, { nExpertUsed: 8 }), { type, seed: 5, routerScale: 1 });
      opened.push(m);
      check(m);
    });

  it('Q4_K gate / up with Q6_K down: the same bits', () => {
    const { kquant, f32 } = kquantModels('Q4_K', 'Q6_K', { nExpertUsed: 8 });
    opened.push(kquant, f32);
    check(kquant);
  });
});
