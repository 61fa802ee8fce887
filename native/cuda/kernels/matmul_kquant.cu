// The launches of the kernels in matmul_kquant_kernels.cuh (which says what they compute and in what order).
#include "matmul_kquant_kernels.cuh"

namespace mtc {
namespace {

using namespace kq;

template <int T>
void launch(const MatmulArgs& a, cudaStream_t s) {
  if (a.count == 1)
    matmul_kq_kernel<T, 1><<<matmul_grid(a.rows), kRowsPerBlock * kWarp, 0, s>>>(a);
  else
    matmul_kq_kernel<T, kGroupRows><<<matmul_grid(a.rows), kRowsPerBlock * kWarp, 0, s>>>(a);
}

}  // namespace

bool matmul_kquant(int type, const MatmulArgs& a, cudaStream_t s) {
  switch (type) {
    case Q2_K:
      launch<Q2_K>(a, s);
      return true;
    case Q3_K:
      launch<Q3_K>(a, s);
      return true;
    case Q4_K:
      launch<Q4_K>(a, s);
      return true;
    case Q5_K:
      launch<Q5_K>(a, s);
      return true;
    case Q6_K:
      launch<Q6_K>(a, s);
      return true;
    case IQ4_XS:
      launch<IQ4_XS>(a, s);
      return true;
    default:
      return false;
  }
}

}  // namespace mtc
