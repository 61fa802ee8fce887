// Tier life: creation (checks, slot reservation, the issuer), destruction (waits for uploads,
// frees slots), the upload pieces of one expert, and the Q4_0 -> Q8_0 host-copy rebuild.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include "tier.h"
#include "tier_counters.h"
#include "tier_hook.h"
#include "tier_issuer.h"
#include "tier_policy.h"
#include "tier_prefetch.h"
#include "tier_reads.h"
#include "tier_remote.h"

namespace mt {
namespace {

bool fail(char* err, size_t err_bytes, const std::string& message) {
  std::snprintf(err, err_bytes, "%s", message.c_str());
  return false;
}

bool quant(int32_t type) { return type == MT_Q8_0 || type == MT_Q4_0; }

// Q4_0 row -> Q8_0 row, exactly: the same f16 scale d, q = nibble - 8 (element j: low nibble
// of byte j, element j + 16: high nibble). A Q8_0 row is copied.
void row_to_q8(int32_t type, const uint8_t* src, int64_t cols, uint8_t* dst) {
  if (type == MT_Q8_0) {
    std::memcpy(dst, src, mt_row_bytes(MT_Q8_0, cols));
    return;
  }
  constexpr int kQ4Bytes = 18, kQ8Bytes = 34, kHalf = 16;
  for (int64_t b = 0; b < cols / 32; b++) {
    const uint8_t* in = src + b * kQ4Bytes;
    uint8_t* out = dst + b * kQ8Bytes;
    std::memcpy(out, in, 2);
    int8_t* q = reinterpret_cast<int8_t*>(out + 2);
    for (int j = 0; j < kHalf; j++) {
      q[j] = int8_t(int(in[2 + j] & 0x0f) - 8);
      q[j + kHalf] = int8_t(int(in[2 + j] >> 4) - 8);
    }
  }
}

mt_layer_experts layer_experts(const mt_model* m, int32_t layer) {
  mt_layer_experts e{};
  mt_model_layer_experts(m, layer, &e);
  return e;
}

bool check_options(const mt_model* m, const mt_tier_options& o, char* err, size_t err_bytes) {
  const mt_hparams& hp = *mt_model_hparams(m);
  const int32_t n_moe = mt_moe_layers(&hp);  // the tier's layers: those with experts
  if (o.n_layer != n_moe || o.slots_per_layer == nullptr)
    return fail(err, err_bytes,
                "slotsPerLayer: expected " + std::to_string(n_moe) + " counts (one per layer), got " +
                    std::to_string(o.slots_per_layer == nullptr ? 0 : o.n_layer));
  for (int32_t l = 0; l < o.n_layer; l++)
    if (o.slots_per_layer[l] < 0 || o.slots_per_layer[l] > hp.n_expert)
      return fail(err, err_bytes,
                  "slotsPerLayer[" + std::to_string(l) + "]: expected 0.." + std::to_string(hp.n_expert) + ", got " +
                      std::to_string(o.slots_per_layer[l]));
  if (o.host != nullptr && mt_tier_host_copy_bytes(m) == 0)
    return fail(
        err, err_bytes,
        "hostCopies: this model's experts are not Q4_0 / Q8_0, so they have no exact int8 copy; omit hostCopies");
  return true;
}

}  // namespace

void tier_pieces(const mt_tier& t, int32_t layer, int32_t expert, mt_upload_piece* pieces) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  const size_t x = size_t(expert);
  pieces[0] = mt_upload_piece{e.gate.data + x * e.gate_bytes, e.gate_bytes};
  pieces[1] = mt_upload_piece{e.up.data + x * e.up_bytes, e.up_bytes};
  pieces[2] = mt_upload_piece{e.down.data + x * e.down_bytes, e.down_bytes};
}

bool tier_reserve_slots(mt_tier& t, int32_t n, std::vector<int32_t>* ids, char* err, size_t err_bytes) {
  if (n <= 0) return true;
  int32_t first = 0;
  char why[512] = "";
  if (int rc = mt_backend_slots_reserve(t.backend, n, t.slot_bytes, &first, why, sizeof why))
    return fail(err, err_bytes,
                "reserving " + std::to_string(n) + " slots: " + mt_backend_status_name(rc) + ": " + why);
  const size_t end = size_t(first) + size_t(n);
  if (t.slot_data.size() < end) {
    t.slot_data.resize(end, nullptr);
    t.slot_layer.resize(end, -1);
    t.slot_expert.resize(end, -1);
    t.slot_dirty.resize(end, 0);
  }
  for (int32_t s = first; s < first + n; s++) {
    mt_backend_slot_data(t.backend, s, &t.slot_data[size_t(s)], nullptr, 0);
    ids->push_back(s);
  }
  t.flights.reserve(t.flights.size() + size_t(n));
  return true;
}

}  // namespace mt

using namespace mt;

extern "C" {

uint64_t mt_tier_host_copy_bytes(const mt_model* m) {
  uint64_t bytes = 0;
  for (int32_t l = 0; l < mt_moe_layers(mt_model_hparams(m)); l++) {
    const mt_layer_experts e = layer_experts(m, l);
    uint64_t layer_bytes = 0;
    // A Q8_0 gate beside another up / down type would make a Q8_0 copy look like the container's
    // bytes to the forward pass (apply_binding, forward_steps.cc): no copies then.
    if (e.gate.type == MT_Q8_0 && (e.up.type != MT_Q8_0 || e.down.type != MT_Q8_0)) return 0;
    for (const mt_matrix_desc* w : {&e.gate, &e.up, &e.down}) {
      if (!quant(w->type)) return 0;
      layer_bytes += uint64_t(w->rows) * mt_row_bytes(MT_Q8_0, w->cols);
    }
    if (bytes != 0 && layer_bytes != bytes) return 0;  // one geometry for every layer
    bytes = layer_bytes;
  }
  return bytes;
}

int mt_tier_requantize(const mt_model* m, int32_t layer, int32_t expert, uint8_t* dst, size_t dst_bytes, char* err,
                       size_t err_bytes) {
  const uint64_t need = mt_tier_host_copy_bytes(m);
  if (need == 0)
    return fail(err, err_bytes, "requantizeExpertToQ8: this model's experts are not Q4_0 / Q8_0 in every layer"),
           MT_TIER_INVALID;
  if (dst_bytes < need)
    return fail(err, err_bytes,
                "requantizeExpertToQ8: dst: expected room for " + std::to_string(need) + " bytes at dstOffset, got " +
                    std::to_string(dst_bytes)),
           MT_TIER_INVALID;
  const mt_layer_experts e = layer_experts(m, layer);
  const std::pair<const mt_matrix_desc*, size_t> parts[3] = {
      {&e.gate, e.gate_bytes}, {&e.up, e.up_bytes}, {&e.down, e.down_bytes}};
  for (const auto& [w, stride] : parts) {
    const uint8_t* src = w->data + size_t(expert) * stride;
    const size_t out_row = mt_row_bytes(MT_Q8_0, w->cols);
    for (int64_t r = 0; r < w->rows; r++, dst += out_row)
      row_to_q8(w->type, src + size_t(r) * w->row_bytes, w->cols, dst);
  }
  return MT_TIER_OK;
}

mt_tier* mt_tier_create(const mt_model* model, mt_backend* backend, const mt_tier_options* o, char* err,
                        size_t err_bytes) {
  if (o == nullptr) return fail(err, err_bytes, "createTier: options are null"), nullptr;
  if (!check_options(model, *o, err, err_bytes)) return nullptr;
  mt_backend_stats st{};
  mt_backend_stats_get(backend, &st);
  const mt_hparams& hp = *mt_model_hparams(model);
  const int32_t n_moe = mt_moe_layers(&hp);  // the tier's layers: those with experts (mt_forward.h)
  std::unique_ptr<mt_tier> t(new (std::nothrow) mt_tier());
  if (!t) return fail(err, err_bytes, "createTier: out of memory"), nullptr;
  t->model = model, t->backend = backend, t->virtual_clock = st.virtual_clock != 0;
  t->n_layer = n_moe, t->n_expert = hp.n_expert;
  t->host_copy_bytes = mt_tier_host_copy_bytes(model);
  t->host = o->host, t->host_bytes = o->host_bytes, t->host_offsets = o->host_offsets;
  uint64_t slot_bytes = 0;
  int32_t total = 0;
  for (int32_t l = 0; l < n_moe; l++) {
    t->experts.push_back(layer_experts(model, l));
    slot_bytes = std::max<uint64_t>(slot_bytes, expert_bytes(*t, l));
    total += o->slots_per_layer[l];
  }
  t->slot_bytes = slot_bytes;
  std::vector<int32_t> ids;
  if (!tier_reserve_slots(*t, total, &ids, err, err_bytes)) return nullptr;
  t->layer_slots.resize(size_t(n_moe));
  for (int32_t l = 0, next = 0; l < n_moe; l++)
    for (int32_t i = 0; i < o->slots_per_layer[l]; i++, next++) {
      t->layer_slots[size_t(l)].push_back(ids[size_t(next)]);
      t->slot_layer[size_t(ids[size_t(next)])] = l;
    }
  const size_t experts = size_t(n_moe) * size_t(hp.n_expert);
  t->residency.reset(new std::atomic<int32_t>[experts]);
  for (size_t i = 0; i < experts; i++) t->residency[i].store(-1);
  t->pending_n.reset(new std::atomic<int32_t>[size_t(n_moe)]);
  t->flight_n.reset(new std::atomic<int32_t>[size_t(n_moe)]);
  for (int32_t l = 0; l < n_moe; l++) t->pending_n[l].store(0), t->flight_n[l].store(0);
  t->expert_state.assign(experts, kExpertNone);
  t->prefetch.prefetched.reset(new std::atomic<uint8_t>[experts]);
  t->prefetch.observed.reset(new std::atomic<uint8_t>[experts]);
  for (size_t i = 0; i < experts; i++) t->prefetch.prefetched[i].store(0), t->prefetch.observed[i].store(0);
  t->prefetch.by_layer.reset(new std::atomic<uint64_t>[size_t(n_moe) * kPrefetchOutcomes]);
  for (size_t i = 0; i < size_t(n_moe) * kPrefetchOutcomes; i++) t->prefetch.by_layer[i].store(0);
  t->prefetch.queue.reserve(MT_TIER_PREFETCH_QUEUE_MAX);
  t->reads.path_calls.reset(new std::atomic<uint64_t>[size_t(n_moe) * 2]);
  for (size_t i = 0; i < size_t(n_moe) * 2; i++) t->reads.path_calls[i].store(0);
  t->routed_now.assign(size_t(hp.n_expert), 0);  // admit before run's and the prefetch's marks
  t->policy.eligible.assign(size_t(hp.n_expert), 0);
  t->policy.kept_misses.assign(size_t(hp.n_expert), 0);
  t->policy.count.assign(experts, 0);
  t->policy.stamp.assign(experts, 0);
  t->no_victims.assign(size_t(hp.n_expert), 1);
  t->pending.resize(size_t(n_moe));
  for (auto& q : t->pending) q.reserve(size_t(hp.n_expert));
  t->victim_slots.assign(size_t(hp.n_expert), -1);
  // Reserved in full: the issuer and the eval thread never allocate (a first touch of fresh
  // memory on those threads cost tens of microseconds at a layer boundary).
  t->reports.reserve(kReportsMax);
  t->evicted.reserve(kReportsMax);
  t->read_log.reserve(kReportsMax);
  t->leases.assign(size_t(hp.n_expert), 0);
  t->hook.counts.assign(size_t(hp.n_expert), 0);
  tier_source_init(*t);
  if (o->stream_fd >= 0 &&
      !tier_stream_open(*t, o->stream_fd, o->stream_base, o->stream_fail_after_bytes, err, err_bytes))
    return nullptr;
  // Slots the host cannot read (device memory): residents are computed there (tier_remote.cc).
  if (!st.host_visible && !tier_remote_start(*t, err, err_bytes)) return nullptr;
  if (!t->virtual_clock && !issuer_start(*t, err, err_bytes)) return tier_remote_stop(*t), nullptr;
  return t.release();
}

void mt_tier_free(mt_tier* t) {
  if (t == nullptr) return;
  tier_remote_stop(*t);
  issuer_stop(*t);
  for (const InFlight& f : t->flights) {
    mt_event_info info{};
    mt_backend_event_wait(t->backend, f.event, &info, nullptr, 0);
  }
  for (const std::vector<int32_t>& slots : t->layer_slots)
    for (int32_t s : slots) mt_backend_free(t->backend, s, nullptr, 0);
  tier_stream_close(*t);
  delete t;
}

const mt_expert_source* mt_tier_source(mt_tier* t) { return &t->source; }

void mt_tier_expert_bytes(const mt_tier* t, uint64_t* container, uint64_t* host_copy) {
  *container = t->slot_bytes;  // the largest layer's expert: layers of a k-quant mix differ
  *host_copy = t->host_copy_bytes;
}

static void gate_stats_locked(const mt_tier& t, mt_tier_stats* out) {
  out->gate_bytes_max = t.gate.bytes_max;
  out->gate_transfers_max = t.gate.transfers_max, out->gate_queue_max = t.gate.queue_max;
  out->gate_inflight_bytes = t.gate.inflight_bytes;
  out->gate_inflight_transfers = t.gate.inflight_transfers, out->gate_swaps_queued = t.gate.swaps_queued;
  for (int c = 0; c < mt::kGateClasses; c++) {
    out->gate_issued[c] = t.gate.ledger[c].issued, out->gate_completed[c] = t.gate.ledger[c].completed,
    out->gate_failed[c] = t.gate.ledger[c].failed;
    out->gate_refused[c] = t.gate.ledger[c].refused, out->gate_cancelled[c] = t.gate.ledger[c].cancelled;
  }
}

void mt_tier_gate_stats(mt_tier* tier, mt_tier_stats* out) {
  std::lock_guard<std::mutex> lock(tier->mu);
  gate_stats_locked(*tier, out);
}

void mt_tier_stats_get(mt_tier* tier, mt_tier_stats* out, int32_t* used, int32_t* budget) {
  mt_tier& t = *tier;
  *out = mt_tier_stats{};
  for (const CounterRow& row : kCounterTable)
    if (!row.under_mu) out->*row.stat = (t.counters.*row.counter).load();
  if (t.reads.io != nullptr) {
    mt_io_stats io{};
    mt_io_stats_get(t.reads.io, &io);
    // The tier's lane: not the backend's uploads on a shared engine.
    out->stream_engine_bytes = io.lanes[kReadLane].bytes_read - t.reads.lane_bytes_base;
  }
  std::lock_guard<std::mutex> lock(t.mu);
  // Under mu: the issued and settled tasks retire their bytes there, so the three agree.
  for (const CounterRow& row : kCounterTable)
    if (row.under_mu) out->*row.stat = (t.counters.*row.counter).load();
  out->prefetch_inflight_bytes = t.prefetch.inflight_bytes;
  gate_stats_locked(t, out);
  out->prefetch_queue_length = int32_t(t.prefetch.queue.size());
  for (int32_t l = 0; l < t.n_layer; l++) {
    int32_t n = 0;
    for (int32_t slot : t.layer_slots[size_t(l)]) {
      n += t.slot_expert[size_t(slot)] >= 0;
      out->leases += mt_backend_lease_count(t.backend, slot);
    }
    if (used != nullptr) used[l] = n;
    if (budget != nullptr) budget[l] = int32_t(t.layer_slots[size_t(l)].size());
  }
  for (int32_t slot : t.spare_slots) out->leases += mt_backend_lease_count(t.backend, slot);
  out->slots_spare = int32_t(t.spare_slots.size());
  out->reports_dropped = t.reports_dropped;
}

void mt_tier_reset_stats(mt_tier* t) {
  for (const CounterRow& row : kCounterTable)
    if (row.since_mark) t->counters.*row.counter = 0;
  std::fill(t->reads.marks.begin(), t->reads.marks.end(), uint8_t(0));
  for (size_t i = 0; i < size_t(t->n_layer) * 2; i++)
    t->reads.path_calls[i] = 0;  // like the hits: counted from the stats mark on
  for (size_t i = 0; i < size_t(t->n_layer) * kPrefetchOutcomes; i++) t->prefetch.by_layer[i] = 0;
}

void mt_tier_set_layer_hook(mt_tier* t, mt_tier_layer_hook fn, void* user) { t->hook.fn = fn, t->hook.user = user; }

void mt_tier_count_hook_dropped(mt_tier* t) { t->counters.hook_dropped.fetch_add(1, std::memory_order_relaxed); }

}  // extern "C"
