// The expert FFN driver: plans the steps (ffn_plan.cuh) and queues them on the caller's stream;
// nothing here synchronises.
#include "act_quant.cuh"
#include "expert_ffn.cuh"
#include "ffn_plan.cuh"

namespace mtc {
namespace {

__global__ void swiglu_kernel(float* g, const float* u, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) swiglu_at(g, u, i);
}

cudaError_t matmul_any(int type, const MatmulArgs& a, cudaStream_t s) {
  if (!matmul_quant32(type, a, s) && !matmul_kquant(type, a, s) && !matmul_float(type, a, s))
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch(const Step& st, cudaStream_t s) {
  switch (st.kind) {
    case Step::kPrepare:
      return act_prepare(st.type, st.x, st.cols, st.ldx, st.mm.count, st.act, s);
    case Step::kMatmul:
      return matmul_any(st.type, st.mm, s);
    case Step::kSwiglu:
      swiglu_kernel<<<(unsigned)((st.n + 255) / 256), 256, 0, s>>>(st.g, st.u, st.n);
      return cudaGetLastError();
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool type_supported(int type) { return type_known(type); }

size_t expert_scratch_bytes(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  if (!shapes_valid(gate_type, up_type, down_type, n_embd, n_ff, count)) return 0;
  return layout_for(gate_type, up_type, down_type, n_embd, n_ff, count).total;
}

cudaError_t expert_ffn(const mt_cuda_expert_args& a, cudaStream_t s) {
  Step steps[kMaxSteps];
  const int n = plan_expert_ffn(a, steps);
  if (n < 0) return cudaErrorInvalidValue;
  for (int i = 0; i < n; i++) {
    const cudaError_t e = launch(steps[i], s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace mtc
