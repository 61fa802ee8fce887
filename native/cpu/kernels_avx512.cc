// The AVX-512 path (F, BW, VL + VNNI), compiled for those features by the target pragma
// below; isa.cc calls in here only when the CPU and the OS (zmm state) allow it. Both halves
// run the canonical order of kernels_internal.h, so this path gives the scalar path's bits.
//   F32 / F16 / BF16: widen to f32, FMA into 2 x 16 = 32 lanes.
//   Q2_K .. Q6_K: kernels_avx512_kquant.cc.
//   Q5_0 / Q5_1: the AVX2 kernels (kernels_avx2_quant.cc; the same bits as every path).
//   Q8_0 / Q4_0: vpdpbusd (unsigned x signed bytes -> int32, no saturation); matvec through the ymm
//     drivers of kernels_simd_quant.h, matmul through the zmm pairs of kernels_avx512_pairs.h. Q8_0 weights are made unsigned with w ^ 0x80 = w + 128, Q4_0
//     nibbles are unsigned already (n = q + 8); the offset leaves each block's exact integer sum
//     as 128 * sum(q_x) or 8 * sum(q_x), so a Q4_0 block and its Q8_0 copy agree bit for bit.
//   IQ4_NL / MXFP4: as Q8_0, the nibbles looked up (vpshufb) in the type's table stored as v ^ 0x80 = v + 128.
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include <vector>
#include "kernels_internal.h"

// GCC 12's avx512fintrin.h seeds some conversions with _mm512_undefined_*, which
// -Wuninitialized reports once inlined here; the lanes are fully overwritten.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

namespace {

#include "kernels_simd_quant.h"
#include "kernels_avx512_pairs.h"

inline __m256i dpbusd(__m256i u, __m256i qx) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, qx); }

struct Q8Vnni {
  static constexpr int kBlockBytes = MT_Q8_0_BYTES;
  static constexpr int kOffsetShift = 7;  // w ^ 0x80 = w + 128
  static constexpr int kMinAt = -1;
  static constexpr bool kScaleE8M0 = false;
  typedef __m256i Weight;
  static Weight weight(const uint8_t* blk) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(blk + 2)), _mm256_set1_epi8((char)0x80));
  }
  static __m256i lanes(const Weight& u, __m256i qx) { return dpbusd(u, qx); }
  static __m512i weight_both(const uint8_t* blk) {
    return _mm512_xor_si512(broadcast256i(blk + 2), _mm512_set1_epi8((char)0x80));
  }
};

// Q4_0 nibbles in element order (low nibbles = elements 0..15, high = 16..31).
struct Q4Vnni {
  static constexpr int kBlockBytes = MT_Q4_0_BYTES;
  static constexpr int kOffsetShift = 3;  // nibble = q + 8
  static constexpr int kMinAt = -1;
  static constexpr bool kScaleE8M0 = false;
  typedef __m256i Weight;
  static Weight weight(const uint8_t* blk) { return nibbles(blk + 2); }
  static __m256i lanes(const Weight& u, __m256i qx) { return dpbusd(u, qx); }
  static __m512i weight_both(const uint8_t* blk) { return nibbles_both(blk + 2); }
  // The 16 bytes at qs -> 32 nibbles in element order; _both: that twice, one per 256-bit half.
  static __m256i nibbles(const uint8_t* qs) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
  }
  static __m512i nibbles_both(const uint8_t* qs) {
    return nibbles512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)qs)));
  }
  static __m512i nibbles512(__m512i x) {
    return _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0f));
  }
};

// IQ4_NL / MXFP4: the type's table values + 128 (unsigned bytes: IQ4_NL 1..241, MXFP4 116..140),
// indexed by the nibbles in element order (after IQ4_NL's f16 d or MXFP4's E8M0 byte); the + 128
// comes off as Q8_0's does.
template <int kType>
struct TableVnni {
  static constexpr bool kMx = kType == MT_MXFP4;
  static constexpr int kBlockBytes = kMx ? MT_MXFP4_BYTES : MT_IQ4_NL_BYTES;
  static constexpr int kQsAt = kMx ? 1 : 2;
  static constexpr int kOffsetShift = 7;
  static constexpr int kMinAt = -1;
  static constexpr bool kScaleE8M0 = kMx;
  typedef __m256i Weight;
  static __m128i table() {
    const __m128i values = _mm_loadu_si128((const __m128i*)(kMx ? mt_mxfp4_values : mt_iq4nl_values));
    return _mm_xor_si128(values, _mm_set1_epi8((char)0x80));
  }
  static Weight weight(const uint8_t* blk) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table()), Q4Vnni::nibbles(blk + kQsAt));
  }
  static __m256i lanes(const Weight& u, __m256i qx) { return dpbusd(u, qx); }
  static __m512i weight_both(const uint8_t* blk) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(table()), Q4Vnni::nibbles_both(blk + kQsAt));
  }
};

constexpr int kTileRows = 2;   // quantised matmul: weight rows per tile ...
constexpr int kTilePairs = 2;  // ... x activation-row pairs (2 x 2 x 2 pairs of pairs = 4 zmm accumulators)
constexpr int kFloatTile = 4;  // float matmul: activation rows per weight-row pass

inline __m512 load16_f32(const uint8_t* w, int64_t i) { return _mm512_loadu_ps((const float*)(w + 4 * i)); }
inline __m512 load16_f16(const uint8_t* w, int64_t i) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(w + 2 * i)));
}
inline __m512 load16_bf16(const uint8_t* w, int64_t i) {
  __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(w + 2 * i)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
inline float scalar_weight(int wtype, const uint8_t* w, int64_t i) {
  if (wtype == MT_F32) return mt_load_f32(w + 4 * i);
  if (wtype == MT_F16) return _cvtsh_ss(mt_load_u16(w + 2 * i));
  return mt_bf16_to_f32(mt_load_u16(w + 2 * i));
}

// out[k] = w . x_k for k < A: 2 accumulators of 16 are the 32 canonical lanes; the tail past the
// last 32 goes lane by lane.
template <__m512 (*Load)(const uint8_t*, int64_t), int A>
void dot_float(int wtype, const uint8_t* w, const float* const* x, int64_t cols, float* out) {
  __m512 acc[A][2];
  for (int k = 0; k < A; k++) acc[k][0] = acc[k][1] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + MT_FLOAT_LANES <= cols; i += MT_FLOAT_LANES) {
    const __m512 w0 = Load(w, i), w1 = Load(w, i + 16);
    for (int k = 0; k < A; k++) {
      acc[k][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[k] + i), acc[k][0]);
      acc[k][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[k] + i + 16), acc[k][1]);
    }
  }
  for (int k = 0; k < A; k++) {
    float lane[MT_FLOAT_LANES];
    _mm512_storeu_ps(lane, acc[k][0]);
    _mm512_storeu_ps(lane + 16, acc[k][1]);
    for (int64_t t = i; t < cols; t++) lane[t - i] = fmaf(scalar_weight(wtype, w, t), x[k][t], lane[t - i]);
    out[k] = mt_reduce_float_lanes(lane);
  }
}

template <int A>
void dot_float_rows(int wtype, const uint8_t* w, const float* const* x, int64_t cols, float* out) {
  switch (wtype) {
    case MT_F32:
      dot_float<load16_f32, A>(wtype, w, x, cols, out);
      break;
    case MT_F16:
      dot_float<load16_f16, A>(wtype, w, x, cols, out);
      break;
    case MT_BF16:
      dot_float<load16_bf16, A>(wtype, w, x, cols, out);
      break;
    default:
      break;
  }
}

}  // namespace

extern "C" {

void mt_matvec_rows_avx512(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  if (wtype == MT_Q4_0) return quant_matvec<Q4Vnni>(w, cols, (const mt_act_group*)act, y, r0, r1);
  if (wtype == MT_Q8_0) return quant_matvec<Q8Vnni>(w, cols, (const mt_act_group*)act, y, r0, r1);
  if (wtype == MT_IQ4_NL) return quant_matvec<TableVnni<MT_IQ4_NL>>(w, cols, (const mt_act_group*)act, y, r0, r1);
  if (wtype == MT_MXFP4) return quant_matvec<TableVnni<MT_MXFP4>>(w, cols, (const mt_act_group*)act, y, r0, r1);
  if (mt_is_kquant(wtype)) return mt_matvec_kquant_avx512(wtype, W, cols, act, y, r0, r1);
  if (mt_is_quant(wtype)) return mt_matvec_quant_avx2(wtype, W, cols, act, y, r0, r1);  // Q5_0 / Q5_1
  size_t row_bytes = mt_row_bytes(wtype, cols);
  const float* x[1] = {(const float*)act};
  for (int64_t r = r0; r < r1; r++) dot_float_rows<1>(wtype, w + r * row_bytes, x, cols, y + r);
}

void mt_matmul_rows_avx512(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                           int64_t r0, int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const uint8_t* a = (const uint8_t*)acts;
  if (wtype == MT_Q4_0) return quant_matmul2<Q4Vnni, kTileRows, kTilePairs>(w, cols, a, n, Y, ldy, r0, r1);
  if (wtype == MT_Q8_0) return quant_matmul2<Q8Vnni, kTileRows, kTilePairs>(w, cols, a, n, Y, ldy, r0, r1);
  if (wtype == MT_IQ4_NL)
    return quant_matmul2<TableVnni<MT_IQ4_NL>, kTileRows, kTilePairs>(w, cols, a, n, Y, ldy, r0, r1);
  if (wtype == MT_MXFP4)
    return quant_matmul2<TableVnni<MT_MXFP4>, kTileRows, kTilePairs>(w, cols, a, n, Y, ldy, r0, r1);
  if (mt_is_kquant(wtype)) return mt_matmul_kquant_avx512(wtype, W, cols, acts, n, Y, ldy, r0, r1);
  if (mt_is_quant(wtype)) return mt_matmul_quant_avx2(wtype, W, cols, acts, n, Y, ldy, r0, r1);  // Q5_0 / Q5_1
  size_t row_bytes = mt_row_bytes(wtype, cols);
  const float* x = (const float*)acts;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* wr = w + r * row_bytes;
    int64_t i = 0;
    for (; i + kFloatTile <= n; i += kFloatTile) {
      const float* tile[kFloatTile];
      for (int k = 0; k < kFloatTile; k++) tile[k] = x + (i + k) * cols;
      float out[kFloatTile];
      dot_float_rows<kFloatTile>(wtype, wr, tile, cols, out);
      for (int k = 0; k < kFloatTile; k++) Y[(i + k) * ldy + r] = out[k];
    }
    for (; i < n; i++) {
      const float* one[1] = {x + i * cols};
      dot_float_rows<1>(wtype, wr, one, cols, Y + i * ldy + r);
    }
  }
}

uint64_t mt_read_sum_avx512(const void* p, size_t bytes) {
  const uint8_t* b = (const uint8_t*)p;
  __m512i s0 = _mm512_setzero_si512(), s1 = s0;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    s0 = _mm512_add_epi64(s0, _mm512_loadu_si512((const void*)(b + i)));
    s1 = _mm512_add_epi64(s1, _mm512_loadu_si512((const void*)(b + i + 64)));
  }
  return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(s0, s1));
}

}  // extern "C"

#pragma GCC pop_options
