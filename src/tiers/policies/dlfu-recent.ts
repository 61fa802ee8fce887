/**
 * Decayed LFU with a recency bonus and first-touch bypass, a demand policy for tiers that read
 * every miss (host-less). Found by replay on the OLMoE trace and the realistic small traces
 * (docs/REPLAY.md, "Eviction on real routing"); it gains little over dlfu:
 * every online candidate tried there stays within about 1 % of dlfu's reads, far from Belady.
 *
 *   value(e, now)  = dlfu's decayed count (half-life H tokens)
 *   score(e, now)  = value + recentBonus   if e was routed this token or the last
 *                  = value                 otherwise
 *   evict          the unpinned resident of lowest score (lowestResident: never the route's own)
 *   bypass         a miss whose count before this routing is under firstTouchMax (first touch,
 *                  or not routed for about 4 half-lives) is read streamed, not admitted, when
 *                  the victim's value exceeds victimKeepMin: its read is paid either way, and
 *                  keeping the victim saves the read of the victim's reuse.
 *
 * Why the bonus: on the OLMoE trace an expert routed in the previous token is reused in the next
 * with about twice the probability of one routed two tokens ago at the same frequency; dlfu's
 * half-life of 16 tokens discounts that step by only 4 %. Scores are compared as log2 values:
 * log2(count) + (stamp - now) / H keeps its order without underflow on long requests.
 */
import { applyDecisions, freeSlots, isResident, type Residency } from '../residency.js';
import type { Decision, Policy, PolicyContext, PolicyStep, TierEvent } from '../types.js';
import { checkDlfuParams, dlfuDefaults, dlfuScore, makeDlfu, type DlfuParams, type DlfuState } from './dlfu.js';
import { lowestResident } from './common.js';

export interface DlfuRecentParams extends DlfuParams {
  /** Added to the decayed count of an expert routed this token or the last. */
  recentBonus: number;
  /** A miss with a decayed count under this before its routing is a first touch. */
  firstTouchMax: number;
  /** A first touch is not admitted when the victim's decayed count is over this. */
  victimKeepMin: number;
}

export const dlfuRecentDefaults: DlfuRecentParams = {
  halfLifeTokens: dlfuDefaults.halfLifeTokens,
  recentBonus: 0.5,
  firstTouchMax: 0.05,
  victimKeepMin: 2,
};

/** log2 of the decayed count as of `now` (-Infinity never routed). */
function log2Value(s: DlfuState, p: DlfuParams, layer: number, expert: number): number {
  return dlfuScore(s, p, layer, expert) - s.tokens / p.halfLifeTokens;
}

export function dlfuRecentScore(s: DlfuState, p: DlfuRecentParams, layer: number, expert: number): number {
  const lv = log2Value(s, p, layer, expert);
  const recent = s.count[layer][expert] > 0 && s.stamp[layer][expert] >= s.tokens - 1;
  return recent ? Math.log2(2 ** lv + p.recentBonus) : lv;
}

function onRoute(
  before: DlfuState,
  s: DlfuState,
  p: DlfuRecentParams,
  layer: number,
  experts: readonly number[],
): PolicyStep<DlfuState> {
  const score = (l: number, x: number): number => dlfuRecentScore(s, p, l, x);
  let residency: Residency = s.residency;
  const decisions: Decision[] = [];
  for (const e of experts) {
    if (isResident(residency, layer, e)) continue;
    const newcomer = { layer, expert: e };
    let d: Decision | undefined;
    if (freeSlots(residency, layer) > 0) d = { kind: 'fill', expert: newcomer };
    else {
      const victim = lowestResident(residency, layer, experts, score);
      const firstTouch = 2 ** log2Value(before, p, layer, e) < p.firstTouchMax;
      const keep = victim !== undefined && 2 ** log2Value(s, p, victim.layer, victim.expert) > p.victimKeepMin;
      if (victim && !(firstTouch && keep)) d = { kind: 'swap', victim, newcomer };
    }
    if (!d) continue;
    decisions.push(d);
    residency = applyDecisions(residency, [d]);
  }
  return { state: { ...s, residency }, decisions };
}

export function makeDlfuRecent(p: DlfuRecentParams = dlfuRecentDefaults): Policy<DlfuState> {
  checkDlfuParams(p);
  for (const k of ['recentBonus', 'firstTouchMax', 'victimKeepMin'] as const) {
    if (!Number.isFinite(p[k]) || p[k] < 0) throw new RangeError(`${k}: a finite number >= 0, got ${String(p[k])}`);
  }
  // The counts are dlfu's: its step keeps them (and admits every miss, which is replaced here).
  const counts = makeDlfu(p);
  return {
    name: 'dlfu-recent',
    kind: 'demand',
    offline: false,
    init: (ctx: PolicyContext) => counts.init(ctx),
    step(s: DlfuState, ev: TierEvent): PolicyStep<DlfuState> {
      if (ev.kind !== 'route') return counts.step(s, ev);
      const counted = counts.step({ ...s, residency: s.residency }, ev).state;
      return onRoute(s, { ...counted, residency: s.residency }, p, ev.layer, ev.experts);
    },
  };
}

export const dlfuRecent = makeDlfuRecent();
