import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { compactJson, tierTable } from '../../bench/tier.mjs';
// @ts-expect-error plain .mjs bench module without declarations
import { quantile } from '../../bench/lib/stats.mjs';

describe('bench tier results', () => {
  it('writes each round on one line and reads back the same value', () => {
    const value = {
      bench: 'tier',
      runs: [
        {
          config: { threads: [1, 2], arch: 'a,b {x}' },
          overhead: [
            {
              rounds: [
                { ratio: 1.5, controlRatio: 0.99 },
                { ratio: 1, controlRatio: 1 },
              ],
              quartiles: [0.9, 1.1],
            },
          ],
        },
      ],
    };
    const text = compactJson(value);
    expect(JSON.parse(text)).toEqual(value);
    expect(text).toContain('{ "ratio": 1.5, "controlRatio": 0.99 }');
    expect(text).toContain('"threads": [1, 2]');
  });

  it('interpolates quantiles between sorted values', () => {
    expect(quantile([4, 1, 3, 2], 0)).toBe(1);
    expect(quantile([4, 1, 3, 2], 1)).toBe(4);
    expect(quantile([4, 1, 3, 2], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4, 5], 0.25)).toBe(2);
    expect(() => quantile([], 0.5)).toThrow(RangeError);
  });

  it('puts the median round ratio in the goal column, with its quartiles and the control', () => {
    const o = {
      threads: 2,
      noTierMsPerToken: 1,
      tierMsPerToken: 1.02,
      ratio: 1.02,
      medianRoundRatio: 1.01,
      roundRatioQuartiles: [0.95, 1.08],
      medianRoundControlRatio: 1.003,
      noTierCpuMsPerToken: 2,
      tierCpuMsPerToken: 2.1,
      cpuRatio: 1.05,
      loadAverage1m: { min: 1, max: 1.5 },
      rounds: [{}, {}],
    };
    const table = tierTable({
      runs: [
        {
          date: '2026-11-29T13:58:00.000Z',
          config: { preset: 'small', arch: 'qwen3moe', quant: 'q4_0', maxTokens: 16 },
          overhead: [o],
        },
      ],
    });
    const row = table.split('\n').find((l: string) => l.startsWith('| small'))!;
    expect(
      row
        .split('|')
        .map((c: string) => c.trim())
        .slice(1, 10),
    ).toEqual(['small qwen3moe q4_0', '2', '16 x 2', '1.00', '1.02', '1.010', '0.950-1.080', '1.003', '1.020']);
  });

  it("keeps an overhead row's own tokens and date when a later run of the residency part replaced the config", () => {
    const o = {
      threads: 1,
      date: '2026-11-29T13:58:41.903Z',
      maxTokens: 16,
      noTierMsPerToken: 1,
      tierMsPerToken: 1,
      ratio: 1,
      medianRoundRatio: 1,
      medianRoundControlRatio: 1,
      noTierCpuMsPerToken: 1,
      tierCpuMsPerToken: 1,
      cpuRatio: 1,
      loadAverage1m: { min: 1, max: 1 },
      rounds: [{}],
    };
    const table = tierTable({
      runs: [
        {
          date: '2026-11-29T14:24:00.000Z',
          config: { preset: 'small', arch: 'qwen3moe', quant: 'q4_0', maxTokens: 64 },
          overhead: [o],
        },
      ],
    });
    const cells = table
      .split('\n')
      .find((l: string) => l.startsWith('| small'))!
      .split('|')
      .map((c: string) => c.trim());
    expect(cells[3]).toBe('16 x 1');
    expect(cells.at(-2)).toBe('2026-11-29T13:58Z');
  });
});
