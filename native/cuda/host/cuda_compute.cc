// The CUDA backend's compute side: markers timed by the compute stream, run_experts (run_expert: one run) and the
// test-only slot read-back (cuda_backend.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include "cuda_backend.h"
#include "mt_kernels.h"

namespace mt {

// Under mu. false (the marker is then stamped by the host) if the device could not record it.
bool CudaBackend::record_compute(mt_event_id event) {
  void* ev = nullptr;
  if (rt_.event_create(&ev) != MT_CUDA_SUCCESS) return false;
  if (rt_.event_record(ev, compute_stream_) != MT_CUDA_SUCCESS) {
    rt_.event_destroy(ev);
    return false;
  }
  const ClockBasePtr base = clock_->base();
  compute_waiter_->add(ev, [this, event, ev, base](int rc) {
    const int64_t at = clock_->time_of(*base, ev);
    rt_.event_destroy(ev);
    complete_compute(event, rc == MT_CUDA_SUCCESS, at);
    clock_->refresh();  // off mu: a marker-only workload keeps its base fresh too
  });
  return true;
}

// A runtime failure as a status: out of memory is MT_BACKEND_NO_MEMORY, anything else the
// device's state (MT_BACKEND_STATE), with the error's name in the message.
int CudaBackend::device_failure(const char* verb, int rc, char* err, size_t err_bytes) {
  return fail(err, err_bytes, rc == MT_CUDA_ERROR_MEMORY_ALLOCATION ? MT_BACKEND_NO_MEMORY : MT_BACKEND_STATE,
              std::string(verb) + ": the device failed: " + cuda_error_text(&rt_, rc));
}

// A compute buffer of at least `bytes`, in device memory or (pinned) pinned host memory; grown,
// never shrunk: run_experts' sizes repeat. Under compute_mu_.
int CudaBackend::grow(DeviceBuffer& buf, size_t bytes, bool pinned) {
  if (buf.bytes >= bytes) return MT_CUDA_SUCCESS;
  if (buf.ptr != nullptr) pinned ? rt_.host_free_pinned(buf.ptr) : rt_.device_free(buf.ptr);
  buf = DeviceBuffer{};
  void* p = nullptr;
  if (int rc = pinned ? rt_.host_alloc_pinned(&p, bytes) : rt_.device_malloc(&p, bytes)) return rc;
  buf = DeviceBuffer{p, bytes};
  return MT_CUDA_SUCCESS;
}

// The slot's device pointer if compute may read it: valid and (for run_expert) leased. Takes mu.
int CudaBackend::slot_for_compute(int32_t slot, bool need_lease, const char* verb, uint8_t** data, char* err,
                                  size_t err_bytes) {
  std::lock_guard<std::mutex> lock(mu);
  if (closed) return fail(err, err_bytes, MT_BACKEND_CLOSED, std::string(verb) + ": the backend is closed");
  if (slot < 0 || size_t(slot) >= slots.size())
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                std::string(verb) + ": slot " + std::to_string(slot) + ": expected a slot id in [0, " +
                    std::to_string(slots.size()) + ")");
  const Slot& s = slots[size_t(slot)];
  if (need_lease && (s.state != MT_SLOT_VALID || s.leases == 0))
    return fail(err, err_bytes, MT_BACKEND_STATE,
                std::string(verb) + ": slot " + std::to_string(slot) +
                    " must be valid and leased (lease it first: uploads into it are then refused)");
  if (s.state == MT_SLOT_UPLOADING)
    return fail(err, err_bytes, MT_BACKEND_BUSY,
                std::string(verb) + ": slot " + std::to_string(slot) + " has an upload in flight");
  *data = s.data;
  return MT_BACKEND_OK;
}

namespace {

// The args' shapes against the slot: each matrix's bytes are its rows of its type.
std::string expert_args_problem(const mt_backend_cuda_expert_args* a, const mt_cuda_runtime& rt, uint64_t slot_bytes) {
  if (a == nullptr) return "args is null";
  if (a->x == nullptr || a->y == nullptr) return "x and y: expected host arrays";
  if (a->count < 1 || a->count > MT_BACKEND_CUDA_EXPERT_ROWS_MAX)
    return "count: expected 1 to " + std::to_string(MT_BACKEND_CUDA_EXPERT_ROWS_MAX) + ", got " +
           std::to_string(a->count);
  if (a->n_embd < 1 || a->n_ff < 1) return "n_embd and n_ff: expected > 0";
  for (int t : {a->gate_type, a->up_type, a->down_type})
    if (!mt_type_supported(t) || !rt.type_supported(t))
      return "type " + std::to_string(t) + " is not supported by the device's expert kernel";
  if (a->gate_bytes != uint64_t(a->n_ff) * mt_row_bytes(a->gate_type, a->n_embd) ||
      a->up_bytes != uint64_t(a->n_ff) * mt_row_bytes(a->up_type, a->n_embd) ||
      a->down_bytes != uint64_t(a->n_embd) * mt_row_bytes(a->down_type, a->n_ff))
    return "gate_bytes / up_bytes / down_bytes: expected n_ff rows of n_embd (gate, up) and n_embd rows of n_ff (down) "
           "in their types";
  if (a->gate_bytes + a->up_bytes + a->down_bytes > slot_bytes)
    return "gate + up + down bytes exceed the slot's " + std::to_string(slot_bytes);
  return "";
}

}  // namespace

int CudaBackend::run_expert(int32_t slot, const void* args, char* err, size_t err_bytes) {
  if (args == nullptr) return fail(err, err_bytes, MT_BACKEND_INVALID, "run_expert: args is null");
  const mt_backend_cuda_run run{slot, *static_cast<const mt_backend_cuda_expert_args*>(args)};
  return run_experts(&run, 1, nullptr, err, err_bytes);
}

// The calls of one run_experts on the compute stream, its x already in x_pinned_: start event,
// x in, one expert_ffn per run (each at its rows' offset; the stream orders their use of the
// one scratch buffer), y out, end event. Under compute_mu_; the caller synchronises.
int CudaBackend::queue_runs(const mt_backend_cuda_run* runs, int32_t n, uint8_t* const* slot_data, size_t total_bytes) {
  if (int rc = rt_.event_record(span_start_, compute_stream_)) return rc;
  if (int rc = rt_.memcpy_h2d_async(x_dev_.ptr, x_pinned_.ptr, total_bytes, compute_stream_)) return rc;
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    const mt_backend_cuda_expert_args& a = runs[i].args;
    mt_cuda_expert_args k{};
    k.slot = slot_data[i];
    k.gate_bytes = a.gate_bytes, k.up_bytes = a.up_bytes, k.down_bytes = a.down_bytes;
    k.gate_type = a.gate_type, k.up_type = a.up_type, k.down_type = a.down_type;
    k.n_embd = a.n_embd, k.n_ff = a.n_ff, k.count = a.count;
    k.x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x_dev_.ptr) + at);
    k.y = reinterpret_cast<float*>(static_cast<uint8_t*>(y_dev_.ptr) + at);
    k.scratch = scratch_dev_.ptr, k.scratch_bytes = scratch_dev_.bytes;
    if (int rc = rt_.expert_ffn(&k, compute_stream_)) return rc;
    at += size_t(a.count) * size_t(a.n_embd) * sizeof(float);
  }
  if (int rc = rt_.memcpy_d2h_async(y_pinned_.ptr, y_dev_.ptr, total_bytes, compute_stream_)) return rc;
  return rt_.event_record(span_end_, compute_stream_);
}

int CudaBackend::run_experts(const mt_backend_cuda_run* runs, int32_t n, mt_backend_cuda_span* span, char* err,
                             size_t err_bytes) {
  if (runs == nullptr || n < 1 || n > MT_BACKEND_CUDA_RUNS_MAX)
    return fail(
        err, err_bytes, MT_BACKEND_INVALID,
        "run_experts: expected 1 to " + std::to_string(MT_BACKEND_CUDA_RUNS_MAX) + " runs, got " + std::to_string(n));
  uint64_t slot_size = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    slot_size = slot_bytes;
  }
  uint8_t* data[MT_BACKEND_CUDA_RUNS_MAX];
  size_t total_bytes = 0, scratch_bytes = 1;
  int64_t rows = 0;
  for (int32_t i = 0; i < n; i++) {
    const mt_backend_cuda_expert_args& a = runs[i].args;
    const std::string verb = n == 1 ? "run_expert" : "run_experts: run " + std::to_string(i);
    if (int rc = slot_for_compute(runs[i].slot, true, verb.c_str(), &data[i], err, err_bytes)) return rc;
    const std::string problem = expert_args_problem(&a, rt_, slot_size);
    if (!problem.empty()) return fail(err, err_bytes, MT_BACKEND_INVALID, verb + ": " + problem);
    rows += a.count;
    total_bytes += size_t(a.count) * size_t(a.n_embd) * sizeof(float);
    scratch_bytes = std::max(scratch_bytes,
                             rt_.expert_scratch_bytes(a.gate_type, a.up_type, a.down_type, a.n_embd, a.n_ff, a.count));
  }
  if (rows > MT_BACKEND_CUDA_EXPERT_ROWS_MAX)
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                "run_experts: " + std::to_string(rows) + " rows in all, at most " +
                    std::to_string(MT_BACKEND_CUDA_EXPERT_ROWS_MAX) + " (split the runs)");
  std::lock_guard<std::mutex> lock(compute_mu_);  // the buffers below, the span events and the stream's order
  for (auto [buf, bytes] :
       {std::pair<DeviceBuffer*, size_t>{&x_dev_, total_bytes}, {&y_dev_, total_bytes}, {&scratch_dev_, scratch_bytes}})
    if (int rc = grow(*buf, bytes, false)) return device_failure("run_experts", rc, err, err_bytes);
  for (DeviceBuffer* buf : {&x_pinned_, &y_pinned_})
    if (int rc = grow(*buf, total_bytes, true)) return device_failure("run_experts", rc, err, err_bytes);
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    const size_t bytes = size_t(runs[i].args.count) * size_t(runs[i].args.n_embd) * sizeof(float);
    std::memcpy(static_cast<uint8_t*>(x_pinned_.ptr) + at, runs[i].args.x, bytes);
    at += bytes;
  }
  const ClockBasePtr base = clock_->base();  // before the start event: each event is timed against a base older than it
  int rc = queue_runs(runs, n, data, total_bytes);
  const int sync =
      rt_.stream_synchronize(compute_stream_);  // also after a failure: nothing queued may outlive the buffers' use
  if (rc == MT_CUDA_SUCCESS) rc = sync;
  if (rc != MT_CUDA_SUCCESS) return device_failure(n == 1 ? "run_expert" : "run_experts", rc, err, err_bytes);
  at = 0;
  for (int32_t i = 0; i < n; i++) {
    const size_t bytes = size_t(runs[i].args.count) * size_t(runs[i].args.n_embd) * sizeof(float);
    std::memcpy(runs[i].args.y, static_cast<const uint8_t*>(y_pinned_.ptr) + at, bytes);
    at += bytes;
  }
  if (span != nullptr)
    *span = mt_backend_cuda_span{clock_->time_of(*base, span_start_), clock_->time_of(*base, span_end_)};
  clock_->refresh();  // holds compute_mu_ only: a compute-only workload keeps its base fresh too
  return MT_BACKEND_OK;
}

int CudaBackend::slot_read(int32_t slot, void* out, size_t bytes, size_t* copied, char* err, size_t err_bytes) {
  uint8_t* data = nullptr;
  if (int rc = slot_for_compute(slot, false, "slot_read", &data, err, err_bytes)) return rc;
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    n = bytes < slot_bytes ? bytes : size_t(slot_bytes);
  }
  std::lock_guard<std::mutex> lock(compute_mu_);
  int rc = n > 0 ? rt_.memcpy_d2h_async(out, data, n, compute_stream_) : MT_CUDA_SUCCESS;
  const int sync = rt_.stream_synchronize(compute_stream_);
  if (rc == MT_CUDA_SUCCESS) rc = sync;
  if (rc != MT_CUDA_SUCCESS) return device_failure("slot_read", rc, err, err_bytes);
  *copied = n;
  return MT_BACKEND_OK;
}

}  // namespace mt
