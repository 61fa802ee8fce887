/** moetier routes stats: the statistics on hand-made sequences, the real OLMoE trace, and the CLI. */
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  layerRouteStats,
  normalizedEntropy,
  nextStepReuseOfLayer,
  topShare,
  windowDistinctShare,
} from '../../../src/routes/stats.js';
import { layerHitRates } from '../../../src/tiers/layer-hit-rates.js';
import { lru } from '../../../src/tiers/policies/lru.js';
import { belady } from '../../../src/tiers/policies/belady.js';
import { traceRouteStats } from '../../../src/tiers/route-stats.js';
import { loadTraceFiles } from '../../../src/tiers/lab.js';
import { parseRoutesArgs, routesMain } from '../../../src/cli/commands/routes.js';
import { InvalidOptionError } from '../../../src/core/errors.js';
import type { RouteStep } from '../../../src/routes/types.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const olmoe = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');

describe('route statistics of one layer', () => {
  it('entropy is 1 for even use, 0 for one expert, and in between otherwise', () => {
    expect(normalizedEntropy([5, 5, 5, 5])).toBeCloseTo(1, 12);
    expect(normalizedEntropy([9, 0, 0, 0])).toBe(0);
    // p = (1/2, 1/2, 0, 0): log 2 / log 4
    expect(normalizedEntropy([3, 3, 0, 0])).toBeCloseTo(0.5, 12);
  });

  it('top share, reuse and windows count what they say', () => {
    expect(topShare([6, 1, 2, 1], 1)).toBeCloseTo(0.6, 12);
    // steps 1 and 2 share one of two experts each; step 3 shares both with step 2
    const steps = [
      [0, 1],
      [1, 2],
      [1, 2],
      [3, 0],
    ];
    expect(nextStepReuseOfLayer(steps)).toBeCloseTo((1 + 2 + 0) / 6, 12);
    // windows of 2: {0,1,2} {1,2} {0,1,2,3} over E = 8
    expect(windowDistinctShare(steps, 2, 8)).toBeCloseTo((3 + 2 + 4) / 3 / 8, 12);
    // a window wider than the sequence is the whole sequence
    expect(windowDistinctShare(steps, 64, 8)).toBeCloseTo(4 / 8, 12);
    const s = layerRouteStats(steps, 8, 2);
    expect(s.reuseOverChance).toBeCloseTo(s.reuse / (2 / 8), 12);
  });

  it('per-layer hit rates: a layer that repeats one set hits always after warm-up, Belady bounds LRU', () => {
    // layer 0 repeats {0, 1}; layer 1 cycles over 4 experts with 2 slots (LRU's worst case)
    const steps: RouteStep[] = Array.from({ length: 40 }, (_, t) => ({ step: t, layers: [[0, 1], [t % 4]] }));
    const o = { experts: 4, topK: 2, slots: 2, scoreFrom: 16 };
    const lruRates = layerHitRates(lru, steps, o);
    const minRates = layerHitRates(belady, steps, o);
    expect(lruRates[0]).toBe(1);
    expect(lruRates[1]).toBe(0);
    expect(minRates[1]).toBeGreaterThan(0.3);
    for (let l = 0; l < 2; l++) expect(lruRates[l]).toBeLessThanOrEqual(minRates[l]);
  });
});

describe('routes stats on the real OLMoE-1B-7B trace', () => {
  const [trace] = loadTraceFiles([olmoe]);
  const stats = traceRouteStats(trace);

  it('has decode rows only, every layer, and shares of E as slots', () => {
    expect(stats.prefill).toBeUndefined();
    expect(stats.decode!.steps).toBe(299);
    expect(stats.decode!.layers).toHaveLength(16);
    expect(stats.slots).toEqual([8, 16, 24, 32]);
  });

  it('real routing: spread, reuse well above chance, Belady above LRU at every size', () => {
    const m = stats.decode!.mean;
    expect(m.entropy).toBeGreaterThan(0.85);
    expect(m.reuseOverChance).toBeGreaterThan(2.5);
    expect(m.window16Share).toBeGreaterThan(0.45);
    for (const layer of stats.decode!.layers) {
      layer.lruHitRate.forEach((h, i) => expect(h!).toBeLessThanOrEqual(layer.beladyHitRate[i]!));
      // hit rates grow with the cache
      for (let i = 1; i < layer.lruHitRate.length; i++)
        expect(layer.lruHitRate[i]!).toBeGreaterThan(layer.lruHitRate[i - 1]!);
    }
  });
});

describe('moetier routes stats (CLI)', () => {
  it('prints a table with a mean row, and JSON with --json', async () => {
    const lines: string[] = [];
    expect(await routesMain(['stats', olmoe], (t) => lines.push(t))).toBe(0);
    expect(lines.join('\n')).toMatch(/decode, 299 rows/);
    expect(lines.join('\n')).toMatch(/^mean\s+0\.9/m);
    const json: string[] = [];
    await routesMain(['stats', '--json', olmoe], (t) => json.push(t));
    const parsed = JSON.parse(json[0]);
    expect(parsed.traces[0].decode.layers).toHaveLength(16);
    expect(parsed.pooled.decode.traces).toBe(1);
  });

  it('refuses a missing sub-command, an unknown flag and no trace', () => {
    expect(() => parseRoutesArgs(['show', olmoe])).toThrow(InvalidOptionError);
    expect(() => parseRoutesArgs(['stats', '--bogus', olmoe])).toThrow(InvalidOptionError);
    expect(() => parseRoutesArgs(['stats'])).toThrow(InvalidOptionError);
  });
});
