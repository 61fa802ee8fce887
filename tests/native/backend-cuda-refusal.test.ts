/**
 * The real cuda kind on a machine that cannot run it: Backend.create('cuda') is refused with a
 * DeviceUnavailableError whose reason says what is missing. Without libmoetier_cuda.so next to the
 * addon (no nvcc at build time) that is 'not-built'; with it, on a machine without a GPU, the
 * runtime reports no driver or no device. (On a machine with a GPU the test checks create works.)
 * The loader's other refusals run in children on a copy of the addon next to a stand-in library:
 * a file that is no library ('load-failed') and, where a C compiler is at hand, a library whose
 * load call reports cudaErrorInsufficientDriver ('no-driver') or cudaErrorNoDevice ('no-device').
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeviceUnavailableError, MoetierError } from '../../src/core/errors.js';
import { Backend } from '../../src/native/backend.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';

const native = loadDiagnostics();

function createCuda(): { backend?: Backend; error?: unknown } {
  try {
    return { backend: Backend.create('cuda', { budgetBytes: 1 << 20 }) };
  } catch (error) {
    return { error };
  }
}

describe('cuda backend: refusal where it cannot run', () => {
  it('looks for its library next to the loaded addon', () => {
    const addon =
      process.env.MOETIER_ADDON || path.resolve(import.meta.dirname, '../../native/build/Release/moetier.node');
    const library = native.cudaLibraryPath();
    expect(path.basename(library)).toBe('libmoetier_cuda.so');
    expect(realpathSync(path.dirname(library))).toBe(realpathSync(path.dirname(path.resolve(addon))));
  });

  it('throws DeviceUnavailableError: not-built without the library, no-driver / no-device with it', () => {
    const library = native.cudaLibraryPath();
    const { backend, error } = createCuda();
    if (backend !== undefined) {
      // A machine with a CUDA device: the kind works.
      backend.destroy();
      expect(existsSync(library)).toBe(true);
      return;
    }
    expect(error).toBeInstanceOf(DeviceUnavailableError);
    expect(error).toBeInstanceOf(MoetierError);
    const e = error as DeviceUnavailableError;
    expect(e.code).toBe('E_DEVICE_UNAVAILABLE');
    if (existsSync(library)) {
      expect(['no-device', 'no-driver']).toContain(e.reason);
      expect(e.message).toMatch(/cudaError\w+ \d+/);
    } else {
      expect(e.reason).toBe('not-built');
      expect(e.message).toContain(library);
      expect(e.message).toMatch(/nvcc/);
    }
  });
});

const loadedAddon =
  process.env.MOETIER_ADDON || path.resolve(import.meta.dirname, '../../native/build/Release/moetier.node');
const backendModule = path.resolve(import.meta.dirname, '../../dist/src/native/backend.js');
const compiler = ['cc', 'gcc', 'clang'].find((c) => spawnSync(c, ['--version']).status === 0);

/** Backend.create('cuda') in a child whose addon sits next to `library` (written by make); its error's name, reason and message. */
function refusalBeside(make: (libraryPath: string) => void): { name: string; reason: string; message: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-cuda-'));
  try {
    copyFileSync(loadedAddon, path.join(dir, 'moetier.node'));
    make(path.join(dir, 'libmoetier_cuda.so'));
    const script = `const { Backend } = await import(${JSON.stringify(backendModule)});
try { Backend.create('cuda', { budgetBytes: 1 << 20 }); console.log(JSON.stringify({ name: 'created' })); }
catch (e) { console.log(JSON.stringify({ name: e.constructor.name, reason: e.reason, message: e.message })); }`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, MOETIER_ADDON: path.join(dir, 'moetier.node') },
    });
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function stubLibrary(loadStatus: number): (libraryPath: string) => void {
  return (libraryPath) => {
    const source = `${libraryPath}.c`;
    writeFileSync(
      source,
      `struct mt_cuda_runtime; int mt_cuda_runtime_load(struct mt_cuda_runtime* out) { (void)out; return ${loadStatus}; }\n`,
    );
    const r = spawnSync(compiler!, ['-shared', '-fPIC', source, '-o', libraryPath], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
  };
}

describe('cuda backend: the loader refuses each missing piece by name', () => {
  it('a file that is no library: load-failed, with dlerror', () => {
    const r = refusalBeside((p) => writeFileSync(p, 'not an ELF file'));
    expect(r).toMatchObject({ name: 'DeviceUnavailableError', reason: 'load-failed' });
    expect(r.message).toMatch(/libmoetier_cuda\.so failed to load: .*libmoetier_cuda\.so/);
  });

  it.skipIf(compiler === undefined)(
    'a runtime that cannot start: no-driver (35) or no-device (100), with the error named',
    () => {
      const driver = refusalBeside(stubLibrary(35));
      expect(driver).toMatchObject({ name: 'DeviceUnavailableError', reason: 'no-driver' });
      expect(driver.message).toContain('cudaErrorInsufficientDriver 35');
      const device = refusalBeside(stubLibrary(100));
      expect(device).toMatchObject({ name: 'DeviceUnavailableError', reason: 'no-device' });
      expect(device.message).toContain('cudaErrorNoDevice 100');
    },
  );
});
