// A thread that waits for device events in the order they were handed to it and runs each
// one's continuation once its event finished (event_synchronize), off the backend mutex.
// The CUDA backend keeps one per stream: work on one stream finishes in order, so waiting in
// FIFO order never waits behind something that finishes later.
#pragma once
#include <functional>
#include <thread>
#include <utility>
#include "../../backend/work_queue.h"
#include "../mt_cuda_runtime.h"

namespace mt {

class EventWaiter {
 public:
  // then(rc): rc is event_synchronize's result (0, or the error that ended the work).
  using Then = std::function<void(int rc)>;
  explicit EventWaiter(const mt_cuda_runtime& rt) : rt_(rt), thread_([this] { run(); }) {}
  ~EventWaiter() { stop(); }

  void add(void* event, Then then) { queue_.push({event, std::move(then)}); }
  // Runs everything added so far, then ends the thread. Idempotent.
  void stop() {
    queue_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::pair<void*, Then> item;
    while (queue_.pop(&item)) item.second(rt_.event_synchronize(item.first));
  }
  const mt_cuda_runtime& rt_;
  WorkQueue<std::pair<void*, Then>> queue_;  // its lock is never held while a continuation runs
  std::thread thread_;                       // last: starts once the members above exist
};

}  // namespace mt
