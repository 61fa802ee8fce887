// The per-layer hooks of mt_eval when a tier or step timing is attached.
//
//   begin  stamp start                      [settle + promote l's uploads, only if any are in flight]
//   (attention half)
//   moe    stamp moeStart
//   (router, top-k, group) -> bind: residents leased from slots, misses from host copies / container
//                                 [hook: the layer's counts per expert, when an eval set one]
//   (gate/up, down)
//   end    stamp end = moeEnd, release leases, layerStats += [.., hits, misses]
//                                           [issue l's queued swaps, only if any are queued]
//
// Stamps are CLOCK_MONOTONIC ns; on the fake backend they are its compute markers, so the layer
// intervals and the uploads' intervals share its virtual clock. The work a marker adds is the
// weight bytes the step streamed (attention: q, k, v, o; MoE: router and every routed run).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include "tier.h"

namespace mt {
namespace {

constexpr int kStatsPerLayer = 6;  // startNs, endNs, moeStartNs, moeEndNs, hits, misses

int64_t monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Now on the step's clock; work_bytes moves the fake's compute clock first.
int64_t stamp(const Pass& p, uint64_t work_bytes) {
  if (p.tier == nullptr || !p.tier->fake) return monotonic_now();
  mt_event_id event = 0;
  mt_event_info info{};
  if (mt_backend_compute_record(p.tier->backend, p.layer, work_bytes, &event, nullptr, 0) != MT_BACKEND_OK ||
      mt_backend_event_query(p.tier->backend, event, &info, nullptr, 0) != MT_BACKEND_OK)
    return 0;  // the backend is closing; a zero stamp says so
  return info.start_ns;
}

uint64_t matrix_bytes(const Matrix& m) { return m.data != nullptr ? uint64_t(m.rows) * m.row_bytes : 0; }

// Weight bytes of the MoE half just computed: router and every run (routed and shared).
uint64_t moe_work_bytes(const Pass& p) {
  uint64_t bytes = matrix_bytes(p.L->router);
  for (int32_t i = 0; i < p.n_runs; i++) {
    const ExpertRun& run = p.c->runs[size_t(i)];
    bytes += matrix_bytes(run.gate) + matrix_bytes(run.up) + matrix_bytes(run.down);
  }
  return bytes;
}

void release_leases(mt_tier& t) {
  for (int32_t i = 0; i < t.n_leases; i++) mt_backend_release(t.backend, t.leases[size_t(i)]);
  t.n_leases = 0;
}

// A Q8_0 host copy of layer l's expert: gate [nFf, nEmbd] | up [nFf, nEmbd] | down [nEmbd, nFf].
void bind_host_copy(const Pass& p, const uint8_t* base, ExpertRun& run) {
  const LayerWeights& L = *p.L;
  const Matrix* parts[3] = {&L.gate.first, &L.up.first, &L.down.first};
  Matrix* out[3] = {&run.gate, &run.up, &run.down};
  for (int i = 0; i < 3; i++) {
    const size_t row_bytes = mt_row_bytes(MT_Q8_0, parts[i]->cols);
    *out[i] = Matrix{base, MT_Q8_0, parts[i]->rows, parts[i]->cols, row_bytes};
    base += size_t(parts[i]->rows) * row_bytes;
  }
}

}  // namespace

void step_layer_begin(Pass& p) {
  p.layer_hits = p.layer_misses = 0;
  p.layer_start_ns = stamp(p, 0);
  mt_tier* t = p.tier;
  if (t != nullptr) t->computing.store(p.layer, std::memory_order_seq_cst);  // before any residency read of this layer
  if (t != nullptr && t->flight_n[p.layer].load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(t->mu);
    tier_settle_layer(*t, p.layer, false, true, p.layer_start_ns);
  }
}

void step_moe_begin(Pass& p) {
  const bool fake = p.tier != nullptr && p.tier->fake;
  p.moe_start_ns = stamp(p, fake ? p.tier->attn_bytes[size_t(p.layer)] : 0);
}

// The layer's routed rows per expert to the eval's hook (a non-blocking post); its cost is timed.
void post_counts(Pass& p) {
  mt_tier& t = *p.tier;
  const int64_t t0 = monotonic_now();
  std::fill(t.hook_counts.begin(), t.hook_counts.end(), 0);
  for (int32_t i = 0; i < p.n_runs; i++)
    if (p.c->runs[size_t(i)].expert >= 0) t.hook_counts[size_t(p.c->runs[size_t(i)].expert)] = p.c->runs[size_t(i)].count;
  t.layer_hook.fn(t.layer_hook.user, p.layer, t.hook_counts.data(), t.n_expert);
  t.hook_calls.fetch_add(1, std::memory_order_relaxed);
  t.hook_ns.fetch_add(uint64_t(monotonic_now() - t0), std::memory_order_relaxed);
}

bool step_bind_runs(Pass& p, char* err, size_t err_bytes) {
  mt_tier& t = *p.tier;
  if (t.layer_hook.fn != nullptr) post_counts(p);
  const LayerWeights& L = *p.L;
  const size_t base_index = size_t(p.layer) * size_t(t.n_expert);
  int64_t hits = 0, misses = 0, lazy = 0;
  for (int32_t i = 0; i < p.n_runs; i++) {
    ExpertRun& run = p.c->runs[size_t(i)];
    if (run.expert < 0) continue;  // the shared expert stays in the container
    const size_t index = base_index + size_t(run.expert);
    const int32_t slot = t.residency[index].load(std::memory_order_seq_cst);  // pairs with issue_now (tier_swap.cc)
    mt_lease_id lease = 0;
    if (slot >= 0 && size_t(slot) < t.slot_layer.size() && t.slot_layer[size_t(slot)] == p.layer &&
        mt_backend_lease(t.backend, slot, &lease, nullptr, 0) == MT_BACKEND_OK) {
      t.leases[size_t(t.n_leases++)] = lease;
      const uint8_t* data = t.slot_data[size_t(slot)];
      run.gate.data = data;
      run.up.data = data + L.gate.expert_bytes;
      run.down.data = data + L.gate.expert_bytes + L.up.expert_bytes;
      hits += run.count;
      continue;
    }
    misses += run.count;
    const int32_t offset = t.host_offsets != nullptr ? __atomic_load_n(&t.host_offsets[index], __ATOMIC_ACQUIRE) : -1;
    if (offset < 0) {
      lazy += run.count;  // computed from the container as mapped
      continue;
    }
    if (t.host_copy_bytes == 0 || uint64_t(offset) + t.host_copy_bytes > t.host_bytes) {
      std::snprintf(err, err_bytes,
                    "tier: hostCopyOffsets[%zu] (layer %d, expert %d) = %d: expected -1 or an offset with %llu bytes of host copy "
                    "inside hostCopies (%zu bytes)",
                    index, p.layer, run.expert, offset, (unsigned long long)t.host_copy_bytes, t.host_bytes);
      release_leases(t);
      t.computing.store(-1, std::memory_order_seq_cst);
      return false;
    }
    bind_host_copy(p, t.host + offset, run);
  }
  t.hits.fetch_add(uint64_t(hits), std::memory_order_relaxed);
  t.misses.fetch_add(uint64_t(misses), std::memory_order_relaxed);
  t.lazy_misses.fetch_add(uint64_t(lazy), std::memory_order_relaxed);
  p.layer_hits = hits;
  p.layer_misses = misses;
  return true;
}

void step_layer_end(Pass& p) {
  mt_tier* t = p.tier;
  const int64_t end = stamp(p, t != nullptr && t->fake ? moe_work_bytes(p) : 0);
  if (t == nullptr) p.layer_misses = int64_t(p.n) * p.m->hp.n_expert_used;  // nothing is resident
  else release_leases(*t), t->computing.store(-1, std::memory_order_seq_cst);  // then read pending_n: see tier_swap.cc
  if (p.layer_stats != nullptr) {
    double* s = p.layer_stats + size_t(p.layer) * kStatsPerLayer;
    // Over several chunks: the first start, the last end, and moeEnd - moeStart = their MoE time.
    const double moe_before = p.first_chunk ? 0.0 : s[3] - s[2];
    if (p.first_chunk) s[0] = double(p.layer_start_ns);
    s[1] = double(end);
    s[3] = double(end);
    s[2] = double(end) - (moe_before + double(end - p.moe_start_ns));
    s[4] += double(p.layer_hits);
    s[5] += double(p.layer_misses);
  }
  if (t != nullptr && (t->pending_n[p.layer].load(std::memory_order_seq_cst) > 0 || t->flight_n[p.layer].load(std::memory_order_acquire) > 0)) {
    std::lock_guard<std::mutex> lock(t->mu);
    tier_settle_layer(*t, p.layer, true, false, end);
    tier_issue_swaps(*t, p.layer, end);
  }
}

void step_abort(Pass& p) {
  if (p.tier != nullptr) release_leases(*p.tier), p.tier->computing.store(-1, std::memory_order_seq_cst);
}

}  // namespace mt
