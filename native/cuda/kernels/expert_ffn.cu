// The expert FFN driver: scratch layout, argument checks and the launch sequence. Every step is
// queued on the caller's stream; nothing here synchronises.
#include "act_quant.cuh"
#include "expert_ffn.cuh"
#include "matmul.cuh"

namespace mtc {
namespace {

constexpr size_t kAlign = 256;  // every scratch region starts aligned (the int / float loads need 4)

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Scratch regions, as byte offsets from the scratch base; a size of 0 means the region is unused
// (float weights read f32 rows directly, and Up shares Gate's prepared rows when the kinds agree).
struct Layout {
  size_t act_gate, act_gate_bytes;
  size_t act_up, act_up_bytes;
  size_t g, u, h_bytes;  // G and U: count rows of n_ff floats
  size_t act_down, act_down_bytes;
  size_t total;
};

bool shapes_valid(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  return type_supported(gate_type) && type_supported(up_type) && type_supported(down_type) && n_embd > 0 &&
         n_ff > 0 && count > 0 && row_bytes(gate_type, n_embd) && row_bytes(up_type, n_embd) &&
         row_bytes(down_type, n_ff);
}

Layout layout_for(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  Layout l = {};
  const bool gate_prepared = act_kind(gate_type) != kActF32;
  const bool up_own = act_kind(up_type) != kActF32 && act_kind(up_type) != act_kind(gate_type);
  l.act_gate_bytes = gate_prepared ? (size_t)count * act_row_bytes(gate_type, n_embd) : 0;
  l.act_up_bytes = up_own ? (size_t)count * act_row_bytes(up_type, n_embd) : 0;
  l.h_bytes = (size_t)count * (size_t)n_ff * sizeof(float);
  l.act_down_bytes = act_kind(down_type) != kActF32 ? (size_t)count * act_row_bytes(down_type, n_ff) : 0;
  size_t at = 0;
  l.act_gate = at, at += align_up(l.act_gate_bytes);
  l.act_up = at, at += align_up(l.act_up_bytes);
  l.g = at, at += align_up(l.h_bytes);
  l.u = at, at += align_up(l.h_bytes);
  l.act_down = at, at += align_up(l.act_down_bytes);
  l.total = at;
  return l;
}

// g = silu(g) * u, silu(z) = z / (1 + e^-z): ops_elementwise.cc's swiglu, with CUDA's expf
// (within 2 ulp of e^z; the CPU's libm is within 1), the one place the device may differ.
__global__ void swiglu_kernel(float* g, const float* u, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

cudaError_t matmul_any(int type, const MatmulArgs& a, cudaStream_t s) {
  if (!matmul_quant32(type, a, s) && !matmul_kquant(type, a, s) && !matmul_float(type, a, s))
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

// Up's activations: its own prepared rows, Gate's (same kind), or x itself (float weights).
const uint8_t* up_acts(const Layout& l, int up_type, uint8_t* base, const float* x) {
  if (act_kind(up_type) == kActF32) return reinterpret_cast<const uint8_t*>(x);
  return base + (l.act_up_bytes ? l.act_up : l.act_gate);
}

}  // namespace

bool type_supported(int type) { return type_known(type); }

size_t expert_scratch_bytes(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  if (!shapes_valid(gate_type, up_type, down_type, n_embd, n_ff, count)) return 0;
  return layout_for(gate_type, up_type, down_type, n_embd, n_ff, count).total;
}

cudaError_t expert_ffn(const mt_cuda_expert_args& a, cudaStream_t s) {
  if (!shapes_valid(a.gate_type, a.up_type, a.down_type, a.n_embd, a.n_ff, a.count) || !a.slot || !a.x || !a.y ||
      !a.scratch)
    return cudaErrorInvalidValue;
  const int64_t E = a.n_embd, F = a.n_ff;
  if (a.gate_bytes < row_bytes(a.gate_type, E) * (size_t)F || a.up_bytes < row_bytes(a.up_type, E) * (size_t)F ||
      a.down_bytes < row_bytes(a.down_type, F) * (size_t)E)
    return cudaErrorInvalidValue;
  const Layout l = layout_for(a.gate_type, a.up_type, a.down_type, E, F, a.count);
  if (a.scratch_bytes < l.total) return cudaErrorInvalidValue;
  uint8_t* base = static_cast<uint8_t*>(a.scratch);
  const uint8_t* slot = static_cast<const uint8_t*>(a.slot);
  float* g = reinterpret_cast<float*>(base + l.g);
  float* u = reinterpret_cast<float*>(base + l.u);
  cudaError_t e = cudaSuccess;
  if (l.act_gate_bytes) e = act_prepare(a.gate_type, a.x, E, E, a.count, base + l.act_gate, s);
  if (!e && l.act_up_bytes) e = act_prepare(a.up_type, a.x, E, E, a.count, base + l.act_up, s);
  const uint8_t* gate_acts = l.act_gate_bytes ? base + l.act_gate : reinterpret_cast<const uint8_t*>(a.x);
  const int64_t x_stride = (int64_t)act_row_bytes(a.gate_type, E);
  if (!e) e = matmul_any(a.gate_type, {slot, F, E, gate_acts, x_stride, a.count, g, F}, s);
  if (!e)
    e = matmul_any(a.up_type, {slot + a.gate_bytes, F, E, up_acts(l, a.up_type, base, a.x),
                               (int64_t)act_row_bytes(a.up_type, E), a.count, u, F}, s);
  const int64_t n = (int64_t)a.count * F;
  if (!e) swiglu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(g, u, n), e = cudaGetLastError();
  if (!e && l.act_down_bytes) e = act_prepare(a.down_type, g, F, F, a.count, base + l.act_down, s);
  const uint8_t* down_acts = l.act_down_bytes ? base + l.act_down : reinterpret_cast<const uint8_t*>(g);
  if (!e)
    e = matmul_any(a.down_type, {slot + a.gate_bytes + a.up_bytes, E, F, down_acts,
                                 (int64_t)act_row_bytes(a.down_type, F), a.count, a.y, E}, s);
  return e;
}

}  // namespace mtc
