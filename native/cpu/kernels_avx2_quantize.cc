// The k-quant scale searches of gen-model's quantiser on the AVX2 (8 lanes) path, compiled for it by the
// target pragma below, never by global flags: quantize.cc calls in here only when that path is
// active. The same template as the scalar path's (quantize_kquant_lanes.h), so the same bytes.
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "quantize_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#pragma GCC diagnostic ignored "-Wpsabi"

#include "quantize_kquant_lanes.h"

static void scale_min32_8(const float* x, const float* w, int64_t nsub, int nmax, float rmin, float rdelta, int nstep,
                          uint8_t* L, float* scales, float* min_negs) {
  mt_fit_scale_min_run<8>(x, w, nsub, nmax, rmin, rdelta, nstep, L, scales, min_negs);
}

static void symmetric16_8(const float* x, int64_t nsub, int nmax, uint8_t* L, float* scales) {
  mt_fit_symmetric_run<8>(x, nsub, nmax, L, scales);
}

const mt_kquant_searches mt_kquant_searches_avx2 = {scale_min32_8, symmetric16_8};

#pragma GCC pop_options
