import { describe, expect, it } from 'vitest';
import { GgufFormatError, InvalidOptionError, MoetierError } from '../../src/core/errors.js';

describe('typed errors', () => {
  it('name the file, the place and what was expected', () => {
    const e = new GgufFormatError('m.gguf', 'tensor blk.0.attn_q.weight', 'offset within the file');
    expect(e).toBeInstanceOf(MoetierError);
    expect(e.code).toBe('E_GGUF_FORMAT');
    expect(e.message).toBe('m.gguf: tensor blk.0.attn_q.weight: expected offset within the file');
    expect(e.name).toBe('GgufFormatError');
  });
  it('describe a bad option value', () => {
    const e = new InvalidOptionError('temperature', 'a number >= 0', -1);
    expect(e.message).toContain('temperature');
    expect(e.message).toContain('-1');
  });
});
