/**
 * The cuda kinds given the model file (config file: the mapped file): the staging ring is filled
 * by reads of the file (the read engine, O_DIRECT where the filesystem allows it) instead of
 * memcpy from the mapping, so a swap on a GPU machine whose RAM cannot hold the model never
 * pulls the mapping's pages into the page cache. On the simulated runtime: the bytes land on the
 * device exactly (a piece bigger than the whole ring too, whose reads run a ring ahead of the
 * copies), the mapping stays out of the page cache, a failed read fails the upload (the slot
 * invalid, the bytes before it landed, the next upload fine), and bytes that are not the file's
 * fail the upload. Runs on the debug build too (vitest.config.ts: backend*.test.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { Backend } from '../../src/native/backend.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { concat, pattern } from './backend-helpers.js';

const native = loadDiagnostics();
const limits = native.cudaLimits();
const ringBytes = limits.stagingBuffers * limits.stagingBufferBytes;
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-cuda-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file of `bytes` (pattern seed 29), out of the page cache, mapped without readahead. */
function modelFile(name: string, bytes: number) {
  const file = path.join(dir, name);
  const content = pattern(bytes, 29);
  writeFileSync(file, content);
  native.dropFileCache(file);
  const mapped = native.mapFile(file, { access: 'random' });
  const view = (offset: number, n: number) => new Uint8Array(mapped.buffer, offset, n);
  return { content, mapped, view };
}

function readBack(b: Backend, slot: number, bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  expect(b.readDevice(slot, out)).toBe(bytes);
  return out;
}

describe('cuda-sim given the model file: uploads read the file into the staging ring', () => {
  it('lands pieces byte-exact, one bigger than the whole ring too, and leaves the mapping out of the page cache', async () => {
    const pieceBytes = 16 * 1024;
    const big = ringBytes + 3 * pieceBytes + 96; // more chunks than buffers: reads run ahead and buffers come round
    const m = modelFile('a.bin', 3 * pieceBytes * 4 + big + 4096);
    const b = Backend.create('cuda-sim', { budgetBytes: 4 * big, file: m.mapped.handle });
    try {
      const slot = b.reserve(2, big);
      // Three pieces of expert 2 (unaligned to the disk's blocks: GGUF aligns to 32 bytes).
      const pieces = [0, 1, 2].map((t) => m.view(t * 4 * pieceBytes + 2 * pieceBytes + 32, pieceBytes));
      await b.waitUploaded(b.upload(slot, pieces));
      expect(
        Buffer.compare(
          readBack(b, slot, 3 * pieceBytes),
          concat(pieces.map((p) => m.content.subarray(p.byteOffset, p.byteOffset + p.length))),
        ),
      ).toBe(0);
      const whole = m.view(3 * pieceBytes * 4, big);
      await b.waitUploaded(b.upload(slot + 1, [whole]));
      expect(
        Buffer.compare(readBack(b, slot + 1, big), m.content.subarray(whole.byteOffset, whole.byteOffset + big)),
      ).toBe(0);
      // Read from the file, not through the mapping (a page may linger in another CPU's LRU: a few at most).
      expect(native.mappedResidency(m.mapped.handle).resident).toBeLessThanOrEqual(4);
      expect(b.stats()).toMatchObject({ uploadsDone: 2, uploadsFailed: 0 });
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it('fails an upload whose read fails (injected), the bytes before it landed; the next upload lands', async () => {
    const chunk = limits.stagingBufferBytes;
    const m = modelFile('b.bin', 4 * chunk);
    // The second chunk's read fails 1000 bytes in: the first chunk reached the slot.
    const b = Backend.create('cuda-sim', {
      budgetBytes: 8 * chunk,
      file: m.mapped.handle,
      failTransferAfterBytes: chunk + 1000,
    });
    try {
      const slot = b.reserve(2, 2 * chunk);
      const failed = await b.wait(b.upload(slot, [m.view(0, 2 * chunk)]));
      expect(failed.state).toBe('failed');
      expect(b.slotState(slot)).toBe('invalid');
      expect(b.stats()).toMatchObject({ uploadsFailed: 1, bytesUploaded: chunk });
      await b.waitUploaded(b.upload(slot + 1, [m.view(2 * chunk, 2 * chunk)]));
      expect(Buffer.compare(readBack(b, slot + 1, 2 * chunk), m.content.subarray(2 * chunk, 4 * chunk))).toBe(0);
    } finally {
      b.destroy();
      native.unmapFile(m.mapped.handle);
    }
  });

  it("fails an upload of bytes that are not the file's, and refuses a file on a kind that copies from the mapping", async () => {
    const m = modelFile('c.bin', 8192);
    const b = Backend.create('cuda-sim', { budgetBytes: 1 << 20, file: m.mapped.handle });
    try {
      const slot = b.reserve(1, 1024);
      expect((await b.wait(b.upload(slot, [pattern(1024, 1)]))).state).toBe('failed');
      expect(b.slotState(slot)).toBe('invalid');
      b.free(slot);
      await b.waitUploaded(b.upload(slot, [m.view(1024, 1024)]));
      expect(Buffer.compare(readBack(b, slot, 1024), m.content.subarray(1024, 2048))).toBe(0);
    } finally {
      b.destroy();
    }
    expect(() => Backend.create('cpu', { budgetBytes: 1 << 20, file: m.mapped.handle })).toThrow(InvalidOptionError);
    native.unmapFile(m.mapped.handle);
  });
});
