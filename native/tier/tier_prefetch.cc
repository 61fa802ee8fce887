// Prefetch (issue 13; SPEC.md section 4): at the start of layer l the forward pass predicts layer
// l + 1's experts (its router on the stream entering l: mt_expert_source.predicted, one layer of
// lead) and hands them here, on the eval thread. Any tier: on the disk tier a prefetch is a read
// of the model file into a slot; on the cpu and fake backends an upload from the container.
//
//   off      predict_k 0: no prediction is made, nothing here runs (today's path)
//   observe  each predicted non-resident expert within the layer's budget is counted as a read
//            that enforce would start (would_issue), and one routed before it leaves is counted
//            as one it would have covered; nothing is queued or issued
//   enforce  those experts are queued, then issued from the queue while the gate's budget has room
//            (tier_gate.cc: every upload in flight counts, misses first), as admit before run would read a miss
//            (tier_admit_now: a free slot, else the placement's coldest resident that is not
//            among the top nExpertUsed predicted); layer l + 1's bind then finds them resident, or (the disk tier)
//            waits for a read in flight (tier_stream.cc)
//
// The budget per layer (experts) comes from the engine between evals: the transfer window the
// calibration measured over one expert's bytes (src/tiers/prefetch.ts packs whole experts in
// score order; every expert of these models has the same size, so a count packs the same).
//
// The queue (bounded, MT_TIER_PREFETCH_QUEUE_MAX, reserved: the eval thread never allocates) and
// its ledger: a task is queued (its bytes admitted), then ends exactly once:
//   issued     an upload started (in flight: its bytes count against the cap until it settles,
//              then it retires as completed or failed; tier_prefetch_retire, from the settle)
//   cancelled  still queued when a newer eval began (a new generation), or when its layer began
//   dropped    no slot could take it, the backend refused it, or it was no longer absent
//   refused    never queued: the queue was full (counted; its bytes never entered)
// so at rest admitted_bytes == retired_bytes, and queued == issued + cancelled + dropped.
//
// Exact-route accounting, by expert and by layer: covered (prefetched, routed, landed by its
// bind), late (prefetched, routed, not landed at its bind; on the disk tier the run waits, and
// the wait is added up), wasted (prefetched, evicted before any routing), uncovered (a routed
// expert that needed bytes moved, with no prefetch of it).
#include <algorithm>
#include "tier.h"
#include "tier_counters.h"
#include "tier_prefetch.h"

namespace mt {
namespace {

void count(mt_tier& t, int32_t layer, PrefetchOutcome what) {
  std::atomic<uint64_t>* total[] = {&t.counters.prefetch_covered, &t.counters.prefetch_late, &t.counters.prefetch_wasted, &t.counters.prefetch_uncovered};
  total[what]->fetch_add(1, std::memory_order_relaxed);
  t.prefetch.by_layer[size_t(layer) * kPrefetchOutcomes + size_t(what)].fetch_add(1, std::memory_order_relaxed);
}

void end_task(mt_tier& t, const PrefetchTask& task, std::atomic<uint64_t>& how) {
  how.fetch_add(1, std::memory_order_relaxed);
  t.counters.prefetch_retired_bytes.fetch_add(task.bytes, std::memory_order_relaxed);
}

// Under mu. true: its upload is in flight (its bytes retire when it settles).
bool issue(mt_tier& t, const PrefetchTask& task) {
  const size_t index = index_of(t, task.layer, task.expert);
  int32_t slot = -1;
  mt_event_id event = 0;
  bool existing = false;
  if (t.expert_state[index] != kExpertNone ||
      !tier_admit_now(t, task.layer, task.expert, t.routed_now.data(), &slot, &event, &existing, kGatePrefetch))
    return false;
  MT_ASSERT(!existing, "an absent expert's admission issues its own upload");
  InFlight& f = t.flights.back();
  f.admitted = false, f.prefetch = true;
  t.prefetch.inflight_bytes += task.bytes;
  t.prefetch.prefetched[index].store(1, std::memory_order_relaxed);
  t.counters.prefetch_issued.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Under mu, eval thread: the queue in order; a task of an older generation, or of a layer that
// began, is cancelled; the rest are issued while the gate's budget has room (first in, first out:
// one that does not fit holds the ones behind it).
void drain(mt_tier& t) {
  std::vector<PrefetchTask>& queue = t.prefetch.queue;
  if (queue.empty()) return;
  tier_settle_layer(t, -1, false, false);  // landed prefetches give their bytes back first
  const uint64_t generation = t.prefetch.generation.load(std::memory_order_relaxed);
  const int32_t computing = t.computing.load(std::memory_order_relaxed);
  size_t kept = 0;
  bool blocked = false;
  for (const PrefetchTask& task : queue) {
    if (task.generation != generation || task.layer <= computing) {
      end_task(t, task, t.counters.prefetch_cancelled);
    } else if (blocked || !gate_fits(t, task.bytes)) {
      blocked = true;
      queue[kept++] = task;
    } else if (!issue(t, task)) {  // issued: its bytes retire at its settle
      end_task(t, task, t.counters.prefetch_dropped);
    }
  }
  queue.resize(kept);
  t.prefetch.queue_n.store(int32_t(kept), std::memory_order_relaxed);
}

bool queued(const mt_tier& t, int32_t layer, int32_t expert) {
  for (const PrefetchTask& task : t.prefetch.queue)
    if (task.layer == layer && task.expert == expert) return true;
  return false;
}

}  // namespace

void tier_prefetch_predicted(mt_tier& t, int32_t layer, const int32_t* ids, int32_t n) {
  const int32_t mode = t.prefetch.mode.load(std::memory_order_relaxed);
  if (mode == MT_TIER_PREFETCH_OFF) return;
  std::lock_guard<std::mutex> lock(t.mu);
  const int32_t budget = t.prefetch.budget.empty() ? 0 : t.prefetch.budget[size_t(layer)];
  // The likeliest (the top nExpertUsed, as many as route) are nobody's victims; a resident ranked
  // below them may give its slot to a non-resident ranked above it.
  const int32_t protect = std::min(n, mt_model_hparams(t.model)->n_expert_used);
  for (int32_t i = 0; i < protect; i++) t.routed_now[size_t(ids[i])] = 1;
  const uint64_t bytes = expert_bytes(t, layer), generation = t.prefetch.generation.load(std::memory_order_relaxed);
  for (int32_t i = 0, taken = 0; i < n && taken < budget; i++) {
    const size_t index = index_of(t, layer, ids[i]);
    if (t.expert_state[index] != kExpertNone) continue;  // resident or in flight: costs nothing
    taken++;
    if (mode == MT_TIER_PREFETCH_OBSERVE) {
      if (t.prefetch.observed[index].exchange(1) == 0) t.counters.prefetch_would_issue.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (queued(t, layer, ids[i])) continue;  // counted once, where it was first queued
    if (t.prefetch.queue.size() >= t.prefetch.queue_max) {
      t.counters.prefetch_refused.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    t.prefetch.queue.push_back(PrefetchTask{layer, ids[i], bytes, generation});
    t.counters.prefetch_queued.fetch_add(1, std::memory_order_relaxed);
    t.counters.prefetch_admitted_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  drain(t);
  for (int32_t i = 0; i < protect; i++) t.routed_now[size_t(ids[i])] = 0;
}

void tier_prefetch_begin(mt_tier& t, int32_t layer) {
  if (t.prefetch.mode.load(std::memory_order_relaxed) == MT_TIER_PREFETCH_OFF) return;
  if (layer == 0) t.prefetch.generation.fetch_add(1, std::memory_order_relaxed);
  if (t.prefetch.queue_n.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> lock(t.mu, std::try_to_lock);  // busy: the next layer's begin drains
  if (lock.owns_lock()) drain(t);
}

void tier_prefetch_routed(mt_tier& t, size_t index, bool read_in_flight) {
  if (t.prefetch.mode.load(std::memory_order_relaxed) == MT_TIER_PREFETCH_OFF) return;
  if (t.prefetch.observed[index].exchange(0) != 0) t.counters.prefetch_would_cover.fetch_add(1, std::memory_order_relaxed);
  if (t.prefetch.prefetched[index].exchange(0) == 0) return;
  count(t, int32_t(index / size_t(t.n_expert)), read_in_flight ? kPrefetchLate : kPrefetchCovered);
}

void tier_prefetch_uncovered(mt_tier& t, int32_t layer) {
  if (t.prefetch.mode.load(std::memory_order_relaxed) != MT_TIER_PREFETCH_OFF) count(t, layer, kPrefetchUncovered);
}

void tier_prefetch_late_wait(mt_tier& t, int32_t, uint64_t wait_ns) { t.counters.prefetch_late_ns.fetch_add(wait_ns, std::memory_order_relaxed); }

void tier_prefetch_evicted(mt_tier& t, size_t index) {
  t.prefetch.observed[index].store(0, std::memory_order_relaxed);
  if (t.prefetch.prefetched[index].exchange(0) != 0) count(t, int32_t(index / size_t(t.n_expert)), kPrefetchWasted);
}

void tier_prefetch_retire(mt_tier& t, InFlight& f) {
  if (!f.prefetch || f.retired) return;
  f.retired = true;
  const uint64_t bytes = expert_bytes(t, f.layer);
  MT_ASSERT(t.prefetch.inflight_bytes >= bytes, "a prefetch retires bytes it put in flight");
  t.prefetch.inflight_bytes -= bytes;
  t.counters.prefetch_retired_bytes.fetch_add(bytes, std::memory_order_relaxed);
  (f.ok ? t.counters.prefetch_completed : t.counters.prefetch_failed).fetch_add(1, std::memory_order_relaxed);
  // A failed one covers nothing: its expert's next route counts as uncovered.
  if (!f.ok) t.prefetch.prefetched[index_of(t, f.layer, f.expert)].store(0, std::memory_order_relaxed);
}

}  // namespace mt

using namespace mt;

extern "C" int mt_tier_set_prefetch(mt_tier* tier, int32_t mode, int32_t predict_k, const int32_t* budget, size_t n, int32_t queue_max) {
  mt_tier& t = *tier;
  if (mode < MT_TIER_PREFETCH_OFF || mode > MT_TIER_PREFETCH_ENFORCE || predict_k < 0 || predict_k > t.n_expert) return MT_TIER_INVALID;
  if (mode != MT_TIER_PREFETCH_OFF && (budget == nullptr || n != size_t(t.n_layer) || predict_k < 1 || queue_max < 1 ||
                                       queue_max > MT_TIER_PREFETCH_QUEUE_MAX))
    return MT_TIER_INVALID;
  for (size_t i = 0; i < n; i++)
    if (budget[i] < 0 || budget[i] > t.n_expert) return MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(t.mu);
  if (mode != MT_TIER_PREFETCH_ENFORCE) {  // what is queued goes: nothing will issue it
    for (const PrefetchTask& task : t.prefetch.queue) end_task(t, task, t.counters.prefetch_cancelled);
    t.prefetch.queue.clear();
    t.prefetch.queue_n.store(0, std::memory_order_relaxed);
  }
  t.prefetch.mode.store(mode, std::memory_order_relaxed);
  if (mode == MT_TIER_PREFETCH_OFF) {
    t.source.predict_k = 0;
    return MT_TIER_OK;
  }
  t.prefetch.budget.assign(budget, budget + n);
  t.prefetch.queue_max = size_t(queue_max);  // a shorter queue keeps what it holds: the next ones are refused
  t.source.predict_k = predict_k;
  return MT_TIER_OK;
}

extern "C" void mt_tier_prefetch_by_layer(mt_tier* tier, uint64_t* out, size_t n) {
  const size_t want = size_t(tier->n_layer) * kPrefetchOutcomes;
  for (size_t i = 0; i < n && i < want; i++) out[i] = tier->prefetch.by_layer[i].load(std::memory_order_relaxed);
}
