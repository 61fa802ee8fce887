/**
 * Issue 15's acceptance on replayed routing: the guarded replan (`replan`) against no replan
 * (`lfru`) and the unguarded replan (`replan-unguarded`), hosted, per-layer budgets.
 *
 *   adversarial  guarded >= lfru - 2 points, every budget
 *   favourable   guarded keeps >= 80 % of the unguarded replan's gain over lfru where that gain
 *                is at least 2 points (below that it is within the noise of one layer's swap)
 *
 * The cases, from what the project has (docs/REPLAY.md has their figures):
 *   - the small preset's own route traces with real prefill rows (tests/fixtures/routes, made by
 *     record.sh) and the heat file of one code prompt: two prompts outside the synthetic topics
 *     whose decode routes like the heat file and unlike the prefill (stars, fisherman), two on-topic
 *     prompts whose prefill predicts the decode (rocket, captain), each of those with its prefill
 *     permuted, and each with the other prompt's prefill;
 *   - the shared OLMoE trace (no prefill rows): its first 64 decode tokens as the prefill (honest),
 *     and permuted, with and without a heat prefix.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readHeatTable } from '../../../src/engine/heat-file.js';
import { routeCounts } from '../../../src/routes/load.js';
import type { Trace } from '../../../src/routes/types.js';
import { labScenario, loadTraceFiles, type LabOptions } from '../../../src/tiers/lab.js';
import { policyByName } from '../../../src/tiers/policies/index.js';
import { replay } from '../../../src/tiers/replay.js';

const fixtures = path.join(__dirname, '../../fixtures/routes');
const small = (name: string): Trace => loadTraceFiles([path.join(fixtures, `small-${name}.jsonl`)])[0];
const heat = readHeatTable(path.join(fixtures, 'heat-code.json'), 8, 32);
const olmoe = loadTraceFiles([path.join(__dirname, '../../../../shared/traces/olmoe-1b-7b.decode.jsonl')])[0];
const prefillOf = (t: Trace) => routeCounts(t.prefill, t.header.layers, t.header.experts);

type Options = Pick<LabOptions, 'heat' | 'prefill' | 'prefillPermute' | 'heatFromPrefix' | 'prefillFromPrefix'>;
interface Case {
  name: string;
  kind: 'adversarial' | 'favourable';
  trace: Trace;
  o: Options;
  budgets: number[];
}

const smallBudgets = [8, 12, 16]; // 25, 37.5, 50 % of 32 experts
const olmoeBudgets = [8, 16, 24]; // 12.5, 25, 37.5 % of 64

function cases(): Case[] {
  const out: Case[] = [];
  for (const n of ['stars', 'fisherman']) {
    out.push({
      name: `${n}, heat from a code prompt`,
      kind: 'adversarial',
      trace: small(n),
      o: { heat },
      budgets: smallBudgets,
    });
  }
  for (const [n, other] of [
    ['rocket', 'captain'],
    ['captain', 'rocket'],
  ]) {
    out.push({
      name: `${n}, heat from a code prompt`,
      kind: 'favourable',
      trace: small(n),
      o: { heat },
      budgets: smallBudgets,
    });
    out.push({ name: `${n}, cold`, kind: 'favourable', trace: small(n), o: {}, budgets: smallBudgets });
    out.push({
      name: `${n}, permuted prefill, heat`,
      kind: 'adversarial',
      trace: small(n),
      o: { heat, prefillPermute: 3 },
      budgets: smallBudgets,
    });
    out.push({
      name: `${n} decode, ${other}'s prefill, heat`,
      kind: 'adversarial',
      trace: small(n),
      o: { heat, prefill: prefillOf(small(other)) },
      budgets: smallBudgets,
    });
    out.push({
      name: `${n} decode, ${other}'s prefill, cold`,
      kind: 'adversarial',
      trace: small(n),
      o: { prefill: prefillOf(small(other)) },
      budgets: smallBudgets,
    });
  }
  out.push({
    name: 'olmoe, 64-token prefix as prefill, cold',
    kind: 'favourable',
    trace: olmoe,
    o: { prefillFromPrefix: 64 },
    budgets: olmoeBudgets,
  });
  out.push({
    name: 'olmoe, 64-token prefix, heat prefix 32',
    kind: 'favourable',
    trace: olmoe,
    o: { prefillFromPrefix: 64, heatFromPrefix: 32 },
    budgets: olmoeBudgets,
  });
  for (const seed of [5, 11]) {
    out.push({
      name: `olmoe, permuted prefix (seed ${seed}), heat prefix 32`,
      kind: 'adversarial',
      trace: olmoe,
      o: { prefillFromPrefix: 64, heatFromPrefix: 32, prefillPermute: seed },
      budgets: olmoeBudgets,
    });
    out.push({
      name: `olmoe, permuted prefix (seed ${seed}), cold`,
      kind: 'adversarial',
      trace: olmoe,
      o: { prefillFromPrefix: 64, prefillPermute: seed },
      budgets: olmoeBudgets,
    });
  }
  return out;
}

function hitRate(policy: string, c: Case, budget: number): number {
  const counts = replay(policyByName(policy)!, labScenario(c.trace, { scope: 'layer', ...c.o }, budget), 'hosted');
  return counts.hits / counts.routed;
}

describe.each(cases())('$name ($kind)', (c) => {
  it.each(c.budgets)('budget %i', (budget) => {
    const [off, guarded, unguarded] = ['lfru', 'replan', 'replan-unguarded'].map((p) => hitRate(p, c, budget));
    const where = `${c.name}, budget ${budget}: lfru ${off.toFixed(3)}, replan ${guarded.toFixed(3)}, unguarded ${unguarded.toFixed(3)}`;
    if (c.kind === 'adversarial') expect(guarded, where).toBeGreaterThanOrEqual(off - 0.02);
    else if (unguarded - off >= 0.02) expect(guarded - off, where).toBeGreaterThanOrEqual(0.8 * (unguarded - off));
    else expect(guarded, where).toBeGreaterThanOrEqual(unguarded - 0.02);
  });
});

it('the scenarios are not vacuous: unguarded replan loses on the adversarial cases the guard saves', () => {
  // stars at 37 %: replan unguarded falls far below no replan (the decode follows the heat file).
  const stars = cases()[0];
  expect(hitRate('lfru', stars, 12) - hitRate('replan-unguarded', stars, 12)).toBeGreaterThan(0.3);
  // and on the favourable side the gain is real.
  const rocket = cases().find((c) => c.name === 'rocket, heat from a code prompt')!;
  expect(hitRate('replan-unguarded', rocket, 12) - hitRate('lfru', rocket, 12)).toBeGreaterThan(0.5);
});
