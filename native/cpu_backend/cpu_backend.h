// The cpu backend: the device is RAM. Slot blocks are page-aligned allocations (one per
// reserve call, counted against the budget); uploads are memcpys on one upload thread,
// so they overlap the caller's compute; events carry CLOCK_MONOTONIC stamps.
//
//   upload verb --submit--> queue (at most one job per slot: bounded by the slot count)
//                              |
//   upload thread:  pop, stamp start, copy pieces, stamp end --> complete()
//
//   RamBackend    the memory and the clock (slot blocks in RAM, monotonic compute stamps)
//     CpuBackend  + the upload thread above
//       FakeBackend (fake/): a virtual clock and fault injection
//     DiskBackend (disk/): uploads read the model file through the read engine instead
#pragma once
#include <thread>
#include "../backend/backend.h"
#include "../backend/work_queue.h"

namespace mt {

// RAM slots on CLOCK_MONOTONIC: what every host-memory kind shares, whoever moves the bytes.
class RamBackend : public mt_backend {
 public:
  explicit RamBackend(const mt_backend_config& c) : mt_backend(c) {}
  uint8_t* alloc_block(uint64_t bytes) override;
  void free_block(uint8_t* block) override;
  void discard_bytes(uint8_t* p, uint64_t bytes) override;
  int64_t compute_stamp(uint64_t work_bytes) override;
};

class CpuBackend : public RamBackend {
 public:
  explicit CpuBackend(const mt_backend_config& c);
  ~CpuBackend() override;
  void submit(const UploadJob& job) override;
  void drain() override;

 private:
  void run();
  WorkQueue<UploadJob> queue_;  // its lock is never taken while waiting for mu (complete() takes mu unlocked here)
  std::thread thread_;
};

}  // namespace mt
