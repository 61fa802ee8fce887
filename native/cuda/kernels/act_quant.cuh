// Activation preparation on the device, bit for bit what native/cpu/quant_rows.cc produces
// (quantise_q8 and mt_act_prepare_kquant), so the integer dot products see the CPU's codes.
#pragma once
#include "types.cuh"

namespace mtc {

// x [count, cols] (row stride ldx floats) -> count prepared rows for weights of `wtype`, each
// act_row_bytes(wtype, cols) bytes, back to back at act. Float weight types need no preparation
// (they read x): returns cudaErrorInvalidValue for them.
cudaError_t act_prepare(int wtype, const float* x, int64_t cols, int64_t ldx, int count, uint8_t* act,
                        cudaStream_t stream);

}  // namespace mtc
