// Creating a CUDA backend: the runtime table (simulated, or libmoetier_cuda.so dlopened from
// the addon's directory), a device, then CudaBackend::init. Each refusal says what is missing
// and, through *reason, which kind of missing it is (mt_backend_cuda.h).
#include <dlfcn.h>
#include <sys/stat.h>
#include <cstring>
#include <exception>
#include <string>
#include "cuda_backend.h"
#include "sim_runtime.h"

namespace mt {

std::string cuda_error_text(const mt_cuda_runtime* rt, int error) {
  const char* name = "cudaError";
  switch (error) {
    case 1:
      name = "cudaErrorInvalidValue";
      break;
    case MT_CUDA_ERROR_MEMORY_ALLOCATION:
      name = "cudaErrorMemoryAllocation";
      break;
    case 3:
      name = "cudaErrorInitializationError";
      break;
    case MT_CUDA_ERROR_INSUFFICIENT_DRIVER:
      name = "cudaErrorInsufficientDriver";
      break;
    case MT_CUDA_ERROR_NO_DEVICE:
      name = "cudaErrorNoDevice";
      break;
    case 400:
      name = "cudaErrorInvalidResourceHandle";
      break;
    case MT_CUDA_ERROR_NOT_READY:
      name = "cudaErrorNotReady";
      break;
    case MT_CUDA_ERROR_UNKNOWN:
      name = "cudaErrorUnknown";
      break;
    default:
      break;
  }
  const char* text = rt != nullptr && rt->error_string != nullptr ? rt->error_string(error) : nullptr;
  return std::string(name) + " " + std::to_string(error) +
         (text != nullptr ? std::string(" (") + text + ")" : std::string());
}

namespace {

int unavailable(int32_t* reason, int32_t why, char* err, size_t err_bytes, const std::string& message) {
  if (reason != nullptr) *reason = why;
  return fail(err, err_bytes, MT_BACKEND_UNSUPPORTED, "create: " + message);
}

// The directory of the loaded addon (this function's object file) + the library's name.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_path), &info) == 0 || info.dli_fname == nullptr)
    return MT_CUDA_LIBRARY_NAME;
  std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? std::string(MT_CUDA_LIBRARY_NAME)
                                    : self.substr(0, slash + 1) + MT_CUDA_LIBRARY_NAME;
}

// dlopen + dlsym + the library's load call. The handle is never closed (cudart stays loaded).
int load_real_runtime(mt_cuda_runtime* rt, int32_t* reason, char* err, size_t err_bytes) {
  const std::string path = library_path();
  struct stat st{};
  if (stat(path.c_str(), &st) != 0)
    return unavailable(reason, MT_CUDA_NOT_BUILT, err, err_bytes,
                       "cuda: " + path +
                           " does not exist: the CUDA kernels library was not built (nvcc >= 12 was not found when the "
                           "addon was built); "
                           "install the CUDA toolkit and rebuild (npm run build:native)");
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return unavailable(reason, MT_CUDA_LOAD_FAILED, err, err_bytes,
                       "cuda: " + path + " failed to load: " + (why != nullptr ? why : "dlopen failed"));
  }
  auto load = reinterpret_cast<mt_cuda_runtime_load_fn>(dlsym(lib, MT_CUDA_RUNTIME_LOAD_SYMBOL));
  if (load == nullptr) {
    const char* why = dlerror();
    return unavailable(reason, MT_CUDA_LOAD_FAILED, err, err_bytes,
                       "cuda: " + path + " has no " MT_CUDA_RUNTIME_LOAD_SYMBOL ": " +
                           (why != nullptr ? why : "dlsym failed") + " (a stale build?)");
  }
  if (int rc = load(rt)) {
    const int32_t why = rc == MT_CUDA_ERROR_NO_DEVICE ? MT_CUDA_NO_DEVICE : MT_CUDA_NO_DRIVER;
    return unavailable(
        reason, why, err, err_bytes,
        "cuda: the CUDA runtime could not start: " + cuda_error_text(nullptr, rc) +
            (why == MT_CUDA_NO_DEVICE ? ": no CUDA device" : ": is the NVIDIA driver installed and new enough?"));
  }
  return MT_BACKEND_OK;
}

// get_device_count, then set_device(0).
int select_device(const mt_cuda_runtime& rt, int32_t* reason, char* err, size_t err_bytes) {
  int count = 0;
  const int rc = rt.get_device_count(&count);
  if (rc == MT_CUDA_ERROR_NO_DEVICE || (rc == MT_CUDA_SUCCESS && count < 1))
    return unavailable(reason, MT_CUDA_NO_DEVICE, err, err_bytes,
                       "cuda: no CUDA device: " + cuda_error_text(&rt, rc == 0 ? MT_CUDA_ERROR_NO_DEVICE : rc));
  if (rc != MT_CUDA_SUCCESS)
    return unavailable(reason, MT_CUDA_NO_DRIVER, err, err_bytes,
                       "cuda: the driver refused to list devices: " + cuda_error_text(&rt, rc));
  if (int set = rt.set_device(0))
    return unavailable(reason, MT_CUDA_NO_DEVICE, err, err_bytes,
                       "cuda: device 0 cannot be used: " + cuda_error_text(&rt, set));
  return MT_BACKEND_OK;
}

bool table_complete(const mt_cuda_runtime& t) {
  const void* calls[] = {
      (void*)t.get_device_count,  (void*)t.set_device,       (void*)t.device_name,          (void*)t.mem_get_info,
      (void*)t.error_string,      (void*)t.device_malloc,    (void*)t.device_free,          (void*)t.host_alloc_pinned,
      (void*)t.host_free_pinned,  (void*)t.stream_create,    (void*)t.stream_destroy,       (void*)t.stream_synchronize,
      (void*)t.stream_wait_event, (void*)t.memcpy_h2d_async, (void*)t.memcpy_d2h_async,     (void*)t.event_create,
      (void*)t.event_destroy,     (void*)t.event_record,     (void*)t.event_query,          (void*)t.event_synchronize,
      (void*)t.event_elapsed_ms,  (void*)t.type_supported,   (void*)t.expert_scratch_bytes, (void*)t.expert_ffn};
  for (const void* c : calls)
    if (c == nullptr) return false;
  return true;
}

}  // namespace

mt_backend* create_cuda_backend(const mt_backend_config& c, int32_t* reason, char* err, size_t err_bytes) {
  if (reason != nullptr) *reason = MT_CUDA_AVAILABLE;
  const bool simulated = c.kind == MT_BACKEND_CUDA_SIM;
  mt_cuda_runtime rt{};
  if (simulated) {
    SimFaults faults;
    if (c.sim_device_bytes != 0) faults.device_bytes = c.sim_device_bytes;
    // Given the file, the injected failure is the read's (its engine's fail_after_bytes), not a copy's.
    faults.fail_copy_after_bytes = has_model_file(c) ? 0 : c.fail_transfer_after_bytes;
    faults.no_device = c.sim_no_device != 0;
    faults.async_copy_fault = c.sim_async_copy_fault != 0;
    if (sim_runtime_acquire(faults, &rt) < 0)
      return fail(err, err_bytes, MT_BACKEND_NO_MEMORY,
                  "create: cuda-sim: all " + std::to_string(kSimDevicesMax) + " simulated devices are in use"),
             nullptr;
  } else if (load_real_runtime(&rt, reason, err, err_bytes) != MT_BACKEND_OK) {
    return nullptr;
  }
  if (!table_complete(rt) || select_device(rt, reason, err, err_bytes) != MT_BACKEND_OK) {
    if (!table_complete(rt))
      fail(err, err_bytes, MT_BACKEND_INVALID,
           "create: cuda: the runtime table has empty calls (a stale " MT_CUDA_LIBRARY_NAME "?)");
    if (simulated) sim_runtime_release(rt);
    return nullptr;
  }
  CudaBackend* b = nullptr;
  try {
    b = new CudaBackend(c, rt, simulated);
  } catch (const std::exception& e) {
    if (simulated) sim_runtime_release(rt);
    return fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what()), nullptr;
  }
  if (b->init(err, err_bytes) != MT_BACKEND_OK) {
    delete b;  // gives back what init made, and the simulated device
    return nullptr;
  }
  return b;
}

}  // namespace mt

extern "C" {

const char* mt_cuda_unavailable_name(int reason) {
  switch (reason) {
    case MT_CUDA_NOT_BUILT:
      return "not-built";
    case MT_CUDA_LOAD_FAILED:
      return "load-failed";
    case MT_CUDA_NO_DRIVER:
      return "no-driver";
    case MT_CUDA_NO_DEVICE:
      return "no-device";
    default:
      return "available";
  }
}

mt_backend* mt_backend_cuda_create(const mt_backend_config* c, int32_t* reason, char* err, size_t err_bytes) {
  if (reason != nullptr) *reason = MT_CUDA_AVAILABLE;
  if (c == nullptr) return mt::fail(err, err_bytes, MT_BACKEND_INVALID, "create: config is null"), nullptr;
  if (c->kind != MT_BACKEND_CUDA && c->kind != MT_BACKEND_CUDA_SIM)
    return mt::fail(err, err_bytes, MT_BACKEND_INVALID, "create: kind: expected 3 (cuda) or 4 (cuda-sim)"), nullptr;
  if (c->budget_bytes == 0)
    return mt::fail(err, err_bytes, MT_BACKEND_INVALID, "create: budget_bytes: expected > 0"), nullptr;
  return mt::create_cuda_backend(*c, reason, err, err_bytes);
}

int mt_backend_cuda_library_path(char* out, size_t out_bytes) {
  const std::string path = mt::library_path();
  if (out_bytes == 0 || path.size() >= out_bytes) return MT_BACKEND_INVALID;
  std::memcpy(out, path.c_str(), path.size() + 1);
  return MT_BACKEND_OK;
}

int mt_backend_cuda_slot_read(mt_backend* b, int32_t slot, void* out, size_t bytes, size_t* copied, char* err,
                              size_t err_bytes) {
  auto* cuda = dynamic_cast<mt::CudaBackend*>(b);
  if (cuda == nullptr)
    return mt::fail(err, err_bytes, MT_BACKEND_UNSUPPORTED,
                    "slot_read: not a cuda or cuda-sim backend (use slot_data)");
  return cuda->slot_read(slot, out, bytes, copied, err, err_bytes);
}

int mt_backend_cuda_run_experts(mt_backend* b, const mt_backend_cuda_run* runs, int32_t n, mt_backend_cuda_span* span,
                                char* err, size_t err_bytes) {
  const mt_backend_i* iface = mt_backend_interface(b);
  if (iface->run_experts == nullptr)
    return mt::fail(err, err_bytes, MT_BACKEND_UNSUPPORTED,
                    "run_experts: not a cuda or cuda-sim backend (compute from slot_data)");
  return iface->run_experts(b, runs, n, span, err, err_bytes);
}

}  // extern "C"
