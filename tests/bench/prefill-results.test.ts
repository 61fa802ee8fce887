/**
 * The disk tier's prefill path default is measured, not guessed (issue 14 item 3): 'auto' is the
 * crossover the committed bench/results/prefill.json measured, recomputed here from its rounds.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SHORT_PREFILL_TOKENS_AUTO } from '../../src/engine/tier/prefill-path.js';
// @ts-expect-error plain .mjs bench module without declarations
import { crossoverOf, crossoverTokens } from '../../bench/prefill.mjs';

interface Results {
  measuredCrossover: number;
  crossRuns: Array<{ len: number; onDemand: Array<{ ttftMs: number }>; whole: Array<{ ttftMs: number }> }>;
}

describe('the prefill crossover', () => {
  it('is the largest prompt length up to which on demand is never slower, over the committed rounds, and auto is it', () => {
    const results = JSON.parse(
      readFileSync(new URL('../../bench/results/prefill.json', import.meta.url), 'utf8'),
    ) as Results;
    expect(crossoverTokens(crossoverOf(results.crossRuns))).toBe(results.measuredCrossover);
    expect(SHORT_PREFILL_TOKENS_AUTO).toBe(results.measuredCrossover);
  });

  it('stops at the first length where whole layers win', () => {
    const at = (len: number, onDemandTtftMs: number, wholeLayerTtftMs: number) => ({
      len,
      onDemandTtftMs,
      wholeLayerTtftMs,
    });
    expect(crossoverTokens([at(16, 1, 2), at(32, 3, 2), at(64, 1, 2)])).toBe(16);
    expect(crossoverTokens([at(64, 1, 2), at(16, 1, 2), at(32, 1, 2)])).toBe(64);
    expect(crossoverTokens([at(16, 3, 2)])).toBe(0);
  });
});
