// The launches of the kernels in matmul_float_kernels.cuh (which says what they compute and in what order).
#include "matmul_float_kernels.cuh"

namespace mtc {
namespace {

using namespace fl;

template <int T>
void launch(const MatmulArgs& a, cudaStream_t s) {
  if (a.count == 1)
    matmul_float_kernel<T, 1><<<matmul_grid(a.rows), kRowsPerBlock * kWarp, 0, s>>>(a);
  else
    matmul_float_kernel<T, kGroupRows><<<matmul_grid(a.rows), kRowsPerBlock * kWarp, 0, s>>>(a);
}

}  // namespace

bool matmul_float(int type, const MatmulArgs& a, cudaStream_t s) {
  switch (type) {
    case F32:
      launch<F32>(a, s);
      return true;
    case F16:
      launch<F16>(a, s);
      return true;
    case BF16:
      launch<BF16>(a, s);
      return true;
    default:
      return false;
  }
}

}  // namespace mtc
