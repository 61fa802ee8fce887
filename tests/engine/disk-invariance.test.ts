/**
 * Issue 12, item 7: on the disk tier the generated tokens are the plain engine's for every memory
 * budget (same kernels, same bits: a miss read into a slot or into scratch computes exactly as
 * from the mapping). A property test over random budgets, admission modes, LFRU intervals and
 * thread counts, on a Q8_0 and a Q4_0 container of the tiny preset, and on tiny's Q2_K mix, whose
 * experts are all IQ4_NL (llama-quantize's fallback for its rows of 64 and 32); the small preset
 * runs in disk-invariance-small.slow.test.ts.
 */
import { afterAll, describe } from 'vitest';
import { tempDir, tinyModel } from './tier-helpers.js';
import { diskInvariance } from './disk-invariance-helpers.js';

const { dir, cleanup } = tempDir('moetier-disk-inv-');
afterAll(cleanup);

describe.each(['q8_0', 'q4_0'] as const)('disk tier token invariance over random budgets (tiny %s)', (quant) => {
  diskInvariance(() => tinyModel(dir, quant, 23), { cases: 6, seed: quant === 'q8_0' ? 51 : 53, maxTokens: 24 });
});

describe('disk tier token invariance over random budgets (tiny q2_k: IQ4_NL experts)', () => {
  diskInvariance(() => tinyModel(dir, 'q2_k', 23), { cases: 4, seed: 57, maxTokens: 24 });
});
