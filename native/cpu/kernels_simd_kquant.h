// The k-quant matvec / matmul (Q2_K .. Q6_K weights x Q8_K activations, mt_act_k) shared by the
// AVX2 and AVX-512 paths, in the canonical order of kernels_internal.h. Include this inside a
// file's `#pragma GCC target` region and an anonymous namespace (kernels_simd_quant.h says why).
//
// The includer defines the dot policy D: D::W, the weights of one decoded super-block in the
// form its dot wants (D::prep(const KBlock&, D::W*)), and __m256i D::dot(const D::W&, const int8_t* q)
// -> 8 int32 lanes summing to sum_k sc[k] sum_{i in k} u_i q_i (exact); D::dot_signed the same for
// signed codes (IQ4_XS: u holds the table values, dotted as maddubs(|u|, q with u's sign)).
// Per super-block of 256 elements:
//   decode: 8 ymm of unsigned codes u = q + off in element order (ymm j = elements 32j..32j+31,
//           i.e. the sub-blocks 2j and 2j+1), and the 16 integer scales / mins as int16 (the
//           integers of kernels_kquant.h's decoders, taken a 32-bit word at a time);
//   dot:    p16 = maddubs(u_j, x_j) (int16 pairs, |p| <= 2 * 63 * 127: no saturation), then
//           acc += p16 * [sc[2j] x 8 | sc[2j+1] x 8] in int32 (D::dot); the sum of acc's lanes minus
//           off * sum_k sc[k] bsum[k] is the exact isum, and sum_k m[k] bsum[k] the exact msum;
//   float:  the two fmas of the canonical order into the row's lane[b % 8]: matvec one row at a
//           time (fmaf), matmul 8 activation rows at once (vector lane i = row i).
// Integer sums are exact in any order, so only the float steps fix the bits, and they are the
// scalar path's, one super-block at a time.
// The includer includes <immintrin.h>, <math.h>, <string.h>, <vector> and kernels_internal.h first.
#pragma once

struct KBlock {
  __m256i u[8];    // unsigned codes, element order
  __m256i sc[8];   // sc[j]: int16 [sc[2j] x 8 | sc[2j+1] x 8], the madd operand of ymm j
  __m256i sc_all;  // the 16 scales as int16
  __m256i m_all;   // the 16 mins as int16 (zeros without a min)
  float d, dmin;
};

template <int s>
inline __m256i bits_at(__m256i v, int mask) {  // (byte >> s) & mask, per byte
  return _mm256_and_si256(_mm256_srli_epi16(v, s), _mm256_set1_epi8((char)mask));
}

template <int kType>
inline void decode_codes(const uint8_t* blk, __m256i* u) {
  if (kType == MT_IQ4_XS) {
    // ymm j = sub-block j: its 16 bytes' low nibbles are elements 0..15, high nibbles 16..31 (as
    // Q4_0), looked up in the table (the 16 values in both 128-bit halves) -> signed codes.
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)mt_iq4nl_values));
    for (int j = 0; j < 8; j++) {
      const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(blk + 8 + 16 * j)));
      const __m256i nib =
          _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
      u[j] = _mm256_shuffle_epi8(table, nib);
    }
  } else if (kType == MT_Q2_K || kType == MT_Q3_K) {
    const uint8_t* qs = blk + (kType == MT_Q2_K ? 16 : 32);
    const __m256i h = _mm256_loadu_si256((const __m256i*)blk);  // Q3_K's hmask
    for (int n = 0; n < 2; n++) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(qs + 32 * n));
      u[4 * n + 0] = bits_at<0>(v, 3);
      u[4 * n + 1] = bits_at<2>(v, 3);
      u[4 * n + 2] = bits_at<4>(v, 3);
      u[4 * n + 3] = bits_at<6>(v, 3);
      if (kType == MT_Q3_K) {
        const __m256i hb[4] = {bits_at<0>(h, 1), bits_at<1>(h, 1), bits_at<2>(h, 1), bits_at<3>(h, 1)};
        const __m256i hc[4] = {bits_at<4>(h, 1), bits_at<5>(h, 1), bits_at<6>(h, 1), bits_at<7>(h, 1)};
        for (int j = 0; j < 4; j++)
          u[4 * n + j] = _mm256_or_si256(u[4 * n + j], _mm256_slli_epi16(n ? hc[j] : hb[j], 2));
      }
    }
  } else if (kType == MT_Q4_K || kType == MT_Q5_K) {
    const uint8_t* qs = blk + (kType == MT_Q4_K ? 16 : 48);
    for (int c = 0; c < 4; c++) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(qs + 32 * c));
      u[2 * c] = bits_at<0>(v, 0x0f);
      u[2 * c + 1] = bits_at<4>(v, 0x0f);
    }
    if (kType == MT_Q5_K) {
      const __m256i h = _mm256_loadu_si256((const __m256i*)(blk + 16));
      const __m256i hb[8] = {bits_at<0>(h, 1), bits_at<1>(h, 1), bits_at<2>(h, 1), bits_at<3>(h, 1),
                             bits_at<4>(h, 1), bits_at<5>(h, 1), bits_at<6>(h, 1), bits_at<7>(h, 1)};
      for (int s = 0; s < 8; s++) u[s] = _mm256_or_si256(u[s], _mm256_slli_epi16(hb[s], 4));
    }
  } else {  // Q6_K
    for (int n = 0; n < 2; n++) {
      const __m256i l0 = _mm256_loadu_si256((const __m256i*)(blk + 64 * n));
      const __m256i l1 = _mm256_loadu_si256((const __m256i*)(blk + 64 * n + 32));
      const __m256i h = _mm256_loadu_si256((const __m256i*)(blk + 128 + 32 * n));
      u[4 * n + 0] = _mm256_or_si256(bits_at<0>(l0, 0x0f), _mm256_slli_epi16(bits_at<0>(h, 3), 4));
      u[4 * n + 1] = _mm256_or_si256(bits_at<0>(l1, 0x0f), _mm256_slli_epi16(bits_at<2>(h, 3), 4));
      u[4 * n + 2] = _mm256_or_si256(bits_at<4>(l0, 0x0f), _mm256_slli_epi16(bits_at<4>(h, 3), 4));
      u[4 * n + 3] = _mm256_or_si256(bits_at<4>(l1, 0x0f), _mm256_slli_epi16(bits_at<6>(h, 3), 4));
    }
  }
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// The 16 scales and mins of a super-block as int16 (one per 16 elements), decoded a word at a
// time: the same integers as mt_kquant_scales (kernels_kquant.h), without its per-element loop.
template <int kType>
inline void decode_scales(const uint8_t* blk, __m256i* sc, __m256i* m) {
  const __m128i lo4 = _mm_set1_epi8(0x0f);
  if (kType == MT_IQ4_XS) {  // 8 scales of 32 elements, each repeated for its two halves
    int16_t v[MT_QK_K_SUBS];
    for (int j = 0; j < 8; j++) v[2 * j] = v[2 * j + 1] = (int16_t)mt_iq4xs_scale(blk, j);
    *sc = _mm256_loadu_si256((const __m256i*)v);
    *m = _mm256_setzero_si256();
  } else if (kType == MT_Q2_K) {  // byte k: sc low nibble, m high nibble
    const __m128i v = _mm_loadu_si128((const __m128i*)blk);
    *sc = _mm256_cvtepu8_epi16(_mm_and_si128(v, lo4));
    *m = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), lo4));
  } else if (kType == MT_Q3_K) {
    // Bytes k of word w: low 4 bits from s[0..7] (k < 8 low nibbles, else high), high 2 bits from
    // s[8 + k % 4] at bit 2 (k / 4), so scales 4q..4q+3 share one shift of the word s[8..11].
    const uint32_t w0 = load_u32(blk + 96), w1 = load_u32(blk + 100), w2 = load_u32(blk + 104);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const __m128i v = _mm_setr_epi32((int)((w0 & m4) | ((w2 & m2) << 4)), (int)((w1 & m4) | (((w2 >> 2) & m2) << 4)),
                                     (int)(((w0 >> 4) & m4) | (((w2 >> 4) & m2) << 4)),
                                     (int)(((w1 >> 4) & m4) | (((w2 >> 6) & m2) << 4)));
    *sc = _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), _mm256_set1_epi16(32));
    *m = _mm256_setzero_si256();
  } else if (kType == MT_Q4_K || kType == MT_Q5_K) {
    // 8 scales of 32 elements: j < 4 from the low 6 bits of s[j] (sc) and s[j + 4] (m); j >= 4
    // from the nibbles of s[j + 4] and the top 2 bits of s[j - 4] (sc) and s[j] (m).
    const uint32_t w0 = load_u32(blk + 4), w1 = load_u32(blk + 8), w2 = load_u32(blk + 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t sc_lo = w0 & m6, sc_hi = (w2 & m4) | (((w0 >> 6) & m2) << 4);
    const uint32_t m_lo = w1 & m6, m_hi = ((w2 >> 4) & m4) | (((w1 >> 6) & m2) << 4);
    const __m128i v = _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)m_lo, (int)m_hi);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);  // one per 16 elements
    *sc = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, dup));
    *m = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, _mm_add_epi8(dup, _mm_set1_epi8(8))));
  } else {  // Q6_K: int8 scales[16]
    *sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 192)));
    *m = _mm256_setzero_si256();
  }
}

template <int kType>
inline void decode_block(const uint8_t* blk, KBlock* k) {
  decode_codes<kType>(blk, k->u);
  decode_scales<kType>(blk, &k->sc_all, &k->m_all);
  // dword j of sc_all is (sc[2j], sc[2j+1]): broadcast it, then spread word 0 over the low half
  // and word 1 over the high half.
  const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  for (int j = 0; j < 8; j++)
    k->sc[j] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(k->sc_all, _mm256_set1_epi32(j)), spread);
  k->d = _cvtsh_ss(mt_load_u16(blk + mt_kquant_d_at(kType)));
  k->dmin = mt_kquant_has_min(kType) ? _cvtsh_ss(mt_load_u16(blk + mt_kquant_dmin_at(kType))) : 0.0f;
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 8 int32 lanes whose sum is this super-block's exact isum against activation block a: D::dot's
// sum_k sc[k] sum u q, less off * sum_k sc[k] bsum[k] for the types whose codes are offset.
template <int kType, class D>
inline __m256i isum_lanes(const typename D::W& w, const KBlock& k, const mt_act_k& a) {
  __m256i acc = mt_kquant_signed(kType) ? D::dot_signed(w, a.q) : D::dot(w, a.q);
  constexpr int kOff = kType == MT_Q3_K ? 4 : kType == MT_Q6_K ? 32 : 0;
  if (kOff != 0) {
    const __m256i bsum = _mm256_loadu_si256((const __m256i*)a.bsum);
    acc = _mm256_sub_epi32(acc, _mm256_mullo_epi32(_mm256_madd_epi16(k.sc_all, bsum), _mm256_set1_epi32(kOff)));
  }
  return acc;
}

inline __m256i msum_lanes(const KBlock& k, const mt_act_k& a) {
  return _mm256_madd_epi16(k.m_all, _mm256_loadu_si256((const __m256i*)a.bsum));
}

// lane += this super-block's share of W row . x (the canonical float steps).
template <int kType, class D>
inline void block_fma(const typename D::W& w, const KBlock& k, const mt_act_k& a, float* lane) {
  *lane = fmaf(k.d * a.d, (float)hsum_i32(isum_lanes<kType, D>(w, k, a)), *lane);
  if (mt_kquant_has_min(kType)) *lane = fmaf(-(k.dmin * a.d), (float)hsum_i32(msum_lanes(k, a)), *lane);
}

// p[i]: row i's 8 lanes -> lane i of the result: the sum of p[i]'s lanes (exact integers).
inline __m256i reduce_rows8(const __m256i* p) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);  // [rows 0-3, lanes 0-3 | rows 0-3, lanes 4-7]
  const __m256i b = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_blend_epi32(a, b, 0xf0), _mm256_permute2x128_si256(a, b, 0x21));
}

template <int kType>
constexpr int block_bytes() {
  return kType == MT_Q2_K   ? MT_Q2_K_BYTES
         : kType == MT_Q3_K ? MT_Q3_K_BYTES
         : kType == MT_Q4_K ? MT_Q4_K_BYTES
         : kType == MT_Q5_K ? MT_Q5_K_BYTES
         : kType == MT_Q6_K ? MT_Q6_K_BYTES
                            : MT_IQ4_XS_BYTES;
}

constexpr size_t kKquantLeadBytes = 1024;  // matvec: how far ahead each row's stream is fetched

template <int kType, class D>
void kquant_matvec(const uint8_t* W, int64_t cols, const mt_act_k* a, float* y, int64_t r0, int64_t r1) {
  constexpr int kBytes = block_bytes<kType>();
  const int64_t nb = cols / MT_QK_K;
  const size_t row_bytes = (size_t)nb * kBytes;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* w = W + r * row_bytes;
    float lane[MT_QUANT_LANES] = {0};
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = w + b * kBytes;
      for (int p = 0; p < kBytes; p += 64) _mm_prefetch((const char*)(blk + kKquantLeadBytes + p), _MM_HINT_T0);
      KBlock k;
      decode_block<kType>(blk, &k);
      typename D::W dw;
      D::prep(k, &dw);
      block_fma<kType, D>(dw, k, a[b], &lane[b % MT_QUANT_LANES]);
    }
    y[r] = mt_reduce_quant_lanes(lane);
  }
}

constexpr int kKquantTile = 8;  // matmul: activation rows per pass, one float vector lane each

// Y [n, ldy] (columns r0..r1) = acts [n, cols] W^T. Each super-block is decoded once per weight row
// and meets the activation rows 8 at a time: their exact isums (and msums) land in one vector,
// lane i = row i, and L[b % 8] (lane i: row i's canonical lane b % 8) takes the fmas for all 8,
// the same products and fmas as the scalar path. A short last tile goes row by row (block_fma).
template <int kType, class D>
void kquant_matmul(const uint8_t* W, int64_t cols, const uint8_t* acts, int64_t n, float* Y, int64_t ldy, int64_t r0,
                   int64_t r1) {
  constexpr int kBytes = block_bytes<kType>();
  const int64_t nb = cols / MT_QK_K;
  const size_t row_bytes = (size_t)nb * kBytes;
  const mt_act_k* a = (const mt_act_k*)acts;  // row i: a + i * nb
  const int64_t full = n / kKquantTile * kKquantTile;
  thread_local std::vector<float> lanes;
  if ((int64_t)lanes.size() < (n - full) * MT_QUANT_LANES) lanes.resize((n - full) * MT_QUANT_LANES);
  const __m256 neg = _mm256_set1_ps(-0.0f);
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* w = W + r * row_bytes;
    for (int64_t i0 = 0; i0 < full; i0 += kKquantTile) {
      __m256 L[MT_QUANT_LANES];
      for (int l = 0; l < MT_QUANT_LANES; l++) L[l] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; b++) {
        KBlock k;
        decode_block<kType>(w + b * kBytes, &k);
        typename D::W dw;
        D::prep(k, &dw);
        __m256i p[kKquantTile], m[kKquantTile];
        float dx[kKquantTile];
        for (int i = 0; i < kKquantTile; i++) {
          const mt_act_k& x = a[(i0 + i) * nb + b];
          p[i] = isum_lanes<kType, D>(dw, k, x);
          if (mt_kquant_has_min(kType)) m[i] = msum_lanes(k, x);
          dx[i] = x.d;
        }
        const __m256 d_x = _mm256_loadu_ps(dx);
        __m256& l = L[b % MT_QUANT_LANES];
        l = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(k.d), d_x), _mm256_cvtepi32_ps(reduce_rows8(p)), l);
        if (mt_kquant_has_min(kType)) {
          const __m256 dm = _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(k.dmin), d_x), neg);
          l = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(reduce_rows8(m)), l);
        }
      }
      // mt_reduce_quant_lanes for all 8 rows: ((L0 + L4) + (L2 + L6)) + ((L1 + L5) + (L3 + L7)) + 0.
      const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(L[0], L[4]), _mm256_add_ps(L[2], L[6])),
                                     _mm256_add_ps(_mm256_add_ps(L[1], L[5]), _mm256_add_ps(L[3], L[7])));
      float out[kKquantTile];
      _mm256_storeu_ps(out, _mm256_add_ps(s, _mm256_setzero_ps()));
      for (int i = 0; i < kKquantTile; i++) Y[(i0 + i) * ldy + r] = out[i];
    }
    if (full == n) continue;
    for (int64_t i = 0; i < (n - full) * MT_QUANT_LANES; i++) lanes[i] = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
      KBlock k;
      decode_block<kType>(w + b * kBytes, &k);
      typename D::W dw;
      D::prep(k, &dw);
      for (int64_t i = full; i < n; i++)
        block_fma<kType, D>(dw, k, a[i * nb + b], &lanes[(i - full) * MT_QUANT_LANES + b % MT_QUANT_LANES]);
    }
    for (int64_t i = full; i < n; i++) Y[i * ldy + r] = mt_reduce_quant_lanes(&lanes[(i - full) * MT_QUANT_LANES]);
  }
}

template <class D>
inline void kquant_matvec_any(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                              int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const mt_act_k* a = (const mt_act_k*)act;
  switch (wtype) {
    case MT_Q2_K:
      kquant_matvec<MT_Q2_K, D>(w, cols, a, y, r0, r1);
      break;
    case MT_Q3_K:
      kquant_matvec<MT_Q3_K, D>(w, cols, a, y, r0, r1);
      break;
    case MT_Q4_K:
      kquant_matvec<MT_Q4_K, D>(w, cols, a, y, r0, r1);
      break;
    case MT_Q5_K:
      kquant_matvec<MT_Q5_K, D>(w, cols, a, y, r0, r1);
      break;
    case MT_Q6_K:
      kquant_matvec<MT_Q6_K, D>(w, cols, a, y, r0, r1);
      break;
    case MT_IQ4_XS:
      kquant_matvec<MT_IQ4_XS, D>(w, cols, a, y, r0, r1);
      break;
    default:
      break;
  }
}

template <class D>
inline void kquant_matmul_any(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y,
                              int64_t ldy, int64_t r0, int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const uint8_t* a = (const uint8_t*)acts;
  switch (wtype) {
    case MT_Q2_K:
      kquant_matmul<MT_Q2_K, D>(w, cols, a, n, Y, ldy, r0, r1);
      break;
    case MT_Q3_K:
      kquant_matmul<MT_Q3_K, D>(w, cols, a, n, Y, ldy, r0, r1);
      break;
    case MT_Q4_K:
      kquant_matmul<MT_Q4_K, D>(w, cols, a, n, Y, ldy, r0, r1);
      break;
    case MT_Q5_K:
      kquant_matmul<MT_Q5_K, D>(w, cols, a, n, Y, ldy, r0, r1);
      break;
    case MT_Q6_K:
      kquant_matmul<MT_Q6_K, D>(w, cols, a, n, Y, ldy, r0, r1);
      break;
    case MT_IQ4_XS:
      kquant_matmul<MT_IQ4_XS, D>(w, cols, a, n, Y, ldy, r0, r1);
      break;
    default:
      break;
  }
}
