// Events, leases and the optional verbs of include/mt_backend.h, for every kind.
#include "backend.h"
#include "mt_backend_debug.h"

using mt::fail;

namespace {

int find_event(mt_backend* b, mt_event_id event, const char* verb, char* err, size_t err_bytes,
               std::map<mt_event_id, mt_event_info>::iterator* it) {
  *it = b->events.find(event);
  if (*it != b->events.end()) return MT_BACKEND_OK;
  const std::string why =
      event == 0 || event >= b->next_event
          ? "was never issued by this backend"
          : "finished long ago and was dropped (events kept: " + std::to_string(mt::kEventsRetainedMax) + ")";
  return fail(err, err_bytes, MT_BACKEND_INVALID, std::string(verb) + ": event " + std::to_string(event) + " " + why);
}

}  // namespace

int mt_backend::run_expert(int32_t, const void*, char* err, size_t err_bytes) {
  return fail(err, err_bytes, MT_BACKEND_UNSUPPORTED,
              "run_expert: not implemented by the cpu and fake backends; compute from slot_data");
}

extern "C" {

const mt_backend_i* mt_backend_interface(const mt_backend* b) { return &b->iface; }

#if MT_DEBUG_ASSERTS_ENABLED
int mt_backend_debug_recomplete(mt_backend* b, mt_event_id event) {
  mt::UploadJob job;
  {
    std::lock_guard<std::mutex> lock(b->mu);
    auto it = b->events.find(event);
    if (it == b->events.end() || it->second.kind != MT_EVENT_UPLOAD || it->second.state == MT_EVENT_PENDING)
      return MT_BACKEND_INVALID;
    job.event = event, job.slot = it->second.slot, job.bytes = job.copy_limit = it->second.bytes;
  }
  b->complete(job, true, 0, 0);
  return MT_BACKEND_OK;
}
#endif

int mt_backend_event_query(mt_backend* b, mt_event_id event, mt_event_info* info, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  std::map<mt_event_id, mt_event_info>::iterator it;
  if (int rc = find_event(b, event, "event_query", err, err_bytes, &it)) return rc;
  *info = it->second;
  return MT_BACKEND_OK;
}

int mt_backend_event_wait(mt_backend* b, mt_event_id event, mt_event_info* info, char* err, size_t err_bytes) {
  std::unique_lock<std::mutex> lock(b->mu);
  std::map<mt_event_id, mt_event_info>::iterator it;
  if (int rc = find_event(b, event, "event_wait", err, err_bytes, &it)) return rc;
  // A pending event is never pruned, so `it` stays valid across the waits (std::map).
  b->finished.wait(lock, [&] { return it->second.state != MT_EVENT_PENDING; });
  *info = it->second;
  b->on_waited(*info);
  return MT_BACKEND_OK;
}

int mt_backend_compute_record(mt_backend* b, int64_t label, uint64_t work_bytes, mt_event_id* event, char* err,
                              size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (b->closed) return fail(err, err_bytes, MT_BACKEND_CLOSED, "compute_record: the backend is closed");
  const mt_event_id next = b->next_event;
  if (b->record_compute(next)) {  // timed by the device: pending until complete_compute
    *event = b->add_event(mt_event_info{MT_EVENT_PENDING, MT_EVENT_COMPUTE, 0, 0, label, -1, work_bytes});
    MT_ASSERT(*event == next, "record_compute was told the id add_event gives");
    return MT_BACKEND_OK;
  }
  const int64_t at = b->compute_stamp(work_bytes);
  *event = b->add_event(mt_event_info{MT_EVENT_DONE, MT_EVENT_COMPUTE, at, at, label, -1, work_bytes});
  return MT_BACKEND_OK;
}

int mt_backend_lease(mt_backend* b, int32_t slot, mt_lease_id* lease, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (slot < 0 || size_t(slot) >= b->slots.size())
    return fail(
        err, err_bytes, MT_BACKEND_INVALID,
        "lease: slot " + std::to_string(slot) + ": expected a slot id in [0, " + std::to_string(b->slots.size()) + ")");
  mt::Slot& s = b->slots[size_t(slot)];
  if (s.state != MT_SLOT_VALID) {
    static const char* names[] = {"empty", "uploading", "valid", "invalid (its upload failed)"};
    return fail(
        err, err_bytes, MT_BACKEND_STATE,
        "lease: slot " + std::to_string(slot) + " is " + names[s.state] + "; only a valid slot can be computed from");
  }
  MT_ASSERT(s.leases >= 0, "lease counts never go below 0");
  s.leases++;
  *lease = b->next_lease++;
  const bool added = b->leases.emplace(*lease, slot).second;
  MT_ASSERT(added, "lease ids are never reused");
  return MT_BACKEND_OK;
}

void mt_backend_release(mt_backend* b, mt_lease_id lease) {
  std::lock_guard<std::mutex> lock(b->mu);
  auto it = b->leases.find(lease);
  if (it == b->leases.end()) return;  // released already: idempotent
  MT_ASSERT(it->second >= 0 && size_t(it->second) < b->slots.size(), "a lease names one of this backend's slots");
  mt::Slot& s = b->slots[size_t(it->second)];
  MT_ASSERT(s.leases > 0, "a held lease is counted by its slot: lease counts never go below 0");
  MT_ASSERT(s.state == MT_SLOT_VALID, "a leased slot stays valid (uploads into it and frees of it are refused)");
  s.leases--;
  b->leases.erase(it);
}

int64_t mt_backend_lease_count(mt_backend* b, int32_t slot) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (slot < 0) return int64_t(b->leases.size());
  return size_t(slot) < b->slots.size() ? b->slots[size_t(slot)].leases : 0;
}

int mt_backend_slot_data(mt_backend* b, int32_t slot, uint8_t** data, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (!b->host_visible())
    return fail(err, err_bytes, MT_BACKEND_UNSUPPORTED,
                "slot_data: this backend's memory is not host-visible; use run_expert");
  if (slot < 0 || size_t(slot) >= b->slots.size())
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                "slot_data: slot " + std::to_string(slot) + ": expected a slot id in [0, " +
                    std::to_string(b->slots.size()) + ")");
  *data = b->slots[size_t(slot)].data;
  return MT_BACKEND_OK;
}

int mt_backend_run_expert(mt_backend* b, int32_t slot, const void* args, char* err, size_t err_bytes) {
  return b->run_expert(slot, args, err, err_bytes);
}

const char* mt_backend_status_name(int status) {
  switch (status) {
    case MT_BACKEND_OK:
      return "ok";
    case MT_BACKEND_INVALID:
      return "invalid";
    case MT_BACKEND_BUDGET:
      return "budget";
    case MT_BACKEND_BUSY:
      return "busy";
    case MT_BACKEND_NO_OVERWRITE:
      return "no-overwrite";
    case MT_BACKEND_STATE:
      return "state";
    case MT_BACKEND_NO_MEMORY:
      return "no-memory";
    case MT_BACKEND_UNSUPPORTED:
      return "unsupported";
    case MT_BACKEND_CLOSED:
      return "closed";
    default:
      return "unknown";
  }
}

void mt_backend_config_preset_consumer_8gb(mt_backend_config* out) {
  *out = mt_backend_config{};
  out->kind = MT_BACKEND_FAKE;
  out->budget_bytes = uint64_t(8) << 30;
  out->bandwidth_bytes_per_s = 25e9;
  out->transfer_fixed_us = 330;
  out->compute_bytes_per_s = 448e9;
  out->overwrite_supported = 1;
  out->fail_transfer_after_bytes = 0;
}

}  // extern "C"
