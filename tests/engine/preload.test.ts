/**
 * preloadModel (issue 31): an engine that reads its model through the page cache maps the whole
 * file into its page tables when it opens (and reads each page once), so that a fresh engine's first
 * prompt pays no page fault per page of weights it touches first; an engine on the disk tier (a
 * budget, backend disk) never does, as its experts are read from the file on purpose. What the
 * process has mapped of the file is the mapping's Rss in /proc/self/smaps (the page cache's share
 * would not tell: reading the header already brings most of a small file in by readahead).
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-preload-');
afterAll(cleanup);
let model: string;
// 44 MB: a decode touches a small share of it.
beforeAll(async () => {
  model = path.join(dir, 'small-q2_k.gguf');
  await writeSynthModel({ preset: 'small', arch: 'qwen3moe', quant: 'q2_k', seed: 2 }, model);
}, 120_000);

/** The share of the file this process has mapped in (the Rss of its mappings of it). */
function mappedShare(file: string): number {
  let rssBytes = 0,
    inside = false;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inside = line.endsWith(file);
    else if (inside && line.startsWith('Rss:')) rssBytes += Number(line.split(/\s+/)[1]) * 1024;
  }
  return rssBytes / statSync(file).size;
}

describe('preloadModel', () => {
  it('is on by default without a budget: the whole file is mapped in once the engine is open', async () => {
    const engine = await openEngine({ model, heat: false });
    try {
      expect(engine.config.preloadModel).toBe(true);
      expect(mappedShare(model)).toBeGreaterThan(0.999);
    } finally {
      await engine.close();
    }
    expect(mappedShare(model)).toBe(0);
  });

  it('false leaves the weights to fault in when first used', async () => {
    const engine = await openEngine({ model, heat: false, preloadModel: false });
    try {
      expect(engine.config.preloadModel).toBe(false);
      // The header and the small tensors (norms) are read at open; the experts are not.
      expect(mappedShare(model)).toBeLessThan(0.25);
    } finally {
      await engine.close();
    }
  });

  it('is off on the disk tier, and refused there or when not a boolean', async () => {
    const engine = await openEngine({ model, heat: false, memoryBudgetBytes: 256 * 2 ** 20 });
    try {
      expect(engine.config.preloadModel).toBe(false);
      expect(mappedShare(model)).toBeLessThan(0.25);
    } finally {
      await engine.close();
    }
    await expect(openEngine({ model, memoryBudgetBytes: 256 * 2 ** 20, preloadModel: true })).rejects.toThrow(
      /option preloadModel: expected false or unset with memoryBudgetBytes or backend "disk"/,
    );
    await expect(openEngine({ model, backend: 'disk', resident: 0.5, preloadModel: true })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    await expect(openEngine({ model, preloadModel: 'yes' as never })).rejects.toThrow(
      /option preloadModel: expected a boolean/,
    );
  });
});
