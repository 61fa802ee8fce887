// The quantised matvec / matmul drivers shared by the AVX2 and AVX-512 paths, in the canonical
// order of kernels_internal.h. Include this inside a file's `#pragma GCC target` region and an
// anonymous namespace: each path then gets its own copy, built for its own instructions (a
// shared non-static copy could be merged by the linker into one built for the wrong CPU).
//
// A block kind K says how one 32-element block becomes 8 int32 lanes whose sum is
// sum_i (q_w + c) q_x for a constant offset c = 2^K::kOffsetShift (or c = 0: kOffsetShift < 0):
//   K::kBlockBytes, K::Weight K::weight(const uint8_t* blk), __m256i K::lanes(const K::Weight&, __m256i q_x).
//   K::kMinAt: the byte offset of the block's f16 min m_w (Q5_1), or -1 (no min). With a min, each
//   block then adds lane[j] = fma(m_w[j] * d_x[j], (float)sum_x[j], lane[j]) after its scale fma.
//   K::kScaleE8M0: the block's scale d_w is MXFP4's E8M0 byte at 0 (mt_e8m0_half), else an f16 at 0.
// Per group of 8 blocks the 8 lane vectors are reduced to 8 exact block sums at once (hadd
// tree), the offset is removed in integers with the blocks' activation sums, and one fma adds
// the group into the row's 8 float lanes: lane[j] = fma(d_w[j] * d_x[j], isum[j], lane[j]).
// A short last group goes block by block through the same fmaf.
// The includer includes <immintrin.h>, <math.h> and kernels_internal.h first (outside the namespace).
#pragma once

constexpr int kMatvecRows = 4;               // matvec: weight rows per pass over the activation
constexpr size_t kPrefetchLeadBytes = 4096;  // matvec, short rows: how far ahead whole row groups are fetched
constexpr size_t kLongGroupBytes = 24576;    // matvec: a row group larger than this (~L1) counts as long rows
constexpr size_t kRowLeadBytes = 1024;       // matvec, long rows: how far ahead each row is fetched

// p[j]: block j's 8 lanes -> lane j of the result: the sum of p[j]'s lanes (integers: exact in
// any order).
inline __m256i reduce_block_lanes(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);  // [blocks 0-3, lanes 0-3 | blocks 0-3, lanes 4-7]
  const __m256i b = _mm256_hadd_epi32(h45, h67);  // the same for blocks 4-7
  return _mm256_add_epi32(_mm256_blend_epi32(a, b, 0xf0), _mm256_permute2x128_si256(a, b, 0x21));
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The f16 scales of 8 consecutive blocks, as f32: 8 scalar 16-bit loads inserted into one vector
// and converted at once (a vpgatherdd costs more than these on the CPUs measured).
template <int kBlockBytes>
inline __m256 group_scales(const uint8_t* blk0) {
  __m128i v = _mm_cvtsi32_si128(mt_load_u16(blk0));
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 1 * kBlockBytes), 1);
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 2 * kBlockBytes), 2);
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 3 * kBlockBytes), 3);
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 4 * kBlockBytes), 4);
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 5 * kBlockBytes), 5);
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 6 * kBlockBytes), 6);
  v = _mm_insert_epi16(v, mt_load_u16(blk0 + 7 * kBlockBytes), 7);
  return _mm256_cvtph_ps(v);
}

// MXFP4: the E8M0 bytes of 8 consecutive blocks as f32 2^(e - 128), mt_e8m0_half lane by lane:
// exponent field e - 1 where e >= 2, else the subnormal 0x00200000 << e.
template <int kBlockBytes>
inline __m256 group_scales_e8m0(const uint8_t* blk0) {
  const __m256i e =
      _mm256_setr_epi32(blk0[0], blk0[kBlockBytes], blk0[2 * kBlockBytes], blk0[3 * kBlockBytes], blk0[4 * kBlockBytes],
                        blk0[5 * kBlockBytes], blk0[6 * kBlockBytes], blk0[7 * kBlockBytes]);
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal));
}

// d_w of 8 consecutive blocks, and of one block.
template <class K>
inline __m256 block_scales(const uint8_t* blk0) {
  return K::kScaleE8M0 ? group_scales_e8m0<K::kBlockBytes>(blk0) : group_scales<K::kBlockBytes>(blk0);
}
template <class K>
inline float block_scale(const uint8_t* blk) {
  return K::kScaleE8M0 ? mt_e8m0_half(blk[0]) : _cvtsh_ss(mt_load_u16(blk));
}

template <class K>
inline __m256i remove_offset(__m256i isum, __m256i act_sums) {
  return K::kOffsetShift < 0 ? isum : _mm256_sub_epi32(isum, _mm256_slli_epi32(act_sums, K::kOffsetShift));
}

// The mins of 8 consecutive blocks (K::kMinAt >= 0), or zeros (unused).
template <class K>
inline __m256 group_mins(const uint8_t* blk0) {
  return K::kMinAt < 0 ? _mm256_setzero_ps() : group_scales<K::kBlockBytes>(blk0 + (K::kMinAt < 0 ? 0 : K::kMinAt));
}

// lanes += scales * isums (then mins * act sums) of one full group, weight blocks decoded beforehand.
template <class K>
inline __m256 group_fma(const typename K::Weight* wb, __m256 dw, __m256 mw, const mt_act_group& g, __m256 acc) {
  __m256i p[MT_ACT_GROUP_BLOCKS];
  for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) p[j] = K::lanes(wb[j], _mm256_loadu_si256((const __m256i*)g.q[j]));
  const __m256i sums = _mm256_loadu_si256((const __m256i*)g.sum);
  const __m256i isum = remove_offset<K>(reduce_block_lanes(p), sums);
  const __m256 dx = _mm256_loadu_ps(g.d);
  acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc);
  if (K::kMinAt >= 0) acc = _mm256_fmadd_ps(_mm256_mul_ps(mw, dx), _mm256_cvtepi32_ps(sums), acc);
  return acc;
}

template <class K>
inline __m256 group_fma(const uint8_t* blk0, const mt_act_group& g, __m256 acc) {
  typename K::Weight wb[MT_ACT_GROUP_BLOCKS];
  for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) wb[j] = K::weight(blk0 + j * K::kBlockBytes);
  return group_fma<K>(wb, block_scales<K>(blk0), group_mins<K>(blk0), g, acc);
}

// mt_reduce_quant_lanes in registers: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) + 0.
inline float reduce_quant_lanes(__m256 a) {
  const __m256 t = _mm256_add_ps(a, _mm256_permute2f128_ps(a, a, 1));                // a_j + a_(j+4)
  const __m256 u = _mm256_add_ps(t, _mm256_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));  // lane 0: s0 + s2, lane 1: s1 + s3
  const __m256 v = _mm256_add_ps(u, _mm256_permute_ps(u, _MM_SHUFFLE(2, 3, 0, 1)));  // lane 0: (s0 + s2) + (s1 + s3)
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(v), _mm_setzero_ps()));
}

// The row's float lanes -> y, after the blocks of a short last group (nb % 8 of them at blk0).
template <class K>
inline float finish_row(__m256 acc, const uint8_t* blk0, const mt_act_group& g, int tail) {
  if (tail == 0) return reduce_quant_lanes(acc);
  float lane[MT_QUANT_LANES];
  _mm256_storeu_ps(lane, acc);
  for (int j = 0; j < tail; j++) {
    const uint8_t* blk = blk0 + j * K::kBlockBytes;
    const int32_t lanes_sum = hsum_epi32(K::lanes(K::weight(blk), _mm256_loadu_si256((const __m256i*)g.q[j])));
    const int32_t isum = K::kOffsetShift < 0 ? lanes_sum : lanes_sum - (g.sum[j] << K::kOffsetShift);
    lane[j] = fmaf(block_scale<K>(blk) * g.d[j], (float)isum, lane[j]);
    if (K::kMinAt >= 0)
      lane[j] = fmaf(_cvtsh_ss(mt_load_u16(blk + (K::kMinAt < 0 ? 0 : K::kMinAt))) * g.d[j], (float)g.sum[j], lane[j]);
  }
  return mt_reduce_quant_lanes(lane);
}

// y[r] = row r . a for R consecutive rows (rows are row_bytes apart, nb blocks each).
// Prefetch: short rows (a group of them computes in less than a memory latency, as an expert's
// down rows do) fetch whole row groups at least kPrefetchLeadBytes ahead; long rows (a group about
// as large as L1: the next one would evict this one) fetch each row's own stream kRowLeadBytes ahead.
template <class K, int R, bool kLongRows>
void dot_rows(const uint8_t* w, size_t row_bytes, const mt_act_group* a, int64_t nb, float* y) {
  constexpr size_t kGroupBytes = MT_ACT_GROUP_BLOCKS * K::kBlockBytes;
  __m256 acc[R];
  for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  const size_t rows_bytes = R * row_bytes;
  const uint8_t* next = w + rows_bytes * ((kPrefetchLeadBytes + rows_bytes - 1) / rows_bytes);
  const int64_t full = nb / MT_ACT_GROUP_BLOCKS;
  for (int64_t g = 0; g < full; g++) {
    if (!kLongRows)
      for (size_t p = 0; p < R * kGroupBytes; p += 64)
        _mm_prefetch((const char*)(next + g * R * kGroupBytes + p), _MM_HINT_T0);
    for (int r = 0; r < R; r++) {
      const uint8_t* blk0 = w + r * row_bytes + g * kGroupBytes;
      if (kLongRows)
        for (size_t p = 0; p < kGroupBytes; p += 64) _mm_prefetch((const char*)(blk0 + kRowLeadBytes + p), _MM_HINT_T0);
      acc[r] = group_fma<K>(blk0, a[g], acc[r]);
    }
  }
  const int tail = (int)(nb % MT_ACT_GROUP_BLOCKS);
  for (int r = 0; r < R; r++) y[r] = finish_row<K>(acc[r], w + r * row_bytes + full * kGroupBytes, a[full], tail);
}

template <class K, bool kLongRows>
void matvec_rows(const uint8_t* W, size_t row_bytes, const mt_act_group* a, int64_t nb, float* y, int64_t r0,
                 int64_t r1) {
  int64_t r = r0;
  for (; r + kMatvecRows <= r1; r += kMatvecRows)
    dot_rows<K, kMatvecRows, kLongRows>(W + r * row_bytes, row_bytes, a, nb, y + r);
  for (; r < r1; r++) dot_rows<K, 1, kLongRows>(W + r * row_bytes, row_bytes, a, nb, y + r);
}

template <class K>
void quant_matvec(const uint8_t* W, int64_t cols, const mt_act_group* a, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = cols / MT_QK;
  const size_t row_bytes = (size_t)nb * K::kBlockBytes;
  if (kMatvecRows * row_bytes > kLongGroupBytes)
    matvec_rows<K, true>(W, row_bytes, a, nb, y, r0, r1);
  else
    matvec_rows<K, false>(W, row_bytes, a, nb, y, r0, r1);
}

// out[r * A + k] = row r . act k for an R x A tile: each weight group is decoded once per row and
// meets the A activation rows' groups (prefill rows sit in L1 / L2).
template <class K, int R, int A>
void quant_tile(const uint8_t* w, size_t row_bytes, const mt_act_group* const* a, int64_t nb, float* out) {
  constexpr size_t kGroupBytes = MT_ACT_GROUP_BLOCKS * K::kBlockBytes;
  __m256 acc[R][A];
  for (int r = 0; r < R; r++)
    for (int k = 0; k < A; k++) acc[r][k] = _mm256_setzero_ps();
  const int64_t full = nb / MT_ACT_GROUP_BLOCKS;
  for (int64_t g = 0; g < full; g++) {
    for (int r = 0; r < R; r++) {
      const uint8_t* blk0 = w + r * row_bytes + g * kGroupBytes;
      typename K::Weight wb[MT_ACT_GROUP_BLOCKS];
      for (int j = 0; j < MT_ACT_GROUP_BLOCKS; j++) wb[j] = K::weight(blk0 + j * K::kBlockBytes);
      const __m256 dw = block_scales<K>(blk0), mw = group_mins<K>(blk0);
      for (int k = 0; k < A; k++) acc[r][k] = group_fma<K>(wb, dw, mw, a[k][g], acc[r][k]);
    }
  }
  const int tail = (int)(nb % MT_ACT_GROUP_BLOCKS);
  for (int r = 0; r < R; r++)
    for (int k = 0; k < A; k++)
      out[r * A + k] = finish_row<K>(acc[r][k], w + r * row_bytes + full * kGroupBytes, a[k][full], tail);
}

template <class K, int R>
void quant_tile_m(int64_t m, const uint8_t* w, size_t row_bytes, const mt_act_group* const* a, int64_t nb, float* out) {
  switch (m) {
    case 1:
      quant_tile<K, R, 1>(w, row_bytes, a, nb, out);
      break;
    case 2:
      quant_tile<K, R, 2>(w, row_bytes, a, nb, out);
      break;
    case 3:
      quant_tile<K, R, 3>(w, row_bytes, a, nb, out);
      break;
    default:
      quant_tile<K, R, 4>(w, row_bytes, a, nb, out);
      break;
  }
}

// Y [n, ldy] (columns r0..r1) = acts [n, cols] W^T, in tiles of kR weight rows x up to 4
// activation rows (a short last row group row by row).
template <class K, int kR>
void quant_matmul(const uint8_t* W, int64_t cols, const uint8_t* acts, int64_t n, float* Y, int64_t ldy, int64_t r0,
                  int64_t r1) {
  constexpr int kA = 4;
  const int64_t nb = cols / MT_QK;
  const size_t row_bytes = (size_t)nb * K::kBlockBytes;
  const size_t act_bytes = (size_t)mt_act_groups(nb) * sizeof(mt_act_group);
  for (int64_t r = r0; r < r1;) {
    const int64_t rows = r + kR <= r1 ? kR : 1;
    const uint8_t* w = W + r * row_bytes;
    for (int64_t i0 = 0; i0 < n; i0 += kA) {
      const int64_t m = n - i0 < kA ? n - i0 : kA;
      const mt_act_group* tile[kA];
      for (int64_t k = 0; k < m; k++) tile[k] = (const mt_act_group*)(acts + (i0 + k) * act_bytes);
      float out[kR * kA];
      if (rows == kR)
        quant_tile_m<K, kR>(m, w, row_bytes, tile, nb, out);
      else
        quant_tile_m<K, 1>(m, w, row_bytes, tile, nb, out);
      for (int64_t q = 0; q < rows; q++)
        for (int64_t k = 0; k < m; k++) Y[(i0 + k) * ldy + r + q] = out[q * m + k];
    }
    r += rows;
  }
}
