/**
 * The disk backend (native/disk): RAM slots filled by reading the model file, never the mapping.
 * An upload's pieces are views of the mapping; the backend reads the same ranges of the file
 * through the read engine (native/include/mt_io.h), every piece's read issued with its upload, so
 * that several uploads are at the disk together. The bytes land exactly, the mapping's pages stay
 * out of the page cache, a read past the file or an injected failure fails the upload's event (the
 * slot invalid, the next upload fine), uploads past the engine's queue wait in the backend and
 * land, destroy waits for the reads in flight; where the filesystem refuses O_DIRECT the backend
 * reads buffered. Runs on the debug build too (vitest.config.ts). No timing assertions: the speed
 * is bench/disk-uploads.mjs's.
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { Backend, type DiskBackendStats } from '../../src/native/backend.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { concat, expectBackendError, pattern } from './backend-helpers.js';

const native = loadDiagnostics();
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-disk-backend-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** MT_BACKEND_DISK_READS_OUTSTANDING_MAX (native/include/mt_backend_disk.h): reads handed to the engine at most. */
const readsOutstandingMax = 2048;

/** Whether the read engine opens `file` with O_DIRECT (a filesystem may refuse it: ramfs, old tmpfs). */
function opensDirect(file: string): boolean {
  try {
    native.destroyIo(native.createIo(file, { direct: true }));
    return true;
  } catch (err) {
    if ((err as { ioStatus?: string }).ioStatus === 'unsupported') return false;
    throw err;
  }
}

/** Three "tensors" of 64 KiB, 4 experts of 16 KiB each, mapped without readahead. */
function modelFile(name: string, folder = dir) {
  const file = path.join(folder, name);
  const content = pattern(3 * 65536, 13);
  writeFileSync(file, content);
  native.dropFileCache(file);
  const mapped = native.mapFile(file, { access: 'random' });
  const views = (expert: number) =>
    [0, 1, 2].map((t) => new Uint8Array(mapped.buffer, t * 65536 + expert * 16384, 16384));
  const expected = (expert: number) =>
    concat([0, 1, 2].map((t) => content.subarray(t * 65536 + expert * 16384, t * 65536 + (expert + 1) * 16384)));
  return { file, content, mapped, views, expected };
}

function diskStats(b: Backend): DiskBackendStats {
  const disk = b.stats().disk;
  if (disk === undefined) throw new Error('a disk backend reports its read engine');
  return disk;
}

function expectSlot(b: Backend, slot: number, expected: Uint8Array): void {
  const out = new Uint8Array(expected.length);
  b.read(slot, out);
  expect(Buffer.compare(out, expected)).toBe(0);
}

describe('disk backend', () => {
  it("reads an expert's pieces from the file into the slot, leaving the mapping out of the page cache", async () => {
    const m = modelFile('a.bin');
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      const slot = b.reserve(2, 3 * 16384);
      await b.waitUploaded(b.upload(slot, m.views(2)));
      await b.waitUploaded(b.upload(slot + 1, m.views(1)));
      for (const [s, e] of [
        [slot, 2],
        [slot + 1, 1],
      ]) {
        const out = new Uint8Array(3 * 16384);
        b.read(s, out);
        expect(out).toEqual(m.expected(e));
      }
      // Read from the file, not through the mapping, and dropped from the page cache after.
      // (A page may linger in another CPU's LRU cache, where DONTNEED cannot drop it: a few at most.)
      expect(native.mappedResidency(m.mapped.handle).resident).toBeLessThanOrEqual(4);
      expect(b.stats()).toMatchObject({ uploadsDone: 2, uploadsFailed: 0, bytesUploaded: 2 * 3 * 16384 });
      // One read per piece, through the engine the machine offers, O_DIRECT where the filesystem allows it.
      const disk = diskStats(b);
      expect(disk).toMatchObject({
        direct: opensDirect(m.file),
        queueDepth: native.ioLimits.queueDepthDefault,
        readsIssued: 6,
        readsFailed: 0,
        bytesRead: 6 * 16384,
      });
      expect(['uring', 'threads']).toContain(disk.engine);
      expect(disk).toMatchObject({ readsInFlight: 0, readsQueued: 0, uploadsWaiting: 0 });
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it('fails an upload whose read fails (injected), and the next upload lands', async () => {
    const m = modelFile('b.bin');
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle, failTransferAfterBytes: 20000 });
    try {
      const slot = b.reserve(1, 3 * 16384);
      const failed = await b.wait(b.upload(slot, m.views(0)));
      expect(failed.state).toBe('failed');
      expect(b.slotState(slot)).toBe('invalid');
      b.free(slot);
      await b.waitUploaded(b.upload(slot, m.views(3)));
      const out = new Uint8Array(3 * 16384);
      b.read(slot, out);
      expect(out).toEqual(m.expected(3));
      // The engine's injected failure: the second piece's read fails 3616 bytes in; the failed
      // upload counts the bytes that landed (its first and third pieces whole).
      expect(b.stats()).toMatchObject({
        uploadsDone: 1,
        uploadsFailed: 1,
        bytesUploaded: 16384 + (20000 - 16384) + 16384 + 3 * 16384,
      });
      expect(diskStats(b)).toMatchObject({ readsIssued: 6, readsFailed: 1 });
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it("fails an upload of bytes that are not the model file's", async () => {
    const m = modelFile('c.bin');
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      const slot = b.reserve(1, 1024);
      expect((await b.wait(b.upload(slot, [pattern(1024, 1)]))).state).toBe('failed');
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it("issues every piece's read with its upload: uploads issued back to back are at the disk together", async () => {
    const m = modelFile('d.bin');
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      const first = b.reserve(4, 3 * 16384);
      // Held, the engine starts nothing: each upload's reads are queued at once, none waits for
      // the upload before it (one read at a time would leave three uploads with no read issued).
      b.holdDiskReads(true);
      const events = [0, 1, 2, 3].map((e) => b.upload(first + e, m.views(e), { label: e }));
      expect(b.stats().uploadsInFlight).toBe(4);
      const queueDepth = native.ioLimits.queueDepthDefault;
      expect(diskStats(b)).toMatchObject({ readsIssued: 12, readsQueued: 12, readsInFlight: 0, uploadsWaiting: 0 });
      b.holdDiskReads(false);
      const done = await Promise.all(events.map((e) => b.waitUploaded(e)));
      for (const e of [0, 1, 2, 3]) expectSlot(b, first + e, m.expected(e));
      const disk = diskStats(b);
      expect(disk.readsInFlightPeak).toBeGreaterThanOrEqual(1);
      expect(disk.readsInFlightPeak).toBeLessThanOrEqual(queueDepth);
      // An event spans its reads on the disk's clock: the first read's start to the last one's end.
      for (const e of done) expect(e.startNs > 0n && e.endNs >= e.startNs).toBe(true);
      if (disk.engine === 'uring') {
        // The ring's thread starts the queued reads together, one per place (all queue-depth
        // places are free), before it submits them: those reads' intervals all overlap.
        expect(disk.readsInFlightPeak).toBe(Math.min(queueDepth, 12));
        expect(done[1].startNs < done[0].endNs).toBe(true);
      }
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it("keeps uploads past the engine's queue waiting in the backend, in order, and lands them all", async () => {
    const m = modelFile('e.bin');
    const n = Math.floor(readsOutstandingMax / 3) + 20;
    const b = Backend.create('disk', { budgetBytes: n * 64, file: m.mapped.handle });
    try {
      // n slots of three 16-byte pieces: 3n reads, more than the backend hands the engine at once.
      const first = b.reserve(n, 48);
      const piece = (i: number, t: number) => new Uint8Array(m.mapped.buffer, t * 65536 + i * 16, 16);
      const expected = (i: number) =>
        concat([0, 1, 2].map((t) => m.content.subarray(t * 65536 + i * 16, t * 65536 + i * 16 + 16)));
      b.holdDiskReads(true);
      const events = Array.from({ length: n }, (_, i) =>
        b.upload(
          first + i,
          [0, 1, 2].map((t) => piece(i, t)),
        ),
      );
      const issued = Math.floor(readsOutstandingMax / 3);
      expect(diskStats(b)).toMatchObject({ readsQueued: 3 * issued, uploadsWaiting: n - issued });
      b.holdDiskReads(false);
      await Promise.all(events.map((e) => b.waitUploaded(e)));
      for (let i = 0; i < n; i++) expectSlot(b, first + i, expected(i));
      expect(diskStats(b)).toMatchObject({ readsIssued: 3 * n, readsFailed: 0, uploadsWaiting: 0 });
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it('fails an upload whose read comes short (the file shrank under it), and the next upload lands', async () => {
    const m = modelFile('f.bin');
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      const slot = b.reserve(1, 3 * 16384);
      // Expert 3's down piece starts at 180,224: past the new end. The mapping is never touched there.
      truncateSync(m.file, 150_000);
      expect((await b.wait(b.upload(slot, m.views(3)))).state).toBe('failed');
      expect(b.slotState(slot)).toBe('invalid');
      expect(diskStats(b).readsFailed).toBe(1);
      b.free(slot);
      await b.waitUploaded(b.upload(slot, m.views(0))); // ends at 147,456
      expectSlot(b, slot, m.expected(0));
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it('waits for the reads in flight on destroy, and leaves no read engine behind', async () => {
    const m = modelFile('g.bin');
    const before = native.ioLive();
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      expect(native.ioLive().engines).toBe(before.engines + 1);
      const first = b.reserve(4, 3 * 16384);
      b.holdDiskReads(true);
      for (const e of [0, 1, 2, 3]) b.upload(first + e, m.views(e));
    } finally {
      b.destroy(); // ends the hold, lets every read land into the slots, then frees them
      native.unmapFile(m.mapped.handle);
    }
    expect(native.ioLive()).toEqual(before);
  });

  // A filesystem that refuses O_DIRECT: /dev/shm where tmpfs does (kernels before 6.6), or the folder
  // MOETIER_TEST_BUFFERED_DIR names (e.g. a ramfs mount: mount -t ramfs none /mnt/ramfs).
  const bufferedDir = [process.env.MOETIER_TEST_BUFFERED_DIR, '/dev/shm'].find(
    (d) => d !== undefined && d !== '' && refusesDirect(d),
  );
  it.skipIf(bufferedDir === undefined)(
    `reads buffered where the filesystem refuses O_DIRECT${bufferedDir === undefined ? ' (skipped: /dev/shm takes O_DIRECT here and MOETIER_TEST_BUFFERED_DIR names no folder that refuses it)' : ''}`,
    async () => {
      const folder = mkdtempSync(path.join(bufferedDir ?? dir, 'moetier-disk-backend-'));
      const m = modelFile('h.bin', folder);
      const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
      try {
        const slot = b.reserve(2, 3 * 16384);
        await Promise.all([b.waitUploaded(b.upload(slot, m.views(1))), b.waitUploaded(b.upload(slot + 1, m.views(2)))]);
        expectSlot(b, slot, m.expected(1));
        expectSlot(b, slot + 1, m.expected(2));
        expect(diskStats(b)).toMatchObject({ direct: false, alignmentBytes: 1, readsBounced: 0, readsIssued: 6 });
      } finally {
        b.destroy();
        native.unmapFile(m.mapped.handle);
        rmSync(folder, { recursive: true, force: true });
      }
    },
  );

  it('is the only kind with disk stats and a read hold', () => {
    const b = Backend.create('cpu', { budgetBytes: 1 << 16 });
    try {
      expect(b.stats().disk).toBeUndefined();
      expectBackendError(() => b.holdDiskReads(true), 'unsupported');
    } finally {
      b.destroy();
    }
  });

  it('needs the file', () => {
    expect(() => Backend.create('disk', { budgetBytes: 1 << 20 })).toThrow(InvalidOptionError);
  });
});

/** Whether a file in `folder` (a writable folder) refuses O_DIRECT. */
function refusesDirect(folder: string): boolean {
  let probe: string | undefined;
  try {
    probe = mkdtempSync(path.join(folder, 'moetier-direct-probe-'));
    writeFileSync(path.join(probe, 'p.bin'), new Uint8Array(4096));
    return !opensDirect(path.join(probe, 'p.bin'));
  } catch {
    return false; // not there, or not writable
  } finally {
    if (probe !== undefined) rmSync(probe, { recursive: true, force: true });
  }
}
