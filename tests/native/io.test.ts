/**
 * The read engine (native/include/mt_io.h, native/addon/io.cc): both engines, direct and buffered,
 * at several queue depths give the bytes a plain read of the file gives; short reads, reads past
 * the end, an injected failure, cancels and a destroy with reads in flight settle with a reason
 * and leave the engine (or the process) usable; bad arguments are refused with a code. Runs on the
 * debug build too (vitest.config.ts), where the engine's MT_ASSERT invariants are live.
 * No timing assertions: speed lives in bench/disk-probe.mjs.
 */
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/core/prng.js';
import { type NativeIoHandle, type NativeIoInfo, type NativeIoOptions } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { pattern } from './backend-helpers.js';

const native = loadDiagnostics();
const dir = mkdtempSync(path.join(tmpdir(), 'moetier-io-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Not a multiple of any block size, so the last block is partial.
const fileBytes = 6 * 1024 * 1024 + 1234;
const file = path.join(dir, 'ranges.bin');
writeFileSync(file, pattern(fileBytes, 7));
const content = readFileSync(file);

const live: NativeIoHandle[] = [];
function open(options: NativeIoOptions, target: number | string = file): NativeIoHandle {
  const io = native.createIo(target, options);
  live.push(io);
  return io;
}
function destroy(io: NativeIoHandle): void {
  live.splice(live.indexOf(io), 1);
  native.destroyIo(io);
}
afterAll(() => live.splice(0).forEach((io) => native.destroyIo(io)));

function refusal(fn: () => unknown): Error & { code?: string; ioStatus?: string } {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a throw');
}

function probe(options: NativeIoOptions): boolean {
  try {
    native.destroyIo(native.createIo(file, options));
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'MT_IO') return false;
    throw err;
  }
}
// Where the kernel has no io_uring (disabled by sysctl or seccomp) or the filesystem refuses
// O_DIRECT, those cases are skipped and say so in their names; auto then takes threads.
const uring = probe({ engine: 'uring', direct: false });
const direct = probe({ engine: 'threads', direct: true });
const engines = uring ? (['uring', 'threads'] as const) : (['threads'] as const);
const modes = direct ? [true, false] : [false];

/** A seeded generator of integers in [0, n) (the project's one PRNG, src/core/prng.ts). */
function randomInts(seed: number): (n: number) => number {
  const rng = mulberry32(seed);
  return (n) => Math.floor(rng() * n);
}

const same = (a: Uint8Array, b: Uint8Array): boolean =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

interface Range {
  offset: number;
  bytes: number;
  dstOffset: number;
}

/** Random ranges (any offset, any length up to 300 KB, odd dst offsets), ending with the file's last bytes. */
function ranges(seed: number, n: number): Range[] {
  const r = randomInts(seed);
  const out: Range[] = [];
  for (let i = 0; i < n - 2; i++) {
    const bytes = 1 + r(300_000);
    out.push({ offset: r(fileBytes - bytes + 1), bytes, dstOffset: r(64) });
  }
  out.push({ offset: fileBytes - 5000, bytes: 5000, dstOffset: 3 }, { offset: 0, bytes: 1, dstOffset: 0 });
  return out;
}

/** Issues every range at once (the queue holds what the depth does not), then checks each read's bytes and info. */
async function readAll(io: NativeIoHandle, list: Range[], dst: Uint8Array): Promise<NativeIoInfo[]> {
  const slots: number[] = [];
  let at = 0;
  const ids = list.map((g, i) => {
    slots.push(at);
    at += g.dstOffset + g.bytes;
    return native.ioRead(io, g.offset, g.bytes, dst, slots[i] + g.dstOffset, { label: i });
  });
  const infos = await Promise.all(ids.map((id) => native.ioWait(io, id)));
  list.forEach((g, i) => {
    const info = infos[i];
    expect(info, `range ${i}`).toMatchObject({
      state: 'done',
      error: 0,
      reason: '',
      label: i,
      offset: g.offset,
      bytes: g.bytes,
      bytesRead: g.bytes,
    });
    expect(info.issuedNs <= info.startNs && info.startNs <= info.endNs).toBe(true);
    const got = dst.subarray(slots[i] + g.dstOffset, slots[i] + g.dstOffset + g.bytes);
    expect(same(got, content.subarray(g.offset, g.offset + g.bytes)), `range ${i}: [${g.offset}, +${g.bytes})`).toBe(
      true,
    );
  });
  return infos;
}

function dstFor(list: Range[], shared: boolean): Uint8Array {
  const bytes = list.reduce((n, g) => n + g.dstOffset + g.bytes, 0);
  return new Uint8Array(shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));
}

describe('read engine: the same bytes as a plain read', () => {
  const cases = engines.flatMap((engine) =>
    modes.flatMap((d) => [1, 4, 32].map((queueDepth) => ({ engine, direct: d, queueDepth }))),
  );
  it.each(cases)(
    '$engine, direct $direct, queue depth $queueDepth: 60 random ranges',
    async ({ engine, direct: d, queueDepth }) => {
      const io = open({ engine, direct: d, queueDepth });
      const list = ranges(queueDepth * 31 + (d ? 1 : 2) + (engine === 'uring' ? 100 : 200), 60);
      const dst = dstFor(list, queueDepth === 4);
      const infos = await readAll(io, list, dst);
      const stats = native.ioStats(io);
      expect(stats).toMatchObject({
        engine,
        queueDepth,
        direct: d,
        readsIssued: 60,
        readsDone: 60,
        readsFailed: 0,
        readsInFlight: 0,
        readsQueued: 0,
        dstsHeld: 0,
      });
      expect(stats.bytesRead).toBe(list.reduce((n, g) => n + g.bytes, 0));
      // Direct: the unaligned ones bounced (nearly all of random ranges), through at most one buffer per read in flight.
      expect(stats.readsBounced).toBe(infos.filter((i) => i.bounced).length);
      if (d) {
        expect(stats.alignmentBytes).toBeGreaterThanOrEqual(512);
        expect(stats.alignmentSource).not.toBe('none');
        expect(stats.readsBounced).toBeGreaterThan(50);
        expect(stats.bounceBytes).toBeGreaterThan(0);
        expect(stats.bounceBytes).toBeLessThanOrEqual(queueDepth * (300_000 + 2 * 4096));
      } else {
        expect(stats).toMatchObject({ alignmentBytes: 1, alignmentSource: 'none', readsBounced: 0, bounceBytes: 0 });
      }
      destroy(io);
    },
  );

  it.each(engines.flatMap((engine) => modes.map((d) => ({ engine, direct: d }))))(
    '$engine, direct $direct: a read longer than one syscall takes is continued from where it stopped (short-read path)',
    async ({ engine, direct: d }) => {
      const io = open({ engine, direct: d, queueDepth: 3, chunkBytesMax: 10_000 });
      const list = ranges(77, 12);
      await readAll(io, list, dstFor(list, false));
      expect(native.ioStats(io).resubmits).toBeGreaterThan(12);
      destroy(io);
    },
  );

  it.runIf(direct)(
    'an aligned read goes straight into aligned dst memory; the aligned verb refuses anything else',
    async () => {
      for (const engine of engines) {
        const io = open({ engine, direct: true, queueDepth: 2 });
        const align = native.ioStats(io).alignmentBytes;
        const dst = native.allocAligned(16 * align, 4096);
        const offset = 3 * align;
        const info = await native.ioWait(io, native.ioRead(io, offset, 16 * align, dst, 0, { aligned: true }));
        expect(info).toMatchObject({ state: 'done', bounced: false, bytesRead: 16 * align });
        expect(same(dst, content.subarray(offset, offset + 16 * align))).toBe(true);
        // The plain verb sees the same alignment and does not bounce either.
        expect((await native.ioWait(io, native.ioRead(io, offset, align, dst, 0))).bounced).toBe(false);
        expect(native.ioStats(io).readsBounced).toBe(0);
        for (const [o, n, at] of [
          [offset + 32, align, 0],
          [offset, align + 32, 0],
          [offset, align, 32],
        ]) {
          const err = refusal(() => native.ioRead(io, o, n, dst, at, { aligned: true }));
          expect(err).toBeInstanceOf(RangeError);
          expect(err).toMatchObject({ code: 'MT_BAD_ARGUMENT', ioStatus: 'invalid' });
          expect(err.message).toMatch(new RegExp(`expected multiples of the alignment, ${align} bytes`));
        }
        destroy(io);
      }
    },
  );

  it('auto takes io_uring where the kernel offers it; the caller may close its fd at once, even of a deleted file', async () => {
    const scratch = path.join(dir, 'deleted.bin');
    writeFileSync(scratch, content.subarray(0, 100_000));
    const fd = openSync(scratch, 'r');
    const io = open({ queueDepth: 2, direct: false }, fd);
    closeSync(fd);
    unlinkSync(scratch);
    expect(native.ioStats(io).engine).toBe(uring ? 'uring' : 'threads');
    const dst = new Uint8Array(1000);
    expect(await native.ioWait(io, native.ioRead(io, 99_000, 1000, dst, 0))).toMatchObject({ state: 'done' });
    expect(same(dst, content.subarray(99_000, 100_000))).toBe(true);
    destroy(io);
  });
});

describe('read engine: failures settle with a reason and leave the engine usable', () => {
  const kinds = engines.flatMap((engine) => modes.map((d) => ({ engine, direct: d })));

  it.each(kinds)(
    '$engine, direct $direct: a read past the end of the file fails, naming the offset and the bytes',
    async ({ engine, direct: d }) => {
      const io = open({ engine, direct: d, queueDepth: 2 });
      const dst = new Uint8Array(10_000);
      const tail = await native.ioWait(io, native.ioRead(io, fileBytes - 100, 1000, dst, 0));
      expect(tail).toMatchObject({ state: 'failed', errorName: 'ENODATA', bytesRead: 100 });
      expect(tail.error).toBeGreaterThan(0);
      expect(tail.reason).toBe(`short read at offset ${fileBytes - 100}: got 100 of 1000 bytes (end of file)`);
      expect(same(dst.subarray(0, 100), content.subarray(fileBytes - 100))).toBe(true);
      const beyond = await native.ioWait(io, native.ioRead(io, fileBytes + 4096, 512, dst, 0));
      expect(beyond).toMatchObject({
        state: 'failed',
        errorName: 'ENODATA',
        bytesRead: 0,
        reason: `short read at offset ${fileBytes + 4096}: got 0 of 512 bytes (end of file)`,
      });
      // The next reads work.
      const list = ranges(5, 8);
      await readAll(io, list, dstFor(list, false));
      expect(native.ioStats(io)).toMatchObject({ readsFailed: 2, readsDone: 8 });
      destroy(io);
    },
  );

  it.each(kinds)(
    '$engine, direct $direct: an injected failure fails one read half-way (its first bytes landed), once',
    async ({ engine, direct: d }) => {
      const io = open({ engine, direct: d, queueDepth: 1, failAfterBytes: 250_000 });
      const offsets = [1000, 300_000, 777_777, 1_500_000];
      const dsts = offsets.map(() => new Uint8Array(100_000));
      const infos = await Promise.all(
        offsets.map((o, i) => native.ioWait(io, native.ioRead(io, o, 100_000, dsts[i], 0))),
      );
      expect(infos.map((i) => i.state)).toEqual(['done', 'done', 'failed', 'done']);
      expect(infos[2]).toMatchObject({
        errorName: 'EIO',
        bytesRead: 50_000,
        reason: 'injected failure at offset 777777: got 50000 of 100000 bytes',
      });
      expect(same(dsts[2].subarray(0, 50_000), content.subarray(777_777, 777_777 + 50_000))).toBe(true);
      for (const i of [0, 1, 3]) expect(same(dsts[i], content.subarray(offsets[i], offsets[i] + 100_000))).toBe(true);
      expect(native.ioStats(io)).toMatchObject({ readsDone: 3, readsFailed: 1, bytesRead: 350_000 });
      destroy(io);
    },
  );

  it.each(kinds)(
    '$engine, direct $direct: cancel fails queued reads at once; a read in flight runs to its end',
    async ({ engine, direct: d }) => {
      const io = open({ engine, direct: d, queueDepth: 1 });
      const dst = new Uint8Array(40 * 65_536);
      const slice = (i: number) => dst.subarray(i * 65_536, (i + 1) * 65_536);
      const expected = (i: number) => content.subarray(i * 100_003, i * 100_003 + 65_536);
      const first = native.ioRead(io, 0, 65_536, dst, 0);
      await native.ioWait(io, first);
      native.ioHold(io, true); // the rest stays queued until released
      const ids = [
        first,
        ...Array.from({ length: 39 }, (_, k) => native.ioRead(io, (k + 1) * 100_003, 65_536, dst, (k + 1) * 65_536)),
      ];
      expect(native.ioStats(io)).toMatchObject({ readsQueued: 39, readsInFlight: 0 });
      for (const id of ids.slice(20)) native.ioCancel(io, id);
      native.ioHold(io, false);
      const infos = await Promise.all(ids.map((id) => native.ioWait(io, id)));
      expect(infos.map((i) => i.state)).toEqual([...Array(20).fill('done'), ...Array(20).fill('failed')]);
      for (const i of infos.slice(20)) {
        expect(i).toMatchObject({ errorName: 'ECANCELED', bytesRead: 0, startNs: 0n });
        expect(i.reason).toBe(`cancelled before it started (offset ${i.offset}, 65536 bytes)`);
      }
      for (let i = 0; i < 20; i++) expect(same(slice(i), expected(i)), `read ${i}`).toBe(true);
      expect(native.ioStats(io)).toMatchObject({
        readsDone: 20,
        readsFailed: 20,
        readsCancelled: 20,
        readsInFlight: 0,
        readsQueued: 0,
      });
      native.ioCancel(io, ids[0]); // a finished read: left as it is
      expect(native.ioQuery(io, ids[0]).state).toBe('done');
      // A read in flight when cancelled is not recalled: it lands.
      const flying = native.ioRead(io, 5 * 100_003, 65_536, dst, 0);
      native.ioCancel(io, flying);
      const last = await native.ioWait(io, flying);
      if (last.startNs > 0n) expect(last).toMatchObject({ state: 'done', bytesRead: 65_536 });
      else expect(last).toMatchObject({ state: 'failed', errorName: 'ECANCELED' }); // a thread that had not yet taken it
      destroy(io);
    },
  );
});

describe('read engine: teardown and limits', () => {
  const fds = (): number => readdirSync('/proc/self/fd').length;

  it('destroy with reads in flight and queued neither crashes nor leaks engines, threads, bounce buffers or fds', async () => {
    const before = { live: native.ioLive(), fds: fds() };
    for (let round = 0; round < 6; round++) {
      for (const engine of engines) {
        for (const d of modes) {
          const queueDepth = 1 + (round % 3) * 7;
          const io = native.createIo(file, { engine, direct: d, queueDepth });
          const dst = new Uint8Array(64 * 50_000);
          const read = (i: number) => native.ioRead(io, (i * 97_331) % (fileBytes - 50_000), 50_000, dst, i * 50_000);
          const ids = Array.from({ length: 32 }, (_, i) => read(i)); // some in flight, the rest queued
          native.ioHold(io, true);
          ids.push(...Array.from({ length: 32 }, (_, i) => read(32 + i))); // queued for certain
          // Waits pending over the destroy: the engine lives until they settle, and they do (a queued read cancelled).
          const pending = [native.ioWait(io, ids[0]), native.ioWait(io, ids[63])];
          native.destroyIo(io);
          const [oldest, queued] = await Promise.all(pending);
          expect(['done', 'failed']).toContain(oldest.state);
          expect(queued).toMatchObject({ state: 'failed', errorName: 'ECANCELED' });
          expect(refusal(() => native.ioStats(io))).toMatchObject({ code: 'MT_FREED' });
        }
      }
    }
    expect(native.ioLive()).toEqual(before.live);
    expect(fds()).toBe(before.fds);
  });

  it('refuses reads past the queue limit with MT_BUSY, and bad arguments with a message', async () => {
    const io = open({ engine: 'threads', direct, queueDepth: 1 });
    const dst = new Uint8Array(4096);
    native.ioHold(io, true);
    const ids = Array.from({ length: native.ioLimits.queuedMax }, (_, i) =>
      native.ioRead(io, (i % 1500) * 4096, 4096, dst, 0),
    );
    const busy = refusal(() => native.ioRead(io, 0, 4096, dst, 0));
    expect(busy).toBeInstanceOf(Error);
    expect(busy).toMatchObject({ code: 'MT_BUSY', ioStatus: 'busy' });
    expect(busy.message).toBe('ioRead: mt_io_read: 4096 reads queued already: wait for some first');
    for (const id of ids.slice(10)) native.ioCancel(io, id);
    native.ioHold(io, false);
    expect((await Promise.all(ids.map((id) => native.ioWait(io, id)))).filter((i) => i.state === 'done').length).toBe(
      10,
    );

    const expectRefused = (fn: () => unknown, cls: ErrorConstructor, code: string, message: RegExp) => {
      const err = refusal(fn);
      expect(err).toBeInstanceOf(cls);
      expect(err.code).toBe(code);
      expect(err.message).toMatch(message);
    };
    expectRefused(
      () => native.ioRead(io, 0, 0, dst, 0),
      RangeError,
      'MT_BAD_ARGUMENT',
      /bytes: expected 1 to 1073741824, got 0/,
    );
    expectRefused(
      () => native.ioRead(io, 0, 10, new Uint16Array(8) as never, 0),
      TypeError,
      'MT_BAD_ARGUMENT',
      /dst: expected a Uint8Array/,
    );
    expectRefused(
      () => native.ioRead(io, 0, 10, dst, 4090),
      RangeError,
      'MT_BAD_ARGUMENT',
      /dstOffset 4090 \+ bytes 10: expected to fit in dst \(4096 bytes\)/,
    );
    expectRefused(
      () => native.ioRead(io, -1, 10, dst, 0),
      RangeError,
      'MT_BAD_ARGUMENT',
      /offset: expected an integer/,
    );
    expectRefused(
      () => native.ioQuery(io, 999_999),
      RangeError,
      'MT_BAD_ARGUMENT',
      /read 999999: unknown \(never issued\)/,
    );
    const waited = await native.ioWait(io, 999_999).catch((e: unknown) => e);
    expect(waited).toBeInstanceOf(RangeError);
    expect(waited).toMatchObject({ code: 'MT_BAD_ARGUMENT' });
    for (const queueDepth of [0, 65])
      expectRefused(
        () => native.createIo(file, { queueDepth }),
        RangeError,
        'MT_BAD_ARGUMENT',
        new RegExp(`queue_depth: expected 1 to 64, got ${queueDepth}`),
      );
    expectRefused(
      () => native.createIo(file, { engine: 'spdk' as never }),
      TypeError,
      'MT_BAD_ARGUMENT',
      /engine: expected "auto", "uring" or "threads"/,
    );
    const fd = openSync(file, 'r');
    closeSync(fd);
    expectRefused(
      () => native.createIo(fd),
      RangeError,
      'MT_BAD_ARGUMENT',
      new RegExp(`fd ${fd}: expected an open file descriptor \\(EBADF`),
    );
    expectRefused(
      () => native.createIo(dir),
      RangeError,
      'MT_BAD_ARGUMENT',
      /expected a regular file or a block device/,
    );
    expectRefused(() => native.createIo(path.join(dir, 'missing.bin')), Error, 'MT_IO', /cannot open/);
    // Another kind of handle is refused, not read as an engine.
    const backend = native.createBackend('cpu', { budgetBytes: 1 << 16 });
    try {
      expectRefused(
        () => native.ioStats(backend as never),
        TypeError,
        'MT_BAD_ARGUMENT',
        /expected a read engine handle/,
      );
      expectRefused(() => native.backendStats(io as never), TypeError, 'MT_BAD_ARGUMENT', /expected a backend handle/);
    } finally {
      native.destroyBackend(backend);
    }
    destroy(io);
  });

  it('keeps each dst array referenced until its read settles', async () => {
    const io = open({ engine: 'threads', direct: false, queueDepth: 1 });
    native.ioHold(io, true);
    const ids = Array.from({ length: 8 }, (_, i) => native.ioRead(io, i * 4096, 200_000, new Uint8Array(200_000), 0));
    expect(native.ioStats(io).dstsHeld).toBe(8);
    native.ioHold(io, false);
    await Promise.all(ids.map((id) => native.ioWait(io, id)));
    expect(native.ioStats(io).dstsHeld).toBe(0);
    destroy(io);
  });

  it('the probe loop keeps the depth in flight over the offsets and reports each read', async () => {
    for (const engine of engines) {
      const io = open({ engine, direct, queueDepth: 4 });
      const offsets = Float64Array.from({ length: 24 }, (_, i) => i * 200_032);
      const p = await native.ioProbe(io, offsets, 208_896, { dstMisalignBytes: 32 });
      expect(p).toMatchObject({ failed: 0, firstFailure: '' });
      expect(p.latencyNs.length).toBe(24);
      expect(p.latencyNs.every((ns) => ns > 0 && ns <= p.wallNs)).toBe(true);
      expect(native.ioStats(io)).toMatchObject({ readsDone: 24, readsBounced: direct ? 24 : 0 });
      const past = await native.ioProbe(io, Float64Array.of(fileBytes - 10), 100);
      expect(past).toMatchObject({
        failed: 1,
        firstFailure: `short read at offset ${fileBytes - 10}: got 10 of 100 bytes (end of file)`,
      });
      destroy(io);
    }
  });
});

describe('read engine: lanes (one engine, two users)', () => {
  const kinds = engines.flatMap((engine) => modes.map((d) => ({ engine, direct: d })));
  const normal = 0,
    urgent = 1;

  it.each(kinds)(
    '$engine, direct $direct: a free place takes the urgent lane first, however many normal reads were queued before it',
    async ({ engine, direct: d }) => {
      const io = open({ engine, direct: d, queueDepth: 1 });
      const dst = new Uint8Array(24 * 65_536);
      native.ioHold(io, true); // every lane: the queue fills, then the one place chooses
      const normals = Array.from({ length: 20 }, (_, k) => native.ioRead(io, k * 100_003, 65_536, dst, k * 65_536));
      const urgents = [20, 21].map((k) =>
        native.ioRead(io, k * 100_003, 65_536, dst, k * 65_536, { lane: urgent, label: k }),
      );
      expect(native.ioStats(io).lanes.map((l) => l.readsQueued)).toEqual([20, 2]);
      native.ioHold(io, false);
      const n = await Promise.all(normals.map((id) => native.ioWait(io, id)));
      const u = await Promise.all(urgents.map((id) => native.ioWait(io, id)));
      expect([...n, ...u].every((i) => i.state === 'done')).toBe(true);
      // One place: the two urgent reads ran first, in their order, and ended before any normal read started.
      const firstNormal = n.reduce((a, i) => (i.startNs < a ? i.startNs : a), n[0].startNs);
      expect(u[0].startNs).toBeLessThan(u[1].startNs);
      expect(u[1].endNs).toBeLessThanOrEqual(firstNormal);
      // The normal lane stays FIFO.
      for (let k = 1; k < n.length; k++) expect(n[k].startNs).toBeGreaterThan(n[k - 1].startNs);
      for (let k = 0; k < 22; k++) {
        const got = dst.subarray(k * 65_536, (k + 1) * 65_536);
        expect(same(got, content.subarray(k * 100_003, k * 100_003 + 65_536)), `read ${k}`).toBe(true);
      }
      destroy(io);
    },
  );

  it.each(kinds)(
    '$engine, direct $direct: a hold of one lane stalls only its reads; each lane counts its own reads',
    async ({ engine, direct: d }) => {
      const io = open({ engine, direct: d, queueDepth: 2 });
      const dst = new Uint8Array(16 * 50_000);
      native.ioHold(io, true, normal);
      const held = Array.from({ length: 6 }, (_, k) => native.ioRead(io, k * 70_001, 50_000, dst, k * 50_000));
      // The urgent lane's reads land while the normal lane's wait.
      const free = Array.from({ length: 4 }, (_, k) =>
        native.ioRead(io, (6 + k) * 70_001, 40_000, dst, (6 + k) * 50_000, { lane: urgent }),
      );
      const landed = await Promise.all(free.map((id) => native.ioWait(io, id)));
      expect(landed.every((i) => i.state === 'done')).toBe(true);
      let s = native.ioStats(io);
      expect(s.lanes[normal]).toMatchObject({ readsIssued: 6, readsQueued: 6, readsDone: 0, bytesRead: 0, held: true });
      expect(s.lanes[urgent]).toMatchObject({ readsIssued: 4, readsQueued: 0, readsDone: 4, bytesRead: 160_000 });
      expect(s.lanes[urgent].held).toBe(false);
      expect(held.map((id) => native.ioQuery(io, id).state)).toEqual(Array(6).fill('pending'));
      native.ioHold(io, false, normal);
      await Promise.all(held.map((id) => native.ioWait(io, id)));
      s = native.ioStats(io);
      expect(s.lanes[normal]).toMatchObject({ readsDone: 6, bytesRead: 300_000, held: false });
      // The engine's figures are the lanes' sums.
      expect(s).toMatchObject({ readsIssued: 10, readsDone: 10, bytesRead: 460_000, readsQueued: 0 });
      expect(s.readsBounced).toBe(s.lanes[normal].readsBounced + s.lanes[urgent].readsBounced);
      for (let k = 0; k < 10; k++) {
        const bytes = k < 6 ? 50_000 : 40_000;
        const got = dst.subarray(k * 50_000, k * 50_000 + bytes);
        expect(same(got, content.subarray(k * 70_001, k * 70_001 + bytes)), `read ${k}`).toBe(true);
      }
      destroy(io);
    },
  );

  it('an injected failure counts one lane: the config arms the normal lane, and the urgent reads never fail', async () => {
    const io = open({ engine: engines[0], direct, queueDepth: 1, failAfterBytes: 150_000 });
    const dsts = Array.from({ length: 6 }, () => new Uint8Array(100_000));
    // 400,000 bytes asked on the urgent lane first: none of them counts toward the normal lane's fault.
    const u = await Promise.all(
      [0, 1, 2, 3].map((k) => native.ioWait(io, native.ioRead(io, k * 100_000, 100_000, dsts[k], 0, { lane: urgent }))),
    );
    expect(u.map((i) => i.state)).toEqual(['done', 'done', 'done', 'done']);
    const n = await Promise.all(
      [4, 5].map((k) => native.ioWait(io, native.ioRead(io, k * 100_000, 100_000, dsts[k], 0))),
    );
    expect(n.map((i) => i.state)).toEqual(['done', 'failed']);
    expect(n[1]).toMatchObject({ errorName: 'EIO', bytesRead: 50_000 });
    const s = native.ioStats(io);
    expect(s.lanes[normal]).toMatchObject({ readsDone: 1, readsFailed: 1 });
    expect(s.lanes[urgent]).toMatchObject({ readsDone: 4, readsFailed: 0 });
    destroy(io);
  });

  it('refuses a lane that does not exist', () => {
    const io = open({ engine: 'threads', direct: false, queueDepth: 1 });
    const e = refusal(() => native.ioRead(io, 0, 10, new Uint8Array(10), 0, { lane: 2 }));
    expect(e).toMatchObject({ code: 'MT_BAD_ARGUMENT', ioStatus: 'invalid' });
    expect(e.message).toContain('lane: expected 0 to 1, got 2');
    expect(refusal(() => native.ioHold(io, true, 5)).message).toContain('ioHold: lane: expected 0 to 1');
    destroy(io);
  });
});
