// The expert tier's internals (its C ABI and states are include/mt_tier.h): which routed experts
// of a layer are computed from backend slots (residents), which from host int8 copies, which
// from the container.
//
//   create    reserve sum(slots_per_layer) slots; layer l uses the slot ids in layer_slots[l]
//   resize    between evals (tier_resize.cc): a layer's slot count grows (spare slots first, then
//             a new backend reserve of the same slot size) or shrinks (free slots first, then the
//             caller's victims, evicted; the slots become spare)
//   source    the forward pass's mt_expert_source, per layer l (tier_source.cc):
//     begin   computing = l; promote finished uploads of l (only if some are in flight, and
//             only if the lock is free: a busy lock leaves them for the next step)
//     bind    each routed run reads residency[l][x] (atomic):
//               slot >= 0   lease it, compute from mt_backend_slot_data (container type)
//               else        host copy (Q8_0) when its offset is >= 0, else the container
//             [hook: the layer's rows per expert, when an eval set one]
//     end     release the layer's leases; computing = -1; if swaps of l are queued (or uploads
//             in flight may need a retry): post l to the issuer (tier_issuer.cc)
//   issuer    its own thread: for each posted layer, under mu, settle its uploads (a failed
//             in-place upload is retried as free-then-upload) and issue its queue, unless compute
//             is on that layer again (then the next boundary posts it again)
//
// A swap requested with issue_now is issued by the caller at once when its layer is not being
// computed (`computing`, a Dekker pair with residency: the caller hides the victim first, then
// reads computing; the eval thread publishes computing, then reads residency), else it waits in
// the queue for the boundary. The issuer uses the same check.
//
// The eval thread reads residency without the lock; every slot it reads is leased, and an
// upload into a slot is only issued while compute is not on the slot's layer.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>
#include <condition_variable>
#include <thread>
#include "mt_assert.h"
#include <string>
#include "mt_backend.h"
#include "../cuda/mt_backend_cuda.h"
#include "mt_io.h"
#include "mt_kernels.h"
#include "mt_tier.h"

namespace mt {

constexpr size_t kReportsMax = MT_TIER_REPORTS_MAX;

enum ExpertState : uint8_t {
  kExpertNone = MT_EXPERT_NONE,
  kExpertIncoming = MT_EXPERT_INCOMING,
  kExpertResident = MT_EXPERT_RESIDENT,
  kExpertOutgoing = MT_EXPERT_OUTGOING
};

struct Swap {
  int32_t victim = -1, newcomer = -1;
  double task_id = 0;
  bool held = false;  // its boundary (or issue_now) came and the gate's budget had no room: due as soon as room frees
};

// One upload the tier issued and has not reported yet.
// The one gate (tier_gate.cc): every upload into a slot is counted under one class, in priority
// order: a miss its layer waits on, a prefetch for the next layer, a swap (the placement's policy or
// replan), a warm start or fill between requests.
enum GateClass : int32_t {
  kGateMiss = MT_TIER_GATE_MISS, kGatePrefetch = MT_TIER_GATE_PREFETCH, kGateSwap = MT_TIER_GATE_SWAP, kGateWarm = MT_TIER_GATE_WARM,
  kGateClasses = MT_TIER_GATE_CLASSES
};
struct GateLedger {
  uint64_t issued = 0, completed = 0, failed = 0, refused = 0, cancelled = 0;
};

struct InFlight {
  int32_t layer = 0, expert = 0, victim = -1, slot = -1;
  double task_id = 0;
  mt_event_id event = 0;
  bool in_place = false, fell_back = false;
  bool admitted = false;   // issued at bind for a run that waits on it (tier_admit_now)
  bool prefetch = false;   // issued by a prediction a layer ahead (tier_prefetch.cc)
  bool settled = false;    // the event finished (done, or failed for good)
  bool ok = false;
  bool reported = false;   // a swap's outcome went out through poll
  bool retired = false;    // a prefetch's bytes left the in-flight count (once: tier_prefetch_retire)
  int32_t gate_class = 0;  // GateClass: the class the gate counted it under
  bool gate_retired = false;  // its bytes left the gate's in-flight count (once: gate_retire)
  int64_t issued_ns = 0, start_ns = 0, end_ns = 0;
};

// A predicted expert the window admitted, waiting for room under the in-flight cap
// (tier_prefetch.cc): issued, cancelled (a newer eval, or its layer began) or dropped.
struct PrefetchTask {
  int32_t layer = 0, expert = 0;
  uint64_t bytes = 0, generation = 0;
};

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
  bool late = false;  // a prefetch's read still in flight at bind: its wait is counted
  bool bulk = false;      // computed from the layer's whole-layer buffer (tier_bulk.cc)
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
  int32_t layer = -1;            // the layer it holds or is receiving; -1: none
  std::vector<mt_io_id> ids;     // its piece reads, until settled
  bool landed = false;
  const uint8_t* tensor[3] = {};  // where the gate, up and down tensors' first bytes land
  std::vector<uint8_t> has;       // [nExpert]: 1 where the read takes the expert
};

// One warmstart upload into a free slot (tier_warm.cc).
struct WarmUpload {
  int32_t layer = 0, expert = 0, slot = -1;
  mt_event_id event = 0;
};

using UploadReport = mt_tier_upload;
using Eviction = mt_tier_eviction;

// The issuer thread's side of the boundary hand-off (tier_issuer.cc).
struct Issuer {
  std::unique_ptr<std::atomic<uint8_t>[]> posted;  // [nLayer]: 1 = the layer passed a boundary with work
  std::atomic<uint64_t> seq{0};                    // moves once per post
  std::atomic<uint64_t> kicks{0};                  // moves once per request (work may come)
  std::atomic<int32_t> sleepers{0};                // seq_cst with the queues and kicks (Dekker)
  std::atomic<bool> stop{false};
  std::mutex mu;  // only for the sleep
  std::condition_variable cv;
  std::thread thread;
};

// Residents computed on the device (tier_remote.cc): one layer's remote runs, run by one thread.
struct RemoteJob {
  int32_t slot = -1, rows = 0;
  const float* x = nullptr;  // rows x nEmbd, gathered from the forward pass's h
  float* y = nullptr;        // rows x nEmbd, the forward pass's slot_down rows
};

struct RemoteWorker {
  std::thread thread;
  std::mutex mu;
  std::condition_variable posted, finished;
  bool stop = false;
  bool busy = false;  // a layer's jobs are posted and not all run
  int32_t layer = -1;
  std::vector<RemoteJob> jobs;  // capacity nExpert
  int32_t n_jobs = 0;
  std::vector<float> x;  // the jobs' gathered rows (grows to the largest chunk seen, then stays)
  int status = 0;        // 0, or -1 with error: the first failed call of the layer
  char error[448] = "";
  std::vector<mt_backend_cuda_run> calls;  // the worker's: one run_experts call's runs (RUNS_MAX)
  int64_t span_end_ns = 0, span_busy_ns = 0;  // the worker's (its calls' last end, their summed time), read after busy clears
};

}  // namespace mt

struct mt_tier {
  const mt_model* model = nullptr;
  mt_backend* backend = nullptr;
  mt_expert_source source{};  // the forward pass's view of this tier (tier_source.cc)
  // The fake backend: stamps come from its virtual compute clock, and swaps are issued inline at
  // the boundary (its upload times are decided at issue from that clock: no thread may race it).
  bool virtual_clock = false;
  int32_t n_layer = 0, n_expert = 0;
  std::vector<mt_layer_experts> experts;                  // [nLayer]: the container's expert tensors
  uint64_t host_copy_bytes = 0;                           // one expert as Q8_0 rows; 0: no host copy possible
  uint64_t slot_bytes = 0;                                // every slot's size: the largest expert
  // Changed only by tier_resize, under mu, while no eval runs (the eval reads them without mu).
  std::vector<std::vector<int32_t>> layer_slots;          // [nLayer]: backend slot ids the layer uses (its budget: size())
  std::vector<int32_t> slot_layer;                        // [backend slot id]: the layer using it, -1: spare / not the tier's
  std::vector<int32_t> spare_slots;                       // reserved, empty, no layer's (a shrink left them)
  std::vector<uint8_t*> slot_data;                        // [backend slot id]: where its bytes live
  const uint8_t* host = nullptr;
  size_t host_bytes = 0;
  const int32_t* host_offsets = nullptr;
  // Misses read from the file (tier_stream.cc): the read engine over the model file, its path (for
  // messages), and scratch for one layer call's streamed misses.
  int stream_fd = -1;          // the tier's own descriptor of the file (page-cache advice)
  mt_io* stream_io = nullptr;
  bool stream_direct = false;  // O_DIRECT; else buffered reads whose pages are dropped after
  std::string stream_path;
  const uint8_t* stream_base = nullptr;
  mt::ScratchMap scratch;
  size_t scratch_experts = 0;  // experts the scratch holds
  // The scratch entries' experts, kept for the next call of the same layer (a prompt's chunks run
  // layer by layer: its second chunk finds the first chunk's streamed misses still there).
  int32_t scratch_layer = -1;          // the layer whose experts the entries hold, -1: none
  std::vector<int32_t> scratch_entry;  // [nExpert]: the entry holding the expert, -1: none
  size_t scratch_next = 0;             // the next free entry
  std::vector<mt::PendingRead> reading;  // eval thread: the layer call's reads (capacity nExpert)
  std::vector<uint8_t> routed_now;       // eval thread: [nExpert] 1 while bind runs for a routed expert
  std::vector<uint8_t> no_victims;       // [nExpert] all 1: an admission that may only fill or wait
  std::vector<int32_t> miss_runs;        // eval thread: [nExpert] bind's misses to read
  std::atomic<uint64_t> streamed_reads{0}, streamed_bytes{0}, stream_failures{0};
  std::atomic<uint64_t> admitted_reads{0};  // misses read into a slot before they ran (uploads, counted there too)
  std::atomic<uint64_t> stall_ns{0};        // time the forward pass waited for reads with nothing else to run
  // Reads of routed misses a call made itself (admitted, not waiting on an earlier upload, or
  // streamed), and the distinct experts they read, from the stats mark (read_marks: eval thread
  // writes, reset between evals): a prefill's reads per distinct expert, 1.0 at best.
  std::atomic<uint64_t> expert_reads{0}, distinct_experts_read{0};
  std::vector<uint8_t> read_marks;  // [nLayer * nExpert]
  // A prefill's whole-layer path (tier_bulk.cc): set between evals; buffer 0 is `scratch`.
  std::atomic<int32_t> prefill_path{MT_TIER_PREFILL_ON_DEMAND};
  mt::BulkBuffer bulk[2];
  mt::ScratchMap bulk_second;
  char bulk_error[320] = "";  // a failure at layer begin, reported by that layer's bind
  bool bulk_failed = false;
  std::atomic<uint64_t> bulk_layers{0};  // layers read whole since creation
  // [nLayer * 2] from the stats mark: layer calls whose misses were read on demand | computed from a whole-layer read
  std::unique_ptr<std::atomic<uint64_t>[]> path_calls;
  // Prefetch (tier_prefetch.cc): the mode, and by expert [nLayer * nExpert] whether a prediction
  // read it (or would have, observing) and no routing has used it since.
  std::atomic<int32_t> prefetch_mode{MT_TIER_PREFETCH_OFF};
  std::unique_ptr<std::atomic<uint8_t>[]> prefetched, observed;
  // The routes' outcomes (reset at the stats mark), in all and by layer [nLayer * kPrefetchOutcomes].
  std::atomic<uint64_t> prefetch_covered{0}, prefetch_late{0}, prefetch_late_ns{0}, prefetch_wasted{0}, prefetch_uncovered{0},
      prefetch_would_issue{0}, prefetch_would_cover{0};
  std::unique_ptr<std::atomic<uint64_t>[]> prefetch_by_layer;
  // The tasks' ledger (never reset): each queued task ends once, as issued (then completed or
  // failed), cancelled or dropped; its bytes enter on queueing and retire at that end.
  std::atomic<uint64_t> prefetch_queued{0}, prefetch_refused{0}, prefetch_dropped{0}, prefetch_cancelled{0}, prefetch_issued{0},
      prefetch_completed{0}, prefetch_failed{0}, prefetch_admitted_bytes{0}, prefetch_retired_bytes{0};
  std::atomic<uint64_t> prefetch_generation{0};  // evals begun with a prediction (eval thread writes)
  std::atomic<int32_t> prefetch_queue_n{0};      // a hint of prefetch_queue.size(), read without mu

  std::unique_ptr<std::atomic<int32_t>[]> residency;  // [nLayer * nExpert]: slot, or -1
  // The eviction policy (include/mt_policy.h, decayed LFU), the one that decides each eviction at the
  // moment a slot is needed: its rows [nLayer * nExpert], added to at each bind (the routed rows) on
  // the eval thread, read there (under mu) where a slot is needed, and by the caller between evals;
  // its clock counts decode tokens (mt_tier_policy_tick, between evals). policy_mode: mt_tier_policy_mode.
  std::vector<double> dlfu_count, dlfu_stamp;
  double dlfu_now = 0, dlfu_half_life = 16;
  std::atomic<int32_t> policy_mode{MT_TIER_POLICY_OFF};
  std::vector<uint8_t> eligible;  // [nExpert]: scratch of the victim search (under mu)
  std::vector<int32_t> kept_misses;  // eval thread: [nExpert] bind's misses that mode KEEP admits
  std::atomic<uint64_t> hits{0}, misses{0}, lazy_misses{0};
  std::unique_ptr<std::atomic<int32_t>[]> pending_n;   // [nLayer]: swaps queued (a hint read without mu)
  std::unique_ptr<std::atomic<int32_t>[]> flight_n;    // [nLayer]: uploads not yet settled and promoted
  std::atomic<int32_t> computing{-1};                  // the layer whose slots compute may lease, or -1

  // Set by the addon between evals (read by the eval thread); hook_counts: its scratch [nExpert].
  mt_tier_layer_hook hook_fn = nullptr;
  void* hook_user = nullptr;
  std::vector<int32_t> hook_counts;
  std::atomic<uint64_t> hook_calls{0}, hook_ns{0}, hook_dropped{0};
  std::atomic<uint64_t> swaps_started_now{0};  // issue_now swaps the caller issued itself
  std::atomic<uint64_t> swaps_by_issuer{0}, boundaries_posted{0};
  mt::Issuer issuer;  // absent (no thread) with a virtual clock

  std::mutex mu;  // everything below
  std::vector<int32_t> slot_expert;   // [backend slot id]: resident or incoming expert, -1: free
  std::vector<uint8_t> slot_dirty;    // [backend slot id]: not empty on the backend (reuse: overwrite or free)
  std::vector<uint8_t> expert_state;  // [nLayer * nExpert]: mt::ExpertState
  std::vector<std::vector<mt::Swap>> pending;  // [nLayer], each at most the layer's slots (capacity nExpert)
  std::vector<int32_t> victim_slots;           // [nExpert]: scratch of tier_issue_if_idle
  std::vector<mt::InFlight> flights;
  std::vector<mt::UploadReport> reports;  // at most kReportsMax until polled; beyond: counted, dropped
  std::vector<mt::Eviction> evicted;       // at most nLayer * nExpert (each eviction once)
  std::vector<mt_tier_read> read_log;      // streamed reads landed, at most kReportsMax until polled
  std::vector<int32_t> prefetch_budget;    // [nLayer]: predicted experts a layer may start reading (tier_prefetch.cc)
  std::vector<mt::PrefetchTask> prefetch_queue;  // FIFO, at most MT_TIER_PREFETCH_QUEUE_MAX (reserved)
  uint64_t prefetch_inflight_bytes = 0;     // prefetches issued and not settled (their share of the gate's)
  // The one gate (tier_gate.cc): its budget (mt_tier_set_gate), what is in flight under it, and the
  // ledger by class; swaps_waiting: queued swaps the budget holds back (all layers).
  uint64_t gate_bytes_max = MT_TIER_GATE_BYTES_DEFAULT;
  int32_t gate_transfers_max = MT_TIER_GATE_TRANSFERS_DEFAULT;
  int32_t gate_queue_max = MT_TIER_GATE_QUEUE_DEFAULT;
  uint64_t gate_inflight_bytes = 0;
  int32_t gate_inflight_transfers = 0;
  int32_t gate_swaps_queued = 0;
  mt::GateLedger gate[mt::kGateClasses];
  size_t prefetch_queue_max = MT_TIER_PREFETCH_QUEUE_MAX;  // (prefetch.queueMax)
  uint64_t reports_dropped = 0;

  // Eval thread only: the leases of the layer being computed (capacity nExpert, no allocation).
  std::vector<mt_lease_id> leases;
  int32_t n_leases = 0;
  // A backend whose slots the host cannot read (cuda, cuda-sim): its residents are computed on
  // the device by this worker (tier_remote.cc); null for host-visible slots.
  std::unique_ptr<mt::RemoteWorker> remote;
  std::vector<int32_t> remote_slot;  // eval thread: [nExpert] the slot of bind's run i, when remote
};

namespace mt {

inline size_t index_of(const mt_tier& t, int32_t layer, int32_t expert) { return size_t(layer) * size_t(t.n_expert) + size_t(expert); }
inline uint64_t expert_bytes(const mt_tier& t, int32_t layer) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  return e.gate_bytes + e.up_bytes + e.down_bytes;
}

// tier_remote.cc: residents on a device the host cannot read. start: the worker and the source's
// remote verbs (false: a combination it cannot serve); join: wait for the posted layer's runs;
// stop: end the thread (destroy).
bool tier_remote_start(mt_tier& t, char* err, size_t err_bytes);
void tier_remote_join(mt_tier& t);
void tier_remote_stop(mt_tier& t);

// tier.cc: create (reserves slots) / destroy (waits for uploads, frees slots).
// Reserves n more backend slots of slot_bytes and grows the per-slot arrays: false with a message.
bool tier_reserve_slots(mt_tier& t, int32_t n, std::vector<int32_t>* ids, char* err, size_t err_bytes);
// The bytes of one expert of layer l: gate | up | down in the container, as upload pieces.
void tier_pieces(const mt_tier& t, int32_t layer, int32_t expert, mt_upload_piece* pieces);

// tier_swap.cc (all under mu)
// Now on the tier's clock: monotonic ns, or the fake backend's virtual compute clock.
int64_t tier_now(mt_tier& t, int32_t label);
// Settles finished events of layer (-1: all); at_boundary (after the layer computed): retries
// failed in-place uploads as free-then-upload; promote (compute is not on the layer): done -> resident.
void tier_settle_layer(mt_tier& t, int32_t layer, bool at_boundary, bool promote);
// Issues the layer's queued swaps unless compute is on the layer, in order, as many as the gate's
// budget admits (the rest wait for the layer's next boundary): how many it issued, or -1 when compute
// is on the layer (nothing issued).
// held_only: only the swaps the budget held back before (Swap.held), none queued since.
int32_t tier_issue_if_idle(mt_tier& t, int32_t layer, bool held_only = false);
// tier_gate.cc (under mu, between evals or from poll): the held-back swaps of every layer not being
// computed, layer 0 first, as far as the budget has room.
void gate_issue_held(mt_tier& t);
void tier_push_eviction(mt_tier& t, int32_t layer, int32_t expert);
// tier_gate.cc (under mu). fits: one more upload of `bytes` stays inside the budget (an upload
// larger than the whole byte budget fits when nothing else is in flight: it cannot wait forever).
// issued: f (just pushed onto flights) enters the count under class c. retire: f settled; its bytes
// leave the count, once.
bool gate_fits(const mt_tier& t, uint64_t bytes);
void gate_issued(mt_tier& t, InFlight& f, GateClass c);
void gate_retire(mt_tier& t, InFlight& f);
// Policy mode KEEP, a tier without stream_fd (eval thread, bind): each routed miss computed from its
// host copy or the container is kept: a free slot is filled with it now, else a swap into the
// policy's lowest-scored resident not routed now is queued for the layer's boundary.
void tier_keep_misses(mt_tier& t, int32_t layer, const int32_t* experts, int32_t n);
// tier_policy.cc. touch: a bind's routed rows into the counts (eval thread). victim (under mu): the
// layer's lowest-scored expert that is plainly RESIDENT in a slot and not routed_now[e]; -1: none.
void tier_policy_touch(mt_tier& t, int32_t layer, const mt_expert_binding* runs, int32_t n_runs);
int32_t tier_policy_victim(mt_tier& t, int32_t layer, const uint8_t* routed_now);
// Admit-before-run (compute is on layer; tier_stream.cc): the routed miss `expert` gets a slot
// before the layer runs it: an upload of it already in flight (not yet promoted), else its
// queued swap issued now (unless the victim is routed in this call: routed_now[victim]), else a
// free slot of the layer filled with it, else the policy's lowest-scored resident not routed now
// evicted for it (policy mode EVICT or KEEP). true: it lands in *slot with *event; false: none applies.
// *existing: it is an upload an earlier step issued (the first rule), not one issued here.
bool tier_admit_now(mt_tier& t, int32_t layer, int32_t expert, const uint8_t* routed_now, int32_t* slot, mt_event_id* event, bool* existing = nullptr,
                    GateClass cls = kGateMiss);

// tier_issuer.cc: the boundary hand-off. start: false (err) when no thread could be made.
bool issuer_start(mt_tier& t, char* err, size_t err_bytes);
void issuer_stop(mt_tier& t);
// Eval thread, after layer computed: a queue push (no system call, no lock).
void issuer_post(mt_tier& t, int32_t layer);
// Between evals (any thread): handles the posts the issuer has not reached yet.
void issuer_flush(mt_tier& t);
// A caller queued a swap: an idle issuer starts polling the posts.
void issuer_kick(mt_tier& t);
// An eval is about to start: an issuer that stopped polling a quiet queue starts again.
void issuer_kick_if_pending(mt_tier& t);

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
bool tier_stream_begin(mt_tier& t, int32_t layer, mt_expert_binding* runs, const int32_t* misses, int32_t n, char* err, size_t err_bytes);
// The forward pass's await: blocks until some pending reads land, binds them (leases for slots).
int tier_stream_await(mt_tier& t, int32_t layer, mt_expert_binding* runs, int32_t* ready, int32_t* n_ready, char* err, size_t err_bytes);
bool tier_stream_open(mt_tier& t, int fd, const uint8_t* base, uint64_t fail_after_bytes, char* err, size_t err_bytes);
void tier_stream_close(mt_tier& t);
// Eval thread: the layer's leases released and compute off it (a failed bind or read).
void tier_abandon_layer(mt_tier& t);

// tier_prefetch.cc. predicted: the forward pass's guess for `layer` (eval thread, compute one layer
// before). begin: a layer starts (eval thread; layer 0: a new generation cancels the last one's
// queue; then the queue drains as the in-flight cap allows). routed: a routed expert's prefetch
// outcome (read_in_flight: not landed at its bind; wait_ns: what the run waited for it).
// evicted: an expert left its slot (under mu). retire: a prefetch's upload settled (under mu).
enum PrefetchOutcome { kPrefetchCovered = 0, kPrefetchLate = 1, kPrefetchWasted = 2, kPrefetchUncovered = 3, kPrefetchOutcomes = 4 };
void tier_prefetch_predicted(mt_tier& t, int32_t layer, const int32_t* ids, int32_t n);
void tier_prefetch_begin(mt_tier& t, int32_t layer);
void tier_prefetch_routed(mt_tier& t, size_t index, bool read_in_flight);
void tier_prefetch_uncovered(mt_tier& t, int32_t layer);
void tier_prefetch_late_wait(mt_tier& t, int32_t layer, uint64_t wait_ns);
void tier_prefetch_evicted(mt_tier& t, size_t index);
void tier_prefetch_retire(mt_tier& t, InFlight& f);

// tier_source.cc: fills t.source.
void tier_source_init(mt_tier& t);

}  // namespace mt
