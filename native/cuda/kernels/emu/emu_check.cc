// emu_check: the device kernels run on the host (cuda_emu.h) against native/cpu's scalar kernels,
// bit for bit. For every weight type, for count 1 (matvec form) and 7 (grouped form):
//   the activation quantiser's bytes == mt_act_prepare_scalar's, and
//   the matrix product's floats == mt_matmul_rows_scalar's (the canonical order, kernels_internal.h).
// Shapes are small but cross every edge: several 32-block chunks with a partial one, a padded
// last activation group, an odd number of k-quant super-blocks (one half-warp idle), float rows
// that are no multiple of 32, and a row count that is no multiple of the 4 rows per thread block.
// Then whole experts through ffn_plan.cuh's steps (the same plan expert_ffn.cu launches), against
// the CPU's expert FFN: bit for bit too, since here silu's expf is the CPU's own.
// Prints one line per case and "emu: pass" or "emu: fail"; exit 0 / 1.
// Built with g++ -DMT_CUDA_EMU (tests/native/cuda-kernels.test.ts); needs no CUDA at all.
#include <cstdio>
#include <cstring>
#include <vector>
#include "../act_quant_kernels.cuh"
#include "../check/reference.h"
#include "../ffn_plan.cuh"
#include "../matmul_float_kernels.cuh"
#include "../matmul_kquant_kernels.cuh"
#include "../matmul_quant_kernels.cuh"

namespace {

constexpr int64_t kRows = 10;

int64_t cols_for(int type) {
  if (mtc::is_quant32(type)) return 32 * 43;  // 43 blocks: chunks of 32 + 11, a padded group
  if (mtc::is_kquant(type)) return 256 * 5;   // 5 super-blocks: the last pair has one
  return 1000;                                // floats: 31 full lane rounds + 8
}

unsigned grid_for(int64_t warps) { return (unsigned)((warps + 3) / 4); }

// Prepared rows into out (act_quant.cu's grid); float weights take the f32 rows as they are.
void emu_prepare_into(int type, const float* x, int64_t cols, int count, uint8_t* out) {
  const int64_t stride = (int64_t)mtc::act_row_bytes(type, cols);
  if (mtc::act_kind(type) == mtc::kActQ8) {
    const int64_t slots = (cols / 32 + 7) / 8 * 8;
    emu_launch(grid_for(slots * count), 128, [&] { mtc::actq::quantise_q8_0(x, cols, cols, count, out, stride); });
  } else if (mtc::act_kind(type) == mtc::kActQ8K) {
    emu_launch(grid_for(cols / 256 * count), 128, [&] { mtc::actq::quantise_q8_k(x, cols, cols, count, out, stride); });
  } else {
    memcpy(out, x, (size_t)(stride * count));
  }
}

std::vector<uint8_t> emu_prepare(int type, const float* x, int64_t cols, int count) {
  std::vector<uint8_t> act(mtc::act_row_bytes(type, cols) * count, 0xa5);  // garbage: every byte must be written
  emu_prepare_into(type, x, cols, count, act.data());
  return act;
}

template <int T, int NR>
void emu_matmul_t(const mtc::MatmulArgs& a) {
  const unsigned grid = mtc::matmul_grid(a.rows);
  if (mtc::is_quant32(T))
    emu_launch(grid, 128, [&] { mtc::q32::matmul_q32_kernel<T, NR>(a); });
  else if (mtc::is_kquant(T))
    emu_launch(grid, 128, [&] { mtc::kq::matmul_kq_kernel<T, NR>(a); });
  else
    emu_launch(grid, 128, [&] { mtc::fl::matmul_float_kernel<T, NR>(a); });
}

template <int T>
void emu_matmul_type(const mtc::MatmulArgs& a) {
  if (a.count == 1)
    emu_matmul_t<T, 1>(a);
  else
    emu_matmul_t<T, mtc::kGroupRows>(a);
}

void emu_matmul(int type, const mtc::MatmulArgs& a) {
  switch (type) {
    case MT_Q8_0:
      emu_matmul_type<MT_Q8_0>(a);
      break;
    case MT_Q4_0:
      emu_matmul_type<MT_Q4_0>(a);
      break;
    case MT_Q5_0:
      emu_matmul_type<MT_Q5_0>(a);
      break;
    case MT_Q5_1:
      emu_matmul_type<MT_Q5_1>(a);
      break;
    case MT_Q2_K:
      emu_matmul_type<MT_Q2_K>(a);
      break;
    case MT_Q3_K:
      emu_matmul_type<MT_Q3_K>(a);
      break;
    case MT_Q4_K:
      emu_matmul_type<MT_Q4_K>(a);
      break;
    case MT_Q5_K:
      emu_matmul_type<MT_Q5_K>(a);
      break;
    case MT_Q6_K:
      emu_matmul_type<MT_Q6_K>(a);
      break;
    case MT_IQ4_NL:
      emu_matmul_type<MT_IQ4_NL>(a);
      break;
    case MT_IQ4_XS:
      emu_matmul_type<MT_IQ4_XS>(a);
      break;
    case MT_MXFP4:
      emu_matmul_type<MT_MXFP4>(a);
      break;
    case MT_F32:
      emu_matmul_type<MT_F32>(a);
      break;
    case MT_F16:
      emu_matmul_type<MT_F16>(a);
      break;
    case MT_BF16:
      emu_matmul_type<MT_BF16>(a);
      break;
    default:
      break;
  }
}

bool run_case(int type, int count, uint32_t seed) {
  const int64_t cols = cols_for(type);
  std::vector<uint8_t> w(mt_row_bytes(type, cols) * kRows);
  mtcheck::fill_matrix(type, w.data(), kRows, cols, &seed);
  const std::vector<float> x = mtcheck::random_rows(count * cols, &seed);
  const size_t stride = mt_act_row_bytes(type, cols);
  std::vector<uint8_t> act_cpu(stride * count);
  for (int i = 0; i < count; i++) mt_act_prepare_scalar(type, x.data() + i * cols, cols, act_cpu.data() + i * stride);
  std::vector<float> y_cpu((size_t)(count * kRows)), y_emu(y_cpu.size(), -1.0f);
  mt_matmul_rows_scalar(type, w.data(), cols, act_cpu.data(), count, y_cpu.data(), kRows, 0, kRows);
  const std::vector<uint8_t> act_emu = emu_prepare(type, x.data(), cols, count);
  const bool act_same = act_emu == act_cpu;
  emu_matmul(type, {w.data(), kRows, cols, act_cpu.data(), (int64_t)stride, count, y_emu.data(), kRows});
  const bool y_same = memcmp(y_emu.data(), y_cpu.data(), y_cpu.size() * 4) == 0;
  printf("%s count %d: activations %s, products %s\n", mtcheck::type_name(type), count, act_same ? "same" : "DIFFER",
         y_same ? "same" : "DIFFER");
  return act_same && y_same;
}

void emu_run(const mtc::Step& st) {
  switch (st.kind) {
    case mtc::Step::kPrepare:
      emu_prepare_into(st.type, st.x, st.cols, st.mm.count, st.act);
      break;
    case mtc::Step::kMatmul:
      emu_matmul(st.type, st.mm);
      break;
    case mtc::Step::kSwiglu:
      for (int64_t i = 0; i < st.n; i++) mtc::swiglu_at(st.g, st.u, i);
      break;
  }
}

bool run_expert(const mtcheck::Shape& s, int count, uint32_t seed) {
  uint64_t gb, ub, db;
  std::vector<uint8_t> slot = mtcheck::random_slot(s, &seed, &gb, &ub, &db);
  const std::vector<float> x = mtcheck::random_rows(count * s.n_embd, &seed);
  const std::vector<float> ref = mtcheck::expert_ffn_cpu(s, slot.data(), gb, ub, x.data(), count);
  std::vector<float> y(ref.size(), -1.0f);
  const size_t scratch_bytes = mtc::layout_for(s.gate, s.up, s.down, s.n_embd, s.n_ff, count).total;
  std::vector<uint8_t> scratch(scratch_bytes + 256, 0xa5);
  uint8_t* aligned = scratch.data() + (256 - (uintptr_t)scratch.data() % 256) % 256;  // as cudaMalloc's
  const mt_cuda_expert_args a = {slot.data(), gb,     ub,       db,       s.gate, s.up,    s.down,
                                 s.n_embd,    s.n_ff, x.data(), y.data(), count,  aligned, scratch_bytes};
  mtc::Step steps[mtc::kMaxSteps];
  const int n = mtc::plan_expert_ffn(a, steps);
  for (int i = 0; i < n; i++) emu_run(steps[i]);
  const bool same = n > 0 && memcmp(y.data(), ref.data(), ref.size() * 4) == 0;
  printf("expert %s/%s/%s count %d: %s\n", mtcheck::type_name(s.gate), mtcheck::type_name(s.up),
         mtcheck::type_name(s.down), count, same ? "same" : "DIFFER");
  return same;
}

}  // namespace

int main() {
  const int types[] = {MT_Q8_0, MT_Q4_0, MT_Q5_0, MT_Q5_1, MT_Q2_K,   MT_Q3_K,   MT_Q4_K, MT_Q5_K,
                       MT_Q6_K, MT_F32,  MT_F16,  MT_BF16, MT_IQ4_NL, MT_IQ4_XS, MT_MXFP4};
  bool all = true;
  uint32_t seed = 12345;
  for (int t : types)
    for (int count : {1, 7}) all = run_case(t, count, seed += 7919) && all;
  // Q4_K_M's expert mix, and three activation kinds in one expert (Up's own Q8_K rows beside
  // Gate's Q8_0 groups, Down reading H as f32).
  all = run_expert({MT_Q4_K, MT_Q4_K, MT_Q6_K, 256, 256}, 3, seed += 7919) && all;
  all = run_expert({MT_Q8_0, MT_Q4_K, MT_F16, 256, 256}, 2, seed += 7919) && all;
  // An old llama-quantize Q2_K file's expert on rows not a multiple of 256 (IQ4_NL), and IQ4_XS.
  all = run_expert({MT_IQ4_NL, MT_IQ4_NL, MT_IQ4_NL, 96, 64}, 3, seed += 7919) && all;
  all = run_expert({MT_IQ4_XS, MT_IQ4_XS, MT_IQ4_NL, 256, 256}, 2, seed += 7919) && all;
  // gpt-oss's MXFP4 experts (odd row bytes: 17 per block), and one beside a Q8_0 down.
  all = run_expert({MT_MXFP4, MT_MXFP4, MT_MXFP4, 96, 64}, 3, seed += 7919) && all;
  all = run_expert({MT_MXFP4, MT_MXFP4, MT_Q8_0, 288, 160}, 2, seed += 7919) && all;
  printf("emu: %s\n", all ? "pass" : "fail");
  return all ? 0 : 1;
}
