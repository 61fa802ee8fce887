// The expert FFN of mt_cuda_runtime.h as a plan: the scratch layout, the argument checks and the
// list of steps (prepare, matrix product, swiglu) with their pointers. expert_ffn.cu launches the
// steps on a stream; emu/emu_check.cc runs the same plan on the host emulator, so the layout and
// the wiring are tested without a GPU too. Header-only (inline) for that reason.
#pragma once
#include "../mt_cuda_runtime.h"
#include "matmul.cuh"

namespace mtc {

constexpr size_t kScratchAlign = 256;  // every scratch region starts aligned (the int / float loads need 4)

inline size_t align_up(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// Scratch regions, as byte offsets from the scratch base; a size of 0 means the region is unused
// (float weights read f32 rows directly, and Up shares Gate's prepared rows when the kinds agree).
struct Layout {
  size_t act_gate, act_gate_bytes;
  size_t act_up, act_up_bytes;
  size_t g, u, h_bytes;  // G and U: count rows of n_ff floats
  size_t act_down, act_down_bytes;
  size_t total;
};

inline bool shapes_valid(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  return type_known(gate_type) && type_known(up_type) && type_known(down_type) && n_embd > 0 && n_ff > 0 && count > 0 &&
         row_bytes(gate_type, n_embd) && row_bytes(up_type, n_embd) && row_bytes(down_type, n_ff);
}

inline Layout layout_for(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
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

struct Step {
  enum Kind { kPrepare, kMatmul, kSwiglu } kind;
  int type;
  // kPrepare: x [count, cols] (row stride ldx) -> act; kSwiglu: g = silu(g) * u over n floats.
  const float* x;
  int64_t cols, ldx;
  uint8_t* act;
  MatmulArgs mm;  // kMatmul
  float* g;
  const float* u;
  int64_t n;
};
constexpr int kMaxSteps = 7;

inline Step prepare_step(int type, const float* x, int64_t cols, int count, uint8_t* act) {
  Step s = {};
  s.kind = Step::kPrepare, s.type = type, s.x = x, s.cols = cols, s.ldx = cols, s.act = act, s.mm.count = count;
  return s;
}

inline Step matmul_step(int type, const MatmulArgs& mm) {
  Step s = {};
  s.kind = Step::kMatmul, s.type = type, s.mm = mm;
  return s;
}

// The steps of one expert FFN into steps[kMaxSteps]; returns their number, or -1 for arguments
// the kernels cannot run (unknown types, partial blocks, slot or scratch too small or misaligned,
// null pointers).
inline int plan_expert_ffn(const mt_cuda_expert_args& a, Step* steps) {
  if (!shapes_valid(a.gate_type, a.up_type, a.down_type, a.n_embd, a.n_ff, a.count) || !a.slot || !a.x || !a.y ||
      !a.scratch)
    return -1;
  const int64_t E = a.n_embd, F = a.n_ff;
  if (a.gate_bytes < row_bytes(a.gate_type, E) * (size_t)F || a.up_bytes < row_bytes(a.up_type, E) * (size_t)F ||
      a.down_bytes < row_bytes(a.down_type, F) * (size_t)E)
    return -1;
  const Layout l = layout_for(a.gate_type, a.up_type, a.down_type, E, F, a.count);
  // The prepared rows are read as ints and floats: scratch must be at least 4-byte aligned
  // (cudaMalloc's is 256); an odd offset into an allocation would fault, so refuse it here.
  if (a.scratch_bytes < l.total || reinterpret_cast<uintptr_t>(a.scratch) % 4 != 0) return -1;
  uint8_t* base = static_cast<uint8_t*>(a.scratch);
  const uint8_t* slot = static_cast<const uint8_t*>(a.slot);
  const uint8_t* x_bytes = reinterpret_cast<const uint8_t*>(a.x);
  float* g = reinterpret_cast<float*>(base + l.g);
  float* u = reinterpret_cast<float*>(base + l.u);
  // Each matrix reads its own prepared rows, the rows it shares, or the f32 rows themselves.
  const uint8_t* gate_acts = l.act_gate_bytes ? base + l.act_gate : x_bytes;
  const uint8_t* up_acts = act_kind(a.up_type) == kActF32 ? x_bytes : base + (l.act_up_bytes ? l.act_up : l.act_gate);
  const uint8_t* down_acts = l.act_down_bytes ? base + l.act_down : reinterpret_cast<const uint8_t*>(g);
  int n = 0;
  if (l.act_gate_bytes) steps[n++] = prepare_step(a.gate_type, a.x, E, a.count, base + l.act_gate);
  if (l.act_up_bytes) steps[n++] = prepare_step(a.up_type, a.x, E, a.count, base + l.act_up);
  steps[n++] = matmul_step(a.gate_type, {slot, F, E, gate_acts, (int64_t)act_row_bytes(a.gate_type, E), a.count, g, F});
  steps[n++] =
      matmul_step(a.up_type, {slot + a.gate_bytes, F, E, up_acts, (int64_t)act_row_bytes(a.up_type, E), a.count, u, F});
  Step sw = {};
  sw.kind = Step::kSwiglu, sw.g = g, sw.u = u, sw.n = (int64_t)a.count * F;
  steps[n++] = sw;
  if (l.act_down_bytes) steps[n++] = prepare_step(a.down_type, g, F, a.count, base + l.act_down);
  steps[n++] = matmul_step(a.down_type, {slot + a.gate_bytes + a.up_bytes, E, F, down_acts,
                                         (int64_t)act_row_bytes(a.down_type, F), a.count, a.y, E});
  return n;
}

// g = silu(g) * u, silu(z) = z / (1 + e^-z): ops_elementwise.cc's swiglu. On the device expf is
// within 2 ulp of e^z (the CPU's libm within 1): the one place the device may differ from the CPU.
__device__ __forceinline__ void swiglu_at(float* g, const float* u, int64_t i) {
  g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

}  // namespace mtc
