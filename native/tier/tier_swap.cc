// Swaps: queued by the engine (JS thread), issued right after their layer computed (its slots
// carry no leases then) by the issuer thread (tier_issuer.cc; inline on the eval thread with a
// virtual clock), settled when their events end.
//
//   request   victim resident -> outgoing, newcomer none -> incoming, queued (at most one swap per
//             resident victim: no bound of its own; the engine's upload queue is the gate)
//   issue     upload the newcomer into the victim's slot in place (overwrite = 1); refused with
//             NO_OVERWRITE: free the slot, upload into it empty (fell back). The victim stops
//             being resident (and is reported evicted) once an upload into its slot is issued.
//   settle    done: reported; resident from the layer's next start (promote)
//             failed in place: retried once at the boundary as free-then-upload (fell back)
//             failed otherwise: reported ok = false; newcomer none, slot free for reuse
//   now       request with issue_now (caller thread): the victims are hidden (residency -1)
//             first, then `computing` is read; if compute is not on the layer, the caller
//             issues the layer's queue itself, else the victims come back and the queue waits
//             for the layer's end (the eval thread publishes computing = -1, then reads
//             pending_n: one of the two sides always sees the other). The issuer uses the same
//             check, so a boundary it reaches late (compute is on the layer again) waits too.
#include <algorithm>
#include <ctime>
#include "mt_clock.h"
#include "tier.h"
#include "tier_counters.h"
#include "tier_issuer.h"
#include "tier_policy.h"
#include "tier_prefetch.h"

namespace mt {
namespace {

void push_report(mt_tier& t, const InFlight& f) {
  if (t.reports.size() >= kReportsMax) {
    t.reports_dropped++;
    return;
  }
  t.reports.push_back(UploadReport{f.task_id, f.layer, f.expert, f.victim, f.ok, f.in_place, f.fell_back, f.admitted,
                                   f.prefetch, expert_bytes(t, f.layer), f.issued_ns, f.start_ns, f.end_ns});
}

// Uploads expert into slot; in place when the slot holds bytes, else (or when refused) into
// the emptied slot. Returns the backend status; *fell_back: the slot had to be freed first.
int upload_expert(mt_tier& t, int32_t layer, int32_t expert, int32_t slot, double task_id, mt_event_id* event,
                  bool* freed, bool* fell_back) {
  mt_upload_piece pieces[3];
  tier_pieces(t, layer, expert, pieces);
  const int64_t label = int64_t(task_id);
  *freed = *fell_back = false;
  int rc = MT_BACKEND_NO_OVERWRITE;
  if (t.slot_dirty[size_t(slot)]) rc = mt_backend_upload(t.backend, slot, pieces, 3, 1, label, event, nullptr, 0);
  if (rc != MT_BACKEND_NO_OVERWRITE) return rc;
  if (t.slot_dirty[size_t(slot)]) {
    if (int free_rc = mt_backend_free(t.backend, slot, nullptr, 0)) return free_rc;
    t.slot_dirty[size_t(slot)] = 0;
    *freed = *fell_back = true;
  }
  return mt_backend_upload(t.backend, slot, pieces, 3, 0, label, event, nullptr, 0);
}

// slot: the victim's slot (its residency may already be hidden as -1 by an issue_now caller).
void issue_one(mt_tier& t, int32_t layer, const Swap& s, int32_t slot, int64_t now_ns, GateClass cls) {
  const size_t iv = index_of(t, layer, s.victim), in = index_of(t, layer, s.newcomer);
  MT_ASSERT(t.expert_state[iv] == kExpertOutgoing && t.expert_state[in] == kExpertIncoming,
            "a queued swap's victim is outgoing, its newcomer incoming");
  MT_ASSERT(slot >= 0 && t.slot_layer[size_t(slot)] == layer && t.slot_expert[size_t(slot)] == s.victim,
            "a victim's slot is its layer's and holds it");
  InFlight f;
  f.layer = layer, f.expert = s.newcomer, f.victim = s.victim, f.slot = slot, f.task_id = s.task_id,
  f.issued_ns = now_ns;
  bool freed = false;
  const int rc = upload_expert(t, layer, s.newcomer, slot, s.task_id, &f.event, &freed, &f.fell_back);
  f.in_place = rc == MT_BACKEND_OK && !f.fell_back;
  if (rc == MT_BACKEND_OK || freed) {  // the victim's bytes are being (or were) dropped
    t.residency[iv].store(-1, std::memory_order_release);
    t.expert_state[iv] = kExpertNone;
    tier_push_eviction(t, layer, s.victim);
    tier_prefetch_evicted(t, iv);
  } else {
    t.expert_state[iv] = kExpertResident;  // nothing touched its slot: it stays
    t.residency[iv].store(slot, std::memory_order_release);
  }
  if (rc == MT_BACKEND_OK) {
    t.slot_expert[size_t(slot)] = s.newcomer;
    t.slot_dirty[size_t(slot)] = 1;
    t.flights.push_back(f);
    gate_issued(t, t.flights.back(), cls);
    t.flight_n[layer].fetch_add(1, std::memory_order_release);
    return;
  }
  if (freed) t.slot_expert[size_t(slot)] = -1;
  t.expert_state[in] = kExpertNone;
  f.settled = true, f.ok = false, f.reported = true;
  push_report(t, f);
}

// Retries a failed in-place upload as free-then-upload into the same slot (the newcomer's
// only slot). false: the retry could not be issued.
bool retry(mt_tier& t, InFlight& f) {
  bool freed = false, fell_back = false;
  t.slot_dirty[size_t(f.slot)] = 1;  // invalid after the failure: free first
  if (mt_backend_free(t.backend, f.slot, nullptr, 0) == MT_BACKEND_OK) t.slot_dirty[size_t(f.slot)] = 0;
  const int rc = upload_expert(t, f.layer, f.expert, f.slot, f.task_id, &f.event, &freed, &fell_back);
  f.in_place = false;
  f.fell_back = true;
  if (rc == MT_BACKEND_OK) t.slot_dirty[size_t(f.slot)] = 1;
  return rc == MT_BACKEND_OK;
}

// Queries f's event; returns true once f is settled (done, or failed for good).
bool settle_one(mt_tier& t, InFlight& f, bool at_boundary) {
  if (f.settled) return true;
  mt_event_info info{};
  if (mt_backend_event_query(t.backend, f.event, &info, nullptr, 0) != MT_BACKEND_OK) info.state = MT_EVENT_FAILED;
  if (info.state == MT_EVENT_PENDING) return false;
  f.start_ns = info.start_ns, f.end_ns = info.end_ns;
  if (info.state == MT_EVENT_FAILED && f.in_place && !f.fell_back) {
    if (!at_boundary) return false;  // retried where the layer's copies belong: after it computes
    if (retry(t, f)) return false;
  }
  f.settled = true;
  f.ok = info.state == MT_EVENT_DONE;
  return true;
}

// A fill (admit-before-run into a free slot): no victim, no task of the caller's (task 0: the
// engine's upload queue does not know it), reported and promoted as any swap's upload.
bool issue_fill(mt_tier& t, int32_t layer, int32_t expert, int32_t slot, int64_t now_ns, GateClass cls) {
  InFlight f;
  f.layer = layer, f.expert = expert, f.slot = slot, f.issued_ns = now_ns;
  bool freed = false;
  const int rc = upload_expert(t, layer, expert, slot, 0, &f.event, &freed, &f.fell_back);
  if (freed) t.slot_dirty[size_t(slot)] = 0;
  if (rc != MT_BACKEND_OK) return false;
  f.in_place = !f.fell_back && t.slot_dirty[size_t(slot)];
  f.admitted = true;
  t.slot_expert[size_t(slot)] = expert;
  t.slot_dirty[size_t(slot)] = 1;
  t.expert_state[index_of(t, layer, expert)] = kExpertIncoming;
  t.flights.push_back(f);
  gate_issued(t, t.flights.back(), cls);
  t.flight_n[layer].fetch_add(1, std::memory_order_release);
  return true;
}

// The policy's lowest-scored resident of the layer that this call does not run gives its slot to
// expert (a swap of task 0, issued now and reported like any). false: every resident runs now or is
// busy, or the backend refused the upload (reported failed).
bool evict_for(mt_tier& t, int32_t layer, int32_t expert, const uint8_t* routed_now, int32_t* slot, mt_event_id* event,
               GateClass cls) {
  const int32_t victim = tier_policy_victim(t, layer, routed_now);
  if (victim < 0) return false;
  const size_t iv = index_of(t, layer, victim), in = index_of(t, layer, expert);
  t.expert_state[iv] = kExpertOutgoing;
  t.expert_state[in] = kExpertIncoming;
  issue_one(t, layer, Swap{victim, expert, 0}, t.residency[iv].load(std::memory_order_relaxed), tier_now(t, layer),
            cls);
  if (t.expert_state[in] != kExpertIncoming) return false;
  InFlight& f = t.flights.back();
  f.admitted = true;
  return *slot = f.slot, *event = f.event, true;
}

}  // namespace

bool tier_admit_now(mt_tier& t, int32_t layer, int32_t expert, const uint8_t* routed_now, int32_t* slot,
                    mt_event_id* event, bool* existing, GateClass cls) {
  const size_t in = index_of(t, layer, expert);
  if (existing != nullptr) *existing = false;
  if (t.expert_state[in] == kExpertIncoming) {
    for (const InFlight& f : t.flights)  // issued at an earlier boundary, not promoted yet: wait for it
      if (f.layer == layer && f.expert == expert && (!f.settled || f.ok)) {
        if (existing != nullptr) *existing = true;
        return *slot = f.slot, *event = f.event, true;
      }
    std::vector<Swap>& queue = t.pending[size_t(layer)];
    for (size_t i = 0; i < queue.size(); i++) {
      if (queue[i].newcomer != expert) continue;
      const int32_t victim_slot = t.residency[index_of(t, layer, queue[i].victim)].load(std::memory_order_relaxed);
      if (routed_now[queue[i].victim] || victim_slot < 0) return false;  // the victim computes in this call: it stays
      const Swap swap = queue[i];
      queue.erase(queue.begin() + std::ptrdiff_t(i));
      t.pending_n[layer].store(int32_t(queue.size()), std::memory_order_seq_cst);
      t.gate.swaps_queued--;
      // A queued swap whose newcomer a call now waits on goes ahead of the budget, as a miss would.
      issue_one(t, layer, swap, victim_slot, tier_now(t, layer), kGateSwap);
      if (t.expert_state[in] != kExpertIncoming) return false;  // the backend refused: reported failed
      InFlight& f = t.flights.back();
      f.admitted = true;
      return *slot = f.slot, *event = f.event, true;
    }
    return false;
  }
  if (t.expert_state[in] != kExpertNone) return false;
  for (int32_t s : t.layer_slots[size_t(layer)]) {
    if (t.slot_expert[size_t(s)] >= 0) continue;
    if (!issue_fill(t, layer, expert, s, tier_now(t, layer), cls)) return false;
    return *slot = s, *event = t.flights.back().event, true;
  }
  return t.policy.mode.load(std::memory_order_relaxed) != MT_TIER_POLICY_OFF &&
         evict_for(t, layer, expert, routed_now, slot, event, cls);
}

// issue_now's caller and the issuer (under mu): issues the layer's queue unless compute is on it,
// in order while the gate's budget has room; the rest stay queued, their victims resident.
int32_t tier_issue_if_idle(mt_tier& t, int32_t layer, bool held_only) {
  std::vector<Swap>& queue = t.pending[size_t(layer)];
  int32_t* slots = t.victim_slots.data();
  MT_ASSERT(queue.size() <= t.victim_slots.size(), "a layer queues at most one swap per expert");
  for (size_t i = 0; i < queue.size(); i++) {
    std::atomic<int32_t>& r = t.residency[index_of(t, layer, queue[i].victim)];
    slots[i] = r.load(std::memory_order_relaxed);
    r.store(-1, std::memory_order_seq_cst);  // from here a bind of this layer computes the victim as a miss
  }
  if (t.computing.load(std::memory_order_seq_cst) == layer) {
    for (size_t i = 0; i < queue.size(); i++)
      t.residency[index_of(t, layer, queue[i].victim)].store(slots[i], std::memory_order_release);
    return -1;
  }
  const int64_t now = tier_now(t, layer);
  const uint64_t bytes = expert_bytes(t, layer);
  size_t issued = 0, kept = 0;
  for (size_t i = 0; i < queue.size(); i++) {
    if (kept == 0 && (queue[i].held || !held_only) &&
        gate_fits(t, bytes)) {  // in order: one held back holds the ones behind it
      issue_one(t, layer, queue[i], slots[i], now, kGateSwap);
      issued++;
      continue;
    }
    t.residency[index_of(t, layer, queue[i].victim)].store(slots[i], std::memory_order_release);
    if (!held_only) queue[i].held = true;  // its turn came: due as soon as room frees
    queue[kept++] = queue[i];
  }
  queue.resize(kept);
  t.gate.swaps_queued -= int32_t(issued);
  t.pending_n[layer].store(int32_t(kept), std::memory_order_seq_cst);
  return int32_t(issued);
}

void tier_push_eviction(mt_tier& t, int32_t layer, int32_t expert) {
  if (t.evicted.size() >= kReportsMax)
    t.reports_dropped++;
  else
    t.evicted.push_back(Eviction{layer, expert});
}

int64_t tier_now(mt_tier& t, int32_t label) {
  if (t.virtual_clock) {
    mt_event_id event = 0;
    mt_event_info info{};
    if (mt_backend_compute_record(t.backend, label, 0, &event, nullptr, 0) == MT_BACKEND_OK &&
        mt_backend_event_query(t.backend, event, &info, nullptr, 0) == MT_BACKEND_OK)
      return info.start_ns;
    return 0;
  }
  return mt_monotonic_ns();
}

void tier_settle_layer(mt_tier& t, int32_t layer, bool at_boundary, bool promote) {
  for (size_t i = 0; i < t.flights.size();) {
    InFlight& f = t.flights[i];
    if ((layer >= 0 && f.layer != layer) || !settle_one(t, f, at_boundary)) {
      i++;
      continue;
    }
    if (!f.reported) push_report(t, f), f.reported = true;
    gate_retire(t, f);
    tier_prefetch_retire(t, f);
    const size_t in = index_of(t, f.layer, f.expert);
    if (f.ok && !promote) {
      i++;
      continue;
    }
    if (f.ok) {
      t.expert_state[in] = kExpertResident;
      t.residency[in].store(f.slot, std::memory_order_release);
    } else {
      t.expert_state[in] = kExpertNone;
      t.slot_expert[size_t(f.slot)] = -1;  // reusable: the next upload overwrites or frees it
    }
    t.flight_n[f.layer].fetch_sub(1, std::memory_order_release);
    t.flights.erase(t.flights.begin() + std::ptrdiff_t(i));
  }
}

}  // namespace mt

using namespace mt;

extern "C" {

int mt_tier_request_swap(mt_tier* tier, int32_t layer, int32_t victim, int32_t newcomer, double task_id,
                         int32_t issue_now) {
  mt_tier& t = *tier;
  if (layer < 0 || layer >= t.n_layer || victim < 0 || victim >= t.n_expert || newcomer < 0 || newcomer >= t.n_expert)
    return MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(t.mu);
  const size_t iv = index_of(t, layer, victim), in = index_of(t, layer, newcomer);
  if (t.expert_state[iv] != kExpertResident) return MT_TIER_NOT_RESIDENT;
  if (t.expert_state[in] != kExpertNone) return MT_TIER_ALREADY_RESIDENT;
  if (t.gate.swaps_queued >= t.gate.queue_max) {
    t.gate.ledger[kGateSwap].refused++;
    return MT_TIER_QUEUE_FULL;
  }
  std::vector<Swap>& queue = t.pending[size_t(layer)];
  queue.push_back(Swap{victim, newcomer, task_id});  // capacity nExpert reserved at creation: never reallocates
  t.expert_state[iv] = kExpertOutgoing;
  t.expert_state[in] = kExpertIncoming;
  t.pending_n[layer].store(int32_t(queue.size()), std::memory_order_seq_cst);
  t.gate.swaps_queued++;
  issuer_kick(t);  // then read sleepers (in the kick): see tier_issuer.cc
  if (!issue_now) return MT_TIER_OK;
  const int32_t issued = tier_issue_if_idle(t, layer);
  if (issued <= 0) return MT_TIER_OK;
  t.counters.swaps_started_now.fetch_add(uint64_t(issued), std::memory_order_relaxed);
  return MT_TIER_STARTED;
}

void mt_tier_flush(mt_tier* tier) {
  issuer_flush(*tier);
  // No layer computes: every landed upload becomes resident now, before a poll reports it. The
  // engine frees a reported newcomer's host copy, and a layer's own promotion skips a busy lock,
  // so a newcomer reported but not promoted would run from the container (lazily) meanwhile.
  std::lock_guard<std::mutex> lock(tier->mu);
  tier_settle_layer(*tier, -1, false, true);
}

void mt_tier_kick(mt_tier* tier) { issuer_eval_begins(*tier); }

void mt_tier_poll(mt_tier* tier, mt_tier_upload* uploads, int32_t* n_uploads, mt_tier_eviction* evictions,
                  int32_t* n_evictions, mt_tier_read* reads, int32_t* n_reads) {
  mt_tier& t = *tier;
  std::lock_guard<std::mutex> lock(t.mu);
  tier_settle_layer(t, -1, false, false);
  gate_issue_held(t);  // room the settled uploads freed goes to the swaps that waited for it
  MT_ASSERT(t.reports.size() <= kReportsMax && t.evicted.size() <= kReportsMax, "reports stay within their bound");
  std::copy(t.reports.begin(), t.reports.end(), uploads);
  std::copy(t.evicted.begin(), t.evicted.end(), evictions);
  *n_uploads = int32_t(t.reports.size());
  *n_evictions = int32_t(t.evicted.size());
  t.reports.clear();
  t.evicted.clear();
  if (reads != nullptr) std::copy(t.read_log.begin(), t.read_log.end(), reads);
  if (n_reads != nullptr) *n_reads = int32_t(t.read_log.size());
  t.read_log.clear();
}

void mt_tier_expert_states(mt_tier* tier, uint8_t* states, int32_t* slots) {
  mt_tier& t = *tier;
  std::lock_guard<std::mutex> lock(t.mu);
  const size_t n = size_t(t.n_layer) * size_t(t.n_expert);
  if (states != nullptr) std::copy(t.expert_state.begin(), t.expert_state.end(), states);
  if (slots != nullptr)
    for (size_t i = 0; i < n; i++) slots[i] = t.residency[i].load(std::memory_order_acquire);
}

}  // extern "C"
