// The launches of the kernels in matmul_quant_kernels.cuh (which says what they compute and in what order).
#include "matmul_quant_kernels.cuh"

namespace mtc {
namespace {

using namespace q32;

template <int T>
void launch(const MatmulArgs& a, cudaStream_t s) {
  if (a.count == 1)
    matmul_q32_kernel<T, 1><<<matmul_grid(a.rows), kRowsPerBlock * kWarp, 0, s>>>(a);
  else
    matmul_q32_kernel<T, kGroupRows><<<matmul_grid(a.rows), kRowsPerBlock * kWarp, 0, s>>>(a);
}

}  // namespace

bool matmul_quant32(int type, const MatmulArgs& a, cudaStream_t s) {
  switch (type) {
    case Q8_0:
      launch<Q8_0>(a, s);
      return true;
    case Q4_0:
      launch<Q4_0>(a, s);
      return true;
    case Q5_0:
      launch<Q5_0>(a, s);
      return true;
    case Q5_1:
      launch<Q5_1>(a, s);
      return true;
    case IQ4_NL:
      launch<IQ4_NL>(a, s);
      return true;
    case MXFP4:
      launch<MXFP4>(a, s);
      return true;
    default:
      return false;
  }
}

}  // namespace mtc
