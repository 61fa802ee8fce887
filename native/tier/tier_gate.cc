// The one gate (include/mt_tier.h, mt_tier_set_gate): every byte that enters a slot passes
// here, under one in-flight budget (bytes and transfers) and one ledger by class, in one priority order:
//
//   miss      a routed miss its layer waits on (admitted on the disk tier, kept on a host tier):
//             issued at once, never held; it counts against the budget, so what follows waits
//   prefetch  the next layer's predicted experts: issued from the prefetch queue while the budget
//             has room (tier_prefetch.cc drain), the rest wait or are cancelled with their eval
//   swap      the placement's swaps (its policy's, a replan's): queued per layer, issued at the
//             layer's boundary while the budget has room; one held back there is due as soon as
//             room frees (the next poll between evals issues it, layer 0 first), else at its next boundary
//   warm      a warm start or a fill between requests, awaited by its caller: never held
//
// An upload larger than the whole byte budget still goes when nothing else is in flight (it could
// never fit otherwise). Each upload's bytes leave the count once, when it settles (done or failed).
#include "tier.h"
#include "tier_counters.h"

namespace mt {

bool gate_fits(const mt_tier& t, uint64_t bytes) {
  if (t.gate.inflight_transfers >= t.gate.transfers_max) return false;
  return t.gate.inflight_transfers == 0 || t.gate.inflight_bytes + bytes <= t.gate.bytes_max;
}

void gate_issued(mt_tier& t, InFlight& f, GateClass c) {
  f.gate_class = c;
  f.gate_retired = false;
  t.gate.inflight_bytes += expert_bytes(t, f.layer);
  t.gate.inflight_transfers++;
  t.gate.ledger[c].issued++;
}

void gate_retire(mt_tier& t, InFlight& f) {
  if (f.gate_retired) return;
  f.gate_retired = true;
  const uint64_t bytes = expert_bytes(t, f.layer);
  MT_ASSERT(t.gate.inflight_bytes >= bytes && t.gate.inflight_transfers > 0, "an upload retires what it put in flight");
  t.gate.inflight_bytes -= bytes;
  t.gate.inflight_transfers--;
  (f.ok ? t.gate.ledger[f.gate_class].completed : t.gate.ledger[f.gate_class].failed)++;
}

void gate_issue_held(mt_tier& t) {
  for (int32_t l = 0; l < t.n_layer && t.gate.swaps_queued > 0; l++) {
    const std::vector<Swap>& queue = t.pending[size_t(l)];
    if (queue.empty() || !queue.front().held) continue;
    const int32_t issued = tier_issue_if_idle(t, l, true);
    if (issued > 0)
      t.counters.swaps_started_now.fetch_add(uint64_t(issued),
                                             std::memory_order_relaxed);  // the poll's caller issued them
  }
}

}  // namespace mt

using namespace mt;

extern "C" int mt_tier_set_gate(mt_tier* tier, uint64_t inflight_bytes_max, int32_t inflight_transfers_max,
                                int32_t queue_max) {
  if (inflight_bytes_max < 1 || inflight_transfers_max < 1 || queue_max < 1) return MT_TIER_INVALID;
  std::lock_guard<std::mutex> lock(tier->mu);
  tier->gate.bytes_max = inflight_bytes_max;
  tier->gate.transfers_max = inflight_transfers_max;
  tier->gate.queue_max = queue_max;
  return MT_TIER_OK;
}

extern "C" int32_t mt_tier_cancel_swaps(mt_tier* tier) {
  mt_tier& t = *tier;
  std::lock_guard<std::mutex> lock(t.mu);
  int32_t cancelled = 0;
  for (int32_t l = 0; l < t.n_layer; l++) {
    for (const Swap& s : t.pending[size_t(l)]) {
      t.expert_state[index_of(t, l, s.victim)] = kExpertResident;  // never touched: its slot still holds it
      t.expert_state[index_of(t, l, s.newcomer)] = kExpertNone;
      cancelled++;
    }
    t.pending[size_t(l)].clear();
    t.pending_n[l].store(0, std::memory_order_seq_cst);
  }
  t.gate.ledger[kGateSwap].cancelled += uint64_t(cancelled);
  t.gate.swaps_queued = 0;
  return cancelled;
}
