// The CUDA backend's clock (cuda_clock.h).
#include "cuda_clock.h"
#include <climits>
#include <cmath>
#include <utility>
#include "mt_clock.h"

namespace mt {

DeviceClock::~DeviceClock() {
  base_.reset();  // the last holder destroys its event; every job holding one has finished
  if (stream_ != nullptr) rt_.stream_destroy(stream_);
}

int DeviceClock::start(void* stream) {
  int rc = MT_CUDA_SUCCESS;
  ClockBasePtr first = calibrate(stream, &rc);
  if (!first) return rc;
  if ((rc = rt_.stream_create(&stream_)) != MT_CUDA_SUCCESS) return stream_ = nullptr, rc;
  std::lock_guard<std::mutex> lock(mu_);
  base_ = std::move(first);
  return MT_CUDA_SUCCESS;
}

ClockBasePtr DeviceClock::base() const {
  std::lock_guard<std::mutex> lock(mu_);
  return base_;
}

void DeviceClock::refresh() {
  std::lock_guard<std::mutex> one(refresh_mu_);
  const ClockBasePtr current = base();
  if (!current || mt_monotonic_ns() - current->ns < kBaseRefreshNs) return;
  int rc = MT_CUDA_SUCCESS;
  ClockBasePtr fresh = calibrate(stream_, &rc);
  if (!fresh) return;  // the old base still times events, less finely
  std::lock_guard<std::mutex> lock(mu_);
  base_ = std::move(fresh);
}

// Of up to kBaseTries record + synchronize rounds, the shortest: base_ns is late by its round.
ClockBasePtr DeviceClock::calibrate(void* stream, int* rc) const {
  void* best = nullptr;
  void* candidate = nullptr;
  if ((*rc = rt_.event_create(&best)) != MT_CUDA_SUCCESS) return nullptr;
  if ((*rc = rt_.event_create(&candidate)) != MT_CUDA_SUCCESS) return rt_.event_destroy(best), nullptr;
  int64_t best_round = INT64_MAX, best_ns = 0;
  for (int i = 0; i < kBaseTries && best_round > kBaseRoundGoodNs; i++) {
    const int64_t t0 = mt_monotonic_ns();
    if ((*rc = rt_.event_record(candidate, stream)) != MT_CUDA_SUCCESS ||
        (*rc = rt_.event_synchronize(candidate)) != MT_CUDA_SUCCESS)
      break;
    const int64_t t1 = mt_monotonic_ns();
    if (t1 - t0 < best_round) best_round = t1 - t0, best_ns = t1, std::swap(best, candidate);
  }
  rt_.event_destroy(candidate);
  if (best_round == INT64_MAX) {
    if (*rc == MT_CUDA_SUCCESS) *rc = MT_CUDA_ERROR_UNKNOWN;
    rt_.event_destroy(best);
    return nullptr;
  }
  auto destroy = rt_.event_destroy;
  return ClockBasePtr(new ClockBase{best, best_ns}, [destroy](const ClockBase* b) {
    destroy(b->event);
    delete b;
  });
}

int64_t DeviceClock::span_ns(void* a, void* b) const {
  float ms = 0;
  if (a == nullptr || b == nullptr || rt_.event_elapsed_ms(&ms, a, b) != MT_CUDA_SUCCESS || !std::isfinite(ms))
    return -1;
  return std::llround(double(ms) * 1e6);
}

int64_t DeviceClock::time_of(const ClockBase& base, void* event) const {
  const int64_t ns = span_ns(base.event, event);
  return ns < 0 ? mt_monotonic_ns() : base.ns + ns;
}

}  // namespace mt
