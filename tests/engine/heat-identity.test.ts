/**
 * Default heat files are keyed by the model's identity (model/identity.ts) in the cache folder:
 * two different models of one file name get two heat files; one model under two names shares one.
 */
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { readHeatFile } from '../../src/engine/heat-file.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-heat-id-');
const cache = path.join(dir, 'cache');
const heatDir = path.join(cache, 'heat');
const previous = process.env.MOETIER_CACHE_DIR;
const hp = { arch: 'qwen3moe' as const, nLayer: 4, nExpert: 8 };

beforeAll(() => {
  process.env.MOETIER_CACHE_DIR = cache;
});
afterAll(() => {
  if (previous === undefined) delete process.env.MOETIER_CACHE_DIR;
  else process.env.MOETIER_CACHE_DIR = previous;
  cleanup();
});

async function modelAt(folder: string, seed: number): Promise<string> {
  mkdirSync(path.join(dir, folder), { recursive: true });
  const file = path.join(dir, folder, 'model.gguf');
  await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed }, file);
  return file;
}

/** One tier request with the default heat file; returns the heat files' routed pairs by name. */
async function request(model: string): Promise<Map<string, number>> {
  const engine = await openEngine({ model, threads: 1, contextTokens: 64, resident: 0.5 });
  try {
    await collect(engine, 'red green blue', { maxTokens: 3 });
  } finally {
    await engine.close();
  }
  return new Map(readdirSync(heatDir).map((f) => [f, readHeatFile(path.join(heatDir, f), hp)!.routedPairs]));
}

describe('default heat file', () => {
  it('is per model identity: same name, other model -> another file; same model, other name -> the same file', async () => {
    const a = await modelAt('a', 1);
    const b = await modelAt('b', 2);
    const afterA = await request(a);
    expect(afterA.size).toBe(1);
    const [fileA, pairsA] = [...afterA][0];
    expect(fileA).toMatch(/^[0-9a-f]{32}\.heat\.json$/);
    expect(pairsA).toBeGreaterThan(0);

    const afterB = await request(b);
    expect(afterB.size).toBe(2);
    expect(afterB.get(fileA)).toBe(pairsA); // b did not merge into a's heat

    const renamed = path.join(dir, 'b', 'renamed.gguf');
    copyFileSync(a, renamed);
    const afterCopy = await request(renamed);
    expect(afterCopy.size).toBe(2);
    expect(afterCopy.get(fileA)).toBe(2 * pairsA); // the same prompt and model: its heat merged twice
  });
});
