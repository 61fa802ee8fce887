// The tier's counters: monotone atomics that any thread adds to (relaxed: each is a count, not a
// hand-off), and the one table (kCounterTable) by which mt_tier_stats_get copies them into
// mt_tier_stats and mt_tier_reset_stats zeroes those counted from the stats mark.
//
//   owner    mt_tier::counters (tier.h); no lock guards a field: each is an atomic
//   writers  bind and the read paths (eval thread), the issuer, the caller's verbs
//   readers  mt_tier_stats_get (tier.cc), through the table
//
// A new counter is one field here and one row of the table (its mt_tier_stats field beside it).
#pragma once
#include <atomic>
#include <cstdint>
#include "mt_tier.h"

namespace mt {

struct TierCounters {
  // Routed rows (bind, eval thread): from slots / from host copies or the container / the container.
  std::atomic<uint64_t> hits{0}, misses{0}, lazy_misses{0};
  // The layer hook's calls and their time (eval thread); dropped: the addon's queue was full.
  std::atomic<uint64_t> hook_calls{0}, hook_ns{0}, hook_dropped{0};
  std::atomic<uint64_t> swaps_started_now{0};  // issue_now swaps the caller issued itself
  std::atomic<uint64_t> swaps_by_issuer{0}, boundaries_posted{0};
  std::atomic<uint64_t> stale_posts{0};  // posts the issuer reached after their epoch: nothing issued (tier_issuer.h)
  // The disk tier's misses (tier_stream.cc, eval thread).
  std::atomic<uint64_t> streamed_reads{0}, streamed_bytes{0}, stream_failures{0};
  std::atomic<uint64_t> admitted_reads{0};  // misses read into a slot before they ran (uploads, counted there too)
  std::atomic<uint64_t> stall_ns{0};        // time the forward pass waited for reads with nothing else to run
  // Reads of routed misses a call made itself (admitted, not waiting on an earlier upload, or
  // streamed), and the distinct experts they read, from the stats mark (TierReads::marks): a
  // prefill's reads per distinct expert, 1.0 at best.
  std::atomic<uint64_t> expert_reads{0}, distinct_experts_read{0};
  std::atomic<uint64_t> bulk_layers{0};  // layers read whole since creation (tier_bulk.cc)
  // The routes' prefetch outcomes (reset at the stats mark; by layer: TierPrefetch::by_layer).
  std::atomic<uint64_t> prefetch_covered{0}, prefetch_late{0}, prefetch_late_ns{0}, prefetch_wasted{0},
      prefetch_uncovered{0}, prefetch_would_issue{0}, prefetch_would_cover{0};
  // The prefetch tasks' ledger (never reset): each queued task ends once, as issued (then completed
  // or failed), cancelled or dropped; its bytes enter on queueing and retire at that end. The two
  // byte counts move under mt_tier::mu (where TierPrefetch::inflight_bytes moves with them).
  std::atomic<uint64_t> prefetch_queued{0}, prefetch_refused{0}, prefetch_dropped{0}, prefetch_cancelled{0},
      prefetch_issued{0}, prefetch_completed{0}, prefetch_failed{0}, prefetch_admitted_bytes{0},
      prefetch_retired_bytes{0};
};

// One counter's row: where it is copied to, whether the stats mark zeroes it, and whether it is
// read under mt_tier::mu (a count that must agree with state mu guards).
struct CounterRow {
  std::atomic<uint64_t> TierCounters::* counter;
  uint64_t mt_tier_stats::* stat;
  bool since_mark;
  bool under_mu;
};

constexpr CounterRow kCounterTable[] = {
    {&TierCounters::hits, &mt_tier_stats::hits, true, false},
    {&TierCounters::misses, &mt_tier_stats::misses, true, false},
    {&TierCounters::lazy_misses, &mt_tier_stats::lazy_misses, true, false},
    {&TierCounters::hook_calls, &mt_tier_stats::hook_calls, false, false},
    {&TierCounters::hook_ns, &mt_tier_stats::hook_ns, false, false},
    {&TierCounters::hook_dropped, &mt_tier_stats::hook_dropped, false, false},
    {&TierCounters::swaps_started_now, &mt_tier_stats::swaps_started_now, false, false},
    {&TierCounters::swaps_by_issuer, &mt_tier_stats::swaps_issued_by_issuer, false, false},
    {&TierCounters::boundaries_posted, &mt_tier_stats::boundaries_posted, false, false},
    {&TierCounters::stale_posts, &mt_tier_stats::stale_posts, false, false},
    {&TierCounters::streamed_reads, &mt_tier_stats::streamed_reads, true, false},
    {&TierCounters::streamed_bytes, &mt_tier_stats::streamed_bytes, true, false},
    {&TierCounters::stream_failures, &mt_tier_stats::stream_failures, false, false},
    {&TierCounters::admitted_reads, &mt_tier_stats::admitted_reads, true, false},
    {&TierCounters::stall_ns, &mt_tier_stats::stall_ns, true, false},
    {&TierCounters::expert_reads, &mt_tier_stats::expert_reads, true, false},
    {&TierCounters::distinct_experts_read, &mt_tier_stats::distinct_experts_read, true, false},
    {&TierCounters::bulk_layers, &mt_tier_stats::bulk_layers, false, false},
    {&TierCounters::prefetch_covered, &mt_tier_stats::prefetch_covered, true, false},
    {&TierCounters::prefetch_late, &mt_tier_stats::prefetch_late, true, false},
    {&TierCounters::prefetch_late_ns, &mt_tier_stats::prefetch_late_ns, true, false},
    {&TierCounters::prefetch_wasted, &mt_tier_stats::prefetch_wasted, true, false},
    {&TierCounters::prefetch_uncovered, &mt_tier_stats::prefetch_uncovered, true, false},
    {&TierCounters::prefetch_would_issue, &mt_tier_stats::prefetch_would_issue, true, false},
    {&TierCounters::prefetch_would_cover, &mt_tier_stats::prefetch_would_cover, true, false},
    {&TierCounters::prefetch_queued, &mt_tier_stats::prefetch_queued, false, false},
    {&TierCounters::prefetch_refused, &mt_tier_stats::prefetch_refused, false, false},
    {&TierCounters::prefetch_issued, &mt_tier_stats::prefetch_issued, false, false},
    {&TierCounters::prefetch_completed, &mt_tier_stats::prefetch_completed, false, false},
    {&TierCounters::prefetch_failed, &mt_tier_stats::prefetch_failed, false, false},
    {&TierCounters::prefetch_cancelled, &mt_tier_stats::prefetch_cancelled, false, false},
    {&TierCounters::prefetch_dropped, &mt_tier_stats::prefetch_dropped, false, false},
    {&TierCounters::prefetch_admitted_bytes, &mt_tier_stats::prefetch_admitted_bytes, false, true},
    {&TierCounters::prefetch_retired_bytes, &mt_tier_stats::prefetch_retired_bytes, false, true},
};

}  // namespace mt
