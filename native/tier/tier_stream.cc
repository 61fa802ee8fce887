// Misses read from the model file (docs/SPEC.md section 6: admit before run, one read per miss). With a stream
// descriptor, a routed expert of the layer being computed that has neither a slot nor a host copy
// starts being read at bind, before the layer runs it, and never comes from the mapping:
//
//   admitted  it gets a slot first (tier_admit_now, tier_swap.cc): an upload of it already in
//             flight, its queued swap issued now, or a free slot of the layer filled with it; the
//             backend reads it into the slot (disk: from the file), the run waits for that event
//             and computes from the slot under a lease, and the slot keeps it (one read)
//   streamed  no slot can take it (or the slots are device memory: tier_remote.cc): three reads
//             (gate, up, down) on the tier's lane of the read engine into a scratch entry for this call only
//
// Every read of the call is issued before the layer computes; the forward pass computes the
// layer's residents (and host copies) while they are in flight, then each wave of misses as
// their reads land (await, mt_forward.h). Both kinds count as misses (not hits) in the row stats.
//
//   scratch   entries of one expert each (gate | up | down, the container's bytes), 64-byte
//             aligned, mapped for nExpertUsed at creation, remapped once for the whole layer
//             (nExpert) when a prefill call streams more
//   engine    mt_io (include/mt_io.h), the tier's lane (tier_reads.h: the disk backend's engine,
//             shared, or one of the tier's own), O_DIRECT where the filesystem allows it (tmpfs
//             does not: buffered, and the pages read are dropped from the page cache after, as the
//             scratch holds them)
//
// A failed read fails the eval with a message naming the file, layer, expert and offset; the
// other streamed reads of the call end first (they write the scratch), the leases are released,
// and the tier stays usable (a failed admitted upload settles as any failed upload: its slot free).
#include <sys/mman.h>
#include <algorithm>
#include <unistd.h>
#include <climits>
#include <cstdio>
#include "mt_clock.h"
#include "tier.h"
#include "tier_counters.h"
#include "tier_prefetch.h"
#include "tier_reads.h"

namespace mt {
namespace {

size_t aligned_expert_bytes(const mt_tier& t) { return (t.slot_bytes + 63) / 64 * 64; }

// Scratch comes from mmap, not malloc: grown once to the whole layer (the memory plan's working
// set) and unmapped with the tier, it never stays behind in the allocator's heap (glibc keeps
// freed blocks past its moving mmap threshold resident; a scratch grown step by step held every
// size it passed through). The old scratch holds nothing live when it grows: no read is in flight.
void forget_entries(mt_tier& t) {
  std::fill(t.reads.scratch_entry.begin(), t.reads.scratch_entry.end(), -1);
  t.reads.scratch_next = 0;
  t.reads.scratch_layer = -1;
}

bool grow(mt_tier& t, size_t needed, char* err, size_t err_bytes) {
  if (needed <= t.reads.scratch_experts) return true;
  const size_t experts = t.reads.scratch_experts == 0 ? needed : std::max(needed, size_t(t.n_expert));
  t.reads.scratch.reset();
  t.reads.scratch_experts = 0;
  const size_t bytes = experts * aligned_expert_bytes(t);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::snprintf(err, err_bytes, "tier: streamed misses: out of memory for %zu experts of scratch (%zu bytes)",
                  experts, bytes);
    return false;
  }
  t.reads.scratch = ScratchMap(static_cast<uint8_t*>(p), ScratchUnmap{bytes});
  t.reads.scratch_experts = experts;
  return true;
}

uint64_t file_offset(const mt_tier& t, const mt_upload_piece& piece) {
  return uint64_t(static_cast<const uint8_t*>(piece.src) - t.reads.base);
}

void read_failed(mt_tier& t, int32_t layer, int32_t expert, uint64_t offset, uint64_t bytes, const char* why, char* err,
                 size_t err_bytes) {
  t.counters.stream_failures.fetch_add(1, std::memory_order_relaxed);
  std::snprintf(err, err_bytes, "expert read: %s: layer %d expert %d at offset %llu (%llu bytes): %s",
                t.reads.path.c_str(), layer, expert, (unsigned long long)offset, (unsigned long long)bytes, why);
}

// The three reads of a streamed miss into its scratch entry.
bool start_streamed(mt_tier& t, int32_t layer, PendingRead& r, char* err, size_t err_bytes) {
  mt_upload_piece pieces[3];
  tier_pieces(t, layer, r.expert, pieces);
  size_t at = 0;
  for (int i = 0; i < 3; i++) {
    char why[160] = "";
    const uint64_t offset = file_offset(t, pieces[i]);
    if (mt_io_read_lane(t.reads.io, kReadLane, offset, pieces[i].bytes, r.dst + at, layer, &r.ids[i], why,
                        sizeof why) != MT_IO_OK) {
      read_failed(t, layer, r.expert, offset, pieces[i].bytes, why, err, err_bytes);
      return false;
    }
    at += pieces[i].bytes;
  }
  return true;
}

void drop_cached(const mt_tier& t, int32_t layer, int32_t expert) {
  if (t.reads.direct) return;  // direct reads leave nothing in the page cache
  mt_upload_piece pieces[3];
  tier_pieces(t, layer, expert, pieces);
  for (const mt_upload_piece& piece : pieces)
    mt_io_advise(t.reads.io, MT_IO_ADVICE_DONTNEED, file_offset(t, piece), piece.bytes);
}

// An upload an earlier step issued (a swap, a prefetch) failed while this call waited on it: that
// failure was not this request's read. It settles (a failed in-place one is retried as
// free-then-upload, as at a boundary), then the expert is admitted again as this call's own read
// (the freed slot takes it; it never evicts: the call's routed marks are gone, and its residents
// hold leases); that one's failure fails the call. false: nothing could be issued.
bool retry_own(mt_tier& t, int32_t layer, PendingRead& r) {
  std::lock_guard<std::mutex> lock(t.mu);
  tier_settle_layer(t, layer, true, false);
  r.existing = false;
  return tier_admit_now(t, layer, r.expert, t.no_victims.data(), &r.slot, &r.event);
}

// The pending read's state now (wait: block until it ends). 1 landed, 0 pending, -1 failed (err).
int check(mt_tier& t, int32_t layer, PendingRead& r, bool wait, char* err, size_t err_bytes) {
  if (r.bulk) return tier_bulk_check(t, layer, wait, err, err_bytes);
  if (r.retained) return 1;
  if (r.admitted) {
    mt_event_info info{};
    const int rc = wait ? mt_backend_event_wait(t.backend, r.event, &info, nullptr, 0)
                        : mt_backend_event_query(t.backend, r.event, &info, nullptr, 0);
    if (rc == MT_BACKEND_OK && info.state == MT_EVENT_PENDING) return 0;
    if (rc == MT_BACKEND_OK && info.state == MT_EVENT_DONE) return 1;
    if (r.existing && retry_own(t, layer, r)) return 0;
    mt_upload_piece pieces[3];
    tier_pieces(t, layer, r.expert, pieces);
    read_failed(t, layer, r.expert, file_offset(t, pieces[0]), expert_bytes(t, layer), "the read into its slot failed",
                err, err_bytes);
    return -1;
  }
  int64_t start = INT64_MAX, end = 0;
  for (int i = 0; i < 3; i++) {
    mt_io_info info{};
    const int rc = wait ? mt_io_wait(t.reads.io, r.ids[i], &info, nullptr, 0)
                        : mt_io_query(t.reads.io, r.ids[i], &info, nullptr, 0);
    if (rc != MT_IO_OK) {
      read_failed(t, layer, r.expert, 0, 0, "its read is unknown to the read engine", err, err_bytes);
      return -1;
    }
    if (info.state == MT_IO_PENDING) return 0;
    if (info.state == MT_IO_FAILED) {
      read_failed(t, layer, r.expert, info.file_offset, info.bytes, info.reason, err, err_bytes);
      return -1;
    }
    start = std::min(start, info.start_ns), end = std::max(end, info.end_ns);
  }
  r.start_ns = start, r.end_ns = end;
  return 1;
}

// Binds a landed read's run: the slot under a lease, or the scratch entry.
bool bind_landed(mt_tier& t, int32_t layer, PendingRead& r, mt_expert_binding& run, char* err, size_t err_bytes) {
  if (r.bulk) {
    tier_bulk_bind(t, layer, run);
    r.landed = true;
    return true;
  }
  const mt_layer_experts& e = t.experts[size_t(layer)];
  const uint8_t* data = r.dst;
  if (r.admitted) {
    mt_lease_id lease = 0;
    if (mt_backend_lease(t.backend, r.slot, &lease, err, err_bytes) != MT_BACKEND_OK) return false;
    if (r.late) tier_prefetch_late_wait(t, layer, uint64_t(mt_monotonic_ns() - r.issued_ns));
    t.leases[size_t(t.n_leases++)] = lease;
    data = t.slot_data[size_t(r.slot)];
  } else if (!r.retained) {
    drop_cached(t, layer, r.expert);
    t.counters.streamed_reads.fetch_add(1, std::memory_order_relaxed);
    t.counters.streamed_bytes.fetch_add(expert_bytes(t, layer), std::memory_order_relaxed);
  }
  run.gate = data, run.up = data + e.gate_bytes, run.down = data + e.gate_bytes + e.up_bytes;
  run.type = e.gate.type;
  run.pending = 0;
  r.landed = true;
  return true;
}

// After a failure: every streamed read of the call ends before the scratch may be reused.
void settle_streamed(mt_tier& t) {
  forget_entries(t);  // an entry whose read failed (or never started) holds nothing
  for (PendingRead& r : t.reads.reading) {
    if (r.admitted || r.landed || r.bulk || r.retained) continue;
    for (int i = 0; i < 3; i++) {
      mt_io_info info{};
      if (r.ids[i] != 0) mt_io_wait(t.reads.io, r.ids[i], &info, nullptr, 0);
    }
  }
  t.reads.reading.clear();
}

// The wave's streamed reads into the read log (spans and calibration read it through poll).
void log_streamed(mt_tier& t, int32_t layer, const int32_t* runs, int32_t n) {
  std::lock_guard<std::mutex> lock(t.mu);
  for (const PendingRead& r : t.reads.reading) {
    if (r.admitted || r.bulk || r.retained || std::find(runs, runs + n, r.run) == runs + n) continue;
    if (t.read_log.size() >= kReportsMax) {
      t.reports_dropped++;
      continue;
    }
    t.read_log.push_back(mt_tier_read{layer, r.expert, expert_bytes(t, layer), r.issued_ns, r.start_ns, r.end_ns});
  }
}

// A read this call makes itself (not a wait on an earlier step's upload), and whether its expert
// was read before since the stats mark.
void count_read(mt_tier& t, size_t index, const PendingRead& r) {
  if ((r.admitted && r.existing) || r.retained) return;
  t.counters.expert_reads.fetch_add(1, std::memory_order_relaxed);
  if (t.reads.marks[index] == 0)
    t.reads.marks[index] = 1, t.counters.distinct_experts_read.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void ScratchUnmap::operator()(uint8_t* p) const {
  if (p != nullptr) munmap(p, bytes);
}

bool tier_stream_reserve(mt_tier& t, size_t bytes, char* err, size_t err_bytes) {
  const size_t experts = (bytes + aligned_expert_bytes(t) - 1) / aligned_expert_bytes(t);
  if (experts > t.reads.scratch_experts) forget_entries(t);  // the scratch moves
  return grow(t, experts, err, err_bytes);
}

// The whole-layer path: the misses wait for the layer's buffer, admitted nowhere, read by nobody else.
// A miss the read did not take (a resident that left after it was issued: mark_wanted rules that
// out) fails the call rather than compute from bytes nobody read.
static bool begin_from_bulk(mt_tier& t, int32_t layer, mt_expert_binding* runs, const int32_t* misses, int32_t n,
                            char* err, size_t err_bytes) {
  t.reads.path_calls[size_t(layer) * 2 + 1].fetch_add(1, std::memory_order_relaxed);
  for (int32_t i = 0; i < n; i++) {
    if (!tier_bulk_holds(t, layer, runs[misses[i]].expert)) {
      std::snprintf(err, err_bytes,
                    "tier: whole-layer prefill: layer %d expert %d left its slot after the layer's read was issued",
                    layer, runs[misses[i]].expert);
      t.reads.reading.clear();
      return false;
    }
    PendingRead r;
    r.run = misses[i], r.expert = runs[misses[i]].expert, r.bulk = true, r.issued_ns = mt_monotonic_ns();
    tier_prefetch_uncovered(t, layer);
    runs[r.run].pending = 1;
    t.reads.reading.push_back(r);
  }
  return true;
}

bool tier_stream_begin(mt_tier& t, int32_t layer, mt_expert_binding* runs, const int32_t* misses, int32_t n, char* err,
                       size_t err_bytes) {
  MT_ASSERT(t.reads.reading.empty(), "the previous layer's reads all landed");
  if (tier_bulk_active(t, layer)) return begin_from_bulk(t, layer, runs, misses, n, err, err_bytes);
  if (!t.reads.bulk[0].ids.empty() || !t.reads.bulk[1].ids.empty())
    tier_bulk_settle(t);  // buffer 0 is the scratch streamed misses use
  t.reads.path_calls[size_t(layer) * 2].fetch_add(1, std::memory_order_relaxed);
  size_t streamed = 0;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    for (int32_t i = 0; i < n; i++) {
      PendingRead r;
      r.run = misses[i], r.expert = runs[misses[i]].expert, r.issued_ns = mt_monotonic_ns();
      const size_t index = index_of(t, layer, r.expert);
      const int32_t entry = t.reads.scratch_layer == layer ? t.reads.scratch_entry[size_t(r.expert)] : -1;
      if (entry >= 0) {  // streamed by this layer's previous call, and still in its entry
        r.retained = true;
        r.dst = t.reads.scratch.get() + size_t(entry) * aligned_expert_bytes(t);
        t.reads.reading.push_back(r);
        continue;
      }
      const bool prefetched = t.prefetch.prefetched[index].load(std::memory_order_relaxed) != 0;
      // Device slots (remote) take no miss: the host computes it from its own read.
      r.admitted = t.remote == nullptr &&
                   tier_admit_now(t, layer, r.expert, t.routed_now.data(), &r.slot, &r.event, &r.existing);
      if (prefetched) {  // its read started a layer ahead: landed by now, or waited for (late)
        mt_event_info info{};
        r.late = r.admitted && mt_backend_event_query(t.backend, r.event, &info, nullptr, 0) == MT_BACKEND_OK &&
                 info.state == MT_EVENT_PENDING;
      } else {
        tier_prefetch_uncovered(t, layer);
      }
      tier_prefetch_routed(t, index, r.late);
      streamed += !r.admitted;
      count_read(t, index, r);
      t.reads.reading.push_back(r);
    }
  }
  if (t.reads.scratch_layer != layer || t.reads.scratch_next + streamed > t.reads.scratch_experts) {
    // Another layer's entries, or no room after this layer's: the entries start over (a retained
    // one is streamed again: the scratch may move when it grows).
    for (PendingRead& r : t.reads.reading) {
      if (!r.retained) continue;
      r.retained = false, streamed++;
      count_read(t, index_of(t, layer, r.expert), r);
    }
    forget_entries(t);
    t.reads.scratch_layer = layer;
  }
  if (!grow(t, t.reads.scratch_next + streamed, err, err_bytes)) return settle_streamed(t), false;
  for (PendingRead& r : t.reads.reading) {
    runs[r.run].pending = 1;
    if (r.retained) continue;
    if (r.admitted) {
      t.counters.admitted_reads.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const size_t entry = t.reads.scratch_next++;
    r.dst = t.reads.scratch.get() + entry * aligned_expert_bytes(t);
    t.reads.scratch_entry[size_t(r.expert)] = int32_t(entry);
    if (!start_streamed(t, layer, r, err, err_bytes)) return settle_streamed(t), false;
  }
  return true;
}

void tier_stream_forget(mt_tier& t) { forget_entries(t); }

int tier_stream_await(mt_tier& t, int32_t layer, mt_expert_binding* runs, int32_t* ready, int32_t* n_ready, char* err,
                      size_t err_bytes) {
  *n_ready = 0;
  int64_t blocked_from = 0;  // the compute had nothing left to run: it stalls until a read lands
  for (bool wait = false;; wait = true) {
    if (wait && blocked_from == 0) blocked_from = mt_monotonic_ns();
    bool waited = false;
    for (PendingRead& r : t.reads.reading) {
      if (r.landed) continue;
      const int state = check(t, layer, r, wait && !waited, err, err_bytes);  // blocks on the first one left only
      waited = true;
      if (state < 0 || (state == 1 && !bind_landed(t, layer, r, runs[r.run], err, err_bytes))) {
        settle_streamed(t);
        return -1;
      }
      if (state == 1) ready[(*n_ready)++] = r.run;
    }
    if (*n_ready > 0) break;
  }
  if (blocked_from != 0)
    t.counters.stall_ns.fetch_add(uint64_t(mt_monotonic_ns() - blocked_from), std::memory_order_relaxed);
  log_streamed(t, layer, ready, *n_ready);
  bool all = true;
  for (const PendingRead& r : t.reads.reading) all = all && r.landed;
  if (all) t.reads.reading.clear();
  return 0;
}

// The tier's engine: the backend's over the same file where its interface offers one (disk), else
// one of its own (O_DIRECT, or buffered without readahead where the filesystem refuses it).
static bool open_engine(mt_tier& t, int fd, char* err, size_t err_bytes) {
  mt_io* (*shared)(mt_backend*) = mt_backend_interface(t.backend)->read_engine;
  mt_io* io = shared != nullptr ? shared(t.backend) : nullptr;
  if (io != nullptr && mt_io_same_file(io, fd)) {
    t.reads.io = io, t.reads.owns_io = false;
    return true;
  }
  mt_io_config config;
  mt_io_config_default(&config);
  int status = 0;
  char why[160] = "";
  t.reads.io = mt_io_create(fd, &config, &status, why, sizeof why);
  if (t.reads.io == nullptr && status == MT_IO_UNSUPPORTED) {  // a filesystem without O_DIRECT (tmpfs)
    config.direct = 0;
    t.reads.io = mt_io_create(fd, &config, &status, why, sizeof why);
    mt_io_advise(t.reads.io, MT_IO_ADVICE_RANDOM, 0, 0);  // a null engine is ignored
  }
  if (t.reads.io == nullptr) {
    std::snprintf(err, err_bytes, "createTier: streamFile: the read engine: %s", why);
    return false;
  }
  t.reads.owns_io = true;
  return true;
}

bool tier_stream_open(mt_tier& t, int fd, const uint8_t* base, uint64_t fail_after_bytes, char* err, size_t err_bytes) {
  char path[64], target[PATH_MAX] = "";
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, target, sizeof target - 1);
  t.reads.path = n > 0 ? std::string(target, size_t(n)) : std::string("the model file");
  if (!open_engine(t, fd, err, err_bytes)) return false;
  mt_io_stats io{};
  mt_io_stats_get(t.reads.io, &io);
  t.reads.direct = io.direct != 0;
  t.reads.lane_bytes_base = io.lanes[kReadLane].bytes_read;        // a shared engine may have served an earlier tier
  mt_io_lane_fail_after(t.reads.io, kReadLane, fail_after_bytes);  // 0: none (not an earlier tier's either)
  t.reads.base = base;
  t.reads.reading.reserve(size_t(t.n_expert));
  t.reads.miss_runs.assign(size_t(t.n_expert), 0);
  t.reads.marks.assign(size_t(t.n_layer) * size_t(t.n_expert), 0);
  t.reads.scratch_entry.assign(size_t(t.n_expert), -1);
  return grow(t, size_t(mt_model_hparams(t.model)->n_expert_used), err, err_bytes);
}

// A shared engine goes on with the backend: the tier's lane ends first (no read of it may write
// the scratch or the layer buffers once they are unmapped).
void tier_stream_close(mt_tier& t) {
  if (t.reads.io != nullptr && t.reads.owns_io) mt_io_destroy(t.reads.io);
  if (t.reads.io != nullptr && !t.reads.owns_io) mt_io_lane_drain(t.reads.io, kReadLane);
  t.reads.io = nullptr, t.reads.owns_io = false;
}

}  // namespace mt
