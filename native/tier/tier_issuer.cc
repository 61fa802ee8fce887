// The boundary hand-off: after layer l computed, the eval thread posts l (an atomic flag and a
// sequence number: no system call, no lock) and goes on to layer l + 1. The issuer thread,
// under the tier's lock, settles l's uploads (retrying a failed in-place one) and issues l's
// queued swaps, unless compute is on l again by then (the next boundary posts it again). So
// issuing costs the compute a queue push; the allocations, backend calls, locks and wake-ups of
// an issue happen on the issuer (measured before: 40-300 us at a swap boundary on the eval
// thread, from its first touches of fresh memory and the backend's wake-up of its copier).
// The issuer runs at normal priority: its timed wake-ups take a few microseconds from whatever
// runs then, and it issues within ~kPollUs of a boundary even on busy cores (at SCHED_BATCH it
// waited for the next time slice, up to milliseconds: a whole request of a small model).
//
// The eval thread never wakes the issuer: while swaps are queued the issuer looks at the posts
// every kPollUs (a timed wait), and otherwise sleeps until a request
// (mt_tier_request_swap, on the caller's thread) kicks it. Each look costs the issuer a few
// microseconds of a core, only while there is work to issue or settle.
//
//   eval thread                      issuer                               caller
//   posted[l] = 1; seq++   ------->  every kPollUs while busy: for each  request: queue;
//                                    l with posted[l]: exchange 0, lock  kicks++; if sleepers:
//                                    mu, settle l, issue if idle         lock, notify
//                                    idle: sleeps until kicked
#include <pthread.h>
#include <chrono>
#include <cstdlib>
#include "mt_clock.h"
#include "tier.h"
#include "tier_counters.h"
#include "tier_issuer.h"

namespace mt {
namespace {

// How often a busy issuer looks at the posts: an upload starts at most this much after its
// boundary (plus scheduling), against a layer of ~100 us (small preset) to ~1 ms.
constexpr int kPollUs = 50;
// No post for this long while swaps are queued: no eval runs; stop polling until kicked.
constexpr int kQuietMs = 20;

// The debug build's lag (tests): the issuer preempted, a post in hand (see handle).
void debug_lag(const Issuer& is) {
#if MT_DEBUG_ASSERTS_ENABLED
  if (is.debug_lag_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(is.debug_lag_us));
#else
  (void)is;
#endif
}

// epoch: the post's (tier_issuer.h): a stale post settles its layer but issues nothing.
// on_issuer: the issuer thread's own round (not a flush).
void handle(mt_tier& t, int32_t layer, uint64_t epoch, bool on_issuer) {
  if (on_issuer) debug_lag(t.issuer);  // preempted with the post in hand
  std::lock_guard<std::mutex> lock(t.mu);
  if (on_issuer) debug_lag(t.issuer);  // and again holding the lock: a layer's promotion finds it busy
  tier_settle_layer(t, layer, true, false);
  if (t.pending[size_t(layer)].empty()) return;
  if (epoch != t.issuer.epoch.load(std::memory_order_relaxed)) {
    t.counters.stale_posts.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int32_t issued = tier_issue_if_idle(t, layer);
  if (issued > 0) t.counters.swaps_by_issuer.fetch_add(uint64_t(issued), std::memory_order_relaxed);
}

// Swaps queued somewhere: their boundaries will be posted, so poll. seq_cst: a Dekker pair with
// the caller's kick (it queues, then reads sleepers; this thread counts itself a sleeper, then
// reads the queues). Uploads in flight alone do not keep it polling (an idle engine would spin):
// a boundary posted only to retry a failed in-place upload waits for the next kick or swap.
bool busy(const mt_tier& t) {
  for (int32_t l = 0; l < t.n_layer; l++)
    if (t.pending_n[l].load(std::memory_order_seq_cst) > 0) return true;
  return false;
}

void run(mt_tier* tp) {
  mt_tier& t = *tp;
  Issuer& is = t.issuer;
  uint64_t seen = 0, kicks_seen = 0, quiet_seq = 0;
  int64_t quiet_since_ns = mt_monotonic_ns();
  for (;;) {
    const uint64_t now = is.seq.load(std::memory_order_seq_cst);
    if (now != seen) {
      seen = now;
      for (int32_t l = 0; l < t.n_layer; l++)
        if (const uint64_t epoch = is.posted[l].exchange(0, std::memory_order_acq_rel)) handle(t, l, epoch, true);
      continue;  // posts during the round move seq again
    }
    if (is.stop.load()) return;
    std::unique_lock<std::mutex> lock(is.mu);
    is.sleepers.fetch_add(1, std::memory_order_seq_cst);
    auto woken = [&] { return is.seq.load() != seen || is.kicks.load() != kicks_seen || is.stop.load(); };
    // Poll while swaps are queued and the evals go on posting; a queue nobody posts for (the
    // engine idles between requests) stops the polling after kQuietMs, until the next kick (a
    // request, or the start of an eval: mt_tier_kick).
    const int64_t now_ns = mt_monotonic_ns();
    if (now != quiet_seq) quiet_seq = now, quiet_since_ns = now_ns;
    const bool quiet = now_ns - quiet_since_ns > int64_t(kQuietMs) * 1000000;
    if (busy(t) && !quiet)
      is.cv.wait_for(lock, std::chrono::microseconds(kPollUs), woken);
    else
      is.cv.wait(lock, woken);
    const uint64_t kicks = is.kicks.load();
    if (kicks != kicks_seen)
      quiet_since_ns = mt_monotonic_ns();  // a kick (a request, an eval starting) restarts the polling
    kicks_seen = kicks;
    is.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void new_epoch(mt_tier& t) {
  std::lock_guard<std::mutex> lock(t.mu);
  t.issuer.epoch.fetch_add(1, std::memory_order_release);
}

}  // namespace

bool issuer_start(mt_tier& t, char* err, size_t err_bytes) {
  Issuer& is = t.issuer;
  is.posted.reset(new std::atomic<uint64_t>[size_t(t.n_layer)]);
  for (int32_t l = 0; l < t.n_layer; l++) is.posted[l].store(0);
#if MT_DEBUG_ASSERTS_ENABLED
  if (const char* lag = std::getenv("MOETIER_DEBUG_ISSUER_LAG_US")) is.debug_lag_us = std::atoi(lag);
#endif
  try {
    is.thread = std::thread(run, &t);
  } catch (const std::exception& e) {
    std::snprintf(err, err_bytes, "createTier: could not start the tier's issuer thread: %s", e.what());
    return false;
  }
  pthread_setname_np(is.thread.native_handle(), "moetier-issuer");
  return true;
}

void issuer_stop(mt_tier& t) {
  Issuer& is = t.issuer;
  if (!is.thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(is.mu);
    is.stop.store(true);
  }
  is.cv.notify_all();
  is.thread.join();
}

void issuer_post(mt_tier& t, int32_t layer) {
  Issuer& is = t.issuer;
  is.posted[layer].store(is.epoch.load(std::memory_order_acquire), std::memory_order_release);
  is.seq.fetch_add(1, std::memory_order_release);
  t.counters.boundaries_posted.fetch_add(1, std::memory_order_relaxed);
}

void issuer_flush(mt_tier& t) {
  Issuer& is = t.issuer;
  if (!is.thread.joinable()) return;
  for (int32_t l = 0; l < t.n_layer; l++)
    if (const uint64_t epoch = is.posted[l].exchange(0, std::memory_order_acq_rel)) handle(t, l, epoch, false);
  new_epoch(t);
}

void issuer_eval_begins(mt_tier& t) {
  if (!t.issuer.thread.joinable()) return;
  new_epoch(t);
  if (busy(t)) issuer_kick(t);
}

void issuer_kick(mt_tier& t) {
  Issuer& is = t.issuer;
  if (!is.thread.joinable()) return;  // a virtual clock: no issuer
  is.kicks.fetch_add(1, std::memory_order_seq_cst);
  if (is.sleepers.load(std::memory_order_seq_cst) == 0) return;
  std::lock_guard<std::mutex> lock(is.mu);
  is.cv.notify_one();
}

}  // namespace mt
