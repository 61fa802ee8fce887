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

#define MT_QK 32  // elements per Q8_0 / Q4_0 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 block

// Weight blocks as stored in GGUF (bytes, not structs: rows are only 2-byte aligned).
//   Q8_0: f16 d | int8 q[32]                      34 bytes, value = q * d
//   Q4_0: f16 d | uint8 nib[16]                   18 bytes, byte j: element j (low nibble),
//                                                  element j+16 (high nibble), value = (nib - 8) * d
//   Q5_0: f16 d | uint8 qh[4] | uint8 nib[16]     22 bytes, nibbles as Q4_0, bit j of qh (little-endian
//                                                  uint32) = the 5th bit of element j,
//                                                  value = ((nib | hbit << 4) - 16) * d
//   Q5_1: f16 d | f16 m | uint8 qh[4] | nib[16]   24 bytes, value = (nib | hbit << 4) * d + m
//   IQ4_NL: f16 d | uint8 nib[16]                 18 bytes, nibbles as Q4_0, value = d * mt_iq4nl_values[nib]
//                                                  (ggml's block_iq4_nl and kvalues_iq4nl)
//   MXFP4: uint8 e | uint8 nib[16]                17 bytes, nibbles as Q4_0, value = mt_e8m0_half(e) *
//                                                  mt_mxfp4_values[nib] (ggml's block_mxfp4, kvalues_mxfp4:
//                                                  E2M1 codes doubled, so the scale is half the E8M0 one)
#define MT_Q8_0_BYTES 34
#define MT_Q4_0_BYTES 18
#define MT_Q5_0_BYTES 22
#define MT_Q5_1_BYTES 24
#define MT_IQ4_NL_BYTES 18
#define MT_MXFP4_BYTES 17

// The non-linear 4-bit table of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): signed, |v| <= 127 and
// never 0, so |v| fits an unsigned byte and v + 128 one too (the SIMD paths use both forms).
static const int8_t mt_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// MXFP4's codes: 2 x the E2M1 values (sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6), so integers,
// |v| <= 12 (v + 128 is an unsigned byte, as for the IQ4 table).
static const int8_t mt_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// One summation order for every path (the "canonical order"), so that a result never depends
// on the CPU that computed it. Every fused multiply-add below is one rounding (fmaf / vfmadd);
// every other product and sum is rounded on its own (the build passes -ffp-contract=off).
//
//   Q8_0 / Q4_0 (y = sum over blocks b of d_w[b] d_x[b] sum_i q_w[b,i] q_x[b,i]):
//     isum[b] = sum_i q_w q_x, exact in int32 (|isum| <= 32 * 128 * 127);
//     lane[b % 8] = fma(d_w[b] * d_x[b], (float)isum[b], lane[b % 8]), blocks in order;
//     y = mt_reduce8(lane) + 0.0f.
//   Q5_0: as Q4_0, with q_w = (nib | hbit << 4) - 16 (|isum| <= 32 * 16 * 127).
//   IQ4_NL: as Q8_0, with q_w = mt_iq4nl_values[nib] (|isum| <= 32 * 127 * 127).
//   MXFP4: as Q8_0, with q_w = mt_mxfp4_values[nib] (|isum| <= 32 * 12 * 127) and d_w = mt_e8m0_half(e),
//     a power of two (d_w * d_x is exact unless it leaves the normal range).
//   Q5_1 (y = sum_b d_w d_x sum_i u_w q_x + m_w d_x sum_i q_x, u_w = nib | hbit << 4 in 0..31):
//     isum[b] = sum_i u_w q_x, exact in int32 (|isum| <= 32 * 31 * 127);
//     lane[b % 8] = fma(d_w[b] * d_x[b], (float)isum[b], lane[b % 8]);
//     lane[b % 8] = fma(m_w[b] * d_x[b], (float)sum_x[b], lane[b % 8]) (sum_x: the act block's sum);
//     blocks in order, y = mt_reduce8(lane) + 0.0f.
//   Q2_K .. Q6_K (super-blocks b of 256 elements, 16 sub-blocks k of 16, integer scales sc[k] and
//   mins m[k] as kernels_kquant.h decodes them, activations as mt_act_k):
//     isum[b] = sum_k sc[k] sum_{i in k} q_w q_x, exact in int32 (|isum| <= 16 * 128 * 16 * 32 * 127);
//     msum[b] = sum_k m[k] bsum_x[k], exact (Q2_K, Q4_K, Q5_K only; the others have no min);
//     lane[b % 8] = fma(d_w[b] * d_x[b], (float)isum[b], lane[b % 8]);
//     then, with a min, lane[b % 8] = fma(-(dmin_w[b] * d_x[b]), (float)msum[b], lane[b % 8]);
//     super-blocks in order, y = mt_reduce8(lane) + 0.0f. (float)isum rounds to nearest even when
//     |isum| > 2^24, the same on every path (cvtdq2ps and the C cast agree).
//   IQ4_XS: as the k-quants without a min: sc[k] = its 32-element sub-block's 6-bit scale - 32 (each
//     repeated for the two 16-element halves), q_w = mt_iq4nl_values[nib]
//     (|isum| <= 8 * 32 * 32 * 127 * 127).
//   F32 / F16 / BF16 (y = sum_i w_i x_i):
//     lane[i % 32] = fma(w_i, x_i, lane[i % 32]), elements in order;
//     s16[l] = lane[l] + lane[l + 16], s8[l] = s16[l] + s16[l + 8], y = mt_reduce8(s8) + 0.0f.
// Lanes start at +0. Adding zeros (the padding of a short tail) leaves a non-zero lane unchanged,
// and the final + 0.0f maps -0 to +0, so a path may pad tails with zeros without changing a bit.
#define MT_QUANT_LANES 8
#define MT_FLOAT_LANES 32

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): the order of the usual 8-lane vector hsum
// (high half onto low, then movehl, then movehdup), written out so every path shares it.
static inline float mt_reduce8(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static inline float mt_reduce_quant_lanes(const float* lane) { return mt_reduce8(lane) + 0.0f; }

static inline float mt_reduce_float_lanes(const float* lane) {
  float s16[16], s8[8];
  for (int l = 0; l < 16; l++) s16[l] = lane[l] + lane[l + 16];
  for (int l = 0; l < 8; l++) s8[l] = s16[l] + s16[l + 8];
  return mt_reduce8(s8) + 0.0f;
}

// A prepared activation row for Q8_0 / Q4_0 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 weights: x[i] ~= d * q[i], |q| <= 127, in groups of
// 8 blocks laid out by field, so a SIMD path reads 8 scales or 8 sums with one load:
//   group g: d[8] (f32 holding an f16 value) | sum[8] = sum(q) of each block | q[8][32].
// A short last group is zero-filled. sum lets unsigned-times-signed dot products (VNNI, Q4_0 / Q5_0
// codes) remove their +128 / +8 / +16 offset exactly in integers, and is Q5_1's min term. d is rounded to f16 as llama.cpp
// stores it (block_q8_0), after the values were quantised with 1 / d of the unrounded d.
#define MT_ACT_GROUP_BLOCKS 8
typedef struct {
  float d[MT_ACT_GROUP_BLOCKS];
  int32_t sum[MT_ACT_GROUP_BLOCKS];
  int8_t q[MT_ACT_GROUP_BLOCKS][MT_QK];
} mt_act_group;  // 320 bytes
static_assert(sizeof(mt_act_group) == 320, "mt_act_group layout");

// A prepared activation row for k-quant weights: one mt_act_k per 256 elements (ggml's Q8_K
// scheme): d = max|x| / 127 kept as f32 (no f16 rounding), q = round(x * (1 / d)) to nearest even,
// clamped to +-127, and bsum[k] = sum of q over the 16-element sub-block k (the mins and the
// unsigned-code offsets come off in integers through it). A block holding a NaN or inf gets
// d = NaN, q and bsum 0, as the Q8_0 groups do.
typedef struct {
  int8_t q[256];
  int16_t bsum[16];
  float d;
  int32_t pad[7];  // 320 bytes: every block starts 64-byte aligned relative to the row
} mt_act_k;
static_assert(sizeof(mt_act_k) == 320, "mt_act_k layout");

static inline int64_t mt_act_groups(int64_t blocks) { return (blocks + MT_ACT_GROUP_BLOCKS - 1) / MT_ACT_GROUP_BLOCKS; }

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

// MXFP4's scale: 2^(e - 128) as an f32 (ggml's GGML_E8M0_TO_FP32_HALF): exponent field e - 1 for
// e >= 2; e = 0 and 1 are the subnormals 2^-128 and 2^-127 (0x00200000 << e). e = 255 gives 2^127.
static inline float mt_e8m0_half(uint8_t e) { return mt_bits_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23); }

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

// float -> IEEE half, round to nearest even (what F16C's vcvtps2ph does with rounding mode 0),
// without F16C: overflow to inf, subnormals rounded by one float addition.
static inline uint16_t mt_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u;   // nan (quiet)
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (x < 0x38800000u) {                        // below 2^-14: f16 subnormal or zero
    float v = mt_bits_f32(x) + 0.5f;            // ulp(0.5) = 2^-24 = the f16 subnormal step
    uint32_t u;
    memcpy(&u, &v, 4);
    return sign | (uint16_t)(u - 0x3f000000u);
  }
  x += 0xc8000fffu + ((x >> 13) & 1u);  // rebias (-112 << 23), round half to even
  return sign | (uint16_t)(x >> 13);
}

static inline float mt_bf16_to_f32(uint16_t h) { return mt_bits_f32((uint32_t)h << 16); }

// The 32-element block types, whose activations are mt_act_group rows (k-quants: mt_is_kquant).
static inline int mt_is_quant(int type) {
  return type == MT_Q8_0 || type == MT_Q4_0 || type == MT_Q5_0 || type == MT_Q5_1 || type == MT_IQ4_NL ||
         type == MT_MXFP4;
}

// Q5_0 / Q5_1: the unsigned 5-bit code 0..31 of element e (0..31) of one block; the f16 d is
// at 0, Q5_1's f16 m at 2, then qh (4 bytes) and the 16 nibble bytes.
static inline int mt_q5_qh_at(int type) { return type == MT_Q5_1 ? 4 : 2; }
static inline int mt_q5_code(int type, const uint8_t* blk, int e) {
  const uint8_t* qh = blk + mt_q5_qh_at(type);
  const uint8_t* qs = qh + 4;
  const int nib = e < MT_QK / 2 ? (qs[e] & 0x0f) : (qs[e - MT_QK / 2] >> 4);
  return nib | (((qh[e / 8] >> (e % 8)) & 1) << 4);
}

#include "kernels_kquant.h"

// Per-ISA entry points: same contract as mt_matvec_rows / mt_matmul_rows in mt_kernels.h.
// Every path's activation prepare produces bit-identical output (the same IEEE products,
// round-to-nearest-even), and every path sums in the canonical order above, so all paths
// give the scalar path's bits.
#define MT_DECLARE_PATH(suffix)                                                                               \
  void mt_matvec_rows_##suffix(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, \
                               int64_t r1);                                                                   \
  void mt_matmul_rows_##suffix(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, \
                               int64_t ldy, int64_t r0, int64_t r1);                                          \
  uint64_t mt_read_sum_##suffix(const void* p, size_t bytes);                                                 \
  void mt_act_prepare_##suffix(int wtype, const float* x, int64_t cols, void* act);

#ifdef __cplusplus
extern "C" {
#endif
MT_DECLARE_PATH(scalar)
MT_DECLARE_PATH(avx2)
MT_DECLARE_PATH(avx512)
// The AVX2 path's Q8_0 / Q4_0 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 kernels (kernels_avx2_quant.cc), same contract as
// above. The AVX-512 path calls them for Q5_0 / Q5_1 too (an AVX-512 CPU has AVX2).
void mt_matvec_quant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1);
void mt_matmul_quant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                          int64_t r0, int64_t r1);
// The k-quant (and IQ4_XS) kernels of the AVX2 and AVX-512 paths (kernels_avx2_kquant.cc, kernels_avx512_kquant.cc).
void mt_matvec_kquant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1);
void mt_matmul_kquant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                           int64_t r0, int64_t r1);
void mt_matvec_kquant_avx512(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1);
void mt_matmul_kquant_avx512(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                             int64_t r0, int64_t r1);
// The Q8_K activation quantiser (quant_rows.cc): the scalar path's (the SIMD paths' copy gives its bytes).
void mt_act_prepare_kquant(const float* x, int64_t cols, mt_act_k* act);
#ifdef __cplusplus
}
#endif
