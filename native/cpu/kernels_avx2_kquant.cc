// The AVX2 k-quant kernels (Q2_K .. Q6_K and IQ4_XS weights x Q8_K activations), in the canonical
// order (kernels_internal.h) through the shared code of kernels_simd_kquant.h: vpmaddubsw for the
// unsigned codes x signed activations (IQ4_XS's signed codes: |code| x activation with the code's
// sign, vpsignb), then vpmaddwd with the sub-block scales.
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include <vector>
#include "kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

#include "kernels_simd_kquant.h"

// The dot on the decoded ymm: vpmaddubsw (codes x activations) then vpmaddwd with the scales.
struct Avx2Dot {
  struct W {
    const KBlock* k;
  };
  static void prep(const KBlock& k, W* w) { w->k = &k; }
  static __m256i dot(const W& w, const int8_t* q) {
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
      const __m256i p16 = _mm256_maddubs_epi16(w.k->u[j], _mm256_loadu_si256((const __m256i*)(q + 32 * j)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, w.k->sc[j]));
    }
    return acc;
  }
  static __m256i dot_signed(const W& w, const int8_t* q) {
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
      const __m256i u = w.k->u[j];
      const __m256i x = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i*)(q + 32 * j)), u);
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(u, u), x), w.k->sc[j]));
    }
    return acc;
  }
};

}  // namespace

extern "C" {

void mt_matvec_kquant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  kquant_matvec_any<Avx2Dot>(wtype, W, cols, act, y, r0, r1);
}

void mt_matmul_kquant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                           int64_t r0, int64_t r1) {
  kquant_matmul_any<Avx2Dot>(wtype, W, cols, acts, n, Y, ldy, r0, r1);
}

}  // extern "C"

#pragma GCC pop_options
