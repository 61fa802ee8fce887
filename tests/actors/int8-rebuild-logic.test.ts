import { describe, expect, it } from 'vitest';
import { initialInt8Rebuild, stepInt8Rebuild } from '../../src/actors/int8-rebuild/logic.js';
import { InvalidOptionError } from '../../src/core/errors.js';

const k = (layer: number, expert: number) => ({ layer, expert });

describe('int8-rebuild logic', () => {
  it('builds evicted experts under the in-flight bound, publishes on success, frees a resident block', () => {
    const s = initialInt8Rebuild(2, 4, 3, 100, { inflightMax: 2 });
    const start = stepInt8Rebuild(s, { kind: 'evicted', experts: [k(0, 1), k(0, 2), k(1, 3)] });
    expect(start.map((e) => e.kind)).toEqual(['rebuild', 'rebuild']);
    const offsets = start.map((e) => (e.kind === 'rebuild' ? e.task.offset : -1));
    expect(new Set(offsets).size).toBe(2);
    const done = stepInt8Rebuild(s, { kind: 'done', layer: 0, expert: 1, ok: true });
    expect(done).toEqual([
      { kind: 'publish', layer: 0, expert: 1, offset: offsets[0] },
      { kind: 'rebuild', task: { layer: 1, expert: 3, offset: 200 } },
    ]);
    expect(stepInt8Rebuild(s, { kind: 'resident', experts: [k(0, 1)] })).toEqual([
      { kind: 'unpublish', layer: 0, expert: 1 },
    ]);
    expect(s.published[1]).toBe(-1);
    expect(s.freeBlocks).toContain(offsets[0]);
    expect(s.counts).toMatchObject({ built: 1, freed: 1 });
  });

  it('a rebuild whose expert became resident is never published; a failure frees its block and is counted', () => {
    const s = initialInt8Rebuild(1, 4, 2, 10, { inflightMax: 2 });
    stepInt8Rebuild(s, { kind: 'evicted', experts: [k(0, 0), k(0, 1)] });
    stepInt8Rebuild(s, { kind: 'resident', experts: [k(0, 0)] });
    expect(stepInt8Rebuild(s, { kind: 'done', layer: 0, expert: 0, ok: true })).toEqual([]);
    expect(stepInt8Rebuild(s, { kind: 'done', layer: 0, expert: 1, ok: false })).toEqual([]);
    expect(s.freeBlocks).toHaveLength(2);
    expect(s.counts).toMatchObject({ built: 0, failed: 1 });
    expect([...s.published]).toEqual([-1, -1, -1, -1]);
  });

  it('waits for a free block, drops past the queue bound (counted), ignores duplicates and unknown done', () => {
    const s = initialInt8Rebuild(1, 8, 1, 10, { inflightMax: 4, queueDepthMax: 2 });
    const e = stepInt8Rebuild(s, { kind: 'evicted', experts: [k(0, 0), k(0, 0), k(0, 1), k(0, 2), k(0, 3)] });
    // Queue bound 2 (the duplicate counts once): 0/2 and 0/3 are dropped; one block: 0/0 starts, 0/1 waits.
    expect(e).toEqual([{ kind: 'rebuild', task: { layer: 0, expert: 0, offset: 0 } }]);
    expect(s.queued).toEqual([1]);
    expect(s.counts.dropped).toBe(2);
    expect(stepInt8Rebuild(s, { kind: 'done', layer: 0, expert: 7, ok: true })).toEqual([]);
    expect(() => initialInt8Rebuild(1, 1, 1, 10, { inflightMax: 0 })).toThrow(InvalidOptionError);
  });
});
