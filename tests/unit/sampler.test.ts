import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { argmax, createSampler } from '../../src/engine/sampler.js';

describe('sampler', () => {
  const logits = Float32Array.from([0.1, 3, 2.9, -1, 3]);

  it('is greedy by default, ties to the lower id', () => {
    expect(argmax(logits)).toBe(1);
    expect(createSampler().sample(logits)).toBe(1);
  });

  it('reproduces a seeded run and samples only inside top-k', () => {
    const a = createSampler({ temperature: 1, topK: 3, seed: 7 });
    const b = createSampler({ temperature: 1, topK: 3, seed: 7 });
    const seqA = Array.from({ length: 50 }, () => a.sample(logits));
    const seqB = Array.from({ length: 50 }, () => b.sample(logits));
    expect(seqA).toEqual(seqB);
    expect(new Set(seqA)).toEqual(new Set([1, 2, 4]));
  });

  it('top-p keeps only the nucleus', () => {
    const peaked = Float32Array.from([10, 0, 0, 0]);
    const s = createSampler({ temperature: 1, topP: 0.5, seed: 1 });
    for (let i = 0; i < 20; i++) expect(s.sample(peaked)).toBe(0);
  });

  it('refuses bad options', () => {
    expect(() => createSampler({ temperature: -1 })).toThrow(InvalidOptionError);
    expect(() => createSampler({ topP: 0 })).toThrow(InvalidOptionError);
    expect(() => createSampler({ topK: 1.5 })).toThrow(InvalidOptionError);
  });

  it('takes 32-bit seeds only: 2^32 would silently be seed 0, -1 seed 2^32 - 1', () => {
    for (const seed of [-1, 2 ** 32, 2 ** 53, 0.5]) {
      expect(() => createSampler({ temperature: 1, seed })).toThrow(
        /option seed: expected an integer in \[0, 4294967295\]/,
      );
    }
    expect(() => createSampler({ temperature: 1, seed: 2 ** 32 - 1 })).not.toThrow();
  });
});
