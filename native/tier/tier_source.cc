// The tier as the forward pass's expert source (include/mt_forward.h, mt_expert_source):
//
//   stamp   monotonic ns, or the fake backend's virtual compute clock (its compute markers, moved
//           by the weight bytes the forward pass streamed)
//   begin   computing = l (before any residency read of l);
//           [promote l's finished uploads: only if any are in flight and the lock is free]
//   bind    residents leased and read from slots (or, in device memory, marked remote and
//           computed there: tier_remote.cc), misses from host copies, or (a stream
//           descriptor: tier_stream.cc) read from the file before they run: into a slot when one
//           can take them (admitted), else into scratch (streamed), left pending; else the container
//           [hook: the layer's rows per expert, when an eval set one]
//   await   the pending misses as their reads land (slots leased then)
//   end     release the leases; computing = -1 (then read pending_n: see tier_swap.cc);
//           [l's swaps queued or uploads in flight: post l to the issuer, or, on a virtual
//            clock, settle and issue them here]
//
// Nothing here allocates, and nothing waits for a lock another thread may hold long: the
// promotion skips a busy lock (the newcomer is a miss for one more step), and the boundary is a
// post (tier_issuer.cc).
#include <algorithm>
#include <cstdio>
#include "mt_clock.h"
#include "tier.h"
#include "tier_counters.h"
#include "tier_hook.h"
#include "tier_issuer.h"
#include "tier_policy.h"
#include "tier_prefetch.h"
#include "tier_reads.h"
#include "tier_remote.h"

namespace mt {
namespace {

mt_tier& tier_of(void* self) { return *static_cast<mt_tier*>(self); }

int64_t stamp(void* self, int32_t layer, uint64_t work_bytes) {
  mt_tier& t = tier_of(self);
  if (!t.virtual_clock) return mt_monotonic_ns();
  mt_event_id event = 0;
  mt_event_info info{};
  if (mt_backend_compute_record(t.backend, layer, work_bytes, &event, nullptr, 0) != MT_BACKEND_OK ||
      mt_backend_event_query(t.backend, event, &info, nullptr, 0) != MT_BACKEND_OK)
    return 0;  // the backend is closing; a zero stamp says so
  return info.start_ns;
}

void release_leases(mt_tier& t) {
  for (int32_t i = 0; i < t.n_leases; i++) mt_backend_release(t.backend, t.leases[size_t(i)]);
  t.n_leases = 0;
}

void layer_begin(void* self, int32_t layer) {
  mt_tier& t = tier_of(self);
  MT_ASSERT(t.n_leases == 0, "no lease outlives its layer");
  t.computing.store(layer, std::memory_order_seq_cst);  // before any residency read of this layer
  tier_prefetch_begin(t, layer);
  if (!t.reads.bulk_failed && !tier_bulk_begin(t, layer, t.reads.bulk_error, sizeof t.reads.bulk_error))
    t.reads.bulk_failed = true;  // its bind reports it
  if (t.flight_n[layer].load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(t.mu, std::try_to_lock);
  if (lock.owns_lock()) tier_settle_layer(t, layer, false, true);
}

// A miss computed where it lies (a host copy, the container): a prefetch of it still uploading is
// late (the run does not wait for it), and one with no prefetch is uncovered.
void count_unread_miss(mt_tier& t, int32_t layer, size_t index) {
  if (t.prefetch.mode.load(std::memory_order_relaxed) == MT_TIER_PREFETCH_OFF) return;
  if (t.prefetch.prefetched[index].load(std::memory_order_relaxed) == 0) tier_prefetch_uncovered(t, layer);
  tier_prefetch_routed(t, index, true);
}

// The layer's routed rows per expert to the eval's hook (a non-blocking post); its cost is timed.
void post_counts(mt_tier& t, int32_t layer, const mt_expert_binding* runs, int32_t n_runs) {
  const int64_t t0 = mt_monotonic_ns();
  std::fill(t.hook.counts.begin(), t.hook.counts.end(), 0);
  for (int32_t i = 0; i < n_runs; i++) t.hook.counts[size_t(runs[i].expert)] = runs[i].rows;
  t.hook.fn(t.hook.user, layer, t.hook.counts.data(), t.n_expert);
  t.counters.hook_calls.fetch_add(1, std::memory_order_relaxed);
  t.counters.hook_ns.fetch_add(uint64_t(mt_monotonic_ns() - t0), std::memory_order_relaxed);
}

// A Q8_0 host copy: gate [nFf, nEmbd] | up [nFf, nEmbd] | down [nEmbd, nFf], back to back.
void bind_host_copy(const mt_tier& t, int32_t layer, const uint8_t* base, mt_expert_binding& run) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  run.type = MT_Q8_0;
  run.gate = base;
  run.up = run.gate + size_t(e.gate.rows) * mt_row_bytes(MT_Q8_0, e.gate.cols);
  run.down = run.up + size_t(e.up.rows) * mt_row_bytes(MT_Q8_0, e.up.cols);
}

// The call's routed marks (admit before run never evicts an expert routed in the same call) go.
void clear_routed(mt_tier& t, const mt_expert_binding* runs, int32_t n_runs) {
  for (int32_t i = 0; i < n_runs; i++) t.routed_now[size_t(runs[i].expert)] = 0;
}

bool one_token(const mt_tier& t, const mt_expert_binding* runs, int32_t n_runs) {
  int64_t rows = 0;
  for (int32_t i = 0; i < n_runs; i++) rows += runs[i].rows;
  return rows == mt_model_hparams(t.model)->n_expert_used;
}

int bind(void* self, int32_t layer, mt_expert_binding* runs, int32_t n_runs, char* err, size_t err_bytes) {
  mt_tier& t = tier_of(self);
  if (t.reads.bulk_failed) {  // the whole-layer read could not be issued at the layer's start
    std::snprintf(err, err_bytes, "%s", t.reads.bulk_error);
    t.reads.bulk_failed = false;
    tier_abandon_layer(t);
    return -1;
  }
  if (t.hook.fn != nullptr) post_counts(t, layer, runs, n_runs);
  tier_policy_touch(t, layer, runs, n_runs);
  const mt_layer_experts& e = t.experts[size_t(layer)];
  const size_t base_index = index_of(t, layer, 0);
  int64_t hits = 0, misses = 0, lazy = 0;
  int32_t* to_read = t.reads.miss_runs.data();  // the misses to read from the file (a stream descriptor)
  int32_t n_read = 0;
  // Policy KEEP (a tier without stream_fd): a decode token's misses computed here are admitted after
  // the loop. A prompt's are not (the replay's prefillCounts keep none): one token routes
  // nExpertUsed rows in all, a prompt's chunk more.
  const bool keep = t.reads.io == nullptr && t.policy.mode.load(std::memory_order_relaxed) == MT_TIER_POLICY_KEEP &&
                    one_token(t, runs, n_runs);
  int32_t* kept = t.policy.kept_misses.data();
  int32_t n_kept = 0;
  for (int32_t i = 0; i < n_runs; i++) {
    mt_expert_binding& run = runs[i];
    t.routed_now[size_t(run.expert)] = 1;
    const size_t index = base_index + size_t(run.expert);
    const int32_t slot = t.residency[index].load(std::memory_order_seq_cst);  // pairs with issue_now (tier_swap.cc)
    mt_lease_id lease = 0;
    if (slot >= 0 && size_t(slot) < t.slot_layer.size() && t.slot_layer[size_t(slot)] == layer &&
        mt_backend_lease(t.backend, slot, &lease, nullptr, 0) == MT_BACKEND_OK) {
      MT_ASSERT(t.n_leases < t.n_expert, "at most one lease per expert of the layer");
      t.leases[size_t(t.n_leases++)] = lease;
      if (t.remote) {  // device memory: the worker computes it (tier_remote.cc)
        run.remote = 1;
        t.remote->run_slot[size_t(i)] = slot;
      } else {
        const uint8_t* data = t.slot_data[size_t(slot)];
        run.gate = data, run.up = data + e.gate_bytes, run.down = data + e.gate_bytes + e.up_bytes;
      }
      run.type = e.gate.type;
      run.fast = 1;
      hits += run.rows;
      tier_prefetch_routed(t, index, false);
      continue;
    }
    misses += run.rows;
    const int32_t offset = t.host_offsets != nullptr ? __atomic_load_n(&t.host_offsets[index], __ATOMIC_ACQUIRE) : -1;
    if (offset < 0 && t.reads.io != nullptr) {  // read before it runs, never from the mapping
      to_read[n_read++] = i;
      continue;
    }
    count_unread_miss(t, layer, index);
    if (keep) kept[n_kept++] = run.expert;
    if (offset < 0) {
      lazy += run.rows;  // computed from the container as mapped
      continue;
    }
    if (t.host_copy_bytes == 0 || uint64_t(offset) + t.host_copy_bytes > t.host_bytes) {
      std::snprintf(err, err_bytes,
                    "tier: hostCopyOffsets[%zu] (layer %d, expert %d) = %d: expected -1 or an offset with %llu bytes "
                    "of host copy "
                    "inside hostCopies (%zu bytes)",
                    index, layer, run.expert, offset, (unsigned long long)t.host_copy_bytes, t.host_bytes);
      clear_routed(t, runs, n_runs);
      tier_abandon_layer(t);
      return -1;
    }
    bind_host_copy(t, layer, t.host + offset, run);
  }
  if (n_kept > 0) tier_keep_misses(t, layer, kept, n_kept);
  const bool started = n_read == 0 || tier_stream_begin(t, layer, runs, to_read, n_read, err, err_bytes);
  clear_routed(t, runs, n_runs);
  if (!started) {
    tier_abandon_layer(t);
    return -1;
  }
  t.counters.hits.fetch_add(uint64_t(hits), std::memory_order_relaxed);
  t.counters.misses.fetch_add(uint64_t(misses), std::memory_order_relaxed);
  t.counters.lazy_misses.fetch_add(uint64_t(lazy), std::memory_order_relaxed);
  return 0;
}

void predicted(void* self, int32_t layer, const int32_t* ids, int32_t n) {
  tier_prefetch_predicted(tier_of(self), layer, ids, n);
}

int await_reads(void* self, int32_t layer, mt_expert_binding* runs, int32_t, int32_t* ready, int32_t* n_ready,
                char* err, size_t err_bytes) {
  mt_tier& t = tier_of(self);
  if (tier_stream_await(t, layer, runs, ready, n_ready, err, err_bytes) == 0) return 0;
  tier_abandon_layer(t);
  return -1;
}

void layer_end(void* self, int32_t layer) {
  mt_tier& t = tier_of(self);
  release_leases(t);
  t.computing.store(-1, std::memory_order_seq_cst);  // then read pending_n: see tier_swap.cc
  if (t.pending_n[layer].load(std::memory_order_seq_cst) == 0 && t.flight_n[layer].load(std::memory_order_acquire) == 0)
    return;
  if (!t.virtual_clock) return issuer_post(t, layer);
  std::lock_guard<std::mutex> lock(t.mu);
  tier_settle_layer(t, layer, true, false);
  tier_issue_if_idle(t, layer);
}

}  // namespace

void tier_abandon_layer(mt_tier& t) {
  tier_bulk_settle(t);  // whole-layer reads in flight write buffers the next eval may reuse
  tier_remote_join(t);  // the device may still read a leased slot
  release_leases(t);
  t.computing.store(-1, std::memory_order_seq_cst);
}

void tier_source_init(mt_tier& t) {
  t.source =
      mt_expert_source{&t, t.model, stamp, layer_begin, bind, await_reads, layer_end, predicted, 0, nullptr, nullptr};
}

}  // namespace mt
