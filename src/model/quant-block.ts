/**
 * What ggml's block quantisers share (quantize_row_q4_0_ref, q5_0, iq4_nl, mxfp4): the block's scale
 * anchor, and the nearest value of a 16-entry code table.
 */

/** The signed element of largest |x| among src[s .. s + n) (the first of equals); 0 for an all-zero block. */
export function signedAbsMax(src: Float32Array, s: number, n: number): number {
  let amax = 0,
    max = 0;
  for (let j = 0; j < n; j++) {
    const v = src[s + j];
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

/** The index of the table value nearest t (the first of equals), each |t - v| rounded to f32 as ggml's C does. */
export function nearestTableIndex(table: ArrayLike<number>, t: number): number {
  let best = 0;
  let bestErr = Math.abs(Math.fround(t - table[0]));
  for (let k = 1; k < table.length; k++) {
    const err = Math.abs(Math.fround(t - table[k]));
    if (err < bestErr) {
      bestErr = err;
      best = k;
    }
  }
  return best;
}
