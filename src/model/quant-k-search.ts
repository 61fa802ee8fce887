/**
 * The scale searches of ggml's reference k-quantisers (ggml-quants.c: make_qkx2_quants,
 * make_qx_quants, make_q3_quants), written from their description: each fits the integer
 * levels L of a small group of weights x and returns the scale (and the min) that go with them.
 *
 * Every operation is done in f32 (Math.fround after each one) in the order ggml's C code does
 * it, so the bytes match ggml's quantize_row_q*_K_ref: checked against ggml's C (gcc -O2, no FMA
 * contraction) on Gaussian, uniform, sparse and all-positive rows; tests/unit/model/quant-k.test.ts
 * pins the digests of ggml's bytes for one row, and the round-trip error bounds.
 */

const f = Math.fround;
/** ggml GROUP_MAX_EPS: a group whose largest |x| is below it is all zero. */
const GROUP_MAX_EPS = f(1e-15);
const TENTH = f(0.1);

/** ggml nearest_int: round half to even (the 1.5 * 2^23 trick, exact for |v| <= 2^22). */
export function nearestInt(v: number): number {
  if (Math.abs(v) <= 4194303) return f(v + 12582912) - 12582912;
  return Number.isFinite(v) ? Math.round(v) : 0;
}

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

export interface ScaleMin {
  scale: number;
  /** -min, the positive offset the block subtracts (value = scale * L - minNeg). */
  minNeg: number;
}

/**
 * make_qkx2_quants: x[xo..xo+n) ~ scale * L + min with min <= 0 and L in [0, nmax], minimising
 * sum w (scale L + min - x)^2 (or |.| with useMad). Starts from scale = (max - min) / nmax, then
 * tries nstep + 1 level spacings iscale = (nmax + rmin + rdelta is) / (max - min), solving the
 * weighted least squares for scale and min at each, and keeps the best.
 */
export function fitScaleMin(
  x: Float32Array,
  xo: number,
  n: number,
  nmax: number,
  weights: Float32Array,
  L: Uint8Array,
  lo: number,
  laux: Uint8Array,
  rmin: number,
  rdelta: number,
  nstep: number,
  useMad: boolean,
): ScaleMin {
  let min = x[xo];
  let max = x[xo];
  let sumW = weights[0];
  let sumX = f(sumW * x[xo]);
  for (let i = 1; i < n; i++) {
    const v = x[xo + i];
    if (v < min) min = v;
    if (v > max) max = v;
    sumW = f(sumW + weights[i]);
    sumX = f(sumX + f(weights[i] * v));
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0, lo, lo + n);
    return { scale: 0, minNeg: -min };
  }
  let iscale = f(nmax / f(max - min));
  let scale = f(1 / iscale);
  for (let i = 0; i < n; i++) L[lo + i] = clamp(nearestInt(f(iscale * f(x[xo + i] - min))), 0, nmax);
  let bestError = weightedError(x, xo, n, weights, scale, min, L, lo, useMad);
  if (nstep < 1) return { scale, minNeg: -min };
  for (let step = 0; step <= nstep; step++) {
    // min is the best fit so far: later spacings are measured from it, as ggml does
    iscale = f(f(f(rmin + f(rdelta * step)) + nmax) / f(max - min));
    let sumL = 0,
      sumL2 = 0,
      sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = clamp(nearestInt(f(iscale * f(x[xo + i] - min))), 0, nmax);
      laux[i] = l;
      const wl = f(weights[i] * l);
      sumL = f(sumL + wl);
      sumL2 = f(sumL2 + f(wl * l));
      sumXL = f(sumXL + f(wl * x[xo + i]));
    }
    const D = f(f(sumW * sumL2) - f(sumL * sumL));
    if (!(D > 0)) continue;
    let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / D);
    let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = f(sumXL / sumL2);
    }
    const curError = weightedError(x, xo, n, weights, thisScale, thisMin, laux, 0, useMad);
    if (curError < bestError) {
      for (let i = 0; i < n; i++) L[lo + i] = laux[i];
      bestError = curError;
      scale = thisScale;
      min = thisMin;
    }
  }
  return { scale, minNeg: -min };
}

/** sum w (scale L + min - x)^2, or sum w |scale L + min - x| with useMad, accumulated in f32. */
function weightedError(
  x: Float32Array,
  xo: number,
  n: number,
  weights: Float32Array,
  scale: number,
  min: number,
  levels: Uint8Array,
  at: number,
  useMad: boolean,
): number {
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const diff = f(f(f(scale * levels[at + i]) + min) - x[xo + i]);
    sum = f(sum + f(weights[i] * (useMad ? Math.abs(diff) : f(diff * diff))));
  }
  return sum;
}

/**
 * make_qx_quants with rmse_type 1 and no importance weights: symmetric levels
 * L - nmax in [-nmax, nmax - 1] for x[xo..xo+n), weights x^2. Starts from iscale = -nmax / max
 * (max: the signed element of largest |x|), tries the 18 spacings -(nmax + 0.1 is) / max
 * (is = -9..9, not 0) and keeps the one with the largest sumlx^2 / suml2. L holds l + nmax.
 */
export function fitSymmetricScale(
  x: Float32Array,
  xo: number,
  n: number,
  nmax: number,
  L: Uint8Array,
  lo: number,
): number {
  let max = 0,
    amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[xo + i]);
    if (ax > amax) {
      amax = ax;
      max = x[xo + i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, lo, lo + n);
    return 0;
  }
  const sums = (iscale: number): [number, number] => {
    let sumlx = 0,
      suml2 = 0;
    for (let i = 0; i < n; i++) {
      const v = x[xo + i];
      const l = clamp(nearestInt(f(iscale * v)), -nmax, nmax - 1);
      const w = f(v * v);
      sumlx = f(sumlx + f(f(w * v) * l));
      suml2 = f(suml2 + f(f(w * l) * l));
    }
    return [sumlx, suml2];
  };
  const setLevels = (iscale: number): void => {
    for (let i = 0; i < n; i++) L[lo + i] = nmax + clamp(nearestInt(f(iscale * x[xo + i])), -nmax, nmax - 1);
  };
  let iscale = f(-nmax / max);
  setLevels(iscale);
  let [sumlx, suml2] = sums(iscale);
  let scale = suml2 !== 0 ? f(sumlx / suml2) : 0;
  let best = f(scale * sumlx);
  for (let step = -9; step <= 9; step++) {
    if (step === 0) continue;
    iscale = f(-f(nmax + f(TENTH * step)) / max);
    [sumlx, suml2] = sums(iscale);
    if (suml2 > 0 && f(sumlx * sumlx) > f(best * suml2)) {
      setLevels(iscale);
      scale = f(sumlx / suml2);
      best = f(scale * sumlx);
    }
  }
  return scale;
}

/**
 * make_q3_quants with do_rmse: symmetric levels in [-nmax, nmax - 1] from iscale = -nmax / max,
 * then up to 5 passes that move single levels to the value that raises sumlx^2 / suml2
 * (weights x^2). L holds l + nmax; returns sumlx / suml2.
 */
export function fitQ3Scale(x: Float32Array, xo: number, n: number, nmax: number, L: Int8Array, lo: number): number {
  let max = 0,
    amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[xo + i]);
    if (ax > amax) {
      amax = ax;
      max = x[xo + i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, lo, lo + n);
    return 0;
  }
  const iscale = f(-nmax / max);
  let sumlx = 0,
    suml2 = 0;
  for (let i = 0; i < n; i++) {
    const v = x[xo + i];
    const l = clamp(nearestInt(f(iscale * v)), -nmax, nmax - 1);
    L[lo + i] = l;
    const w = f(v * v);
    sumlx = f(sumlx + f(f(w * v) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  for (let pass = 0; pass < 5; pass++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const v = x[xo + i];
      const w = f(v * v);
      const old = L[lo + i];
      let slx = f(sumlx - f(f(w * v) * old));
      if (!(slx > 0)) continue;
      let sl2 = f(suml2 - f(f(w * old) * old));
      const next = clamp(nearestInt(f(f(v * sl2) / slx)), -nmax, nmax - 1);
      if (next === old) continue;
      slx = f(slx + f(f(w * v) * next));
      sl2 = f(sl2 + f(f(w * next) * next));
      if (sl2 > 0 && f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2)) {
        L[lo + i] = next;
        sumlx = slx;
        suml2 = sl2;
        changed++;
      }
    }
    if (changed === 0) break;
  }
  for (let i = 0; i < n; i++) L[lo + i] += nmax;
  return suml2 > 0 ? f(sumlx / suml2) : 0;
}
