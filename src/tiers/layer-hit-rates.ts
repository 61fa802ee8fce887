/**
 * Per-layer hit rates of a routing sequence under a policy, by the replay the policy lab runs
 * (the same policy code as the engine's): host-less, cold start (every slot free), the first
 * `scoreFrom` steps replayed as a warm-up and not scored. Used by `moetier routes stats`.
 *
 *   steps [T][layer][k] -> hitRate[layer] at `slots` slots per layer
 */
import { InvalidOptionError } from '../core/errors.js';
import type { RouteStep, Trace } from '../routes/types.js';
import type { Policy } from './types.js';
import { replay } from './replay.js';
import { isResident } from './residency.js';
import { buildScenario } from './scenario.js';

export interface LayerHitRateOptions {
  experts: number;
  topK: number;
  slots: number;
  /** Steps replayed before the scored ones. */
  scoreFrom: number;
}

/** hits / routed pairs per layer, scored from step `scoreFrom` on; NaN where nothing was scored. */
export function layerHitRates(policy: Policy, steps: readonly RouteStep[], o: LayerHitRateOptions): number[] {
  const layers = steps[0]?.layers.length ?? 0;
  if (steps.length <= o.scoreFrom) {
    throw new InvalidOptionError('--score-from', `fewer steps than the sequence has (${steps.length})`, o.scoreFrom);
  }
  const trace: Trace = {
    source: 'layer-hit-rates',
    header: { model: 'routes', layers, experts: o.experts, topK: o.topK, rankOrder: false },
    prefill: [],
    decode: [...steps],
  };
  const sc = buildScenario(trace, {
    budget: { scope: 'layer', slots: o.slots },
    start: 'empty',
    scoreFrom: o.scoreFrom,
  });
  const hits = new Array<number>(layers).fill(0);
  const routed = new Array<number>(layers).fill(0);
  let token = 0;
  replay(policy, sc, 'hostless', (event, before) => {
    if (event.kind === 'decodeTick') token++;
    if (event.kind !== 'route' || token < o.scoreFrom) return;
    routed[event.layer] += event.experts.length;
    for (const e of event.experts) if (isResident(before, event.layer, e)) hits[event.layer]++;
  });
  return hits.map((h, l) => (routed[l] === 0 ? NaN : h / routed[l]));
}
