// The CUDA backend's memory, clock and upload path (cuda_backend.h has the picture).
#include "cuda_backend.h"
#include <algorithm>
#include <cstring>
#include "sim_runtime.h"

namespace mt {
namespace {

// The interface's optional run_experts entry (include/mt_backend.h): this kind is the one that sets it.
int run_experts_entry(mt_backend* b, const mt_backend_run* runs, int32_t n, mt_backend_span* span, char* err,
                      size_t err_bytes) {
  return static_cast<CudaBackend*>(b)->run_experts(runs, n, span, err, err_bytes);
}

}  // namespace

CudaBackend::CudaBackend(const mt_backend_config& c, const mt_cuda_runtime& rt, bool simulated)
    : mt_backend(c), rt_(rt), simulated_(simulated) {
  iface.run_experts = run_experts_entry;
}

// Also the cleanup of a failed init: every handle is checked before it is given back.
CudaBackend::~CudaBackend() {
  drain();
  if (io_ != nullptr) mt_io_destroy(io_);  // after drain: the staging thread waited every read it issued
  for (StagingBuffer& b : ring_) {
    if (b.done != nullptr) rt_.event_destroy(b.done);
    if (b.host != nullptr) rt_.host_free_pinned(b.host);
  }
  for (DeviceBuffer* d : {&x_dev_, &y_dev_, &scratch_dev_})
    if (d->ptr != nullptr) rt_.device_free(d->ptr);
  for (DeviceBuffer* h : {&x_pinned_, &y_pinned_})
    if (h->ptr != nullptr) rt_.host_free_pinned(h->ptr);
  for (void* ev : {span_start_, span_end_})
    if (ev != nullptr) rt_.event_destroy(ev);
  clock_.reset();  // its bases' events; after drain, no job holds one
  if (upload_stream_ != nullptr) rt_.stream_destroy(upload_stream_);
  if (compute_stream_ != nullptr) rt_.stream_destroy(compute_stream_);
  if (simulated_) sim_runtime_release(rt_);
  // The real library stays loaded: cudart does not support being unloaded and reloaded.
}

int CudaBackend::init(char* err, size_t err_bytes) {
  auto failed = [&](const char* what, int rc) {
    return fail(err, err_bytes, rc == MT_CUDA_ERROR_MEMORY_ALLOCATION ? MT_BACKEND_NO_MEMORY : MT_BACKEND_STATE,
                std::string("create: ") + what + ": " + cuda_error_text(&rt_, rc));
  };
  if (has_model_file(config)) {
    std::string why;
    io_ = open_model_file_engine(config, &direct_, &why);
    if (io_ == nullptr)
      return fail(err, err_bytes, MT_BACKEND_INVALID, "create: the read engine over the model file: " + why);
  }
  if (int rc = rt_.stream_create(&upload_stream_)) return failed("stream_create (upload)", rc);
  if (int rc = rt_.stream_create(&compute_stream_)) return failed("stream_create (compute)", rc);
  try {
    clock_ = std::make_unique<DeviceClock>(rt_);
  } catch (const std::exception& e) {
    return fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what());
  }
  if (int rc = clock_->start(upload_stream_)) return failed("the clock's base event", rc);
  for (StagingBuffer& b : ring_) {
    if (int rc = rt_.host_alloc_pinned(&b.host, kStagingBufferBytes))
      return b.host = nullptr, failed("host_alloc_pinned (staging)", rc);
    if (int rc = rt_.event_create(&b.done)) return b.done = nullptr, failed("event_create (staging)", rc);
  }
  if (int rc = rt_.event_create(&span_start_)) return span_start_ = nullptr, failed("event_create (compute span)", rc);
  if (int rc = rt_.event_create(&span_end_)) return span_end_ = nullptr, failed("event_create (compute span)", rc);
  try {
    upload_waiter_ = std::make_unique<EventWaiter>(rt_);
    compute_waiter_ = std::make_unique<EventWaiter>(rt_);
    staging_ = std::thread([this] { run_staging(); });
  } catch (const std::exception& e) {
    return fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what());
  }
  return MT_BACKEND_OK;
}

uint8_t* CudaBackend::alloc_block(uint64_t bytes) {
  void* p = nullptr;
  return rt_.device_malloc(&p, size_t(bytes)) == MT_CUDA_SUCCESS ? static_cast<uint8_t*>(p) : nullptr;
}

void CudaBackend::free_block(uint8_t* block) { rt_.device_free(block); }

// The host's clock, for a marker the device could not time.
int64_t CudaBackend::compute_stamp(uint64_t) { return monotonic_ns(); }

// Under mu (mt_backend_upload counted the job in uploads_in_flight before this).
void CudaBackend::submit(const UploadJob& job) { queue_.push(job); }

// Idempotent (the destructor calls it again): the staging queue empties first, then the
// waiters complete what it issued.
void CudaBackend::drain() {
  queue_.stop();
  if (staging_.joinable()) staging_.join();
  if (upload_waiter_) upload_waiter_->stop();
  if (compute_waiter_) compute_waiter_->stop();
}

void CudaBackend::run_staging() {
  UploadJob job;
  while (queue_.pop(&job)) issue(job);
}

// The chunk into its staging buffer, once the buffer's previous copy finished: a memcpy from
// the mapping, or (file mode) a read of the chunk's range of the file, issued, not waited for.
bool CudaBackend::fill(StagingBuffer& b, const Chunk& c) {
  MT_ASSERT(c.n > 0 && c.n <= kStagingBufferBytes, "a chunk fits one staging buffer");
  if (b.pending) {
    b.pending = false;
    if (rt_.event_synchronize(b.done) != MT_CUDA_SUCCESS) return false;
  }
  if (io_ == nullptr) {
    std::memcpy(b.host, c.src, c.n);
    return true;
  }
  uint64_t offset = 0;
  if (!model_file_offset(config, c.src, c.n, &offset)) return false;  // not the model file's bytes: the upload fails
  if (mt_io_read(io_, offset, c.n, static_cast<uint8_t*>(b.host), 0, &b.read, nullptr, 0) != MT_IO_OK) return false;
  b.reading = true;
  return true;
}

// Waits for the buffer's read, if one is in flight; false if it failed or came short.
bool CudaBackend::settle_read(StagingBuffer& b) {
  if (!b.reading) return true;
  b.reading = false;
  mt_io_info info{};
  const bool ok = mt_io_wait(io_, b.read, &info, nullptr, 0) == MT_IO_OK && info.state == MT_IO_DONE &&
                  info.bytes_read == info.bytes;
  if (!direct_) mt_io_advise(io_, MT_IO_ADVICE_DONTNEED, info.file_offset, info.bytes_read);
  return ok;
}

// The filled buffer to dst on the upload stream; its event is recorded after the copy.
bool CudaBackend::send(StagingBuffer& b, const Chunk& c) {
  if (!settle_read(b)) return false;
  if (rt_.memcpy_h2d_async(c.dst, b.host, c.n, upload_stream_) != MT_CUDA_SUCCESS) {
    // A copy may have been queued before it failed: the buffer waits for the stream to pass.
    b.pending = rt_.event_record(b.done, upload_stream_) == MT_CUDA_SUCCESS;
    return false;
  }
  b.pending = rt_.event_record(b.done, upload_stream_) == MT_CUDA_SUCCESS;
  return b.pending;
}

// Issues the job's chunks; the upload waiter completes it once its end event finished. Reads of
// the file run up to a ring ahead of the copies (the disk wants several in flight); memcpy fills
// one ahead, so the first copy starts at once.
void CudaBackend::issue(const UploadJob& job) {
  clock_->refresh();
  const ClockBasePtr base = clock_->base();  // the times of this upload's events count from it
  void* start = nullptr;
  void* end = nullptr;
  bool ok = rt_.event_create(&start) == MT_CUDA_SUCCESS && rt_.event_create(&end) == MT_CUDA_SUCCESS &&
            rt_.event_record(start, upload_stream_) == MT_CUDA_SUCCESS;
  chunks_.clear();
  uint64_t into = 0;
  for (int32_t i = 0; i < job.n_pieces; i++) {
    const uint8_t* src = static_cast<const uint8_t*>(job.pieces[i].src);
    for (size_t off = 0; off < job.pieces[i].bytes;) {
      const size_t n = std::min<size_t>(job.pieces[i].bytes - off, kStagingBufferBytes);
      chunks_.push_back(Chunk{job.dst + into, src + off, n});
      off += n, into += n;
    }
  }
  const size_t ahead = io_ != nullptr ? size_t(kStagingBuffers) : 1;
  const auto buffer = [&](size_t k) -> StagingBuffer& { return ring_[(size_t(next_buffer_) + k) % kStagingBuffers]; };
  size_t filled = 0, sent = 0;
  uint64_t at = 0;  // bytes issued without error, from the slot's start
  while (ok && sent < chunks_.size()) {
    while (ok && filled < chunks_.size() && filled < sent + ahead) {
      ok = fill(buffer(filled), chunks_[filled]);
      if (ok) filled++;
    }
    if (ok) ok = send(buffer(sent), chunks_[sent]);
    if (ok) at += chunks_[sent++].n;
  }
  for (size_t k = sent; k < filled; k++)
    settle_read(buffer(k));  // after a failure: no read may outlive its buffer's turn
  next_buffer_ = int((size_t(next_buffer_) + filled) % kStagingBuffers);
  MT_ASSERT(!ok || at == job.bytes, "an upload that issued every chunk issued all its bytes");
  if (end != nullptr && rt_.event_record(end, upload_stream_) == MT_CUDA_SUCCESS) {
    upload_waiter_->add(end, [this, job, ok, at, start, end, base](int rc) {
      finish_upload(job, ok && rc == MT_CUDA_SUCCESS, at, start, end, *base);
    });
    return;
  }
  // No end event to wait for: the stream itself is waited for (its copies write into the slot).
  rt_.stream_synchronize(upload_stream_);
  finish_upload(job, false, at, start, end, *base);
}

void CudaBackend::finish_upload(UploadJob job, bool ok, uint64_t landed, void* start, void* end,
                                const ClockBase& base) {
  const int64_t start_ns = clock_->time_of(base, start);
  const int64_t span = clock_->span_ns(start, end);  // the duration at elapsed_ms's best precision
  int64_t end_ns = span >= 0 ? start_ns + span : clock_->time_of(base, end);
  if (end_ns < start_ns) end_ns = start_ns;  // one of them untimed (a failed record): the host's clock
  if (start != nullptr) rt_.event_destroy(start);
  if (end != nullptr) rt_.event_destroy(end);
  if (!ok) job.copy_limit = landed;  // stats count the bytes that reached the slot
  complete(job, ok, start_ns, end_ns);
}

}  // namespace mt
