// The launches of the kernels in act_quant_kernels.cuh (which says what they compute and in what order).
#include "act_quant_kernels.cuh"

namespace mtc {
namespace {

using namespace actq;

unsigned blocks_for_warps(int64_t warps) {
  const int64_t per_block = 128 / kWarp;
  return (unsigned)((warps + per_block - 1) / per_block);
}

}  // namespace

cudaError_t act_prepare(int wtype, const float* x, int64_t cols, int64_t ldx, int count, uint8_t* act,
                        cudaStream_t stream) {
  const int64_t stride = (int64_t)act_row_bytes(wtype, cols);
  if (stride == 0 || count <= 0) return cudaErrorInvalidValue;
  if (act_kind(wtype) == kActQ8) {
    const int64_t slots = (cols / kQK + kGroupBlocks - 1) / kGroupBlocks * kGroupBlocks;
    quantise_q8_0<<<blocks_for_warps(slots * count), 128, 0, stream>>>(x, cols, ldx, count, act, stride);
  } else if (act_kind(wtype) == kActQ8K) {
    quantise_q8_k<<<blocks_for_warps(cols / kQKK * count), 128, 0, stream>>>(x, cols, ldx, count, act, stride);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace mtc
