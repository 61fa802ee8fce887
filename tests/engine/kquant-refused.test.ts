/**
 * The native engine does not run the k-quants (nor their Q5_0 / Q5_1 fallbacks) yet: opening such
 * a file is refused with a typed error naming the tensor and its type id, and nothing stays mapped.
 * The reference forward pass runs them (tests/unit/reference/kquant-forward.test.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MoetierError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-kquant-refused-');
let model: string;
beforeAll(async () => {
  model = join(dir, 'tiny-q4_k_m.gguf');
  await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q4_k_m', seed: 1 }, model);
});
afterAll(cleanup);

describe('openEngine on a k-quant mix', () => {
  it('refuses it with a typed error naming a tensor and its type', async () => {
    const open = openEngine({ model, heat: false });
    await expect(open).rejects.toBeInstanceOf(MoetierError);
    await expect(open).rejects.toThrow(/weight.*type id (6|7)\b/);
    expect(readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.endsWith(model))).toEqual([]);
  });
});
