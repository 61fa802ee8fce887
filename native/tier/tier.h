// The expert tier inside the forward pass: which routed experts of a layer are computed from
// backend slots (residents), which from host int8 copies, which from the container.
//
//   createTier  reserve sum(slots_per_layer) slots; layer l uses the slot ids in layer_slots[l]
//   resize      between evals (tier_resize.cc): a layer's slot count grows (spare slots first, then
//               a new backend reserve of the same slot size) or shrinks (free slots first, then the
//               caller's victims, evicted; the slots become spare)
//   eval, per layer l:
//     begin     stamp start; promote finished uploads of l (lock only if some are in flight)
//     bind      after the routes are grouped: each routed run reads residency[l][x] (atomic):
//                 slot >= 0   lease it, compute from mt_backend_slot_data (container type)
//                 else        host copy (Q8_0) when its offset is >= 0, else the container
//     end       release the layer's leases; stamp end; queued swaps of l are issued now,
//               so their copies overlap layer l+1's compute
//   hook      (optional, per eval) after bind: the layer's routed row counts [nExpert] go to
//             layer_hook (the addon posts them to JS, non-blocking), so a replan can request
//             swaps for layer l while l+1 computes
//
// A swap requested with issue_now is issued by the caller at once when its layer is not being
// computed (`computing`, a Dekker pair with residency: the caller hides the victim first, then
// reads computing; the eval thread publishes computing, then reads residency), else it waits in
// the queue and the eval thread issues it at the layer's end.
//
// Expert states (under mu): none -> incoming (queued / uploading) -> resident -> outgoing
// (queued as a victim, still computed from its slot) -> none once its slot is overwritten.
// The eval thread reads residency without the lock; every slot it reads is leased, and only
// the eval thread issues writes into slots that compute may read, after releasing its leases.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>
#include "../cpu/forward.h"
#include "mt_backend.h"

namespace mt {

// Pending swaps per layer (tierRequestSwap answers kSwapQueueFull beyond it).
constexpr int32_t kSwapQueueDepthMax = 16;
// Upload outcomes kept until tierPoll drains them; more are counted and dropped.
constexpr size_t kReportsMax = 4096;

enum SwapCode : int32_t { kSwapOk = 0, kSwapStarted = 1, kSwapQueueFull = -1, kSwapNotResident = -2, kSwapAlreadyResident = -3 };
enum ExpertState : uint8_t { kExpertNone = 0, kExpertIncoming = 1, kExpertResident = 2, kExpertOutgoing = 3 };

struct Swap {
  int32_t victim = -1, newcomer = -1;
  double task_id = 0;
};

// One upload the tier issued and has not reported yet.
struct InFlight {
  int32_t layer = 0, expert = 0, victim = -1, slot = -1;
  double task_id = 0;
  mt_event_id event = 0;
  bool in_place = false, fell_back = false;
  bool settled = false;    // the event finished (done, or failed for good)
  bool ok = false;
  bool reported = false;   // a swap's outcome went out through poll
  int64_t issued_ns = 0, start_ns = 0, end_ns = 0;
};

struct UploadReport {
  double task_id = 0;
  int32_t layer = 0, expert = 0, victim = -1;
  bool ok = false, in_place = false, fell_back = false;
  uint64_t bytes = 0;
  int64_t issued_ns = 0, start_ns = 0, end_ns = 0;
};

struct Eviction {
  int32_t layer = 0, expert = 0;
};

// Called on the eval thread after a layer's routing: counts [n_expert] rows per expert.
struct LayerHook {
  void (*fn)(void* user, int32_t layer, const int32_t* counts, int32_t n_expert) = nullptr;
  void* user = nullptr;
};

struct TierOptions {
  std::vector<int32_t> slots_per_layer;  // [nLayer]
  const uint8_t* host = nullptr;         // host copy arena (may be null)
  size_t host_bytes = 0;
  const int32_t* host_offsets = nullptr;  // [nLayer * nExpert] or null; read with acquire loads
};

}  // namespace mt

struct mt_tier {
  const mt_model* model = nullptr;
  mt_backend* backend = nullptr;
  bool fake = false;  // layer stamps come from the backend's virtual compute clock
  int32_t n_layer = 0, n_expert = 0;
  uint64_t gate_bytes = 0, up_bytes = 0, down_bytes = 0;  // one expert in the container
  uint64_t host_copy_bytes = 0;                           // one expert as Q8_0 rows; 0: no host copy possible
  std::vector<uint64_t> attn_bytes;                       // [nLayer]: q, k, v, o weight bytes (fake clock work)
  uint64_t slot_bytes = 0;                                // every slot's size: the largest expert
  // Changed only by tier_resize, under mu, while no eval runs (the eval reads them without mu).
  std::vector<std::vector<int32_t>> layer_slots;          // [nLayer]: backend slot ids the layer uses (its budget: size())
  std::vector<int32_t> slot_layer;                        // [backend slot id]: the layer using it, -1: spare / not the tier's
  std::vector<int32_t> spare_slots;                       // reserved, empty, no layer's (a shrink left them)
  std::vector<uint8_t*> slot_data;                        // [backend slot id]: where its bytes live
  const uint8_t* host = nullptr;
  size_t host_bytes = 0;
  const int32_t* host_offsets = nullptr;

  std::unique_ptr<std::atomic<int32_t>[]> residency;  // [nLayer * nExpert]: slot, or -1
  std::atomic<uint64_t> hits{0}, misses{0}, lazy_misses{0};
  std::unique_ptr<std::atomic<int32_t>[]> pending_n;   // [nLayer]: swaps queued (a hint read without mu)
  std::unique_ptr<std::atomic<int32_t>[]> flight_n;    // [nLayer]: uploads not yet settled and promoted
  std::atomic<int32_t> computing{-1};                  // the layer whose slots compute may lease, or -1

  // Set by the addon around one eval (eval thread only); hook_counts: its scratch [nExpert].
  mt::LayerHook layer_hook;
  std::vector<int32_t> hook_counts;
  std::atomic<uint64_t> hook_calls{0}, hook_ns{0}, hook_dropped{0};
  std::atomic<uint64_t> swaps_started_now{0};  // issue_now swaps the caller issued itself

  std::mutex mu;  // everything below
  std::vector<int32_t> slot_expert;   // [backend slot id]: resident or incoming expert, -1: free
  std::vector<uint8_t> slot_dirty;    // [backend slot id]: not empty on the backend (reuse: overwrite or free)
  std::vector<uint8_t> expert_state;  // [nLayer * nExpert]: mt::ExpertState
  std::vector<std::vector<mt::Swap>> pending;  // [nLayer], each at most kSwapQueueDepthMax
  std::vector<mt::InFlight> flights;
  std::vector<mt::UploadReport> reports;  // at most kReportsMax until polled; beyond: counted, dropped
  std::vector<mt::Eviction> evicted;       // at most nLayer * nExpert (each eviction once)
  uint64_t reports_dropped = 0;

  // Eval thread only: the leases of the layer being computed (capacity nExpert, no allocation).
  std::vector<mt_lease_id> leases;
  int32_t n_leases = 0;
};

namespace mt {

// tier.cc: create (reserves slots) / destroy (waits for uploads, frees slots).
// Reserves n more backend slots of slot_bytes and grows the per-slot arrays: false with a message.
bool tier_reserve_slots(mt_tier& t, int32_t n, std::vector<int32_t>* ids, char* err, size_t err_bytes);
mt_tier* tier_create(const mt_model* model, mt_backend* backend, bool fake, const TierOptions& o, char* err, size_t err_bytes);
void tier_destroy(mt_tier* t);
// The bytes of one expert of layer l: gate | up | down in the container, as upload pieces.
void tier_pieces(const mt_tier& t, int32_t layer, int32_t expert, mt_upload_piece* pieces);
// Q4_0 / Q8_0 expert -> Q8_0 rows (gate | up | down) at dst; false with a message otherwise.
bool tier_requantize(const mt_model& m, int32_t layer, int32_t expert, uint8_t* dst, size_t dst_bytes, char* err, size_t err_bytes);
uint64_t tier_host_copy_bytes(const mt_model& m);

// tier_warm.cc: warmstart issues uploads into free slots (JS thread), then, once every event
// was waited for, promotes the ones that landed.
struct WarmUpload {
  int32_t layer = 0, expert = 0, slot = -1;
  mt_event_id event = 0;
};
// false with a message: nothing was issued (bad expert ids, too few free slots) or an upload was
// refused part-way (*uploads then holds the ones issued, which must still be finished).
bool tier_warm_issue(mt_tier& t, int32_t layer, const int32_t* experts, int32_t n, std::vector<WarmUpload>* uploads, char* err,
                     size_t err_bytes);
// Waits for the uploads (any thread), then settles them: false with a message if any failed.
bool tier_warm_finish(mt_tier& t, const std::vector<WarmUpload>& uploads, char* err, size_t err_bytes);

// tier_swap.cc
// kSwapOk: queued (issued at the boundary after layer next computes); kSwapStarted: issue_now
// and the layer was not being computed, so the caller issued its layer's queue itself.
int32_t tier_request_swap(mt_tier& t, int32_t layer, int32_t victim, int32_t newcomer, double task_id, bool issue_now = false);
// Now on the tier's clock: monotonic ns, or the fake backend's virtual compute clock.
int64_t tier_now(mt_tier& t, int32_t label);
// Settles finished events; at_boundary (the eval thread after layer computes): retries failed
// in-place uploads as free-then-upload; promote (the eval thread at layer start): done -> resident.
void tier_settle_layer(mt_tier& t, int32_t layer, bool at_boundary, bool promote, int64_t now_ns);  // under mu
void tier_issue_swaps(mt_tier& t, int32_t layer, int64_t now_ns);                                    // under mu
// Moves the finished swaps and evictions out (poll).
void tier_drain(mt_tier& t, std::vector<UploadReport>* uploads, std::vector<Eviction>* evicted);

// tier_resize.cc: layer's slot count becomes count. Shrinking frees free slots first, then the
// slots of victims (in the given order, lowest score first) that are plainly resident (no swap
// queued or in flight), evicting them (reported by tier_drain). Between evals only (the caller
// checks); false with a message: nothing changed.
bool tier_resize(mt_tier& t, int32_t layer, int32_t count, const int32_t* victims, int32_t n_victims, char* err, size_t err_bytes);

// tier_eval.cc: the hooks mt_eval calls (Pass::tier != null or Pass::layer_stats != null).
void step_layer_begin(Pass& p);
void step_moe_begin(Pass& p);
// After group_slots: residents leased and read from slots, misses from host copies. false: an
// operating error (message in err); every lease is released by then.
bool step_bind_runs(Pass& p, char* err, size_t err_bytes);
void step_layer_end(Pass& p);

}  // namespace mt
