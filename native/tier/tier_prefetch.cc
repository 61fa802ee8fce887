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
// The queue (bounded by prefetch.queueMax, its tables allocated between evals: the eval thread never
// allocates) and its ledger are include/mt_prefetch_ledger.h, the state machine `moetier replay
// --prefetch` runs too; this file holds its tables, calls it and counts its outcomes. A task is
// queued (its bytes admitted), then ends exactly once:
//   issued     an upload started (in flight: its bytes count against the cap until it settles,
//              then it retires as completed or failed; tier_prefetch_retire, from the settle)
//   cancelled  still queued when a newer eval began (a new generation), or when its layer began
//   dropped    no slot could take it, the backend refused it, or it was no longer absent
//   refused    never queued: the queue was full (counted; its bytes never entered)
// so at rest admitted_bytes == retired_bytes, and queued == issued + cancelled + dropped.
//
// Exact-route accounting, by expert and by layer: covered (prefetched, routed, landed by its
// bind), late (prefetched, routed, not landed at its bind: the ledger's MT_PF_READ_PENDING; on the
// disk tier the run waits, and the wait is added up), wasted (prefetched, evicted before any
// routing), uncovered (a routed expert that needed bytes moved, with no prefetch of it: the
// callers count it, they alone see the bytes move).
#include <algorithm>
#include <limits>
#include "tier.h"
#include "tier_counters.h"
#include "tier_prefetch.h"

namespace mt {

void PrefetchQueue::reserve(size_t queue_max) {
  fifo.resize(std::max(fifo.size(), queue_max));
  ledger.queue = fifo.data(), ledger.queue_cap = int32_t(fifo.size());
}

namespace {

void count(mt_tier& t, int32_t layer, PrefetchOutcome what) {
  std::atomic<uint64_t>* total[] = {&t.counters.prefetch_covered, &t.counters.prefetch_late,
                                    &t.counters.prefetch_wasted, &t.counters.prefetch_uncovered};
  total[what]->fetch_add(1, std::memory_order_relaxed);
  t.prefetch.by_layer[size_t(layer) * kPrefetchOutcomes + size_t(what)].fetch_add(1, std::memory_order_relaxed);
}

// A queued task ended unissued (cancelled or dropped): its bytes, the ledger's outstanding bytes it
// gave back, retire. Under mu.
void end_queued(mt_tier& t, int32_t task, int32_t (*how)(mt_prefetch_ledger*, int32_t, double),
                std::atomic<uint64_t>& counter) {
  mt_prefetch_ledger& l = t.prefetch.queue.ledger;
  std::lock_guard<std::mutex> lock(t.prefetch.ledger_mu);
  const uint64_t before = l.outstanding_bytes;
  const int32_t ended = how(&l, task, 0);
  MT_ASSERT(ended == MT_PF_OK, "a queued prefetch ends once");
  (void)ended;
  counter.fetch_add(1, std::memory_order_relaxed);
  t.counters.prefetch_retired_bytes.fetch_add(before - l.outstanding_bytes, std::memory_order_relaxed);
}

// Under mu. true: its upload is in flight (its bytes retire when it settles).
bool issue(mt_tier& t, int32_t task) {
  const mt_prefetch_task& pt = t.prefetch.queue.tasks[size_t(task)];
  const size_t index = index_of(t, pt.layer, pt.expert);
  int32_t slot = -1;
  mt_event_id event = 0;
  bool existing = false;
  if (t.expert_state[index] != kExpertNone ||
      !tier_admit_now(t, pt.layer, pt.expert, t.routed_now.data(), &slot, &event, &existing, kGatePrefetch))
    return false;
  MT_ASSERT(!existing, "an absent expert's admission issues its own upload");
  InFlight& f = t.flights.back();
  f.admitted = false, f.prefetch = true;
  std::lock_guard<std::mutex> lock(t.prefetch.ledger_mu);
  const int32_t issued = mt_prefetch_issue(&t.prefetch.queue.ledger, task, 0);
  MT_ASSERT(issued == MT_PF_OK, "a queued prefetch is issued once");
  (void)issued;
  t.prefetch.prefetched[index].store(1, std::memory_order_relaxed);
  t.counters.prefetch_issued.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Under mu, eval thread: the queue in order; a task of an older generation, or of a layer that
// began, is cancelled; the rest are issued while the gate's budget has room (first in, first out:
// one that does not fit holds the ones behind it).
void drain(mt_tier& t) {
  mt_prefetch_ledger& l = t.prefetch.queue.ledger;
  if (l.queue_n == 0) return;
  tier_settle_layer(t, -1, false, false);  // landed prefetches give their bytes back first
  const uint64_t generation = t.prefetch.generation.load(std::memory_order_relaxed);
  const int32_t computing = t.computing.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(t.prefetch.ledger_mu);
    const uint64_t before = l.outstanding_bytes;
    const int32_t stale = mt_prefetch_begin(&l, generation, 0);
    t.counters.prefetch_cancelled.fetch_add(uint64_t(stale), std::memory_order_relaxed);
    t.counters.prefetch_retired_bytes.fetch_add(before - l.outstanding_bytes, std::memory_order_relaxed);
  }
  bool blocked = false;
  for (int32_t i = 0; i < l.queue_n;) {  // an ended task leaves the queue: the next one moves up to i
    const int32_t task = l.queue[i];
    const mt_prefetch_task& pt = t.prefetch.queue.tasks[size_t(task)];
    if (pt.layer <= computing) {
      end_queued(t, task, mt_prefetch_cancel, t.counters.prefetch_cancelled);
    } else if (blocked || !gate_fits(t, pt.bytes)) {
      blocked = true;
      i++;
    } else if (!issue(t, task)) {  // issued: its bytes retire at its settle
      end_queued(t, task, mt_prefetch_drop, t.counters.prefetch_dropped);
    }
  }
  t.prefetch.queue_n.store(l.queue_n, std::memory_order_relaxed);
}

// Between evals, under mu: the ledger's tables, once (a task per expert, the queue's longest).
void allocate_ledger(mt_tier& t) {
  PrefetchQueue& q = t.prefetch.queue;
  if (!q.tasks.empty()) return;
  const size_t experts = size_t(t.n_layer) * size_t(t.n_expert);
  q.tasks.resize(experts), q.live.resize(experts);
  q.reserve(MT_TIER_PREFETCH_QUEUE_MAX);
  mt_prefetch_ledger& l = q.ledger;
  l.n_layer = t.n_layer, l.n_expert = t.n_expert;
  l.task = q.tasks.data(), l.task_cap = int32_t(experts), l.live = q.live.data();
  l.bytes_max = std::numeric_limits<uint64_t>::max();  // no byte room at admission: the gate decides at issue
  l.total = nullptr, l.by_layer = nullptr;             // the outcomes go to TierCounters (reset at the stats mark)
  mt_prefetch_ledger_reset(&l);
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
      if (t.prefetch.observed[index].exchange(1) == 0)
        t.counters.prefetch_would_issue.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::lock_guard<std::mutex> ledger_lock(t.prefetch.ledger_mu);
    const int32_t admitted =
        mt_prefetch_admit(&t.prefetch.queue.ledger, int32_t(index), layer, ids[i], bytes, generation, 0);
    if (admitted == MT_PF_OK) {
      t.counters.prefetch_queued.fetch_add(1, std::memory_order_relaxed);
      t.counters.prefetch_admitted_bytes.fetch_add(bytes, std::memory_order_relaxed);
    } else if (admitted == MT_PF_REFUSED_QUEUE_FULL) {
      t.counters.prefetch_refused.fetch_add(1, std::memory_order_relaxed);
    } else {  // an absent expert's only live task is a queued one: counted once, where it was first queued
      MT_ASSERT(admitted == MT_PF_REFUSED_DUPLICATE,
                "an absent expert's prefetch is queued, refused or already queued");
    }
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
  if (t.prefetch.observed[index].exchange(0) != 0)
    t.counters.prefetch_would_cover.fetch_add(1, std::memory_order_relaxed);
  if (t.prefetch.prefetched[index].load(std::memory_order_relaxed) == 0) return;  // no prefetch: no lock
  const int32_t layer = int32_t(index / size_t(t.n_expert)), expert = int32_t(index % size_t(t.n_expert));
  std::lock_guard<std::mutex> lock(t.prefetch.ledger_mu);
  if (t.prefetch.prefetched[index].exchange(0) == 0) return;
  const int32_t read = read_in_flight ? MT_PF_READ_PENDING : MT_PF_READ_LANDED;
  const int32_t outcome =
      mt_prefetch_route(&t.prefetch.queue.ledger, layer, expert, expert_bytes(t, layer), 1, read, 0);
  MT_ASSERT(outcome == MT_PF_COVERED || outcome == MT_PF_LATE, "a prefetched expert's route is covered or late");
  count(t, layer, outcome == MT_PF_LATE ? kPrefetchLate : kPrefetchCovered);
}

void tier_prefetch_uncovered(mt_tier& t, int32_t layer) {
  if (t.prefetch.mode.load(std::memory_order_relaxed) != MT_TIER_PREFETCH_OFF) count(t, layer, kPrefetchUncovered);
}

void tier_prefetch_late_wait(mt_tier& t, int32_t, uint64_t wait_ns) {
  t.counters.prefetch_late_ns.fetch_add(wait_ns, std::memory_order_relaxed);
}

void tier_prefetch_evicted(mt_tier& t, size_t index) {
  t.prefetch.observed[index].store(0, std::memory_order_relaxed);
  if (t.prefetch.prefetched[index].load(std::memory_order_relaxed) == 0) return;
  const int32_t layer = int32_t(index / size_t(t.n_expert)), expert = int32_t(index % size_t(t.n_expert));
  std::lock_guard<std::mutex> lock(t.prefetch.ledger_mu);
  if (t.prefetch.prefetched[index].exchange(0) == 0) return;
  // Landed and never routed: wasted now (one evicted in flight would be wasted as it lands, at its retire).
  if (mt_prefetch_evict(&t.prefetch.queue.ledger, layer, expert, 0) == MT_PF_WASTED) count(t, layer, kPrefetchWasted);
}

void tier_prefetch_retire(mt_tier& t, InFlight& f) {
  if (!f.prefetch || f.retired) return;
  f.retired = true;
  const size_t index = index_of(t, f.layer, f.expert);
  mt_prefetch_ledger& l = t.prefetch.queue.ledger;
  std::lock_guard<std::mutex> lock(t.prefetch.ledger_mu);
  const uint64_t bytes = l.task[index].bytes;
  const int32_t outcome = f.ok ? mt_prefetch_complete(&l, int32_t(index), 0) : mt_prefetch_fail(&l, int32_t(index), 0);
  MT_ASSERT(outcome != MT_PF_WRONG_STATE, "a prefetch retires bytes it put in flight");
  t.counters.prefetch_retired_bytes.fetch_add(bytes, std::memory_order_relaxed);
  (f.ok ? t.counters.prefetch_completed : t.counters.prefetch_failed).fetch_add(1, std::memory_order_relaxed);
  if (outcome == MT_PF_WASTED) count(t, f.layer, kPrefetchWasted);
  // A failed one covers nothing: its expert's next route counts as uncovered.
  if (!f.ok) t.prefetch.prefetched[index].store(0, std::memory_order_relaxed);
}

}  // namespace mt

using namespace mt;

extern "C" int mt_tier_set_prefetch(mt_tier* tier, int32_t mode, int32_t predict_k, const int32_t* budget, size_t n,
                                    int32_t queue_max) {
  mt_tier& t = *tier;
  if (mode < MT_TIER_PREFETCH_OFF || mode > MT_TIER_PREFETCH_ENFORCE || predict_k < 0 || predict_k > t.n_expert)
    return MT_TIER_INVALID;
  if (mode != MT_TIER_PREFETCH_OFF && (budget == nullptr || n != size_t(t.n_layer) || predict_k < 1 || queue_max < 1 ||
                                       queue_max > MT_TIER_PREFETCH_QUEUE_MAX))
    return MT_TIER_INVALID;
  for (size_t i = 0; i < n; i++)
    if (budget[i] < 0 || budget[i] > t.n_expert) return MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(t.mu);
  if (mode != MT_TIER_PREFETCH_OFF) allocate_ledger(t);
  mt_prefetch_ledger& l = t.prefetch.queue.ledger;
  if (mode != MT_TIER_PREFETCH_ENFORCE) {  // what is queued goes: nothing will issue it
    while (l.queue_n > 0) end_queued(t, l.queue[0], mt_prefetch_cancel, t.counters.prefetch_cancelled);
    t.prefetch.queue_n.store(0, std::memory_order_relaxed);
  }
  t.prefetch.mode.store(mode, std::memory_order_relaxed);
  if (mode == MT_TIER_PREFETCH_OFF) {
    t.source.predict_k = 0;
    return MT_TIER_OK;
  }
  t.prefetch.budget.assign(budget, budget + n);
  l.queue_max = queue_max;  // a shorter queue keeps what it holds: the next ones are refused
  t.source.predict_k = predict_k;
  return MT_TIER_OK;
}

extern "C" void mt_tier_prefetch_by_layer(mt_tier* tier, uint64_t* out, size_t n) {
  const size_t want = size_t(tier->n_layer) * kPrefetchOutcomes;
  for (size_t i = 0; i < n && i < want; i++) out[i] = tier->prefetch.by_layer[i].load(std::memory_order_relaxed);
}
