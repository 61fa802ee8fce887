// The tier's issuer thread (tier_issuer.cc): after a layer computed, the eval thread posts it here
// (an atomic flag and a sequence number: no system call, no lock); the issuer, under mt_tier::mu,
// settles the layer's uploads and issues its queued swaps unless compute is on it again.
//
//   owner    mt_tier::issuer (tier.h): no thread with a virtual clock (the fake backend issues inline)
//   guards   posted, seq, kicks, sleepers, stop: atomics (posted / seq: eval thread release, issuer
//            acquire; kicks / sleepers: seq_cst, a Dekker pair with the swap queues)
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
  std::unique_ptr<std::atomic<uint8_t>[]> posted;  // [nLayer]: 1 = the layer passed a boundary with work
  std::atomic<uint64_t> seq{0};                    // moves once per post
  std::atomic<uint64_t> kicks{0};                  // moves once per request (work may come)
  std::atomic<int32_t> sleepers{0};                // seq_cst with the queues and kicks (Dekker)
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
// Between evals (any thread): handles the posts the issuer has not reached yet.
void issuer_flush(mt_tier& t);
// A caller queued a swap: an idle issuer starts polling the posts.
void issuer_kick(mt_tier& t);
// An eval is about to start: an issuer that stopped polling a quiet queue starts again.
void issuer_kick_if_pending(mt_tier& t);

}  // namespace mt
