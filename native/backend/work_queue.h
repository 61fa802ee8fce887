// A FIFO that one worker thread drains (the cpu backend's copier, the cuda backend's staging
// thread and event waiters): push from any thread; pop blocks until an item is there, and after
// stop returns false once the queue is empty, so everything pushed before stop still runs.
// The lock is the queue's alone: never held while an item runs.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>
#include "mt_assert.h"

namespace mt {

template <typename T>
class WorkQueue {
 public:
  // Returns the items queued after this one was added (checks on the backlog).
  size_t push(T item) {
    size_t queued = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      MT_ASSERT(!stopping_, "nothing is pushed once stop began (the owner is closed first)");
      items_.push_back(std::move(item));
      queued = items_.size();
    }
    cv_.notify_one();
    return queued;
  }
  bool pop(T* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopping_ || !items_.empty(); });
    if (items_.empty()) return false;
    *out = std::move(items_.front());
    items_.pop_front();
    return true;
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.empty();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool stopping_ = false;
};

}  // namespace mt
