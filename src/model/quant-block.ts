/** What ggml's block quantisers share (quantize_row_q4_0_ref, q5_0, iq4_nl): the block's scale anchor. */

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
