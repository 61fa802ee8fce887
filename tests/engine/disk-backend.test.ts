/**
 * The engine on the disk backend (issue 12's first working slice): the dense weights in the
 * engine's own memory, resident experts read from the file into RAM slots. With every expert
 * resident nothing of the model but its header stays in the page cache, and the tokens are the
 * plain engine's; with fewer slots the tokens are unchanged too (the misses still run from the
 * mapping until admit-before-run).
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import type { LoadedModel } from '../../src/engine/load.js';
import { loadNative } from '../../src/native/binding.js';
import { collect, referenceRun, tinyModel } from './tier-helpers.js';

const native = loadNative();
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-disk-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 24;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 11);
  ({ prompt, reference } = await referenceRun(model, 'one two three four five six seven', maxTokens));
});

const loadedOf = (e: Engine) => (e as unknown as { model: LoadedModel }).model;

describe('disk backend in the engine', () => {
  it('every expert resident: the plain engine\'s tokens, and the model\'s tensors out of the page cache', async () => {
    native.dropFileCache(model);
    const engine = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, backend: 'disk', slotsPerLayer: 8 });
    try {
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      const m = loadedOf(engine);
      const page = native.mappedResidency(m.mapping, 0, 0).pageBytes;
      let pages = 0, resident = 0;
      for (const t of m.file.tensors.values()) {
        const from = Math.ceil(t.offset / page) * page, to = Math.floor((t.offset + t.byteLength) / page) * page;
        if (to <= from) continue;
        const r = native.mappedResidency(m.mapping, from, to - from);
        pages += r.pages;
        resident += r.resident;
      }
      expect(pages).toBeGreaterThan(0);
      expect(resident).toBe(0);
      expect(engine.tierStats()!.misses).toBe(0);
      expect(engine.tierStats()!.leases).toBe(0);
    } finally {
      await engine.close();
    }
  });

  it('fewer slots than experts: the tokens are unchanged', async () => {
    const engine = await openEngine({ model, threads: 1, contextTokens: 128, heat: false, backend: 'disk', slotsPerLayer: 2, lfru: { tickTokens: 2 } });
    try {
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      expect(engine.tierStats()!.misses).toBeGreaterThan(0);
      expect(engine.lastStats!.failedUploads).toBe(0);
    } finally {
      await engine.close();
    }
  });
});
