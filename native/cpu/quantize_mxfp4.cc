// gen-model's MXFP4 writer: moetier's own encoder, byte for byte what src/model/quant-mxfp4.ts
// writes (every float step one f32 rounding in the same order; -ffp-contract=off).
//
// An MXFP4 block's scale is a power of two, d = 2^(e - 128), and its codes are the table
// mt_mxfp4_values (|v| <= 12). Two exponents are worth trying for a block whose largest |x| is amax:
//   e_fit:     the smallest e with 12 d >= amax (no element saturates);
//   e_fit - 1: twice the resolution, the elements above 12 d clipped to +-12.
// Each element takes the table value nearest x / d (the first of equals), and the block keeps the
// exponent whose squared error is lower, measured in units of the smaller d (e_fit on a tie).
// (llama.cpp's quantize_row_mxfp4_ref takes e = floor(log2 amax) - 2 + 127, one of the two.)
#include <math.h>
#include <string.h>
#include "kernels_internal.h"
#include "quantize_internal.h"

namespace {

// The smallest e in 0..254 with 12 * 2^(e - 128) >= amax (a finite amax >= 0). With amax =
// m 2^k, 1 <= m < 2 (exponent field E = k + 127): 12 * 2^(e - 128) = 1.5 * 2^(e - 125) >= m 2^k
// holds from e = k + 125 = E - 2 when m <= 1.5, else from E - 1. A subnormal amax (E = 0) and
// E = 1 need e = 0 (12 * 2^-128 > 2^-125 > amax).
int exponent_fit(float amax) {
  uint32_t u;
  memcpy(&u, &amax, 4);
  const int exp_field = (int)(u >> 23);
  const int e = (u & 0x7fffffu) <= 0x400000u ? exp_field - 2 : exp_field - 1;
  return e < 0 ? 0 : e;
}

// x / d for d = 2^(e - 128): exact in double, then rounded once to f32 (the TypeScript's fround).
inline float scaled(float x, int e) { return (float)((double)x * ldexp(1.0, 128 - e)); }

// Indices of the nearest table values of x / 2^(e - 128) into idx; returns the squared error in
// units of that scale, summed in element order.
float fit_exponent(const float* x, int e, uint8_t* idx) {
  float err = 0.0f;
  for (int j = 0; j < MT_QK; j++) {
    const float t = scaled(x[j], e);
    int best = 0;
    float best_err = fabsf(t - (float)mt_mxfp4_values[0]);
    for (int k = 1; k < 16; k++) {
      const float dk = fabsf(t - (float)mt_mxfp4_values[k]);
      if (dk < best_err) {
        best_err = dk;
        best = k;
      }
    }
    idx[j] = (uint8_t)best;
    const float diff = t - (float)mt_mxfp4_values[best];
    err = err + diff * diff;
  }
  return err;
}

}  // namespace

void mt_quantize_block_mxfp4(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < MT_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
  int e = exponent_fit(amax);
  uint8_t idx[MT_QK], finer[MT_QK];
  const float err = fit_exponent(x, e, idx);
  // The finer scale's error in units of 2^(e - 1 - 128) is 4 times the same error in units of d.
  if (e > 0 && fit_exponent(x, e - 1, finer) * 0.25f < err) {
    e -= 1;
    memcpy(idx, finer, MT_QK);
  }
  out[0] = (uint8_t)e;
  for (int j = 0; j < MT_QK / 2; j++) out[1 + j] = (uint8_t)(idx[j] | (idx[j + MT_QK / 2] << 4));
}
