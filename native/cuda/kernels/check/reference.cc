#include "reference.h"
#include <cmath>
#include <cstring>
#include "kernels_internal.h"

namespace mtcheck {
namespace {

uint32_t next(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

// An f16 of either sign with magnitude in [2^-10, 2^-5): small enough that no sum overflows.
uint16_t small_f16(uint32_t* seed) {
  const uint32_t r = next(seed);
  return (uint16_t)(((r & 1u) << 15) | ((5u + (r >> 1) % 5u) << 10) | ((r >> 8) & 0x3ffu));
}

void put_u16(uint8_t* p, uint16_t v) { memcpy(p, &v, 2); }

float uniform(uint32_t* seed) { return (float)(next(seed) >> 8) / 8388608.0f - 1.0f; }  // [-1, 1)

void project(int type, const uint8_t* W, int64_t rows, int64_t cols, const float* x, float* y) {
  std::vector<uint8_t> act(mt_act_row_bytes(type, cols));
  mt_act_prepare_scalar(type, x, cols, act.data());
  mt_matvec_rows_scalar(type, W, cols, act.data(), y, 0, rows);
}

}  // namespace

void fill_matrix(int type, uint8_t* w, int64_t rows, int64_t cols, uint32_t* seed) {
  const size_t bytes = mt_row_bytes(type, cols) * (size_t)rows;
  if (type == MT_F32 || type == MT_F16 || type == MT_BF16) {
    for (size_t i = 0; i < (size_t)(rows * cols); i++) {
      const float v = uniform(seed) / 8.0f;
      if (type == MT_F32) memcpy(w + 4 * i, &v, 4);
      uint32_t u;
      memcpy(&u, &v, 4);
      if (type == MT_F16) put_u16(w + 2 * i, mt_f32_to_f16(v));
      if (type == MT_BF16) put_u16(w + 2 * i, (uint16_t)(u >> 16));
    }
    return;
  }
  for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)next(seed);
  const bool k = mt_is_kquant(type);
  const size_t block = k ? (size_t)mt_kquant_block_bytes(type) : mt_row_bytes(type, MT_QK);
  for (size_t b = 0; b < bytes / block; b++) {
    uint8_t* blk = w + b * block;
    if (k) {
      put_u16(blk + mt_kquant_d_at(type), small_f16(seed));
      if (mt_kquant_has_min(type)) put_u16(blk + mt_kquant_dmin_at(type), small_f16(seed));
    } else if (type == MT_MXFP4) {
      blk[0] = (uint8_t)(118 + next(seed) % 5);  // E8M0: 2^-10 .. 2^-6, as small_f16's magnitudes
    } else {
      put_u16(blk, small_f16(seed));
      if (type == MT_Q5_1) put_u16(blk + 2, small_f16(seed));
    }
  }
}

std::vector<uint8_t> random_slot(const Shape& s, uint32_t* seed, uint64_t* gate_bytes, uint64_t* up_bytes,
                                 uint64_t* down_bytes) {
  *gate_bytes = mt_row_bytes(s.gate, s.n_embd) * (uint64_t)s.n_ff;
  *up_bytes = mt_row_bytes(s.up, s.n_embd) * (uint64_t)s.n_ff;
  *down_bytes = mt_row_bytes(s.down, s.n_ff) * (uint64_t)s.n_embd;
  std::vector<uint8_t> slot(*gate_bytes + *up_bytes + *down_bytes);
  fill_matrix(s.gate, slot.data(), s.n_ff, s.n_embd, seed);
  fill_matrix(s.up, slot.data() + *gate_bytes, s.n_ff, s.n_embd, seed);
  fill_matrix(s.down, slot.data() + *gate_bytes + *up_bytes, s.n_embd, s.n_ff, seed);
  return slot;
}

std::vector<float> random_rows(int64_t n, uint32_t* seed) {
  std::vector<float> x((size_t)n);
  for (float& v : x) v = uniform(seed);
  return x;
}

std::vector<float> expert_ffn_cpu(const Shape& s, const uint8_t* slot, uint64_t gate_bytes, uint64_t up_bytes,
                                  const float* x, int count) {
  std::vector<float> y((size_t)(count * s.n_embd)), g((size_t)s.n_ff), u((size_t)s.n_ff);
  for (int i = 0; i < count; i++) {
    const float* xi = x + i * s.n_embd;
    project(s.gate, slot, s.n_ff, s.n_embd, xi, g.data());
    project(s.up, slot + gate_bytes, s.n_ff, s.n_embd, xi, u.data());
    for (int64_t k = 0; k < s.n_ff; k++) g[k] = g[k] / (1.0f + std::exp(-g[k])) * u[k];  // ops_elementwise swiglu
    project(s.down, slot + gate_bytes + up_bytes, s.n_embd, s.n_ff, g.data(), y.data() + i * s.n_embd);
  }
  return y;
}

const char* type_name(int type) {
  switch (type) {
    case MT_F32:
      return "f32";
    case MT_F16:
      return "f16";
    case MT_BF16:
      return "bf16";
    case MT_Q8_0:
      return "q8_0";
    case MT_Q4_0:
      return "q4_0";
    case MT_Q5_0:
      return "q5_0";
    case MT_Q5_1:
      return "q5_1";
    case MT_Q2_K:
      return "q2_k";
    case MT_Q3_K:
      return "q3_k";
    case MT_Q4_K:
      return "q4_k";
    case MT_Q5_K:
      return "q5_k";
    case MT_Q6_K:
      return "q6_k";
    case MT_IQ4_NL:
      return "iq4_nl";
    case MT_IQ4_XS:
      return "iq4_xs";
    case MT_MXFP4:
      return "mxfp4";
    default:
      return "unknown";
  }
}

}  // namespace mtcheck
