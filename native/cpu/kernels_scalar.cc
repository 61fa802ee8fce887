// The scalar path: plain C, every type, the reference the SIMD paths are tested against.
// It spells out the canonical order (kernels_internal.h) one element or block at a time, so the
// SIMD paths, which run the same order many lanes at once, give its bits exactly.
#include <math.h>
#include "kernels_internal.h"

namespace {

template <float (*Weight)(const uint8_t*, int64_t)>
float dot_float(const uint8_t* w, const float* x, int64_t cols) {
  float lane[MT_FLOAT_LANES] = {0};
  for (int64_t i = 0; i < cols; i++) lane[i % MT_FLOAT_LANES] = fmaf(Weight(w, i), x[i], lane[i % MT_FLOAT_LANES]);
  return mt_reduce_float_lanes(lane);
}

float weight_f32(const uint8_t* w, int64_t i) { return mt_load_f32(w + 4 * i); }
float weight_f16(const uint8_t* w, int64_t i) { return mt_f16_to_f32(mt_load_u16(w + 2 * i)); }
float weight_bf16(const uint8_t* w, int64_t i) { return mt_bf16_to_f32(mt_load_u16(w + 2 * i)); }

// sum_i q_w q_x of one block, exact.
int32_t isum_q8_0(const uint8_t* blk, const int8_t* qx) {
  const int8_t* q = (const int8_t*)(blk + 2);
  int32_t isum = 0;
  for (int i = 0; i < MT_QK; i++) isum += (int32_t)q[i] * qx[i];
  return isum;
}

int32_t isum_q4_0(const uint8_t* blk, const int8_t* qx) {
  const uint8_t* nib = blk + 2;
  int32_t isum = 0;
  for (int j = 0; j < MT_QK / 2; j++) {
    isum += ((int32_t)(nib[j] & 0x0f) - 8) * qx[j];
    isum += ((int32_t)(nib[j] >> 4) - 8) * qx[j + MT_QK / 2];
  }
  return isum;
}

int32_t isum_q5_0(const uint8_t* blk, const int8_t* qx) {
  int32_t isum = 0;
  for (int e = 0; e < MT_QK; e++) isum += (mt_q5_code(MT_Q5_0, blk, e) - 16) * qx[e];
  return isum;
}

int32_t isum_q5_1(const uint8_t* blk, const int8_t* qx) {
  int32_t isum = 0;
  for (int e = 0; e < MT_QK; e++) isum += mt_q5_code(MT_Q5_1, blk, e) * qx[e];
  return isum;
}

int32_t isum_iq4_nl(const uint8_t* blk, const int8_t* qx) {
  const uint8_t* nib = blk + 2;
  int32_t isum = 0;
  for (int j = 0; j < MT_QK / 2; j++) {
    isum += (int32_t)mt_iq4nl_values[nib[j] & 0x0f] * qx[j];
    isum += (int32_t)mt_iq4nl_values[nib[j] >> 4] * qx[j + MT_QK / 2];
  }
  return isum;
}

int32_t isum_mxfp4(const uint8_t* blk, const int8_t* qx) {
  const uint8_t* nib = blk + 1;
  int32_t isum = 0;
  for (int j = 0; j < MT_QK / 2; j++) {
    isum += (int32_t)mt_mxfp4_values[nib[j] & 0x0f] * qx[j];
    isum += (int32_t)mt_mxfp4_values[nib[j] >> 4] * qx[j + MT_QK / 2];
  }
  return isum;
}

// The block's scale d_w: an f16 at byte 0, or MXFP4's E8M0 byte.
float scale_f16(const uint8_t* blk) { return mt_f16_to_f32(mt_load_u16(blk)); }
float scale_e8m0(const uint8_t* blk) { return mt_e8m0_half(blk[0]); }

// kMin: the block has an f16 min m_w at byte 2 (Q5_1), added as fma(m_w * d_x, sum_x, lane).
template <int kBlockBytes, int32_t (*Isum)(const uint8_t*, const int8_t*), bool kMin = false,
          float (*Scale)(const uint8_t*) = scale_f16>
float dot_quant(const uint8_t* w, const mt_act_group* a, int64_t cols) {
  float lane[MT_QUANT_LANES] = {0};
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const mt_act_group& g = a[b / MT_ACT_GROUP_BLOCKS];
    const int j = (int)(b % MT_ACT_GROUP_BLOCKS);
    const uint8_t* blk = w + b * kBlockBytes;
    const float scale = Scale(blk) * g.d[j];
    lane[b % MT_QUANT_LANES] = fmaf(scale, (float)Isum(blk, g.q[j]), lane[b % MT_QUANT_LANES]);
    if (kMin) {
      const float mscale = mt_f16_to_f32(mt_load_u16(blk + 2)) * g.d[j];
      lane[b % MT_QUANT_LANES] = fmaf(mscale, (float)g.sum[j], lane[b % MT_QUANT_LANES]);
    }
  }
  return mt_reduce_quant_lanes(lane);
}

// One k-quant super-block against its Q8_K block: the exact integer sums of the canonical order.
// (A template on the type only so the decoders' switches fold away.)
template <int type>
void kquant_isums(const uint8_t* blk, const mt_act_k& a, int32_t* isum, int32_t* msum) {
  int16_t sc[MT_QK_K_SUBS], m[MT_QK_K_SUBS];
  mt_kquant_scales(type, blk, sc, m);
  int32_t is = 0, ms = 0;
  for (int k = 0; k < MT_QK_K_SUBS; k++) {
    int32_t sub = 0;
    for (int e = 16 * k; e < 16 * k + 16; e++) sub += mt_kquant_q(type, blk, e) * a.q[e];
    is += sc[k] * sub;
    ms += m[k] * a.bsum[k];
  }
  *isum = is;
  *msum = ms;
}

// W row (super-blocks of `type`) . x (mt_act_k blocks) in the canonical order (kernels_internal.h).
template <int type>
float dot_kquant(const uint8_t* w, const mt_act_k* a, int64_t cols) {
  const int bytes = mt_kquant_block_bytes(type);
  const bool has_min = mt_kquant_has_min(type);
  float lane[MT_QUANT_LANES] = {0};
  for (int64_t b = 0; b < cols / MT_QK_K; b++) {
    const uint8_t* blk = w + b * bytes;
    int32_t isum, msum;
    kquant_isums<type>(blk, a[b], &isum, &msum);
    float& l = lane[b % MT_QUANT_LANES];
    l = fmaf(mt_f16_to_f32(mt_load_u16(blk + mt_kquant_d_at(type))) * a[b].d, (float)isum, l);
    if (has_min) l = fmaf(-(mt_f16_to_f32(mt_load_u16(blk + mt_kquant_dmin_at(type))) * a[b].d), (float)msum, l);
  }
  return mt_reduce_quant_lanes(lane);
}

float dot_row(int wtype, const uint8_t* w, int64_t cols, const void* act) {
  const float* x = (const float*)act;
  const mt_act_group* a = (const mt_act_group*)act;
  switch (wtype) {
    case MT_F32:
      return dot_float<weight_f32>(w, x, cols);
    case MT_F16:
      return dot_float<weight_f16>(w, x, cols);
    case MT_BF16:
      return dot_float<weight_bf16>(w, x, cols);
    case MT_Q8_0:
      return dot_quant<MT_Q8_0_BYTES, isum_q8_0>(w, a, cols);
    case MT_Q4_0:
      return dot_quant<MT_Q4_0_BYTES, isum_q4_0>(w, a, cols);
    case MT_Q5_0:
      return dot_quant<MT_Q5_0_BYTES, isum_q5_0>(w, a, cols);
    case MT_Q5_1:
      return dot_quant<MT_Q5_1_BYTES, isum_q5_1, true>(w, a, cols);
    case MT_IQ4_NL:
      return dot_quant<MT_IQ4_NL_BYTES, isum_iq4_nl>(w, a, cols);
    case MT_MXFP4:
      return dot_quant<MT_MXFP4_BYTES, isum_mxfp4, false, scale_e8m0>(w, a, cols);
    case MT_Q2_K:
      return dot_kquant<MT_Q2_K>(w, (const mt_act_k*)act, cols);
    case MT_Q3_K:
      return dot_kquant<MT_Q3_K>(w, (const mt_act_k*)act, cols);
    case MT_Q4_K:
      return dot_kquant<MT_Q4_K>(w, (const mt_act_k*)act, cols);
    case MT_Q5_K:
      return dot_kquant<MT_Q5_K>(w, (const mt_act_k*)act, cols);
    case MT_Q6_K:
      return dot_kquant<MT_Q6_K>(w, (const mt_act_k*)act, cols);
    case MT_IQ4_XS:
      return dot_kquant<MT_IQ4_XS>(w, (const mt_act_k*)act, cols);
    default:
      return 0.0f;
  }
}

}  // namespace

extern "C" {

void mt_matvec_rows_scalar(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  size_t row_bytes = mt_row_bytes(wtype, cols);
  for (int64_t r = r0; r < r1; r++) y[r] = dot_row(wtype, (const uint8_t*)W + r * row_bytes, cols, act);
}

// Row-outer: weight row r is read from memory once and stays in L1 for all n activations.
void mt_matmul_rows_scalar(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                           int64_t r0, int64_t r1) {
  size_t row_bytes = mt_row_bytes(wtype, cols);
  size_t act_bytes = mt_act_row_bytes(wtype, cols);
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* w = (const uint8_t*)W + r * row_bytes;
    for (int64_t i = 0; i < n; i++) Y[i * ldy + r] = dot_row(wtype, w, cols, (const uint8_t*)acts + i * act_bytes);
  }
}

uint64_t mt_read_sum_scalar(const void* p, size_t bytes) {
  const uint8_t* b = (const uint8_t*)p;
  uint64_t s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int k = 0; k < 4; k++) {
      uint64_t v;
      memcpy(&v, b + i + 8 * k, 8);
      s[k] += v;
    }
  return s[0] + s[1] + s[2] + s[3];
}

}  // extern "C"
