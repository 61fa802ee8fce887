// The simulated CUDA runtime (sim_runtime.h): a stream is a host thread running its queued
// operations in order, device memory is host memory counted against the simulated device's
// size, an event is stamped with CLOCK_MONOTONIC when its stream reaches it, and the expert
// kernel is the CPU kernels (mt_kernels.h) in the forward pass's order, so its y equals the
// cpu backend's bit for bit. Errors use cudaError_t's numbers (mt_cuda_runtime.h).
#include "sim_runtime.h"
#include "sim_objects.h"
#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include "mt_assert.h"
#include "mt_clock.h"
#include "mt_kernels.h"

namespace mt {
namespace {

constexpr int kInvalidValue = 1;  // cudaErrorInvalidValue
constexpr int kInvalidResourceHandle = 400;

// One simulated device: its faults and what is allocated on it.
struct SimDevice {
  std::mutex mu;
  bool in_use = false;
  SimFaults faults;
  uint64_t used_bytes = 0, h2d_bytes = 0;
  std::unordered_map<void*, size_t> allocations;
  int64_t pinned = 0, streams = 0, events = 0;  // live objects, checked at release
};

std::array<SimDevice, kSimDevicesMax>& devices() {
  static std::array<SimDevice, kSimDevicesMax> all;
  return all;
}

// --- calls that are the same on every instance ---

int set_device(int device) { return device == 0 ? 0 : kInvalidValue; }
int device_name(int, char* out, size_t out_bytes) {
  if (out_bytes > 0) std::snprintf(out, out_bytes, "%s", "simulated device");
  return 0;
}
const char* error_string(int error) {
  switch (error) {
    case 0:
      return "no error";
    case kInvalidValue:
      return "invalid argument";
    case MT_CUDA_ERROR_MEMORY_ALLOCATION:
      return "out of memory (simulated device)";
    case MT_CUDA_ERROR_INSUFFICIENT_DRIVER:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case MT_CUDA_ERROR_NO_DEVICE:
      return "no CUDA-capable device is detected (simulated)";
    case kInvalidResourceHandle:
      return "invalid resource handle";
    case MT_CUDA_ERROR_NOT_READY:
      return "device not ready";
    default:
      return "unspecified launch failure (simulated copy failure)";
  }
}
int stream_synchronize(void* s) {
  if (s == nullptr) return kInvalidResourceHandle;
  static_cast<SimStream*>(s)->synchronize();
  return 0;
}
int event_record(void* e, void* s) {
  if (e == nullptr || s == nullptr) return kInvalidResourceHandle;
  SimEvent* ev = static_cast<SimEvent*>(e);
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    ev->recorded++;
  }
  SimStream* stream = static_cast<SimStream*>(s);
  stream->enqueue([ev, stream] {
    std::lock_guard<std::mutex> lock(ev->mu);
    ev->stamp_ns = mt_monotonic_ns();
    ev->error = stream->sticky_error;
    ev->reached++;
    ev->cv.notify_all();
  });
  return 0;
}
int event_query(void* e) {
  if (e == nullptr) return kInvalidResourceHandle;
  SimEvent* ev = static_cast<SimEvent*>(e);
  std::lock_guard<std::mutex> lock(ev->mu);
  return ev->reached == ev->recorded ? ev->error : MT_CUDA_ERROR_NOT_READY;
}
int event_synchronize(void* e) {
  if (e == nullptr) return kInvalidResourceHandle;
  SimEvent* ev = static_cast<SimEvent*>(e);
  std::unique_lock<std::mutex> lock(ev->mu);
  ev->cv.wait(lock, [&] { return ev->reached == ev->recorded; });
  return ev->error;
}
// The stream waits until the event's latest record is reached (an op that blocks its thread).
int stream_wait_event(void* s, void* e) {
  if (s == nullptr || e == nullptr) return kInvalidResourceHandle;
  SimEvent* ev = static_cast<SimEvent*>(e);
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    target = ev->recorded;
  }
  static_cast<SimStream*>(s)->enqueue([ev, target] {
    std::unique_lock<std::mutex> lock(ev->mu);
    ev->cv.wait(lock, [&] { return ev->reached >= target; });
  });
  return 0;
}
int event_elapsed_ms(float* ms, void* start, void* end) {
  if (start == nullptr || end == nullptr) return kInvalidResourceHandle;
  int64_t a, b;
  for (auto [e, out] : {std::pair<void*, int64_t*>{start, &a}, {end, &b}}) {
    SimEvent* ev = static_cast<SimEvent*>(e);
    std::lock_guard<std::mutex> lock(ev->mu);
    if (ev->recorded == 0 || ev->reached != ev->recorded) return MT_CUDA_ERROR_NOT_READY;
    if (ev->error != 0) return ev->error;
    *out = ev->stamp_ns;
  }
  *ms = float(double(b - a) / 1e6);
  return 0;
}
int memcpy_d2h_async(void* dst, const void* src, size_t bytes, void* s) {
  if (s == nullptr) return kInvalidResourceHandle;
  static_cast<SimStream*>(s)->enqueue([=] { std::memcpy(dst, src, bytes); });
  return 0;
}
int type_supported(int type) { return mt_type_supported(type); }

int expert_ffn(const mt_cuda_expert_args* args, void* s) {
  if (s == nullptr) return kInvalidResourceHandle;
  if (args == nullptr || args->count < 1 || args->n_embd < 1 || args->n_ff < 1) return kInvalidValue;
  for (int t : {args->gate_type, args->up_type, args->down_type})
    if (!mt_type_supported(t)) return kInvalidValue;
  if (args->scratch_bytes <
      sim_expert_scratch_bytes(args->gate_type, args->up_type, args->down_type, args->n_embd, args->n_ff, args->count))
    return kInvalidValue;
  const mt_cuda_expert_args a = *args;  // the caller's struct may be gone when the stream runs it
  static_cast<SimStream*>(s)->enqueue([a] { sim_expert_ffn(a); });
  return 0;
}

// --- calls bound to one instance (its memory, faults and live objects) ---

template <int I>
struct Bound {
  static SimDevice& dev() { return devices()[I]; }
  static int get_device_count(int* count) {
    std::lock_guard<std::mutex> lock(dev().mu);
    *count = dev().faults.no_device ? 0 : 1;
    return dev().faults.no_device ? MT_CUDA_ERROR_NO_DEVICE : 0;
  }
  static int mem_get_info(size_t* free_bytes, size_t* total_bytes) {
    std::lock_guard<std::mutex> lock(dev().mu);
    *total_bytes = size_t(dev().faults.device_bytes);
    *free_bytes = size_t(dev().faults.device_bytes - dev().used_bytes);
    return 0;
  }
  static int device_malloc(void** ptr, size_t bytes) {
    std::lock_guard<std::mutex> lock(dev().mu);
    if (bytes > dev().faults.device_bytes - dev().used_bytes) return MT_CUDA_ERROR_MEMORY_ALLOCATION;
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);  // cudaMalloc aligns to 256
    if (p == nullptr) return MT_CUDA_ERROR_MEMORY_ALLOCATION;
    dev().allocations.emplace(p, bytes);
    dev().used_bytes += bytes;
    *ptr = p;
    return 0;
  }
  static int device_free(void* ptr) {
    std::lock_guard<std::mutex> lock(dev().mu);
    auto it = dev().allocations.find(ptr);
    if (it == dev().allocations.end()) return kInvalidValue;
    dev().used_bytes -= it->second;
    dev().allocations.erase(it);
    std::free(ptr);
    return 0;
  }
  static int host_alloc_pinned(void** ptr, size_t bytes) {
    *ptr = std::malloc(bytes);
    if (*ptr == nullptr) return MT_CUDA_ERROR_MEMORY_ALLOCATION;
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().pinned++;
    return 0;
  }
  static int host_free_pinned(void* ptr) {
    std::free(ptr);
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().pinned--;
    return 0;
  }
  static int stream_create(void** s) {
    *s = new SimStream();
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().streams++;
    return 0;
  }
  static int stream_destroy(void* s) {
    delete static_cast<SimStream*>(s);
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().streams--;
    return 0;
  }
  static int event_create(void** e) {
    *e = new SimEvent();
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().events++;
    return 0;
  }
  static int event_destroy(void* e) {
    delete static_cast<SimEvent*>(e);
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().events--;
    return 0;
  }
  // The copy crossing fail_copy_after_bytes copies the bytes before it, then reports an error:
  // from the call, or (async_copy_fault) from its stream's later events, sticky.
  static int memcpy_h2d_async(void* dst, const void* src, size_t bytes, void* s) {
    if (s == nullptr) return kInvalidResourceHandle;
    size_t n = bytes;
    int rc = 0;
    bool async = false;
    {
      std::lock_guard<std::mutex> lock(dev().mu);
      uint64_t& limit = dev().faults.fail_copy_after_bytes;
      if (limit != 0 && dev().h2d_bytes + bytes > limit) {
        n = size_t(limit - dev().h2d_bytes);
        limit = 0;  // once
        rc = MT_CUDA_ERROR_UNKNOWN;
        async = dev().faults.async_copy_fault;
      }
      dev().h2d_bytes += n;
    }
    SimStream* stream = static_cast<SimStream*>(s);
    stream->enqueue([=] {
      std::memcpy(dst, src, n);
      if (async) stream->sticky_error = MT_CUDA_ERROR_UNKNOWN;
    });
    return async ? 0 : rc;
  }
  static mt_cuda_runtime table() {
    mt_cuda_runtime t{};
    t.name = "simulated";
    t.get_device_count = get_device_count, t.set_device = set_device, t.device_name = device_name;
    t.mem_get_info = mem_get_info, t.error_string = error_string;
    t.device_malloc = device_malloc, t.device_free = device_free;
    t.host_alloc_pinned = host_alloc_pinned, t.host_free_pinned = host_free_pinned;
    t.stream_create = stream_create, t.stream_destroy = stream_destroy, t.stream_synchronize = stream_synchronize;
    t.stream_wait_event = stream_wait_event, t.memcpy_h2d_async = memcpy_h2d_async,
    t.memcpy_d2h_async = memcpy_d2h_async;
    t.event_create = event_create, t.event_destroy = event_destroy, t.event_record = event_record;
    t.event_query = event_query, t.event_synchronize = event_synchronize, t.event_elapsed_ms = event_elapsed_ms;
    t.type_supported = type_supported, t.expert_scratch_bytes = sim_expert_scratch_bytes, t.expert_ffn = expert_ffn;
    return t;
  }
};

template <size_t... I>
std::array<mt_cuda_runtime, sizeof...(I)> make_tables(std::index_sequence<I...>) {
  return {Bound<int(I)>::table()...};
}
const std::array<mt_cuda_runtime, kSimDevicesMax>& tables() {
  static const auto all = make_tables(std::make_index_sequence<kSimDevicesMax>{});
  return all;
}
std::mutex& instances_mu() {
  static std::mutex mu;
  return mu;
}

}  // namespace

int sim_runtime_acquire(const SimFaults& faults, mt_cuda_runtime* out) {
  std::lock_guard<std::mutex> lock(instances_mu());
  for (int i = 0; i < kSimDevicesMax; i++) {
    SimDevice& d = devices()[size_t(i)];
    std::lock_guard<std::mutex> dl(d.mu);
    if (d.in_use) continue;
    d.in_use = true;
    d.faults = faults;
    d.used_bytes = d.h2d_bytes = 0;
    *out = tables()[size_t(i)];
    return i;
  }
  return -1;
}

void sim_runtime_release(const mt_cuda_runtime& table) {
  std::lock_guard<std::mutex> lock(instances_mu());
  for (size_t i = 0; i < size_t(kSimDevicesMax); i++) {
    if (tables()[i].device_malloc != table.device_malloc) continue;
    SimDevice& d = devices()[i];
    std::lock_guard<std::mutex> dl(d.mu);
    // A backend frees all it allocated before it gives its device back: anything left is a leak.
    MT_ASSERT(d.allocations.empty() && d.used_bytes == 0,
              "a destroyed cuda-sim backend left no device memory allocated");
    MT_ASSERT(d.pinned == 0 && d.streams == 0 && d.events == 0,
              "a destroyed cuda-sim backend left no pinned buffer, stream or event");
    d.in_use = false;
    return;
  }
  MT_ASSERT(false, "sim_runtime_release is given a table sim_runtime_acquire handed out");
}

}  // namespace mt
