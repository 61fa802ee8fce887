// The AVX2 quantised kernels (Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4 weights x prepared 8-bit activation groups),
// in the canonical order (kernels_internal.h) through the drivers of kernels_simd_quant.h.
//
// Per 32-element block the integer dot ends as 8 int32 lanes, lane j = elements 4j..4j+3:
//   Q8_0: maddubs(|w|, sign(q_x, w)) -> int16 pairs -> madd(1) -> int32 lanes (no offset)
//   Q4_0: maddubs(nibble 0..15, q_x) -> int16 pairs -> madd(1); the +8 of the unsigned nibble is
//         removed from the block sum as 8 * sum(q_x) (|pair| <= 2 * 15 * 127: no saturation).
//   Q5_0 / Q5_1: maddubs(code 0..31, q_x), as Q4_0; Q5_0 removes 16 * sum(q_x), Q5_1 keeps the
//         unsigned sum and adds its min term m_w d_x sum(q_x) by a second fma (kernels_internal.h).
//   IQ4_NL / MXFP4: the nibbles through the type's table (vpshufb) -> signed bytes, then as Q8_0.
// Block sums are exact integers, so a Q4_0 row and its exact Q8_0 copy (q = nibble - 8, the same
// d) give the same bits (the tier computes a missed 4-bit expert from its int8 copy).
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include "kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

#include "kernels_simd_quant.h"

inline __m256i madd_pairs(__m256i p16) { return _mm256_madd_epi16(p16, _mm256_set1_epi16(1)); }

struct Q8Avx2 {
  static constexpr int kBlockBytes = MT_Q8_0_BYTES;
  static constexpr int kOffsetShift = -1;
  static constexpr int kMinAt = -1;
  static constexpr bool kScaleE8M0 = false;
  struct Weight {
    __m256i abs, sign;
  };
  static Weight weight(const uint8_t* blk) {
    const __m256i w = _mm256_loadu_si256((const __m256i*)(blk + 2));
    return {_mm256_sign_epi8(w, w), w};
  }
  static __m256i lanes(const Weight& w, __m256i qx) {
    return madd_pairs(_mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(qx, w.sign)));
  }
};

// Q4_0: 16 bytes of nibbles -> 32 bytes in element order (low nibbles = elements 0..15, high =
// 16..31): the bytes go to both halves, the high half shifts right by 4 (64-bit lanes: a
// neighbour's bits land in the top nibble), both are masked to 0..15.
inline __m256i nibbles_at(const uint8_t* qs) {
  const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)qs));
  return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

struct Q4Avx2 {
  static constexpr int kBlockBytes = MT_Q4_0_BYTES;
  static constexpr int kOffsetShift = 3;  // nibble = q + 8
  static constexpr int kMinAt = -1;
  static constexpr bool kScaleE8M0 = false;
  typedef __m256i Weight;
  static Weight weight(const uint8_t* blk) { return nibbles_at(blk + 2); }
  static __m256i lanes(const Weight& u, __m256i qx) { return madd_pairs(_mm256_maddubs_epi16(u, qx)); }
};

// Q5: the 32 bits of qh (bit j: element j) -> 0x10 in byte j where set: byte j gets qh's byte
// j / 8 (a shuffle within each 128-bit half, both hold the 4 bytes), then tests bit j % 8.
inline __m256i q5_high_bits(const uint8_t* qh) {
  uint32_t bits;
  memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32((int)bits),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Q5_0 / Q5_1: codes 0..31 in element order; maddubs pairs <= 2 * 31 * 127 (no saturation).
template <int kType>
struct Q5Avx2 {
  static constexpr int kBlockBytes = kType == MT_Q5_1 ? MT_Q5_1_BYTES : MT_Q5_0_BYTES;
  static constexpr int kOffsetShift = kType == MT_Q5_1 ? -1 : 4;  // Q5_0: code = q + 16
  static constexpr int kMinAt = kType == MT_Q5_1 ? 2 : -1;
  static constexpr int kQhAt = kType == MT_Q5_1 ? 4 : 2;
  static constexpr bool kScaleE8M0 = false;
  typedef __m256i Weight;
  static Weight weight(const uint8_t* blk) {
    return _mm256_or_si256(nibbles_at(blk + kQhAt + 4), q5_high_bits(blk + kQhAt));
  }
  static __m256i lanes(const Weight& u, __m256i qx) { return madd_pairs(_mm256_maddubs_epi16(u, qx)); }
};

// IQ4_NL / MXFP4: the nibbles in element order (as Q4_0; after IQ4_NL's f16 d or MXFP4's E8M0 byte)
// looked up in the type's table, the 16 values in both 128-bit halves (vpshufb indexes within a
// half) -> the signed weights, dotted as Q8_0's (|v| <= 127, so |v| is an unsigned byte and maddubs
// pairs stay <= 2 * 127 * 127).
template <int kType>
struct TableAvx2 {
  static constexpr bool kMx = kType == MT_MXFP4;
  static constexpr int kBlockBytes = kMx ? MT_MXFP4_BYTES : MT_IQ4_NL_BYTES;
  static constexpr int kOffsetShift = -1;
  static constexpr int kMinAt = -1;
  static constexpr bool kScaleE8M0 = kMx;
  typedef Q8Avx2::Weight Weight;
  static Weight weight(const uint8_t* blk) {
    const __m128i values = _mm_loadu_si128((const __m128i*)(kMx ? mt_mxfp4_values : mt_iq4nl_values));
    const __m256i w = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(values), nibbles_at(blk + (kMx ? 1 : 2)));
    return {_mm256_sign_epi8(w, w), w};
  }
  static __m256i lanes(const Weight& w, __m256i qx) { return Q8Avx2::lanes(w, qx); }
};

constexpr int kTileRows = 2;  // matmul: weight rows per tile (x 4 activation rows)

}  // namespace

extern "C" {

void mt_matvec_quant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  const mt_act_group* a = (const mt_act_group*)act;
  const uint8_t* w = (const uint8_t*)W;
  switch (wtype) {
    case MT_Q4_0:
      return quant_matvec<Q4Avx2>(w, cols, a, y, r0, r1);
    case MT_Q5_0:
      return quant_matvec<Q5Avx2<MT_Q5_0>>(w, cols, a, y, r0, r1);
    case MT_Q5_1:
      return quant_matvec<Q5Avx2<MT_Q5_1>>(w, cols, a, y, r0, r1);
    case MT_IQ4_NL:
      return quant_matvec<TableAvx2<MT_IQ4_NL>>(w, cols, a, y, r0, r1);
    case MT_MXFP4:
      return quant_matvec<TableAvx2<MT_MXFP4>>(w, cols, a, y, r0, r1);
    default:
      return quant_matvec<Q8Avx2>(w, cols, a, y, r0, r1);
  }
}

void mt_matmul_quant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                          int64_t r0, int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const uint8_t* x = (const uint8_t*)acts;
  switch (wtype) {
    case MT_Q4_0:
      return quant_matmul<Q4Avx2, kTileRows>(w, cols, x, n, Y, ldy, r0, r1);
    case MT_Q5_0:
      return quant_matmul<Q5Avx2<MT_Q5_0>, kTileRows>(w, cols, x, n, Y, ldy, r0, r1);
    case MT_Q5_1:
      return quant_matmul<Q5Avx2<MT_Q5_1>, kTileRows>(w, cols, x, n, Y, ldy, r0, r1);
    case MT_IQ4_NL:
      return quant_matmul<TableAvx2<MT_IQ4_NL>, kTileRows>(w, cols, x, n, Y, ldy, r0, r1);
    case MT_MXFP4:
      return quant_matmul<TableAvx2<MT_MXFP4>, kTileRows>(w, cols, x, n, Y, ldy, r0, r1);
    default:
      return quant_matmul<Q8Avx2, kTileRows>(w, cols, x, n, Y, ldy, r0, r1);
  }
}

}  // extern "C"

#pragma GCC pop_options
