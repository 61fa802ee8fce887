/**
 * Seeded random routing traces with some locality, for property tests: each
 * layer has skewed expert weights, and a pick repeats one of the previous token's
 * experts with probability `reuse`.
 */
import type { Trace } from '../../../src/routes/types.js';
import { randomInt, type Rng } from '../../../src/core/prng.js';

export interface RandomTraceShape {
  layers: number;
  experts: number;
  topK: number;
  tokens: number;
  prefillRows: number;
  reuse: number;
}

function pickDistinct(
  rng: Rng,
  weights: readonly number[],
  prev: readonly number[],
  k: number,
  reuse: number,
): number[] {
  const out: number[] = [];
  while (out.length < k) {
    const fromPrev = prev.filter((e) => !out.includes(e));
    if (fromPrev.length > 0 && rng() < reuse) {
      out.push(fromPrev[randomInt(rng, 0, fromPrev.length - 1)]);
      continue;
    }
    const total = weights.reduce((s, w, e) => s + (out.includes(e) ? 0 : w), 0);
    let x = rng() * total;
    for (let e = 0; e < weights.length; e++) {
      if (out.includes(e)) continue;
      x -= weights[e];
      if (x < 0 || e === weights.length - 1) {
        if (!out.includes(e)) out.push(e);
        break;
      }
    }
  }
  return out;
}

export function randomShape(rng: Rng): RandomTraceShape {
  const experts = randomInt(rng, 4, 12);
  return {
    layers: randomInt(rng, 1, 3),
    experts,
    topK: randomInt(rng, 1, Math.min(3, experts - 1)),
    tokens: randomInt(rng, 10, 50),
    prefillRows: rng() < 0.5 ? 0 : randomInt(rng, 1, 20),
    reuse: rng() * 0.8,
  };
}

export function randomTrace(rng: Rng, s: RandomTraceShape): Trace {
  const weights = Array.from({ length: s.layers }, () => Array.from({ length: s.experts }, () => rng() ** 3 + 0.01));
  const steps = (n: number) => {
    const out = [];
    let prev: number[][] = weights.map(() => []);
    for (let t = 0; t < n; t++) {
      const layers = weights.map((w, l) => pickDistinct(rng, w, prev[l], s.topK, s.reuse));
      out.push({ step: t, layers });
      prev = layers;
    }
    return out;
  };
  return {
    source: 'random',
    header: { model: 'random', layers: s.layers, experts: s.experts, topK: s.topK, rankOrder: true },
    prefill: steps(s.prefillRows),
    decode: steps(s.tokens),
  };
}
