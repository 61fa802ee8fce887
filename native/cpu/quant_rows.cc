// Row sizes, activation preparation and dequantisation: the type-level half of
// mt_kernels.h, one scalar implementation shared by every ISA path.
#include <float.h>
#include <math.h>
#include <string.h>
#include "kernels_internal.h"

extern "C" {

int mt_type_supported(int type) {
  return type == MT_F32 || type == MT_F16 || type == MT_BF16 || mt_is_quant(type) || mt_is_kquant(type);
}

// Bytes of one row of `cols` elements; 0 for an unsupported type or a partial block.
size_t mt_row_bytes(int type, int64_t cols) {
  if (cols < 0) return 0;
  switch (type) {
    case MT_F32:
      return (size_t)cols * 4;
    case MT_F16:
    case MT_BF16:
      return (size_t)cols * 2;
    case MT_Q8_0:
      return cols % MT_QK ? 0 : (size_t)(cols / MT_QK) * MT_Q8_0_BYTES;
    case MT_Q4_0:
      return cols % MT_QK ? 0 : (size_t)(cols / MT_QK) * MT_Q4_0_BYTES;
    case MT_Q5_0:
      return cols % MT_QK ? 0 : (size_t)(cols / MT_QK) * MT_Q5_0_BYTES;
    case MT_Q5_1:
      return cols % MT_QK ? 0 : (size_t)(cols / MT_QK) * MT_Q5_1_BYTES;
    case MT_IQ4_NL:
      return cols % MT_QK ? 0 : (size_t)(cols / MT_QK) * MT_IQ4_NL_BYTES;
    case MT_MXFP4:
      return cols % MT_QK ? 0 : (size_t)(cols / MT_QK) * MT_MXFP4_BYTES;
    case MT_Q2_K:
    case MT_Q3_K:
    case MT_Q4_K:
    case MT_Q5_K:
    case MT_Q6_K:
    case MT_IQ4_XS:
      return cols % MT_QK_K ? 0 : (size_t)(cols / MT_QK_K) * mt_kquant_block_bytes(type);
    default:
      return 0;
  }
}

// Float weights read an f32 copy of x; Q8_0 / Q4_0 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 weights read 8-bit blocks
// in groups (mt_act_group); k-quants and IQ4_XS read one Q8_K block (mt_act_k) per 256 elements.
size_t mt_act_row_bytes(int wtype, int64_t cols) {
  if (!mt_type_supported(wtype) || cols < 0) return 0;
  if (mt_is_kquant(wtype)) return cols % MT_QK_K ? 0 : (size_t)(cols / MT_QK_K) * sizeof(mt_act_k);
  if (mt_is_quant(wtype)) return cols % MT_QK ? 0 : (size_t)mt_act_groups(cols / MT_QK) * sizeof(mt_act_group);
  return (size_t)cols * sizeof(float);
}

// Round to nearest (ties to even) for |v| < 2^22 without a libm call: adding 1.5 * 2^23
// leaves round(v) in the low mantissa bits. roundf was most of the cost of a decode matvec's prep.
static inline int round_to_int(float v) {
  float t = v + 12582912.0f;
  int32_t bits;
  memcpy(&bits, &t, 4);
  return bits - 0x4B400000;
}

// x [cols] -> blocks of 32: d = max|x| / 127, q = round(x / d) with 1 / d of the unrounded d,
// then d kept as its f16 rounding (as llama.cpp's quantize_row_q8_0). The error per element is at
// most d / 2 + 127 |d - f16(d)|, which is the tolerance the tests derive for the integer paths.
// A block holding a NaN or inf gets d = NaN (fmaxf and the rounding would turn it into a code).
static void quantise_q8(const float* x, int64_t cols, mt_act_group* out) {
  const int64_t nb = cols / MT_QK;
  memset(out, 0, (size_t)mt_act_groups(nb) * sizeof(mt_act_group));
  for (int64_t b = 0; b < nb; b++) {
    const float* xb = x + b * MT_QK;
    mt_act_group& g = out[b / MT_ACT_GROUP_BLOCKS];
    const int j = (int)(b % MT_ACT_GROUP_BLOCKS);
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < MT_QK; i++) {
      amax = fmaxf(amax, fabsf(xb[i]));
      finite = finite && fabsf(xb[i]) <= FLT_MAX;
    }
    if (!finite) {  // a NaN or inf stays one: d = NaN makes every dot with this block NaN (q, sum stay 0)
      g.d[j] = NAN;
      continue;
    }
    float d = amax / 127.0f;
    float inv = d > 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int i = 0; i < MT_QK; i++) {
      int q = round_to_int(xb[i] * inv);
      q = q > 127 ? 127 : (q < -127 ? -127 : q);
      g.q[j][i] = (int8_t)q;
      sum += q;
    }
    g.d[j] = mt_f16_to_f32(mt_f32_to_f16(d));
    g.sum[j] = sum;
  }
}

// x [cols] -> Q8_K blocks of 256 (mt_act_k): d = max|x| / 127 kept as f32, q = round(x * (1 / d)),
// bsum per 16. The error per element is at most d / 2 (the tolerance the k-quant tests derive).
// The scalar path's; the AVX2 / AVX-512 paths run kernels_avx2.cc's copy, which gives these bytes (a prefill
// prepares every row for every matrix type it meets, so the scalar loop was ~8 % of one).
void mt_act_prepare_kquant(const float* x, int64_t cols, mt_act_k* out) {
  const int64_t nb = cols / MT_QK_K;
  memset(out, 0, (size_t)nb * sizeof(mt_act_k));
  for (int64_t b = 0; b < nb; b++) {
    const float* xb = x + b * MT_QK_K;
    mt_act_k& a = out[b];
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < MT_QK_K; i++) {
      const float v = fabsf(xb[i]);
      amax = v > amax ? v : amax;  // fmaxf's result on the finite blocks that use it, without a libm call
      finite = finite && v <= FLT_MAX;
    }
    if (!finite) {
      a.d = NAN;
      continue;
    }
    const float d = amax / 127.0f;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (int k = 0; k < MT_QK_K_SUBS; k++) {
      int32_t sum = 0;
      for (int i = 16 * k; i < 16 * k + 16; i++) {
        int q = round_to_int(xb[i] * inv);
        q = q > 127 ? 127 : (q < -127 ? -127 : q);
        a.q[i] = (int8_t)q;
        sum += q;
      }
      a.bsum[k] = (int16_t)sum;
    }
    a.d = d;
  }
}

void mt_act_prepare_scalar(int wtype, const float* x, int64_t cols, void* act) {
  if (mt_is_kquant(wtype)) {
    mt_act_prepare_kquant(x, cols, (mt_act_k*)act);
  } else if (mt_is_quant(wtype)) {
    quantise_q8(x, cols, (mt_act_group*)act);
  } else {
    memcpy(act, x, (size_t)cols * sizeof(float));
  }
}

static void dequant_q8_0(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = row + b * MT_Q8_0_BYTES;
    float d = mt_f16_to_f32(mt_load_u16(blk));
    const int8_t* q = (const int8_t*)(blk + 2);
    for (int i = 0; i < MT_QK; i++) out[b * MT_QK + i] = (float)q[i] * d;
  }
}

static void dequant_q4_0(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = row + b * MT_Q4_0_BYTES;
    float d = mt_f16_to_f32(mt_load_u16(blk));
    const uint8_t* nib = blk + 2;
    float* o = out + b * MT_QK;
    for (int j = 0; j < MT_QK / 2; j++) {
      o[j] = (float)((int)(nib[j] & 0x0f) - 8) * d;
      o[j + MT_QK / 2] = (float)((int)(nib[j] >> 4) - 8) * d;
    }
  }
}

// Q5_0: (code - 16) * d; Q5_1: code * d + m (one product, one sum, as ggml's dequantize_row_q5_*).
static void dequant_q5(int type, const uint8_t* row, int64_t cols, float* out) {
  const int bytes = type == MT_Q5_1 ? MT_Q5_1_BYTES : MT_Q5_0_BYTES;
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = row + b * bytes;
    const float d = mt_f16_to_f32(mt_load_u16(blk));
    float* o = out + b * MT_QK;
    if (type == MT_Q5_1) {
      const float m = mt_f16_to_f32(mt_load_u16(blk + 2));
      for (int e = 0; e < MT_QK; e++) o[e] = (float)mt_q5_code(type, blk, e) * d + m;
    } else {
      for (int e = 0; e < MT_QK; e++) o[e] = (float)(mt_q5_code(type, blk, e) - 16) * d;
    }
  }
}

// IQ4_NL: d * table[nibble] (ggml's dequantize_row_iq4_nl).
static void dequant_iq4_nl(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = row + b * MT_IQ4_NL_BYTES;
    const float d = mt_f16_to_f32(mt_load_u16(blk));
    float* o = out + b * MT_QK;
    for (int j = 0; j < MT_QK / 2; j++) {
      o[j] = d * (float)mt_iq4nl_values[blk[2 + j] & 0x0f];
      o[j + MT_QK / 2] = d * (float)mt_iq4nl_values[blk[2 + j] >> 4];
    }
  }
}

// MXFP4: mt_e8m0_half(e) * table[nibble] (ggml's dequantize_row_mxfp4; the product of a power of two
// and a small integer, exact unless it leaves the normal range).
static void dequant_mxfp4(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = row + b * MT_MXFP4_BYTES;
    const float d = mt_e8m0_half(blk[0]);
    float* o = out + b * MT_QK;
    for (int j = 0; j < MT_QK / 2; j++) {
      o[j] = (float)mt_mxfp4_values[blk[1 + j] & 0x0f] * d;
      o[j + MT_QK / 2] = (float)mt_mxfp4_values[blk[1 + j] >> 4] * d;
    }
  }
}

// value = d sc q - dmin m (Q2_K, Q4_K, Q5_K) or d sc q (Q3_K, Q6_K, IQ4_XS): (d * sc) * q - (dmin * m), each product
// rounded on its own (as ggml's dequantize_row_q*_K, whose d * sc is one float).
static void dequant_kquant(int type, const uint8_t* row, int64_t cols, float* out) {
  const int bytes = mt_kquant_block_bytes(type);
  for (int64_t b = 0; b < cols / MT_QK_K; b++) {
    const uint8_t* blk = row + b * bytes;
    int16_t sc[MT_QK_K_SUBS], m[MT_QK_K_SUBS];
    mt_kquant_scales(type, blk, sc, m);
    const float d = mt_f16_to_f32(mt_load_u16(blk + mt_kquant_d_at(type)));
    const float dmin = mt_kquant_has_min(type) ? mt_f16_to_f32(mt_load_u16(blk + mt_kquant_dmin_at(type))) : 0.0f;
    for (int e = 0; e < MT_QK_K; e++) {
      const float v = (d * (float)sc[e / 16]) * (float)mt_kquant_q(type, blk, e);
      out[b * MT_QK_K + e] = mt_kquant_has_min(type) ? v - dmin * (float)m[e / 16] : v;
    }
  }
}

void mt_dequant_row(int type, const void* row, int64_t cols, float* out) {
  const uint8_t* p = (const uint8_t*)row;
  switch (type) {
    case MT_F32:
      memcpy(out, p, (size_t)cols * 4);
      break;
    case MT_F16:
      for (int64_t i = 0; i < cols; i++) out[i] = mt_f16_to_f32(mt_load_u16(p + 2 * i));
      break;
    case MT_BF16:
      for (int64_t i = 0; i < cols; i++) out[i] = mt_bf16_to_f32(mt_load_u16(p + 2 * i));
      break;
    case MT_Q8_0:
      dequant_q8_0(p, cols, out);
      break;
    case MT_Q4_0:
      dequant_q4_0(p, cols, out);
      break;
    case MT_Q5_0:
    case MT_Q5_1:
      dequant_q5(type, p, cols, out);
      break;
    case MT_IQ4_NL:
      dequant_iq4_nl(p, cols, out);
      break;
    case MT_MXFP4:
      dequant_mxfp4(p, cols, out);
      break;
    default:
      if (mt_is_kquant(type)) dequant_kquant(type, p, cols, out);
      break;
  }
}

}  // extern "C"
