// The tier's eviction policy (include/mt_tier.h, mt_tier_set_policy; the rule itself is
// include/mt_policy.h, decayed LFU, which `moetier replay --policy dlfu` runs through the addon).
//
//   touch   each bind adds its routed rows to the layer's counts at the clock's time (eval thread;
//           the caller reads the counts only between evals)
//   victim  where a slot is needed (tier_admit_now: an admitted miss, a prefetch, a kept miss), the
//           layer's lowest-scored expert that is plainly RESIDENT and not run by the call (under mu)
//   keep    mode KEEP on a tier whose misses are computed from host copies: each routed miss of a
//           decode token (a one-token call) is admitted as a disk tier's would be (a free slot,
//           else the victim's slot), its upload overlapping the rest of the layer; it runs from
//           its host copy this time
//   tick    one decode token passed (between evals)
#include <algorithm>
#include <cmath>
#include "tier.h"
#include "tier_policy.h"

namespace mt {

void tier_policy_touch(mt_tier& t, int32_t layer, const mt_expert_binding* runs, int32_t n_runs) {
  double* count = t.policy.count.data() + index_of(t, layer, 0);
  double* stamp = t.policy.stamp.data() + index_of(t, layer, 0);
  for (int32_t i = 0; i < n_runs; i++)
    mt_dlfu_add(count, stamp, runs[i].expert, double(runs[i].rows), t.policy.now, t.policy.half_life);
}

int32_t tier_policy_victim(mt_tier& t, int32_t layer, const uint8_t* routed_now) {
  const size_t base = index_of(t, layer, 0);
  for (int32_t e = 0; e < t.n_expert; e++) {
    const size_t i = base + size_t(e);
    t.policy.eligible[size_t(e)] = t.expert_state[i] == kExpertResident && routed_now[e] == 0 &&
                                   t.residency[i].load(std::memory_order_relaxed) >= 0;
  }
  return mt_dlfu_victim(t.policy.count.data() + base, t.policy.stamp.data() + base, t.policy.eligible.data(),
                        t.n_expert, t.policy.half_life);
}

void tier_keep_misses(mt_tier& t, int32_t layer, const int32_t* experts, int32_t n) {
  std::lock_guard<std::mutex> lock(t.mu);
  for (int32_t i = 0; i < n; i++) {
    if (t.expert_state[index_of(t, layer, experts[i])] != kExpertNone) continue;
    int32_t slot = -1;
    mt_event_id event = 0;
    tier_admit_now(t, layer, experts[i], t.routed_now.data(), &slot, &event);  // none may apply: it stays a miss
  }
}

}  // namespace mt

using namespace mt;

extern "C" int mt_tier_set_policy(mt_tier* tier, int32_t mode, double half_life, const double* prior, size_t n) {
  mt_tier& t = *tier;
  const size_t experts = size_t(t.n_layer) * size_t(t.n_expert);
  if (mode < MT_TIER_POLICY_OFF || mode > MT_TIER_POLICY_KEEP ||
      !(half_life >= 1 && half_life <= MT_DLFU_HALF_LIFE_MAX))
    return MT_TIER_INVALID;
  if (prior != nullptr && n != experts) return MT_TIER_INVALID;
  for (size_t i = 0; prior != nullptr && i < n; i++)
    if (!(std::isfinite(prior[i]) && prior[i] >= 0)) return MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(t.mu);
  if (prior != nullptr)
    t.policy.count.assign(prior, prior + n);
  else
    t.policy.count.assign(experts, 0);
  t.policy.stamp.assign(experts, 0);
  t.policy.now = 0;
  t.policy.half_life = half_life;
  t.policy.mode.store(mode, std::memory_order_relaxed);
  return MT_TIER_OK;
}

extern "C" void mt_tier_policy_tick(mt_tier* tier) {
  std::lock_guard<std::mutex> lock(tier->mu);
  tier->policy.now += 1;
}

extern "C" void mt_tier_policy_scores(mt_tier* tier, double* out, size_t n) {
  mt_tier& t = *tier;
  std::lock_guard<std::mutex> lock(t.mu);
  const size_t experts = size_t(t.n_layer) * size_t(t.n_expert);
  for (size_t i = 0; i < n && i < experts; i++) {
    const size_t layer = i / size_t(t.n_expert), base = layer * size_t(t.n_expert);
    out[i] = mt_dlfu_score(t.policy.count.data() + base, t.policy.stamp.data() + base, int32_t(i - base),
                           t.policy.half_life);
  }
}
