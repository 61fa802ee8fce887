// Swaps: queued by the engine (JS thread), issued by the eval thread at the boundary right
// after their layer computed (its slots carry no leases then), settled when their events end.
//
//   request   victim resident -> outgoing, newcomer none -> incoming, queued (bounded)
//   issue     upload the newcomer into the victim's slot in place (overwrite = 1); refused with
//             NO_OVERWRITE: free the slot, upload into it empty (fell back). The victim stops
//             being resident (and is reported evicted) once an upload into its slot is issued.
//   settle    done: reported; resident from the layer's next start (promote)
//             failed in place: retried once at the boundary as free-then-upload (fell back)
//             failed otherwise: reported ok = false; newcomer none, slot free for reuse
//   now       request with issue_now (caller thread): the victims are hidden (residency -1)
//             first, then `computing` is read; if compute is not on the layer, the caller
//             issues the layer's queue itself, else the victims come back and the eval thread
//             issues the queue at the layer's end (it publishes computing = -1, then reads
//             pending_n: one of the two sides always sees the other)
#include <ctime>
#include "tier.h"

namespace mt {
namespace {

size_t index_of(const mt_tier& t, int32_t layer, int32_t expert) { return size_t(layer) * size_t(t.n_expert) + size_t(expert); }

uint64_t expert_bytes(const mt_tier& t, int32_t layer) {
  const LayerWeights& L = t.model->layers[size_t(layer)];
  return L.gate.expert_bytes + L.up.expert_bytes + L.down.expert_bytes;
}

void push_report(mt_tier& t, const InFlight& f) {
  if (t.reports.size() >= kReportsMax) {
    t.reports_dropped++;
    return;
  }
  t.reports.push_back(UploadReport{f.task_id, f.layer, f.expert, f.victim, f.ok, f.in_place, f.fell_back, expert_bytes(t, f.layer),
                                   f.issued_ns, f.start_ns, f.end_ns});
}

void push_eviction(mt_tier& t, int32_t layer, int32_t expert) {
  if (t.evicted.size() >= kReportsMax) t.reports_dropped++;
  else t.evicted.push_back(Eviction{layer, expert});
}

// Uploads expert into slot; in place when the slot holds bytes, else (or when refused) into
// the emptied slot. Returns the backend status; *fell_back: the slot had to be freed first.
int upload_expert(mt_tier& t, int32_t layer, int32_t expert, int32_t slot, double task_id, mt_event_id* event, bool* freed,
                  bool* fell_back) {
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
void issue_one(mt_tier& t, int32_t layer, const Swap& s, int32_t slot, int64_t now_ns) {
  const size_t iv = index_of(t, layer, s.victim), in = index_of(t, layer, s.newcomer);
  InFlight f;
  f.layer = layer, f.expert = s.newcomer, f.victim = s.victim, f.slot = slot, f.task_id = s.task_id, f.issued_ns = now_ns;
  bool freed = false;
  const int rc = upload_expert(t, layer, s.newcomer, slot, s.task_id, &f.event, &freed, &f.fell_back);
  f.in_place = rc == MT_BACKEND_OK && !f.fell_back;
  if (rc == MT_BACKEND_OK || freed) {  // the victim's bytes are being (or were) dropped
    t.residency[iv].store(-1, std::memory_order_release);
    t.expert_state[iv] = kExpertNone;
    push_eviction(t, layer, s.victim);
  } else {
    t.expert_state[iv] = kExpertResident;  // nothing touched its slot: it stays
    t.residency[iv].store(slot, std::memory_order_release);
  }
  if (rc == MT_BACKEND_OK) {
    t.slot_expert[size_t(slot)] = s.newcomer;
    t.slot_dirty[size_t(slot)] = 1;
    t.flights.push_back(f);
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

// The caller's side of issue_now (under mu): true when it issued layer's queue itself.
bool issue_if_idle(mt_tier& t, int32_t layer) {
  std::vector<Swap>& queue = t.pending[size_t(layer)];
  int32_t slots[kSwapQueueDepthMax];
  for (size_t i = 0; i < queue.size(); i++) {
    std::atomic<int32_t>& r = t.residency[index_of(t, layer, queue[i].victim)];
    slots[i] = r.load(std::memory_order_relaxed);
    r.store(-1, std::memory_order_seq_cst);  // from here a bind of this layer computes the victim as a miss
  }
  if (t.computing.load(std::memory_order_seq_cst) == layer) {
    for (size_t i = 0; i < queue.size(); i++) t.residency[index_of(t, layer, queue[i].victim)].store(slots[i], std::memory_order_release);
    return false;
  }
  const int64_t now = tier_now(t, layer);
  for (size_t i = 0; i < queue.size(); i++) issue_one(t, layer, queue[i], slots[i], now);
  t.swaps_started_now.fetch_add(queue.size(), std::memory_order_relaxed);
  queue.clear();
  t.pending_n[layer].store(0, std::memory_order_seq_cst);
  return true;
}

}  // namespace

int64_t tier_now(mt_tier& t, int32_t label) {
  if (t.fake) {
    mt_event_id event = 0;
    mt_event_info info{};
    if (mt_backend_compute_record(t.backend, label, 0, &event, nullptr, 0) == MT_BACKEND_OK &&
        mt_backend_event_query(t.backend, event, &info, nullptr, 0) == MT_BACKEND_OK)
      return info.start_ns;
    return 0;
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int32_t tier_request_swap(mt_tier& t, int32_t layer, int32_t victim, int32_t newcomer, double task_id, bool issue_now) {
  std::lock_guard<std::mutex> lock(t.mu);
  const size_t iv = index_of(t, layer, victim), in = index_of(t, layer, newcomer);
  if (t.expert_state[iv] != kExpertResident) return kSwapNotResident;
  if (t.expert_state[in] != kExpertNone) return kSwapAlreadyResident;
  std::vector<Swap>& queue = t.pending[size_t(layer)];
  if (queue.size() >= size_t(kSwapQueueDepthMax)) return kSwapQueueFull;
  queue.push_back(Swap{victim, newcomer, task_id});  // capacity reserved at creation
  t.expert_state[iv] = kExpertOutgoing;
  t.expert_state[in] = kExpertIncoming;
  t.pending_n[layer].store(int32_t(queue.size()), std::memory_order_seq_cst);
  return issue_now && issue_if_idle(t, layer) ? kSwapStarted : kSwapOk;
}

void tier_issue_swaps(mt_tier& t, int32_t layer, int64_t now_ns) {
  std::vector<Swap>& queue = t.pending[size_t(layer)];
  for (const Swap& s : queue) issue_one(t, layer, s, t.residency[index_of(t, layer, s.victim)].load(std::memory_order_relaxed), now_ns);
  queue.clear();
  t.pending_n[layer].store(0, std::memory_order_release);
}

void tier_settle_layer(mt_tier& t, int32_t layer, bool at_boundary, bool promote, int64_t) {
  for (size_t i = 0; i < t.flights.size();) {
    InFlight& f = t.flights[i];
    if ((layer >= 0 && f.layer != layer) || !settle_one(t, f, at_boundary)) {
      i++;
      continue;
    }
    if (!f.reported) push_report(t, f), f.reported = true;
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

void tier_drain(mt_tier& t, std::vector<UploadReport>* uploads, std::vector<Eviction>* evicted) {
  std::lock_guard<std::mutex> lock(t.mu);
  tier_settle_layer(t, -1, false, false, 0);
  uploads->assign(t.reports.begin(), t.reports.end());
  evicted->assign(t.evicted.begin(), t.evicted.end());
  t.reports.clear();
  t.evicted.clear();
}

}  // namespace mt
