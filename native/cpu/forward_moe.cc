// The MoE half of a layer, for a chunk of n rows:
//
//   x += proj; h = rmsnorm(x, ffn_norm)     [rows]  (+ shared gate logit)
//   router [n, nExpert] = Wr h              [pool]
//   softmax, top-k (or forced), weights     [rows]
//   group slots by expert (counting sort)   [caller]
//   gather h rows per expert                [rows]  (prefill only)
//   remote runs (device residents) start     [caller]  the source computes them meanwhile
//   g = silu(Gate_e h) * (Up_e h)           [pool]  experts x rows of nFf, each expert once
//   prepare g for Down                      [rows]
//   slot_down = Down_e g                    [pool]
//   remote runs' slot_down rows written      [caller]  remote_wait
//   x += sum_k w_k slot_down (+ shared)     deferred: combine_row, in the next phase
//
// A slot is one (row, rank) pair; slots are grouped by expert so each expert's weights are
// streamed once for all its rows. The shared expert (qwen2moe) is one more run over all rows.
#include <cmath>
#include <cstring>
#include "forward.h"
#include "ops_elementwise.h"

namespace mt {
namespace {

Pass& pass_of(void* arg) { return *static_cast<Pass*>(arg); }

// llama.cpp clamps the renormalising sum of the top-k weights from below (2^-14).
constexpr float kWeightsSumMin = 6.103515625e-5f;

void ffn_norm_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const LayerWeights& L = *p.L;
  const int64_t E = p.m->hp.n_embd;
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    float *x = p.x + r * E, *h = c.h + r * E;
    const float* proj = c.proj + r * E;
    if (L.o_bias != nullptr)  // gpt-oss: (Wo attn + bo) joins the residual, as llama.cpp adds them
      for (int64_t i = 0; i < E; i++) x[i] += proj[i] + L.o_bias[i];
    else
      for (int64_t i = 0; i < E; i++) x[i] += proj[i];
    rms_norm(x, L.ffn_norm, E, p.m->hp.rms_eps, h);
    int32_t done[3] = {-1, -1, -1};
    const bool shared = L.shexp_gate.data != nullptr;
    const Matrix* readers[3] = {&L.router, &L.gate.first, shared ? &L.shexp_gate : nullptr};
    for (int i = 0; i < 3; i++) {
      if (readers[i] == nullptr || readers[i]->data == nullptr || readers[i]->type == done[0] ||
          readers[i]->type == done[1])
        continue;  // none (a dense layer has no router or experts), or prepared already
      const int32_t t = done[i] = readers[i]->type;
      mt_act_prepare(t, h, E, c.act_h[t] + size_t(r) * mt_act_row_bytes(t, E));
    }
    // The shared expert's weight: its sigmoid gate (qwen2moe), or 1 (glm4moe's is ungated; a dense FFN).
    if (shared) c.shexp_weight[r] = L.shexp_gate_inp != nullptr ? sigmoid(dot(L.shexp_gate_inp, h, E)) : 1.0f;
  }
}

void router_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  const Matrix& w = p.L->router;
  const Segment seg{w.rows, w.cols * (p.n + 2)};
  for_piece_rows(&seg, 1, piece, nth, [&](int, int64_t r0, int64_t r1) {
    project(w, p.c->act_h[w.type], p.n, p.c->router, w.rows, r0, r1);
  });
}

void route_weights(const mt_hparams& hp, const float* probs, const int32_t* ids, bool forced, float* out);

// The routing of src/reference/routing.ts: p = softmax or sigmoid of the router logits (+ the router
// bias), or the logits themselves (softmax_weight); the top k of p (+ the selection bias, within the
// best expert groups) in rank order; w = p (or p / max(sum of the top k, 2^-14)) times the scale, or
// (softmax_weight) the softmax of the k logits. Forced routes (a trace's): those ids in their order,
// w = p / their sum (mt_eval_args), times the scale; softmax_weight's softmax over them.
void route_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const int32_t K = hp.n_expert_used;
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    float* probs = c.router + r * hp.n_expert;
    int32_t* ids = c.route_ids + r * K;
    if (p.L->router_bias != nullptr)
      for (int32_t i = 0; i < hp.n_expert; i++) probs[i] += p.L->router_bias[i];
    expert_probabilities(hp, probs);
    if (p.forced_routes != nullptr)
      std::memcpy(ids, p.forced_routes + (r * mt_moe_layers(&hp) + p.moe) * K, size_t(K) * sizeof(int32_t));
    else
      top_k(selection_scores(hp, *p.L, probs, c.router_sel + r * hp.n_expert), hp.n_expert, K, ids);
    if (hp.gating == MT_GATING_SOFTMAX_WEIGHT) {  // gpt-oss: softmax over the chosen k's logits
      float* w = c.route_w + r * K;
      for (int32_t k = 0; k < K; k++) w[k] = probs[ids[k]];
      softmax(w, K);
    } else {
      route_weights(hp, probs, ids, p.forced_routes != nullptr, c.route_w + r * K);
    }
    if (p.routes != nullptr)
      std::memcpy(p.routes + (r * mt_moe_layers(&hp) + p.moe) * K, ids, size_t(K) * sizeof(int32_t));
  }
}

// w [K] = probs[ids] (/ max(their sum, 2^-14) when renormalised or forced) (* the scale).
void route_weights(const mt_hparams& hp, const float* probs, const int32_t* ids, bool forced, float* out) {
  const int32_t K = hp.n_expert_used;
  float total = 0.0f;
  for (int32_t k = 0; k < K; k++) total += probs[ids[k]];
  if (total < kWeightsSumMin) total = kWeightsSumMin;
  const bool normalise = hp.norm_top_k || forced;
  const bool scaled = hp.expert_weights_scale != 0.0 && hp.expert_weights_scale != 1.0;
  for (int32_t k = 0; k < K; k++) {
    float w = normalise ? probs[ids[k]] / total : probs[ids[k]];
    out[k] = scaled ? w * float(hp.expert_weights_scale) : w;
  }
}

// Counting sort of the n * K slots by expert id; one run per expert with rows, then the shared one.
void group_slots(Pass& p) {
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const LayerWeights& L = *p.L;
  const int32_t K = hp.n_expert_used, routed = p.n * K;
  const int64_t E = hp.n_embd;
  std::memset(c.expert_count, 0, size_t(hp.n_expert) * sizeof(int32_t));
  for (int32_t s = 0; s < routed; s++) c.expert_count[c.route_ids[s]]++;
  const size_t act_stride = mt_act_row_bytes(L.gate.first.type, E);
  const size_t down_stride = mt_act_row_bytes(L.down.first.type, hp.n_ff_exp);
  size_t n_runs = 0;
  int32_t first = 0;
  for (int32_t x = 0; x < hp.n_expert; x++) {
    const int32_t count = c.expert_count[x];
    c.expert_count[x] = first;  // from here on: the next free slot of expert x
    if (count == 0) continue;
    ExpertRun& run = c.runs[n_runs++];
    run = ExpertRun{x, first, count, L.gate.of(x), L.up.of(x), L.down.of(x), nullptr, nullptr, down_stride};
    if (L.gate_bias != nullptr) {  // gpt-oss: this expert's rows of the layer's bias tables
      run.gate_bias = L.gate_bias + size_t(x) * size_t(hp.n_ff_exp);
      run.up_bias = L.up_bias + size_t(x) * size_t(hp.n_ff_exp);
      run.down_bias = L.down_bias + size_t(x) * size_t(E);
    }
    // Decode: the single row's prepared h is used in place; prefill gathers rows per expert.
    run.acts = p.n == 1 ? c.act_h[L.gate.first.type] : c.slot_act + size_t(first) * act_stride;
    run.acts_down = c.slot_act_down + size_t(first) * down_stride;
    first += count;
  }
  for (int32_t r = 0; r < p.n; r++)
    for (int32_t k = 0; k < K; k++) {
      const int32_t slot = c.expert_count[c.route_ids[r * K + k]]++;
      c.slot_row[slot] = r;
      c.row_slot[r * K + k] = slot;
    }
  if (L.shexp_gate.data != nullptr) {
    const size_t sh_stride = mt_act_row_bytes(L.shexp_down.type, hp.n_ff_shexp);
    c.runs[n_runs++] = ExpertRun{
        -1,       routed, p.n, L.shexp_gate, L.shexp_up, L.shexp_down, c.act_h[L.shexp_gate.type], c.shexp_act_down,
        sh_stride};
  }
  p.n_runs = int32_t(n_runs);
  for (size_t i = 0; i < n_runs; i++) {
    const ExpertRun& run = c.runs[i];
    c.gate_up_segs[i] = Segment{run.gate.rows, run.gate.cols * (run.count + 2)};
    c.down_segs[i] = Segment{run.down.rows, run.down.cols * (run.count + 2)};
  }
}

// Prefill: slot s gets row slot_row[s]'s prepared h, so each expert's rows are contiguous. [rows]
void gather_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const int32_t type = p.L->gate.first.type;
  const size_t stride = mt_act_row_bytes(type, p.m->hp.n_embd);
  int64_t b, e;
  share(int64_t(p.n) * p.m->hp.n_expert_used, ith, nth, &b, &e);
  for (int64_t s = b; s < e; s++)
    std::memcpy(c.slot_act + size_t(s) * stride, c.act_h[type] + size_t(c.slot_row[s]) * stride, stride);
}

// slot_gate [slot, :] = silu(Gate_e h) * (Up_e h), rows of the wave's runs split over the pool. [pool]
void gate_up_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const int64_t ld = c.n_ff_max;
  for_piece_rows(c.gate_up_segs.data() + p.wave_begin, p.wave_end - p.wave_begin, piece, nth,
                 [&](int i, int64_t r0, int64_t r1) {
                   const ExpertRun& run = c.runs[size_t(p.wave_begin + i)];
                   float* g = c.slot_gate + size_t(run.first) * size_t(ld);
                   float* u = c.slot_up + size_t(run.first) * size_t(ld);
                   project(run.gate, run.acts, run.count, g, ld, r0, r1);
                   project(run.up, run.acts, run.count, u, ld, r0, r1);
                   for (int32_t j = 0; j < run.count; j++) {
                     float *gj = g + j * ld + r0, *uj = u + j * ld + r0;
                     if (run.gate_bias != nullptr) {
                       for (int64_t i = 0; i < r1 - r0; i++) gj[i] += run.gate_bias[r0 + i];
                       for (int64_t i = 0; i < r1 - r0; i++) uj[i] += run.up_bias[r0 + i];
                     }
                     if (p.m->hp.expert_act == MT_EXPERT_ACT_SWIGLU_OAI)
                       swiglu_oai(gj, uj, r1 - r0);
                     else
                       swiglu(gj, uj, r1 - r0);
                   }
                 });
}

// The wave's slots' silu(g) * u prepared for their run's Down matrix. [rows over the wave's slots]
void down_prep_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  int64_t slots = 0;
  for (int32_t i = p.wave_begin; i < p.wave_end; i++) slots += c.runs[size_t(i)].count;
  int64_t b, e;
  share(slots, ith, nth, &b, &e);
  int64_t at = 0;  // the wave's slots counted run after run
  for (int32_t i = p.wave_begin; i < p.wave_end; at += c.runs[size_t(i)].count, i++) {
    const ExpertRun& run = c.runs[size_t(i)];
    const int64_t lo = at > b ? at : b, hi = at + run.count < e ? at + run.count : e;
    for (int64_t v = lo; v < hi; v++) {
      const int64_t s = run.first + (v - at);
      mt_act_prepare(run.down.type, c.slot_gate + s * c.n_ff_max, run.down.cols,
                     run.acts_down + size_t(v - at) * run.act_down_stride);
    }
  }
}

// slot_down [slot, nEmbd] = Down_e (silu(g) * u). [pool]
void down_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const int64_t E = p.m->hp.n_embd;
  for_piece_rows(c.down_segs.data() + p.wave_begin, p.wave_end - p.wave_begin, piece, nth,
                 [&](int i, int64_t r0, int64_t r1) {
                   const ExpertRun& run = c.runs[size_t(p.wave_begin + i)];
                   float* y = c.slot_down + size_t(run.first) * size_t(E);
                   project(run.down, run.acts_down, run.count, y, E, r0, r1);
                   for (int32_t j = 0; run.down_bias != nullptr && j < run.count; j++)
                     for (int64_t i = r0; i < r1; i++) y[j * E + i] += run.down_bias[i];
                 });
}

// The matrix phases over runs [begin, end).
void compute_wave(Pass& p, int32_t begin, int32_t end) {
  if (begin == end) return;
  p.wave_begin = begin, p.wave_end = end;
  const bool rows_parallel = p.n > 1;
  run_phase(p, gate_up_phase, true);
  run_phase(p, down_prep_phase, rows_parallel);
  run_phase(p, down_phase, true);
}

}  // namespace

// x [r] += sum_k w_k * slot_down [row_slot (r, k)] (+ sigmoid(gate) * shared), summed first
// in rank order as the reference does. proj [r] is free by now and holds the sum.
void combine_row(const Pass& p, int32_t r) {
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const int64_t E = hp.n_embd;
  const int32_t K = hp.n_expert_used;
  float* x = p.x + r * E;
  if (p.combine_dense) {  // a dense layer's FFN: slot r, added as it is
    const float* y = c.slot_down + size_t(r) * size_t(E);
    for (int64_t i = 0; i < E; i++) x[i] += y[i];
    return;
  }
  float* sum = c.proj + r * E;
  std::memset(sum, 0, size_t(E) * sizeof(float));
  for (int32_t k = 0; k < K; k++)
    axpy(c.route_w[r * K + k], c.slot_down + size_t(c.row_slot[r * K + k]) * size_t(E), sum, E);
  if (hp.shared_expert) axpy(c.shexp_weight[r], c.slot_down + size_t(p.n * K + r) * size_t(E), sum, E);
  for (int64_t i = 0; i < E; i++) x[i] += sum[i];
}

void expert_probabilities(const mt_hparams& hp, float* probs) {
  if (hp.gating == MT_GATING_SIGMOID)
    for (int32_t i = 0; i < hp.n_expert; i++) probs[i] = sigmoid(probs[i]);
  else if (hp.gating == MT_GATING_SOFTMAX)
    softmax(probs, hp.n_expert);  // SOFTMAX_WEIGHT: the raw logits choose
}

const float* selection_scores(const mt_hparams& hp, const LayerWeights& L, const float* probs, float* sel) {
  const bool grouped = hp.expert_groups > 1;
  if (L.exp_probs_b == nullptr && !grouped) return probs;
  for (int32_t i = 0; i < hp.n_expert; i++) sel[i] = L.exp_probs_b != nullptr ? probs[i] + L.exp_probs_b[i] : probs[i];
  if (!grouped) return sel;
  // Each group's score: the sum of its two best scores (llama.cpp's, for every arch); then the best
  // expert_groups_used groups keep their experts, ties to the lower group as top_k gives them.
  const int32_t size = hp.n_expert / hp.expert_groups;
  float scores[kExpertGroupsMax];
  int32_t best[2], kept[kExpertGroupsMax];
  for (int32_t g = 0; g < hp.expert_groups; g++) {
    const int32_t two = size < 2 ? size : 2;
    top_k(sel + g * size, size, two, best);
    scores[g] = two == 2 ? sel[g * size + best[0]] + sel[g * size + best[1]] : sel[g * size + best[0]];
  }
  top_k(scores, hp.expert_groups, hp.expert_groups_used, kept);
  for (int32_t g = 0; g < hp.expert_groups; g++) {
    bool keep = false;
    for (int32_t j = 0; j < hp.expert_groups_used; j++) keep = keep || kept[j] == g;
    if (!keep)
      for (int32_t i = 0; i < size; i++) sel[g * size + i] = -INFINITY;
  }
  return sel;
}

// A leading dense layer's FFN (no router, no experts): one run over every row, slots [0, n).
void dense_layer(Pass& p) {
  mt_context& c = *p.c;
  const LayerWeights& L = *p.L;
  run_phase(p, ffn_norm_phase, p.n > 1);
  const size_t down_stride = mt_act_row_bytes(L.shexp_down.type, L.shexp_down.cols);
  c.runs[0] = ExpertRun{
      -1, 0, p.n, L.shexp_gate, L.shexp_up, L.shexp_down, c.act_h[L.shexp_gate.type], c.shexp_act_down, down_stride};
  c.gate_up_segs[0] = Segment{L.shexp_gate.rows, L.shexp_gate.cols * (p.n + 2)};
  c.down_segs[0] = Segment{L.shexp_down.rows, L.shexp_down.cols * (p.n + 2)};
  p.n_runs = p.n_local = 1;
  compute_wave(p, 0, 1);
  p.combine_pending = p.combine_dense = true;
}

bool moe_layer(Pass& p, char* err, size_t err_bytes) {
  if (p.L->dense) return dense_layer(p), true;
  p.combine_dense = false;
  const bool rows_parallel = p.n > 1;
  run_phase(p, ffn_norm_phase, rows_parallel);
  run_phase(p, router_phase, true);
  run_phase(p, route_phase, rows_parallel);
  group_slots(p);
  int32_t ready = p.n_runs;
  p.n_local = p.n_runs;
  if (p.experts != nullptr && !step_bind_runs(p, &ready, err, err_bytes)) return false;
  if (p.experts != nullptr && !step_remote_start(p, err, err_bytes)) return false;
  if (p.n > 1) run_phase(p, gather_phase, true);
  compute_wave(p, 0, ready);
  while (ready < p.n_local) {  // runs still being read: each wave as its reads land
    int32_t landed = ready;
    if (!step_await_runs(p, ready, &landed, err, err_bytes)) {
      char ignored[8];
      step_remote_wait(p, ignored, sizeof ignored);  // nothing may write slot_down after the eval returns
      return false;
    }
    compute_wave(p, ready, landed);
    ready = landed;
  }
  if (!step_remote_wait(p, err, err_bytes)) return false;
  p.combine_pending = true;
  return true;
}

}  // namespace mt
