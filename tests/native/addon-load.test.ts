import { describe, expect, it } from 'vitest';
import { loadNative } from '../../src/native/binding.js';

describe('native addon', () => {
  it('loads through the one binding file and reports its version', () => {
    const native = loadNative();
    expect(native.version()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
