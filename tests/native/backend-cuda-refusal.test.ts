/**
 * The real cuda kind on a machine that cannot run it: Backend.create('cuda') is refused with a
 * DeviceUnavailableError whose reason says what is missing. Without libmoetier_cuda.so next to the
 * addon (no nvcc at build time) that is 'not-built'; with it, on a machine without a GPU, the
 * runtime reports no driver or no device. (On a machine with a GPU the test checks create works.)
 */
import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeviceUnavailableError, MoetierError } from '../../src/core/errors.js';
import { Backend } from '../../src/native/backend.js';
import { loadNative } from '../../src/native/binding.js';

const native = loadNative();

function createCuda(): { backend?: Backend; error?: unknown } {
  try {
    return { backend: Backend.create('cuda', { budgetBytes: 1 << 20 }) };
  } catch (error) {
    return { error };
  }
}

describe('cuda backend: refusal where it cannot run', () => {
  it('looks for its library next to the loaded addon', () => {
    const addon = process.env.MOETIER_ADDON || path.resolve(import.meta.dirname, '../../native/build/Release/moetier.node');
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
