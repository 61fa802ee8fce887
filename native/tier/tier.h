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
#include "mt_assert.h"
#include "mt_backend.h"
#include "mt_forward.h"
#include "mt_kernels.h"
#include "mt_tier.h"
// The parts mt_tier holds by value (their layout); a .cc that uses a part names its header too.
#include "tier_counters.h"
#include "tier_hook.h"
#include "tier_issuer.h"
#include "tier_policy.h"
#include "tier_prefetch.h"
#include "tier_reads.h"

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
  kGateMiss = MT_TIER_GATE_MISS,
  kGatePrefetch = MT_TIER_GATE_PREFETCH,
  kGateSwap = MT_TIER_GATE_SWAP,
  kGateWarm = MT_TIER_GATE_WARM,
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
  bool admitted = false;  // issued at bind for a run that waits on it (tier_admit_now)
  bool prefetch = false;  // issued by a prediction a layer ahead (tier_prefetch.cc)
  bool settled = false;   // the event finished (done, or failed for good)
  bool ok = false;
  bool reported = false;      // a swap's outcome went out through poll
  bool retired = false;       // a prefetch's bytes left the in-flight count (once: tier_prefetch_retire)
  int32_t gate_class = 0;     // GateClass: the class the gate counted it under
  bool gate_retired = false;  // its bytes left the gate's in-flight count (once: gate_retire)
  int64_t issued_ns = 0, start_ns = 0, end_ns = 0;
};

// One warmstart upload into a free slot (tier_warm.cc).
struct WarmUpload {
  int32_t layer = 0, expert = 0, slot = -1;
  mt_event_id event = 0;
};

using UploadReport = mt_tier_upload;
using Eviction = mt_tier_eviction;

// The one gate (tier_gate.cc): its budget (mt_tier_set_gate), what is in flight under it, and the
// ledger by class; swaps_queued: queued swaps the budget holds back (all layers). Under mu.
struct Gate {
  uint64_t bytes_max = MT_TIER_GATE_BYTES_DEFAULT;
  int32_t transfers_max = MT_TIER_GATE_TRANSFERS_DEFAULT;
  int32_t queue_max = MT_TIER_GATE_QUEUE_DEFAULT;
  uint64_t inflight_bytes = 0;
  int32_t inflight_transfers = 0;
  int32_t swaps_queued = 0;
  GateLedger ledger[kGateClasses];
};

struct RemoteWorker;  // tier_remote.h: only the files that run residents remote see inside it

}  // namespace mt

// The core: the model and backend, the slots, residency and the expert states, the swap queue,
// the uploads in flight, the gate and the layer's leases. The parts beside it (each header says
// what it owns and what guards each field): reads, prefetch, policy, hook, counters, issuer,
// remote.
struct mt_tier {
  const mt_model* model = nullptr;
  mt_backend* backend = nullptr;
  mt_expert_source source{};  // the forward pass's view of this tier (tier_source.cc)
  // The fake backend: stamps come from its virtual compute clock, and swaps are issued inline at
  // the boundary (its upload times are decided at issue from that clock: no thread may race it).
  bool virtual_clock = false;
  int32_t n_layer = 0, n_expert = 0;
  std::vector<mt_layer_experts> experts;  // [nLayer]: the container's expert tensors
  uint64_t host_copy_bytes = 0;           // one expert as Q8_0 rows; 0: no host copy possible
  uint64_t slot_bytes = 0;                // every slot's size: the largest expert
  // Changed only by tier_resize, under mu, while no eval runs (the eval reads them without mu).
  std::vector<std::vector<int32_t>> layer_slots;  // [nLayer]: backend slot ids the layer uses (its budget: size())
  std::vector<int32_t> slot_layer;                // [backend slot id]: the layer using it, -1: spare / not the tier's
  std::vector<int32_t> spare_slots;               // reserved, empty, no layer's (a shrink left them)
  std::vector<uint8_t*> slot_data;                // [backend slot id]: where its bytes live
  const uint8_t* host = nullptr;
  size_t host_bytes = 0;
  const int32_t* host_offsets = nullptr;
  std::vector<uint8_t> routed_now;  // eval thread: [nExpert] 1 while bind runs for a routed expert
  std::vector<uint8_t> no_victims;  // [nExpert] all 1: an admission that may only fill or wait

  std::unique_ptr<std::atomic<int32_t>[]> residency;  // [nLayer * nExpert]: slot, or -1
  std::unique_ptr<std::atomic<int32_t>[]> pending_n;  // [nLayer]: swaps queued (a hint read without mu)
  std::unique_ptr<std::atomic<int32_t>[]> flight_n;   // [nLayer]: uploads not yet settled and promoted
  std::atomic<int32_t> computing{-1};                 // the layer whose slots compute may lease, or -1

  std::mutex mu;                               // everything below, and the parts' fields their headers say it guards
  std::vector<int32_t> slot_expert;            // [backend slot id]: resident or incoming expert, -1: free
  std::vector<uint8_t> slot_dirty;             // [backend slot id]: not empty on the backend (reuse: overwrite or free)
  std::vector<uint8_t> expert_state;           // [nLayer * nExpert]: mt::ExpertState
  std::vector<std::vector<mt::Swap>> pending;  // [nLayer], each at most the layer's slots (capacity nExpert)
  std::vector<int32_t> victim_slots;           // [nExpert]: scratch of tier_issue_if_idle
  std::vector<mt::InFlight> flights;
  std::vector<mt::UploadReport> reports;  // at most kReportsMax until polled; beyond: counted, dropped
  std::vector<mt::Eviction> evicted;      // at most nLayer * nExpert (each eviction once)
  std::vector<mt_tier_read> read_log;     // streamed reads landed, at most kReportsMax until polled
  mt::Gate gate;
  uint64_t reports_dropped = 0;

  // Eval thread only: the leases of the layer being computed (capacity nExpert, no allocation).
  std::vector<mt_lease_id> leases;
  int32_t n_leases = 0;

  // The parts.
  mt::TierReads reads;        // tier_reads.h: the read engine, scratch and whole-layer buffers
  mt::TierPrefetch prefetch;  // tier_prefetch.h: the mode, marks and task queue
  mt::TierPolicy policy;      // tier_policy.h: the eviction policy's counts and clock
  mt::TierHook hook;          // tier_hook.h: the addon's layer hook
  mt::TierCounters counters;  // tier_counters.h: what mt_tier_stats_get copies
  mt::Issuer issuer;          // tier_issuer.h: absent (no thread) with a virtual clock
  // tier_remote.h: a backend whose slots the host cannot read (cuda, cuda-sim) computes its
  // residents on the device through this worker; null for host-visible slots.
  std::unique_ptr<mt::RemoteWorker> remote;
};

namespace mt {

inline size_t index_of(const mt_tier& t, int32_t layer, int32_t expert) {
  return size_t(layer) * size_t(t.n_expert) + size_t(expert);
}
inline uint64_t expert_bytes(const mt_tier& t, int32_t layer) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  return e.gate_bytes + e.up_bytes + e.down_bytes;
}

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
// Admit-before-run (compute is on layer; tier_stream.cc): the routed miss `expert` gets a slot
// before the layer runs it: an upload of it already in flight (not yet promoted), else its
// queued swap issued now (unless the victim is routed in this call: routed_now[victim]), else a
// free slot of the layer filled with it, else the policy's lowest-scored resident not routed now
// evicted for it (policy mode EVICT or KEEP). true: it lands in *slot with *event; false: none applies.
// *existing: it is an upload an earlier step issued (the first rule), not one issued here.
bool tier_admit_now(mt_tier& t, int32_t layer, int32_t expert, const uint8_t* routed_now, int32_t* slot,
                    mt_event_id* event, bool* existing = nullptr, GateClass cls = kGateMiss);

// Eval thread: the layer's leases released and compute off it (a failed bind or read).
void tier_abandon_layer(mt_tier& t);

// tier_source.cc: fills t.source.
void tier_source_init(mt_tier& t);

}  // namespace mt
