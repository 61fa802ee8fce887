// The CUDA backend's clock: device event times on CLOCK_MONOTONIC (the clock of Node's
// process.hrtime.bigint()), as the other kinds report them.
//
//   base     an event and base_ns, CLOCK_MONOTONIC read once it finished (the shortest of up to
//            kBaseTries record + synchronize rounds: base_ns is late by that round, and every
//            time inherits it)
//   time     base_ns + round(elapsed_ms(base, event) * 1e6)
//   span     round(elapsed_ms(a, b) * 1e6): an upload's end is its start plus this, so its
//            duration keeps elapsed_ms's precision however old the base is
//   refresh  elapsed_ms is a float: its resolution falls as the base ages (1 us at 16 s, 0.25 ms
//            after an hour), so a base older than kBaseRefreshNs is replaced by a fresh one,
//            stamped on the clock's own idle stream. Each event is timed against the base in
//            effect when it was recorded (bases are shared: an old one lives while used).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include "../mt_cuda_runtime.h"

namespace mt {

// Rounds of a base's calibration at most, and a round short enough to stop at.
constexpr int kBaseTries = 16;
constexpr int64_t kBaseRoundGoodNs = 20000;
// A base this old is replaced (float ms keeps ~0.25 us of resolution up to here).
constexpr int64_t kBaseRefreshNs = int64_t(4) * 1000 * 1000 * 1000;
static_assert(kBaseTries >= 1, "a base is stamped at least once");

struct ClockBase {
  void* event = nullptr;
  int64_t ns = 0;
};
using ClockBasePtr = std::shared_ptr<const ClockBase>;

class DeviceClock {
 public:
  explicit DeviceClock(const mt_cuda_runtime& rt) : rt_(rt) {}
  ~DeviceClock();
  // The first base, on `stream` (idle at creation), and the clock's own stream for refreshes.
  int start(void* stream);
  ClockBasePtr base() const;
  // Off the backend mutex: replaces a base older than kBaseRefreshNs (a failure keeps the old one).
  void refresh();
  // The event's instant, or the host's clock now if the runtime cannot time it.
  int64_t time_of(const ClockBase& base, void* event) const;
  // ns from a to b, or -1 if the runtime cannot time them.
  int64_t span_ns(void* a, void* b) const;

 private:
  ClockBasePtr calibrate(void* stream, int* rc) const;

  const mt_cuda_runtime& rt_;
  void* stream_ = nullptr;
  mutable std::mutex mu_;  // base_ only; held for a copy or a swap, never across a runtime call
  std::mutex refresh_mu_;  // one refresh at a time
  ClockBasePtr base_;
};

}  // namespace mt
