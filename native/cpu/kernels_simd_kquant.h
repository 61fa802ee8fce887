// The k-quant matvec / matmul drivers (Q2_K .. Q6_K, IQ4_XS weights x Q8_K activations, mt_act_k)
// shared by the AVX2 and AVX-512 paths, in the canonical order of kernels_internal.h. Include this
// inside a file's `#pragma GCC target` region and anonymous namespace, after kernels_kquant_ymm.h
// (kernels_simd_quant.h says why).
//
// The includer defines a decoded super-block B<kType> (its own register form) and the form B::Act
// of an activation block that it reads:
//   void B::decode(const uint8_t* blk);
//   static B::Act B::act(const mt_act_k& x);  once per activation block (matvec: for 8 weight rows)
//   __m256i B::isum(const B::Act& x) const;  8 int32 lanes summing to the block's exact isum
//   __m256i B::msum(const B::Act& x) const;  8 int32 lanes summing to its exact msum (with a min)
// (The includers' vpmaddubsw pairs never saturate: codes |u| <= 63, or IQ4_XS's |u| <= 127 with the
// sign moved onto the activation, times |q| <= 127, twice, is below 2^15.)
// Integer sums are exact in any order; only the float steps fix the bits, and those run here, one
// super-block at a time as the scalar path does, with one vector lane per row:
//   matvec: 8 weight rows at once; their 8 exact isums (and msums) land in one vector (lane i =
//           row i) and L[b % 8] (lane i: row i's canonical lane b % 8) takes both fmas for all 8:
//           L = fma(d_w * d_x, isum, L), then L = fma(-(dmin_w * d_x), msum, L);
//   matmul: each super-block of a weight row is decoded once and meets every activation row, 8 at
//           a time, the same way (lane i = activation row i); the lanes of all rows stay in memory
//           while the weight row's blocks go by.
// The includer includes <immintrin.h>, <math.h>, <string.h>, <vector> and kernels_internal.h first.
#pragma once

// p[i]: row i's 8 lanes -> lane i of the result: the sum of p[i]'s lanes (exact integers).
inline __m256i reduce_rows8(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);  // [rows 0-3, lanes 0-3 | rows 0-3, lanes 4-7]
  const __m256i b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_blend_epi32(a, b, 0xf0), _mm256_permute2x128_si256(a, b, 0x21));
}

// reduce_rows8 for 4 rows: lane i < 4 = the sum of p[i]'s lanes, lanes 4..7 zero.
inline __m256i reduce_rows4(const __m256i* p) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  return _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1)));
}

// mt_reduce_quant_lanes for 8 rows at once: ((L0 + L4) + (L2 + L6)) + ((L1 + L5) + (L3 + L7)) + 0.
inline __m256 reduce_lanes8(const __m256* L) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(L[0], L[4]), _mm256_add_ps(L[2], L[6])),
                                 _mm256_add_ps(_mm256_add_ps(L[1], L[5]), _mm256_add_ps(L[3], L[7])));
  return _mm256_add_ps(s, _mm256_setzero_ps());
}

// The f16 at byte `at` of 8 rows, as f32.
inline __m256 f16_rows8(const uint8_t* const* row, size_t at) {
  __m128i v = _mm_cvtsi32_si128(mt_load_u16(row[0] + at));
  v = _mm_insert_epi16(v, mt_load_u16(row[1] + at), 1);
  v = _mm_insert_epi16(v, mt_load_u16(row[2] + at), 2);
  v = _mm_insert_epi16(v, mt_load_u16(row[3] + at), 3);
  v = _mm_insert_epi16(v, mt_load_u16(row[4] + at), 4);
  v = _mm_insert_epi16(v, mt_load_u16(row[5] + at), 5);
  v = _mm_insert_epi16(v, mt_load_u16(row[6] + at), 6);
  v = _mm_insert_epi16(v, mt_load_u16(row[7] + at), 7);
  return _mm256_cvtph_ps(v);
}

// L += the super-block's canonical fmas for 8 rows: dw, dm the rows' d_w * d_x and dmin_w * d_x.
template <int kType>
inline __m256 fma_rows8(__m256 L, __m256 dw, __m256i isum, __m256 dm, __m256i msum) {
  L = _mm256_fmadd_ps(dw, _mm256_cvtepi32_ps(isum), L);
  if (kquant_has_min<kType>())
    L = _mm256_fmadd_ps(_mm256_xor_ps(dm, _mm256_set1_ps(-0.0f)), _mm256_cvtepi32_ps(msum), L);
  return L;
}

constexpr int kKquantRows = 8;  // matvec: weight rows per pass, one float vector lane each
constexpr size_t kKquantLeadBytes =
    6144;  // matvec, short rows: how far ahead of the rows in hand the stream is fetched
constexpr size_t kKquantRowLeadBytes = 1024;  // matvec, long rows: how far ahead each row's own stream is fetched

// y[r0..r1) = W rows . x for rows r0..r1, 8 at a time (a short last group repeats its last row and
// drops the copies' results). Prefetch: a group of short rows (8 rows within kKquantLeadBytes, as an
// expert's rows are) is consumed whole each pass, so the contiguous stream kKquantLeadBytes ahead of
// it is fetched one block column (8 blocks' bytes) per step; long rows are 8 streams that advance a
// block a step, each fetched kKquantRowLeadBytes ahead.
template <int kType, template <int> class B, bool kLongRows>
void kquant_matvec_rows(const uint8_t* W, int64_t nb, const mt_act_k* a, float* y, int64_t r0, int64_t r1) {
  constexpr int kBytes = block_bytes<kType>();
  const size_t row_bytes = (size_t)nb * kBytes;
  for (int64_t r = r0; r < r1; r += kKquantRows) {
    const uint8_t* row[kKquantRows];
    for (int i = 0; i < kKquantRows; i++) row[i] = W + (r + i < r1 ? r + i : r1 - 1) * row_bytes;
    const uint8_t* ahead = row[0] + kKquantLeadBytes;
    __m256 L[MT_QUANT_LANES];
    for (int l = 0; l < MT_QUANT_LANES; l++) L[l] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      if (kLongRows) {
        for (int i = 0; i < kKquantRows; i++)
#pragma GCC unroll 4
          for (int p = 0; p < kBytes; p += 64)
            _mm_prefetch((const char*)(row[i] + kKquantRowLeadBytes + b * kBytes + p), _MM_HINT_T0);
      } else {
#pragma GCC unroll 32
        for (int p = 0; p < kKquantRows * kBytes; p += 64)
          _mm_prefetch((const char*)(ahead + b * kKquantRows * kBytes + p), _MM_HINT_T0);
      }
      const mt_act_k& xb = a[b];
      const typename B<kType>::Act x = B<kType>::act(xb);
      __m256i p[kKquantRows], m[kKquantRows];
      for (int i = 0; i < kKquantRows; i++) {
        B<kType> k;
        k.decode(row[i] + b * kBytes);
        p[i] = k.isum(x);
        if (kquant_has_min<kType>()) m[i] = k.msum(x);
      }
      const __m256 dx = _mm256_set1_ps(xb.d);
      const size_t at = (size_t)b * kBytes;
      const __m256 dw = _mm256_mul_ps(f16_rows8(row, at + mt_kquant_d_at(kType)), dx);
      const __m256 dm = kquant_has_min<kType>() ? _mm256_mul_ps(f16_rows8(row, at + mt_kquant_dmin_at(kType)), dx) : dx;
      L[b % MT_QUANT_LANES] = fma_rows8<kType>(L[b % MT_QUANT_LANES], dw, reduce_rows8(p), dm,
                                               kquant_has_min<kType>() ? reduce_rows8(m) : p[0]);
    }
    float out[kKquantRows];
    _mm256_storeu_ps(out, reduce_lanes8(L));
    for (int i = 0; i < kKquantRows && r + i < r1; i++) y[r + i] = out[i];
  }
}

template <int kType, template <int> class B>
void kquant_matvec(const uint8_t* W, int64_t cols, const mt_act_k* a, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = cols / MT_QK_K;
  if (kKquantRows * (size_t)nb * block_bytes<kType>() > kKquantLeadBytes)
    kquant_matvec_rows<kType, B, true>(W, nb, a, y, r0, r1);
  else
    kquant_matvec_rows<kType, B, false>(W, nb, a, y, r0, r1);
}

// T activation rows (T <= 8, rows nb blocks apart) against one decoded block: their isums (and
// msums) reduced into lane i = row i; lanes T..7 are zero (a tile of up to 4 rows reduces 4).
template <int kType, int T, template <int> class B>
inline void tile_sums(const B<kType>& k, const mt_act_k* x, int64_t nb, __m256i* isum, __m256i* msum) {
  __m256i p[8], m[8];
  for (int i = 0; i < 8; i++) {
    if (i >= T) {
      p[i] = m[i] = _mm256_setzero_si256();
      continue;
    }
    const typename B<kType>::Act xi = B<kType>::act(x[i * nb]);
    p[i] = k.isum(xi);
    if (kquant_has_min<kType>()) m[i] = k.msum(xi);
  }
  *isum = T <= 4 ? reduce_rows4(p) : reduce_rows8(p);
  if (kquant_has_min<kType>()) *msum = T <= 4 ? reduce_rows4(m) : reduce_rows8(m);
}

template <int kType, template <int> class B>
inline void tile_sums_n(int64_t t, const B<kType>& k, const mt_act_k* x, int64_t nb, __m256i* isum, __m256i* msum) {
  switch (t) {
    case 1:
      return tile_sums<kType, 1, B>(k, x, nb, isum, msum);
    case 2:
      return tile_sums<kType, 2, B>(k, x, nb, isum, msum);
    case 3:
      return tile_sums<kType, 3, B>(k, x, nb, isum, msum);
    case 4:
      return tile_sums<kType, 4, B>(k, x, nb, isum, msum);
    case 5:
      return tile_sums<kType, 5, B>(k, x, nb, isum, msum);
    case 6:
      return tile_sums<kType, 6, B>(k, x, nb, isum, msum);
    case 7:
      return tile_sums<kType, 7, B>(k, x, nb, isum, msum);
    default:
      return tile_sums<kType, 8, B>(k, x, nb, isum, msum);
  }
}

constexpr size_t kKquantActBytes = 49152;  // matmul: activation rows per pass, as bytes of their blocks (~L1 + a bit)

// Y [n, ldy] (columns r0..r1) = acts [n, cols] W^T. The activation rows go in passes of whole tiles
// of 8 that fit in about kKquantActBytes; per pass and weight row, each super-block is decoded once
// and meets the pass's tiles (a short last tile computes only its rows). lanes[t][l] holds tile t's
// canonical lane l (lane i = row 8t + i) and dx[t][b] the tile's d_x.
template <int kType, template <int> class B>
void kquant_matmul(const uint8_t* W, int64_t cols, const uint8_t* acts, int64_t n, float* Y, int64_t ldy, int64_t r0,
                   int64_t r1) {
  constexpr int kBytes = block_bytes<kType>();
  const int64_t nb = cols / MT_QK_K;
  const size_t row_bytes = (size_t)nb * kBytes;
  const mt_act_k* a = (const mt_act_k*)acts;  // row i: a + i * nb
  const int64_t tiles = (n + 7) / 8;
  const int64_t tile_bytes = 8 * nb * (int64_t)sizeof(mt_act_k);
  const int64_t pass_tiles = tile_bytes >= (int64_t)kKquantActBytes ? 1 : (int64_t)kKquantActBytes / tile_bytes;
  thread_local std::vector<float> buf;  // 8 floats a vector
  if ((int64_t)buf.size() < 8 * tiles * (nb + MT_QUANT_LANES)) buf.resize(8 * tiles * (nb + MT_QUANT_LANES));
  float* dx = buf.data();                      // [tiles][nb][8]
  float* lanes = buf.data() + 8 * tiles * nb;  // [tiles][8 lanes][8 rows]
  for (int64_t t = 0; t < tiles; t++)
    for (int64_t b = 0; b < nb; b++)
      for (int i = 0; i < 8; i++) dx[(t * nb + b) * 8 + i] = 8 * t + i < n ? a[(8 * t + i) * nb + b].d : 0.0f;
  for (int64_t t0 = 0; t0 < tiles; t0 += pass_tiles) {
    const int64_t t1 = t0 + pass_tiles < tiles ? t0 + pass_tiles : tiles;
    for (int64_t r = r0; r < r1; r++) {
      const uint8_t* w = W + r * row_bytes;
      for (int64_t b = 0; b < nb; b++) {
        const uint8_t* blk = w + b * kBytes;
        B<kType> k;
        k.decode(blk);
        const __m256 d_w = _mm256_set1_ps(_cvtsh_ss(mt_load_u16(blk + mt_kquant_d_at(kType))));
        const __m256 dmin_w =
            kquant_has_min<kType>() ? _mm256_set1_ps(_cvtsh_ss(mt_load_u16(blk + mt_kquant_dmin_at(kType)))) : d_w;
        for (int64_t t = t0; t < t1; t++) {
          __m256i isum, msum = _mm256_setzero_si256();
          tile_sums_n<kType, B>(n - 8 * t, k, a + 8 * t * nb + b, nb, &isum, &msum);
          float* L = lanes + 8 * (t * MT_QUANT_LANES + b % MT_QUANT_LANES);
          const __m256 d_x = _mm256_loadu_ps(dx + 8 * (t * nb + b));
          const __m256 prev = b < MT_QUANT_LANES ? _mm256_setzero_ps() : _mm256_loadu_ps(L);  // lanes start at +0
          _mm256_storeu_ps(L, fma_rows8<kType>(prev, _mm256_mul_ps(d_w, d_x), isum, _mm256_mul_ps(dmin_w, d_x), msum));
        }
      }
      for (int64_t t = t0; t < t1; t++) {
        __m256 L[MT_QUANT_LANES];
        for (int l = 0; l < MT_QUANT_LANES; l++)  // a lane no block reached (nb < 8) is +0
          L[l] = l < nb ? _mm256_loadu_ps(lanes + 8 * (t * MT_QUANT_LANES + l)) : _mm256_setzero_ps();
        float out[8];
        _mm256_storeu_ps(out, reduce_lanes8(L));
        for (int64_t i = 0; i < 8 && 8 * t + i < n; i++) Y[(8 * t + i) * ldy + r] = out[i];
      }
    }
  }
}

template <template <int> class B>
inline void kquant_matvec_any(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                              int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const mt_act_k* a = (const mt_act_k*)act;
  switch (wtype) {
    case MT_Q2_K:
      return kquant_matvec<MT_Q2_K, B>(w, cols, a, y, r0, r1);
    case MT_Q3_K:
      return kquant_matvec<MT_Q3_K, B>(w, cols, a, y, r0, r1);
    case MT_Q4_K:
      return kquant_matvec<MT_Q4_K, B>(w, cols, a, y, r0, r1);
    case MT_Q5_K:
      return kquant_matvec<MT_Q5_K, B>(w, cols, a, y, r0, r1);
    case MT_Q6_K:
      return kquant_matvec<MT_Q6_K, B>(w, cols, a, y, r0, r1);
    case MT_IQ4_XS:
      return kquant_matvec<MT_IQ4_XS, B>(w, cols, a, y, r0, r1);
    default:
      return;
  }
}

template <template <int> class B>
inline void kquant_matmul_any(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y,
                              int64_t ldy, int64_t r0, int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const uint8_t* a = (const uint8_t*)acts;
  switch (wtype) {
    case MT_Q2_K:
      return kquant_matmul<MT_Q2_K, B>(w, cols, a, n, Y, ldy, r0, r1);
    case MT_Q3_K:
      return kquant_matmul<MT_Q3_K, B>(w, cols, a, n, Y, ldy, r0, r1);
    case MT_Q4_K:
      return kquant_matmul<MT_Q4_K, B>(w, cols, a, n, Y, ldy, r0, r1);
    case MT_Q5_K:
      return kquant_matmul<MT_Q5_K, B>(w, cols, a, n, Y, ldy, r0, r1);
    case MT_Q6_K:
      return kquant_matmul<MT_Q6_K, B>(w, cols, a, n, Y, ldy, r0, r1);
    case MT_IQ4_XS:
      return kquant_matmul<MT_IQ4_XS, B>(w, cols, a, n, Y, ldy, r0, r1);
    default:
      return;
  }
}
