// Self-check of a SIMD path against the scalar one, run once before the dispatcher trusts it.
// Why: a path can only be tested on a CPU that has it, and the AVX-512 VNNI path may first
// meet such a CPU in production. Every path must give the scalar path's exact bits (the
// canonical order, kernels_internal.h), so the check compares bits: a path that differs from
// scalar by one ulp anywhere on these inputs is not used (the next lower path is), and a
// kernel bug degrades speed, never the output.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include "kernels_internal.h"
#include "isa_verify.h"

namespace {

// Deterministic, small inputs: every type, tails of 1 and 7 rows, whole and partial groups of 8
// blocks (1, 3, 9, 17 blocks), for float types element tails past the 32 lanes, and for the
// k-quants 1, 3 and 9 super-blocks (9: a lane of the 8 used twice).
const int kTypes[] = {MT_F32,  MT_F16,  MT_BF16, MT_Q8_0, MT_Q4_0,   MT_Q5_0,   MT_Q5_1, MT_Q2_K,
                      MT_Q3_K, MT_Q4_K, MT_Q5_K, MT_Q6_K, MT_IQ4_NL, MT_IQ4_XS, MT_MXFP4};
const int64_t kCols[] = {32, 96, 288, 544, 7, 45, 256, 768, 2304};
const int64_t kRows = 7;
const int64_t kBatch = 5;

uint32_t next(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

// Random but well-formed rows: finite values of moderate size in every type (|w| < 4).
void fill_weights(int type, int64_t rows, int64_t cols, std::vector<uint8_t>* w, uint32_t* seed) {
  w->assign(mt_row_bytes(type, cols) * rows, 0);
  uint8_t* p = w->data();
  const uint8_t* end = p + w->size();
  const uint16_t scale_f16 = 0x211f;  // ~0.0101: an f16 block scale
  while (p < end) {
    switch (type) {
      case MT_F32: {
        float v = (int32_t)(next(seed) % 2001 - 1000) / 1000.0f;
        std::memcpy(p, &v, 4);
        p += 4;
        break;
      }
      case MT_F16: {  // sign | exponent 10..16 (2^-5 .. 2^1) | random mantissa
        uint16_t h = (uint16_t)(((next(seed) & 1u) << 15) | ((10 + next(seed) % 7) << 10) | (next(seed) & 0x3ffu));
        std::memcpy(p, &h, 2);
        p += 2;
        break;
      }
      case MT_BF16: {  // the top half of a float in [-1, 1]
        float v = (int32_t)(next(seed) % 2001 - 1000) / 1000.0f;
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        uint16_t h = (uint16_t)(bits >> 16);
        std::memcpy(p, &h, 2);
        p += 2;
        break;
      }
      case MT_Q8_0:
        std::memcpy(p, &scale_f16, 2);
        for (int i = 0; i < MT_QK; i++) p[2 + i] = (uint8_t)(int8_t)(next(seed) % 255 - 127);
        p += MT_Q8_0_BYTES;
        break;
      case MT_Q4_0:
      case MT_IQ4_NL:  // the same layout: d, then 16 bytes of nibbles
        std::memcpy(p, &scale_f16, 2);
        for (int i = 0; i < MT_QK / 2; i++) p[2 + i] = (uint8_t)next(seed);
        p += MT_Q4_0_BYTES;
        break;
      case MT_MXFP4:  // e: 2^-10 .. 2^5 mostly, an eighth of the blocks the subnormal 2^-128 / 2^-127
        p[0] = (uint8_t)(next(seed) % 8 == 0 ? next(seed) % 2 : 118 + next(seed) % 16);
        for (int i = 0; i < MT_QK / 2; i++) p[1 + i] = (uint8_t)next(seed);
        p += MT_MXFP4_BYTES;
        break;
      case MT_Q5_0:
      case MT_Q5_1: {  // any qh and nibbles; d (and Q5_1's m) a finite f16
        const int bytes = type == MT_Q5_1 ? MT_Q5_1_BYTES : MT_Q5_0_BYTES;
        for (int i = 0; i < bytes; i++) p[i] = (uint8_t)next(seed);
        std::memcpy(p, &scale_f16, 2);
        if (type == MT_Q5_1) {
          const uint16_t m_f16 = (uint16_t)(((next(seed) & 1u) << 15) | 0x2400u);  // +-2^-6
          std::memcpy(p + 2, &m_f16, 2);
        }
        p += bytes;
        break;
      }
      default: {  // k-quants, IQ4_XS: every bit pattern of codes and sub-block scales is valid; d, dmin finite
        const int bytes = mt_kquant_block_bytes(type);
        for (int i = 0; i < bytes; i++) p[i] = (uint8_t)next(seed);
        std::memcpy(p + mt_kquant_d_at(type), &scale_f16, 2);
        if (mt_kquant_has_min(type)) std::memcpy(p + mt_kquant_dmin_at(type), &scale_f16, 2);
        p += bytes;
        break;
      }
    }
  }
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

// 1 when `paths` (matvec, matmul and prepare of the path) agree with scalar on every check.
// inject_error perturbs the scalar side, so a test can prove the check notices a difference.
int mt_isa_verify_path(mt_matvec_rows_fn matvec, mt_matmul_rows_fn matmul, mt_act_prepare_fn prepare,
                       int inject_error) {
  uint32_t seed = 0x9e3779b9u;
  std::vector<uint8_t> w;
  for (int type : kTypes) {
    for (int64_t cols : kCols) {
      if (mt_row_bytes(type, cols) == 0) continue;  // a partial block or super-block
      fill_weights(type, kRows, cols, &w, &seed);
      const size_t act_bytes = mt_act_row_bytes(type, cols);
      std::vector<float> x(cols * kBatch);
      for (float& v : x) v = (int32_t)(next(&seed) % 2001 - 1000) / 500.0f;
      // The last row tiny: its block scales d = max|x| / 127 fall among the f16 subnormals.
      for (int64_t i = 0; i < cols; i++) x[(kBatch - 1) * cols + i] *= 3e-6f;
      std::vector<uint8_t> acts_ref(act_bytes * kBatch), acts(act_bytes * kBatch);
      for (int64_t i = 0; i < kBatch; i++) {
        mt_act_prepare_scalar(type, x.data() + i * cols, cols, acts_ref.data() + i * act_bytes);
        prepare(type, x.data() + i * cols, cols, acts.data() + i * act_bytes);
      }
      if (std::memcmp(acts_ref.data(), acts.data(), acts.size()) != 0) return 0;
      std::vector<float> y_ref(kRows * kBatch), y_vec(kRows), y_mat(kRows * kBatch);
      mt_matmul_rows_scalar(type, w.data(), cols, acts_ref.data(), kBatch, y_ref.data(), kRows, 0, kRows);
      if (inject_error) y_ref[3] = std::nextafter(y_ref[3], INFINITY);  // one ulp
      // matmul row i against matvec: y_ref [kBatch, kRows]; the matvec reads activation row 0.
      matvec(type, w.data(), cols, acts.data(), y_vec.data(), 0, kRows);
      if (!same_bits(y_vec.data(), y_ref.data(), kRows)) return 0;
      matmul(type, w.data(), cols, acts.data(), kBatch, y_mat.data(), kRows, 0, kRows);
      if (!same_bits(y_mat.data(), y_ref.data(), y_mat.size())) return 0;
    }
  }
  return 1;
}
