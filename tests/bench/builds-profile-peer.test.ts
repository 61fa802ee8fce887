/**
 * The arithmetic of bench/builds.mjs (medians per build and thread count, after / before) and
 * bench/profile-peer.mjs (perf report lines into microseconds per decode token), on fixed inputs.
 */
import { describe, expect, it } from 'vitest';

describe('bench/builds.mjs', () => {
  it('takes each setting’s median and the ratio after / before', async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { summarize } = await import('../../bench/builds.mjs');
    const run = (decodeTokPerS: number, prefillTokPerS: number) => ({ decodeTokPerS, prefillTokPerS });
    const runs = {
      'before@1': [run(10, 100), run(30, 300), run(20, 200)],
      'after@1': [run(25, 210), run(40, 400), run(35, 390)],
      'before@2': [run(50, 500), run(50, 500), run(90, 100)],
      'after@2': [run(60, 700), run(75, 800), run(70, 750)],
    };
    const row = summarize('q4_0', runs);
    expect(row.medians['decodeTokPerS@1']).toEqual({ before: 20, after: 35, ratio: 1.75 });
    expect(row.medians['prefillTokPerS@2']).toEqual({ before: 500, after: 750, ratio: 1.5 });
    expect(row.medians['decodeTokPerS@2'].ratio).toBeCloseTo(70 / 50, 12);
  });
});

describe('bench/profile-peer.mjs', () => {
  it('reads perf report rows into microseconds per token and marks the work done at load', async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { parsePerfReport } = await import('../../bench/profile-peer.mjs');
    const text = [
      '# Samples: 10K of event cpu-clock',
      '#',
      '    29.60%          4000  moetier.node          [.] (anonymous namespace)::kquant_matvec_rows<12, B, false>     -      -',
      '    10.00%           800  libggml-cpu-zen4.so   [.] repack_q4_K_to_q4_K_8_bl',
      '     4.50%           200  [kernel.kallsyms]     [k] pvm_irq_enable',
      '',
    ].join('\n');
    const rows = parsePerfReport(text, 100, 4000);
    expect(rows.map((r: { symbol: string }) => r.symbol)).toEqual([
      '(anonymous namespace)::kquant_matvec_rows<12, B, false>',
      'repack_q4_K_to_q4_K_8_bl',
      'pvm_irq_enable',
    ]);
    expect(rows[0]).toMatchObject({ dso: 'moetier.node', atLoad: false });
    expect(rows[0].share).toBeCloseTo(0.296, 9);
    expect(rows[0].usPerToken).toBeCloseTo(10_000, 6); // 4000 samples / 4 kHz / 100 tokens
    expect(rows[1].atLoad).toBe(true);
    expect(rows[2].usPerToken).toBeCloseTo(500, 6);
  });
});
