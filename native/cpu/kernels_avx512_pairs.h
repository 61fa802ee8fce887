// The AVX-512 quantised matmul, which puts two (weight row, activation row) pairs side by side in
// one zmm: 256-bit half h holds pair h's 8 block lanes, so one vpdpbusd, one reduction step and
// one fma serve two pairs. The order of every sum is still the canonical one (kernels_internal.h):
// each half reduces its own 8 blocks to exact integer sums and adds them into its own 8 lanes.
// The pairs are one weight row (its blocks broadcast) against two activation rows, copied once
// per call into a paired layout (PairGroup) so a pair's block is one load. (Pairs of weight rows
// against one activation, for matvec, measured slower than kernels_simd_quant.h's ymm rows.)
// Include inside the AVX-512 file's target region and anonymous namespace, after
// kernels_simd_quant.h (which supplies finish_row and block_scales). K as there, plus
// K::weight_both(blk) -> zmm [blk | blk].
#pragma once

// hadd_epi32 in each 128-bit lane of a zmm: [a0+a1, a2+a3, b0+b1, b2+b3].
inline __m512i hadd512(__m512i a, __m512i b) {
  const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
  const __m512i even = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0)));
  const __m512i odd = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_epi32(even, odd);
}

// p[j]: block j's lanes for both pairs -> lane j of each half: that pair's exact sum of block j.
inline __m512i reduce_block_lanes2(const __m512i* p) {
  const __m512i a = hadd512(hadd512(p[0], p[1]), hadd512(p[2], p[3]));
  const __m512i b = hadd512(hadd512(p[4], p[5]), hadd512(p[6], p[7]));
  // Per half as in reduce_block_lanes: [a.lo | b.hi] + [a.hi | b.lo] (128-bit lanes).
  const __m512i lo = _mm512_mask_blend_epi32(0xf0f0, a, b);
  const __m512i hi = _mm512_permutex2var_epi64(a, _mm512_setr_epi64(2, 3, 8, 9, 6, 7, 12, 13), b);
  return _mm512_add_epi32(lo, hi);
}

inline __m512 join256(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
inline __m256 half_lo(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 half_hi(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }
inline __m512i broadcast256i(const void* p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)p)); }

// reduce_quant_lanes on each 256-bit half: out[0] from half 0, out[1] from half 1.
inline void reduce_quant_lanes2(__m512 a, float* out) {
  const __m512 t = _mm512_add_ps(a, _mm512_shuffle_f32x4(a, a, _MM_SHUFFLE(2, 3, 0, 1)));  // a_j + a_(j+4) per half
  const __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 v = _mm512_add_ps(_mm512_add_ps(u, _mm512_permute_ps(u, _MM_SHUFFLE(2, 3, 0, 1))), _mm512_setzero_ps());
  out[0] = _mm512_cvtss_f32(v);
  out[1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(v, 2));
}

template <class K>
inline __m512i remove_offset2(__m512i isum, __m512i act_sums) {
  return K::kOffsetShift < 0 ? isum : _mm512_sub_epi32(isum, _mm512_slli_epi32(act_sums, K::kOffsetShift));
}

// acc += scale * isum for one full group of both pairs: w[j], q[j] the operands of block j.
template <class K>
inline __m512 group_fma2(const __m512i* w, const __m512i* q, __m512 scale, __m512i act_sums, __m512 acc) {
  __m512i p[MT_ACT_GROUP_BLOCKS];
  for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) p[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], q[j]);
  const __m512i isum = remove_offset2<K>(reduce_block_lanes2(p), act_sums);
  return _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(isum), acc);
}

// ---- matmul: one row against activation rows k and k + 1 ----
// Two activation rows' group g side by side: half 0 = row k, half 1 = row k + 1.
struct PairGroup {
  float d[2 * MT_ACT_GROUP_BLOCKS];
  int32_t sum[2 * MT_ACT_GROUP_BLOCKS];
  int8_t q[MT_ACT_GROUP_BLOCKS][2 * MT_QK];
};

// Pairs of rows (an odd last row is paired with itself; its twin's results are dropped).
inline const PairGroup* pair_acts(const uint8_t* acts, size_t act_bytes, int64_t n, int64_t groups) {
  thread_local std::vector<PairGroup> buf;
  const int64_t pairs = (n + 1) / 2;
  if ((int64_t)buf.size() < pairs * groups) buf.resize(pairs * groups);
  for (int64_t p = 0; p < pairs; p++)
    for (int h = 0; h < 2; h++) {
      const int64_t i = 2 * p + h < n ? 2 * p + h : n - 1;
      const mt_act_group* src = (const mt_act_group*)(acts + i * act_bytes);
      for (int64_t g = 0; g < groups; g++) {
        PairGroup& dst = buf[p * groups + g];
        memcpy(dst.d + h * MT_ACT_GROUP_BLOCKS, src[g].d, sizeof src[g].d);
        memcpy(dst.sum + h * MT_ACT_GROUP_BLOCKS, src[g].sum, sizeof src[g].sum);
        for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) memcpy(dst.q[j] + h * MT_QK, src[g].q[j], MT_QK);
      }
    }
  return buf.data();
}

// out[r * 2P + k] = row r . act k for R rows x P activation pairs.
template <class K, int R, int P>
void pair_tile(const uint8_t* w, size_t row_bytes, const PairGroup* const* pg, const mt_act_group* const* a, int64_t nb,
               float* out) {
  constexpr size_t kGroupBytes = MT_ACT_GROUP_BLOCKS * K::kBlockBytes;
  __m512 acc[R][P];
  for (int r = 0; r < R; r++)
    for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
  const int64_t full = nb / MT_ACT_GROUP_BLOCKS;
  for (int64_t g = 0; g < full; g++) {
    for (int r = 0; r < R; r++) {
      const uint8_t* blk0 = w + r * row_bytes + g * kGroupBytes;
      __m512i wv[MT_ACT_GROUP_BLOCKS];
      for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) wv[j] = K::weight_both(blk0 + j * K::kBlockBytes);
      const __m256 dw8 = block_scales<K>(blk0);
      const __m512 dw = join256(dw8, dw8);
      for (int p = 0; p < P; p++) {
        const PairGroup& x = pg[p][g];
        __m512i qv[MT_ACT_GROUP_BLOCKS];
        for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) qv[j] = _mm512_loadu_si512((const void*)x.q[j]);
        const __m512 scale = _mm512_mul_ps(dw, _mm512_loadu_ps(x.d));
        acc[r][p] = group_fma2<K>(wv, qv, scale, _mm512_loadu_si512((const void*)x.sum), acc[r][p]);
      }
    }
  }
  const int tail = (int)(nb % MT_ACT_GROUP_BLOCKS);
  if (tail == 0) {  // the usual case: both halves reduced at once, in registers
    for (int r = 0; r < R; r++)
      for (int p = 0; p < P; p++) reduce_quant_lanes2(acc[r][p], &out[r * 2 * P + 2 * p]);
    return;
  }
  for (int r = 0; r < R; r++) {
    const uint8_t* tail_blk = w + r * row_bytes + full * kGroupBytes;
    for (int p = 0; p < P; p++) {
      out[r * 2 * P + 2 * p] = finish_row<K>(half_lo(acc[r][p]), tail_blk, a[2 * p][full], tail);
      out[r * 2 * P + 2 * p + 1] = finish_row<K>(half_hi(acc[r][p]), tail_blk, a[2 * p + 1][full], tail);
    }
  }
}

// Y [n, ldy] (columns r0..r1) = acts [n, cols] W^T in tiles of kR rows x 2 kP activation rows.
template <class K, int kR, int kP>
void quant_matmul2(const uint8_t* W, int64_t cols, const uint8_t* acts, int64_t n, float* Y, int64_t ldy, int64_t r0,
                   int64_t r1) {
  const int64_t nb = cols / MT_QK, groups = mt_act_groups(nb);
  const size_t row_bytes = (size_t)nb * K::kBlockBytes;
  const size_t act_bytes = (size_t)groups * sizeof(mt_act_group);
  const PairGroup* paired = pair_acts(acts, act_bytes, n, groups);
  const int64_t pairs = (n + 1) / 2;
  for (int64_t r = r0; r < r1;) {
    const int64_t rows = r + kR <= r1 ? kR : 1;
    const uint8_t* w = W + r * row_bytes;
    for (int64_t p0 = 0; p0 < pairs; p0 += kP) {
      const int64_t np = pairs - p0 < kP ? pairs - p0 : kP;
      const PairGroup* pg[kP];
      const mt_act_group* a[2 * kP];
      for (int64_t p = 0; p < kP; p++) {
        const int64_t pp = p < np ? p0 + p : p0;  // a short tile repeats its first pair
        pg[p] = paired + pp * groups;
        for (int h = 0; h < 2; h++) {
          const int64_t i = 2 * pp + h < n ? 2 * pp + h : n - 1;
          a[2 * p + h] = (const mt_act_group*)(acts + i * act_bytes);
        }
      }
      float out[kR * 2 * kP];
      if (rows == kR)
        pair_tile<K, kR, kP>(w, row_bytes, pg, a, nb, out);
      else
        pair_tile<K, 1, kP>(w, row_bytes, pg, a, nb, out);
      for (int64_t q = 0; q < rows; q++)
        for (int64_t k = 0; k < 2 * np; k++) {
          const int64_t i = 2 * p0 + k;
          if (i < n) Y[i * ldy + r + q] = out[q * 2 * kP + k];
        }
    }
    r += rows;
  }
}
