import { describe, expect, it } from 'vitest';
import {
  ContextFullError,
  ConversationEvictedError,
  GgufFormatError,
  InvalidOptionError,
  MoetierError,
} from '../../src/core/errors.js';

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
  it("name a conversation turn's numbers: the context that is full, the cache that was evicted", () => {
    const full = new ContextFullError(40, 9, 20, 64);
    expect(full).toMatchObject({
      code: 'E_CONTEXT_FULL',
      name: 'ContextFullError',
      limit: 'contextTokens',
      cachedTokens: 40,
      newTokens: 9,
      maxTokens: 20,
      contextTokens: 64,
    });
    expect(full.message).toContain('40 cached + 9 new tokens + maxTokens 20 = 69 > contextTokens 64');
    const evicted = new ConversationEvictedError(33, 2, 'engine.generate');
    expect(evicted).toMatchObject({
      code: 'E_CONVERSATION_EVICTED',
      name: 'ConversationEvictedError',
      lostTokens: 33,
      requestsSince: 2,
      lastRequest: 'engine.generate',
    });
    expect(evicted.message).toContain('2 other requests (the last: engine.generate)');
    expect(evicted.message).toContain("onEvicted: 'replay'");
  });
});
