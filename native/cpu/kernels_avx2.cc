// The AVX2 path (+FMA, F16C). Compiled for those features by the target pragma
// below, never by global flags: isa.cc calls in here only when the CPU has them.
//   F32 / F16 / BF16: widen to f32, FMA into 4 x 8 = 32 lanes (the canonical order).
//   Q2_K .. Q6_K: kernels_avx2_kquant.cc.
//   Q8_0 / Q4_0: kernels_avx2_quant.cc (integer block dots; a Q4_0 row and its Q8_0 copy agree
//   bit for bit). Activation prepare for them is here, and the k-quants' Q8_K one.
// Float matmul keeps one weight row in L1 and runs it against 2 activation rows at once.
#include <immintrin.h>
#include <float.h>
#include <math.h>
#include "kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

// 8 weights at element i, widened to f32.
inline __m256 load8_f32(const uint8_t* w, int64_t i) { return _mm256_loadu_ps((const float*)(w + 4 * i)); }
inline __m256 load8_f16(const uint8_t* w, int64_t i) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(w + 2 * i)));
}
inline __m256 load8_bf16(const uint8_t* w, int64_t i) {
  __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(w + 2 * i)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
inline float scalar_weight(int wtype, const uint8_t* w, int64_t i) {
  if (wtype == MT_F32) return mt_load_f32(w + 4 * i);
  if (wtype == MT_F16) return _cvtsh_ss(mt_load_u16(w + 2 * i));
  return mt_bf16_to_f32(mt_load_u16(w + 2 * i));
}

// out[k] = w . x_k for k < A (float weights) in the canonical order: 4 accumulators of 8 are
// the 32 lanes (element i -> lane i % 32); the tail past the last 32 goes lane by lane.
template <__m256 (*Load)(const uint8_t*, int64_t), int A>
void dot_float(int wtype, const uint8_t* w, const float* const* x, int64_t cols, float* out) {
  __m256 acc[A][4];
  for (int k = 0; k < A; k++)
    for (int q = 0; q < 4; q++) acc[k][q] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + MT_FLOAT_LANES <= cols; i += MT_FLOAT_LANES)
    for (int q = 0; q < 4; q++) {
      const __m256 wv = Load(w, i + 8 * q);
      for (int k = 0; k < A; k++) acc[k][q] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[k] + i + 8 * q), acc[k][q]);
    }
  for (int k = 0; k < A; k++) {
    float lane[MT_FLOAT_LANES];
    for (int q = 0; q < 4; q++) _mm256_storeu_ps(lane + 8 * q, acc[k][q]);
    for (int64_t t = i; t < cols; t++) lane[t - i] = fmaf(scalar_weight(wtype, w, t), x[k][t], lane[t - i]);
    out[k] = mt_reduce_float_lanes(lane);
  }
}

template <int A>
void dot_float_rows(int wtype, const uint8_t* w, const float* const* x, int64_t cols, float* out) {
  switch (wtype) {
    case MT_F32:
      dot_float<load8_f32, A>(wtype, w, x, cols, out);
      break;
    case MT_F16:
      dot_float<load8_f16, A>(wtype, w, x, cols, out);
      break;
    case MT_BF16:
      dot_float<load8_bf16, A>(wtype, w, x, cols, out);
      break;
    default:
      break;
  }
}

constexpr int kTile = 2;  // activation rows per weight-row pass in float matmul (2 x 4 accumulators)

}  // namespace

extern "C" {

void mt_matvec_rows_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  if (mt_is_quant(wtype)) return mt_matvec_quant_avx2(wtype, W, cols, act, y, r0, r1);
  if (mt_is_kquant(wtype)) return mt_matvec_kquant_avx2(wtype, W, cols, act, y, r0, r1);
  size_t row_bytes = mt_row_bytes(wtype, cols);
  const float* x[1] = {(const float*)act};
  for (int64_t r = r0; r < r1; r++) dot_float_rows<1>(wtype, (const uint8_t*)W + r * row_bytes, x, cols, y + r);
}

// Y [n, ldy] (columns r0..r1) = acts [n, cols] W^T: each weight row is read once and
// multiplied with the activation rows kTile at a time (the rows sit in L2).
void mt_matmul_rows_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                         int64_t r0, int64_t r1) {
  if (mt_is_quant(wtype)) return mt_matmul_quant_avx2(wtype, W, cols, acts, n, Y, ldy, r0, r1);
  if (mt_is_kquant(wtype)) return mt_matmul_kquant_avx2(wtype, W, cols, acts, n, Y, ldy, r0, r1);
  size_t row_bytes = mt_row_bytes(wtype, cols);
  const float* x = (const float*)acts;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* w = (const uint8_t*)W + r * row_bytes;
    int64_t i = 0;
    for (; i + kTile <= n; i += kTile) {
      const float* tile[kTile] = {x + i * cols, x + (i + 1) * cols};
      float out[kTile];
      dot_float_rows<kTile>(wtype, w, tile, cols, out);
      for (int k = 0; k < kTile; k++) Y[(i + k) * ldy + r] = out[k];
    }
    for (; i < n; i++) {
      const float* one[1] = {x + i * cols};
      dot_float_rows<1>(wtype, w, one, cols, Y + i * ldy + r);
    }
  }
}

// The Q8_K quantiser of quant_rows.cc (mt_act_prepare_kquant), 256 elements at a time with its exact
// output: max |x| is exact in any order, d = max / 127 and 1 / d are the same scalar operations,
// q = x * (1 / d) rounded to nearest even (vroundps, as the scalar's 1.5 * 2^23 trick for |v| < 2^22)
// and clamped to +-127, bsum the integer sums of 16. A block with a NaN or inf: d = NaN, q and bsum 0.
static void act_prepare_kquant_avx2(const float* x, int64_t cols, mt_act_k* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < cols / MT_QK_K; b++) {
    const float* xb = x + b * MT_QK_K;
    mt_act_k& a = out[b];
    memset(a.pad, 0, sizeof a.pad);
    __m256 amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
    for (int k = 0; k < MT_QK_K / 8; k++) {
      const __m256 v = _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask);
      amax = _mm256_max_ps(amax, v);
      nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(v, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));  // NaN or inf
    }
    if (_mm256_movemask_ps(nonfinite) != 0) {
      memset(a.q, 0, sizeof a.q);
      memset(a.bsum, 0, sizeof a.bsum);
      a.d = NAN;
      continue;
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 127.0f;
    const __m256 inv = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i sub[MT_QK_K_SUBS];  // the int32 sums of each 16 elements, 8 lanes apiece
    for (int k = 0; k < MT_QK_K / 32; k++) {
      __m256i q[4];
      for (int i = 0; i < 4; i++) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * k + 8 * i), inv),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[i] =
            _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
      }
      sub[2 * k] = _mm256_add_epi32(q[0], q[1]);
      sub[2 * k + 1] = _mm256_add_epi32(q[2], q[3]);
      // int32 -> int8: packs interleave 128-bit lanes; the permute restores element order.
      __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256((__m256i*)(a.q + 32 * k), p);
    }
    for (int h = 0; h < 2; h++) {  // sub-blocks 8h..8h+7: their 8 lanes summed, one int32 each
      const __m256i* p = sub + 8 * h;
      const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
      const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
      const __m256i s = _mm256_add_epi32(_mm256_blend_epi32(t, u, 0xf0), _mm256_permute2x128_si256(t, u, 0x21));
      _mm_storeu_si128((__m128i*)(a.bsum + 8 * h),
                       _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
    }
    a.d = d;
  }
}

// The scalar quantiser's exact output (same products x * (1 / d), round to nearest even,
// clamp to +-127, d rounded to f16 by F16C), 32 elements at a time. Decode prepares an
// activation for every matvec.
void mt_act_prepare_avx2(int wtype, const float* x, int64_t cols, void* act) {
  if (mt_is_kquant(wtype)) return act_prepare_kquant_avx2(x, cols, (mt_act_k*)act);
  if (!mt_is_quant(wtype)) {
    memcpy(act, x, (size_t)cols * sizeof(float));
    return;
  }
  mt_act_group* out = (mt_act_group*)act;
  const int64_t nb = cols / MT_QK;
  memset(out, 0, (size_t)mt_act_groups(nb) * sizeof(mt_act_group));
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < nb; b++) {
    mt_act_group& g = out[b / MT_ACT_GROUP_BLOCKS];
    const int j = (int)(b % MT_ACT_GROUP_BLOCKS);
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
      v[k] = _mm256_loadu_ps(x + b * MT_QK + 8 * k);
      const __m256 a = _mm256_and_ps(v[k], abs_mask);
      amax = _mm256_max_ps(amax, a);
      nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));  // NaN or inf
    }
    if (_mm256_movemask_ps(nonfinite) != 0) {  // as the scalar quantiser: d = NaN, q and sum 0
      g.d[j] = NAN;
      continue;
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float d = _mm_cvtss_f32(m) / 127.0f;
    __m256 inv = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
      __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
    }
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_hadd_epi32(s4, s4);
    s4 = _mm_hadd_epi32(s4, s4);
    // int32 -> int8: packs interleave 128-bit lanes; the permute restores element order.
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i*)g.q[j], p);
    g.d[j] = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    g.sum[j] = _mm_cvtsi128_si32(s4);
  }
}

uint64_t mt_read_sum_avx2(const void* p, size_t bytes) {
  const uint8_t* b = (const uint8_t*)p;
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    s0 = _mm256_add_epi64(s0, _mm256_loadu_si256((const __m256i*)(b + i)));
    s1 = _mm256_add_epi64(s1, _mm256_loadu_si256((const __m256i*)(b + i + 32)));
    s2 = _mm256_add_epi64(s2, _mm256_loadu_si256((const __m256i*)(b + i + 64)));
    s3 = _mm256_add_epi64(s3, _mm256_loadu_si256((const __m256i*)(b + i + 96)));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  uint64_t lanes[4];
  _mm256_storeu_si256((__m256i*)lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // extern "C"

#pragma GCC pop_options
