// Device activation quantisers, one warp per block. The CPU's rules (native/cpu/quant_rows.cc):
// d = max|x| / 127, q = round-half-even(x * (1 / d)) clamped to +-127; a block holding a NaN or
// inf gets d = NaN with q and sums 0. Q8_0 groups keep d rounded to f16 (after quantising with the
// unrounded d) and pad a short last group with zero blocks; Q8_K keeps d as f32 and a sum per 16.
// Every operation here is one IEEE rounding (division and reciprocal are IEEE without fast math,
// and the build passes --fmad=false), so the bytes equal the CPU's.
// The kernels only (no launches), so native/cuda/kernels/emu can run them on the host.
#pragma once
#include <float.h>
#include <math.h>
#include "act_quant.cuh"

namespace mtc {
namespace actq {

__device__ __forceinline__ int quantise(float v, float inv) {
  const int q = __float2int_rn(v * inv);  // round half to even, as the CPU's round_to_int
  return q > 127 ? 127 : (q < -127 ? -127 : q);
}

// One warp per block slot of one row (slots: the row's blocks rounded up to whole groups of 8).
__global__ void quantise_q8_0(const float* x, int64_t cols, int64_t ldx, int count, uint8_t* act, int64_t act_stride) {
  const int64_t nb = cols / kQK;
  const int64_t slots = (nb + kGroupBlocks - 1) / kGroupBlocks * kGroupBlocks;
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (w >= slots * count) return;  // warp-uniform
  const int64_t row = w / slots, b = w % slots;
  const int j = (int)(b % kGroupBlocks);
  uint8_t* grp = act + row * act_stride + (b / kGroupBlocks) * kActGroupBytes;
  const float v = b < nb ? x[row * ldx + b * kQK + lane] : 0.0f;
  const bool finite = __all_sync(0xffffffffu, fabsf(v) <= FLT_MAX);
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  const int q = finite ? quantise(v, inv) : 0;
  grp[64 + kQK * j + lane] = (uint8_t)(int8_t)q;
  const int sum = warp_sum_int(q, kWarp);
  if (lane == 0) {
    reinterpret_cast<float*>(grp)[j] = finite ? __half2float(__float2half_rn(d)) : NAN;
    reinterpret_cast<int32_t*>(grp + 32)[j] = sum;
  }
}

// One warp per 256-element block; lane l holds elements 8l .. 8l + 7 (half of sub-block l / 2).
__global__ void quantise_q8_k(const float* x, int64_t cols, int64_t ldx, int count, uint8_t* act, int64_t act_stride) {
  const int64_t nb = cols / kQKK;
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (w >= nb * count) return;  // warp-uniform
  const int64_t row = w / nb, b = w % nb;
  const float* xb = x + row * ldx + b * kQKK + 8 * lane;
  uint8_t* out = act + row * act_stride + b * kActKBytes;
  float v[8];
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < 8; i++) {
    v[i] = xb[i];
    amax = fmaxf(amax, fabsf(v[i]));
    finite = finite && fabsf(v[i]) <= FLT_MAX;
  }
  finite = __all_sync(0xffffffffu, finite);
  amax = warp_max(amax);
  const float d = amax / 127.0f;
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int i = 0; i < 8; i++) {
    const int q = finite ? quantise(v[i], inv) : 0;
    out[8 * lane + i] = (uint8_t)(int8_t)q;
    sum += q;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // the two halves of sub-block lane / 2
  if (lane % 2 == 0) reinterpret_cast<int16_t*>(out + kActKBsumAt)[lane / 2] = (int16_t)sum;
  if (lane == 0) *reinterpret_cast<float*>(out + kActKDAt) = finite ? d : NAN;
  if (lane < 7) reinterpret_cast<int32_t*>(out + kActKDAt + 4)[lane] = 0;  // the pad, zero as the CPU's memset
}

}  // namespace actq
}  // namespace mtc
