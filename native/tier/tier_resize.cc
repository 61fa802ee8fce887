// Live slot budgets: a layer's slot count changes between evals (engine.tune residentSlotsPerLayer).
//
//   grow    spare slots (left by earlier shrinks) first, then one backend reserve of the same
//           slot size for the rest; the new slots are free (a warmstart fills them)
//   shrink  free slots first (a failed upload leaves one), then the victims' slots in the
//           caller's order (lowest score first), skipping a victim with a swap queued or in
//           flight; each victim is evicted (reported by tier_drain, so its host copy is built),
//           its slot emptied on the backend, its memory given back (mt_backend_discard), and
//           kept spare (reserved: a grow reuses it first)
//
// Everything is checked before anything changes: false with a message means nothing changed.
// The caller guarantees no eval runs (the eval reads layer_slots / slot_layer without mu).
#include <algorithm>
#include <cstdio>
#include <string>
#include "tier.h"
#include "tier_prefetch.h"

namespace mt {
namespace {

bool fail(char* err, size_t err_bytes, const std::string& message) {
  std::snprintf(err, err_bytes, "%s", message.c_str());
  return false;
}

bool grow(mt_tier& t, int32_t layer, int32_t more, char* err, size_t err_bytes) {
  const int32_t from_spare = std::min<int32_t>(more, int32_t(t.spare_slots.size()));
  std::vector<int32_t> ids(t.spare_slots.end() - from_spare, t.spare_slots.end());
  if (!tier_reserve_slots(t, more - from_spare, &ids, err, err_bytes)) return false;  // nothing taken yet
  t.spare_slots.resize(t.spare_slots.size() - size_t(from_spare));
  for (int32_t s : ids) {
    t.slot_layer[size_t(s)] = layer;
    t.slot_expert[size_t(s)] = -1;
    t.layer_slots[size_t(layer)].push_back(s);
  }
  return true;
}

bool shrink(mt_tier& t, int32_t layer, int32_t fewer, const int32_t* victims, int32_t n_victims, char* err,
            size_t err_bytes) {
  const size_t base = size_t(layer) * size_t(t.n_expert);
  std::vector<int32_t> drop;  // slot ids
  for (int32_t s : t.layer_slots[size_t(layer)])
    if (int32_t(drop.size()) < fewer && t.slot_expert[size_t(s)] < 0) drop.push_back(s);
  std::vector<int32_t> evict;  // experts
  for (int32_t i = 0; i < n_victims && int32_t(drop.size()) < fewer; i++) {
    const int32_t x = victims[i];
    if (x < 0 || x >= t.n_expert)
      return fail(err, err_bytes,
                  "tierResize: victims[" + std::to_string(i) + "] = " + std::to_string(x) + ": expected 0.." +
                      std::to_string(t.n_expert - 1));
    if (t.expert_state[base + size_t(x)] != kExpertResident || std::find(evict.begin(), evict.end(), x) != evict.end())
      continue;
    evict.push_back(x);
    drop.push_back(t.residency[base + size_t(x)].load(std::memory_order_relaxed));
  }
  if (int32_t(drop.size()) < fewer)
    return fail(err, err_bytes,
                "tierResize: layer " + std::to_string(layer) + ": expected " + std::to_string(fewer) +
                    " free slots or plainly resident victims to give up, found " + std::to_string(drop.size()) +
                    " (the others have swaps queued or in flight: try again after they settle)");
  for (int32_t x : evict) {
    t.residency[base + size_t(x)].store(-1, std::memory_order_release);
    t.expert_state[base + size_t(x)] = kExpertNone;
    tier_push_eviction(t, layer, x);
    tier_prefetch_evicted(t, base + size_t(x));
  }
  std::vector<int32_t>& slots = t.layer_slots[size_t(layer)];
  for (int32_t s : drop) {
    if (t.slot_dirty[size_t(s)] && mt_backend_free(t.backend, s, nullptr, 0) == MT_BACKEND_OK)
      t.slot_dirty[size_t(s)] = 0;
    if (!t.slot_dirty[size_t(s)])
      mt_backend_discard(t.backend, s, nullptr, 0);  // its memory back until a grow reuses it
    t.slot_expert[size_t(s)] = -1;
    t.slot_layer[size_t(s)] = -1;
    slots.erase(std::find(slots.begin(), slots.end(), s));
    t.spare_slots.push_back(s);
  }
  return true;
}

}  // namespace
}  // namespace mt

extern "C" int mt_tier_resize(mt_tier* tier, int32_t layer, int32_t count, const int32_t* victims, int32_t n_victims,
                              char* err, size_t err_bytes) {
  using namespace mt;
  mt_tier& t = *tier;
  if (layer < 0 || layer >= t.n_layer || count < 0 || count > t.n_expert)
    return fail(err, err_bytes,
                "tierResize: layer " + std::to_string(layer) + ", slots " + std::to_string(count) +
                    ": expected a layer in 0.." + std::to_string(t.n_layer - 1) + " and 0.." +
                    std::to_string(t.n_expert) + " slots"),
           MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(t.mu);
  const int32_t now = int32_t(t.layer_slots[size_t(layer)].size());
  bool ok = true;
  if (count > now) ok = grow(t, layer, count - now, err, err_bytes);
  if (count < now) ok = shrink(t, layer, now - count, victims, n_victims, err, err_bytes);
  return ok ? MT_TIER_OK : MT_TIER_FAILED;
}
