/*
 * The CUDA backends' own verbs (include/mt_backend.h kinds cuda and cuda-sim; the host side is
 * native/cuda/host/, the runtime table native/cuda/mt_cuda_runtime.h).
 *
 *   cuda      the runtime is libmoetier_cuda.so, dlopened from the addon's directory
 *   cuda-sim  the runtime is simulated inside the addon (host threads as streams, host memory
 *             as device memory, the CPU kernels as the expert kernel): for tests
 *
 * Device memory is not host-visible, so mt_backend_slot_data is refused and a resident expert
 * is computed with mt_backend_run_expert, whose args are an mt_backend_cuda_expert_args.
 */
#ifndef MT_BACKEND_CUDA_H
#define MT_BACKEND_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include "mt_backend.h"
#ifdef __cplusplus
extern "C" {
#endif

/* mt_backend_run_expert's args on a CUDA kind: y = Down (silu(Gate x) * (Up x)) for `count`
 * rows, with the slot laid out gate | up | down (mt_backend.h). x and y are HOST memory
 * ([count, n_embd] f32 each); the backend copies x to the device, runs the kernel on its
 * compute stream, copies y back and returns once y is written. The slot must be valid and
 * leased by the caller. */
typedef struct mt_backend_cuda_expert_args {
  const float* x;
  float* y;
  int32_t count;                          /* 1 .. MT_BACKEND_CUDA_EXPERT_ROWS_MAX */
  int32_t gate_type, up_type, down_type;  /* enum mt_type (mt_kernels.h) */
  uint64_t gate_bytes, up_bytes, down_bytes;
  int64_t n_embd, n_ff;
} mt_backend_cuda_expert_args;
/* Rows one run_expert call computes at most (prefill chunks are 256 rows: mt_forward.h), and
 * one run_experts call over all its runs. */
#define MT_BACKEND_CUDA_EXPERT_ROWS_MAX 4096
/* Runs one run_experts call takes at most (a layer's experts: 128 in Qwen3-30B-A3B, 256 in
 * the largest routed layers llama.cpp loads). */
#define MT_BACKEND_CUDA_RUNS_MAX 256

/* One resident's run in a run_experts call: its leased slot and its args. */
typedef struct mt_backend_cuda_run {
  int32_t slot;
  mt_backend_cuda_expert_args args;
} mt_backend_cuda_run;

/* Where the device spent a run_experts call, on CLOCK_MONOTONIC: events recorded on the
 * compute stream before the rows' copy in and after their copy out, timed against the clock's
 * base (the upload events' clock: mt_backend.h). */
typedef struct mt_backend_cuda_span {
  int64_t start_ns, end_ns;
} mt_backend_cuda_span;

/* A layer's residents in one call: every run's x goes to the device in one copy (through a
 * pinned buffer), the expert kernels run back to back on the compute stream, the y rows come
 * back in one copy, and the stream is synchronised once (run_expert pays that per expert).
 * Each run's y is as run_expert would write it. All slots must be valid and leased; at most
 * MT_BACKEND_CUDA_RUNS_MAX runs and MT_BACKEND_CUDA_EXPERT_ROWS_MAX rows in all. span may be
 * null. Refused (MT_BACKEND_UNSUPPORTED) on the other kinds. */
int mt_backend_cuda_run_experts(mt_backend* b, const mt_backend_cuda_run* runs, int32_t n, mt_backend_cuda_span* span, char* err,
                                size_t err_bytes);

/* The upload path's pinned staging ring: the container is pageable (mmap), so each piece is
 * copied in chunks of at most STAGING_BUFFER_BYTES into one of STAGING_BUFFERS pinned buffers,
 * from which the device copies it; a buffer is reused once its copy's event finished. */
#define MT_BACKEND_CUDA_STAGING_BUFFERS 4
#define MT_BACKEND_CUDA_STAGING_BUFFER_BYTES (4u << 20)

/* Why a CUDA backend could not be created. */
enum mt_cuda_unavailable {
  MT_CUDA_AVAILABLE = 0,
  MT_CUDA_NOT_BUILT = 1,    /* libmoetier_cuda.so is not next to the addon: nvcc was not found at build time */
  MT_CUDA_LOAD_FAILED = 2,  /* the library exists but dlopen / dlsym failed (dlerror in the message) */
  MT_CUDA_NO_DRIVER = 3,    /* the CUDA runtime could not start (no or too old a driver) */
  MT_CUDA_NO_DEVICE = 4     /* the runtime started but found no usable device */
};
const char* mt_cuda_unavailable_name(int reason); /* "not-built", "load-failed", "no-driver", "no-device" */

/* mt_backend_create for the kinds cuda and cuda-sim, which also says why a device is
 * unavailable (*reason, may be null; MT_CUDA_AVAILABLE for any other refusal). */
mt_backend* mt_backend_cuda_create(const mt_backend_config* config, int32_t* reason, char* err, size_t err_bytes);

/* Where the cuda kind looks for MT_CUDA_LIBRARY_NAME: the loaded addon's directory. */
int mt_backend_cuda_library_path(char* out, size_t out_bytes);

/* Test only: copies min(bytes, slot_bytes) bytes of a slot back from the device (memcpy_d2h on
 * the compute stream, then synchronised). Refused (MT_BACKEND_UNSUPPORTED) on other kinds and
 * while an upload into the slot is in flight. */
int mt_backend_cuda_slot_read(mt_backend* b, int32_t slot, void* out, size_t bytes, size_t* copied, char* err, size_t err_bytes);

#ifdef __cplusplus
}
#endif
#endif
