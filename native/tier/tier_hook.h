// The tier's layer hook: the addon's callback for each layer's routed rows per expert (a prefill
// replan), called on the eval thread by bind (tier_source.cc). Its counts are in TierCounters.
//
//   owner    mt_tier::hook (tier.h)
//   guards   fn, user: set by the addon between evals (mt_tier_set_layer_hook), read by the eval
//            counts: the eval thread's scratch [nExpert]
#pragma once
#include <cstdint>
#include <vector>
#include "mt_tier.h"

namespace mt {

struct TierHook {
  mt_tier_layer_hook fn = nullptr;
  void* user = nullptr;
  std::vector<int32_t> counts;
};

}  // namespace mt
