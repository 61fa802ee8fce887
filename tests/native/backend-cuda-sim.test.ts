/**
 * The CUDA backend's host side (native/cuda/host/) on the simulated runtime (kind cuda-sim): the
 * staging ring, in-place overwrite, a copy failing half-way, device memory running out, event
 * times on CLOCK_MONOTONIC, compute markers, run_expert against the CPU kernels bit for bit, and
 * destroy with uploads in flight. Bytes on the device are read back with the test-only
 * cudaSlotRead verb (Backend.readDevice: memcpy_d2h on the compute stream).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceUnavailableError } from '../../src/core/errors.js';
import { Backend, BackendError, type BackendConfig } from '../../src/native/backend.js';
import { loadNative } from '../../src/native/binding.js';
import { GGML_TYPE } from '../../src/model/types.js';
import { mulberry32 } from '../../src/core/prng.js';
import { concat, expectBackendError, pattern } from './backend-helpers.js';
import { sameBits } from './kernel-paths.js';
import { cpuExpert, expertPieces } from './cuda-expert.js';

const native = loadNative();
const limits = native.cudaLimits();
const ringBytes = limits.stagingBuffers * limits.stagingBufferBytes;
const MiB = 1 << 20;

const live: Backend[] = [];
function sim(overrides: Partial<BackendConfig> = {}): Backend {
  const b = Backend.create('cuda-sim', { budgetBytes: 64 * MiB, ...overrides });
  live.push(b);
  return b;
}
afterEach(() => {
  for (const b of live.splice(0)) b.destroy();
});

function readBack(b: Backend, slot: number, bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  expect(b.readDevice(slot, out)).toBe(bytes);
  return out;
}

/** The first index where a and b differ (-1: equal): a multi-MiB toEqual diff would not print. */
function firstDifference(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe('cuda-sim: uploads through the staging ring', () => {
  it('lands the pieces back to back, byte-exact; device memory is not host-visible', async () => {
    const b = sim();
    const slot = b.reserve(2, 100_000);
    const pieces = [pattern(40_000, 1), pattern(33_333, 2), pattern(26_667, 3)];
    const e = await b.waitUploaded(b.upload(slot, pieces, { label: 7 }));
    expect(e).toMatchObject({ state: 'done', kind: 'upload', slot, bytes: 100_000, label: 7 });
    expect(b.slotState(slot)).toBe('valid');
    expect(firstDifference(readBack(b, slot, 100_000), concat(pieces))).toBe(-1);
    expect(b.stats()).toMatchObject({ hostVisible: false, uploadsDone: 1, bytesUploaded: 100_000, uploadsInFlight: 0 });
    expectBackendError(() => b.read(slot, new Uint8Array(16)), 'unsupported');
  });

  it('carries an upload bigger than the whole ring intact (buffers reused once their copies finished)', async () => {
    const b = sim();
    const bytes = ringBytes + limits.stagingBufferBytes + 12_345; // more chunks than buffers, an odd tail
    const slot = b.reserve(1, bytes);
    const pieces = [
      pattern(limits.stagingBufferBytes * 2 + 7, 11),
      pattern(bytes - (limits.stagingBufferBytes * 2 + 7), 12),
    ];
    await b.waitUploaded(b.upload(slot, pieces));
    expect(firstDifference(readBack(b, slot, bytes), concat(pieces))).toBe(-1);
  });

  it('overwrites a valid slot in place with the newcomer', async () => {
    const b = sim();
    const slot = b.reserve(1, 64_000);
    await b.waitUploaded(b.upload(slot, pattern(64_000, 21)));
    const reserved = b.stats().reservedBytes;
    await b.waitUploaded(b.upload(slot, pattern(64_000, 22), { overwrite: true }));
    expect(firstDifference(readBack(b, slot, 64_000), pattern(64_000, 22))).toBe(-1);
    expect(b.stats()).toMatchObject({ reservedBytes: reserved, uploadsDone: 2 });
  });

  it('refuses overwrite where configured (no-overwrite): free, then upload', async () => {
    const b = sim({ overwriteSupported: false });
    expect(b.overwriteSupported).toBe(false);
    const slot = b.reserve(1, 4096);
    await b.waitUploaded(b.upload(slot, pattern(4096, 31)));
    expectBackendError(() => b.upload(slot, pattern(4096, 32), { overwrite: true }), 'no-overwrite');
    b.free(slot);
    await b.waitUploaded(b.upload(slot, pattern(4096, 32)));
    expect(firstDifference(readBack(b, slot, 4096), pattern(4096, 32))).toBe(-1);
  });

  it('fails an upload whose copy fails half-way: event failed, slot invalid, the bytes before the limit landed; a re-upload works', async () => {
    const limit = limits.stagingBufferBytes + 1000; // inside the second chunk
    const b = sim({ failTransferAfterBytes: limit });
    const bytes = 3 * limits.stagingBufferBytes;
    const slot = b.reserve(1, bytes);
    const src = pattern(bytes, 41);
    const ev = b.upload(slot, src);
    await expect(b.waitUploaded(ev)).rejects.toSatisfy(
      (err: unknown) => err instanceof BackendError && err.reason === 'transfer',
    );
    expect(b.query(ev).state).toBe('failed');
    expect(b.slotState(slot)).toBe('invalid');
    expectBackendError(() => b.lease(slot), 'state');
    expect(firstDifference(readBack(b, slot, limit), src.subarray(0, limit))).toBe(-1);
    expect(b.stats()).toMatchObject({ uploadsFailed: 1, uploadsInFlight: 0 });
    b.free(slot);
    await b.waitUploaded(b.upload(slot, src));
    expect(b.slotState(slot)).toBe('valid');
    expect(firstDifference(readBack(b, slot, bytes), src)).toBe(-1);
  });

  it('fails the upload whose copy fails asynchronously (the error turns up in its events), and, the device being lost, the uploads after it', async () => {
    const limit = limits.stagingBufferBytes + 1000;
    const b = sim({ failTransferAfterBytes: limit, simAsyncCopyFault: true });
    const bytes = 3 * limits.stagingBufferBytes;
    const first = b.reserve(2, bytes);
    const ev = b.upload(first, pattern(bytes, 45));
    await expect(b.waitUploaded(ev)).rejects.toSatisfy(
      (err: unknown) => err instanceof BackendError && err.reason === 'transfer',
    );
    expect(b.slotState(first)).toBe('invalid');
    // CUDA's asynchronous errors are sticky: the staging buffers' events report it to the next upload too.
    const next = await b.wait(b.upload(first + 1, pattern(bytes, 46)));
    expect(next.state).toBe('failed');
    expect(b.slotState(first + 1)).toBe('invalid');
    expect(b.stats()).toMatchObject({ uploadsFailed: 2, uploadsDone: 0, uploadsInFlight: 0 });
  });

  it('refuses reserving past the budget with nothing reserved', () => {
    const b = sim({ budgetBytes: 1 * MiB });
    expectBackendError(() => b.reserve(3, 400_000), 'budget');
    expect(b.stats()).toMatchObject({ slots: 0, reservedBytes: 0 });
  });

  it('refuses an allocation past the simulated device size (no-memory) with nothing reserved; a smaller one then fits', async () => {
    const b = sim({ budgetBytes: 64 * MiB, simDeviceBytes: 1 * MiB });
    expectBackendError(() => b.reserve(4, 512 * 1024), 'no-memory');
    expect(b.stats()).toMatchObject({ slots: 0, reservedBytes: 0 });
    const slot = b.reserve(1, 512 * 1024);
    await b.waitUploaded(b.upload(slot, pattern(512 * 1024, 51)));
    expect(firstDifference(readBack(b, slot, 512 * 1024), pattern(512 * 1024, 51))).toBe(-1);
  });

  it('reports no device as DeviceUnavailableError no-device (simNoDevice)', () => {
    let caught: unknown;
    try {
      sim({ simNoDevice: true });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DeviceUnavailableError);
    expect((caught as DeviceUnavailableError).reason).toBe('no-device');
    expect((caught as DeviceUnavailableError).code).toBe('E_DEVICE_UNAVAILABLE');
    expect((caught as Error).message).toMatch(/no CUDA device.*cudaErrorNoDevice/);
  });
});

describe('cuda-sim: event times and compute markers', () => {
  it('times uploads on CLOCK_MONOTONIC: start <= end, within the hrtime read before the upload and after its wait', async () => {
    const b = sim();
    const first = b.reserve(3, 2 * MiB);
    let previousStart = 0n;
    for (let i = 0; i < 3; i++) {
      const before = process.hrtime.bigint();
      const e = await b.waitUploaded(b.upload(first + i, pattern(2 * MiB, 60 + i)));
      const after = process.hrtime.bigint();
      expect(e.startNs >= before).toBe(true);
      expect(e.endNs >= e.startNs).toBe(true);
      expect(e.endNs <= after).toBe(true);
      expect(e.startNs >= previousStart).toBe(true);
      previousStart = e.startNs;
    }
  });

  it('keeps times on the clock across a refresh of the base event (an old base is replaced after 4 s)', async () => {
    const b = sim();
    const first = b.reserve(2, MiB);
    await b.waitUploaded(b.upload(first, pattern(MiB, 80)));
    await new Promise((resolve) => setTimeout(resolve, 4_100)); // past the clock's refresh age (cuda_clock.h kBaseRefreshNs)
    const before = process.hrtime.bigint();
    const [upload, marker] = await Promise.all([
      b.waitUploaded(b.upload(first + 1, pattern(MiB, 81))),
      b.wait(b.recordCompute(9, 0)),
    ]);
    const after = process.hrtime.bigint();
    for (const e of [upload, marker])
      expect(e.startNs >= before && e.endNs >= e.startNs && e.endNs <= after).toBe(true);
    expect(firstDifference(readBack(b, first + 1, MiB), pattern(MiB, 81))).toBe(-1);
  });

  it('resolves compute markers from the compute stream, in order, on the same clock', async () => {
    const b = sim();
    const before = process.hrtime.bigint();
    const ids = [b.recordCompute(1, 100), b.recordCompute(2, 200), b.recordCompute(3, 0)];
    const events = await Promise.all(ids.map((id) => b.wait(id)));
    const after = process.hrtime.bigint();
    expect(events.map((e) => [e.state, e.kind, e.label, e.slot])).toEqual([
      ['done', 'compute', 1, -1],
      ['done', 'compute', 2, -1],
      ['done', 'compute', 3, -1],
    ]);
    expect(events.map((e) => e.bytes)).toEqual([100, 200, 0]);
    for (const e of events) {
      expect(e.startNs >= before && e.startNs <= after).toBe(true);
      expect(e.endNs).toBe(e.startNs);
    }
    expect(events[1].startNs >= events[0].startNs && events[2].startNs >= events[1].startNs).toBe(true);
  });
});

describe('cuda-sim: run_expert', () => {
  const nEmbd = 64,
    nFf = 96;
  for (const type of ['Q8_0', 'Q4_0'] as const) {
    for (const count of [1, 3]) {
      it(`computes a ${type} expert for ${count} row(s) exactly as the CPU kernels do`, async () => {
        const b = sim();
        const e = expertPieces(type, nEmbd, nFf, count * 7 + (type === 'Q8_0' ? 1 : 2));
        const bytes = e.pieces.reduce((n, p) => n + p.length, 0);
        const slot = b.reserve(1, bytes);
        await b.waitUploaded(b.upload(slot, e.pieces));
        const rng = mulberry32(99 + count);
        const x = Float32Array.from({ length: count * nEmbd }, () => rng() * 2 - 1);
        const y = new Float32Array(count * nEmbd);
        const args = {
          x,
          y,
          count,
          gateType: GGML_TYPE[type],
          upType: GGML_TYPE[type],
          downType: GGML_TYPE[type],
          gateBytes: e.gateBytes,
          upBytes: e.gateBytes,
          downBytes: e.downBytes,
          nEmbd,
          nFf,
        };
        expectBackendError(() => b.runExpert(slot, args), 'state'); // not leased
        const lease = b.lease(slot);
        b.runExpert(slot, args);
        b.release(lease);
        const expected = cpuExpert(GGML_TYPE[type], e.pieces, nEmbd, nFf, x, count);
        expect(y.some((v) => v !== 0)).toBe(true);
        expect(sameBits(y, expected)).toBe(true);
      });
    }
  }

  it('refuses args whose byte sizes do not match the shapes, and host kinds refuse run_expert', async () => {
    const b = sim();
    const e = expertPieces('Q8_0', nEmbd, nFf, 5);
    const slot = b.reserve(
      1,
      e.pieces.reduce((n, p) => n + p.length, 0),
    );
    await b.waitUploaded(b.upload(slot, e.pieces));
    const lease = b.lease(slot);
    const x = new Float32Array(nEmbd),
      y = new Float32Array(nEmbd);
    const args = {
      x,
      y,
      count: 1,
      gateType: GGML_TYPE.Q8_0,
      upType: GGML_TYPE.Q8_0,
      downType: GGML_TYPE.Q8_0,
      gateBytes: e.gateBytes - 34,
      upBytes: e.gateBytes,
      downBytes: e.downBytes,
      nEmbd,
      nFf,
    };
    expect(() => b.runExpert(slot, args)).toThrow(/gate_bytes/);
    b.release(lease);
    const cpu = Backend.create('cpu', { budgetBytes: 1 << 16 });
    try {
      cpu.reserve(1, 1024);
      expectBackendError(() => cpu.runExpert(0, args), 'unsupported');
    } finally {
      cpu.destroy();
    }
  });
});

describe('cuda-sim: run_experts (a layer in one device call)', () => {
  const nEmbd = 64,
    nFf = 96;
  const argsOf = (e: ReturnType<typeof expertPieces>, type: 'Q8_0' | 'Q4_0', x: Float32Array, count: number) => ({
    x,
    y: new Float32Array(count * nEmbd),
    count,
    gateType: GGML_TYPE[type],
    upType: GGML_TYPE[type],
    downType: GGML_TYPE[type],
    gateBytes: e.gateBytes,
    upBytes: e.gateBytes,
    downBytes: e.downBytes,
    nEmbd,
    nFf,
  });

  it("gives each run the CPU kernels' bits (mixed types and row counts), and the device's span inside the call on the monotonic clock", async () => {
    const b = sim();
    const types = ['Q8_0', 'Q4_0', 'Q8_0'] as const;
    const experts = types.map((type, i) => expertPieces(type, nEmbd, nFf, 40 + i));
    const bytes = Math.max(...experts.map((e) => e.pieces.reduce((n, p) => n + p.length, 0)));
    const first = b.reserve(types.length, bytes);
    for (let i = 0; i < types.length; i++) await b.waitUploaded(b.upload(first + i, experts[i].pieces));
    const rng = mulberry32(7);
    const counts = [1, 4, 2];
    const runs = types.map((type, i) => ({
      slot: first + i,
      args: argsOf(
        experts[i],
        type,
        Float32Array.from({ length: counts[i] * nEmbd }, () => rng() * 2 - 1),
        counts[i],
      ),
    }));
    expectBackendError(() => b.runExperts(runs), 'state'); // none leased
    const leases = runs.map((r) => b.lease(r.slot));
    const before = Number(process.hrtime.bigint());
    const span = b.runExperts(runs);
    const after = Number(process.hrtime.bigint());
    for (const l of leases) b.release(l);
    for (let i = 0; i < runs.length; i++) {
      const expected = cpuExpert(GGML_TYPE[types[i]], experts[i].pieces, nEmbd, nFf, runs[i].args.x, counts[i]);
      expect(sameBits(runs[i].args.y, expected), `run ${i}`).toBe(true);
    }
    // Device times are base_ns + elapsed, and base_ns is stamped once its event finished: late by
    // that calibration round (native/cuda/host/cuda_clock.h), ~20 us idle, more on loaded cores (a
    // full-suite run beside other work saw an end 12 us past `after`). A wrong clock is off by far more.
    const baseLatenessNs = 1_000_000;
    expect(span.startNs).toBeGreaterThanOrEqual(before);
    expect(span.endNs).toBeGreaterThan(span.startNs);
    expect(span.endNs).toBeLessThanOrEqual(after + baseLatenessNs);
  });

  it('refuses past its limits (runs, rows in all) and an unleased run among leased ones, writing no y', async () => {
    const b = sim();
    const e = expertPieces('Q8_0', nEmbd, nFf, 50);
    const slot = b.reserve(
      2,
      e.pieces.reduce((n, p) => n + p.length, 0),
    );
    await b.waitUploaded(b.upload(slot, e.pieces));
    await b.waitUploaded(b.upload(slot + 1, e.pieces));
    const lease = b.lease(slot);
    const one = () => ({ slot, args: argsOf(e, 'Q8_0', new Float32Array(nEmbd).fill(0.5), 1) });
    expect(() => b.runExperts([])).toThrow(/1 to 256 runs/);
    expect(() => b.runExperts(Array.from({ length: limits.runsMax + 1 }, one))).toThrow(/1 to 256 runs/);
    const rows = limits.expertRowsMax / 2 + 1;
    const big = () => ({ slot, args: argsOf(e, 'Q8_0', new Float32Array(rows * nEmbd), rows) });
    expect(() => b.runExperts([big(), big()])).toThrow(/4098 rows in all, at most 4096/);
    const leased = one();
    const unleased = { slot: slot + 1, args: argsOf(e, 'Q8_0', new Float32Array(nEmbd).fill(0.5), 1) };
    expect(() => b.runExperts([leased, unleased])).toThrow(/run 1.*valid and leased/);
    expect(leased.args.y.every((v) => v === 0)).toBe(true);
    b.release(lease);
  });
});

describe('cuda-sim: destroy', () => {
  it('destroys with a wait pending on an upload and on a marker: both settle done, later verbs are refused (closed)', async () => {
    const b = Backend.create('cuda-sim', { budgetBytes: 64 * MiB });
    const first = b.reserve(2, 8 * MiB);
    const sources = [pattern(8 * MiB, 90), pattern(8 * MiB, 91)];
    const last = [b.upload(first, sources[0]), b.upload(first + 1, sources[1])][1];
    const pending = [b.wait(last), b.wait(b.recordCompute(5, 0))];
    b.destroy();
    b.destroy();
    expect((await Promise.all(pending)).map((e) => e.state)).toEqual(['done', 'done']);
    expectBackendError(() => b.upload(first, pattern(16, 1)), 'closed');
  });

  it('waits for uploads in flight and gives the simulated device back (more backends than devices, one after another)', async () => {
    const sources = [0, 1, 2].map((s) => pattern(8 * MiB, 70 + s)); // made first: the uploads are issued back to back
    let destroyedInFlight = 0;
    for (let i = 0; i < 20; i++) {
      const b = Backend.create('cuda-sim', { budgetBytes: 64 * MiB });
      const first = b.reserve(3, 8 * MiB);
      for (let s = 0; s < 3; s++) b.upload(first + s, sources[s]);
      b.recordCompute(i, 0);
      if (b.stats().uploadsInFlight > 0) destroyedInFlight++;
      b.destroy();
    }
    expect(destroyedInFlight).toBeGreaterThan(0); // 24 MiB through a 16 MiB ring is not done at once
    // Every destroy gave its device back: a 17th live one would be refused otherwise.
    const b = sim();
    const slot = b.reserve(1, 1024);
    await b.waitUploaded(b.upload(slot, pattern(1024, 3)));
    expect(firstDifference(readBack(b, slot, 1024), pattern(1024, 3))).toBe(-1);
  });
});
