// The simulated runtime's streams and events (sim_runtime.cc), and its expert kernel
// (sim_expert.cc): what the table's calls operate on and run.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include "../mt_cuda_runtime.h"

namespace mt {

// A stream: one thread running operations in the order they were queued.
class SimStream {
 public:
  // An asynchronous failure this stream ran into (0: none): sticky, as CUDA's asynchronous
  // errors are, so every event the stream reaches after it reports it. Set and read by the
  // stream's own operations only.
  int sticky_error = 0;

  SimStream() : thread_([this] { run(); }) {}
  ~SimStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();  // runs what was queued first, as cudaStreamDestroy lets queued work finish
  }
  void enqueue(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ops_.push_back(std::move(op));
      queued_++;
    }
    cv_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = queued_;
    cv_.wait(lock, [&] { return done_ >= target; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !ops_.empty(); });
      if (ops_.empty()) return;
      std::function<void()> op = std::move(ops_.front());
      ops_.pop_front();
      lock.unlock();
      op();
      lock.lock();
      done_++;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ops_;
  uint64_t queued_ = 0, done_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// An event: recorded n times, reached by its stream m <= n times; done when m == n.
struct SimEvent {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, reached = 0;
  int64_t stamp_ns = 0;
  int error = 0;  // its stream's sticky error when it was reached
};

// The expert kernel's scratch bytes, and the kernel itself (the stream runs it).
size_t sim_expert_scratch_bytes(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff, int32_t count);
void sim_expert_ffn(const mt_cuda_expert_args& args);

}  // namespace mt
