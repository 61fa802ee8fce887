// The slot verbs of include/mt_backend.h for every kind: create, destroy, reserve, upload,
// free, slot state, stats. Events and leases are in backend_events.cc.
#include <cstdio>
#include <cstring>
#include <ctime>
#include "backend.h"
#include "mt_clock.h"

namespace mt {

int fail(char* err, size_t err_bytes, int status, const std::string& message) {
  if (err != nullptr && err_bytes > 0) std::snprintf(err, err_bytes, "%s", message.c_str());
  return status;
}

bool copy_pieces(const UploadJob& job) {
  uint64_t at = 0;
  for (int32_t i = 0; i < job.n_pieces && at < job.copy_limit; i++) {
    const uint64_t room = job.copy_limit - at;
    const uint64_t n = job.pieces[i].bytes < room ? job.pieces[i].bytes : room;
    std::memcpy(job.dst + at, job.pieces[i].src, n);
    at += n;
  }
  return at == job.bytes;
}

int64_t monotonic_ns() { return mt_monotonic_ns(); }

namespace {

std::string slot_name(int32_t slot) { return "slot " + std::to_string(slot); }

// A slot id of this backend, or MT_BACKEND_INVALID. Under mu.
int check_slot(const mt_backend* b, int32_t slot, const char* verb, char* err, size_t err_bytes) {
  if (slot < 0 || size_t(slot) >= b->slots.size())
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                std::string(verb) + ": " + slot_name(slot) + ": expected a slot id in [0, " +
                    std::to_string(b->slots.size()) + ")");
  return MT_BACKEND_OK;
}

}  // namespace

// The leases counted by the slots (a debug check against the lease table). Under mu.
int64_t slot_leases_total(const mt_backend* b) {
  int64_t n = 0;
  for (const Slot& s : b->slots) n += s.leases;
  return n;
}

}  // namespace mt

using mt::fail;

mt_event_id mt_backend::add_event(const mt_event_info& info) {
  const mt_event_id id = next_event++;
  const bool added = events.emplace(id, info).second;
  MT_ASSERT(added, "event ids are never reused");
  for (auto it = events.begin(); events.size() > mt::kEventsRetainedMax && it->second.state != MT_EVENT_PENDING;)
    it = events.erase(it);
  return id;
}

void mt_backend::complete(const mt::UploadJob& job, bool ok, int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu);
  MT_ASSERT(job.slot >= 0 && size_t(job.slot) < slots.size(), "a completed upload names one of this backend's slots");
  MT_ASSERT(slots[size_t(job.slot)].state == MT_SLOT_UPLOADING,
            "a completed upload's slot was uploading (an upload completes once)");
  MT_ASSERT(uploads_in_flight > 0, "uploads_in_flight never goes below 0");
  auto it = events.find(job.event);
  MT_ASSERT(it != events.end(), "a pending event is never pruned");
  MT_ASSERT(it == events.end() || it->second.state == MT_EVENT_PENDING, "a completed upload's event was pending");
  if (it != events.end()) {  // pending events are never pruned, so this always holds
    it->second.state = ok ? MT_EVENT_DONE : MT_EVENT_FAILED;
    it->second.start_ns = start_ns;
    it->second.end_ns = end_ns;
  }
  slots[size_t(job.slot)].state = ok ? MT_SLOT_VALID : MT_SLOT_INVALID;
  uploads_in_flight--;
  if (ok)
    uploads_done++, bytes_uploaded += job.bytes;
  else
    uploads_failed++, bytes_uploaded += job.copy_limit;
  finished.notify_all();
}

void mt_backend::complete_compute(mt_event_id event, bool ok, int64_t at_ns) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = events.find(event);
  MT_ASSERT(it != events.end() && it->second.kind == MT_EVENT_COMPUTE && it->second.state == MT_EVENT_PENDING,
            "a completed compute marker is a pending marker of this backend (pending events are never pruned)");
  if (it == events.end()) return;
  it->second.state = ok ? MT_EVENT_DONE : MT_EVENT_FAILED;
  it->second.start_ns = it->second.end_ns = at_ns;
  finished.notify_all();
}

extern "C" {

mt_backend* mt_backend_create(const mt_backend_config* c, char* err, size_t err_bytes) {
  if (c == nullptr) return fail(err, err_bytes, MT_BACKEND_INVALID, "create: config is null"), nullptr;
  if (c->budget_bytes == 0)
    return fail(err, err_bytes, MT_BACKEND_INVALID, "create: budget_bytes: expected > 0"), nullptr;
  if (c->kind == MT_BACKEND_CPU) return mt::create_cpu_backend(*c, err, err_bytes);
  if (c->kind == MT_BACKEND_FAKE) return mt::create_fake_backend(*c, err, err_bytes);
  if (c->kind == MT_BACKEND_DISK) return mt::create_disk_backend(*c, err, err_bytes);
  if (c->kind == MT_BACKEND_CUDA || c->kind == MT_BACKEND_CUDA_SIM)
    return mt::create_cuda_backend(*c, nullptr, err, err_bytes);
  fail(err, err_bytes, MT_BACKEND_INVALID,
       "create: kind: expected 0 (cpu), 1 (fake), 2 (disk), 3 (cuda) or 4 (cuda-sim), got " + std::to_string(c->kind));
  return nullptr;
}

void mt_backend_destroy(mt_backend* b) {
  if (b == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(b->mu);
    b->closed = true;
  }
  b->drain();  // in-flight uploads finish: their sources are still alive (the caller's promise)
  {
    std::lock_guard<std::mutex> lock(b->mu);
    MT_ASSERT(b->uploads_in_flight == 0, "drain completed every submitted upload");
  }
  for (uint8_t* block : b->blocks) b->free_block(block);
  delete b;
}

int mt_backend_slots_reserve(mt_backend* b, int32_t n, uint64_t slot_bytes, int32_t* first, char* err,
                             size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (b->closed) return fail(err, err_bytes, MT_BACKEND_CLOSED, "slots_reserve: the backend is closed");
  if (n <= 0 || slot_bytes == 0)
    return fail(err, err_bytes, MT_BACKEND_INVALID, "slots_reserve: expected n > 0 and slot_bytes > 0");
  if (b->slot_bytes != 0 && slot_bytes != b->slot_bytes)
    return fail(err, err_bytes, MT_BACKEND_STATE,
                "slots_reserve: slot_bytes: expected " + std::to_string(b->slot_bytes) +
                    " (every slot of a backend has one size), got " + std::to_string(slot_bytes));
  const uint64_t stride = (slot_bytes + mt::kSlotAlignBytes - 1) / mt::kSlotAlignBytes * mt::kSlotAlignBytes;
  const uint64_t room = b->config.budget_bytes - b->reserved_bytes;
  if (stride > room || uint64_t(n) > room / stride)
    return fail(err, err_bytes, MT_BACKEND_BUDGET,
                "slots_reserve: " + std::to_string(n) + " slots of " + std::to_string(stride) +
                    " bytes exceed the budget: " + std::to_string(room) + " of " +
                    std::to_string(b->config.budget_bytes) + " bytes left");
  uint8_t* block = b->alloc_block(uint64_t(n) * stride);
  if (block == nullptr)
    return fail(err, err_bytes, MT_BACKEND_NO_MEMORY,
                "slots_reserve: could not allocate " + std::to_string(uint64_t(n) * stride) + " bytes");
  b->blocks.push_back(block);
  b->slot_bytes = slot_bytes;
  b->slot_stride = stride;
  b->reserved_bytes += uint64_t(n) * stride;
  MT_ASSERT(b->reserved_bytes <= b->config.budget_bytes, "slots reserved never pass the budget");
  *first = int32_t(b->slots.size());
  for (int32_t i = 0; i < n; i++) b->slots.push_back(mt::Slot{MT_SLOT_EMPTY, 0, block + uint64_t(i) * stride});
  return MT_BACKEND_OK;
}

int mt_backend_upload(mt_backend* b, int32_t slot, const mt_upload_piece* pieces, int32_t n_pieces, int32_t overwrite,
                      int64_t label, mt_event_id* event, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (b->closed) return fail(err, err_bytes, MT_BACKEND_CLOSED, "upload: the backend is closed");
  if (int rc = mt::check_slot(b, slot, "upload", err, err_bytes)) return rc;
  if (n_pieces < 1 || n_pieces > MT_UPLOAD_PIECES_MAX)
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                "upload: expected 1 to " + std::to_string(MT_UPLOAD_PIECES_MAX) + " pieces");
  mt::UploadJob job;
  for (int32_t i = 0; i < n_pieces; i++) job.bytes += pieces[i].bytes, job.pieces[i] = pieces[i];
  if (job.bytes == 0 || job.bytes > b->slot_bytes)
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                "upload: " + mt::slot_name(slot) + ": expected 1 to " + std::to_string(b->slot_bytes) + " bytes, got " +
                    std::to_string(job.bytes));
  mt::Slot& s = b->slots[size_t(slot)];
  if (s.leases > 0)
    return fail(err, err_bytes, MT_BACKEND_BUSY,
                "upload: " + mt::slot_name(slot) + " is leased by compute (" + std::to_string(s.leases) + " leases)");
  if (s.state == MT_SLOT_UPLOADING)
    return fail(err, err_bytes, MT_BACKEND_BUSY, "upload: " + mt::slot_name(slot) + " has an upload in flight");
  if (s.state != MT_SLOT_EMPTY && !overwrite)
    return fail(err, err_bytes, MT_BACKEND_STATE,
                "upload: " + mt::slot_name(slot) + " holds an expert: free it first or upload with overwrite");
  if (s.state != MT_SLOT_EMPTY && !b->overwrite_supported())
    return fail(
        err, err_bytes, MT_BACKEND_NO_OVERWRITE,
        "upload: " + mt::slot_name(slot) + ": this backend refuses in-place overwrite; free the slot, then upload");
  job.n_pieces = n_pieces;
  job.slot = slot;
  job.dst = s.data;
  mt_event_info info{MT_EVENT_PENDING, MT_EVENT_UPLOAD, 0, 0, label, slot, job.bytes};
  job.event = b->add_event(info);
  b->prepare_upload(job);
  if (job.virtual_times) {  // the fake clock knows the times now; queries see them at once
    mt_event_info& e = b->events[job.event];
    e.start_ns = job.start_ns, e.end_ns = job.end_ns;
  }
  s.state = MT_SLOT_UPLOADING;
  b->uploads_in_flight++;
  MT_ASSERT(size_t(b->uploads_in_flight) <= b->slots.size(), "at most one upload in flight per slot");
  b->submit(job);
  *event = job.event;
  return MT_BACKEND_OK;
}

int mt_backend_overwrite_supported(const mt_backend* b) { return b->overwrite_supported() ? 1 : 0; }

int mt_backend_free(mt_backend* b, int32_t slot, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (int rc = mt::check_slot(b, slot, "free", err, err_bytes)) return rc;
  mt::Slot& s = b->slots[size_t(slot)];
  if (s.leases > 0)
    return fail(err, err_bytes, MT_BACKEND_BUSY, "free: " + mt::slot_name(slot) + " is leased by compute");
  if (s.state == MT_SLOT_UPLOADING)
    return fail(err, err_bytes, MT_BACKEND_BUSY, "free: " + mt::slot_name(slot) + " has an upload in flight");
  s.state = MT_SLOT_EMPTY;
  return MT_BACKEND_OK;
}

int mt_backend_discard(mt_backend* b, int32_t slot, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (int rc = mt::check_slot(b, slot, "discard", err, err_bytes)) return rc;
  mt::Slot& s = b->slots[size_t(slot)];
  if (s.state != MT_SLOT_EMPTY || s.leases > 0)
    return fail(err, err_bytes, MT_BACKEND_STATE, "discard: " + mt::slot_name(slot) + " must be empty (free it first)");
  b->discard_bytes(s.data, b->slot_stride);
  b->discards++;
  return MT_BACKEND_OK;
}

int mt_backend_slot_state(mt_backend* b, int32_t slot, int32_t* state, char* err, size_t err_bytes) {
  std::lock_guard<std::mutex> lock(b->mu);
  if (int rc = mt::check_slot(b, slot, "slot_state", err, err_bytes)) return rc;
  *state = b->slots[size_t(slot)].state;
  return MT_BACKEND_OK;
}

void mt_backend_stats_get(mt_backend* b, mt_backend_stats* out) {
  std::lock_guard<std::mutex> lock(b->mu);
  *out = mt_backend_stats{};
  MT_ASSERT(b->uploads_in_flight >= 0, "uploads_in_flight never goes below 0");
  MT_ASSERT(mt::slot_leases_total(b) == int64_t(b->leases.size()), "the slots' lease counts add up to the lease table");
  out->slots = int32_t(b->slots.size());
  out->slot_bytes = b->slot_bytes;
  out->slot_stride_bytes = b->slot_stride;
  out->reserved_bytes = b->reserved_bytes;
  out->budget_bytes = b->config.budget_bytes;
  out->leases = int64_t(b->leases.size());
  out->uploads_in_flight = b->uploads_in_flight;
  out->uploads_done = b->uploads_done;
  out->uploads_failed = b->uploads_failed;
  out->bytes_uploaded = b->bytes_uploaded;
  out->discards = b->discards;
  out->overwrite_supported = b->overwrite_supported() ? 1 : 0;
  out->host_visible = b->host_visible() ? 1 : 0;
  out->virtual_clock = b->config.kind == MT_BACKEND_FAKE ? 1 : 0;
}

}  // extern "C"
