import { describe, expect, it } from 'vitest';
import { IDENTITY_DATA_BYTES, modelIdentity } from '../../../src/model/identity.js';

/** A stand-in file: a 4 KiB "header", then 3 MiB of "tensor data". */
function file(): { bytes: Uint8Array; dataOffset: number; size: number } {
  const bytes = new Uint8Array(4096 + 3 * IDENTITY_DATA_BYTES);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 2654435761) >>> 24;
  return { bytes, dataOffset: 4096, size: bytes.length };
}

describe('model identity', () => {
  it('is stable, 32 hex digits', () => {
    expect(modelIdentity(file())).toMatch(/^[0-9a-f]{32}$/);
    expect(modelIdentity(file())).toBe(modelIdentity(file()));
  });

  it('changes with the header, the first MiB of tensor data and the size', () => {
    const base = modelIdentity(file());
    const header = file();
    header.bytes[100] ^= 1;
    const data = file();
    data.bytes[data.dataOffset + IDENTITY_DATA_BYTES - 1] ^= 1;
    const shorter = file();
    expect(modelIdentity(header)).not.toBe(base);
    expect(modelIdentity(data)).not.toBe(base);
    expect(modelIdentity({ ...shorter, size: shorter.size - 1 })).not.toBe(base);
  });

  it('does not read past the first MiB of tensor data (cheap on a multi-GB file)', () => {
    const base = modelIdentity(file());
    const far = file();
    far.bytes[far.dataOffset + IDENTITY_DATA_BYTES] ^= 1;
    far.bytes[far.bytes.length - 1] ^= 1;
    expect(modelIdentity(far)).toBe(base);
  });

  it("reads only the mapped view of a file bigger than it (the size is the file's)", () => {
    const whole = file();
    const view = { ...whole, bytes: whole.bytes.subarray(0, whole.dataOffset + IDENTITY_DATA_BYTES) };
    expect(modelIdentity(view)).toBe(modelIdentity(whole));
  });
});
