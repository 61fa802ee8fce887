// A k-quant super-block (kernels_kquant.h's layouts) decoded into ymm registers, as the AVX2 kernels
// use it and the AVX-512 ones build on it: shared by both, so include it inside a file's
// `#pragma GCC target` region and anonymous namespace (kernels_simd_quant.h says why).
//
//   codes:  8 ymm of unsigned codes u = q + off in element order (ymm j = elements 32j..32j+31, the
//           16-element sub-blocks 2j and 2j+1); IQ4_XS: the signed table values;
//   scales: sc16, the 16 integer scales as int16 (one per 16 elements), and per ymm j the madd
//           operand [sc[2j] x 8 | sc[2j+1] x 8]; mins m16 as int16 for the types with a min;
//   c16:    -off * sc16, so that madd(c16, bsum) removes the codes' offset (Q3_K 4, Q6_K 32).
// The integers are kernels_kquant.h's, decoded a word or a vector at a time.
// The includer includes <immintrin.h>, <string.h> and kernels_internal.h first.
#pragma once

template <int kType>
constexpr bool kquant_has_min() {
  return kType == MT_Q2_K || kType == MT_Q4_K || kType == MT_Q5_K;
}

template <int kType>
constexpr int kquant_offset() {
  return kType == MT_Q3_K ? 4 : kType == MT_Q6_K ? 32 : 0;
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

template <int s>
inline __m256i bits_at(__m256i v, int mask) {  // (byte >> s) & mask, per byte
  return _mm256_and_si256(_mm256_srli_epi16(v, s), _mm256_set1_epi8((char)mask));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// Q5_K's fifth bits: bit j of each qh byte moved to bit 4 (16-bit shifts: the bits that cross a
// byte boundary land outside bit 4), for ymm j.
template <int j>
inline __m256i q5_high(__m256i qh) {
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  if (j < 4) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - j), bit4);
  if (j == 4) return _mm256_and_si256(qh, bit4);
  return _mm256_and_si256(_mm256_srli_epi16(qh, j - 4), bit4);
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
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; c++) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(qs + 32 * c));
      u[2 * c] = _mm256_and_si256(v, lo4);
      u[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
    }
    if (kType == MT_Q5_K) {
      const __m256i h = _mm256_loadu_si256((const __m256i*)(blk + 16));
      u[0] = _mm256_or_si256(u[0], q5_high<0>(h));
      u[1] = _mm256_or_si256(u[1], q5_high<1>(h));
      u[2] = _mm256_or_si256(u[2], q5_high<2>(h));
      u[3] = _mm256_or_si256(u[3], q5_high<3>(h));
      u[4] = _mm256_or_si256(u[4], q5_high<4>(h));
      u[5] = _mm256_or_si256(u[5], q5_high<5>(h));
      u[6] = _mm256_or_si256(u[6], q5_high<6>(h));
      u[7] = _mm256_or_si256(u[7], q5_high<7>(h));
    }
  } else {  // Q6_K: the high 2 bits moved to bits 4-5 by 16-bit shifts, masked to 0x30
    const __m256i lo4 = _mm256_set1_epi8(0x0f), hi2 = _mm256_set1_epi8(0x30);
    for (int n = 0; n < 2; n++) {
      const __m256i l0 = _mm256_loadu_si256((const __m256i*)(blk + 64 * n));
      const __m256i l1 = _mm256_loadu_si256((const __m256i*)(blk + 64 * n + 32));
      const __m256i h = _mm256_loadu_si256((const __m256i*)(blk + 128 + 32 * n));
      u[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(l0, lo4), _mm256_and_si256(_mm256_slli_epi16(h, 4), hi2));
      u[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, lo4), _mm256_and_si256(_mm256_slli_epi16(h, 2), hi2));
      u[4 * n + 2] = _mm256_or_si256(bits_at<4>(l0, 0x0f), _mm256_and_si256(h, hi2));
      u[4 * n + 3] = _mm256_or_si256(bits_at<4>(l1, 0x0f), _mm256_and_si256(_mm256_srli_epi16(h, 2), hi2));
    }
  }
}

// Q4_K / Q5_K's 6-bit scales and mins as bytes [sc0..sc7, m0..m7] (one per 32 elements), from the 12
// bytes at blk + 4 as words w0, w1, w2: j < 4: sc = w0 & 63, m = w1 & 63; j >= 4: the nibbles of w2
// (sc low, m high) under the top 2 bits of w0 (sc) and w1 (m). The 16-byte load reads 4 bytes of
// the codes after the scales (inside the block); they fall into the unused dword.
inline __m128i k4_scale_bytes(const uint8_t* blk) {
  const __m128i v = _mm_loadu_si128((const __m128i*)(blk + 4));
  const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(63));                        // [sc 0-3, m 0-3, ., .]
  const __m128i top = _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30));  // bits 6-7 -> 4-5
  const __m128i w2 = _mm_shuffle_epi32(v, 0xaa);
  const __m128i nib = _mm_and_si128(_mm_srlv_epi32(w2, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0f));
  return _mm_unpacklo_epi32(lo, _mm_or_si128(nib, top));  // [sc 0-3, sc 4-7, m 0-3, m 4-7]
}

// The 16 integer scales (and mins) of a super-block as int16 (one per 16 elements), the integers of
// mt_kquant_scales (kernels_kquant.h). Q4_K / Q5_K go through k4_scale_bytes instead.
template <int kType>
inline void decode_scales16(const uint8_t* blk, __m256i* sc, __m256i* m) {
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
    const __m128i b = k4_scale_bytes(blk);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);  // one per 16 elements
    *sc = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(b, dup));
    *m = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(b, _mm_add_epi8(dup, _mm_set1_epi8(8))));
  } else {  // Q6_K: int8 scales[16]
    *sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 192)));
    *m = _mm256_setzero_si256();
  }
}

// -off * sc16 for the types whose codes are offset (zeros for the others).
template <int kType>
inline __m256i offset_scales(__m256i sc16) {
  constexpr int kShift = kquant_offset<kType>() == 32 ? 5 : 2;
  if (kquant_offset<kType>() == 0) return _mm256_setzero_si256();
  return _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), sc16), kShift);
}

// The madd operands of the 8 ymm from sc16: s[j] = [sc[2j] x 8 | sc[2j+1] x 8] (a pshufb of the
// 128-bit half that holds both words, broadcast to both halves).
inline void spread_scales(__m256i sc16, __m256i* s) {
  const __m256i half[2] = {_mm256_permute4x64_epi64(sc16, 0x44), _mm256_permute4x64_epi64(sc16, 0xee)};
  for (int j = 0; j < 8; j++) {
    const int w = 2 * (j % 4);  // word 2j of the half: in the low 128 bits, word 2j + 1 in the high ones
    const __m256i pick = _mm256_setr_m128i(_mm_set1_epi16((short)((2 * w) | (2 * w + 1) << 8)),
                                           _mm_set1_epi16((short)((2 * w + 2) | (2 * w + 3) << 8)));
    s[j] = _mm256_shuffle_epi8(half[j / 4], pick);
  }
}
