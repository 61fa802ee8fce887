// The tier's reads of the model file (a tier created with stream_fd): the read engine, the
// streamed misses' scratch (tier_stream.cc) and the whole-layer buffers of a prefill
// (tier_bulk.cc). Empty (io null) on a tier whose misses come from host copies or the mapping.
//
//   owner    mt_tier::reads (tier.h)
//   guards   no lock: set up at create (tier_stream_open), torn down at free; between the two
//            every field is the eval thread's, except
//              prefill_path   atomic: set between evals (mt_tier_set_prefill_path), read by the eval
//              path_calls     atomics: the eval adds, the caller reads and zeroes between evals
//              marks          zeroed by the caller at the stats mark, between evals
//              io             its own lock (include/mt_io.h); its stats are read by mt_tier_stats_get
//
// The engine: on a backend whose interface offers its read engine over the same file (disk), the
// tier reads on that engine's MT_IO_LANE_URGENT (the backend's uploads are its NORMAL lane: the
// layer's misses start before queued swaps and prefetches, and one engine's places, owner thread
// and bounce buffers serve both); elsewhere (cpu, cuda kinds) an engine of its own, read on the
// same lane. Either way the tier's counts, fault and page-cache advice are its lane's and its
// engine's (mt_io_advise), never a descriptor of its own.
//
// Misses read before they run:   bind -> tier_stream_begin (admit into a slot, else read into
// scratch) -> tier_stream_await (bind as they land). A prefill's whole layer: tier_bulk_begin at
// a layer's start reads the layer and the next one into bulk[layer % 2].
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>
#include "mt_backend.h"
#include "mt_forward.h"
#include "mt_io.h"
#include "mt_tier.h"

namespace mt {

// A routed miss of the layer being computed whose weights are being read (tier_stream.cc; the
// eval thread's only): admitted into a slot (a backend upload: its event), or streamed into a
// scratch entry (three reads of the read engine: gate, up, down).
struct PendingRead {
  int32_t run = -1, expert = -1;
  bool admitted = false, landed = false;
  int32_t slot = -1;
  mt_event_id event = 0;
  mt_io_id ids[3] = {};
  uint8_t* dst = nullptr;
  int64_t issued_ns = 0, start_ns = 0, end_ns = 0;  // streamed: the first read's start, the last one's end
  bool late = false;                                // a prefetch's read still in flight at bind: its wait is counted
  bool bulk = false;                                // computed from the layer's whole-layer buffer (tier_bulk.cc)
  bool retained = false;  // streamed by an earlier call of the same layer: still in its scratch entry
  bool existing = false;  // it waits on an upload an earlier step issued (a swap, a prefetch): a
                          // failure of that one is retried once as this call's own read
};

// The streamed misses' scratch: an anonymous mapping of `bytes` (tier_stream.cc).
struct ScratchUnmap {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};
using ScratchMap = std::unique_ptr<uint8_t, ScratchUnmap>;

// One layer's experts read whole for a prefill's whole-layer path (tier_bulk.cc).
struct BulkBuffer {
  int32_t layer = -1;         // the layer it holds or is receiving; -1: none
  std::vector<mt_io_id> ids;  // its piece reads, until settled
  bool landed = false;
  const uint8_t* tensor[3] = {};  // where the gate, up and down tensors' first bytes land
  std::vector<uint8_t> has;       // [nExpert]: 1 where the read takes the expert
};

// The tier's lane on its read engine (shared or its own).
constexpr int32_t kReadLane = MT_IO_LANE_URGENT;

struct TierReads {
  // The read engine over the model file (the backend's, shared; or the tier's own), its path (for
  // messages) and where it is mapped (the experts' views point into it).
  mt_io* io = nullptr;
  bool owns_io = false;          // false: the backend's engine (read_engine), which the backend destroys
  bool direct = false;           // O_DIRECT; else buffered reads whose pages are dropped after
  uint64_t lane_bytes_base = 0;  // the lane's bytes read when the tier took it (stream_engine_bytes counts from there)
  std::string path;
  const uint8_t* base = nullptr;
  // Scratch for one layer call's streamed misses, `scratch_experts` entries of one expert each.
  ScratchMap scratch;
  size_t scratch_experts = 0;
  // The scratch entries' experts, kept for the next call of the same layer (a prompt's chunks run
  // layer by layer: its second chunk finds the first chunk's streamed misses still there).
  int32_t scratch_layer = -1;          // the layer whose experts the entries hold, -1: none
  std::vector<int32_t> scratch_entry;  // [nExpert]: the entry holding the expert, -1: none
  size_t scratch_next = 0;             // the next free entry
  std::vector<PendingRead> reading;    // the layer call's reads (capacity nExpert)
  std::vector<int32_t> miss_runs;      // [nExpert] bind's misses to read
  std::vector<uint8_t> marks;          // [nLayer * nExpert]: read since the stats mark (distinct_experts_read)
  // A prefill's whole-layer path (tier_bulk.cc): set between evals; buffer 0 is `scratch`.
  std::atomic<int32_t> prefill_path{MT_TIER_PREFILL_ON_DEMAND};
  BulkBuffer bulk[2];
  ScratchMap bulk_second;
  char bulk_error[320] = "";  // a failure at layer begin, reported by that layer's bind
  bool bulk_failed = false;
  // [nLayer * 2] from the stats mark: layer calls whose misses were read on demand | computed from a whole-layer read
  std::unique_ptr<std::atomic<uint64_t>[]> path_calls;
};

}  // namespace mt

struct mt_tier;

namespace mt {

// tier_bulk.cc (eval thread). begin: at a layer's start on the whole-layer path, its experts and
// the next layer's are being read (false: err). active: the layer's misses come from its buffer.
// check: 1 landed, 0 pending, -1 failed (err). bind: a miss's weights in the buffer. settle: every
// whole-layer read ended (before the buffers are reused, or the eval gives up).
bool tier_bulk_begin(mt_tier& t, int32_t layer, char* err, size_t err_bytes);
bool tier_bulk_active(const mt_tier& t, int32_t layer);
int tier_bulk_check(mt_tier& t, int32_t layer, bool wait, char* err, size_t err_bytes);
void tier_bulk_bind(const mt_tier& t, int32_t layer, mt_expert_binding& run);
bool tier_bulk_holds(const mt_tier& t, int32_t layer, int32_t expert);
void tier_bulk_settle(mt_tier& t);
// tier_stream.cc: the scratch holds at least `bytes` (buffer 0 of the whole-layer path); forget:
// its entries hold no expert any more (the whole-layer path wrote over them).
bool tier_stream_reserve(mt_tier& t, size_t bytes, char* err, size_t err_bytes);
void tier_stream_forget(mt_tier& t);

// tier_stream.cc (eval thread): the misses runs[misses[0..n)] of layer start being read (admitted
// into slots, else streamed into scratch) and are marked pending; false with a message.
bool tier_stream_begin(mt_tier& t, int32_t layer, mt_expert_binding* runs, const int32_t* misses, int32_t n, char* err,
                       size_t err_bytes);
// The forward pass's await: blocks until some pending reads land, binds them (leases for slots).
int tier_stream_await(mt_tier& t, int32_t layer, mt_expert_binding* runs, int32_t* ready, int32_t* n_ready, char* err,
                      size_t err_bytes);
bool tier_stream_open(mt_tier& t, int fd, const uint8_t* base, uint64_t fail_after_bytes, char* err, size_t err_bytes);
void tier_stream_close(mt_tier& t);

}  // namespace mt
