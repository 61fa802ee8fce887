// Y[i, r] = W[r, :] . act_i for i in [0, count), r in [0, rows): the device matrix products.
// One warp per output row, weights read coalesced (neighbouring lanes read neighbouring blocks or
// elements). count == 1 is the matvec form; count > 1 the grouped form, where a warp carries
// kGroupRows activation rows at once so each weight row is fetched from memory once per pass
// (and, for count <= kGroupRows, once in all).
//
// Within a row every kernel sums in the CPU's canonical order (native/cpu/kernels_internal.h):
// the same exact integer block sums, the same fmaf per block into the same one of 8 lanes (32 for
// float weights), blocks in order, and the same final reduction. With the same prepared
// activations the result is the CPU scalar kernel's bits; no atomics, so every run is the same.
#pragma once
#include "types.cuh"

namespace mtc {

struct MatmulArgs {
  const uint8_t* W;  // rows x row_bytes(type, cols)
  int64_t rows, cols;
  const uint8_t* acts;  // count prepared rows (f32 rows for float weights)
  int64_t act_stride;   // bytes between prepared rows
  int count;
  float* Y;  // Y[i * ldy + r]
  int64_t ldy;
};

inline unsigned matmul_grid(int64_t rows) { return (unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// The row loop of the block-quant families (q32, kq): one warp per output row r, NR activation
// rows per pass; dot(wrow, i0, acc) sums a pass into lanes 0..7's accumulators (the CPU's 8
// lanes), and reduce8 finishes each row as the CPU does.
template <int NR, class Dot>
__device__ __forceinline__ void block_rows(const MatmulArgs& a, int64_t row_bytes, Dot dot) {
  const int64_t r = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= a.rows) return;  // warp-uniform
  const uint8_t* wrow = a.W + r * row_bytes;
  for (int i0 = 0; i0 < a.count; i0 += NR) {
    float acc[NR];
#pragma unroll
    for (int j = 0; j < NR; j++) acc[j] = 0.0f;
    dot(wrow, i0, acc);
#pragma unroll
    for (int j = 0; j < NR; j++) {
      if (i0 + j >= a.count) continue;
      const float y = reduce8(acc[j]);
      if (threadIdx.x % kWarp == 0) a.Y[(int64_t)(i0 + j) * a.ldy + r] = y;
    }
  }
}

// Per family (matmul_quant.cu, matmul_kquant.cu, matmul_float.cu); false: not this family's type.
bool matmul_quant32(int type, const MatmulArgs& a, cudaStream_t stream);
bool matmul_kquant(int type, const MatmulArgs& a, cudaStream_t stream);
bool matmul_float(int type, const MatmulArgs& a, cudaStream_t stream);

// Any type: cudaErrorInvalidValue for an unknown one, else the launch's error.
cudaError_t matmul(int type, const MatmulArgs& a, cudaStream_t stream);

}  // namespace mtc
