/**
 * Prefetch admission (issue 13, docs/SPEC.md section 4): the packing rules, a property test over
 * random candidates and windows, the window's in-flight cap, and the options refused fail-closed.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32, randomInt } from '../../../src/core/prng.js';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { calibrate, initialCalibration } from '../../../src/actors/calibration/logic.js';
import { packPrefetch, type PrefetchCandidate } from '../../../src/tiers/prefetch.js';
import { prefetchDefaults, resolvePrefetch } from '../../../src/engine/prefetch-options.js';
import { transferWindowBytes } from '../../../src/tiers/transfer-window.js';

const c = (
  expert: number,
  score: number,
  bytes: number | undefined,
  extra: Partial<PrefetchCandidate> = {},
): PrefetchCandidate => ({
  expert,
  score,
  bytes,
  resident: false,
  inflight: false,
  ...extra,
});

describe('packPrefetch', () => {
  it('packs whole experts greedily in stable score order; a later smaller one may still fit', () => {
    const a = packPrefetch([c(1, 5, 600), c(2, 9, 500), c(3, 5, 300), c(4, 1, 100)], 1000);
    expect(a.admitted).toEqual([2, 3, 4]); // 2 (500), 1 does not fit (1100), 3 (800), 4 (900)
    expect(a.bytes).toBe(900);
    expect(a.noRoom).toBe(1);
  });

  it('residents and experts in flight cost nothing and are never issued; unknown costs never admitted', () => {
    const a = packPrefetch(
      [
        c(1, 9, 400, { resident: true }),
        c(2, 8, 400, { inflight: true }),
        c(3, 7, undefined),
        c(4, 6, NaN),
        c(5, 5, 400),
      ],
      400,
    );
    expect(a.admitted).toEqual([5]);
    expect(a.free).toEqual([1, 2]);
    expect(a.unknownCost).toBe(2);
  });

  it('a cold start (no window yet) admits one expert, whatever its size', () => {
    expect(packPrefetch([c(1, 1, 1e12), c(2, 0, 10)], undefined).admitted).toEqual([1]);
    expect(packPrefetch([c(1, 1, undefined), c(2, 0, 10)], undefined).admitted).toEqual([2]);
  });

  it('over random candidates and windows: never past the window, only known costs, each expert once, in score order', () => {
    const rng = mulberry32(71);
    for (let trial = 0; trial < 500; trial++) {
      const n = randomInt(rng, 0, 12);
      const candidates = Array.from({ length: n }, (_, i) =>
        c(i, randomInt(rng, 0, 5), rng() < 0.1 ? undefined : randomInt(rng, 1, 1000), {
          resident: rng() < 0.2,
          inflight: rng() < 0.1,
        }),
      );
      const window = rng() < 0.1 ? undefined : randomInt(rng, 0, 3000);
      const a = packPrefetch(candidates, window);
      const byId = new Map(candidates.map((x) => [x.expert, x]));
      expect(new Set(a.admitted).size).toBe(a.admitted.length);
      expect(a.bytes).toBe(a.admitted.reduce((s, e) => s + byId.get(e)!.bytes!, 0));
      if (window === undefined) expect(a.admitted.length).toBeLessThanOrEqual(1);
      else expect(a.bytes).toBeLessThanOrEqual(window);
      for (const e of a.admitted) {
        const x = byId.get(e)!;
        expect(x.resident || x.inflight).toBe(false);
        expect(x.bytes).toBeGreaterThan(0);
      }
      const scores = a.admitted.map((e) => byId.get(e)!.score);
      expect(scores).toEqual([...scores].sort((p, q) => q - p));
      expect(a.admitted.length + a.free.length + a.unknownCost + a.noRoom).toBe(n);
    }
  });
});

describe('the transfer window', () => {
  it('never admits past the in-flight cap', () => {
    let s = initialCalibration({ alpha: 0.2, nLayer: 1 });
    s = calibrate(s, { kind: 'compute', invocation: 0, layer: 0, startNs: 0, endNs: 10e6 }, { alpha: 0.2, nLayer: 1 });
    s = calibrate(
      s,
      { kind: 'transfer', invocation: 0, layer: 0, bytes: 1e9, issuedNs: 0, startNs: 0, endNs: 1e9 },
      { alpha: 0.2, nLayer: 1 },
    );
    // 1 GB/s over 0.8 x 10 ms: 8 MB; with 7 MB of a 7.5 MB cap in flight, 0.5 MB is left.
    expect(
      transferWindowBytes(s, 0, 7e6, 0, { safety: 0.8, windowBytesMax: 256e6, inflightBytesMax: 7.5e6 }),
    ).toBeCloseTo(0.5e6, 0);
    expect(transferWindowBytes(s, 0, 8e6, 0, { safety: 0.8, windowBytesMax: 256e6, inflightBytesMax: 7.5e6 })).toBe(0);
  });
});

describe('prefetch options', () => {
  it('default to off with the public limits, and merge a change over a base', () => {
    expect(resolvePrefetch(undefined)).toEqual({
      mode: 'off',
      safety: 0.8,
      windowBytesMax: 256 * 2 ** 20,
      queueMax: 64,
    });
    const enforce = resolvePrefetch({ mode: 'enforce' });
    expect(resolvePrefetch({ safety: 0.5 }, enforce)).toMatchObject({ mode: 'enforce', safety: 0.5 });
  });

  it('refuse a bad value by its name, and the base is unchanged', () => {
    const base = resolvePrefetch({ mode: 'observe' });
    for (const [o, name] of [
      [{ mode: 'on' }, 'prefetch.mode'],
      [{ safety: 0 }, 'prefetch.safety'],
      [{ safety: 1.5 }, 'prefetch.safety'],
      [{ windowBytesMax: 0 }, 'prefetch.windowBytesMax'],
      [{ windowBytesMax: 1.5 }, 'prefetch.windowBytesMax'],
      [{ inflightBytesMax: 1 }, 'prefetch.inflightBytesMax'],
      [{ queueMax: 0 }, 'prefetch.queueMax'],
      [{ queueMax: 65 }, 'prefetch.queueMax'],
      [{ queueMax: 2.5 }, 'prefetch.queueMax'],
      [{ lookahead: 2 }, 'prefetch.lookahead'],
      [{ candidates: 0 }, 'prefetch.candidates'],
      [{ candidates: 1.5 }, 'prefetch.candidates'],
    ] as const) {
      expect(() => resolvePrefetch(o as never, base)).toThrow(InvalidOptionError);
      expect(() => resolvePrefetch(o as never, base)).toThrow(new RegExp(`option ${name.replace('.', '\\.')}`));
    }
    expect(base).toEqual({ ...prefetchDefaults, mode: 'observe' });
    expect(Object.isFrozen(base)).toBe(true);
  });
});
