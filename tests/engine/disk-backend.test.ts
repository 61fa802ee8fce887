/**
 * The engine on the disk backend (issue 12's first working slice): the dense weights in the
 * engine's own memory, resident experts read from the file into RAM slots. With every expert
 * resident nothing of the model but its header stays in the page cache, and the tokens are the
 * plain engine's; with fewer slots the misses are read from the file for their call (streamed),
 * the tokens are unchanged and the page cache still holds none of the model's tensors.
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realpathSync } from 'node:fs';
import { ExpertReadError } from '../../src/core/errors.js';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import type { LoadedModel } from '../../src/model/load.js';
import type { NativeBackendStats } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { collect, referenceRun, tinyModel } from './tier-helpers.js';
import { withTierFaults } from '../../src/engine/tier/fault-injection.js';

const native = loadDiagnostics();
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

/**
 * At most this many of the tensors' pages may linger: posix_fadvise DONTNEED cannot drop a page
 * that still sits in another CPU's LRU cache (a reader moved between cores), which a loaded test
 * machine shows now and then. A tier computing from the mapping leaves every page it reads.
 */
const lingerMax = (pages: number) => Math.max(4, Math.ceil(pages * 0.05));

/** Page-cache pages strictly inside the model's tensors (the header's pages left out). */
function tensorPagesResident(m: LoadedModel): { pages: number; resident: number } {
  const page = native.mappedResidency(m.mapping, 0, 0).pageBytes;
  let pages = 0,
    resident = 0;
  for (const t of m.file.tensors.values()) {
    const from = Math.ceil(t.offset / page) * page,
      to = Math.floor((t.offset + t.byteLength) / page) * page;
    if (to <= from) continue;
    const r = native.mappedResidency(m.mapping, from, to - from);
    pages += r.pages;
    resident += r.resident;
  }
  return { pages, resident };
}

describe('disk backend in the engine', () => {
  it("every expert resident: the plain engine's tokens, and the model's tensors out of the page cache", async () => {
    native.dropFileCache(model);
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 128,
      heat: false,
      backend: 'disk',
      slotsPerLayer: 8,
    });
    try {
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      const { pages, resident } = tensorPagesResident(loadedOf(engine));
      expect(pages).toBeGreaterThan(50);
      expect(resident).toBeLessThanOrEqual(lingerMax(pages));
      expect(engine.tierStats()!.misses).toBe(0);
      expect(engine.tierStats()!.leases).toBe(0);
    } finally {
      await engine.close();
    }
  });

  it.each([
    ["admitted into the slot of the policy's coldest resident not running then (admitMisses, the default)", true],
    ['streamed into scratch for their call unless a free slot or queued swap takes them (admitMisses false)', false],
  ])(
    'fewer slots than experts: each miss is read from the file once before it runs, %s; the tokens and the page cache are unchanged',
    async (_, admitMisses) => {
      native.dropFileCache(model);
      const engine = await openEngine({
        model,
        threads: 1,
        contextTokens: 128,
        heat: false,
        backend: 'disk',
        slotsPerLayer: 2,
        lfru: { tickTokens: 2 },
        disk: { admitMisses },
      });
      try {
        expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
        const s = engine.tierStats()!;
        expect(s.misses).toBeGreaterThan(0);
        expect(s.lazyMisses).toBe(0); // no miss computed from the mapping
        // Decode rows: one per routed miss, and each miss read once (into a slot, or into scratch).
        expect(s.admittedReads! + s.streamedReads!).toBeLessThanOrEqual(s.misses);
        if (admitMisses) expect(s.admittedReads!).toBeGreaterThan(s.streamedReads!);
        else expect(s.streamedReads).toBeGreaterThan(0);
        expect(s.streamFailures).toBe(0);
        expect(engine.lastStats!.failedUploads).toBe(0);
        const { pages, resident } = tensorPagesResident(loadedOf(engine));
        expect(resident).toBeLessThanOrEqual(lingerMax(pages));
      } finally {
        await engine.close();
      }
    },
  );
});

describe('one read engine per disk tier', () => {
  // A closed engine's backend (and its read engine) goes once the collector drops the handles that share it.
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const collected = async () => {
    for (let i = 0; i < 4; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };

  it("the tier reads on the disk backend's engine: one engine and its threads, gone after close; each user counts its own bytes", async () => {
    await collected();
    const before = native.ioLive();
    const engine = await openEngine({
      model,
      threads: 1,
      contextTokens: 128,
      heat: false,
      backend: 'disk',
      slotsPerLayer: 2,
      lfru: { tickTokens: 2 },
    });
    try {
      const during = native.ioLive();
      const backend = (engine as unknown as { tier: { backend: { stats(): NativeBackendStats } } }).tier.backend;
      const disk = backend.stats().disk!;
      expect(during.engines - before.engines).toBe(1);
      // io_uring's owner thread, or queueDepth pread threads: one engine's, not two.
      expect(during.threads - before.threads).toBe(disk.engine === 'uring' ? 1 : disk.queueDepth);
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      const reads = engine.fileReads()!;
      expect(reads.streamedBytes).toBeGreaterThan(0);
      expect(reads.uploadBytes).toBe(backend.stats().bytesUploaded); // the backend's lane: its uploads, no streamed read
      expect(native.ioLive()).toMatchObject({ engines: during.engines, threads: during.threads });
    } finally {
      await engine.close();
    }
    await collected();
    expect(native.ioLive()).toEqual(before);
  });
});

describe('a failed expert read', () => {
  it('fails the request with ExpertReadError naming the file, layer, expert and offset; the engine stays usable', async () => {
    const engine = await withTierFaults({ streamedReadAfterBytes: 40_000 }, () =>
      openEngine({
        model,
        threads: 1,
        contextTokens: 128,
        heat: false,
        backend: 'disk',
        slotsPerLayer: 2,
        lfru: { tickTokens: 2 },
        disk: { admitMisses: false }, // misses streamed: the injected read (fault-injection.ts) is one of them
      }),
    );
    try {
      const hp = loadedOf(engine).hparams;
      const err = await collect(engine, prompt, { maxTokens, stopAtEos: false }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ExpertReadError);
      const e = err as ExpertReadError;
      expect(e.code).toBe('E_EXPERT_READ');
      expect(e.file).toBe(realpathSync(model));
      expect(e.layer).toBeGreaterThanOrEqual(0);
      expect(e.layer).toBeLessThan(hp.nLayer);
      expect(e.expert).toBeGreaterThanOrEqual(0);
      expect(e.expert).toBeLessThan(hp.nExpert);
      expect(e.offset).toBeGreaterThan(0);
      expect(e.message).toContain('injected');
      expect(engine.tierStats()!.leases).toBe(0);
      expect(engine.tierStats()!.streamFailures).toBe(1);
      // The injection fires once: the next request reads every miss and gives the plain tokens.
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
    } finally {
      await engine.close();
    }
  });
});

describe('disk backend over a Q4_0 container', () => {
  it('keeps no host copies (their arena would hold every non-resident expert): misses are read from the file; the tokens unchanged', async () => {
    const q4 = await tinyModel(dir, 'q4_0', 11);
    const { prompt: p4, reference: ref4 } = await referenceRun(q4, 'one two three four five six seven', maxTokens);
    const engine = await openEngine({
      model: q4,
      threads: 1,
      contextTokens: 128,
      heat: false,
      backend: 'disk',
      slotsPerLayer: 2,
      lfru: { tickTokens: 2 },
    });
    try {
      expect(await collect(engine, p4, { maxTokens, stopAtEos: false })).toEqual(ref4);
      const s = engine.tierStats()!;
      expect(s.lazyMisses).toBe(0);
      expect(s.streamedReads! + s.admittedReads!).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });
});
