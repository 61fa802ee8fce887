/*
 * The CUDA backends' own verbs (include/mt_backend.h kinds cuda and cuda-sim; the host side is
 * native/cuda/host/, the runtime table native/cuda/mt_cuda_runtime.h). The addon's only way to them.
 *
 *   cuda      the runtime is libmoetier_cuda.so, dlopened from the addon's directory
 *   cuda-sim  the runtime is simulated inside the addon (host threads as streams, host memory
 *             as device memory, the CPU kernels as the expert kernel): for tests
 *
 * Device memory is not host-visible, so mt_backend_slot_data is refused and a resident expert
 * is computed with mt_backend_run_expert, whose args are an mt_backend_expert_args, or a layer's
 * residents at once through the interface's run_experts entry (mt_backend.h).
 */
#ifndef MT_BACKEND_CUDA_H
#define MT_BACKEND_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include "mt_backend.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The device compute types and limits live in mt_backend.h (mt_backend_expert_args,
 * mt_backend_run, mt_backend_span, MT_BACKEND_RUN_ROWS_MAX, MT_BACKEND_RUNS_MAX): the interface's
 * optional run_experts entry, which the tier calls without naming a kind. The cuda names stay as
 * aliases. */
typedef mt_backend_expert_args mt_backend_cuda_expert_args;
typedef mt_backend_run mt_backend_cuda_run;
typedef mt_backend_span mt_backend_cuda_span;
#define MT_BACKEND_CUDA_EXPERT_ROWS_MAX MT_BACKEND_RUN_ROWS_MAX
#define MT_BACKEND_CUDA_RUNS_MAX MT_BACKEND_RUNS_MAX

/* mt_backend_interface(b)->run_experts as a verb: refused (MT_BACKEND_UNSUPPORTED) on the kinds
 * whose entry is NULL. */
int mt_backend_cuda_run_experts(mt_backend* b, const mt_backend_cuda_run* runs, int32_t n, mt_backend_cuda_span* span,
                                char* err, size_t err_bytes);

/* The upload path's pinned staging ring: the container is pageable (mmap), so each piece is
 * copied in chunks of at most STAGING_BUFFER_BYTES into one of STAGING_BUFFERS pinned buffers,
 * from which the device copies it; a buffer is reused once its copy's event finished. */
#define MT_BACKEND_CUDA_STAGING_BUFFERS 4
#define MT_BACKEND_CUDA_STAGING_BUFFER_BYTES (4u << 20)

/* Why a CUDA backend could not be created. */
enum mt_cuda_unavailable {
  MT_CUDA_AVAILABLE = 0,
  MT_CUDA_NOT_BUILT = 1,   /* libmoetier_cuda.so is not next to the addon: nvcc was not found at build time */
  MT_CUDA_LOAD_FAILED = 2, /* the library exists but dlopen / dlsym failed (dlerror in the message) */
  MT_CUDA_NO_DRIVER = 3,   /* the CUDA runtime could not start (no or too old a driver) */
  MT_CUDA_NO_DEVICE = 4    /* the runtime started but found no usable device */
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
int mt_backend_cuda_slot_read(mt_backend* b, int32_t slot, void* out, size_t bytes, size_t* copied, char* err,
                              size_t err_bytes);

#ifdef __cplusplus
}
#endif
#endif
