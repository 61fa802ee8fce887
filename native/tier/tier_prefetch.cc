// Prefetch on the disk tier (issue 13; SPEC.md section 4): at the start of layer l the forward
// pass predicts layer l + 1's experts (its router on the stream entering l: mt_expert_source
// .predicted, one layer of lead) and hands them here, on the eval thread.
//
//   off      predict_k 0: no prediction is made, nothing here runs (today's path)
//   observe  each predicted non-resident expert within the layer's budget is counted as a read
//            that enforce would start (would_issue), and one routed before it leaves is counted
//            as one it would have covered; nothing is issued
//   enforce  those experts are read into slots now, as admit before run would read a miss
//            (tier_admit_now: a free slot, else the placement's coldest resident that is not
//            itself predicted); layer l + 1's bind then finds them resident, or waits for a read
//            in flight (tier_stream.cc)
//
// The budget per layer (experts) comes from the engine between evals: the transfer window the
// calibration measured over one expert's bytes (src/tiers/prefetch.ts packs whole experts in
// score order; every expert of these models has the same size, so a count packs the same).
//
// Exact-route accounting, by expert: covered (prefetched, routed, landed by its bind), late
// (prefetched, routed, still being read at its bind: the wait is added up), wasted (prefetched,
// evicted before any routing), uncovered (a routed miss read from the file that no prefetch read).
#include "tier.h"

namespace mt {

void tier_prefetch_predicted(mt_tier& t, int32_t layer, const int32_t* ids, int32_t n) {
  const int32_t mode = t.prefetch_mode.load(std::memory_order_relaxed);
  if (mode == MT_TIER_PREFETCH_OFF) return;
  std::lock_guard<std::mutex> lock(t.mu);
  const int32_t budget = t.prefetch_budget.empty() ? 0 : t.prefetch_budget[size_t(layer)];
  for (int32_t i = 0; i < n; i++) t.routed_now[size_t(ids[i])] = 1;  // the predicted are nobody's victims
  int32_t started = 0;
  for (int32_t i = 0; i < n && started < budget; i++) {
    const size_t index = index_of(t, layer, ids[i]);
    if (t.expert_state[index] != kExpertNone) continue;  // resident or in flight: costs nothing
    if (mode == MT_TIER_PREFETCH_OBSERVE) {
      if (t.observed[index].exchange(1) == 0) t.prefetch_would_issue.fetch_add(1, std::memory_order_relaxed);
      started++;
      continue;
    }
    int32_t slot = -1;
    mt_event_id event = 0;
    if (!tier_admit_now(t, layer, ids[i], t.routed_now.data(), &slot, &event)) break;  // no slot can take it
    InFlight& f = t.flights.back();
    f.admitted = false, f.prefetch = true;
    t.prefetched[index].store(1, std::memory_order_relaxed);
    t.prefetch_issued.fetch_add(1, std::memory_order_relaxed);
    started++;
  }
  for (int32_t i = 0; i < n; i++) t.routed_now[size_t(ids[i])] = 0;
}

void tier_prefetch_routed(mt_tier& t, size_t index, bool read_in_flight) {
  if (t.prefetch_mode.load(std::memory_order_relaxed) == MT_TIER_PREFETCH_OFF) return;
  if (t.observed[index].exchange(0) != 0) t.prefetch_would_cover.fetch_add(1, std::memory_order_relaxed);
  if (t.prefetched[index].exchange(0) == 0) return;
  if (read_in_flight) t.prefetch_late.fetch_add(1, std::memory_order_relaxed);
  else t.prefetch_covered.fetch_add(1, std::memory_order_relaxed);
}

void tier_prefetch_evicted(mt_tier& t, size_t index) {
  t.observed[index].store(0, std::memory_order_relaxed);
  if (t.prefetched[index].exchange(0) != 0) t.prefetch_wasted.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace mt

using namespace mt;

extern "C" int mt_tier_set_prefetch(mt_tier* tier, int32_t mode, int32_t predict_k, const int32_t* budget, size_t n) {
  mt_tier& t = *tier;
  if (mode < MT_TIER_PREFETCH_OFF || mode > MT_TIER_PREFETCH_ENFORCE || predict_k < 0 || predict_k > t.n_expert) return MT_TIER_INVALID;
  if (mode != MT_TIER_PREFETCH_OFF && (t.stream_io == nullptr || budget == nullptr || n != size_t(t.n_layer) || predict_k < 1)) return MT_TIER_INVALID;
  for (size_t i = 0; i < n; i++)
    if (budget[i] < 0 || budget[i] > t.n_expert) return MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(t.mu);
  t.prefetch_mode.store(mode, std::memory_order_relaxed);
  if (mode == MT_TIER_PREFETCH_OFF) {
    t.source.predict_k = 0;
    return MT_TIER_OK;
  }
  t.prefetch_budget.assign(budget, budget + n);
  t.source.predict_k = predict_k;
  return MT_TIER_OK;
}
