import { describe, expect, it } from 'vitest';
import { loadNative } from '../../src/native/binding.js';

describe('native addon', () => {
  it('loads through the one binding file and reports its version', () => {
    const native = loadNative();
    expect(native.version()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('mapped files', () => {
  it('refuse to unmap while a model reads the mapping, and unmap once it is freed', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const { writeSynthModel } = await import('../../src/synth/generate.js');
    const { loadModel } = await import('../../src/engine/load.js');
    const dir = mkdtempSync(path.join(tmpdir(), 'moetier-map-'));
    try {
      const file = path.join(dir, 'tiny.gguf');
      await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 1 }, file);
      const native = loadNative();
      const model = loadModel(native, file);
      expect(() => native.unmapFile(model.mapping)).toThrow(/still read by 1 model/);
      native.freeModel(model.nativeModel);
      native.unmapFile(model.mapping);
      expect(() => native.unmapFile(model.mapping)).toThrow(/already unmapped/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
