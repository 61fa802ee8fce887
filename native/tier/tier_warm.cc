// Warmstart: fill a layer's free slots with the given experts and wait for them, before (or
// between) requests. Called on the JS thread (issue) and a worker (finish); the eval thread may
// run meanwhile: the slots are marked incoming first, so nothing else picks them.
#include <cstdio>
#include <memory>
#include <string>
#include "tier.h"

struct mt_tier_warm {
  std::vector<mt::WarmUpload> uploads;
};

namespace mt {
namespace {

bool fail(char* err, size_t err_bytes, const std::string& message) {
  std::snprintf(err, err_bytes, "%s", message.c_str());
  return false;
}

bool warm_issue(mt_tier& t, int32_t layer, const int32_t* experts, int32_t n, std::vector<WarmUpload>* uploads,
                char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(t.mu);
  const size_t base = size_t(layer) * size_t(t.n_expert);
  std::vector<int32_t> wanted;
  std::vector<uint8_t> seen(size_t(t.n_expert), 0);
  for (int32_t i = 0; i < n; i++) {
    const int32_t x = experts[i];
    if (x < 0 || x >= t.n_expert)
      return fail(err, err_bytes,
                  "tierWarmstart: experts[" + std::to_string(i) + "] = " + std::to_string(x) + ": expected 0.." +
                      std::to_string(t.n_expert - 1));
    if (seen[size_t(x)]++)
      return fail(err, err_bytes, "tierWarmstart: expert " + std::to_string(x) + " is listed twice");
    if (t.expert_state[base + size_t(x)] == kExpertNone)
      wanted.push_back(x);  // resident / incoming already: nothing to do
  }
  std::vector<int32_t> free_slots;
  const std::vector<int32_t>& slots = t.layer_slots[size_t(layer)];
  for (int32_t s : slots)
    if (t.slot_expert[size_t(s)] < 0) free_slots.push_back(s);
  if (wanted.size() > free_slots.size())
    return fail(err, err_bytes,
                "tierWarmstart: layer " + std::to_string(layer) + " has " + std::to_string(free_slots.size()) +
                    " free slots of " + std::to_string(slots.size()) + ", " + std::to_string(wanted.size()) +
                    " experts are not resident yet");
  for (size_t i = 0; i < wanted.size(); i++) {
    const int32_t slot = free_slots[i], x = wanted[i];
    mt_upload_piece pieces[3];
    tier_pieces(t, layer, x, pieces);
    char why[512] = "";
    if (t.slot_dirty[size_t(slot)]) {  // a failed upload left bytes: drop them first
      if (int rc = mt_backend_free(t.backend, slot, why, sizeof why))
        return fail(err, err_bytes,
                    std::string("tierWarmstart: freeing slot ") + std::to_string(slot) + ": " +
                        mt_backend_status_name(rc) + ": " + why);
      t.slot_dirty[size_t(slot)] = 0;
    }
    mt_event_id event = 0;
    if (int rc = mt_backend_upload(t.backend, slot, pieces, 3, 0, -1, &event, why, sizeof why))
      return fail(err, err_bytes,
                  "tierWarmstart: layer " + std::to_string(layer) + " expert " + std::to_string(x) + ": " +
                      mt_backend_status_name(rc) + ": " + why);
    t.slot_expert[size_t(slot)] = x;
    t.slot_dirty[size_t(slot)] = 1;
    t.expert_state[base + size_t(x)] = kExpertIncoming;
    uploads->push_back(WarmUpload{layer, x, slot, event});
    t.gate.inflight_bytes += expert_bytes(t, layer);  // the gate's warm class: counted, never held
    t.gate.inflight_transfers++;
    t.gate.ledger[kGateWarm].issued++;
  }
  return true;
}

bool warm_finish(mt_tier& t, const std::vector<WarmUpload>& uploads, char* err, size_t err_bytes) {
  std::vector<mt_event_info> infos(uploads.size());
  for (size_t i = 0; i < uploads.size(); i++)
    if (mt_backend_event_wait(t.backend, uploads[i].event, &infos[i], nullptr, 0) != MT_BACKEND_OK)
      infos[i].state = MT_EVENT_FAILED;
  std::lock_guard<std::mutex> lock(t.mu);
  std::string failed;
  for (size_t i = 0; i < uploads.size(); i++) {
    const WarmUpload& u = uploads[i];
    const size_t index = size_t(u.layer) * size_t(t.n_expert) + size_t(u.expert);
    t.gate.inflight_bytes -= expert_bytes(t, u.layer);
    t.gate.inflight_transfers--;
    (infos[i].state == MT_EVENT_DONE ? t.gate.ledger[kGateWarm].completed : t.gate.ledger[kGateWarm].failed)++;
    if (infos[i].state == MT_EVENT_DONE) {
      t.expert_state[index] = kExpertResident;
      t.residency[index].store(u.slot, std::memory_order_release);
      continue;
    }
    t.expert_state[index] = kExpertNone;  // the slot is reusable; its bytes are dropped on reuse
    t.slot_expert[size_t(u.slot)] = -1;
    failed += (failed.empty() ? "" : ", ") + std::to_string(u.expert);
  }
  if (failed.empty()) return true;
  return fail(err, err_bytes,
              "tierWarmstart: the upload of layer " + std::to_string(uploads[0].layer) + " expert(s) " + failed +
                  " failed; they stay non-resident");
}

}  // namespace
}  // namespace mt

extern "C" {

mt_tier_warm* mt_tier_warm_issue(mt_tier* t, int32_t layer, const int32_t* experts, int32_t n, int* status, char* err,
                                 size_t err_bytes) {
  if (layer < 0 || layer >= t->n_layer) {
    std::snprintf(err, err_bytes, "tierWarmstart: layer %d: expected 0..%d", layer, t->n_layer - 1);
    *status = MT_TIER_INVALID;
    return nullptr;
  }
  std::unique_ptr<mt_tier_warm> warm(new mt_tier_warm());
  const bool issued = mt::warm_issue(*t, layer, experts, n, &warm->uploads, err, err_bytes);
  *status = issued ? MT_TIER_OK : MT_TIER_FAILED;
  if (!issued && warm->uploads.empty()) return nullptr;
  return warm.release();
}

int mt_tier_warm_finish(mt_tier* t, mt_tier_warm* warm, char* err, size_t err_bytes) {
  std::unique_ptr<mt_tier_warm> owned(warm);
  return mt::warm_finish(*t, owned->uploads, err, err_bytes) ? MT_TIER_OK : MT_TIER_FAILED;
}

}  // extern "C"
