// The tier's eviction policy state (tier_policy.cc; the rule is include/mt_policy.h, decayed LFU):
// the one that decides each eviction at the moment a slot is needed.
//
//   owner    mt_tier::policy (tier.h)
//   guards   count, stamp: added to at each bind (the routed rows) on the eval thread, read there
//            under mt_tier::mu where a slot is needed, and by the caller between evals
//            now, half_life: written under mt_tier::mu between evals (set_policy, tick); bind reads them
//            mode: atomic (set between evals; mt_tier_policy_mode)
//            eligible: scratch of the victim search (under mt_tier::mu)
//            kept_misses: the eval thread's (bind's misses that mode KEEP admits)
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>
#include "mt_forward.h"
#include "mt_tier.h"

namespace mt {

struct TierPolicy {
  std::vector<double> count, stamp;  // [nLayer * nExpert]: the decayed counts and their times
  double now = 0, half_life = 16;    // the clock counts decode tokens (mt_tier_policy_tick)
  std::atomic<int32_t> mode{MT_TIER_POLICY_OFF};
  std::vector<uint8_t> eligible;     // [nExpert]
  std::vector<int32_t> kept_misses;  // [nExpert]
};

}  // namespace mt

struct mt_tier;

namespace mt {

// tier_policy.cc. touch: a bind's routed rows into the counts (eval thread). victim (under mu): the
// layer's lowest-scored expert that is plainly RESIDENT in a slot and not routed_now[e]; -1: none.
void tier_policy_touch(mt_tier& t, int32_t layer, const mt_expert_binding* runs, int32_t n_runs);
int32_t tier_policy_victim(mt_tier& t, int32_t layer, const uint8_t* routed_now);
// Policy mode KEEP, a tier without stream_fd (eval thread, bind): each routed miss computed from its
// host copy or the container is kept: a free slot is filled with it now, else a swap into the
// policy's lowest-scored resident not routed now is queued for the layer's boundary.
void tier_keep_misses(mt_tier& t, int32_t layer, const int32_t* experts, int32_t n);

}  // namespace mt
