/**
 * Property tests over seeded random traces: every policy, both budget scopes,
 * both offload models, random starts. The invariants of issue 3.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32, randomInt, type Rng } from '../../../src/core/prng.js';
import { policies } from '../../../src/tiers/policies/index.js';
import { replanDefaults } from '../../../src/tiers/policies/replan.js';
import { guardDefaults } from '../../../src/tiers/policies/replan-guard.js';
import { admitDefaults } from '../../../src/tiers/policies/admit.js';
import { lfruDefaults } from '../../../src/tiers/policies/lfru.js';
import { staticStart, oracleStatic } from '../../../src/tiers/policies/static.js';
import { replay, type ReplayCounts } from '../../../src/tiers/replay.js';
import { buildScenario, type Scenario } from '../../../src/tiers/scenario.js';
import { residencyOf, type Residency } from '../../../src/tiers/residency.js';
import type { Budget, Decision, TierEvent } from '../../../src/tiers/types.js';
import { randomShape, randomTrace } from './random-trace.js';

const cases = 60;

function randomScenario(rng: Rng): Scenario {
  const shape = randomShape(rng);
  const trace = randomTrace(rng, shape);
  const perLayer = randomInt(rng, shape.topK, shape.experts - 1);
  const budget: Budget =
    rng() < 0.5 ? { scope: 'layer', slots: perLayer } : { scope: 'global', slots: perLayer * shape.layers };
  const heatFromPrefix = rng() < 0.4 ? randomInt(rng, 1, 5) : undefined;
  const start = (['empty', 'ids', heatFromPrefix ? 'heat' : 'ids'] as const)[randomInt(rng, 0, 2)];
  return buildScenario(trace, { budget, start, heatFromPrefix });
}

const isFill = (d: Decision): d is Extract<Decision, { kind: 'fill' }> => d.kind === 'fill';
const newcomerOf = (d: Decision) => (isFill(d) ? d.expert : d.newcomer);

/**
 * Checks each event's decisions independently of the replay's own assertions.
 * Plain checks into `broken` (not expect per event: hundreds of thousands of events).
 */
function checker(name: string, sc: Scenario, broken: string[]) {
  const check = (ok: boolean, what: string): void => {
    if (!ok && broken.length < 20) broken.push(`${name}: ${what}`);
  };
  const slotsOk = (r: Residency): boolean =>
    r.budget.scope === 'layer' ? r.used.every((u) => u <= r.budget.slots) : r.total <= r.budget.slots;
  const kind = policies.find((p) => p.name === name)!.kind;
  let ticks = 0;
  return (ev: TierEvent | { kind: 'init' }, before: Residency, ds: readonly Decision[], after: Residency) => {
    check(slotsOk(after), `budget held after ${ev.kind}`);
    // A swap is budget-neutral: only fills change occupancy.
    check(after.total - before.total === ds.filter(isFill).length, 'occupancy changes by the fills only');
    if (ev.kind === 'init') {
      check(name === 'oracle-static' || ds.length === 0, 'no setup decisions');
      return;
    }
    if (kind === 'static') check(ds.length === 0, 'never changes after init');
    if (kind === 'demand') {
      check(ev.kind === 'route' || ds.length === 0, 'decides on routes only');
      if (ev.kind === 'route')
        for (const d of ds) {
          const n = newcomerOf(d);
          check(
            n.layer === ev.layer && ev.experts.includes(n.expert) && !before.resident[n.layer][n.expert],
            'a newcomer is a miss of the current route',
          );
          check(
            isFill(d) || !(d.victim.layer === ev.layer && ev.experts.includes(d.victim.expert)),
            'victim not pinned',
          );
        }
    }
    const replans = ['replan', 'replan-unguarded'];
    if (name === 'lfru' || name === 'lfru-guarded' || replans.includes(name)) {
      check(ev.kind !== 'route' || ds.length === 0, 'no decisions on routes');
      if (ev.kind === 'decodeTick') {
        ticks++;
        const tickMoves = ticks % lfruDefaults.tickTokens === 0 ? lfruDefaults.swapsPerTick : 0;
        const drain = replans.includes(name) ? replanDefaults.drainPerToken : 0;
        // A guard's checkpoint may move every switched layer to its reserve set at once (a swap per slot at most).
        const guarded = name === 'replan' || name === 'lfru-guarded';
        const switches =
          guarded && guardDefaults.checkpoints.includes(ticks) ? sc.layers * Math.min(sc.experts, sc.budget.slots) : 0;
        check(ds.length <= tickMoves + drain + switches, `tick ${ticks} cap: ${ds.length} decisions`);
      }
    }
    if (ev.kind === 'prefillCounts') {
      const cap = replans.includes(name) ? replanDefaults.startPerCall : 0;
      check(ds.length <= cap, `prefill call cap: ${ds.length} decisions`);
    }
    if (name === 'admit') {
      // One route event per layer and step, so per-event counts are the per-layer-step counts.
      check(ds.filter(isFill).length <= admitDefaults.fillsPerLayerStep, 'fills per layer and step');
      check(ds.filter((d) => !isFill(d)).length <= admitDefaults.swapsPerLayerStep, 'swaps per layer and step');
      for (const d of ds) {
        if (!isFill(d) && sc.budget.scope === 'global')
          check(d.victim.layer !== newcomerOf(d).layer, 'global victims from other layers');
      }
    }
  };
}

function runAll(sc: Scenario, offload: 'hosted' | 'hostless', broken: string[]): Map<string, ReplayCounts> {
  const out = new Map<string, ReplayCounts>();
  for (const p of policies) out.set(p.name, replay(p, sc, offload, checker(p.name, sc, broken)));
  return out;
}

describe('policy invariants over random traces', () => {
  it(`hold for ${cases} seeded traces, every policy, both scopes and offload models`, () => {
    for (let seed = 1; seed <= cases; seed++) {
      const rng = mulberry32(seed);
      const sc = randomScenario(rng);
      for (const offload of ['hosted', 'hostless'] as const) {
        const broken: string[] = [];
        const all = runAll(sc, offload, broken);
        expect(broken, `seed ${seed} ${offload}`).toEqual([]);
        const bel = all.get('belady')!;
        for (const p of policies) {
          const c = all.get(p.name)!;
          const where = `seed ${seed} ${offload} ${sc.budget.scope} ${p.name}`;
          // From the same starting content no demand policy beats Belady's MIN.
          if (p.kind === 'demand') expect(c.hits, where).toBeLessThanOrEqual(bel.hits);
          // Nobody needs fewer loads than Belady has misses: a swap ahead is a deferred demand load.
          const prefillUploads = c.prefill?.extraUploads ?? 0;
          const loads = offload === 'hostless' ? c.uploads : c.misses + c.aheadUploads;
          expect(loads + c.setupUploads + prefillUploads, where).toBeGreaterThanOrEqual(bel.misses);
          expect(c.hits + c.misses).toBe(sc.decode.length * sc.topK * sc.layers);
        }
        // No static policy beats the static oracle.
        expect(all.get('static')!.hits).toBeLessThanOrEqual(all.get('oracle-static')!.hits);
      }
    }
  });

  it('no random fixed set beats the static oracle', () => {
    for (let seed = 100; seed < 100 + cases; seed++) {
      const rng = mulberry32(seed);
      const sc = randomScenario(rng);
      const oracle = replay(oracleStatic, sc, 'hosted').hits;
      for (let i = 0; i < 5; i++) {
        const sets = randomSets(rng, sc);
        const fixed = { ...sc, start: residencyOf(sc.experts, sc.budget, sets) };
        expect(replay(staticStart, fixed, 'hosted').hits, `seed ${seed}`).toBeLessThanOrEqual(oracle);
      }
    }
  });
});

function randomSets(rng: Rng, sc: Scenario): number[][] {
  const shuffled = () => Array.from({ length: sc.experts }, (_, e) => e).sort(() => rng() - 0.5);
  if (sc.budget.scope === 'layer') return Array.from({ length: sc.layers }, () => shuffled().slice(0, sc.budget.slots));
  const keys = Array.from({ length: sc.layers * sc.experts }, (_, i) => i)
    .sort(() => rng() - 0.5)
    .slice(0, sc.budget.slots);
  const sets: number[][] = Array.from({ length: sc.layers }, () => []);
  for (const k of keys) sets[Math.floor(k / sc.experts)].push(k % sc.experts);
  return sets;
}
