// F32 / F16 / BF16 weights against f32 activations. Lane l takes elements l, l + 32, ... in order
// with one fmaf each, which is the CPU's lane[i % 32] exactly; reduce32 is its final sum.
// The kernels only (no launches), so native/cuda/kernels/emu can run them on the host.
#pragma once
#include "matmul.cuh"

namespace mtc {
namespace fl {

template <int T>
__device__ __forceinline__ float weight_at(const uint8_t* row, int64_t i) {
  if (T == F32) return __int_as_float(load_i32_bytes(row + 4 * i));
  if (T == F16) return f16_at(row + 2 * i);
  return __int_as_float((int)((uint32_t)load_u16(row + 2 * i) << 16));  // BF16
}

template <int T, int NR>
__global__ void __launch_bounds__(kRowsPerBlock* kWarp) matmul_float_kernel(MatmulArgs a) {
  const int64_t r = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= a.rows) return;  // warp-uniform
  const int lane = threadIdx.x % kWarp;
  const uint8_t* wrow = a.W + r * a.cols * (T == F32 ? 4 : 2);
  for (int i0 = 0; i0 < a.count; i0 += NR) {
    float acc[NR];
#pragma unroll
    for (int j = 0; j < NR; j++) acc[j] = 0.0f;
    for (int64_t i = lane; i < a.cols; i += kWarp) {
      const float w = weight_at<T>(wrow, i);
#pragma unroll
      for (int j = 0; j < NR; j++) {
        if (i0 + j >= a.count) continue;
        const float* x = reinterpret_cast<const float*>(a.acts + (i0 + j) * a.act_stride);
        acc[j] = fmaf(w, x[i], acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < NR; j++) {
      if (i0 + j >= a.count) continue;
      const float y = reduce32(acc[j]);
      if (lane == 0) a.Y[(int64_t)(i0 + j) * a.ldy + r] = y;
    }
  }
}

}  // namespace fl
}  // namespace mtc
