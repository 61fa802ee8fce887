// The per-layer steps of mt_eval when an expert source or step timing is attached:
//
//   begin  stamp start; source: layer_begin
//   (attention half)
//   moe    stamp moeStart (the attention's weight bytes: a virtual clock moves by them)
//   (router, top-k, group) -> bind: each routed run through the source (weights, or the container's,
//          or pending: still being read); the runs reordered ready first
//   remote runs (bound remote: residents in device memory) go last and to remote_start, so the
//          device computes them while the host computes the rest
//   (gate/up, down) over the ready runs; then, while runs are pending: await -> the landed ones
//          move up and (gate/up, down) over them. Each run's rows are computed the same way
//          whatever wave it is in, so the bits do not depend on when a read lands.
//   remote_wait: the remote runs' outputs are in slot_down before the rank-order combine
//   end    stamp end = moeEnd (the MoE's weight bytes); source: layer_end;
//          layerStats += [.., hits, misses]
//
// Without a source the stamps are CLOCK_MONOTONIC ns; with one they are its clock (the fake
// backend's virtual compute clock, so layer intervals and upload intervals share one clock).
#include <algorithm>
#include <cstdio>
#include "forward.h"
#include "mt_assert.h"
#include "mt_clock.h"

namespace mt {
namespace {

int64_t stamp(const Pass& p, uint64_t work_bytes) {
  const mt_expert_source* s = p.experts;
  return s != nullptr ? s->stamp(s->self, p.moe, work_bytes) : mt_monotonic_ns();
}

uint64_t matrix_bytes(const Matrix& m) { return m.data != nullptr ? uint64_t(m.rows) * m.row_bytes : 0; }

uint64_t attention_work_bytes(const Pass& p) {
  const LayerWeights& L = *p.L;
  return matrix_bytes(L.q) + matrix_bytes(L.k) + matrix_bytes(L.v) + matrix_bytes(L.o);
}

// Weight bytes of the MoE half just computed: router and every run (routed and shared).
uint64_t moe_work_bytes(const Pass& p) {
  uint64_t bytes = matrix_bytes(p.L->router);
  for (int32_t i = 0; i < p.n_runs; i++) {
    const ExpertRun& run = p.c->runs[size_t(i)];
    bytes += matrix_bytes(run.gate) + matrix_bytes(run.up) + matrix_bytes(run.down);
  }
  return bytes;
}

// A bound run's three matrices: the layer's geometry in the binding's type. A binding in the gate's
// container type is the container's bytes (a slot, a read): each matrix keeps its own type, as
// down may differ from gate / up (llama.cpp's Q4_K_M files keep some ffn_down in Q6_K). Another
// type is an exact copy of all three in that type (the tier's Q8_0 host copies, which
// mt_tier_host_copy_bytes only offers where this reading is unambiguous).
void apply_binding(const mt_expert_binding& b, ExpertRun& run) {
  Matrix* parts[3] = {&run.gate, &run.up, &run.down};
  const uint8_t* data[3] = {b.gate, b.up, b.down};
  const bool copy = b.type != run.gate.type;
  for (int i = 0; i < 3; i++) {
    Matrix& m = *parts[i];
    m.data = data[i];
    if (copy) m.type = b.type, m.row_bytes = mt_row_bytes(b.type, m.cols);
  }
}

// Moves run i to position at (<= i), shifting [at, i) up by one: the order of the rest is kept.
void move_run(mt_context& c, int32_t i, int32_t at) {
  if (i == at) return;
  auto rotate = [&](auto& v) { std::rotate(v.begin() + at, v.begin() + i, v.begin() + i + 1); };
  rotate(c.runs);
  rotate(c.run_binding);
  rotate(c.gate_up_segs);
  rotate(c.down_segs);
}

}  // namespace

void step_layer_begin(Pass& p) {
  p.layer_hits = p.layer_misses = 0;
  p.layer_start_ns = stamp(p, 0);
  if (p.experts != nullptr) p.experts->layer_begin(p.experts->self, p.moe);
}

void step_moe_begin(Pass& p) { p.moe_start_ns = stamp(p, attention_work_bytes(p)); }

bool step_bind_runs(Pass& p, int32_t* n_ready, char* err, size_t err_bytes) {
  const mt_expert_source* s = p.experts;
  mt_context& c = *p.c;
  int32_t n = 0;  // routed runs come first; the shared expert (expert -1) stays in the container
  while (n < p.n_runs && c.runs[size_t(n)].expert >= 0) {
    const ExpertRun& run = c.runs[size_t(n)];
    c.bindings[size_t(n)] = mt_expert_binding{run.expert, run.count, nullptr, nullptr, nullptr, run.gate.type, 0, 0, 0};
    n++;
  }
  if (s->bind(s->self, p.moe, c.bindings.data(), n, err, err_bytes) != 0) return false;
  p.n_bound = n;
  for (int32_t i = 0; i < p.n_runs; i++) c.run_binding[size_t(i)] = i < n ? i : -1;
  int32_t ready = 0;  // stable partition: runs whose weights are in memory first, the pending after
  for (int32_t i = 0; i < p.n_runs; i++) {
    const int32_t b = c.run_binding[size_t(i)];
    if (b >= 0) {
      const mt_expert_binding& binding = c.bindings[size_t(b)];
      if (binding.fast)
        p.layer_hits += binding.rows;
      else
        p.layer_misses += binding.rows;
      if (binding.pending || binding.remote) continue;
      if (binding.gate != nullptr) apply_binding(binding, c.runs[size_t(i)]);
    }
    move_run(c, i, ready++);
  }
  int32_t local = ready;  // then the pending runs; the remote ones last: [n_local, n_runs)
  for (int32_t i = ready; i < p.n_runs; i++)
    if (c.bindings[size_t(c.run_binding[size_t(i)])].remote == 0) move_run(c, i, local++);
  p.n_local = local;
  *n_ready = ready;
  return true;
}

bool step_remote_start(Pass& p, char* err, size_t err_bytes) {
  if (p.n_local == p.n_runs) return true;
  const mt_expert_source* s = p.experts;
  mt_context& c = *p.c;
  const int64_t E = p.m->hp.n_embd;
  if (s->remote_start == nullptr || s->remote_wait == nullptr) {
    std::snprintf(
        err, err_bytes,
        "expert source: bind marked %d run(s) of layer %d remote, but the source has no remote_start / remote_wait",
        p.n_runs - p.n_local, p.moe);
    return false;
  }
  // A device computes Down (silu(Gate x) * (Up x)) only: gpt-oss's biases and clamped SwiGLU are the host's.
  if (p.m->hp.expert_ffn_bias || p.m->hp.expert_act != MT_EXPERT_ACT_SILU) {
    std::snprintf(err, err_bytes,
                  "expert source: %d run(s) of layer %d bound to the device, whose expert kernels have no "
                  "per-expert biases or swiglu_oai (gpt-oss): use the cpu expert backend",
                  p.n_runs - p.n_local, p.moe);
    return false;
  }
  int32_t n = 0;
  for (int32_t i = p.n_local; i < p.n_runs; i++) {
    const ExpertRun& run = c.runs[size_t(i)];
    c.remote_runs[size_t(n++)] = mt_remote_run{c.run_binding[size_t(i)], run.count, c.slot_row + run.first,
                                               c.slot_down + size_t(run.first) * size_t(E)};
  }
  if (s->remote_start(s->self, p.moe, c.h, c.remote_runs.data(), n, err, err_bytes) != 0) return false;
  p.remote_started = true;
  return true;
}

bool step_remote_wait(Pass& p, char* err, size_t err_bytes) {
  if (!p.remote_started) return true;
  p.remote_started = false;
  return p.experts->remote_wait(p.experts->self, p.moe, p.device_ns, err, err_bytes) == 0;
}

bool step_await_runs(Pass& p, int32_t from, int32_t* to, char* err, size_t err_bytes) {
  const mt_expert_source* s = p.experts;
  mt_context& c = *p.c;
  int32_t* landed = c.expert_count;  // free after group_slots: [nExpert] >= the pending runs
  int32_t n_landed = 0;
  if (s->await(s->self, p.moe, c.bindings.data(), p.n_bound, landed, &n_landed, err, err_bytes) != 0) return false;
  int32_t next = from;
  for (int32_t k = 0; k < n_landed; k++) {
    for (int32_t i = next; i < p.n_local; i++) {
      if (c.run_binding[size_t(i)] != landed[k]) continue;
      apply_binding(c.bindings[size_t(landed[k])], c.runs[size_t(i)]);
      move_run(c, i, next++);
      break;
    }
  }
  MT_ASSERT(next > from && next - from == n_landed, "every landed run was pending, and named once");
  *to = next;
  return true;
}

void step_layer_end(Pass& p) {
  const int64_t end = stamp(p, moe_work_bytes(p));
  const int64_t device_start = p.device_ns[0], device_end = p.device_ns[1];
  p.device_ns[0] = p.device_ns[1] = 0;  // the next chunk's or layer's own remote_wait sets them
  if (p.experts != nullptr)
    p.experts->layer_end(p.experts->self, p.moe);
  else
    p.layer_misses = int64_t(p.n) * p.m->hp.n_expert_used;  // nothing is resident
  if (p.layer_stats == nullptr) return;
  double* s = p.layer_stats + size_t(p.moe) * MT_LAYER_STATS_FIELDS;
  // Over several chunks: the first start, the last end, and moeEnd - moeStart = their MoE time.
  const double moe_before = p.first_chunk ? 0.0 : s[3] - s[2];
  if (p.first_chunk) s[0] = double(p.layer_start_ns);
  s[1] = double(end);
  s[3] = double(end);
  s[2] = double(end) - (moe_before + double(end - p.moe_start_ns));
  s[4] += double(p.layer_hits);
  s[5] += double(p.layer_misses);
  // The device's span, folded over chunks as the MoE pair is: the last end, the summed time.
  if (device_end > device_start && device_start > 0) {
    const double device_before = s[7] > 0 ? s[7] - s[6] : 0.0;
    s[7] = double(device_end);
    s[6] = s[7] - (device_before + double(device_end - device_start));
  }
}

}  // namespace mt
