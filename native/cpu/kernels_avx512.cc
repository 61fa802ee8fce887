// The AVX-512 path (F, BW, VL + VNNI), compiled for those features by the target
// pragma below; isa.cc calls in here only when the CPU and the OS (zmm state) allow it.
//   F32 / F16 / BF16: widen to f32, FMA into 16-lane accumulators.
//   Q8_0 / Q4_0: vpdpbusd (unsigned x signed bytes -> int32, no saturation).
//     Q8_0 weights are made unsigned with w ^ 0x80 = w + 128; Q4_0 nibbles n become n + 120
//     = (n - 8) + 128, the same bytes as the row's Q8_0 copy. The offset is removed in
//     integers: sum((w + 128) q_x) - 128 * sum(q_x).
// matmul keeps one weight row in registers / L1 and runs it against 4 activation rows at once.
#include <immintrin.h>
#include "kernels_internal.h"

// GCC 12's avx512fintrin.h seeds some conversions with _mm512_undefined_*, which
// -Wuninitialized reports once inlined here; the lanes are fully overwritten.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

namespace {

constexpr int kTile = 4;

// A block\'s f16 scale with one F16C instruction (the scalar decoder branches).
inline float scale_f16(const uint8_t* blk) { return _cvtsh_ss(mt_load_u16(blk)); }

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
  if (wtype == MT_F16) return mt_f16_to_f32(mt_load_u16(w + 2 * i));
  return mt_bf16_to_f32(mt_load_u16(w + 2 * i));
}

template <__m512 (*Load)(const uint8_t*, int64_t)>
void dot_float_tile(int wtype, const uint8_t* w, const float* const* x, int64_t cols, float* out) {
  __m512 acc[kTile];
  for (int k = 0; k < kTile; k++) acc[k] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16) {
    __m512 wv = Load(w, i);
    for (int k = 0; k < kTile; k++) acc[k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[k] + i), acc[k]);
  }
  for (int k = 0; k < kTile; k++) out[k] = _mm512_reduce_add_ps(acc[k]);
  for (; i < cols; i++) {
    float wi = scalar_weight(wtype, w, i);
    for (int k = 0; k < kTile; k++) out[k] += wi * x[k][i];
  }
}

template <__m512 (*Load)(const uint8_t*, int64_t)>
float dot_float(int wtype, const uint8_t* w, const float* x, int64_t cols) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= cols; i += 64) {
    a0 = _mm512_fmadd_ps(Load(w, i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(Load(w, i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(Load(w, i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(Load(w, i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= cols; i += 16) a0 = _mm512_fmadd_ps(Load(w, i), _mm512_loadu_ps(x + i), a0);
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < cols; i++) s += scalar_weight(wtype, w, i) * x[i];
  return s;
}

// Unsigned weight bytes of one block, and the offset c they carry (w_unsigned = w + c).
inline __m256i load_u8_q8(const uint8_t* blk) {
  return _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(blk + 2)), _mm256_set1_epi8((char)0x80));
}
// Q4_0: nibble + 120 = (nibble - 8) + 128, the very bytes load_u8_q8 makes of the row's exact
// Q8_0 copy (q = nibble - 8), so both reduce identically (the tier's int8 host copies rely on it).
inline __m256i load_u8_q4(const uint8_t* blk) {
  __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(blk + 2)));
  __m256i nib = _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
  return _mm256_add_epi8(nib, _mm256_set1_epi8(120));
}

// 8 int32 lanes summing exactly to sum((u - c) * q_x).
template <int kOffset>
inline __m256i block_dot(__m256i u, const mt_act_q8& a) {
  __m256i qx = _mm256_loadu_si256((const __m256i*)a.q);
  __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, qx);
  return _mm256_sub_epi32(p, _mm256_setr_epi32(kOffset * a.sum, 0, 0, 0, 0, 0, 0, 0));
}

template <int kBlockBytes, bool kQ4>
inline __m256i load_u8(const uint8_t* blk) {
  return kQ4 ? load_u8_q4(blk) : load_u8_q8(blk);
}

template <int kBlockBytes, bool kQ4>
void dot_quant_tile(const uint8_t* w, const mt_act_q8* const* a, int64_t cols, float* out) {
  constexpr int kOffset = 128;  // Q4_0 bytes carry +128 too (load_u8_q4)
  __m256 acc[kTile];
  for (int k = 0; k < kTile; k++) acc[k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = w + b * kBlockBytes;
    float dw = scale_f16(blk);
    __m256i u = load_u8<kBlockBytes, kQ4>(blk);
    for (int k = 0; k < kTile; k++) {
      __m256i p = block_dot<kOffset>(u, a[k][b]);
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a[k][b].d), acc[k]);
    }
  }
  for (int k = 0; k < kTile; k++) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[k]), _mm256_extractf128_ps(acc[k], 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    out[k] = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
}

template <int kBlockBytes, bool kQ4>
float dot_quant(const uint8_t* w, const mt_act_q8* a, int64_t cols) {
  constexpr int kOffset = 128;  // Q4_0 bytes carry +128 too (load_u8_q4)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
  int64_t nb = cols / MT_QK, b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* b0 = w + b * kBlockBytes;
    const uint8_t* b1 = b0 + kBlockBytes;
    _mm_prefetch((const char*)(b0 + 1024), _MM_HINT_T0);  // as in kernels_avx2.cc
    __m256i p0 = block_dot<kOffset>(load_u8<kBlockBytes, kQ4>(b0), a[b]);
    __m256i p1 = block_dot<kOffset>(load_u8<kBlockBytes, kQ4>(b1), a[b + 1]);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(scale_f16(b0) * a[b].d), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(scale_f16(b1) * a[b + 1].d), acc1);
  }
  for (; b < nb; b++) {
    const uint8_t* b0 = w + b * kBlockBytes;
    __m256i p0 = block_dot<kOffset>(load_u8<kBlockBytes, kQ4>(b0), a[b]);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(scale_f16(b0) * a[b].d), acc0);
  }
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

float dot_row(int wtype, const uint8_t* w, int64_t cols, const void* act) {
  const float* x = (const float*)act;
  const mt_act_q8* a = (const mt_act_q8*)act;
  switch (wtype) {
    case MT_F32: return dot_float<load16_f32>(wtype, w, x, cols);
    case MT_F16: return dot_float<load16_f16>(wtype, w, x, cols);
    case MT_BF16: return dot_float<load16_bf16>(wtype, w, x, cols);
    case MT_Q8_0: return dot_quant<MT_Q8_0_BYTES, false>(w, a, cols);
    case MT_Q4_0: return dot_quant<MT_Q4_0_BYTES, true>(w, a, cols);
    default: return 0.0f;
  }
}

void dot_tile(int wtype, const uint8_t* w, int64_t cols, const void* const* acts, float* out) {
  const float* const* x = (const float* const*)acts;
  const mt_act_q8* const* a = (const mt_act_q8* const*)acts;
  switch (wtype) {
    case MT_F32: dot_float_tile<load16_f32>(wtype, w, x, cols, out); break;
    case MT_F16: dot_float_tile<load16_f16>(wtype, w, x, cols, out); break;
    case MT_BF16: dot_float_tile<load16_bf16>(wtype, w, x, cols, out); break;
    case MT_Q8_0: dot_quant_tile<MT_Q8_0_BYTES, false>(w, a, cols, out); break;
    case MT_Q4_0: dot_quant_tile<MT_Q4_0_BYTES, true>(w, a, cols, out); break;
    default: break;
  }
}

}  // namespace

extern "C" {

void mt_matvec_rows_avx512(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                           int64_t r1) {
  size_t row_bytes = mt_row_bytes(wtype, cols);
  for (int64_t r = r0; r < r1; r++) y[r] = dot_row(wtype, (const uint8_t*)W + r * row_bytes, cols, act);
}

void mt_matmul_rows_avx512(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y,
                           int64_t ldy, int64_t r0, int64_t r1) {
  size_t row_bytes = mt_row_bytes(wtype, cols);
  size_t act_bytes = mt_act_row_bytes(wtype, cols);
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* w = (const uint8_t*)W + r * row_bytes;
    for (int64_t i0 = 0; i0 < n; i0 += kTile) {
      const void* tile[kTile];
      for (int k = 0; k < kTile; k++) {
        int64_t i = i0 + k < n ? i0 + k : n - 1;
        tile[k] = (const uint8_t*)acts + i * act_bytes;
      }
      float out[kTile] = {0, 0, 0, 0};
      dot_tile(wtype, w, cols, tile, out);
      for (int k = 0; k < kTile && i0 + k < n; k++) Y[(i0 + k) * ldy + r] = out[k];
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
