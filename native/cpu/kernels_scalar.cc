// The scalar path: plain C, every type, the reference the SIMD paths are tested against.
// Quantised weights use the same integer formulation as the SIMD paths
// (per block: d_w * d_x * sum(q_w * q_x)), so paths differ only in summation order.
#include "kernels_internal.h"

namespace {

// Four partial sums so the loop is not one long floating-point dependency chain.
float dot_f32(const uint8_t* w, const float* x, int64_t cols) {
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= cols; i += 4)
    for (int k = 0; k < 4; k++) s[k] += mt_load_f32(w + 4 * (i + k)) * x[i + k];
  for (; i < cols; i++) s[0] += mt_load_f32(w + 4 * i) * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

float dot_f16(const uint8_t* w, const float* x, int64_t cols) {
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= cols; i += 4)
    for (int k = 0; k < 4; k++) s[k] += mt_f16_to_f32(mt_load_u16(w + 2 * (i + k))) * x[i + k];
  for (; i < cols; i++) s[0] += mt_f16_to_f32(mt_load_u16(w + 2 * i)) * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

float dot_bf16(const uint8_t* w, const float* x, int64_t cols) {
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= cols; i += 4)
    for (int k = 0; k < 4; k++) s[k] += mt_bf16_to_f32(mt_load_u16(w + 2 * (i + k))) * x[i + k];
  for (; i < cols; i++) s[0] += mt_bf16_to_f32(mt_load_u16(w + 2 * i)) * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

float dot_q8_0(const uint8_t* w, const mt_act_q8* a, int64_t cols) {
  float s = 0.0f;
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = w + b * MT_Q8_0_BYTES;
    const int8_t* q = (const int8_t*)(blk + 2);
    int32_t isum = 0;
    for (int i = 0; i < MT_QK; i++) isum += (int32_t)q[i] * a[b].q[i];
    s += mt_f16_to_f32(mt_load_u16(blk)) * a[b].d * (float)isum;
  }
  return s;
}

float dot_q4_0(const uint8_t* w, const mt_act_q8* a, int64_t cols) {
  float s = 0.0f;
  for (int64_t b = 0; b < cols / MT_QK; b++) {
    const uint8_t* blk = w + b * MT_Q4_0_BYTES;
    const uint8_t* nib = blk + 2;
    int32_t isum = 0;
    for (int j = 0; j < MT_QK / 2; j++) {
      isum += ((int32_t)(nib[j] & 0x0f) - 8) * a[b].q[j];
      isum += ((int32_t)(nib[j] >> 4) - 8) * a[b].q[j + MT_QK / 2];
    }
    s += mt_f16_to_f32(mt_load_u16(blk)) * a[b].d * (float)isum;
  }
  return s;
}

float dot_row(int wtype, const uint8_t* w, int64_t cols, const void* act) {
  switch (wtype) {
    case MT_F32: return dot_f32(w, (const float*)act, cols);
    case MT_F16: return dot_f16(w, (const float*)act, cols);
    case MT_BF16: return dot_bf16(w, (const float*)act, cols);
    case MT_Q8_0: return dot_q8_0(w, (const mt_act_q8*)act, cols);
    case MT_Q4_0: return dot_q4_0(w, (const mt_act_q8*)act, cols);
    default: return 0.0f;
  }
}

}  // namespace

extern "C" {

void mt_matvec_rows_scalar(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0,
                           int64_t r1) {
  size_t row_bytes = mt_row_bytes(wtype, cols);
  for (int64_t r = r0; r < r1; r++) y[r] = dot_row(wtype, (const uint8_t*)W + r * row_bytes, cols, act);
}

// Row-outer: weight row r is read from memory once and stays in L1 for all n activations.
void mt_matmul_rows_scalar(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y,
                           int64_t ldy, int64_t r0, int64_t r1) {
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
