// The k-quant block layouts (ggml's block_q2_K .. block_q6_K, 256-element super-blocks) and the
// scalar decoders every path shares: per-16-element integer scales (and mins), and per-element
// quants. Included at the end of kernels_internal.h; every helper is static inline (see there).
//
// A super-block of 256 elements is 16 sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 8 of 32 (Q4_K,
// Q5_K; their scales are decoded per 16 here, each repeated twice). Element e of a super-block:
//   Q2_K  84 B: scales[16] (lo nibble sc, hi nibble m) | qs[64] | f16 d | f16 dmin
//               q = (qs[32 (e / 128) + e % 32] >> 2 ((e % 128) / 32)) & 3     value = d sc q - dmin m
//   Q3_K 110 B: hmask[32] | qs[64] | scales[12] (16 x 6 bits) | f16 d
//               q = (2-bit as Q2_K) + 4 h - 4, h = bit (e / 32) of hmask[e % 32]  value = d (sc - 32) q
//   Q4_K 144 B: f16 d | f16 dmin | scales[12] (8 x 6-bit sc, 8 x 6-bit m) | qs[128]
//               q = nibble (e % 64) / 32 of qs[32 (e / 64) + e % 32]            value = d sc q - dmin m
//   Q5_K 176 B: f16 d | f16 dmin | scales[12] | qh[32] | qs[128]
//               q = (nibble as Q4_K) + 16 (bit (e / 32) of qh[e % 32])        value = d sc q - dmin m
//   Q6_K 210 B: ql[128] | qh[64] | int8 scales[16] | f16 d
//               n = e / 128, p = (e % 128) / 32, l = e % 32:
//               q = (nibble p / 2 of ql[64 n + 32 (p % 2) + l] | ((qh[32 n + l] >> 2p) & 3) << 4) - 32
//                                                                               value = d sc q
//   IQ4_XS 136 B: f16 d | u16 scales_h | scales_l[4] | qs[128] (ggml's block_iq4_xs), 8 sub-blocks of 32:
//               sc of sub-block j = (nibble j % 2 of scales_l[j / 2] | ((scales_h >> 2j) & 3) << 4) - 32
//               q = mt_iq4nl_values[nibble (e % 32) / 16 of qs[16 (e / 32) + e % 16]]  value = d sc q
// The SIMD paths read q as an unsigned byte u = q + off (off: Q3_K 4, Q6_K 32, else 0), except
// IQ4_XS, whose q is a signed byte (mt_kquant_signed: |q| times q_x with q's sign).
#pragma once

#define MT_QK_K 256      // elements per k-quant super-block
#define MT_QK_K_SUBS 16  // 16-element sub-blocks per super-block (the unit of bsum and of scales here)
#define MT_Q2_K_BYTES 84
#define MT_Q3_K_BYTES 110
#define MT_Q4_K_BYTES 144
#define MT_Q5_K_BYTES 176
#define MT_Q6_K_BYTES 210
#define MT_IQ4_XS_BYTES 136

// The types of 256-element super-blocks whose activations are Q8_K blocks (mt_act_k): the
// k-quants and IQ4_XS, which the k-quant code runs as one more decoder.
static inline int mt_is_kquant(int type) { return (type >= MT_Q2_K && type <= MT_Q6_K) || type == MT_IQ4_XS; }

// IQ4_XS: its codes are the signed table values, not unsigned codes (see the top).
static inline int mt_kquant_signed(int type) { return type == MT_IQ4_XS; }

static inline int mt_kquant_block_bytes(int type) {
  switch (type) {
    case MT_Q2_K:
      return MT_Q2_K_BYTES;
    case MT_Q3_K:
      return MT_Q3_K_BYTES;
    case MT_Q4_K:
      return MT_Q4_K_BYTES;
    case MT_Q5_K:
      return MT_Q5_K_BYTES;
    case MT_Q6_K:
      return MT_Q6_K_BYTES;
    case MT_IQ4_XS:
      return MT_IQ4_XS_BYTES;
    default:
      return 0;
  }
}

// The types whose value is d sc q - dmin m (a "min" per sub-block, removed through bsum).
static inline int mt_kquant_has_min(int type) { return type == MT_Q2_K || type == MT_Q4_K || type == MT_Q5_K; }

// Offset of the unsigned code u = q + off that the SIMD paths multiply.
static inline int mt_kquant_offset(int type) { return type == MT_Q3_K ? 4 : type == MT_Q6_K ? 32 : 0; }

// Field offsets of the f16 scales d, dmin inside a block.
static inline int mt_kquant_d_at(int type) {
  switch (type) {
    case MT_Q2_K:
      return 80;
    case MT_Q3_K:
      return 108;
    case MT_Q6_K:
      return 208;
    default:
      return 0;  // Q4_K, Q5_K, IQ4_XS
  }
}
static inline int mt_kquant_dmin_at(int type) { return type == MT_Q2_K ? 82 : 2; }

// Q4_K / Q5_K: 6-bit scale and min of 32-element sub-block j (0..7) from scales[12]:
// j < 4: sc = s[j] & 63, m = s[j + 4] & 63; else the low 4 bits from s[j + 4] (sc: low nibble,
// m: high nibble) and the high 2 bits from the top of s[j - 4] (sc) and s[j] (m).
static inline void mt_k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K: 6-bit scale k (0..15) minus 32: low 4 bits from s[k % 8] (k < 8: low nibble, else high),
// high 2 bits from s[8 + k % 4] at bit 2 (k / 4).
static inline int mt_k3_scale(const uint8_t* s, int k) {
  const int lo = k < 8 ? s[k] & 0x0f : s[k - 8] >> 4;
  const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// IQ4_XS: 6-bit scale of 32-element sub-block j (0..7) minus 32.
static inline int mt_iq4xs_scale(const uint8_t* blk, int j) {
  const int lo = (blk[4 + j / 2] >> (4 * (j % 2))) & 0x0f;
  const int hi = (mt_load_u16(blk + 2) >> (2 * j)) & 3;
  return (lo | (hi << 4)) - 32;
}

// The integer scales (and mins) of one super-block, one per 16-element sub-block.
static inline void mt_kquant_scales(int type, const uint8_t* blk, int16_t* sc, int16_t* m) {
  for (int k = 0; k < MT_QK_K_SUBS; k++) {
    switch (type) {
      case MT_Q2_K:
        sc[k] = (int16_t)(blk[k] & 0x0f);
        m[k] = (int16_t)(blk[k] >> 4);
        break;
      case MT_Q3_K:
        sc[k] = (int16_t)mt_k3_scale(blk + 96, k);
        m[k] = 0;
        break;
      case MT_Q4_K:
      case MT_Q5_K: {
        int s, mm;
        mt_k4_scale_min(blk + 4, k / 2, &s, &mm);
        sc[k] = (int16_t)s;
        m[k] = (int16_t)mm;
        break;
      }
      case MT_Q6_K:
        sc[k] = (int16_t)(int8_t)blk[192 + k];
        m[k] = 0;
        break;
      case MT_IQ4_XS:
        sc[k] = (int16_t)mt_iq4xs_scale(blk, k / 2);
        m[k] = 0;
        break;
      default:
        sc[k] = m[k] = 0;
        break;
    }
  }
}

// The signed quant q of element e (0..255) of a super-block (see the table on top).
static inline int mt_kquant_q(int type, const uint8_t* blk, int e) {
  switch (type) {
    case MT_Q2_K:
      return (blk[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    case MT_Q3_K: {
      const int lo = (blk[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int h = (blk[e % 32] >> (e / 32)) & 1;
      return lo + 4 * h - 4;
    }
    case MT_Q4_K:
      return (blk[16 + 32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0f;
    case MT_Q5_K: {
      const int lo = (blk[48 + 32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0f;
      return lo + 16 * ((blk[16 + e % 32] >> (e / 32)) & 1);
    }
    case MT_Q6_K: {
      const int n = e / 128, p = (e % 128) / 32, l = e % 32;
      const int lo = (blk[64 * n + 32 * (p % 2) + l] >> (4 * (p / 2))) & 0x0f;
      const int hi = (blk[128 + 32 * n + l] >> (2 * p)) & 3;
      return (lo | (hi << 4)) - 32;
    }
    case MT_IQ4_XS:
      return mt_iq4nl_values[(blk[8 + 16 * (e / 32) + e % 16] >> (4 * ((e % 32) / 16))) & 0x0f];
    default:
      return 0;
  }
}
