// The AVX2 k-quant kernels (Q2_K .. Q6_K and IQ4_XS weights x Q8_K activations), in the canonical
// order (kernels_internal.h) through the shared drivers of kernels_simd_kquant.h. A super-block is
// 8 ymm of codes (kernels_kquant_ymm.h) and per ymm its int16 scales; the dot is vpmaddubsw (codes
// x activations; IQ4_XS's signed codes: |code| x activation with the code's sign, vpsignb) then
// vpmaddwd with the scales, and vpmaddwd of the activation's sub-block sums with the mins and the
// codes' offset. Q4_K / Q5_K take their scale operands straight from the 6-bit bytes (a vpshufb
// each), the others spread their 16 int16 scales.
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include <vector>
#include "kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

#include "kernels_kquant_ymm.h"
#include "kernels_simd_kquant.h"

template <int kType>
struct Avx2Block {
  __m256i u[8];  // codes, ymm j = elements 32j..32j+31
  __m256i s[8];  // s[j]: int16 [sc[2j] x 8 | sc[2j+1] x 8], the madd operand of ymm j
  __m256i m16;   // the mins as int16, one per 16 elements (types with a min)
  __m256i c16;   // -off * sc as int16, one per 16 elements (offset types)

  void decode(const uint8_t* blk) {
    decode_codes<kType>(blk, u);
    if (kType == MT_Q4_K || kType == MT_Q5_K) {
      // Bytes [sc0..sc7, m0..m7] in both halves: s[j] is byte j zero-extended to every word, m16
      // word k is byte 8 + k / 2.
      const __m256i sm = _mm256_broadcastsi128_si256(k4_scale_bytes(blk));
      for (int j = 0; j < 8; j++) s[j] = _mm256_shuffle_epi8(sm, _mm256_set1_epi16((short)(0x8000 | j)));
      m16 = _mm256_shuffle_epi8(sm, _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,  //
                                                     12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1));
    } else {
      __m256i sc16;
      decode_scales16<kType>(blk, &sc16, &m16);
      spread_scales(sc16, s);
      c16 = offset_scales<kType>(sc16);
    }
  }

  typedef const mt_act_k* Act;
  static Act act(const mt_act_k& x) { return &x; }

  __m256i isum(Act x) const {
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
      const __m256i q = _mm256_loadu_si256((const __m256i*)(x->q + 32 * j));
      const __m256i p16 = kType == MT_IQ4_XS
                              ? _mm256_maddubs_epi16(_mm256_sign_epi8(u[j], u[j]), _mm256_sign_epi8(q, u[j]))
                              : _mm256_maddubs_epi16(u[j], q);
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, s[j]));
    }
    if (kquant_offset<kType>() != 0)
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(c16, _mm256_loadu_si256((const __m256i*)x->bsum)));
    return acc;
  }

  __m256i msum(Act x) const { return _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i*)x->bsum)); }
};

}  // namespace

extern "C" {

void mt_matvec_kquant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  kquant_matvec_any<Avx2Block>(wtype, W, cols, act, y, r0, r1);
}

void mt_matmul_kquant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                           int64_t r0, int64_t r1) {
  kquant_matmul_any<Avx2Block>(wtype, W, cols, acts, n, Y, ldy, r0, r1);
}

}  // extern "C"

#pragma GCC pop_options
