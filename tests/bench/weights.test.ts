import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { decodeBytesPerToken, tensorBytes } from '../../bench/lib/weights.mjs';
// @ts-expect-error plain .mjs bench module without declarations
import { bestByMedian, median } from '../../bench/lib/stats.mjs';

const F32 = 0;
const Q8_0 = 8;
const Q4_0 = 2;

describe('tensorBytes', () => {
  it('sizes quantized blocks: 34 bytes per 32 for Q8_0, 18 for Q4_0, 4 per f32', () => {
    expect(tensorBytes({ name: 'a', ggmlType: Q8_0, dims: [64, 3] })).toBe(2 * 34 * 3);
    expect(tensorBytes({ name: 'b', ggmlType: Q4_0, dims: [32, 2, 4] })).toBe(18 * 8);
    expect(tensorBytes({ name: 'c', ggmlType: F32, dims: [10n] })).toBe(40);
  });

  it("sizes the k-quants from the engine's table: 144 bytes per 256 for Q4_K, 210 for Q6_K", () => {
    expect(tensorBytes({ name: 'k4', ggmlType: 12, dims: [512, 3] })).toBe(2 * 144 * 3);
    expect(tensorBytes({ name: 'k6', ggmlType: 14, dims: [256, 2] })).toBe(210 * 2);
    expect(() => tensorBytes({ name: 'k6bad', ggmlType: 14, dims: [32, 2] })).toThrow(
      /k6bad: row length 32 is not a multiple of 256/,
    );
  });

  it('refuses a type it cannot size (Q4_1, which moetier does not read)', () => {
    expect(() => tensorBytes({ name: 'x', ggmlType: 3, dims: [256] })).toThrow(/x: ggml type 3/);
  });
});

describe('decodeBytesPerToken', () => {
  // One layer, hidden 32, 4 experts top-2, expert FFN 32, vocab 8, Q8_0 matrices.
  const row = 34; // one Q8_0 row of 32
  const layer = [
    { name: 'blk.0.attn_norm.weight', ggmlType: F32, dims: [32] },
    { name: 'blk.0.attn_q.weight', ggmlType: Q8_0, dims: [32, 32] },
    { name: 'blk.0.attn_output.weight', ggmlType: Q8_0, dims: [32, 32] },
    { name: 'blk.0.ffn_norm.weight', ggmlType: F32, dims: [32] },
    { name: 'blk.0.ffn_gate_inp.weight', ggmlType: F32, dims: [32, 4] },
    { name: 'blk.0.ffn_gate_exps.weight', ggmlType: Q8_0, dims: [32, 32, 4] },
    { name: 'blk.0.ffn_down_exps.weight', ggmlType: Q8_0, dims: [32, 32, 4] },
  ];
  const embd = { name: 'token_embd.weight', ggmlType: Q8_0, dims: [32, 8] };
  const outNorm = { name: 'output_norm.weight', ggmlType: F32, dims: [32] };
  const hp = { nExpert: 4, nExpertUsed: 2, nVocab: 8 };

  it('reads k/E of the experts, all of attention and router, one embedding row and the head', () => {
    const tensors = [embd, ...layer, outNorm, { name: 'output.weight', ggmlType: Q8_0, dims: [32, 8] }];
    const { bytesPerToken, breakdown, fileWeightBytes } = decodeBytesPerToken(tensors, hp);
    expect(breakdown.attention).toBe(128 + 2 * 32 * row);
    expect(breakdown.router).toBe(32 * 4 * 4);
    expect(breakdown.experts).toBe(2 * (2 * 32 * row)); // 2 tensors x 2 of 4 experts x 32 rows
    expect(breakdown.norms).toBe(128);
    expect(breakdown.embeddingRow).toBe(row);
    expect(breakdown.head).toBe(128 + 8 * row);
    expect(bytesPerToken).toBe(Object.values(breakdown).reduce((a: number, b) => a + (b as number), 0));
    expect(fileWeightBytes).toBeGreaterThan(bytesPerToken);
  });

  it('reads the whole embedding as the head when the output is tied', () => {
    const { breakdown } = decodeBytesPerToken([embd, ...layer, outNorm], hp);
    expect(breakdown.head).toBe(128 + 8 * row);
    expect(breakdown.embeddingRow).toBe(row);
  });

  it('refuses a tensor it cannot place', () => {
    expect(() => decodeBytesPerToken([{ name: 'blk.0.mystery.weight', ggmlType: F32, dims: [4] }], hp)).toThrow(
      /mystery/,
    );
  });
});

describe('stats', () => {
  it('median of odd and even counts', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });

  it('picks the thread count with the best median', () => {
    const runs = { 1: [{ r: 60 }, { r: 64 }, { r: 63 }], 2: [{ r: 38 }, { r: 90 }, { r: 37 }] };
    expect(bestByMedian(runs, 'r')).toEqual({ threads: 1, median: 63 });
  });
});

describe('bench options', () => {
  it('accepts positive integers and names the option it refuses', async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { oneOf, positiveInt } = await import('../../bench/lib/options.mjs');
    expect(positiveInt('rounds', '5')).toBe(5);
    expect(() => positiveInt('rounds', '0')).toThrow('option --rounds: expected an integer in [1, 1048576], got "0"');
    expect(() => positiveInt('tokens', 'many', 10)).toThrow(/--tokens/);
    expect(oneOf('preset', 'medium', ['small', 'medium'])).toBe('medium');
    expect(() => oneOf('preset', 'huge', ['small', 'medium'])).toThrow(/--preset: expected one of small, medium/);
  });
});
