// The expert SwiGLU FFN of mt_cuda_runtime.h on one stream:
//   prepare x for Gate (and for Up when its activation kind differs), G = Gate x, U = Up x,
//   H = silu(G) * U (in place in G), prepare H for Down, y = Down H.
#pragma once
#include "../mt_cuda_runtime.h"
#include "types.cuh"

namespace mtc {

bool type_supported(int type);
size_t expert_scratch_bytes(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count);
cudaError_t expert_ffn(const mt_cuda_expert_args& args, cudaStream_t stream);

}  // namespace mtc
