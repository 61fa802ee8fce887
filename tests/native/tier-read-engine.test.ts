/**
 * One read engine per disk tier (native/include/mt_backend.h read_engine, include/mt_io.h "Lanes"):
 * a tier whose backend reads the same model file (disk) reads its misses on the backend's engine,
 * on a lane of its own, instead of running a second engine with its own thread and bounce buffers.
 * Each user counts, fails (fault injection) and holds its own lane only, and a miss the layer waits
 * on is not delayed behind uploads queued on the backend's lane. Runs on the debug build too.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import type {
  MappedFileHandle,
  NativeBackendConfig,
  NativeBackendHandle,
  NativeContextHandle,
  NativeDiskBackendStats,
  NativeModelHandle,
  NativeTierHandle,
} from '../../src/native/binding.js';
import type { RandomModel } from '../fixtures/random-model.js';
import { greedyRun, native, tinyModel, type Step } from './tier-helpers.js';
import type { MappedModel } from './forward-helpers.js';

const decodeSteps = 6;
const open: Array<() => void> = [];
afterEach(() => {
  while (open.length > 0) open.pop()!();
});

/** The tiny model mapped here, so that a test can upload views of the mapping on the backend itself. */
function mappedTiny(): MappedModel & { buffer: ArrayBuffer } {
  const tiny = tinyModel('Q8_0');
  const model: RandomModel = tiny.model;
  const desc = tiny.desc;
  tiny.close();
  const dir = mkdtempSync(path.join(tmpdir(), 'moetier-tier-engine-'));
  const file = path.join(dir, 'model.bin');
  writeFileSync(file, model.bytes);
  const mapped = native.mapFile(file);
  rmSync(dir, { recursive: true }); // the mapping keeps the data
  const handle: NativeModelHandle = native.createModel(mapped.handle, desc);
  return {
    model,
    file: mapped.handle,
    desc,
    handle,
    buffer: mapped.buffer,
    close() {
      native.freeModel(handle);
      native.unmapFile(mapped.handle);
    },
  };
}

interface Setup {
  m: MappedModel & { buffer: ArrayBuffer };
  ctx: NativeContextHandle;
  backend: NativeBackendHandle;
  tier: NativeTierHandle;
}

function setup(
  slots: number,
  kind: 'disk' | 'cpu' = 'disk',
  extra: { streamFailAfterBytes?: number; backend?: Partial<NativeBackendConfig> } = {},
): Setup {
  const m = mappedTiny();
  const hp = m.model.hparams;
  const ctx = native.createContext(m.handle, { nCtx: 64, threads: 1 });
  const file: { file?: MappedFileHandle } = kind === 'disk' ? { file: m.file } : {};
  const backend = native.createBackend(kind, { budgetBytes: 1 << 24, ...file, ...extra.backend });
  const tier = native.createTier(ctx, backend, {
    slotsPerLayer: Array(hp.nLayer).fill(slots),
    streamFile: m.file,
    ...(extra.streamFailAfterBytes !== undefined ? { streamFailAfterBytes: extra.streamFailAfterBytes } : {}),
  });
  open.push(() => {
    native.freeTier(tier);
    native.destroyBackend(backend);
    native.freeContext(ctx);
    m.close();
  });
  return { m, ctx, backend, tier };
}

/** The same model without a tier: every expert from the mapping. */
async function plainRun(m: MappedModel): Promise<Step[]> {
  const ctx = native.createContext(m.handle, { nCtx: 64, threads: 1 });
  try {
    return await greedyRun(m, ctx, decodeSteps);
  } finally {
    native.freeContext(ctx);
  }
}

// A freed tier or backend lets its engine go once the collector drops the handles that share it.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
async function collected(): Promise<void> {
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const bits = (steps: Step[]) => steps.map((s) => Array.from(s.logits));

function diskStats(b: NativeBackendHandle): NativeDiskBackendStats {
  const disk = native.backendStats(b).disk;
  if (disk === undefined) throw new Error('a disk backend reports its read engine');
  return disk;
}

/** Reserves n more slots on the backend (beside the tier's) and uploads a slot's bytes of the mapping into each. */
function uploadsBeside(s: Setup, n: number): number[] {
  const slotBytes = native.backendStats(s.backend).slotBytes;
  const first = native.slotsReserve(s.backend, n, slotBytes);
  return Array.from({ length: n }, (_, i) =>
    native.upload(s.backend, first + i, [new Uint8Array(s.m.buffer, i * 4096, slotBytes)], false, i, s.m.file),
  );
}

describe('one read engine per disk tier', () => {
  it("a tier on a disk backend reads on the backend's engine: no engine or thread of its own; beside a cpu backend it runs its own", async () => {
    await collected();
    const before = native.ioLive();
    // Each setup in a scope of its own: its handles (which share the backend) can be collected after it.
    const { perEngine, run } = await (async () => {
      const disk = setup(1);
      const one = native.ioLive();
      expect(one.engines).toBe(before.engines + 1); // the backend's, shared
      // An engine's threads: io_uring's owner, or queueDepth pread threads.
      const perEngine = one.threads - before.threads;
      const d = diskStats(disk.backend);
      expect(perEngine).toBe(d.engine === 'uring' ? 1 : d.queueDepth);
      const run = await greedyRun(disk.m, disk.ctx, decodeSteps);
      expect(bits(run)).toEqual(bits(await plainRun(disk.m)));
      const s = native.tierStats(disk.tier);
      expect(s.admittedReads).toBeGreaterThan(0);
      expect(s.streamedReads).toBeGreaterThan(0); // both users read while the one engine lived
      expect(native.ioLive()).toMatchObject({ engines: one.engines, threads: one.threads });
      open.pop()!();
      return { perEngine, run };
    })();
    await collected();
    expect(native.ioLive()).toEqual(before);

    await (async () => {
      const cpu = setup(1, 'cpu'); // no engine on the backend: the tier opens its own
      expect(native.ioLive()).toMatchObject({ engines: before.engines + 1, threads: before.threads + perEngine });
      expect(bits(await greedyRun(cpu.m, cpu.ctx, decodeSteps))).toEqual(bits(run));
      open.pop()!();
    })();
    await collected();
    expect(native.ioLive()).toEqual(before);
  });

  it('each user counts its own reads: the tier its streamed misses, the backend its uploads', async () => {
    const { m, ctx, backend, tier } = setup(1);
    await greedyRun(m, ctx, decodeSteps);
    const s = native.tierStats(tier);
    const expertBytes = native.tierExpertBytes(tier).container;
    expect(s.streamedReads).toBeGreaterThan(0);
    expect(s.streamEngineBytes).toBe(s.streamedBytes); // the tier's lane: no upload among them
    const d = diskStats(backend);
    expect(d.bytesRead).toBe(s.admittedReads! * expertBytes); // the backend's lane: no streamed read among them
    expect(d.readsIssued).toBe(3 * s.admittedReads!);
    expect(native.backendStats(backend).bytesUploaded).toBe(d.bytesRead);
  });

  it('a miss is not delayed behind uploads queued on the backend: a hold of the uploads leaves the misses reading', async () => {
    const s = setup(1);
    const plain = await plainRun(s.m);
    const first = await greedyRun(s.m, s.ctx, decodeSteps); // every layer's slot filled: later misses are streamed
    expect(bits(first)).toEqual(bits(plain));
    const streamed = native.tierStats(s.tier).streamedReads!;
    native.diskHold(s.backend, true);
    const events = uploadsBeside(s, 4);
    expect(diskStats(s.backend)).toMatchObject({ readsQueued: 4, readsInFlight: 0 });
    // Every read of these evals is the tier's: they land while the uploads' reads stay queued.
    const second = await greedyRun(s.m, s.ctx, decodeSteps);
    expect(bits(second)).toEqual(bits(plain));
    expect(native.tierStats(s.tier).streamedReads!).toBeGreaterThan(streamed);
    expect(diskStats(s.backend)).toMatchObject({ readsQueued: 4, readsInFlight: 0 });
    expect(events.map((e) => native.eventQuery(s.backend, e).state)).toEqual(Array(4).fill('pending'));
    native.diskHold(s.backend, false);
    const landed = await Promise.all(events.map((e) => native.eventWait(s.backend, e)));
    expect(landed.map((e) => e.state)).toEqual(Array(4).fill('done'));
  });

  it("faults are per user: the tier's injected read fails no upload, and the backend's fails no streamed read", async () => {
    // The tier's: a read past 3000 of its bytes fails the eval; the uploads (each more than 3000 bytes) all land.
    const t = setup(1, 'disk', { streamFailAfterBytes: 3000 });
    const err = await greedyRun(t.m, t.ctx, decodeSteps).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/expert read: .+: layer \d+ expert \d+ at offset \d+ \(\d+ bytes\): .*injected/);
    expect(native.tierStats(t.tier)).toMatchObject({ streamFailures: 1 });
    expect(native.tierStats(t.tier).admittedReads).toBeGreaterThan(0);
    expect(diskStats(t.backend).readsFailed).toBe(0);
    expect(native.backendStats(t.backend).uploadsFailed).toBe(0);

    // The backend's: armed at its first byte, it never fires on the tier's reads (no slot: every miss streamed) ...
    const b = setup(0, 'disk', { backend: { failTransferAfterBytes: 1 } });
    expect(bits(await greedyRun(b.m, b.ctx, decodeSteps))).toEqual(bits(await plainRun(b.m)));
    expect(native.tierStats(b.tier)).toMatchObject({ streamFailures: 0 });
    expect(native.tierStats(b.tier).streamedReads).toBeGreaterThan(0);
    // ... and fails the backend's first upload.
    const slotBytes = native.tierExpertBytes(b.tier).container;
    const slot = native.slotsReserve(b.backend, 1, slotBytes);
    const ev = native.upload(b.backend, slot, [new Uint8Array(b.m.buffer, 0, slotBytes)], false, 0, b.m.file);
    expect((await native.eventWait(b.backend, ev)).state).toBe('failed');
    expect(diskStats(b.backend).readsFailed).toBe(1);
  });
});
