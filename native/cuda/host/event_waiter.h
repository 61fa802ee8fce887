// A thread that waits for device events in the order they were handed to it and runs each
// one's continuation once its event finished (event_synchronize), off the backend mutex.
// The CUDA backend keeps one per stream: work on one stream finishes in order, so waiting in
// FIFO order never waits behind something that finishes later.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include "../mt_cuda_runtime.h"

namespace mt {

class EventWaiter {
 public:
  // then(rc): rc is event_synchronize's result (0, or the error that ended the work).
  using Then = std::function<void(int rc)>;
  explicit EventWaiter(const mt_cuda_runtime& rt) : rt_(rt), thread_([this] { run(); }) {}
  ~EventWaiter() { stop(); }

  void add(void* event, Then then) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back(event, std::move(then));
    }
    cv_.notify_one();
  }
  // Runs everything added so far, then ends the thread.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    for (;;) {
      std::pair<void*, Then> item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      item.second(rt_.event_synchronize(item.first));
    }
  }
  const mt_cuda_runtime& rt_;
  std::mutex mu_;  // the queue only; never held while a continuation runs
  std::condition_variable cv_;
  std::deque<std::pair<void*, Then>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace mt
