/**
 * Admit before run (docs/SPEC.md section 3), a demand policy: which routed misses to
 * keep. Score: decayed LFU, each routing adds 1 to score * decay^(steps since its
 * last update), a step being one decode token. Per layer and step:
 *   1. fill free slots, best-scored misses first, at most `fillsPerLayerStep`;
 *   2. then at most `swapsPerLayerStep` hot swaps, only for a miss scoring at
 *      least `minScore` and more than its victim.
 * The victim is the lowest-scored resident that may go: never one routed now;
 * under a global budget only from other layers (the current layer is pinned).
 * Incumbent hysteresis: the last chosen victim stays the victim unless another
 * candidate scores below it by more than `victimMargin`.
 */
import { applyDecisions, freeSlots, isResident, type Residency } from '../residency.js';
import type { Decision, ExpertKey, Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { lowestResident, missesOf, rowsOf, withRow, type Rows } from './common.js';

export interface AdmitParams {
  decayPerStep: number;
  minScore: number;
  fillsPerLayerStep: number;
  swapsPerLayerStep: number;
  victimMargin: number;
}

export const admitDefaults: AdmitParams = {
  decayPerStep: 0.97,
  minScore: 8,
  fillsPerLayerStep: 16,
  swapsPerLayerStep: 1,
  victimMargin: 1,
};

export interface AdmitState {
  residency: Residency;
  score: Rows;
  /** lastStep[layer][expert]: the step its score was last brought up to date. */
  lastStep: Rows;
  step: number;
  fills: readonly number[];
  swaps: readonly number[];
  /** Current victim per budget group: per layer, or one for a global budget. */
  incumbent: readonly (ExpertKey | null)[];
}

export function admitScore(s: AdmitState, p: AdmitParams, layer: number, expert: number): number {
  return s.score[layer][expert] * p.decayPerStep ** (s.step - s.lastStep[layer][expert]);
}

function addUses(s: AdmitState, p: AdmitParams, layer: number, uses: (e: number) => number): AdmitState {
  const now = (e: number): number => admitScore(s, p, layer, e);
  const n = s.score[layer].length;
  const score = withRow(s.score, layer, (row) => {
    for (let e = 0; e < n; e++) if (uses(e) > 0) row[e] = now(e) + uses(e);
  });
  const lastStep = withRow(s.lastStep, layer, (row) => {
    for (let e = 0; e < n; e++) if (uses(e) > 0) row[e] = s.step;
  });
  return { ...s, score, lastStep };
}

function chooseVictim(s: AdmitState, p: AdmitParams, layer: number, pinned: readonly number[]): ExpertKey | undefined {
  const r = s.residency;
  const global = r.budget.scope === 'global';
  const sc = (l: number, e: number): number => admitScore(s, p, l, e);
  const lowest = lowestResident(r, layer, pinned, sc, global);
  const inc = s.incumbent[global ? 0 : layer];
  const incOk =
    inc && isResident(r, inc.layer, inc.expert) && !(inc.layer === layer && (global || pinned.includes(inc.expert)));
  if (!incOk || !lowest) return lowest;
  return sc(lowest.layer, lowest.expert) < sc(inc.layer, inc.expert) - p.victimMargin ? lowest : inc;
}

function onRoute(s0: AdmitState, p: AdmitParams, layer: number, experts: readonly number[]): PolicyStep<AdmitState> {
  let s = addUses(s0, p, layer, (e) => (experts.includes(e) ? 1 : 0));
  const group = s.residency.budget.scope === 'global' ? 0 : layer;
  const misses = missesOf(s.residency, layer, experts).sort(
    (a, b) => admitScore(s, p, layer, b) - admitScore(s, p, layer, a),
  );
  const fills = [...s.fills];
  const swaps = [...s.swaps];
  const incumbent = [...s.incumbent];
  const decisions: Decision[] = [];
  for (const m of misses) {
    const newcomer = { layer, expert: m };
    let d: Decision | undefined;
    if (freeSlots(s.residency, layer) > 0) {
      if (fills[layer] < p.fillsPerLayerStep) d = { kind: 'fill', expert: newcomer };
    } else if (swaps[layer] < p.swapsPerLayerStep && admitScore(s, p, layer, m) >= p.minScore) {
      const victim = chooseVictim({ ...s, incumbent }, p, layer, experts);
      incumbent[group] = victim ?? null;
      if (victim && admitScore(s, p, victim.layer, victim.expert) < admitScore(s, p, layer, m)) {
        d = { kind: 'swap', victim, newcomer };
        incumbent[group] = null;
      }
    }
    if (!d) continue;
    if (d.kind === 'fill') fills[layer]++;
    else swaps[layer]++;
    decisions.push(d);
    s = { ...s, residency: applyDecisions(s.residency, [d]) };
  }
  return { state: { ...s, fills, swaps, incumbent }, decisions };
}

export function makeAdmit(p: AdmitParams = admitDefaults): Policy<AdmitState> {
  return {
    name: 'admit',
    kind: 'demand',
    offline: false,
    init(ctx: PolicyContext) {
      const state: AdmitState = {
        residency: ctx.start,
        score: rowsOf(ctx.layers, ctx.experts),
        lastStep: rowsOf(ctx.layers, ctx.experts),
        step: 0,
        fills: new Array<number>(ctx.layers).fill(0),
        swaps: new Array<number>(ctx.layers).fill(0),
        incumbent: new Array<ExpertKey | null>(ctx.layers).fill(null),
      };
      return { state, decisions: [] };
    },
    step(s: AdmitState, ev: TierEvent) {
      if (ev.kind === 'route') return onRoute(s, p, ev.layer, ev.experts);
      if (ev.kind === 'prefillCounts') return { state: addUses(s, p, ev.layer, (e) => ev.counts[e]), decisions: [] };
      const zeros = new Array<number>(s.fills.length).fill(0);
      return { state: { ...s, step: s.step + 1, fills: zeros, swaps: zeros }, decisions: [] };
    },
  };
}

export const admit = makeAdmit();
