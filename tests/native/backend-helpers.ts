/** Shared by the backend tests: seeded byte patterns and a typed-refusal check. */
import { expect } from 'vitest';
import { BackendError } from '../../src/native/backend.js';

/** n bytes of a seeded pattern (xorshift), so a misplaced or missing byte shows. */
export function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

export function expectBackendError(fn: () => unknown, reason: BackendError['reason']): BackendError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(BackendError);
    expect((err as BackendError).reason).toBe(reason);
    return err as BackendError;
  }
  throw new Error(`expected a BackendError (${reason})`);
}
