/**
 * The replan guard: shadow accounting that lets the first decode tokens overrule a prompt's
 * prefill, layer by layer. Pure, like every policy; src/tiers/policies/replan.ts
 * drives it, in the engine and in `moetier replay` alike.
 *
 * When a prefill layer's counts arrive, the layer's residents before the replan (`before`) and
 * the set the replan makes of them (`after`) are both frozen. Over the decode tokens that follow,
 * every routing of the layer is counted against both sets: only the experts in exactly one of the
 * two matter (beforeOnly, afterOnly). The layer runs with one set (`held`) and keeps the other in
 * reserve:
 *
 *   mode 'replan'  held = after (the replan was applied)   switch = revert to before
 *   mode 'shadow'  held = before (the replan was not)      switch = apply it late
 *
 * At each checkpoint (decode tokens since the prefill) a watched layer switches when the reserve
 * leads the held set by lead >= max(leadMin, leadSigmas * sqrt(differing routings)): under the
 * null hypothesis that both sets are as good, the lead is a +-1 walk over the differing routings,
 * so the square-root term keeps a noisy layer from flapping while a misleading prefill (whose
 * newcomers the decode never routes) crosses it within the first checkpoints. After the last
 * checkpoint a watched layer is kept: the guard runs once per prefill, then LFRU alone goes on.
 *
 * Checkpoints 1, 2, 4, 8, 16, 32 with leadMin 2 and one sigma (the defaults): a wrong replan costs
 * hits every token it stands and its revert lands at the upload queue's pace (8 transfers a token
 * by default), so the first tokens must be able to decide; doubling the gaps keeps the number of
 * looks small (each look is a chance of a false switch) while the later ones catch a layer whose
 * lead builds slowly. Chosen on the replay scenarios (tests/unit/tiers/replan-guard.test.ts,
 * docs/REPLAY.md) and the small preset's off-topic prompts, whose figures are in docs/REPLAY.md.
 */
import type { Decision } from '../types.js';
import { isResident, type Residency } from '../residency.js';

export interface GuardParams {
  /** Decode tokens after the prefill at which a watched layer may switch, ascending. */
  checkpoints: readonly number[];
  leadMin: number;
  leadSigmas: number;
}

export const guardDefaults: GuardParams = { checkpoints: [1, 2, 4, 8, 16, 32], leadMin: 2, leadSigmas: 1 };

/**
 * The guarded replan's evidence floor at plan time: a newcomer must lead its victim by two prompt
 * rows, not one. On a short prompt most counts are 0 or 1, and a swap on a single routing is a
 * guess the guard then pays two uploads to undo (measured in docs/REPLAY.md: the small preset's
 * off-topic prompts).
 */
export const guardPlanLeadMin = 2;

export type GuardMode = 'replan' | 'shadow';

export interface LayerGuard {
  before: Uint8Array;
  after: Uint8Array;
  /** The prompt's rows per expert at this layer (orders the victims of a late apply). */
  counts: readonly number[];
  beforeOnly: number;
  afterOnly: number;
  /** Decode routings per expert while watched: a switch brings back the most routed first. */
  seen: Uint16Array;
  status: 'watch' | 'kept' | 'switched';
}

export interface GuardState {
  mode: GuardMode;
  layers: readonly (LayerGuard | undefined)[];
  /** Decode tokens since the last prefill (the checkpoints count these). */
  tokens: number;
}

/** Per request (the last prefill's guards): layers kept, switched (reverted or applied late), still watched. */
export interface GuardSummary {
  mode: GuardMode;
  kept: number;
  switched: number;
  watching: number;
}

export function guardInit(mode: GuardMode, layers: number): GuardState {
  return { mode, layers: new Array<LayerGuard | undefined>(layers).fill(undefined), tokens: 0 };
}

export function checkGuardParams(p: GuardParams): void {
  const c = p.checkpoints;
  if (c.length === 0 || c.some((x, i) => !Number.isInteger(x) || x < 1 || (i > 0 && x <= c[i - 1]))) {
    throw new RangeError(`guard checkpoints: ascending integers >= 1, got ${c.join(',')}`);
  }
  if (!(p.leadMin >= 1) || !(p.leadSigmas >= 0)) throw new RangeError('guard leadMin >= 1 and leadSigmas >= 0');
}

/**
 * A prefill layer's replan, planned against `residency`: its before and after sets are frozen.
 * A second call for the same layer before any decode token (a prompt evaluated in several groups)
 * keeps the first `before` and takes the newest `after`; a call after decode tokens starts a new
 * watch (a new request's prefill) and forgets every older one.
 */
export function guardWatch(
  g: GuardState,
  residency: Residency,
  layer: number,
  swaps: readonly Extract<Decision, { kind: 'swap' }>[],
  counts: readonly number[],
): GuardState {
  const base = g.tokens > 0 ? guardInit(g.mode, g.layers.length) : g;
  const row = residency.resident[layer];
  const earlier = base.layers[layer];
  const before = earlier && earlier.status === 'watch' ? earlier.before : Uint8Array.from(row);
  const after = Uint8Array.from(row);
  for (const s of swaps) {
    after[s.victim.expert] = 0;
    after[s.newcomer.expert] = 1;
  }
  if (sameSet(before, after)) return withLayer(base, layer, undefined);
  const summed = earlier && earlier.status === 'watch' ? earlier.counts.map((c, e) => c + counts[e]) : [...counts];
  return withLayer(base, layer, {
    before,
    after,
    counts: summed,
    beforeOnly: 0,
    afterOnly: 0,
    seen: new Uint16Array(row.length),
    status: 'watch',
  });
}

/** One decode routing of `layer`, counted against both frozen sets. */
export function guardRoute(g: GuardState, layer: number, experts: readonly number[]): GuardState {
  const lg = g.layers[layer];
  if (!lg || lg.status !== 'watch') return g;
  let { beforeOnly, afterOnly } = lg;
  const seen = lg.seen.slice();
  for (const e of experts) {
    if (seen[e] < 0xffff) seen[e]++;
    if (lg.before[e] && !lg.after[e]) beforeOnly++;
    else if (lg.after[e] && !lg.before[e]) afterOnly++;
  }
  return withLayer(g, layer, { ...lg, beforeOnly, afterOnly, seen });
}

/** Whether the reserve set leads the held one by the margin (see the top of the file). */
export function reserveLeads(g: GuardState, lg: LayerGuard, p: GuardParams): boolean {
  const [held, reserve] = g.mode === 'replan' ? [lg.afterOnly, lg.beforeOnly] : [lg.beforeOnly, lg.afterOnly];
  return reserve - held >= Math.max(p.leadMin, p.leadSigmas * Math.sqrt(held + reserve));
}

/**
 * A decode tick: at a checkpoint, the layers whose reserve leads switch (returned, to be swapped
 * by the caller); after the last checkpoint the rest are kept.
 */
export function guardTick(g: GuardState, p: GuardParams): { state: GuardState; switched: number[] } {
  const tokens = g.tokens + 1;
  const watching = g.layers.some((lg) => lg?.status === 'watch');
  if (!watching || !p.checkpoints.includes(tokens)) return { state: { ...g, tokens }, switched: [] };
  const last = tokens >= p.checkpoints[p.checkpoints.length - 1];
  const switched: number[] = [];
  const layers = g.layers.map((lg, l) => {
    if (!lg || lg.status !== 'watch') return lg;
    if (reserveLeads(g, lg, p)) {
      switched.push(l);
      return { ...lg, status: 'switched' as const };
    }
    return last ? { ...lg, status: 'kept' as const } : lg;
  });
  return { state: { ...g, tokens, layers }, switched };
}

/**
 * The budget-neutral swaps that move `layer`'s residents to the reserve set: newcomers are its
 * members not resident, the most routed in the watched decode tokens first (then by the prompt's
 * rows, then id); victims the residents outside it, the least routed first. The uploads land in
 * this order, so the hits come back soonest.
 */
export function switchSwaps(g: GuardState, residency: Residency, layer: number): Extract<Decision, { kind: 'swap' }>[] {
  const lg = g.layers[layer];
  if (!lg) return [];
  const target = g.mode === 'replan' ? lg.before : lg.after;
  const ids = Array.from({ length: target.length }, (_, e) => e);
  const victims = ids
    .filter((e) => isResident(residency, layer, e) && !target[e])
    .sort((a, b) => lg.seen[a] - lg.seen[b] || lg.counts[a] - lg.counts[b] || a - b);
  const newcomers = ids
    .filter((e) => target[e] && !isResident(residency, layer, e))
    .sort((a, b) => lg.seen[b] - lg.seen[a] || lg.counts[b] - lg.counts[a] || a - b);
  const pairs = Math.min(victims.length, newcomers.length);
  return Array.from({ length: pairs }, (_, i) => ({
    kind: 'swap' as const,
    victim: { layer, expert: victims[i] },
    newcomer: { layer, expert: newcomers[i] },
  }));
}

/** Every switched layer's swaps, the newcomers most routed while watched first across layers (stable). */
export function switchAll(
  g: GuardState,
  residency: Residency,
  layers: readonly number[],
): Extract<Decision, { kind: 'swap' }>[] {
  const all = layers.flatMap((l) => switchSwaps(g, residency, l));
  const seenOf = (d: Extract<Decision, { kind: 'swap' }>): number =>
    g.layers[d.newcomer.layer]!.seen[d.newcomer.expert];
  return all
    .map((d, i) => ({ d, i }))
    .sort((a, b) => seenOf(b.d) - seenOf(a.d) || a.i - b.i)
    .map((x) => x.d);
}

export function guardSummary(g: GuardState): GuardSummary {
  const s: GuardSummary = { mode: g.mode, kept: 0, switched: 0, watching: 0 };
  for (const lg of g.layers) {
    if (lg?.status === 'kept') s.kept++;
    else if (lg?.status === 'switched') s.switched++;
    else if (lg?.status === 'watch') s.watching++;
  }
  return s;
}

function withLayer(g: GuardState, layer: number, lg: LayerGuard | undefined): GuardState {
  const layers = [...g.layers];
  layers[layer] = lg;
  return { ...g, layers };
}

function sameSet(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
