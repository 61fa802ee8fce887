/**
 * The fake backend: real bytes on a deterministic virtual clock (the formulas of
 * native/include/mt_backend.h), overwrite refusal and a half-way transfer failure, each
 * with the fallback the tier will use (free, then upload).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { Backend, BackendError, type BackendConfig, type BackendEvent } from '../../src/native/backend.js';
import { concat, expectBackendError, pattern } from './backend-helpers.js';

const base = { budgetBytes: 1 << 20, bandwidthBytesPerS: 3e9, transferFixedUs: 12.5, computeBytesPerS: 7e9 } as const;
const live: Backend[] = [];
function fake(overrides: Partial<BackendConfig> = {}): Backend {
  const b = Backend.create('fake', { ...base, ...overrides });
  live.push(b);
  return b;
}
afterEach(() => {
  for (const b of live.splice(0)) b.destroy();
});

// The header's formulas, in ns.
const fixedNs = (c: { transferFixedUs: number } = base): bigint => BigInt(Math.round(c.transferFixedUs * 1000));
const moveNs = (bytes: number, c: { bandwidthBytesPerS: number } = base): bigint =>
  BigInt(Math.round((bytes * 1e9) / c.bandwidthBytesPerS));
/** An upload issued when the queue and the compute clock allow `at`: [start, end] (the fixed cost before start). */
const uploadAt = (at: bigint, bytes: number): [bigint, bigint] => [at + fixedNs(), at + fixedNs() + moveNs(bytes)];
const computeNs = (bytes: number): bigint => BigInt(Math.round((bytes * 1e9) / base.computeBytesPerS));

/** A fixed script of uploads, compute markers and waits; returns every event it made. */
async function script(b: Backend): Promise<BackendEvent[]> {
  const first = b.reserve(4, 40_000);
  const ids: number[] = [];
  ids.push(b.upload(first, pattern(40_000, 1), { label: 1 }));
  ids.push(b.upload(first + 1, [pattern(10_000, 2), pattern(7_001, 3)], { label: 2 }));
  ids.push(b.recordCompute(100, 0));
  ids.push(b.recordCompute(101, 100_000));
  await b.wait(ids[1]);
  ids.push(b.recordCompute(102, 0));
  ids.push(b.upload(first + 2, pattern(33_333, 4), { label: 3 }));
  ids.push(b.recordCompute(103, 9_000_000));
  ids.push(b.upload(first + 3, pattern(20_000, 5), { label: 4 }));
  await Promise.all(ids.map((id) => b.wait(id)));
  return ids.map((id) => b.query(id));
}

describe('fake backend: the virtual clock', () => {
  it('times uploads and compute exactly by the formulas; uploads serialise on one queue', async () => {
    const e = await script(fake());
    const u1 = uploadAt(0n, 40_000);
    expect([e[0].startNs, e[0].endNs]).toEqual(u1);
    expect([e[1].startNs, e[1].endNs]).toEqual(uploadAt(u1[1], 17_001)); // queued behind the first
    expect(e[2].startNs).toBe(0n);
    expect(e[3].startNs).toBe(computeNs(100_000));
    // The caller waited for upload 2: the compute clock moved to its end.
    const afterWait = e[1].endNs;
    expect(afterWait > computeNs(100_000)).toBe(true);
    expect(e[4].startNs).toBe(afterWait);
    // Issued at compute time afterWait, with the queue idle since then.
    expect([e[5].startNs, e[5].endNs]).toEqual(uploadAt(afterWait, 33_333));
    const c3 = afterWait + computeNs(9_000_000);
    expect(e[6].startNs).toBe(c3);
    expect(c3 > e[5].endNs).toBe(true);
    // Issued after compute moved past the queue's end: it starts at the compute clock (plus its fixed cost).
    expect([e[7].startNs, e[7].endNs]).toEqual(uploadAt(c3, 20_000));
    // The bytes alone between start and end: the configured bandwidth, exactly (to the rounded ns).
    for (const [i, bytes] of [
      [0, 40_000],
      [1, 17_001],
      [5, 33_333],
      [7, 20_000],
    ] as const)
      expect(e[i].endNs - e[i].startNs).toBe(moveNs(bytes));
    expect(e.map((x) => x.state).every((s) => s === 'done')).toBe(true);
    expect(e.map((x) => x.label)).toEqual([1, 2, 100, 101, 102, 3, 103, 4]);
  });

  it('is deterministic run to run', async () => {
    const runs = [await script(fake()), await script(fake()), await script(fake())];
    expect(runs[1]).toEqual(runs[0]);
    expect(runs[2]).toEqual(runs[0]);
  });

  it('reports virtual times while the copy is still pending, and real bytes once done', async () => {
    const b = fake({ budgetBytes: 8 << 20 });
    const slot = b.reserve(1, 8 << 20);
    const src = new Uint8Array(8 << 20);
    src.set(pattern(1 << 16, 7), (8 << 20) - (1 << 16));
    const ev = b.upload(slot, src);
    expect(b.query(ev).endNs).toBe(uploadAt(0n, 8 << 20)[1]); // decided at issue, whatever the copy thread does
    expect((await b.wait(ev)).state).toBe('done');
    const out = new Uint8Array(8 << 20);
    b.read(slot, out);
    expect(Buffer.compare(out, src)).toBe(0);
  });

  it('has the consumer-8gb preset: 25 GB/s, 330 us per transfer, 8 GiB of slots', async () => {
    const p = Backend.preset('consumer-8gb');
    expect(p).toMatchObject({
      bandwidthBytesPerS: 25e9,
      transferFixedUs: 330,
      budgetBytes: 8 * 2 ** 30,
      overwriteSupported: true,
    });
    const b = fake({ ...p, budgetBytes: 1 << 20 });
    const slot = b.reserve(1, 1 << 20);
    const e = await b.wait(b.upload(slot, new Uint8Array(1 << 20)));
    // The first upload: issued at 0, its 330 us fixed cost before the bytes move for 41.9 us.
    expect(e.startNs).toBe(fixedNs(p));
    expect(e.startNs).toBe(330_000n);
    expect(e.endNs - e.startNs).toBe(moveNs(1 << 20, p));
    expect(e.endNs - e.startNs).toBe(41_943n);
  });

  it('refuses a bad fake config with the option named', () => {
    expect(() => Backend.create('fake', { ...base, bandwidthBytesPerS: 0 })).toThrow(/backend.bandwidthBytesPerS/);
    expect(() => Backend.create('fake', { ...base, transferFixedUs: -1 })).toThrow(InvalidOptionError);
    expect(() => Backend.create('fake', { ...base, computeBytesPerS: Infinity })).toThrow(/computeBytesPerS/);
    expect(() => Backend.create('fake', { ...base, failTransferAfterBytes: -5 })).toThrow(/failTransferAfterBytes/);
  });
});

describe('fake backend: refusals and their fallback', () => {
  it('refuses in-place overwrite with its own code; free then upload lands the new bytes', async () => {
    const b = fake({ overwriteSupported: false });
    const slot = b.reserve(1, 4096);
    expect(b.overwriteSupported).toBe(false);
    await b.waitUploaded(b.upload(slot, pattern(4096, 1)));
    const err = expectBackendError(() => b.upload(slot, pattern(4096, 2), { overwrite: true }), 'no-overwrite');
    expect(err.code).toBe('E_BACKEND_NO_OVERWRITE');
    expect(err.message).toMatch(/slot 0.*free the slot, then upload/);
    expect(b.slotState(slot)).toBe('valid'); // the victim is untouched
    const out = new Uint8Array(4096);
    b.read(slot, out);
    expect(out).toEqual(pattern(4096, 1));
    b.free(slot);
    await b.waitUploaded(b.upload(slot, pattern(4096, 2)));
    b.read(slot, out);
    expect(out).toEqual(pattern(4096, 2));
  });

  it('fails a transfer half-way: failed event, invalid slot, partial bytes; the fallback then succeeds', async () => {
    const b = fake({ failTransferAfterBytes: 6000 });
    const slot = b.reserve(2, 4096);
    const s0 = pattern(4096, 1),
      s1 = [pattern(2000, 2), pattern(2096, 3)];
    await b.waitUploaded(b.upload(slot, s0)); // 4096 bytes: under the limit
    const ev = b.upload(slot + 1, s1);
    const e = await b.wait(ev);
    expect(e.state).toBe('failed');
    // 6000 - 4096 = 1904 bytes landed before the failure; the clock counts those.
    expect(e.endNs - e.startNs).toBe(moveNs(1904));
    expect(b.slotState(slot + 1)).toBe('invalid');
    const out = new Uint8Array(4096);
    b.read(slot + 1, out);
    expect(out.subarray(0, 1904)).toEqual(concat(s1).subarray(0, 1904));
    expectBackendError(() => b.lease(slot + 1), 'state'); // compute must not read it
    await expect(b.waitUploaded(ev)).rejects.toSatisfy((x) => x instanceof BackendError && x.reason === 'transfer');
    expect(b.stats()).toMatchObject({ uploadsFailed: 1, uploadsDone: 1, bytesUploaded: 4096 + 1904 });
    b.free(slot + 1);
    expect(b.slotState(slot + 1)).toBe('empty');
    await b.waitUploaded(b.upload(slot + 1, s1)); // the failure fires once
    b.read(slot + 1, out);
    expect(out).toEqual(concat(s1));
    const lease = b.lease(slot + 1);
    b.release(lease);
    expect(b.leaseCount()).toBe(0);
  });

  it('can also recover a failed slot by overwriting it in place', async () => {
    const b = fake({ failTransferAfterBytes: 100 });
    const slot = b.reserve(1, 512);
    expect((await b.wait(b.upload(slot, pattern(512, 1)))).state).toBe('failed');
    await b.waitUploaded(b.upload(slot, pattern(512, 2), { overwrite: true }));
    const out = new Uint8Array(512);
    b.read(slot, out);
    expect(out).toEqual(pattern(512, 2));
  });
});

describe('fake backend: a seeded random walk over the slot table', () => {
  it('refuses exactly what the slot rules say, and ends with no lease', async () => {
    const b = fake({ overwriteSupported: false, failTransferAfterBytes: 10_500 }); // the 11th upload fails half-way
    const n = 6,
      size = 1000;
    b.reserve(n, size);
    type Model = { state: 'empty' | 'valid' | 'invalid'; leases: number[]; seed: number };
    const model: Model[] = Array.from({ length: n }, () => ({ state: 'empty', leases: [], seed: 0 }));
    let x = 12345;
    const rand = (k: number): number => ((x = (x * 1103515245 + 12345) >>> 0) >>> 8) % k;
    let failedSeen = 0;
    for (let step = 0; step < 400; step++) {
      const slot = rand(n),
        m = model[slot],
        op = rand(5);
      if (op === 0) {
        const overwrite = rand(2) === 1;
        const expected =
          m.leases.length > 0 ? 'busy' : m.state === 'empty' ? null : overwrite ? 'no-overwrite' : 'state';
        if (expected) {
          expectBackendError(() => b.upload(slot, pattern(size, step), { overwrite }), expected);
          continue;
        }
        const e = await b.wait(b.upload(slot, pattern(size, step), { overwrite }));
        m.state = e.state === 'done' ? 'valid' : 'invalid';
        m.seed = step;
        failedSeen += e.state === 'failed' ? 1 : 0;
      } else if (op === 1) {
        if (m.leases.length > 0) expectBackendError(() => b.free(slot), 'busy');
        else (b.free(slot), (m.state = 'empty'));
      } else if (op === 2) {
        if (m.state !== 'valid') expectBackendError(() => b.lease(slot), 'state');
        else m.leases.push(b.lease(slot));
      } else if (op === 3 && m.leases.length > 0) {
        const lease = m.leases.splice(rand(m.leases.length), 1)[0];
        b.release(lease);
        b.release(lease); // idempotent
      } else if (op === 4 && m.state === 'valid') {
        const out = new Uint8Array(size);
        b.read(slot, out);
        expect(out).toEqual(pattern(size, m.seed));
      }
      expect(b.slotState(slot)).toBe(m.state);
      expect(b.leaseCount(slot)).toBe(m.leases.length);
    }
    expect(failedSeen).toBe(1);
    expect(b.stats().uploadsDone).toBeGreaterThan(10);
    for (const m of model) for (const lease of m.leases.splice(0)) b.release(lease);
    expect(b.leaseCount()).toBe(0);
    expect(b.stats()).toMatchObject({ leases: 0, uploadsInFlight: 0, sourcesHeld: 0 });
  });
});
