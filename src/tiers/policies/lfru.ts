/**
 * The baseline of docs/SPEC.md section 1: heat warmstart (the replay's `start: heat`)
 * and the LFRU tick. Every `tickTokens` decode tokens, per device, one swap: the
 * resident with the lowest score for the non-resident with the highest, only if
 *   hot > cold + cold/4 + (4 << 8)        (25 % plus a constant of hysteresis)
 * with score = (heat << 8) | recent, recent = 255 - min(age in ticks, 255).
 * Heat starts from the heat file, grows by one per routing (prefill rows too)
 * and halves every `heatHalveTicks` decode ticks. A free slot is filled first.
 */
import { applyDecisions, type Residency } from '../residency.js';
import type { Decision, ExpertKey, Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { rowsOf, withRow, type Rows } from './common.js';

export interface LfruParams {
  tickTokens: number;
  swapsPerTick: number;
  heatHalveTicks: number;
}

export const lfruDefaults: LfruParams = { tickTokens: 16, swapsPerTick: 1, heatHalveTicks: 1024 };

export interface LfruState {
  residency: Residency;
  heat: Rows;
  /** lastTick[layer][expert]: decode tick of the last routing, -Infinity never. */
  lastTick: Rows;
  ticks: number;
}

const recentMax = 255;

export function lfruScore(s: LfruState, layer: number, expert: number): number {
  const age = Math.min(s.ticks - s.lastTick[layer][expert], recentMax);
  // (heat << 8) | recent without 32-bit overflow for large heats.
  return Math.floor(s.heat[layer][expert]) * 256 + (recentMax - age);
}

/** The hysteresis bar a newcomer must clear to replace a resident of score `cold`. */
export function lfruBar(cold: number): number {
  return cold + Math.floor(cold / 4) + (4 << 8);
}

export function lfruInit(ctx: PolicyContext): LfruState {
  const heat = rowsOf(ctx.layers, ctx.experts, 0, ctx.heat);
  return { residency: ctx.start, heat, lastTick: rowsOf(ctx.layers, ctx.experts, -Infinity), ticks: 0 };
}

/** Heat and recency bookkeeping of route and prefill events; never decides. */
export function lfruObserve(s: LfruState, ev: TierEvent): LfruState {
  if (ev.kind === 'decodeTick') return s;
  const add =
    ev.kind === 'route'
      ? (row: Float64Array) => ev.experts.forEach((e) => row[e]++)
      : (row: Float64Array) => ev.counts.forEach((c, e) => (row[e] += c));
  const routed = ev.kind === 'route' ? ev.experts : ev.counts.flatMap((c, e) => (c > 0 ? [e] : []));
  return {
    ...s,
    heat: withRow(s.heat, ev.layer, add),
    lastTick: withRow(s.lastTick, ev.layer, (row) => routed.forEach((e) => (row[e] = s.ticks))),
  };
}

/** One decode tick: maybe halve heat, and on every `tickTokens`-th tick swap up to `swapsPerTick`. */
export function lfruTick(s: LfruState, p: LfruParams): PolicyStep<LfruState> {
  const ticks = s.ticks + 1;
  let state: LfruState = { ...s, ticks };
  if (ticks % p.heatHalveTicks === 0) {
    state = { ...state, heat: state.heat.map((row) => row.map((h) => Math.floor(h / 2))) };
  }
  if (ticks % p.tickTokens !== 0) return { state, decisions: [] };
  const decisions: Decision[] = [];
  for (let i = 0; i < p.swapsPerTick; i++) {
    const d = bestMove(state);
    if (!d) break;
    decisions.push(d);
    state = { ...state, residency: applyDecisions(state.residency, [d]) };
  }
  return { state, decisions };
}

/** The move with the largest margin over its bar, over every layer of the device. */
function bestMove(s: LfruState): Decision | undefined {
  const r = s.residency;
  const layers = r.resident.length;
  const global = r.budget.scope === 'global';
  let best: Decision | undefined;
  let bestGain = 0;
  const consider = (newcomer: ExpertKey | undefined, victim: ExpertKey | undefined, bar: number): void => {
    if (!newcomer) return;
    const gain = lfruScore(s, newcomer.layer, newcomer.expert) - bar;
    if (gain <= 0 || gain <= bestGain) return;
    bestGain = gain;
    best = victim ? { kind: 'swap', victim, newcomer } : { kind: 'fill', expert: newcomer };
  };
  const pick = (ls: number[], want: 0 | 1, better: (a: number, b: number) => boolean): ExpertKey | undefined => {
    let key: ExpertKey | undefined;
    let keyScore = 0;
    for (const l of ls) {
      const row = r.resident[l];
      for (let e = 0; e < row.length; e++) {
        if (row[e] !== want) continue;
        const sc = lfruScore(s, l, e);
        if (!key || better(sc, keyScore)) [key, keyScore] = [{ layer: l, expert: e }, sc];
      }
    }
    return key;
  };
  const groups = global ? [Array.from({ length: layers }, (_, l) => l)] : Array.from({ length: layers }, (_, l) => [l]);
  for (const ls of groups) {
    const newcomer = pick(ls, 0, (a, b) => a > b);
    const free = global ? r.budget.slots - r.total : r.budget.slots - r.used[ls[0]];
    if (free > 0) {
      consider(newcomer, undefined, 0);
      continue;
    }
    const victim = pick(ls, 1, (a, b) => a < b);
    if (victim) consider(newcomer, victim, lfruBar(lfruScore(s, victim.layer, victim.expert)));
  }
  return best;
}

export function makeLfru(p: LfruParams = lfruDefaults): Policy<LfruState> {
  return {
    name: 'lfru',
    kind: 'ahead',
    offline: false,
    init: (ctx) => ({ state: lfruInit(ctx), decisions: [] }),
    step(s, ev) {
      if (ev.kind === 'decodeTick') return lfruTick(s, p);
      return { state: lfruObserve(s, ev), decisions: [] };
    },
  };
}

export const lfru = makeLfru();
