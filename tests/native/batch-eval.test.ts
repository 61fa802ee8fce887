/**
 * Continuous batching in the native forward pass (issue 29, item 1; mt_eval_args.seq_ids /
 * positions / logit_rows): a context of nSeq sequences, each eval any mix of rows of any of them.
 * A row attends to its own sequence only, so every row's logits are the bits it gets when its
 * sequence runs alone in a one-sequence context (prefill, then one token an eval), whatever rows
 * of other sequences share its evals. Checked over random schedules, on Q8_0 and Q4_0 models.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/core/prng.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native, type MappedModel } from './forward-helpers.js';

const hp = tinyHParams('qwen3moe', { nLayer: 2 });
const nCtx = 48;

/** Each sequence's tokens: a prompt, then the tokens "decoded" one at a time. */
interface SeqPlan {
  tokens: number[];
  promptLength: number;
}

function plans(seed: number, count: number): SeqPlan[] {
  const r = mulberry32(seed);
  return Array.from({ length: count }, () => {
    const length = 4 + Math.floor(r() * 30);
    return {
      tokens: Array.from({ length }, () => Math.floor(r() * hp.nVocab)),
      promptLength: 1 + Math.floor(r() * (length - 1)),
    };
  });
}

/** Logits of every row of a sequence run alone: its prompt in one eval, then one token an eval. */
function alone(m: MappedModel, plan: SeqPlan): Uint32Array[] {
  const ctx = native.createContext(m.handle, { nCtx, threads: 2 });
  try {
    const out: Uint32Array[] = [];
    const prompt = new Float32Array(plan.promptLength * hp.nVocab);
    native.evalSync(ctx, Int32Array.from(plan.tokens.slice(0, plan.promptLength)), 0, prompt, { allLogits: true });
    for (let r = 0; r < plan.promptLength; r++)
      out.push(new Uint32Array(prompt.slice(r * hp.nVocab, (r + 1) * hp.nVocab).buffer));
    for (let p = plan.promptLength; p < plan.tokens.length; p++) {
      const logits = new Float32Array(hp.nVocab);
      native.evalSync(ctx, Int32Array.of(plan.tokens[p]), p, logits);
      out.push(new Uint32Array(logits.buffer));
    }
    return out;
  } finally {
    native.freeContext(ctx);
  }
}

/**
 * Every sequence through one nSeq context in random steps: each step takes a random run of the next
 * rows of some sequences (one row for a sequence past its prompt, as decode does), in a random
 * sequence order, with logits of every row. Returns each sequence's row logits.
 */
function batched(m: MappedModel, all: SeqPlan[], seed: number, threads: number): Uint32Array[][] {
  const r = mulberry32(seed);
  const ctx = native.createContext(m.handle, { nCtx, threads, nSeq: all.length });
  try {
    const done = all.map(() => 0);
    const out: Uint32Array[][] = all.map(() => []);
    while (done.some((d, s) => d < all[s].tokens.length)) {
      const order = all.map((_, s) => s).sort(() => r() - 0.5);
      const tokens: number[] = [];
      const seqIds: number[] = [];
      const positions: number[] = [];
      for (const s of order) {
        const left = all[s].tokens.length - done[s];
        if (left === 0 || r() < 0.25) continue;
        const inPrompt = done[s] < all[s].promptLength;
        const take = inPrompt ? 1 + Math.floor(r() * (all[s].promptLength - done[s])) : 1;
        for (let i = 0; i < take; i++) {
          tokens.push(all[s].tokens[done[s] + i]);
          seqIds.push(s);
          positions.push(done[s] + i);
        }
      }
      if (tokens.length === 0) continue;
      const logits = new Float32Array(tokens.length * hp.nVocab);
      native.evalSync(ctx, Int32Array.from(tokens), 0, logits, {
        seqIds: Int32Array.from(seqIds),
        positions: Int32Array.from(positions),
        logitRows: Int32Array.from(tokens.keys()),
      });
      for (let i = 0; i < tokens.length; i++) {
        out[seqIds[i]].push(new Uint32Array(logits.slice(i * hp.nVocab, (i + 1) * hp.nVocab).buffer));
        done[seqIds[i]]++;
      }
    }
    return out;
  } finally {
    native.freeContext(ctx);
  }
}

describe('batched sequences in one context', () => {
  it.each(['Q8_0', 'Q4_0'] as const)(
    '%s: every row has the bits of its sequence run alone, over random schedules',
    (type) => {
      const m = mapModel(hp, { type, seed: 11, routerScale: 8 });
      try {
        for (const seed of [1, 2, 3]) {
          const all = plans(100 + seed, 4);
          const expected = all.map((p) => alone(m, p));
          const got = batched(m, all, seed, seed === 2 ? 1 : 2);
          for (let s = 0; s < all.length; s++) {
            expect(got[s].length).toBe(all[s].tokens.length);
            for (let row = 0; row < got[s].length; row++)
              expect(got[s][row], `seed ${seed} sequence ${s} row ${row}`).toEqual(expected[s][row]);
          }
        }
      } finally {
        m.close();
      }
    },
  );

  it('logitRows writes only the named rows, in order', () => {
    const m = mapModel(hp, { type: 'Q8_0', seed: 3 });
    const ctx = native.createContext(m.handle, { nCtx, threads: 2, nSeq: 2 });
    try {
      const tokens = Int32Array.of(4, 8, 15, 16, 23, 42);
      const seqIds = Int32Array.of(0, 0, 0, 1, 1, 1);
      const positions = Int32Array.of(0, 1, 2, 0, 1, 2);
      const all = new Float32Array(6 * hp.nVocab);
      native.evalSync(ctx, tokens, 0, all, { seqIds, positions, logitRows: Int32Array.of(0, 1, 2, 3, 4, 5) });
      const ctx2 = native.createContext(m.handle, { nCtx, threads: 2, nSeq: 2 });
      try {
        const two = new Float32Array(2 * hp.nVocab).fill(Number.NaN);
        native.evalSync(ctx2, tokens, 0, two, { seqIds, positions, logitRows: Int32Array.of(2, 5) });
        expect(two.slice(0, hp.nVocab)).toEqual(all.slice(2 * hp.nVocab, 3 * hp.nVocab));
        expect(two.slice(hp.nVocab)).toEqual(all.slice(5 * hp.nVocab));
        // Sequence 1's rows equal sequence 0's shifted by nothing: different tokens, different logits.
        expect(two.slice(hp.nVocab)).not.toEqual(two.slice(0, hp.nVocab));
      } finally {
        native.freeContext(ctx2);
      }
    } finally {
      native.freeContext(ctx);
      m.close();
    }
  });

  it('refuses rows outside the sequences, positions out of order and bad logit rows, naming them', () => {
    const m = mapModel(hp, { type: 'Q8_0', seed: 3 });
    const ctx = native.createContext(m.handle, { nCtx, threads: 1, nSeq: 2 });
    const logits = new Float32Array(4 * hp.nVocab);
    const tokens = Int32Array.of(1, 2);
    const evalWith =
      (o: Record<string, unknown>, pos = 0) =>
      () =>
        native.evalSync(ctx, tokens, pos, logits, o);
    try {
      expect(evalWith({ seqIds: Int32Array.of(0, 2), positions: Int32Array.of(0, 0) })).toThrow(
        /seqIds\[1\]: expected a sequence in \[0, 2\) \(got 2\)/,
      );
      expect(evalWith({ seqIds: Int32Array.of(1, 1), positions: Int32Array.of(3, 3) })).toThrow(
        /positions\[1\].*got 3 after 3/,
      );
      expect(evalWith({ seqIds: Int32Array.of(0, 1), positions: Int32Array.of(0, nCtx) })).toThrow(
        /positions\[1\]: expected a position in \[0, 48\)/,
      );
      expect(evalWith({ seqIds: Int32Array.of(0, 1), positions: Int32Array.of(0, 0) }, 3)).toThrow(/with pos 0/);
      expect(evalWith({ seqIds: Int32Array.of(0, 1) })).toThrow(/seqIds and options.positions must both be given/);
      expect(evalWith({ logitRows: Int32Array.of(1, 0) })).toThrow(/logitRows\[1\]: expected increasing rows/);
      expect(evalWith({ logitRows: Int32Array.of(0, 1, 1) })).toThrow(/logitRows: expected 0..2 rows/);
      expect(() => native.createContext(m.handle, { nCtx: 1 << 19, threads: 1, nSeq: 4 })).toThrow(
        /nSeq: expected 1..256 with nCtx x nSeq <= 1048576/,
      );
      expect(() => native.contextBytes(m.handle, { nCtx, threads: 1, nSeq: 0 })).toThrow(/nSeq 1..256/);
      // Nothing was written by a refused eval: the context still evaluates cleanly.
      expect(() => native.evalSync(ctx, tokens, 0, logits)).not.toThrow();
    } finally {
      native.freeContext(ctx);
      m.close();
    }
  });

  it('counts every sequence in the KV cache it sizes', () => {
    const m = mapModel(hp, { type: 'Q8_0', seed: 3 });
    try {
      const one = native.contextBytes(m.handle, { nCtx, threads: 2 });
      const four = native.contextBytes(m.handle, { nCtx, threads: 2, nSeq: 4 });
      expect(four.kvBytes).toBe(4 * one.kvBytes);
      expect(one.kvBytes).toBe(2 * hp.nLayer * nCtx * hp.nHeadKv * hp.headDim * 4);
    } finally {
      m.close();
    }
  });
});
