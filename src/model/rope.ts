/**
 * Rotary position embedding's frequencies as llama.cpp computes them (ggml's rope: ops.cpp
 * ggml_compute_forward_rope_flt, rope_yarn; ggml.c ggml_rope_yarn_corr_dims), for the whole head or
 * its first ropeDims dims (partial rotary), unscaled, linearly scaled or YaRN-scaled. The one owner
 * of the formula: the reference forward pass computes its rotation from it, and the native model
 * is given its table (src/model/load.ts).
 *
 * For pair i of the rotated dims, i in [0, ropeDims / 2), at position p:
 *   theta_extrap = p * base^(-2i / ropeDims)
 *   theta_interp = freqScale * theta_extrap                         (freqScale = 1 / factor)
 *   yarn:  r = ramp(i) = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)
 *          theta = theta_interp * (1 - r) + theta_extrap * r        = p * invFreq[i] (folded below)
 *          cos, sin scaled by magnitude = attnFactor * (1 + 0.1 ln factor) where factor > 1
 *   linear: theta = theta_interp, magnitude 1 (times attnFactor)
 *   lo, hi: corr(b) = ropeDims * ln(origContext / (b * 2 pi)) / (2 ln base),
 *           lo = max(0, floor(corr(betaFast))), hi = min(ropeDims - 1, ceil(corr(betaSlow)))
 */
import type { HParams, RopeScaling } from './types.js';

export type { RopeScaling } from './types.js';

export interface RopeTable {
  /** Rotated dims of each head (even, <= headDim); the rest pass through. */
  dims: number;
  /** [dims / 2] effective inverse frequencies: theta_i = position * invFreq[i]. */
  invFreq: Float64Array;
  /** cos and sin are multiplied by this (1 unless YaRN or an attention factor scales them). */
  magnitude: number;
}

export function ropeTable(hp: Pick<HParams, 'headDim' | 'ropeBase' | 'ropeDims' | 'ropeScaling'>): RopeTable {
  const dims = hp.ropeDims ?? hp.headDim;
  const s = hp.ropeScaling;
  const freqScale = s ? 1 / s.factor : 1;
  const invFreq = new Float64Array(dims / 2);
  const [lo, hi] = s?.type === 'yarn' ? corrDims(dims, s, hp.ropeBase) : [0, 0];
  for (let i = 0; i < dims / 2; i++) {
    const base = Math.pow(hp.ropeBase, (-2 * i) / dims);
    const r = s?.type === 'yarn' ? 1 - Math.min(1, Math.max(0, (i - lo) / Math.max(0.001, hi - lo))) : 0;
    invFreq[i] = base * (freqScale * (1 - r) + r);
  }
  // deepseek2 with a YaRN log multiplier: llama.cpp cancels YaRN's magnitude on cos / sin and puts
  // mscale^2 into the scores' scale (HParams.attnScale) instead.
  const magnitude = !s
    ? 1
    : s.type === 'yarn' && s.factor > 1 && !s.yarnLogMul
      ? s.attnFactor * (1 + 0.1 * Math.log(s.factor))
      : s.attnFactor;
  return { dims, invFreq, magnitude };
}

function corrDims(dims: number, s: RopeScaling, base: number): [number, number] {
  const corr = (beta: number): number => (dims * Math.log(s.origContext / (beta * 2 * Math.PI))) / (2 * Math.log(base));
  return [Math.max(0, Math.floor(corr(s.betaFast))), Math.min(dims - 1, Math.ceil(corr(s.betaSlow)))];
}
