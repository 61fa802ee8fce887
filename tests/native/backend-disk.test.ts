/**
 * The disk backend (native/disk): RAM slots filled by reading the model file, never the mapping.
 * An upload's pieces are views of the mapping; the backend reads the same ranges of the file
 * (the bytes land exactly), the mapping's pages stay out of the page cache, a read past the file
 * or an injected failure fails the upload's event (the slot invalid, the next upload fine).
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { Backend } from '../../src/native/backend.js';
import { loadNative } from '../../src/native/binding.js';
import { concat, pattern } from './backend-helpers.js';

const native = loadNative();
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-disk-backend-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Three "tensors" of 64 KiB, 4 experts of 16 KiB each, mapped without readahead. */
function modelFile(name: string) {
  const file = path.join(dir, name);
  const content = pattern(3 * 65536, 13);
  writeFileSync(file, content);
  native.dropFileCache(file);
  const mapped = native.mapFile(file, { access: 'random' });
  const views = (expert: number) => [0, 1, 2].map((t) => new Uint8Array(mapped.buffer, t * 65536 + expert * 16384, 16384));
  const expected = (expert: number) => concat([0, 1, 2].map((t) => content.subarray(t * 65536 + expert * 16384, t * 65536 + (expert + 1) * 16384)));
  return { file, mapped, views, expected };
}

describe('disk backend', () => {
  it('reads an expert\'s pieces from the file into the slot, leaving the mapping out of the page cache', async () => {
    const m = modelFile('a.bin');
    const b = Backend.create('disk', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      const slot = b.reserve(2, 3 * 16384);
      await b.waitUploaded(b.upload(slot, m.views(2)));
      await b.waitUploaded(b.upload(slot + 1, m.views(1)));
      for (const [s, e] of [[slot, 2], [slot + 1, 1]]) {
        const out = new Uint8Array(3 * 16384);
        b.read(s, out);
        expect(out).toEqual(m.expected(e));
      }
      // Read from the file, not through the mapping, and dropped from the page cache after.
      // (A page may linger in another CPU's LRU cache, where DONTNEED cannot drop it: a few at most.)
      expect(native.mappedResidency(m.mapped.handle).resident).toBeLessThanOrEqual(4);
      expect(b.stats()).toMatchObject({ uploadsDone: 2, uploadsFailed: 0, bytesUploaded: 2 * 3 * 16384 });
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
      expect(b.stats()).toMatchObject({ uploadsDone: 1, uploadsFailed: 1 });
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it('fails an upload of bytes that are not the model file\'s', async () => {
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

  it('needs the file', () => {
    expect(() => Backend.create('disk', { budgetBytes: 1 << 20 })).toThrow(InvalidOptionError);
  });
});
