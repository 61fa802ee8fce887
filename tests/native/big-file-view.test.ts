/**
 * Model files bigger than an ArrayBuffer may be (Node 20: 4 GiB; a Qwen3-30B-A3B Q4_K_M file is 18.6 GB):
 * mapFile maps the whole file for the native side and hands JavaScript a view of just under its
 * first 4 GiB plus the file's size; GGUF parsing places tensors against the size, not the view.
 */
import { closeSync, ftruncateSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { writeSynthModel } from '../../src/synth/generate.js';

const native = loadDiagnostics();
const dir = mkdtempSync(path.join(tmpdir(), 'moetier-big-view-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const GiB = 2 ** 30;

describe('a mapped file past the JavaScript view', () => {
  it('maps all of a 6 GiB file natively, shows JavaScript just under its first 4 GiB, and says its size', () => {
    const file = path.join(dir, 'sparse.bin');
    const fd = openSync(file, 'w');
    ftruncateSync(fd, 6 * GiB); // sparse: no disk used
    writeSync(fd, Buffer.from([42]), 0, 1, 5 * GiB);
    closeSync(fd);
    const mapped = native.mapFile(file, { access: 'random' });
    try {
      expect(mapped.size).toBe(6 * GiB);
      expect(mapped.buffer.byteLength).toBe(4 * GiB - 65536);
      // The native side reaches past the view: the page holding byte 5 GiB is in the mapping.
      expect(native.mappedResidency(mapped.handle, 5 * GiB, 1).pages).toBe(1);
      expect(() => native.mappedResidency(mapped.handle, 6 * GiB, 4096)).toThrow();
    } finally {
      native.unmapFile(mapped.handle);
    }
  });

  it('parses a GGUF from a header-only view and the file size: the same tensors as from the whole file', async () => {
    const model = path.join(dir, 'tiny.gguf');
    await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 1 }, model);
    const bytes = new Uint8Array(readFileSync(model));
    const whole = parseGguf(bytes, model);
    const viewed = parseGguf(bytes.subarray(0, whole.dataOffset), model, bytes.length);
    expect(viewed.size).toBe(bytes.length);
    expect([...viewed.tensors.values()]).toEqual([...whole.tensors.values()]);
    // a size too small for the tensors is still refused by name
    expect(() => parseGguf(bytes.subarray(0, whole.dataOffset), model, bytes.length - 1)).toThrow(/ends at byte/);
  });
});
