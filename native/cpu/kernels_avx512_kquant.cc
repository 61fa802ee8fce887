// The AVX-512 VNNI k-quant kernels: the drivers of kernels_simd_kquant.h over a super-block held as
// 4 zmm of codes (zmm c = elements 64c..64c+63) and per zmm its int16 scales, so a 64-element step
// of the dot is vpmaddubsw (codes x activations) then vpdpwssd with the scales (VNNI's fused
// vpmaddwd + vpaddd). Q4_K / Q5_K / Q6_K are decoded straight into zmm: Q4_K's 32 code bytes
// broadcast to both halves and shifted per half (low nibbles = the first 32 elements, high the next);
// Q5_K's fifth bits set where vptestmb finds them; Q6_K's 64 low-nibble bytes are two zmm whose high
// 2 bits come from one broadcast of qh shifted per half (vpsllvw / vpsrlvw, merged by vpternlogd).
// Q2_K, Q3_K and IQ4_XS join the AVX2 decoder's ymm in pairs. IQ4_XS's signed codes: |code| x the
// activation negated where the code is negative (AVX-512 has no vpsignb). Same exact integer sums,
// same float steps, so the same bits as the scalar and AVX2 paths.
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

#include "kernels_kquant_ymm.h"
#include "kernels_simd_kquant.h"

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512i broadcast256(const uint8_t* p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)p)); }

// A dword per 128-bit lane, repeated 4 times: lanes L0..L3.
inline __m512i per_lane(uint32_t l0, uint32_t l1, uint32_t l2, uint32_t l3) {
  return _mm512_setr_epi32((int)l0, (int)l0, (int)l0, (int)l0, (int)l1, (int)l1, (int)l1, (int)l1, (int)l2, (int)l2,
                           (int)l2, (int)l2, (int)l3, (int)l3, (int)l3, (int)l3);
}
inline uint32_t words(uint32_t w) { return w | w << 16; }

// kPaired (the matvec's Q4_K / Q5_K): zmm p = 2c + h holds the 32-element sub-blocks 4c + h and
// 4c + 2 + h, the low (h = 0) or high (h = 1) nibbles of the 64 code bytes at 64c, which one load
// gives; the activation block is permuted to match once per 8 weight rows (act()). Otherwise zmm c
// holds elements 64c..64c+63 in order.
template <int kType, bool kPaired>
struct Avx512Block {
  static constexpr bool kPairs = kPaired && (kType == MT_Q4_K || kType == MT_Q5_K);
  __m512i u[4];  // codes
  __m512i s[4];  // the int16 scale of each code pair: zmm c in order, [sc[4c] x 8 | .. | sc[4c+3] x 8]
  __m256i m16;   // the mins as int16, one per 16 elements (types with a min)
  __m256i c16;   // -off * sc as int16, one per 16 elements (offset types)

  void decode(const uint8_t* blk) {
    if (kType == MT_Q4_K || kType == MT_Q5_K)
      decode_k45(blk);
    else if (kType == MT_Q6_K)
      decode_k6(blk);
    else
      decode_joined(blk);
  }

  // The 32-element sub-blocks in the two halves of zmm c: (2c, 2c + 1), or paired (see the top).
  static constexpr int sub_lo(int c) { return kPairs ? 4 * (c / 2) + c % 2 : 2 * c; }
  static constexpr int sub_hi(int c) { return kPairs ? 4 * (c / 2) + c % 2 + 2 : 2 * c + 1; }

  void decode_k45(const uint8_t* blk) {
    const uint8_t* qs = blk + (kType == MT_Q4_K ? 16 : 48);
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    if (kPairs) {
      for (int c = 0; c < 2; c++) {
        const __m512i v = _mm512_loadu_si512((const void*)(qs + 64 * c));
        u[2 * c] = _mm512_and_si512(v, lo4);
        u[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
      }
    } else {  // the 32 bytes of chunk c in both halves, the second shifted to its high nibbles
      const __m512i half_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
      for (int c = 0; c < 4; c++)
        u[c] = _mm512_and_si512(_mm512_srlv_epi64(broadcast256(qs + 32 * c), half_shift), lo4);
    }
    if (kType == MT_Q5_K) {  // bit j of qh[l] for sub-block j: + 16
      const __m512i qh = broadcast256(blk + 16);
      for (int c = 0; c < 4; c++) {
        const __m512i bit = join(_mm256_set1_epi8((char)(1 << sub_lo(c))), _mm256_set1_epi8((char)(1 << sub_hi(c))));
        u[c] = _mm512_mask_add_epi8(u[c], _mm512_test_epi8_mask(qh, bit), u[c], _mm512_set1_epi8(16));
      }
    }
    // Bytes [sc0..sc7, m0..m7] in every 128-bit lane: s[c] takes byte sub_lo(c) (lanes 0-1) and
    // sub_hi(c) (lanes 2-3) zero-extended to every word; m16 word k is byte 8 + k / 2.
    const __m512i sm = _mm512_broadcast_i32x4(k4_scale_bytes(blk));
    for (int c = 0; c < 4; c++) {
      const uint32_t lo = words(0x8000 | sub_lo(c)), hi = words(0x8000 | sub_hi(c));
      s[c] = _mm512_shuffle_epi8(sm, per_lane(lo, lo, hi, hi));
    }
    m16 = _mm256_shuffle_epi8(_mm512_castsi512_si256(sm),
                              _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,  //
                                               12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1));
  }

  // Q6_K: element 128n + 32p + l has its low nibble in ql[64n + 32 (p % 2) + l] (p < 2 low, else
  // high) and its top 2 bits at bit 2p of qh[32n + l]: zmm 2n is the low nibbles of ql[64n..64n+63]
  // with qh << 4 (first half) and << 2 (second), zmm 2n + 1 the high nibbles with qh and qh >> 2.
  void decode_k6(const uint8_t* blk) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f), hi2 = _mm512_set1_epi8(0x30);
    const __m512i shl = per_lane(words(4), words(4), words(2), words(2));
    const __m512i shr = per_lane(0, 0, words(2), words(2));
    for (int n = 0; n < 2; n++) {
      const __m512i ql = _mm512_loadu_si512((const void*)(blk + 64 * n));
      const __m512i qh = broadcast256(blk + 128 + 32 * n);
      // a | (b & c): vpternlogd 0xf8
      u[2 * n] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, lo4), _mm512_sllv_epi16(qh, shl), hi2, 0xf8);
      u[2 * n + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4),
                                               _mm512_srlv_epi16(qh, shr), hi2, 0xf8);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 192)));
    spread_scales512(sc16);
    m16 = _mm256_setzero_si256();
    c16 = offset_scales<kType>(sc16);
  }

  void decode_joined(const uint8_t* blk) {
    __m256i u8[8], sc16;
    decode_codes<kType>(blk, u8);
    for (int c = 0; c < 4; c++) u[c] = join(u8[2 * c], u8[2 * c + 1]);
    decode_scales16<kType>(blk, &sc16, &m16);
    spread_scales512(sc16);
    c16 = offset_scales<kType>(sc16);
  }

  // s[c] from the 16 int16 scales: word 4c + L in 128-bit lane L (vpermw).
  void spread_scales512(__m256i sc16) {
    const __m512i all = _mm512_castsi256_si512(sc16);
    for (int c = 0; c < 4; c++)
      s[c] =
          _mm512_permutexvar_epi16(per_lane(words(4 * c), words(4 * c + 1), words(4 * c + 2), words(4 * c + 3)), all);
  }

  struct Act {
    __m512i q[4];  // the codes in u's order
    __m256i bsum;
  };
  static Act act(const mt_act_k& x) {
    Act a;
    for (int c = 0; c < 4; c++) a.q[c] = _mm512_loadu_si512((const void*)(x.q + 64 * c));
    if (kPairs)  // [half h of zmm 2c' | half h of zmm 2c' + 1] for zmm 2c' + h
      for (int c = 0; c < 4; c += 2) {
        const __m512i lo = a.q[c], hi = a.q[c + 1];
        a.q[c] = _mm512_shuffle_i64x2(lo, hi, 0x44);
        a.q[c + 1] = _mm512_shuffle_i64x2(lo, hi, 0xee);
      }
    a.bsum = _mm256_loadu_si256((const __m256i*)x.bsum);
    return a;
  }

  __m256i isum(const Act& x) const {
    __m512i acc = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
      const __m512i q = x.q[c];
      __m512i p16;
      if (kType == MT_IQ4_XS) {
        const __m512i sq = _mm512_mask_sub_epi8(q, _mm512_movepi8_mask(u[c]), _mm512_setzero_si512(), q);
        p16 = _mm512_maddubs_epi16(_mm512_abs_epi8(u[c]), sq);
      } else {
        p16 = _mm512_maddubs_epi16(u[c], q);
      }
      acc = _mm512_dpwssd_epi32(acc, p16, s[c]);
    }
    __m256i a8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
    if (kquant_offset<kType>() != 0) a8 = _mm256_dpwssd_epi32(a8, c16, x.bsum);
    return a8;
  }

  __m256i msum(const Act& x) const { return _mm256_madd_epi16(m16, x.bsum); }
};

template <int kType>
using Avx512VecBlock = Avx512Block<kType, true>;
template <int kType>
using Avx512MatBlock = Avx512Block<kType, false>;

}  // namespace

extern "C" {

void mt_matvec_kquant_avx512(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                             int64_t r1) {
  kquant_matvec_any<Avx512VecBlock>(wtype, W, cols, act, y, r0, r1);
}

void mt_matmul_kquant_avx512(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                             int64_t r0, int64_t r1) {
  kquant_matmul_any<Avx512MatBlock>(wtype, W, cols, acts, n, Y, ldy, r0, r1);
}

}  // extern "C"

#pragma GCC pop_options
