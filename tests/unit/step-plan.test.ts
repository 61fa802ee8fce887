/**
 * A batched step's rows (src/engine/batch/step-plan.ts): every decoding sequence's row first, then
 * prompt rows in arrival order under the step's cap, so a long prompt is split and never delays
 * the others' decode by more than one step.
 */
import { describe, expect, it } from 'vitest';
import { planStep } from '../../src/engine/batch/step-plan.js';
import { mulberry32, randomInt } from '../../src/core/prng.js';

describe('planStep', () => {
  it('puts decode rows first, then prompts oldest first, and splits the prompt that passes the cap', () => {
    const plan = planStep(
      [
        { seq: 0, rows: 100, decoding: false, arrival: 5 },
        { seq: 1, rows: 1, decoding: true, arrival: 7 },
        { seq: 2, rows: 3, decoding: false, arrival: 2 },
        { seq: 3, rows: 1, decoding: true, arrival: 1 },
      ],
      10,
    );
    expect(plan).toEqual([
      { seq: 1, rows: 1 },
      { seq: 3, rows: 1 },
      { seq: 2, rows: 3 },
      { seq: 0, rows: 5 },
    ]);
  });

  it('never passes the cap, never splits a decode row, and makes progress whenever rows wait', () => {
    const rng = mulberry32(29);
    for (let trial = 0; trial < 500; trial++) {
      const n = randomInt(rng, 1, 12);
      const cap = randomInt(rng, n, 64);
      const waiting = Array.from({ length: n }, (_, seq) => {
        const decoding = rng() < 0.5;
        return { seq, rows: decoding ? 1 : randomInt(rng, 1, 200), decoding, arrival: randomInt(rng, 0, 1000) };
      });
      const plan = planStep(waiting, cap);
      const total = plan.reduce((a, p) => a + p.rows, 0);
      expect(total).toBeLessThanOrEqual(cap);
      expect(total).toBeGreaterThan(0);
      for (const w of waiting.filter((x) => x.decoding)) expect(plan).toContainEqual({ seq: w.seq, rows: 1 });
      for (const p of plan) expect(p.rows).toBeLessThanOrEqual(waiting[p.seq].rows);
      // Only the last prompt in the plan may be cut short.
      const prompts = plan.filter((p) => !waiting[p.seq].decoding);
      for (const p of prompts.slice(0, -1)) expect(p.rows).toBe(waiting[p.seq].rows);
    }
  });
});
