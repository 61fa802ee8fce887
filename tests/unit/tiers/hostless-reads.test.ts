/**
 * Host-less reads (the disk tier: every miss read from the model file once, every upload ahead
 * a further read) against Belady's misses on the same scenario, over seeded random traces.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32, randomInt } from '../../../src/core/prng.js';
import { runLab, labScenario, type LabOptions } from '../../../src/tiers/lab.js';
import { belady } from '../../../src/tiers/policies/belady.js';
import { policies, policyNames } from '../../../src/tiers/policies/index.js';
import { replay } from '../../../src/tiers/replay.js';
import { randomShape, randomTrace } from './random-trace.js';

const cases = 60;
const geometry = { hidden: 64, expertFfn: 32, expertType: 'Q8_0' };
const kindOf = (name: string): string => policies.find((p) => p.name === name)!.kind;

function randomLab(seed: number) {
  const rng = mulberry32(seed);
  const shape = randomShape(rng);
  const trace = randomTrace(rng, shape);
  trace.header.geometry = geometry; // priced from the header: the random model has no named geometry
  const heatFromPrefix = rng() < 0.4 ? randomInt(rng, 1, 5) : undefined;
  const o: LabOptions = {
    budgets: [randomInt(rng, shape.topK, shape.experts - 1)],
    policies: policyNames.filter((n) => n !== 'belady'), // Belady's misses must come without asking for it
    offload: 'hostless',
    scope: rng() < 0.5 ? 'layer' : 'global',
    start: (['empty', 'ids', heatFromPrefix ? 'heat' : 'ids'] as const)[randomInt(rng, 0, 2)],
    heatFromPrefix,
  };
  return { trace, o };
}

describe('host-less reads per token against Belady', () => {
  it(`hold the bound and the counts on ${cases} seeded traces, both scopes`, () => {
    for (let seed = 1; seed <= cases; seed++) {
      const { trace, o } = randomLab(seed);
      const rows = runLab([trace], o);
      const bel = replay(belady, labScenario(trace, o, o.budgets[0]), 'hostless');
      expect(rows).toHaveLength(o.policies.length);
      for (const r of rows) {
        const where = `seed ${seed} ${o.scope} ${r.policy}`;
        const reads = r.readsPerToken!;
        expect(r.beladyMissesPerToken, where).toBe(bel.misses / bel.tokens);
        // Each miss read for its call plus each upload that served no miss, as the replay counted them.
        expect(reads, where).toBe((r.misses + r.aheadUploads) / r.tokens);
        // Host-less every upload is a read: one count, not a second one.
        expect(reads, where).toBe(r.uploadsPerToken);
        expect(r.readBytesPerToken, where).toBeCloseTo(reads * r.expertBytes, 6);
        expect(r.readsOverBelady, where).toBe(bel.misses === 0 ? null : (r.misses + r.aheadUploads) / bel.misses);
        if (kindOf(r.policy) === 'demand') expect(reads, where).toBeGreaterThanOrEqual(r.beladyMissesPerToken!);
      }
    }
  });

  it("gives Belady's own row a ratio of 1 and its own misses, and leaves hosted rows without read fields", () => {
    const { trace, o } = randomLab(7);
    const [row] = runLab([trace], { ...o, policies: ['belady'] });
    expect(row.readsPerToken).toBe(row.misses / row.tokens);
    expect(row.beladyMissesPerToken).toBe(row.readsPerToken);
    expect(row.readsOverBelady).toBe(1);
    for (const r of runLab([trace], { ...o, offload: 'hosted' })) {
      expect([r.readsPerToken, r.readBytesPerToken, r.beladyMissesPerToken, r.readsOverBelady]).toEqual([
        null,
        null,
        null,
        null,
      ]);
    }
  });
});
