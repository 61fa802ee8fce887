// The AVX-512 VNNI k-quant kernels: the code of kernels_simd_kquant.h built for AVX-512 (VL
// encodings) with the scale step as one vpdpwssd (int16 pairs x sub-block scales, accumulated in
// int32: VNNI's fused vpmaddwd + vpaddd). Same exact integer sums, same float steps, so the same
// bits as the scalar and AVX2 paths.
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include <vector>
#include "kernels_internal.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

namespace {

inline __m256i MaddAcc(__m256i acc, __m256i p16, __m256i s16) { return _mm256_dpwssd_epi32(acc, p16, s16); }

#include "kernels_simd_kquant.h"

}  // namespace

extern "C" {

void mt_matvec_kquant_avx512(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                             int64_t r1) {
  kquant_matvec_any(wtype, W, cols, act, y, r0, r1);
}

void mt_matmul_kquant_avx512(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y,
                             int64_t ldy, int64_t r0, int64_t r1) {
  kquant_matmul_any(wtype, W, cols, acts, n, Y, ldy, r0, r1);
}

}  // extern "C"

#pragma GCC pop_options
