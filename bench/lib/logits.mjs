/**
 * Logit vectors of the two engines, brought to one footing.
 *
 * llama.cpp (through node-llama-cpp) gives softmax probabilities, not raw logits, so both
 * sides are compared as logits shifted so that their own top-1 is 0:
 *   s_i = l_i - max_j l_j = log(p_i) - log(p_max)
 * A shift-free difference d_i = a_i - b_i shows up as d_i - d_top, so a reported
 * maxAbsLogitDiff is at most twice the unshifted one (and equal to it when d_top = 0).
 */

/** Map<tokenId, probability> over the whole vocabulary -> Float64Array [nVocab] of shifted logits. */
export function logitsFromProbabilities(probabilities) {
  let nVocab = 0;
  let pMax = 0;
  for (const [id, p] of probabilities) {
    nVocab = Math.max(nVocab, id + 1);
    pMax = Math.max(pMax, p);
  }
  const shifted = new Float64Array(nVocab).fill(-Infinity);
  const logMax = Math.log(pMax);
  // A probability that underflowed float32 (p = 0) stays -Infinity: its logit is unknown.
  for (const [id, p] of probabilities) shifted[id] = p > 0 ? Math.log(p) - logMax : -Infinity;
  return shifted;
}

/** Float32Array logits [nVocab] -> Float64Array [nVocab], shifted so that the top-1 is 0. */
export function shiftToMax(logits) {
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  return Float64Array.from(logits, (v) => v - max);
}

/** The k largest entries, descending; ties go to the lower id (the engines' argmax rule). */
export function topK(values, k) {
  const best = [];
  for (let id = 0; id < values.length; id++) {
    const logit = values[id];
    if (logit == null || !(logit > -Infinity)) continue;
    let at = best.length;
    while (at > 0 && logit > best[at - 1].logit) at--;
    if (at < k) {
      best.splice(at, 0, { id, logit });
      if (best.length > k) best.pop();
    }
  }
  return best;
}

/**
 * Largest |a_i - b_i| over entries finite in both (null counts as unknown).
 * Returns { maxAbsDiff, atId, compared, skipped }; lengths must match.
 */
export function maxAbsDiff(a, b) {
  if (a.length !== b.length) throw new RangeError(`logit vectors differ in length: ${a.length} vs ${b.length}`);
  let maxAbs = 0;
  let atId = -1;
  let compared = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x == null || y == null || !Number.isFinite(x) || !Number.isFinite(y)) continue;
    compared++;
    const d = Math.abs(x - y);
    if (d > maxAbs) {
      maxAbs = d;
      atId = i;
    }
  }
  return { maxAbsDiff: maxAbs, atId, compared, skipped: a.length - compared };
}
