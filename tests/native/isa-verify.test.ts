import { describe, expect, it } from 'vitest';
import { ISA, loadNative } from '../../src/native/binding.js';

const native = loadNative();

describe('ISA self-check', () => {
  it('dispatches to the best path that agrees with scalar, never to one that disagrees', () => {
    const verdicts = Array.from({ length: native.isaDetected() + 1 }, (_, isa) => native.isaVerify(isa));
    expect(verdicts[ISA.scalar]).toBe(1);
    const bestVerified = verdicts.lastIndexOf(1);
    expect(native.isaBest()).toBe(bestVerified);
    expect(native.isaActive()).toBeLessThanOrEqual(bestVerified);
    // A SIMD path failing its self-check is a kernel bug the dispatcher routes around: say so loudly.
    if (bestVerified < native.isaDetected()) console.warn(`kernel path ${native.isaName(native.isaDetected())} failed its self-check`);
  });

  it('notices a disagreement (the check can fail)', () => {
    const simd = native.isaDetected();
    if (simd === ISA.scalar) return; // scalar is the reference: nothing to check against
    expect(native.isaVerify(simd, true)).toBe(0);
  });

  it('refuses a path the CPU lacks', () => {
    if (native.isaDetected() < ISA.avx512vnni) expect(native.isaVerify(ISA.avx512vnni)).toBe(-1);
    expect(native.isaSet(native.isaDetected() + 1)).toBe(false);
  });
});
