/**
 * gen-model's k-quant mixes run on the native engine (issue 16). Tiny's rows (64, 32) are not
 * multiples of 256, so its mixes are llama-quantize's fallbacks (Q5_0, Q5_1, Q8_0, IQ4_NL: see
 * src/synth/quant-mix.ts); the 256-wide k-quant experts are covered by kquant-tier.test.ts. Each
 * mix opens, generates, and gives the same tokens with any expert budget (misses are computed from
 * the container: no exact int8 copy of a Q5 or IQ4_NL expert is offered).
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { K_MIX_NAMES } from '../../src/synth/quant-mix.js';
import { collect, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-kquant-mixes-');
afterAll(cleanup);

describe.each(K_MIX_NAMES)('tiny qwen3moe %s', (quant) => {
  it('generates, and a tier at 1 and 3 of 8 slots gives the tokens of no tier; no host copies', async () => {
    const model = join(dir, `tiny-${quant}.gguf`);
    await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant, seed: 1 }, model);
    const run = async (slots?: number) => {
      const e = await openEngine({
        model,
        threads: 1,
        contextTokens: 128,
        heat: false,
        ...(slots ? { slotsPerLayer: slots } : {}),
      });
      try {
        const ids = await collect(e, 'the ship will sail across the sea', { maxTokens: 16, stopAtEos: false });
        // Host copies are for all-Q4_0 experts only: q2_k's are all IQ4_NL (Q2_K and Q3_K fall back
        // to it), q3_k_m's IQ4_NL and Q5_0, every other mix's hold a Q5 or Q8_0 matrix.
        if (slots) expect(e.hostCopies()).toBeUndefined();
        return ids;
      } finally {
        await e.close();
      }
    };
    const plain = await run();
    expect(plain).toHaveLength(16);
    expect(await run(1)).toEqual(plain);
    expect(await run(3)).toEqual(plain);
  });
});
