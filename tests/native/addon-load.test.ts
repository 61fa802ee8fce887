import { describe, expect, it } from 'vitest';
import { loadNative } from '../../src/native/binding.js';

describe('native addon', () => {
  it('loads through the one binding file and reports its version', () => {
    const native = loadNative();
    expect(native.version()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('MOETIER_ADDON', () => {
  it('loads the addon it names, and refuses a path that names no file instead of falling back', async () => {
    const { spawnSync } = await import('node:child_process');
    const path = await import('node:path');
    const binding = path.resolve(import.meta.dirname, '../../dist/src/native/binding.js');
    const release = path.resolve(import.meta.dirname, '../../native/build/Release/moetier.node');
    const script = `const { loadNative } = await import(${JSON.stringify(binding)}); try { console.log(loadNative().version()); } catch (e) { console.log(e.code, e.message); }`;
    const load = (addon: string) =>
      spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        encoding: 'utf8',
        timeout: 30_000,
        env: { ...process.env, MOETIER_ADDON: addon },
      }).stdout.trim();
    expect(load(release)).toMatch(/^\d+\.\d+\.\d+$/);
    expect(load('no/such/moetier.node')).toBe(
      'E_NATIVE MOETIER_ADDON=no/such/moetier.node: no such addon file (for the debug build run `npm run build:native:debug`)',
    );
  });
});

describe('mapped files', () => {
  it('refuse to unmap while a model reads the mapping, and unmap once it is freed', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const { writeSynthModel } = await import('../../src/synth/generate.js');
    const { loadModel } = await import('../../src/model/load.js');
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
