// A prefill's whole-layer path on the disk tier (docs/SPEC.md section 5). A long prompt routes
// nearly every expert of every layer, and routed reads can only start once a layer has routed
// (tier_stream.cc: on-demand). Here a layer's experts are read whole (its gate, up and down
// tensors, as ranges of 1 MiB pieces) before it routes: layer l + 1's are issued when layer l
// begins, so they land while layer l computes. A miss of the layer is then computed from that
// buffer; residents still compute from their slots, and nothing is admitted into a slot.
//
//   buffers  two, one layer each (even layers in 0, odd in 1): 0 is the streamed misses' scratch
//            (grown to a layer's tensors; no miss is streamed on this path), 1 a mapping of its
//            own (the memory plan counts the second layer: src/engine/memory-plan.ts)
//   pieces   a tensor's first bytes up to the engine's alignment, then aligned 1 MiB pieces read
//            straight into the buffer (its address is congruent to the file offset), the tail
//            through a bounce buffer; 8 in flight (the engine's depth): ~8 MiB at the disk, below
//            where this disk chokes (include/mt_io.h)
//   wanted   every expert of the layer, or only those without a slot when no resident of the
//            layer can leave before its bind (mark_wanted): residents compute from their slots
//   reuse    a buffer is refilled only once every read into it ended (bulk_settle)
//
// The path is set between evals (mt_tier_set_prefill_path); one-row evals always take on-demand.
#include <sys/mman.h>
#include <algorithm>
#include <cstdio>
#include "tier.h"
#include "tier_counters.h"
#include "tier_hook.h"
#include "tier_reads.h"

namespace mt {
namespace {

constexpr uint64_t kPieceBytes = uint64_t(1) << 20;

uint64_t align_down(uint64_t x, uint64_t a) { return x / a * a; }

uint64_t tensor_offset(const mt_tier& t, const uint8_t* data) { return uint64_t(data - t.reads.base); }

// Bytes one buffer needs for the largest layer: each tensor with an alignment's room in front.
size_t buffer_bytes(const mt_tier& t, uint64_t align) {
  size_t most = 0;
  for (int32_t l = 0; l < t.n_layer; l++) {
    const mt_layer_experts& e = t.experts[size_t(l)];
    const size_t n = size_t(t.n_expert);
    most = std::max(most, size_t(3 * align) + n * (e.gate_bytes + e.up_bytes + e.down_bytes) + size_t(3 * align));
  }
  return most;
}

bool map_second(mt_tier& t, size_t bytes, char* err, size_t err_bytes) {
  if (t.reads.bulk_second && t.reads.bulk_second.get_deleter().bytes >= bytes) return true;
  for (mt_io_id id : t.reads.bulk[1].ids) {  // nothing may still write the old mapping
    mt_io_info info{};
    mt_io_wait(t.reads.io, id, &info, nullptr, 0);
  }
  t.reads.bulk_second.reset();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::snprintf(err, err_bytes, "tier: whole-layer prefill: out of memory for a layer buffer (%zu bytes)", bytes);
    return false;
  }
  t.reads.bulk_second = ScratchMap(static_cast<uint8_t*>(p), ScratchUnmap{bytes});
  return true;
}

// The expert whose bytes the file offset falls in (layer's gate, up or down tensor), for a
// message in tier_stream.cc's read_failed form (src/native/eval-errors.ts parses it).
int32_t expert_at(const mt_tier& t, int32_t layer, uint64_t offset) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  const mt_matrix_desc* tensors[3] = {&e.gate, &e.up, &e.down};
  const size_t per_expert[3] = {e.gate_bytes, e.up_bytes, e.down_bytes};
  for (int i = 0; i < 3; i++) {
    const uint64_t from = tensor_offset(t, tensors[i]->data);
    if (offset >= from && offset < from + uint64_t(t.n_expert) * per_expert[i])
      return int32_t((offset - from) / per_expert[i]);
  }
  return 0;
}

void whole_layer_failed(mt_tier& t, int32_t layer, uint64_t offset, uint64_t bytes, const char* why, char* err,
                        size_t err_bytes) {
  t.counters.stream_failures.fetch_add(1, std::memory_order_relaxed);
  std::snprintf(err, err_bytes,
                "expert read: %s: layer %d expert %d at offset %llu (%llu bytes): %s (reading the whole layer)",
                t.reads.path.c_str(), layer, expert_at(t, layer, offset), (unsigned long long)offset,
                (unsigned long long)bytes, why);
}

// Waits for every read into buffer b (they write it), then forgets them.
void settle_buffer(mt_tier& t, BulkBuffer& b) {
  for (mt_io_id id : b.ids) {
    mt_io_info info{};
    mt_io_wait(t.reads.io, id, &info, nullptr, 0);
  }
  b.ids.clear();
  b.layer = -1, b.landed = false;
}

// The experts the layer's read takes: all of them, or, where no resident of the layer can leave
// before its bind, only those without a slot. Residents leave through swaps (none queued or in
// flight for the layer) and the prefill replan's (its hook unset); a whole-layer prefill admits
// nothing, and prefetch runs in one-token evals only. Counted as the on-demand path counts reads.
void mark_wanted(mt_tier& t, int32_t layer, BulkBuffer& b) {
  const bool stable = t.hook.fn == nullptr && t.pending_n[layer].load(std::memory_order_seq_cst) == 0 &&
                      t.flight_n[layer].load(std::memory_order_acquire) == 0;
  b.has.assign(size_t(t.n_expert), 1);
  for (int32_t x = 0; x < t.n_expert; x++) {
    const size_t index = index_of(t, layer, x);
    if (stable && t.residency[index].load(std::memory_order_acquire) >= 0) {
      b.has[size_t(x)] = 0;
      continue;
    }
    t.counters.expert_reads.fetch_add(1, std::memory_order_relaxed);
    if (t.reads.marks[index] == 0)
      t.reads.marks[index] = 1, t.counters.distinct_experts_read.fetch_add(1, std::memory_order_relaxed);
  }
}

// Issues layer's tensors into buffer b. false (err): a read was refused; what was issued is settled.
bool issue_layer(mt_tier& t, BulkBuffer& b, uint8_t* base, int32_t layer, char* err, size_t err_bytes) {
  settle_buffer(t, b);
  if (base == t.reads.scratch.get()) tier_stream_forget(t);  // buffer 0 writes over the streamed entries
  mt_io_stats io{};
  mt_io_stats_get(t.reads.io, &io);
  const uint64_t align = std::max<uint64_t>(1, io.alignment_bytes);
  const mt_layer_experts& e = t.experts[size_t(layer)];
  const mt_matrix_desc* tensors[3] = {&e.gate, &e.up, &e.down};
  const size_t per_expert[3] = {e.gate_bytes, e.up_bytes, e.down_bytes};
  uint8_t* at = base;
  b.layer = layer;
  mark_wanted(t, layer, b);
  for (int i = 0; i < 3; i++) {
    const uint64_t from = tensor_offset(t, tensors[i]->data), to = from + uint64_t(t.n_expert) * per_expert[i];
    // dst congruent to the file offset modulo the alignment: aligned pieces go straight in.
    uint8_t* dst = at + (from % align);
    b.tensor[i] = dst;
    for (int32_t x0 = 0; x0 < t.n_expert;) {  // each run of wanted experts, in pieces
      if (!b.has[size_t(x0)]) {
        x0++;
        continue;
      }
      int32_t x1 = x0;
      while (x1 < t.n_expert && b.has[size_t(x1)]) x1++;
      const uint64_t run_to = from + uint64_t(x1) * per_expert[i];
      for (uint64_t off = from + uint64_t(x0) * per_expert[i]; off < run_to;) {
        // Pieces end on 1 MiB boundaries of the file: the middle ones aligned at both ends.
        const uint64_t next = std::min(run_to, align_down(off, kPieceBytes) + kPieceBytes);
        mt_io_id id = 0;
        char why[160] = "";
        if (mt_io_read_lane(t.reads.io, kReadLane, off, next - off, dst + (off - from), layer, &id, why, sizeof why) !=
            MT_IO_OK) {
          whole_layer_failed(t, layer, off, next - off, why, err, err_bytes);
          settle_buffer(t, b);
          return false;
        }
        b.ids.push_back(id);
        off = next;
      }
      x0 = x1;
    }
    at = base + align_down(size_t(dst + (to - from) - base) + align - 1, align);
  }
  t.counters.bulk_layers.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool tier_bulk_begin(mt_tier& t, int32_t layer, char* err, size_t err_bytes) {
  if (t.reads.prefill_path.load(std::memory_order_relaxed) != MT_TIER_PREFILL_WHOLE_LAYER || t.reads.io == nullptr)
    return true;
  mt_io_stats io{};
  mt_io_stats_get(t.reads.io, &io);
  const size_t bytes = buffer_bytes(t, std::max<uint64_t>(1, io.alignment_bytes));
  if (!tier_stream_reserve(t, bytes, err, err_bytes) || !map_second(t, bytes, err, err_bytes)) return false;
  uint8_t* bases[2] = {t.reads.scratch.get(), t.reads.bulk_second.get()};
  for (int32_t l = layer; l <= layer + 1 && l < t.n_layer; l++) {
    BulkBuffer& b = t.reads.bulk[size_t(l % 2)];
    if (b.layer == l) continue;  // issued a layer ahead (or by an earlier chunk of this eval)
    if (!issue_layer(t, b, bases[l % 2], l, err, err_bytes)) return false;
  }
  return true;
}

bool tier_bulk_active(const mt_tier& t, int32_t layer) {
  return t.reads.prefill_path.load(std::memory_order_relaxed) == MT_TIER_PREFILL_WHOLE_LAYER &&
         t.reads.bulk[size_t(layer % 2)].layer == layer;
}

int tier_bulk_check(mt_tier& t, int32_t layer, bool wait, char* err, size_t err_bytes) {
  BulkBuffer& b = t.reads.bulk[size_t(layer % 2)];
  if (b.landed) return 1;
  for (mt_io_id id : b.ids) {
    mt_io_info info{};
    const int rc =
        wait ? mt_io_wait(t.reads.io, id, &info, nullptr, 0) : mt_io_query(t.reads.io, id, &info, nullptr, 0);
    if (rc == MT_IO_OK && info.state == MT_IO_PENDING) return 0;
    if (rc != MT_IO_OK || info.state == MT_IO_FAILED) {
      whole_layer_failed(t, layer, info.file_offset, info.bytes,
                         rc != MT_IO_OK ? "unknown to the read engine" : info.reason, err, err_bytes);
      return -1;
    }
  }
  b.landed = true;
  return 1;
}

bool tier_bulk_holds(const mt_tier& t, int32_t layer, int32_t expert) {
  const BulkBuffer& b = t.reads.bulk[size_t(layer % 2)];
  return b.layer == layer && b.has[size_t(expert)] != 0;
}

void tier_bulk_bind(const mt_tier& t, int32_t layer, mt_expert_binding& run) {
  const BulkBuffer& b = t.reads.bulk[size_t(layer % 2)];
  const mt_layer_experts& e = t.experts[size_t(layer)];
  const size_t x = size_t(run.expert);
  run.gate = b.tensor[0] + x * e.gate_bytes, run.up = b.tensor[1] + x * e.up_bytes,
  run.down = b.tensor[2] + x * e.down_bytes;
  run.type = e.gate.type;
  run.pending = 0;
}

void tier_bulk_settle(mt_tier& t) {
  for (BulkBuffer& b : t.reads.bulk) settle_buffer(t, b);
}

}  // namespace mt

using namespace mt;

extern "C" int mt_tier_set_prefill_path(mt_tier* tier, int32_t path) {
  mt_tier& t = *tier;
  if (path != MT_TIER_PREFILL_ON_DEMAND && path != MT_TIER_PREFILL_WHOLE_LAYER) return MT_TIER_INVALID;
  if (path == MT_TIER_PREFILL_WHOLE_LAYER && t.reads.io == nullptr) return MT_TIER_INVALID;
  // Device slots (tier_remote.cc): the whole-layer path is not wired beside the remote runs; on demand only.
  if (path == MT_TIER_PREFILL_WHOLE_LAYER && t.remote != nullptr) return MT_TIER_INVALID;
  t.reads.prefill_path.store(path, std::memory_order_relaxed);
  return MT_TIER_OK;
}

extern "C" void mt_tier_path_by_layer(mt_tier* tier, uint64_t* out, size_t n) {
  for (size_t i = 0; i < n && i < size_t(tier->n_layer) * 2; i++)
    out[i] = tier->reads.path_calls[i].load(std::memory_order_relaxed);
}
