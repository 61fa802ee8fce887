/**
 * Token sampling from logits: greedy by default; temperature, top-k and top-p with a seeded PRNG
 * so that a seed reproduces a run.
 */
import { InvalidOptionError } from '../core/errors.js';
import { mulberry32 } from '../core/prng.js';

/** Seeds are 32-bit (the PRNG's state): a larger one would silently equal its value mod 2^32. */
export const SEED_MAX = 2 ** 32 - 1;

export interface SamplingOptions {
  /** 0 (default) = greedy argmax. */
  temperature?: number;
  /** Keep the k most likely tokens (0 = all). */
  topK?: number;
  /** Keep the smallest set whose probability reaches p (1 = all). */
  topP?: number;
  /** Seed of the sampling PRNG. */
  seed?: number;
}

export interface Sampler {
  sample(logits: Float32Array): number;
}

export function validateSampling(options: SamplingOptions): Required<SamplingOptions> {
  const { temperature = 0, topK = 0, topP = 1, seed = 0 } = options;
  if (!Number.isFinite(temperature) || temperature < 0)
    throw new InvalidOptionError('temperature', 'a finite number >= 0', temperature);
  if (!Number.isInteger(topK) || topK < 0) throw new InvalidOptionError('topK', 'an integer >= 0', topK);
  if (!Number.isFinite(topP) || topP <= 0 || topP > 1) throw new InvalidOptionError('topP', 'a number in (0, 1]', topP);
  if (!Number.isInteger(seed) || seed < 0 || seed > SEED_MAX)
    throw new InvalidOptionError('seed', `an integer in [0, ${SEED_MAX}]`, seed);
  return { temperature, topK, topP, seed };
}

/** Index of the largest logit; ties go to the lower id (as in llama.cpp's greedy sampler). */
export function argmax(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

export function createSampler(options: SamplingOptions = {}): Sampler {
  const { temperature, topK, topP, seed } = validateSampling(options);
  if (temperature === 0) return { sample: argmax };
  const random = mulberry32(seed);
  return {
    sample(logits: Float32Array): number {
      const ids = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b);
      const kept = topK > 0 ? ids.slice(0, topK) : ids;
      const max = logits[kept[0]];
      const weights = kept.map((id) => Math.exp((logits[id] - max) / temperature));
      const total = weights.reduce((a, b) => a + b, 0);
      // Nucleus: cut after the cumulative probability reaches topP.
      let cut = kept.length;
      let cumulative = 0;
      for (let i = 0; i < kept.length; i++) {
        cumulative += weights[i] / total;
        if (cumulative >= topP) {
          cut = i + 1;
          break;
        }
      }
      const nucleusTotal = weights.slice(0, cut).reduce((a, b) => a + b, 0);
      let r = random() * nucleusTotal;
      for (let i = 0; i < cut; i++) {
        r -= weights[i];
        if (r <= 0) return kept[i];
      }
      return kept[cut - 1];
    },
  };
}
