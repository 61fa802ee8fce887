// Shared by the kernel files only (not part of the C ABI): block layouts, scalar
// conversions and the per-ISA entry points that isa.cc dispatches to.
//
// Every helper here is `static inline` on purpose: the AVX2 / AVX-512 files compile
// their functions for wider targets, and a non-static inline (or template) shared
// with them could be merged by the linker into one copy built for the wrong CPU.
#pragma once
#include <stdint.h>
#include <string.h>
#include "mt_kernels.h"

#define MT_QK 32  // elements per Q8_0 / Q4_0 block

// Weight blocks as stored in GGUF (bytes, not structs: rows are only 2-byte aligned).
//   Q8_0: f16 d | int8 q[32]                      34 bytes, value = q * d
//   Q4_0: f16 d | uint8 nib[16]                   18 bytes, byte j: element j (low nibble),
//                                                  element j+16 (high nibble), value = (nib - 8) * d
#define MT_Q8_0_BYTES 34
#define MT_Q4_0_BYTES 18

// A prepared activation block for Q8_0 / Q4_0 weights: x[i] ~= d * q[i], |q| <= 127.
// sum = sum(q) lets unsigned-times-signed dot products (VNNI, Q4_0 nibbles) remove
// their +128 / +8 offset exactly in integers.
typedef struct {
  float d;
  int32_t sum;
  int8_t q[MT_QK];
} mt_act_q8;  // 40 bytes
static_assert(sizeof(mt_act_q8) == 40, "mt_act_q8 layout");

static inline uint16_t mt_load_u16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static inline float mt_load_f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

static inline float mt_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// IEEE half -> float without F16C (subnormals, inf and nan included).
static inline float mt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return mt_bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return mt_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
  // Subnormal: man * 2^-24, exact in float.
  float f = (float)man * mt_bits_f32(0x33800000u);
  return sign ? -f : f;
}

static inline float mt_bf16_to_f32(uint16_t h) { return mt_bits_f32((uint32_t)h << 16); }

static inline int mt_is_quant(int type) { return type == MT_Q8_0 || type == MT_Q4_0; }

// Per-ISA entry points: same contract as mt_matvec_rows / mt_matmul_rows in mt_kernels.h.
// Every path's activation prepare produces bit-identical output (the same IEEE products,
// round-to-nearest-even), so paths read identical quantised inputs and differ from scalar
// only in summation order.
#define MT_DECLARE_PATH(suffix)                                                                             \
  void mt_matvec_rows_##suffix(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, \
                               int64_t r1);                                                                 \
  void mt_matmul_rows_##suffix(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, \
                               int64_t ldy, int64_t r0, int64_t r1);                                        \
  uint64_t mt_read_sum_##suffix(const void* p, size_t bytes);                                              \
  void mt_act_prepare_##suffix(int wtype, const float* x, int64_t cols, void* act);

#ifdef __cplusplus
extern "C" {
#endif
MT_DECLARE_PATH(scalar)
MT_DECLARE_PATH(avx2)
MT_DECLARE_PATH(avx512)
// The AVX2 path's Q8_0 / Q4_0 kernels (kernels_avx2_quant.cc), same contract as above.
void mt_matvec_quant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1);
void mt_matmul_quant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                          int64_t r0, int64_t r1);
#ifdef __cplusplus
}
#endif
