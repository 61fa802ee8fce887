import { describe, expect, it } from 'vitest';
import { LAYER_STAT_FIELDS } from '../../../src/engine/tier/port.js';
import { stepView } from '../../../src/engine/tier/step-views.js';

describe('stepView (engine.steps$())', () => {
  it("copies each layer's window and counts, and the settled transfers, in ms", () => {
    const ls = new Float64Array(2 * LAYER_STAT_FIELDS);
    ls.set([1e6, 3e6, 1.5e6, 2.5e6, 4, 1, 0, 0], 0);
    ls.set([3e6, 7e6, 3.5e6, 6e6, 2, 3, 0, 0], LAYER_STAT_FIELDS);
    const upload = {
      taskId: 1,
      layer: 0,
      expert: 5,
      victim: 2,
      ok: true,
      inPlace: true,
      fellBack: false,
      admitted: false,
      prefetch: false,
      bytes: 100,
      issuedNs: 3e6,
      startNs: 3.2e6,
      endNs: 4e6,
    };
    const failed = { ...upload, expert: 6, ok: false };
    const read = { layer: 1, expert: 7, bytes: 50, issuedNs: 3e6, startNs: 3.1e6, endNs: 3.4e6 };
    const v = stepView({
      phase: 'decode',
      position: 9,
      layerStats: ls,
      poll: { uploads: [upload, failed], evicted: [], reads: [read] },
    });
    expect(v.layers).toEqual([
      { layer: 0, startMs: 1, endMs: 3, hits: 4, misses: 1 },
      { layer: 1, startMs: 3, endMs: 7, hits: 2, misses: 3 },
    ]);
    expect(v.transfers).toEqual([
      { layer: 0, expert: 5, bytes: 100, startMs: 3.2, endMs: 4, kind: 'upload' },
      { layer: 1, expert: 7, bytes: 50, startMs: 3.1, endMs: 3.4, kind: 'read' },
    ]);
    ls.fill(0); // a copy: the actor's ring may be reused
    expect(v.layers[1].endMs).toBe(7);
  });
});
