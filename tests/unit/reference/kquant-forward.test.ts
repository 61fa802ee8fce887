/**
 * The reference forward pass on k-quant files: a synthetic qwen3moe whose every row is a multiple
 * of 256 (so the k-quants themselves are written, no fallbacks), written F32 and in each k-quant
 * mix; the same prompt's logits are compared with the F32 file's. Also: --check-weights finds an
 * inf planted in a k-quant block's f16 scale (at its offset in the block).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNonFiniteWeights } from '../../../src/model/check-weights.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { readHParams } from '../../../src/model/hparams.js';
import type { GgufFile, HParams } from '../../../src/model/types.js';
import { createReferenceSession } from '../../../src/reference/forward.js';
import { topK } from '../../../src/reference/math.js';
import { synthMetadata } from '../../../src/synth/metadata.js';
import { PlantedModel } from '../../../src/synth/planted.js';
import { presetHParams } from '../../../src/synth/presets.js';
import { DEMO_PROMPT } from '../../../src/synth/prompts.js';
import { K_MIX_NAMES, type QuantName } from '../../../src/synth/quant-mix.js';
import { buildVocab, type SynthVocab } from '../../../src/synth/vocab.js';
import { synthTensors } from '../../../src/synth/weights.js';

/**
 * Every row a multiple of 256; all 4 experts used, so the logits are a continuous function of
 * the weights (with top-2 of 4, a near-tied router flips an expert under quantisation noise, and
 * that discrete change, not the quantisation error itself, dominates the logit difference).
 */
const hp: HParams = {
  ...presetHParams('tiny', 'qwen3moe'),
  nEmbd: 256,
  nLayer: 2,
  nExpert: 4,
  nExpertUsed: 4,
  nFfExp: 256,
  nHead: 4,
  nHeadKv: 2,
  headDim: 64,
  nVocab: 1024,
};
const dir = mkdtempSync(join(tmpdir(), 'moetier-kquant-'));
const files = new Map<QuantName, GgufFile>();
let vocab: SynthVocab;

async function write(quant: QuantName): Promise<GgufFile> {
  const plant = new PlantedModel(hp, vocab, 1, 'planted');
  const path = join(dir, `${quant}.gguf`);
  await writeGguf(path, synthMetadata(hp, vocab, `kquant-${quant}`), synthTensors(plant, quant), { alignment: 32 });
  return parseGguf(new Uint8Array(readFileSync(path)), path);
}

function logits(file: GgufFile, tokens: number[]): Float32Array[] {
  const session = createReferenceSession({ hparams: readHParams(file), tensors: file.tensors, bytes: file.bytes }, 32);
  return session.eval(tokens).logits;
}

beforeAll(async () => {
  vocab = buildVocab('gpt2', hp.nVocab, 4, 1);
  for (const quant of ['f32', 'q8_0', 'q4_0', 'mxfp4', ...K_MIX_NAMES] as const) files.set(quant, await write(quant));
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Per quant: [rms, max] of |logit - F32 logit| over the prompt's 15 positions' 1024 logits, in
 * units of that position's F32 logit standard deviation (worst position). The max sits on the
 * peak logits (~12 sd above the rest): a k-quant's fitted scale shrinks or stretches a row a
 * little, which moves large logits in proportion. Measured (deterministic): q8_0 0.0093 / 0.067,
 * q4_0 0.146 / 1.13, q6_k 0.033 / 0.27, q5_k_m 0.050 / 0.38, q4_k_m 0.092 / 0.65,
 * q3_k_m 0.201 / 1.49, q2_k 0.388 / 2.83, iq4_xs (moetier's IQ4_XS encoder) 0.100 / 0.73, mxfp4 (MXFP4
 * experts by moetier's encoder, the other matrices Q8_0) 0.036 / 0.26. Bounds: those plus ~25 %.
 */
const TOLERANCE: Record<string, [number, number]> = {
  q8_0: [0.012, 0.085],
  q4_0: [0.18, 1.4],
  q6_k: [0.042, 0.34],
  q5_k_m: [0.062, 0.49],
  q4_k_m: [0.12, 0.85],
  q3_k_m: [0.25, 1.9],
  q2_k: [0.49, 3.5],
  iq4_xs: [0.13, 0.92],
  mxfp4: [0.046, 0.33],
};

describe('reference forward pass on k-quant files', () => {
  it('writes the k-quant types themselves (no fallback at 256-multiple rows)', () => {
    const types = (q: QuantName): string[] =>
      [...new Set([...files.get(q)!.tensors.values()].map((t) => t.type))].sort();
    expect(types('q4_k_m')).toEqual(['F32', 'Q4_K', 'Q6_K']);
    expect(types('q5_k_m')).toEqual(['F32', 'Q5_K', 'Q6_K']);
    expect(types('q6_k')).toEqual(['F32', 'Q6_K']);
    expect(types('q3_k_m')).toEqual(['F32', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K']);
    expect(types('q2_k')).toEqual(['F32', 'Q2_K', 'Q3_K', 'Q6_K']);
    expect(types('iq4_xs')).toEqual(['F32', 'IQ4_XS', 'Q6_K']); // 2 layers: no Q5_K ffn_down below n_layer / 8
    expect(types('mxfp4')).toEqual(['F32', 'MXFP4', 'Q8_0']); // MXFP4_MOE: experts MXFP4, the other matrices Q8_0
  });

  for (const mix of ['q8_0', 'q4_0', 'mxfp4', ...K_MIX_NAMES] as const) {
    const [rmsMax, maxMax] = TOLERANCE[mix];
    it(`${mix}: logits within rms ${rmsMax} / max ${maxMax} sd of the F32 file's, the same top-1 where F32's margin is >= 1`, () => {
      const tokens = DEMO_PROMPT.words.map((w) => vocab.wordToken.get(w)!);
      const want = logits(files.get('f32')!, tokens);
      const got = logits(files.get(mix)!, tokens);
      let rmsWorst = 0,
        maxWorst = 0;
      want.forEach((w, row) => {
        const sd = Math.sqrt(
          w.reduce((a, v) => a + v * v, 0) / w.length - (w.reduce((a, v) => a + v, 0) / w.length) ** 2,
        );
        let se = 0,
          maxDiff = 0;
        for (let i = 0; i < w.length; i++) {
          const diff = Math.abs(got[row][i] - w[i]);
          se += diff * diff;
          maxDiff = Math.max(maxDiff, diff);
        }
        rmsWorst = Math.max(rmsWorst, Math.sqrt(se / w.length) / sd);
        maxWorst = Math.max(maxWorst, maxDiff / sd);
        expect(got[row].every(Number.isFinite)).toBe(true);
        const [best, second] = topK(w, 2);
        if (w[best] - w[second] >= 1) expect([row, topK(got[row], 1)[0]]).toEqual([row, best]);
      });
      expect(rmsWorst).toBeLessThanOrEqual(rmsMax);
      expect(maxWorst).toBeLessThanOrEqual(maxMax);
    });
  }

  it('check-weights finds a NaN in an IQ4_XS d (byte 0 of its 136), by block', () => {
    const file = files.get('iq4_xs')!;
    const bytes = file.bytes.slice();
    const up = file.tensors.get('blk.0.ffn_up_exps.weight')!;
    expect(up.type).toBe('IQ4_XS');
    expect(findNonFiniteWeights(file)).toEqual([]);
    new DataView(bytes.buffer).setUint16(up.offset + 136 * 5, 0x7e00, true);
    expect(findNonFiniteWeights({ ...file, bytes })).toEqual([
      { tensor: 'blk.0.ffn_up_exps.weight', index: 5, unit: 'block scale', count: 1 },
    ]);
  });

  it('check-weights finds an inf in a Q6_K d (byte 208) and a Q2_K dmin (byte 82), by block', () => {
    const q2 = files.get('q2_k')!;
    const bytes = q2.bytes.slice();
    const view = new DataView(bytes.buffer);
    const output = q2.tensors.get('output.weight')!; // Q6_K
    const gate = q2.tensors.get('blk.1.ffn_gate_exps.weight')!; // Q2_K
    expect([output.type, gate.type]).toEqual(['Q6_K', 'Q2_K']);
    expect(findNonFiniteWeights(q2)).toEqual([]);
    view.setUint16(output.offset + 210 * 3 + 208, 0x7c00, true);
    view.setUint16(gate.offset + 84 * 7 + 82, 0xfc00, true);
    const found = findNonFiniteWeights({ ...q2, bytes }).sort((a, b) => a.tensor.localeCompare(b.tensor));
    expect(found).toEqual([
      { tensor: 'blk.1.ffn_gate_exps.weight', index: 7, unit: 'block scale', count: 1 },
      { tensor: 'output.weight', index: 3, unit: 'block scale', count: 1 },
    ]);
  });
});
