/*
 * The CUDA backend's runtime table: every call the host side (native/cuda/host/) makes into
 * CUDA, as plain function pointers, so the same slot / staging / event logic runs on
 *
 *   real       libmoetier_cuda.so (native/cuda/kernels/, built by nvcc when CMake finds CUDA
 *              >= 12), which fills the table with cudart calls and the expert kernels; the
 *              addon dlopens it next to moetier.node, so the addon itself never links CUDA and
 *              builds and loads on machines without it;
 *   simulated  native/cuda/host/sim_runtime.cc, inside the addon: streams are host threads
 *              running their operations in order, device memory is host memory, events carry
 *              CLOCK_MONOTONIC stamps, and the expert kernel is the CPU kernels (mt_kernels.h),
 *              so a simulated run gives the cpu backend's tokens exactly. It can fail a copy
 *              half-way, refuse allocations past a device size and report no device. It is
 *              for tests, and is named as such everywhere (backend kind "cuda-sim").
 *
 * Conventions: every int-returning call returns 0 on success or a cudaError_t value (the
 * simulated runtime uses the same numbers for the errors it raises: 2 memory allocation,
 * 100 no device, 35 insufficient driver, 600 not ready, 999 unknown). Streams and events are
 * opaque pointers. Nothing here throws or aborts.
 */
#ifndef MT_CUDA_RUNTIME_H
#define MT_CUDA_RUNTIME_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define MT_CUDA_SUCCESS 0
#define MT_CUDA_ERROR_MEMORY_ALLOCATION 2
#define MT_CUDA_ERROR_INSUFFICIENT_DRIVER 35
#define MT_CUDA_ERROR_NO_DEVICE 100
#define MT_CUDA_ERROR_NOT_READY 600
#define MT_CUDA_ERROR_UNKNOWN 999

/* One expert's SwiGLU FFN on the device, for `count` hidden rows:
 *   y[i, :] = Down (silu(Gate x[i, :]) * (Up x[i, :]))        i in [0, count)
 * The slot holds gate | up | down of one expert back to back in their container types
 * (include/mt_backend.h's slot layout): gate at slot, up at slot + gate_bytes, down at
 * slot + gate_bytes + up_bytes. Gate and Up are [n_ff, n_embd] (n_ff rows of n_embd),
 * Down is [n_embd, n_ff]. x, y and scratch are device pointers; x [count, n_embd] f32,
 * y [count, n_embd] f32 (overwritten). count == 1 is the decode matvec form; count > 1 the
 * grouped prefill form (each weight row read once for all rows). Activations are quantised
 * on the device as the CPU kernels quantise them (Q8_0 blocks of 32 for Q8_0 / Q4_0 / Q5_0 /
 * Q5_1 weights, Q8_K blocks of 256 for the k-quants; F32 / F16 / BF16 weights take f32). */
typedef struct mt_cuda_expert_args {
  const void* slot;
  uint64_t gate_bytes, up_bytes, down_bytes;
  int32_t gate_type, up_type, down_type; /* enum mt_type (mt_kernels.h) */
  int64_t n_embd, n_ff;
  const float* x;
  float* y;
  int32_t count;
  void* scratch; /* at least expert_scratch_bytes(...) bytes of device memory */
  uint64_t scratch_bytes;
} mt_cuda_expert_args;

typedef struct mt_cuda_runtime {
  const char* name; /* "cudart <version>" or "simulated" */
  /* device */
  int (*get_device_count)(int* count);
  int (*set_device)(int device);
  int (*device_name)(int device, char* out, size_t out_bytes);
  int (*mem_get_info)(size_t* free_bytes, size_t* total_bytes);
  const char* (*error_string)(int error);
  /* memory */
  int (*device_malloc)(void** ptr, size_t bytes);
  int (*device_free)(void* ptr);
  int (*host_alloc_pinned)(void** ptr, size_t bytes);
  int (*host_free_pinned)(void* ptr);
  /* streams: created non-blocking (no implicit sync with the legacy default stream) */
  int (*stream_create)(void** stream);
  int (*stream_destroy)(void* stream);
  int (*stream_synchronize)(void* stream);
  int (*stream_wait_event)(void* stream, void* event);
  int (*memcpy_h2d_async)(void* dst, const void* src, size_t bytes, void* stream);
  int (*memcpy_d2h_async)(void* dst, const void* src, size_t bytes, void* stream);
  /* events: created with timing */
  int (*event_create)(void** event);
  int (*event_destroy)(void* event);
  int (*event_record)(void* event, void* stream);
  int (*event_query)(void* event); /* 0 done, MT_CUDA_ERROR_NOT_READY pending, else the error */
  int (*event_synchronize)(void* event);
  int (*event_elapsed_ms)(float* ms, void* start, void* end);
  /* kernels */
  int (*type_supported)(int type);
  size_t (*expert_scratch_bytes)(int gate_type, int up_type, int down_type, int64_t n_embd, int64_t n_ff,
                                 int32_t count);
  int (*expert_ffn)(const mt_cuda_expert_args* args, void* stream);
} mt_cuda_runtime;

/* Exported by libmoetier_cuda.so: fills *out with cudart's calls and the kernels. Returns 0,
 * or a cudaError_t when the runtime cannot start (no driver, no device); it does not select
 * a device. */
typedef int (*mt_cuda_runtime_load_fn)(mt_cuda_runtime* out);
int mt_cuda_runtime_load(mt_cuda_runtime* out);
#define MT_CUDA_RUNTIME_LOAD_SYMBOL "mt_cuda_runtime_load"
#define MT_CUDA_LIBRARY_NAME "libmoetier_cuda.so"

#ifdef __cplusplus
}
#endif
#endif
