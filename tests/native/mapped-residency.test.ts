/**
 * mappedResidency (mincore) reads the page cache's share of a mapped file without changing it;
 * dropFileCache empties it for one file. Together: a cold file holds no pages, and reading a
 * range through the mapping brings in that range (what the disk tier must never do for experts).
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadDiagnostics } from '../../src/native/diagnostics.js';

const native = loadDiagnostics();
// tmpfs keeps every page in memory (DONTNEED drops nothing): use the checkout's folder then.
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-residency-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('mappedResidency and dropFileCache', () => {
  it('a dropped file holds no pages; a read through the mapping brings in the range it read', () => {
    const file = path.join(dir, 'f.bin');
    writeFileSync(file, Buffer.alloc(256 * 4096, 7));
    native.dropFileCache(file);
    const { handle, buffer } = native.mapFile(file);
    try {
      const cold = native.mappedResidency(handle);
      expect(cold.pages).toBe(Math.ceil(buffer.byteLength / cold.pageBytes));
      expect(cold.resident).toBeLessThanOrEqual(4); // a page may linger in another CPU's LRU cache, beyond DONTNEED's reach
      // Touch 8 pages in the middle; the kernel may read some ahead, never fewer.
      const bytes = new Uint8Array(buffer);
      const page = cold.pageBytes,
        first = 100;
      let sum = 0;
      for (let p = first; p < first + 8; p++) sum += bytes[p * page];
      expect(sum).toBe(8 * 7);
      expect(native.mappedResidency(handle, first * page, 8 * page)).toEqual({
        pages: 8,
        resident: 8,
        pageBytes: page,
      });
      expect(native.mappedResidency(handle).resident).toBeGreaterThanOrEqual(8);
      // Ranges: partial pages count whole, an empty range has none, out of the mapping is refused.
      expect(native.mappedResidency(handle, 1, page).pages).toBe(2);
      expect(native.mappedResidency(handle, 0, 0).pages).toBe(0);
      expect(() => native.mappedResidency(handle, 0, buffer.byteLength + 1)).toThrow(/inside the mapping/);
      expect(() => native.mappedResidency(handle, -1, 1)).toThrow(RangeError);
    } finally {
      native.unmapFile(handle);
    }
    expect(() => native.dropFileCache(path.join(dir, 'missing'))).toThrow(/ENOENT|No such file/);
  });

  it('populateMapping brings the whole file in off the event loop, and holds the mapping until it settles', async () => {
    const file = path.join(dir, 'p.bin');
    writeFileSync(file, Buffer.alloc(300 * 4096 + 123, 3));
    native.dropFileCache(file);
    const { handle, size } = native.mapFile(file, { access: 'random' });
    try {
      expect(native.mappedResidency(handle).resident).toBeLessThanOrEqual(4);
      const pending = native.populateMapping(handle);
      // The worker counts as a reader: the mapping cannot be pulled from under it.
      expect(() => native.unmapFile(handle)).toThrow(/still read/);
      const done = await pending;
      expect(done.bytes).toBe(size);
      expect(['populate-read', 'touch']).toContain(done.method);
      expect(done.ms).toBeGreaterThanOrEqual(0);
      const after = native.mappedResidency(handle);
      expect(after.resident).toBe(after.pages);
    } finally {
      native.unmapFile(handle);
    }
    await expect(native.populateMapping(handle)).rejects.toThrow(/already unmapped/);
  });
});
