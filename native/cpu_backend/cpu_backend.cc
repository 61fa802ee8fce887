// RAM slots and their clock (RamBackend), and the cpu backend's upload thread (see cpu_backend.h).
#include "cpu_backend.h"
#include <cstdlib>
#include <pthread.h>
#include <sched.h>
#include <cstring>
#include <exception>
#include <string>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace mt {

uint8_t* RamBackend::alloc_block(uint64_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kBlockAlignBytes, bytes) != 0) return nullptr;
  // Touch every page now: an upload then times the copy, not first-touch page faults
  // (which made a 32 MiB copy 2x slower), so calibration sees the arena's bandwidth.
  std::memset(p, 0, bytes);
  return static_cast<uint8_t*>(p);
}

void RamBackend::free_block(uint8_t* block) { std::free(block); }

// The whole pages inside [p, p + bytes) go back to the OS (they read as zero when touched again);
// a slot's partial pages at its ends stay. Linux only; elsewhere the memory stays (no harm).
void RamBackend::discard_bytes(uint8_t* p, uint64_t bytes) {
#if defined(__linux__)
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t from = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t to = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
#else
  (void)p, (void)bytes;
#endif
}

int64_t RamBackend::compute_stamp(uint64_t) { return monotonic_ns(); }

CpuBackend::CpuBackend(const mt_backend_config& c) : RamBackend(c), thread_([this] { run(); }) {}

CpuBackend::~CpuBackend() { drain(); }

// Under mu (mt_backend_upload counted the job in uploads_in_flight before this).
void CpuBackend::submit(const UploadJob& job) {
  const size_t queued = queue_.push(job);
  MT_ASSERT(queued <= size_t(uploads_in_flight), "every queued job is an upload in flight: at most one per slot");
  (void)queued;
}

void CpuBackend::drain() {
  queue_.stop();
  if (thread_.joinable()) thread_.join();
  MT_ASSERT(queue_.empty(), "the upload thread ends only once its queue is empty");
}

// Jobs run in submission order; stopping only ends the loop once the queue is empty.
void CpuBackend::run() {
#if defined(__linux__)
  // SCHED_BATCH, as the tier's issuer (tier_issuer.cc): woken by an upload, the copier waits for
  // the next scheduling point instead of preempting a compute thread at once.
  sched_param sp{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
  UploadJob job;
  while (queue_.pop(&job)) {
    MT_ASSERT(job.dst != nullptr && job.n_pieces >= 1 && job.copy_limit <= job.bytes,
              "a submitted job has a slot, pieces and a copy limit within them");
    const int64_t start = monotonic_ns();
    const bool ok = copy_pieces(job);
    const int64_t end = monotonic_ns();
    if (job.virtual_times)
      complete(job, ok, job.start_ns, job.end_ns);
    else
      complete(job, ok, start, end);
  }
}

mt_backend* create_cpu_backend(const mt_backend_config& c, char* err, size_t err_bytes) {
  try {
    return new CpuBackend(c);
  } catch (const std::exception& e) {  // no memory, or no thread for the upload queue
    fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what());
    return nullptr;
  }
}

}  // namespace mt
