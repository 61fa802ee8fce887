// The AVX-512 VNNI k-quant kernels: the code of kernels_simd_kquant.h built for AVX-512, with a zmm
// dot (64 elements a step) whose scale step is one vpdpwssd (int16 pairs x sub-block scales,
// accumulated in int32: VNNI's fused vpmaddwd + vpaddd). IQ4_XS's signed codes: |code| x the
// activation negated where the code is negative (AVX-512 has no vpsignb). Same exact integer
// sums, same float steps, so the same bits as the scalar and AVX2 paths.
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

#include "kernels_simd_kquant.h"

// The dot on zmm: two decoded ymm (64 elements) per register, vpmaddubsw, then vpdpwssd with the
// scales; the two 256-bit halves of the int32 sum are added at the end (exact integers).
struct Avx512Dot {
  struct W {
    __m512i u[4], sc[4];
  };
  static __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
  static void prep(const KBlock& k, W* w) {
    for (int j = 0; j < 4; j++) {
      w->u[j] = join(k.u[2 * j], k.u[2 * j + 1]);
      w->sc[j] = join(k.sc[2 * j], k.sc[2 * j + 1]);
    }
  }
  static __m256i dot(const W& w, const int8_t* q) {
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
      const __m512i p16 = _mm512_maddubs_epi16(w.u[j], _mm512_loadu_si512((const void*)(q + 64 * j)));
      acc = _mm512_dpwssd_epi32(acc, p16, w.sc[j]);
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
  }
  static __m256i dot_signed(const W& w, const int8_t* q) {
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
      const __m512i x = _mm512_loadu_si512((const void*)(q + 64 * j));
      const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w.u[j]), _mm512_setzero_si512(), x);
      acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(_mm512_abs_epi8(w.u[j]), sx), w.sc[j]);
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
  }
};

}  // namespace

extern "C" {

void mt_matvec_kquant_avx512(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                             int64_t r1) {
  kquant_matvec_any<Avx512Dot>(wtype, W, cols, act, y, r0, r1);
}

void mt_matmul_kquant_avx512(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                             int64_t r0, int64_t r1) {
  kquant_matmul_any<Avx512Dot>(wtype, W, cols, acts, n, Y, ldy, r0, r1);
}

}  // extern "C"

#pragma GCC pop_options
