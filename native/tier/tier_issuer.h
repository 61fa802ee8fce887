// The tier's issuer thread (tier_issuer.cc): after a layer computed, the eval thread posts it here
// (an atomic flag and a sequence number: no system call, no lock); the issuer, under mt_tier::mu,
// settles the layer's uploads and issues its queued swaps unless compute is on it again.
//
//   owner    mt_tier::issuer (tier.h): no thread with a virtual clock (the fake backend issues inline)
//   guards   posted, seq, kicks, sleepers, stop: atomics (posted / seq: eval thread release, issuer
//            acquire; kicks / sleepers: seq_cst, a Dekker pair with the swap queues)
//            epoch: written under mt_tier::mu (at a flush and at an eval's start), read at a post
//            and, under mt_tier::mu, before an issue
//            mu, cv: only the issuer's sleep and the kick that ends it
//            thread: started at create, joined at free
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>

namespace mt {

struct Issuer {
  // [nLayer]: 0, or the epoch in which the layer passed a boundary with work. A post is issued only
  // in its own epoch: one the issuer took but reached after the flush between evals (or after the
  // next eval started) is stale, and issuing it then would evict a victim before its layer runs
  // again in the next eval, with no host copy built for it (the poll that orders the copies came
  // first). Its swaps wait for the layer's next boundary, which posts again.
  std::unique_ptr<std::atomic<uint64_t>[]> posted;
  std::atomic<uint64_t> epoch{1};
  int32_t debug_lag_us =
      0;  // debug build: MOETIER_DEBUG_ISSUER_LAG_US, two sleeps with a post in hand, before and holding mt_tier::mu
  std::atomic<uint64_t> seq{0};      // moves once per post
  std::atomic<uint64_t> kicks{0};    // moves once per request (work may come)
  std::atomic<int32_t> sleepers{0};  // seq_cst with the queues and kicks (Dekker)
  std::atomic<bool> stop{false};
  std::mutex mu;  // only for the sleep
  std::condition_variable cv;
  std::thread thread;
};

}  // namespace mt

struct mt_tier;

namespace mt {

// tier_issuer.cc: the boundary hand-off. start: false (err) when no thread could be made.
bool issuer_start(mt_tier& t, char* err, size_t err_bytes);
void issuer_stop(mt_tier& t);
// Eval thread, after layer computed: a queue push (no system call, no lock).
void issuer_post(mt_tier& t, int32_t layer);
// Between evals (any thread): handles the posts the issuer has not reached yet, then starts a new
// epoch (the issuer's own posts taken before it go stale).
void issuer_flush(mt_tier& t);
// An eval is about to start (the caller's thread): a new epoch, then kick an issuer with work.
void issuer_eval_begins(mt_tier& t);
// A caller queued a swap: an idle issuer starts polling the posts.
void issuer_kick(mt_tier& t);

}  // namespace mt
