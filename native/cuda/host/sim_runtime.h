// The simulated CUDA runtime (backend kind cuda-sim; mt_cuda_runtime.h says what it is for).
// The table's calls carry no context, so each simulated device is one of a fixed set of
// instances, each with its own table of functions bound to it: a cuda-sim backend takes one
// at creation and gives it back when destroyed, so several run side by side with their own
// faults and memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include "../mt_cuda_runtime.h"

namespace mt {

// Simulated devices alive at once at most.
constexpr int kSimDevicesMax = 16;
// A simulated device's memory when the config names none.
constexpr uint64_t kSimDeviceBytesDefault = uint64_t(1) << 30;

struct SimFaults {
  uint64_t device_bytes = kSimDeviceBytesDefault;  // device allocations past this fail (error 2)
  uint64_t fail_copy_after_bytes = 0;              // 0: never; else the h2d copy crossing it fails (once)
  bool async_copy_fault = false;  // the failing copy is accepted and its error turns up, sticky, in later events
  bool no_device = false;         // get_device_count reports error 100
};

// Fills *out with a free instance's table; -1 if all kSimDevicesMax are taken.
int sim_runtime_acquire(const SimFaults& faults, mt_cuda_runtime* out);
// Gives the instance back once everything allocated on it was freed.
void sim_runtime_release(const mt_cuda_runtime& table);

}  // namespace mt
