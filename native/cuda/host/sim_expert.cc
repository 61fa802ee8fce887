// The simulated expert kernel: the CPU kernels (mt_kernels.h) in the forward pass's order
// (native/cpu/forward_moe.cc: prepare, project, swiglu, prepare, project), so y equals the cpu
// backend's bit for bit.
#include <cstring>
#include "mt_kernels.h"
#include "sim_objects.h"
#include "../../cpu/ops_elementwise.h"

namespace mt {
namespace {

// The scratch regions start on this (act rows are read as blocks of structs).
constexpr size_t kScratchAlignBytes = 64;

// The expert kernel's scratch, carved in this order: acts for gate, acts for up, g, u, acts for down.
struct ExpertScratch {
  size_t act_gate, act_up, g, u, act_down, total;
};
size_t align_up(size_t n) { return (n + kScratchAlignBytes - 1) / kScratchAlignBytes * kScratchAlignBytes; }
ExpertScratch scratch_layout(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  ExpertScratch s{};
  const size_t rows = size_t(count > 0 ? count : 0);
  s.act_gate = 0;
  s.act_up = s.act_gate + align_up(rows * mt_act_row_bytes(gate_type, n_embd));
  s.g = s.act_up + align_up(rows * mt_act_row_bytes(up_type, n_embd));
  s.u = s.g + align_up(rows * size_t(n_ff) * sizeof(float));
  s.act_down = s.u + align_up(rows * size_t(n_ff) * sizeof(float));
  s.total = s.act_down + align_up(rows * mt_act_row_bytes(down_type, n_ff));
  return s;
}
size_t scratch_total(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count) {
  return scratch_layout(gate_type, up_type, down_type, n_embd, n_ff, count).total;
}

// W rows times `count` prepared rows, as the forward pass's project() does: matvec for one row,
// else the grouped matmul, so the sums run in the CPU backend's order.
void project(int type, const void* w, int64_t cols, int64_t rows, const uint8_t* acts, int32_t count, float* y) {
  if (count == 1)
    mt_matvec_rows(type, w, cols, acts, y, 0, rows);
  else
    mt_matmul_rows(type, w, cols, acts, count, y, rows, 0, rows);
}

void prepare_rows(int type, const float* x, int64_t cols, int32_t count, uint8_t* acts) {
  const size_t stride = mt_act_row_bytes(type, cols);
  for (int32_t i = 0; i < count; i++)
    mt_act_prepare(type, x + size_t(i) * size_t(cols), cols, acts + size_t(i) * stride);
}

}  // namespace

void sim_expert_ffn(const mt_cuda_expert_args& a) {
  const ExpertScratch s = scratch_layout(a.gate_type, a.up_type, a.down_type, a.n_embd, a.n_ff, a.count);
  uint8_t* scratch = static_cast<uint8_t*>(a.scratch);
  const uint8_t* gate = static_cast<const uint8_t*>(a.slot);
  float* g = reinterpret_cast<float*>(scratch + s.g);
  float* u = reinterpret_cast<float*>(scratch + s.u);
  prepare_rows(a.gate_type, a.x, a.n_embd, a.count, scratch + s.act_gate);
  prepare_rows(a.up_type, a.x, a.n_embd, a.count, scratch + s.act_up);
  project(a.gate_type, gate, a.n_embd, a.n_ff, scratch + s.act_gate, a.count, g);
  project(a.up_type, gate + a.gate_bytes, a.n_embd, a.n_ff, scratch + s.act_up, a.count, u);
  for (int32_t i = 0; i < a.count; i++) swiglu(g + size_t(i) * size_t(a.n_ff), u + size_t(i) * size_t(a.n_ff), a.n_ff);
  prepare_rows(a.down_type, g, a.n_ff, a.count, scratch + s.act_down);
  project(a.down_type, gate + a.gate_bytes + a.up_bytes, a.n_ff, a.n_embd, scratch + s.act_down, a.count, a.y);
}

size_t sim_expert_scratch_bytes(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff,
                                int32_t count) {
  return scratch_total(gate_type, up_type, down_type, n_embd, n_ff, count);
}

}  // namespace mt
