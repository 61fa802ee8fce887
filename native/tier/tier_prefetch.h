// The tier's prefetch (tier_prefetch.cc): the mode, the predicted experts' marks, the bounded queue
// of tasks waiting for room under the gate and its ledger (include/mt_prefetch_ledger.h, the state
// machine the replay runs too), and the outcomes by layer. Its counters (the routes' outcomes and the
// tasks' ledger) are in TierCounters.
//
//   owner    mt_tier::prefetch (tier.h)
//   guards   mode, prefetched, observed, by_layer, generation, queue_n: atomics (the eval thread
//            writes; the caller sets mode between evals and reads by_layer)
//            budget, queue (its ledger's queue and bytes): mt_tier::mu, and each ledger call under
//            ledger_mu too (a routed prefetch, on the eval thread, records its route without mu)
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>
#include "mt_prefetch_ledger.h"
#include "mt_tier.h"

namespace mt {

enum PrefetchOutcome {
  kPrefetchCovered = 0,
  kPrefetchLate = 1,
  kPrefetchWasted = 2,
  kPrefetchUncovered = 3,
  kPrefetchOutcomes = 4
};

// The ledger and its tables, allocated between evals (the eval thread never allocates). A task of
// (layer, expert) is entry layer * nExpert + expert: a key has at most one task not ended here (it
// is admitted only while its expert is absent, and its read settles before the expert can be absent
// again), so its retire finds it by key.
struct PrefetchQueue {
  mt_prefetch_ledger ledger{};
  std::vector<mt_prefetch_task> tasks;
  std::vector<int32_t> live, fifo;
  void reserve(size_t queue_max);  // room for queue_max queued tasks (the tier's creation)
  size_t size() const { return size_t(ledger.queue_n); }
};

struct TierPrefetch {
  std::atomic<int32_t> mode{MT_TIER_PREFETCH_OFF};
  // By expert [nLayer * nExpert]: whether a prediction read it (or would have, observing) and no
  // routing has used it since.
  std::unique_ptr<std::atomic<uint8_t>[]> prefetched, observed;
  std::unique_ptr<std::atomic<uint64_t>[]> by_layer;  // [nLayer * kPrefetchOutcomes], from the stats mark
  std::atomic<uint64_t> generation{0};                // evals begun with a prediction (eval thread writes)
  std::atomic<int32_t> queue_n{0};                    // a hint of queue.size(), read without mu
  std::vector<int32_t> budget;                        // [nLayer]: predicted experts a layer may start reading
  PrefetchQueue queue;                                // FIFO, at most ledger.queue_max (prefetch.queueMax)
  std::mutex ledger_mu;
  // Prefetches issued and not settled (their share of the gate's).
  const uint64_t& inflight_bytes = queue.ledger.inflight_bytes;
};

struct InFlight;

}  // namespace mt

struct mt_tier;

namespace mt {

// tier_prefetch.cc. predicted: the forward pass's guess for `layer` (eval thread, compute one layer
// before). begin: a layer starts (eval thread; layer 0: a new generation cancels the last one's
// queue; then the queue drains as the in-flight cap allows). routed: a routed expert's prefetch
// outcome (read_in_flight: not landed at its bind; wait_ns: what the run waited for it).
// evicted: an expert left its slot (under mu). retire: a prefetch's upload settled (under mu).
void tier_prefetch_predicted(mt_tier& t, int32_t layer, const int32_t* ids, int32_t n);
void tier_prefetch_begin(mt_tier& t, int32_t layer);
void tier_prefetch_routed(mt_tier& t, size_t index, bool read_in_flight);
void tier_prefetch_uncovered(mt_tier& t, int32_t layer);
void tier_prefetch_late_wait(mt_tier& t, int32_t layer, uint64_t wait_ns);
void tier_prefetch_evicted(mt_tier& t, size_t index);
void tier_prefetch_retire(mt_tier& t, InFlight& f);

}  // namespace mt
