// mt_cuda_runtime_load: the table of mt_cuda_runtime.h filled with thin cudart wrappers and the
// expert kernels. The only symbol this library exports (exports.map); cudart is linked statically,
// so loading it needs the driver (libcuda.so) alone.
#include <stdio.h>
#include <string.h>
#include "expert_ffn.cuh"

namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

int get_device_count(int* count) { return cudaGetDeviceCount(count); }
int set_device(int device) { return cudaSetDevice(device); }

int device_name(int device, char* out, size_t out_bytes) {
  cudaDeviceProp prop;
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return e;
  if (out && out_bytes) snprintf(out, out_bytes, "%s", prop.name);
  return cudaSuccess;
}

int mem_get_info(size_t* free_bytes, size_t* total_bytes) { return cudaMemGetInfo(free_bytes, total_bytes); }
const char* error_string(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

int device_malloc(void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }
int device_free(void* ptr) { return cudaFree(ptr); }
int host_alloc_pinned(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }
int host_free_pinned(void* ptr) { return cudaFreeHost(ptr); }

int stream_create(void** stream) {
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = s;
  return e;
}
int stream_destroy(void* stream) { return cudaStreamDestroy(as_stream(stream)); }
int stream_synchronize(void* stream) { return cudaStreamSynchronize(as_stream(stream)); }
int stream_wait_event(void* stream, void* event) { return cudaStreamWaitEvent(as_stream(stream), as_event(event), 0); }
int memcpy_h2d_async(void* dst, const void* src, size_t bytes, void* stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream));
}
int memcpy_d2h_async(void* dst, const void* src, size_t bytes, void* stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream));
}

int event_create(void** event) {
  cudaEvent_t ev = nullptr;
  const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDefault);  // default: with timing
  *event = ev;
  return e;
}
int event_destroy(void* event) { return cudaEventDestroy(as_event(event)); }
int event_record(void* event, void* stream) { return cudaEventRecord(as_event(event), as_stream(stream)); }
int event_query(void* event) { return cudaEventQuery(as_event(event)); }  // cudaErrorNotReady is 600
int event_synchronize(void* event) { return cudaEventSynchronize(as_event(event)); }
int event_elapsed_ms(float* ms, void* start, void* end) {
  return cudaEventElapsedTime(ms, as_event(start), as_event(end));
}

int type_supported(int type) { return mtc::type_supported(type) ? 1 : 0; }
int expert_ffn(const mt_cuda_expert_args* args, void* stream) {
  return args ? mtc::expert_ffn(*args, as_stream(stream)) : cudaErrorInvalidValue;
}

// "cudart 13.0": the runtime this library was built with (static, so also the one it runs).
const char* runtime_name() {
  static char name[32];
  snprintf(name, sizeof name, "cudart %d.%d", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
  return name;
}

}  // namespace

static_assert(MT_CUDA_ERROR_MEMORY_ALLOCATION == cudaErrorMemoryAllocation, "error numbers");
static_assert(MT_CUDA_ERROR_INSUFFICIENT_DRIVER == cudaErrorInsufficientDriver, "error numbers");
static_assert(MT_CUDA_ERROR_NO_DEVICE == cudaErrorNoDevice, "error numbers");
static_assert(MT_CUDA_ERROR_NOT_READY == cudaErrorNotReady, "error numbers");
static_assert(MT_CUDA_ERROR_UNKNOWN == cudaErrorUnknown, "error numbers");

extern "C" __attribute__((visibility("default"))) int mt_cuda_runtime_load(mt_cuda_runtime* out) {
  if (!out) return cudaErrorInvalidValue;
  memset(out, 0, sizeof *out);
  // name and error_string first: they need no driver, and let the caller say why loading failed.
  out->name = runtime_name();
  out->error_string = error_string;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);  // no driver or no device: report, fill no more
  if (e != cudaSuccess) return e;
  if (count == 0) return cudaErrorNoDevice;
  out->get_device_count = get_device_count;
  out->set_device = set_device;
  out->device_name = device_name;
  out->mem_get_info = mem_get_info;
  out->device_malloc = device_malloc;
  out->device_free = device_free;
  out->host_alloc_pinned = host_alloc_pinned;
  out->host_free_pinned = host_free_pinned;
  out->stream_create = stream_create;
  out->stream_destroy = stream_destroy;
  out->stream_synchronize = stream_synchronize;
  out->stream_wait_event = stream_wait_event;
  out->memcpy_h2d_async = memcpy_h2d_async;
  out->memcpy_d2h_async = memcpy_d2h_async;
  out->event_create = event_create;
  out->event_destroy = event_destroy;
  out->event_record = event_record;
  out->event_query = event_query;
  out->event_synchronize = event_synchronize;
  out->event_elapsed_ms = event_elapsed_ms;
  out->type_supported = type_supported;
  out->expert_scratch_bytes = mtc::expert_scratch_bytes;
  out->expert_ffn = expert_ffn;
  return cudaSuccess;
}
