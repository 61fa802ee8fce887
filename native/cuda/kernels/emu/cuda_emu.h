// A host emulator for the CUDA built-ins the kernels use, so that g++ can compile the kernel
// headers (*_kernels.cuh, with MT_CUDA_EMU defined) and run them on a machine without a GPU: a
// warp is 32 host threads, and every shuffle or vote is a rendezvous of the 32, which is what
// makes the lane logic (who holds which block, which lane sums what, in what order) testable.
// Arithmetic built-ins map to their IEEE definitions; f16 conversions are the CPU's own
// (kernels_internal.h), which are IEEE round-to-nearest-even as __float2half_rn is.
// Not fast: for small shapes in tests only (emu_check.cc).
#pragma once
#include <cfloat>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#include "kernels_internal.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)

typedef int cudaError_t;
typedef struct CUstream_emu* cudaStream_t;

struct dim3 {
  unsigned x;
};
inline thread_local dim3 threadIdx{0}, blockIdx{0};
inline thread_local dim3 blockDim{0};

struct __half {
  uint16_t bits;
};
inline __half __ushort_as_half(uint16_t u) { return __half{u}; }
inline float __half2float(__half h) { return mt_f16_to_f32(h.bits); }
inline __half __float2half_rn(float f) { return __half{mt_f32_to_f16(f)}; }
inline int __float2int_rn(float v) { return (int)std::nearbyint(v); }  // default mode: nearest, ties to even
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; k++) c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
  return c;
}
inline unsigned __vsub4(unsigned a, unsigned b) {
  unsigned r = 0;
  for (int k = 0; k < 4; k++) r |= ((((a >> (8 * k)) & 0xffu) - ((b >> (8 * k)) & 0xffu)) & 0xffu) << (8 * k);
  return r;
}

// One warp's meeting point: each lane posts a 32-bit value, all wait, each reads. The slots are
// double-buffered by exchange parity (every lane takes the same exchanges, so the parities agree):
// a lane can only write a buffer again after the next barrier, which every lane reaches only once
// it has read that buffer, so one barrier per exchange suffices.
struct EmuWarp {
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  unsigned generation = 0;
  uint32_t slot[2][32] = {};
  void barrier() {
    std::unique_lock<std::mutex> lock(m);
    const unsigned g = generation;
    if (++arrived == 32) {
      arrived = 0;
      generation++;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != g; });
    }
  }
};
inline thread_local EmuWarp* emu_warp = nullptr;
inline thread_local int emu_lane = 0;
inline thread_local unsigned emu_parity = 0;

template <class T>
T emu_exchange(T v, int src) {
  static_assert(sizeof(T) == 4, "32-bit shuffles only");
  uint32_t bits;
  memcpy(&bits, &v, 4);
  uint32_t* slot = emu_warp->slot[emu_parity++ & 1];
  slot[emu_lane] = bits;
  emu_warp->barrier();
  bits = slot[src & 31];
  T out;
  memcpy(&out, &bits, 4);
  return out;
}

template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  return emu_exchange(v, (emu_lane & ~(width - 1)) + src % width);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  (void)width;  // mask < width keeps the partner inside the lane's segment
  return emu_exchange(v, emu_lane ^ mask);
}
inline bool __all_sync(unsigned, bool p) {
  uint32_t* slot = emu_warp->slot[emu_parity++ & 1];
  slot[emu_lane] = p ? 1u : 0u;
  emu_warp->barrier();
  bool all = true;
  for (int l = 0; l < 32; l++) all = all && slot[l];
  return all;
}

// kernel<<<grid, block>>>(): 32 host threads, one per lane, run the warps one after another (a
// warp's lanes all take the same shuffles, so the shared meeting point serves warp after warp).
template <class Kernel>
void emu_launch(unsigned grid, unsigned block, Kernel kernel) {
  EmuWarp warp;
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < 32; lane++)
    lanes.emplace_back([&, lane] {
      emu_warp = &warp;
      emu_lane = lane;
      emu_parity = 0;
      blockDim.x = block;
      for (unsigned b = 0; b < grid; b++)
        for (unsigned w = 0; w < block / 32; w++) {
          blockIdx.x = b;
          threadIdx.x = w * 32 + (unsigned)lane;
          kernel();
        }
    });
  for (std::thread& t : lanes) t.join();
}
