/**
 * The prefetch replay (issue 13 item 6) on the real OLMoE trace and on a planted one: observe
 * reads exactly what off reads; enforce with a perfect oracle and a generous window stalls less;
 * a useless oracle covers nothing; a zero window reads only the cold start's; seeds decide.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FileFormatError } from '../../../src/core/errors.js';
import { mulberry32 } from '../../../src/core/prng.js';
import type { Trace } from '../../../src/routes/types.js';
import { costDefaults } from '../../../src/tiers/cost.js';
import { expertBytes, requireGeometry } from '../../../src/tiers/geometry.js';
import { labScenario, loadTraceFiles } from '../../../src/tiers/lab.js';
import { buildScenario } from '../../../src/tiers/scenario.js';
import { oraclePrediction } from '../../../src/tiers/prefetch-oracle.js';
import { replayPrefetch, type PrefetchReplayOptions } from '../../../src/tiers/prefetch-replay.js';
import { readMs, timingFromCost, timingFromSnapshot, type TimingModel } from '../../../src/tiers/prefetch-timing.js';
import { TRANSFER_WINDOW_DEFAULTS } from '../../../src/tiers/transfer-window.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const olmoe = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');
const g = requireGeometry('olmoe-1b-7b');
const bytes = expertBytes(g);
const [trace] = loadTraceFiles([olmoe]);
const scenario = (t: Trace, slots: number) => labScenario(t, { scope: 'layer' }, slots);

/** A disk-like timing: one read (1 ms at this bandwidth, no fixed cost) against 2 ms of compute per layer. */
const disk: TimingModel = {
  source: 'test',
  computeMs: new Array(16).fill(2),
  bandwidthBytesPerS: bytes * 1000,
  transferFixedMs: 0,
};
const opts = (o: Partial<PrefetchReplayOptions>): PrefetchReplayOptions => ({
  mode: 'enforce',
  timing: disk,
  expertBytes: bytes,
  recall: 1,
  seed: 1,
  window: { ...TRANSFER_WINDOW_DEFAULTS, safety: 1 },
  ...o,
});

describe('replayPrefetch on olmoe-1b-7b.decode.jsonl', () => {
  it.each([
    [16, 'cost'],
    [32, 'cost'],
    [16, 'disk'],
    [32, 'disk'],
  ] as const)('observe stalls and reads exactly as off (budget %i, %s timing)', (slots, which) => {
    const timing = which === 'cost' ? timingFromCost(g, costDefaults) : disk;
    const sc = scenario(trace, slots);
    const off = replayPrefetch(sc, opts({ mode: 'off', timing, recall: 0.9 }));
    const observe = replayPrefetch(sc, opts({ mode: 'observe', timing, recall: 0.9 }));
    expect([observe.stallMs, observe.decodeMs, observe.demandReads, observe.prefetchReads]).toEqual([
      off.stallMs,
      off.decodeMs,
      off.demandReads,
      0,
    ]);
    expect(off.demandReads).toBeGreaterThan(0);
    // Off counts nothing (as the engine's tier); observe counts every miss uncovered and what enforce would read.
    expect([off.ledger.routed.count, off.ledger.uncovered.count, off.wouldIssue]).toEqual([0, 0, 0]);
    expect(observe.ledger.uncovered.count).toBe(off.demandReads);
    expect(observe.ledger.issued.count).toBe(0);
    expect(observe.wouldIssue).toBeGreaterThan(0);
    expect(observe.wouldCover).toBeLessThanOrEqual(observe.wouldIssue);
  });

  it('enforce with recall 1 and a generous window stalls less than off; every read it issues is routed', () => {
    const sc = scenario(trace, 16);
    const off = replayPrefetch(sc, opts({ mode: 'off' }));
    const on = replayPrefetch(sc, opts({}));
    expect(on.stallMs).toBeLessThan(0.9 * off.stallMs);
    expect(on.decodeMs).toBeLessThan(off.decodeMs);
    const t = on.ledger;
    expect(t.covered.count).toBeGreaterThan(1000);
    // A perfect oracle's reads are all routed at the next layer: landed (covered) or awaited (late), never wasted.
    expect(t.covered.count + t.late.count).toBe(t.issued.count);
    expect(t.wasted.count).toBe(0);
    // The same experts are read, some earlier: no read is added.
    expect(on.demandReads + on.prefetchReads).toBe(off.demandReads);
    expect(t.uncovered.count).toBe(on.demandReads);
  });

  it('enforce with recall 0 reads wrong experts: wasted, far fewer covered, more reads than off', () => {
    const sc = scenario(trace, 16);
    const off = replayPrefetch(sc, opts({ mode: 'off' }));
    const perfect = replayPrefetch(sc, opts({}));
    const useless = replayPrefetch(sc, opts({ recall: 0 }));
    expect(useless.ledger.wasted.count).toBeGreaterThan(0);
    expect(useless.ledger.covered.count).toBeLessThan(0.25 * perfect.ledger.covered.count);
    expect(useless.demandReads + useless.prefetchReads).toBeGreaterThan(off.demandReads);
  });

  it("a zero window (safety tiny) reads at most the cold start's one expert per layer", () => {
    const sc = scenario(trace, 16);
    const r = replayPrefetch(sc, opts({ window: { ...TRANSFER_WINDOW_DEFAULTS, safety: 1e-9 } }));
    expect(r.prefetchReads).toBeGreaterThan(0);
    expect(r.prefetchReads).toBeLessThanOrEqual(g.layers - 1); // layer 0 is never predicted
    const generous = replayPrefetch(sc, opts({}));
    expect(generous.prefetchReads).toBeGreaterThan(10 * g.layers);
  });

  it('a full queue refuses (counted) what the window would admit', () => {
    const sc = scenario(trace, 16);
    const wide: TimingModel = { ...disk, computeMs: new Array(16).fill(5) }; // a window of 5 experts
    const roomy = replayPrefetch(sc, opts({ timing: wide }));
    const tight = replayPrefetch(sc, opts({ timing: wide, queueLengthMax: 1 }));
    expect(roomy.ledger.refusedQueueFull.count).toBe(0);
    expect(tight.ledger.refusedQueueFull.count).toBeGreaterThan(0);
    expect(tight.prefetchReads).toBeLessThan(roomy.prefetchReads);
  });

  it('is deterministic under a seed, and the seed matters', () => {
    const sc = scenario(trace, 24);
    const a = replayPrefetch(sc, opts({ recall: 0.5, seed: 7 }));
    expect(replayPrefetch(sc, opts({ recall: 0.5, seed: 7 }))).toEqual(a);
    expect(replayPrefetch(sc, opts({ recall: 0.5, seed: 8 })).ledger).not.toEqual(a.ledger);
  });

  it("counts a late read with its wait (the cold start's reads queue behind the first misses)", () => {
    const r = replayPrefetch(scenario(trace, 16), opts({ timing: timingFromCost(g, costDefaults) }));
    expect(r.ledger.late.count).toBeGreaterThan(0);
    expect(r.ledger.lateMs).toBeGreaterThan(0);
    expect(r.stallMs).toBeGreaterThan(r.ledger.lateMs / 10);
  });
});

describe('a planted trace: the same experts every token', () => {
  const layers = 16;
  const planted: Trace = {
    source: 'planted',
    header: { model: 'olmoe-1b-7b', layers, experts: 64, topK: 8, rankOrder: true },
    prefill: [],
    decode: Array.from({ length: 40 }, (_, step) => ({
      step,
      layers: Array.from({ length: layers }, (_, l) => [0, 1, 2, 3, 4, 5, 6, 7].map((e) => (e + 8 * l) % 64)),
    })),
  };

  it('an oracle of recall 0 covers nothing: every read it issues lands unused', () => {
    const r = replayPrefetch(labScenario(planted, { scope: 'layer', start: 'empty' }, 16), opts({ recall: 0 }));
    expect(r.prefetchReads).toBeGreaterThan(0);
    expect([r.ledger.covered.count, r.ledger.late.count]).toEqual([0, 0]);
    expect(r.ledger.wasted.count + r.landedUnrouted).toBe(r.ledger.completed.count);
    expect(r.ledger.completed.count).toBe(r.prefetchReads);
  });
});

/** A small trace of `routes[token][layer]` (one expert each unless given more), empty start, 2 slots per layer. */
function tiny(routes: number[][][], slots = 2) {
  const layers = routes[0].length;
  const trace: Trace = {
    source: 'tiny',
    header: { model: 'tiny', layers, experts: 8, topK: routes[0][0].length, rankOrder: true },
    prefill: [],
    decode: routes.map((layersOf, step) => ({ step, layers: layersOf })),
  };
  return buildScenario(trace, { budget: { scope: 'layer', slots }, start: 'empty' });
}
const clock = (computeMs: number[], readMsEach: number): TimingModel => ({
  source: 'test',
  computeMs,
  bandwidthBytesPerS: 1000 / readMsEach,
  transferFixedMs: 0,
});
const one = (o: Partial<PrefetchReplayOptions>): PrefetchReplayOptions => opts({ expertBytes: 1, ...o });

describe('the simulated clock, by hand', () => {
  // Token 0, layer 0 routes 0, layer 1 routes 1; reads take 3 ms on one lane.
  //   off:     read 0 [0, 3], compute [3, 3 + c0]; read 1 [3 + c0, 6 + c0], compute after it
  //   enforce: at layer 0, the cold start admits layer 1's expert 1: it reads after the demand read, [3, 6]
  it('a prefetch still reading when its layer starts is late: the layer waits for it, and the wait is counted', () => {
    const sc = tiny([[[0], [1]]]);
    const timing = clock([1, 1], 3);
    const off = replayPrefetch(sc, one({ mode: 'off', timing }));
    expect([off.stallMs, off.decodeMs]).toEqual([6, 8]); // layer 1 starts at 4, reads [4, 7]
    const on = replayPrefetch(sc, one({ timing }));
    expect([on.stallMs, on.decodeMs, on.demandReads, on.prefetchReads]).toEqual([5, 7, 1, 1]); // layer 1 starts at 4, waits to 6
    expect([on.ledger.late.count, on.ledger.lateMs, on.ledger.covered.count]).toEqual([1, 2, 0]);
  });

  it('one landed before its layer starts is covered: no wait', () => {
    const sc = tiny([[[0], [1]]]);
    const timing = clock([4, 4], 3);
    expect(replayPrefetch(sc, one({ mode: 'off', timing })).stallMs).toBe(6);
    const on = replayPrefetch(sc, one({ timing }));
    expect([on.stallMs, on.decodeMs]).toEqual([3, 11]); // [0, 3] read, [3, 7] compute, layer 1 [7, 11]
    expect([on.ledger.covered.count, on.ledger.late.count, on.ledger.uncovered.count]).toEqual([1, 0, 1]);
  });

  it('one lane: two misses of a layer read one after the other; a miss waits for the wrong prefetch already reading', () => {
    expect(replayPrefetch(tiny([[[0, 1]]]), one({ mode: 'off', timing: clock([1], 3) })).stallMs).toBe(6);
    const sc = tiny([[[0], [1]]]);
    const wrong = replayPrefetch(sc, one({ recall: 0, timing: clock([1, 1], 3) }));
    // Layer 0: read [0, 3], compute [3, 4]; the wrong read for layer 1 runs [3, 6]; layer 1's miss reads [6, 9].
    expect([wrong.stallMs, wrong.decodeMs, wrong.demandReads, wrong.prefetchReads]).toEqual([8, 10, 2, 1]);
    expect([wrong.ledger.covered.count, wrong.ledger.uncovered.count, wrong.landedUnrouted]).toEqual([0, 2, 1]);
  });

  it('the window of the layer a read starts beside: a long layer 1 admits reads for layer 2, a short layer 0 none for layer 1', () => {
    const routes = Array.from({ length: 12 }, (_, t) => [[t % 8], [(t + 3) % 8], [(t + 5) % 8]]);
    const r = replayPrefetch(tiny(routes), one({ timing: clock([0.1, 10, 0.1], 1) }));
    expect(r.layers[1].issued.count).toBe(1); // the cold start only
    expect(r.layers[2].issued.count).toBe(12);
    expect(r.layers[2].covered.count).toBe(12);
  });
});

describe('the oracle and the timing model', () => {
  it('keeps each true expert with probability recall, replaces it by a distinct wrong one otherwise', () => {
    const rng = mulberry32(3);
    const routed = [3, 9, 12, 40];
    expect(oraclePrediction(rng, routed, 64, 1)).toEqual(routed);
    let kept = 0;
    for (let i = 0; i < 2000; i++) {
      const p = oraclePrediction(rng, routed, 64, 0.7);
      expect(new Set(p).size).toBe(4);
      kept += p.filter((e, k) => e === routed[k]).length;
      expect(p.every((e, k) => e === routed[k] || !routed.includes(e))).toBe(true);
    }
    expect(kept / 8000).toBeGreaterThan(0.67);
    expect(kept / 8000).toBeLessThan(0.73);
    expect(oraclePrediction(rng, routed, 64, 0).some((e) => routed.includes(e))).toBe(false);
  });

  it("takes the cost model's figures, or a measured snapshot; refuses an unmeasured one naming the field", () => {
    const c = timingFromCost(g, costDefaults);
    expect(readMs(c, bytes)).toBeCloseTo(0.33 + bytes / 25e6, 9);
    expect(c.computeMs[0]).toBeCloseTo((8 * (10 + bytes / 448e3)) / 1000, 9);
    const snap = { computeMsEwma: new Array(16).fill(1.5), bandwidthBytesPerSEwma: 2e9, transferFixedMsEwma: 0.1 };
    expect(timingFromSnapshot('s.json', snap, 16)).toMatchObject({
      source: 's.json',
      bandwidthBytesPerS: 2e9,
      transferFixedMs: 0.1,
    });
    expect(() => timingFromSnapshot('s.json', { ...snap, computeMsEwma: [1, null] }, 2)).toThrow(/computeMsEwma\[1\]/);
    expect(() => timingFromSnapshot('s.json', snap, 8)).toThrow(FileFormatError);
    expect(() => timingFromSnapshot('s.json', { ...snap, bandwidthBytesPerSEwma: undefined }, 16)).toThrow(
      /bandwidthBytesPerSEwma/,
    );
    expect(() => timingFromSnapshot('s.json', [], 16)).toThrow(/top level/);
  });
});
