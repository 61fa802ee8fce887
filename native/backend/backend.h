// The backend-neutral half of every backend: the slot table, leases, the event table and
// the verbs of include/mt_backend.h that check them. A kind (cpu_backend/, fake/, later
// cuda/) derives from mt_backend and supplies memory, transfers and clocks:
//
//   verb (any thread) --lock--> checks + slot table --> prepare_upload(job) --> submit(job)
//                                                                                  |
//   transfer thread / stream:  copy pieces ... --> complete(job, ok, start, end) --lock-->
//                                                  slot valid | invalid, event done | failed
//
// One mutex (mu) guards everything below; hooks marked "under mu" are called holding it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include "mt_assert.h"
#include "mt_backend.h"

namespace mt {

// Slots start at multiples of this (cache lines); a block starts on a page.
constexpr uint64_t kSlotAlignBytes = MT_BACKEND_SLOT_ALIGN_BYTES;
constexpr uint64_t kBlockAlignBytes = 4096;
// Finished events kept for queries; older finished ones are dropped (pending ones never).
constexpr size_t kEventsRetainedMax = 1 << 16;

struct UploadJob {
  mt_event_id event = 0;
  int32_t slot = -1;
  uint8_t* dst = nullptr;
  mt_upload_piece pieces[MT_UPLOAD_PIECES_MAX] = {};
  int32_t n_pieces = 0;
  uint64_t bytes = 0;          // requested
  uint64_t copy_limit = 0;     // copy this many, then fail if < bytes (fault injection)
  bool virtual_times = false;  // start_ns / end_ns were set by prepare_upload
  int64_t start_ns = 0, end_ns = 0;
};

struct Slot {
  int32_t state = MT_SLOT_EMPTY;
  int32_t leases = 0;
  uint8_t* data = nullptr;
};

// Writes "message" into err and returns status (the verbs' error path).
int fail(char* err, size_t err_bytes, int status, const std::string& message);
// Copies the job's pieces into its slot up to copy_limit; true if every byte landed.
bool copy_pieces(const UploadJob& job);
// CLOCK_MONOTONIC in ns: the clock of Node's process.hrtime.bigint().
int64_t monotonic_ns();
// The leases the slots count (MT_ASSERT checks them against the lease table). Under mu.
int64_t slot_leases_total(const mt_backend* b);

}  // namespace mt

struct mt_backend {
  explicit mt_backend(const mt_backend_config& c) : config(c) {}
  virtual ~mt_backend() = default;

  // --- what a kind supplies ---
  virtual uint8_t* alloc_block(uint64_t bytes) = 0;  // aligned, or null
  virtual void free_block(uint8_t* block) = 0;
  virtual void discard_bytes(uint8_t*, uint64_t) {}  // under mu; give an empty slot's memory back (optional)
  virtual void prepare_upload(mt::UploadJob& job) { job.copy_limit = job.bytes; }  // under mu
  virtual void submit(const mt::UploadJob& job) = 0;                               // under mu; must not block
  virtual int64_t compute_stamp(uint64_t work_bytes) = 0;                          // under mu
  virtual void on_waited(const mt_event_info&) {}                                  // under mu
  virtual void drain() = 0;  // finish every submitted job and stop the transfer thread; not under mu
  virtual bool overwrite_supported() const { return true; }
  virtual bool host_visible() const { return true; }
  // A kind whose compute markers are timed by the device (cuda: an event on its compute stream)
  // records the marker here and returns true; the marker's event stays pending until the kind
  // calls complete_compute. false (cpu, fake, disk): compute_stamp times it at once. Under mu.
  virtual bool record_compute(mt_event_id) { return false; }
  // mt_backend_run_expert; only a kind that computes on its device implements it. Not under mu.
  virtual int run_expert(int32_t slot, const void* args, char* err, size_t err_bytes);
  // The interface's optional entries (include/mt_backend.h: NULL unless the kind sets them in its
  // constructor; mt_backend_interface hands them out). Not under mu.
  mt_backend_i iface{};

  // Called by the transfer thread when a job ends (takes mu).
  void complete(const mt::UploadJob& job, bool ok, int64_t start_ns, int64_t end_ns);
  // Called by a kind's thread when a marker that record_compute took finished (takes mu).
  void complete_compute(mt_event_id event, bool ok, int64_t at_ns);

  const mt_backend_config config;
  std::mutex mu;
  std::condition_variable finished;  // an event left pending
  bool closed = false;
  std::vector<mt::Slot> slots;
  std::vector<uint8_t*> blocks;
  uint64_t slot_bytes = 0, slot_stride = 0, reserved_bytes = 0;
  std::map<mt_event_id, mt_event_info> events;  // ordered: the oldest finished are pruned first
  mt_event_id next_event = 1;
  std::unordered_map<mt_lease_id, int32_t> leases;  // lease -> slot
  mt_lease_id next_lease = 1;
  int32_t uploads_in_flight = 0;
  uint64_t uploads_done = 0, uploads_failed = 0, bytes_uploaded = 0, discards = 0;

  mt_event_id add_event(const mt_event_info& info);  // under mu
};

namespace mt {
// The kinds' constructors (cpu_backend/, fake/): null with a message on a bad config.
mt_backend* create_cpu_backend(const mt_backend_config& c, char* err, size_t err_bytes);
mt_backend* create_fake_backend(const mt_backend_config& c, char* err, size_t err_bytes);
mt_backend* create_disk_backend(const mt_backend_config& c, char* err, size_t err_bytes);
// cuda/host/: the kinds cuda and cuda-sim; *reason (may be null) says why a device is unavailable.
mt_backend* create_cuda_backend(const mt_backend_config& c, int32_t* reason, char* err, size_t err_bytes);
}  // namespace mt
