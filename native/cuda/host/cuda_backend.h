// The CUDA backend's host side, written only against an mt_cuda_runtime table (real:
// libmoetier_cuda.so; simulated: sim_runtime.cc), so tests run every path on the simulation.
//
//   reserve      one device_malloc block per call (alloc_block / free_block)
//   upload       submit (under mu) --> staging thread: per chunk of a piece, wait for a free
//                pinned buffer, fill it, memcpy_h2d_async into the slot at its offset on the
//                upload stream, record the buffer's event; then record the upload's end event
//                --> upload waiter: event_synchronize(end) --> complete(). Filled by a memcpy
//                from the mapping, or, given the model file (config file_*), by a read of the
//                file into the buffer (the read engine, O_DIRECT: the mapping's pages and the
//                page cache stay out), up to a ring's worth of reads in flight ahead of the copies
//   events       on CLOCK_MONOTONIC through elapsed_ms against a base event (cuda_clock.h:
//                the first recorded at creation on the upload stream, refreshed as it ages)
//   compute      compute_record records an event on the compute stream; the compute waiter
//                resolves the marker (complete_compute) once the stream reached it
//   run_experts  a layer's residents: every run's x into one pinned buffer, one copy to the
//                device, expert_ffn per run, one copy of the y rows back, one synchronise; events
//                before and after on the compute stream give the device's span (run_expert: one run)
//
// Locks: mu (the base's) for the slot table and events; the staging queue's own (taken under
// mu by submit); compute_mu_ for the compute scratch buffers (run_expert and
// slot_read; never held with mu). The threads never hold their own lock while taking mu.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "../../backend/backend.h"
#include "../../backend/model_file.h"
#include "../../backend/work_queue.h"
#include "mt_backend_cuda.h"
#include "../mt_cuda_runtime.h"
#include "cuda_clock.h"
#include "event_waiter.h"

namespace mt {

constexpr int kStagingBuffers = MT_BACKEND_CUDA_STAGING_BUFFERS;
constexpr size_t kStagingBufferBytes = MT_BACKEND_CUDA_STAGING_BUFFER_BYTES;
static_assert(kStagingBuffers >= 2, "the ring needs two buffers to fill one while the other is copied");
static_assert(kStagingBufferBytes > 0 && kStagingBufferBytes % kSlotAlignBytes == 0,
              "chunks keep the slot's alignment");

// "cudaErrorNoDevice (no CUDA-capable device is detected)": the error's name and the runtime's string.
std::string cuda_error_text(const mt_cuda_runtime* rt, int error);

class CudaBackend : public mt_backend {
 public:
  CudaBackend(const mt_backend_config& c, const mt_cuda_runtime& rt, bool simulated);
  ~CudaBackend() override;
  // Streams, the base event, the staging ring and the threads; a status and err on failure.
  int init(char* err, size_t err_bytes);

  uint8_t* alloc_block(uint64_t bytes) override;
  void free_block(uint8_t* block) override;
  void submit(const UploadJob& job) override;
  int64_t compute_stamp(uint64_t work_bytes) override;
  bool record_compute(mt_event_id event) override;
  void drain() override;
  bool overwrite_supported() const override {
    return config.kind != MT_BACKEND_CUDA_SIM || config.overwrite_supported != 0;
  }
  bool host_visible() const override { return false; }
  int run_expert(int32_t slot, const void* args, char* err, size_t err_bytes) override;
  int run_experts(const mt_backend_cuda_run* runs, int32_t n, mt_backend_cuda_span* span, char* err, size_t err_bytes);
  int slot_read(int32_t slot, void* out, size_t bytes, size_t* copied, char* err, size_t err_bytes);

 private:
  struct StagingBuffer {
    void* host = nullptr;  // pinned
    void* done = nullptr;  // recorded after the copy out of it
    bool pending = false;  // done was recorded and not yet waited for
    mt_io_id read = 0;     // file mode: the read filling it
    bool reading = false;  // read was issued and not yet waited for
  };
  // One chunk of an upload: where it lands in the slot, where it comes from (in the mapping).
  struct Chunk {
    uint8_t* dst;
    const uint8_t* src;
    size_t n;
  };
  struct DeviceBuffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  void run_staging();
  void issue(const UploadJob& job);
  bool fill(StagingBuffer& b, const Chunk& c);
  bool send(StagingBuffer& b, const Chunk& c);
  bool settle_read(StagingBuffer& b);
  void finish_upload(UploadJob job, bool ok, uint64_t landed, void* start, void* end, const ClockBase& base);
  int grow(DeviceBuffer& buf, size_t bytes, bool pinned);
  int queue_runs(const mt_backend_cuda_run* runs, int32_t n, uint8_t* const* slot_data, size_t total_bytes);
  int slot_for_compute(int32_t slot, bool need_lease, const char* verb, uint8_t** data, char* err, size_t err_bytes);
  int device_failure(const char* verb, int rc, char* err, size_t err_bytes);

  const mt_cuda_runtime rt_;
  const bool simulated_;
  void* upload_stream_ = nullptr;
  void* compute_stream_ = nullptr;
  std::unique_ptr<DeviceClock> clock_;
  StagingBuffer ring_[kStagingBuffers];
  int next_buffer_ = 0;        // the staging thread's alone
  std::vector<Chunk> chunks_;  // the staging thread's alone: the upload being issued
  mt_io* io_ = nullptr;        // file mode: the read engine over the model file (model_file.h)
  bool direct_ = false;

  WorkQueue<UploadJob> queue_;  // the staging queue

  std::mutex compute_mu_;
  DeviceBuffer x_dev_, y_dev_, scratch_dev_;
  DeviceBuffer x_pinned_, y_pinned_;  // host side of run_experts' two copies (pinned: truly async)
  void* span_start_ = nullptr;        // run_experts' two events on the compute stream
  void* span_end_ = nullptr;

  std::unique_ptr<EventWaiter> upload_waiter_, compute_waiter_;
  std::thread staging_;  // started last by init
};

}  // namespace mt
