/**
 * Issue 12, item 7, on the small preset (32 experts per layer, top-4, 118 MB at Q8_0): random
 * memory budgets on the disk tier give the plain engine's tokens (see disk-invariance.test.ts).
 * Slow: the model is generated here (a few seconds) and every case reads from the disk.
 */
import path from 'node:path';
import { afterAll, describe } from 'vitest';
import { writeSynthModel } from '../../src/synth/generate.js';
import { tempDir } from './tier-helpers.js';
import { diskInvariance } from './disk-invariance-helpers.js';

const { dir, cleanup } = tempDir('moetier-disk-inv-small-');
afterAll(cleanup);

describe('disk tier token invariance over random budgets (small q8_0)', () => {
  diskInvariance(
    async () => {
      const file = path.join(dir, 'small-q8_0.gguf');
      await writeSynthModel({ preset: 'small', arch: 'qwen3moe', quant: 'q8_0', seed: 3 }, file);
      return file;
    },
    { cases: 4, seed: 61, maxTokens: 24, timeoutMs: 180_000 },
  );
});
