// Device-side helpers shared by the kernel files: byte loads (weight rows are only 2-byte
// aligned, so blocks are read byte by byte), f16 scales, warp sums, and the prepared-activation
// layouts of native/cpu/kernels_internal.h (mt_act_group, mt_act_k), which the device builds
// byte for byte as the CPU does so the integer sums see the same codes.
#pragma once
// MT_CUDA_EMU: compiled by g++ for the host warp emulator (emu/cuda_emu.h), which supplies the
// CUDA built-ins the kernels use, so their lane logic is tested on machines without a GPU.
#ifdef MT_CUDA_EMU
#include "emu/cuda_emu.h"
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif
#include <stdint.h>

namespace mtc {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;  // warps per thread block: one output row each
constexpr int kGroupRows = 8;     // activation rows one pass of the grouped form carries in registers

// The CPU's type ids (mt_kernels.h enum mt_type).
enum Type {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
  MXFP4 = 39
};

// Prepared activations (kernels_internal.h): Q8_0 groups of 8 blocks of 32 and Q8_K blocks of 256,
// both 320 bytes.
constexpr int kQK = 32;
constexpr int kQKK = 256;
constexpr int kGroupBlocks = 8;
constexpr int kActGroupBytes = 320;  // d[8] f32 | sum[8] i32 | q[8][32]
constexpr int kActKBytes = 320;      // q[256] | bsum[16] i16 | d f32 | pad
constexpr int kActKBsumAt = 256;
constexpr int kActKDAt = 288;

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

// IEEE half -> float (subnormals, inf and NaN included), as mt_f16_to_f32.
__device__ __forceinline__ float f16_at(const uint8_t* p) { return __half2float(__ushort_as_half(load_u16(p))); }

// Four bytes as one little-endian int (for __dp4a); p needs no alignment.
__device__ __forceinline__ int load_i32_bytes(const uint8_t* p) {
  return (int)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

// IQ4_NL / IQ4_XS: index i (0..15) of ggml's non-linear table kvalues_iq4nl (mt_iq4nl_values).
__device__ __forceinline__ int iq4nl_value(int i) {
  const int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return v[i & 15];
}

// MXFP4: code i (0..15) of ggml's kvalues_mxfp4 (mt_mxfp4_values), and the block scale 2^(e - 128)
// of its E8M0 byte as mt_e8m0_half gives it (f32 exponent field e - 1, or the subnormal 0x00200000 << e).
__device__ __forceinline__ int mxfp4_value(int i) {
  const int8_t v[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return v[i & 15];
}
__device__ __forceinline__ float e8m0_half(uint8_t e) {
  return __int_as_float((int)(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23));
}

// Four small signed values packed into one int for __dp4a.
__device__ __forceinline__ int pack4(int a, int b, int c, int d) {
  return (int)((uint32_t)(a & 0xff) | ((uint32_t)(b & 0xff) << 8) | ((uint32_t)(c & 0xff) << 16) |
               ((uint32_t)(d & 0xff) << 24));
}

__device__ __forceinline__ int warp_sum_int(int v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, width);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The CPU's mt_reduce8 over lanes 0..7: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), plus 0
// (maps -0 to +0). Valid in lanes 0..7; every lane of the warp must call it.
__device__ __forceinline__ float reduce8(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + 0.0f;
}

// The CPU's mt_reduce_float_lanes over 32 lanes: lane[l] + lane[l + 16], then + 8, then reduce8.
__device__ __forceinline__ float reduce32(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  return reduce8(v);
}

}  // namespace mtc
