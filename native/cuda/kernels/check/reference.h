// The CPU side of moetier_cuda_check: random weight blocks and the expert FFN computed with the
// scalar kernels of native/cpu (mt_act_prepare_scalar, mt_matvec_rows_scalar), the engine's own
// reference, in the order native/cpu/forward_moe.cc runs it.
#pragma once
#include <cstdint>
#include <vector>

namespace mtcheck {

struct Shape {
  int gate, up, down;  // enum mt_type
  int64_t n_embd, n_ff;
};

// One expert's slot, gate | up | down back to back, of random blocks with small finite scales.
std::vector<uint8_t> random_slot(const Shape& s, uint32_t* seed, uint64_t* gate_bytes, uint64_t* up_bytes,
                                 uint64_t* down_bytes);
// Random bytes for one matrix W [rows, cols] of `type` at w (mt_row_bytes(type, cols) * rows bytes),
// then every scale field overwritten with a small finite f16 (the quant bytes stay random: every
// code is valid). Float types get values in [-1/8, 1/8).
void fill_matrix(int type, uint8_t* w, int64_t rows, int64_t cols, uint32_t* seed);
std::vector<float> random_rows(int64_t n, uint32_t* seed);
// y [count, n_embd] = Down (silu(Gate x) * (Up x)), row by row.
std::vector<float> expert_ffn_cpu(const Shape& s, const uint8_t* slot, uint64_t gate_bytes, uint64_t up_bytes,
                                  const float* x, int count);
const char* type_name(int type);

}  // namespace mtcheck
