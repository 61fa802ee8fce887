import { describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';

const native = loadDiagnostics();

describe('ISA self-check', () => {
  it('dispatches to the best path that agrees with scalar, never to one that disagrees', () => {
    const verdicts = Array.from({ length: native.isaDetected() + 1 }, (_, isa) => native.isaVerify(isa));
    expect(verdicts[ISA.scalar]).toBe(1);
    const bestVerified = verdicts.lastIndexOf(1);
    expect(native.isaBest()).toBe(bestVerified);
    expect(native.isaActive()).toBeLessThanOrEqual(bestVerified);
    // A SIMD path failing its self-check is a kernel bug the dispatcher routes around: say so loudly.
    if (bestVerified < native.isaDetected())
      console.warn(`kernel path ${native.isaName(native.isaDetected())} failed its self-check`);
  });

  it('notices a disagreement (the check can fail)', () => {
    const simd = native.isaDetected();
    if (simd === ISA.scalar) return; // scalar is the reference: nothing to check against
    expect(native.isaVerify(simd, true)).toBe(0);
  });

  it('refuses a path the CPU lacks, and a path number that names none', () => {
    // Written for both kinds of machine: with AVX-512 VNNI the CPU lacks no path.
    const lacking = Object.values(ISA).filter((isa) => isa > native.isaDetected());
    for (const isa of lacking) {
      expect(native.isaVerify(isa)).toBe(-1);
      expect(native.isaSet(isa)).toBe(false);
    }
    expect(() => native.isaSet(ISA.avx512vnni + 1)).toThrow(RangeError);
    expect(native.isaActive()).toBeLessThanOrEqual(native.isaBest());
  });

  it('compares bits: a result one ulp off fails the check', () => {
    // inject_error moves one scalar reference output by one ulp (isa_verify.cc).
    for (let isa = ISA.avx2; isa <= native.isaDetected(); isa++) expect(native.isaVerify(isa, true)).toBe(0);
    for (let isa = ISA.scalar; isa <= native.isaBest(); isa++) expect(native.isaVerify(isa)).toBe(1);
  });
});
