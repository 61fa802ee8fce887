// The disk backend: RAM slots filled by reading the model file instead of copying from its
// mapping (include/mt_backend.h, kind disk; its own verbs and the design: mt_backend_disk.h).
// An upload's pieces point into the mapping; each becomes a read of the same range of the file,
// issued to the read engine (include/mt_io.h) when the upload is, so that the disk sees many
// reads at once; the mapping's pages are never touched:
//
//   submit (under mu)                     piece.src - file_base = file offset
//     pieces in the file? --no--> the job fails once its issued reads (none) landed
//     room (outstanding reads)? --no--> waiting_ (issued in order as earlier reads land)
//     mt_io_read per piece, into job.dst + the piece's place ---> issued_ (FIFO)
//   completion thread: front of issued_ --mt_io_wait each read--> room for waiting_ -->
//     complete(job, every read done, first start, last end)
//
// A failed or short read (or the engine's injected failure, fail_transfer_after_bytes) fails the
// upload: the slot turns invalid and the event failed, as a failed copy does on the other kinds.
//
// The engine is shared (include/mt_backend.h, read_engine): the backend's reads are its
// MT_IO_LANE_NORMAL (mt_io_read), and the disk tier reads the misses a layer waits on on
// MT_IO_LANE_URGENT, which start first. Everything the backend counts, holds or injects is its
// lane's: the tier's reads never show in disk_stats, and a hold never stalls them.
#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>
#include "../cpu_backend/cpu_backend.h"
#include "../backend/model_file.h"
#include "mt_backend_disk.h"
#include "mt_io.h"

namespace mt {
namespace {

// One upload as the completion thread sees it: its job and the reads it waits for.
struct DiskJob {
  UploadJob job;
  mt_io_id reads[MT_UPLOAD_PIECES_MAX] = {};
  int32_t n_reads = 0;
  bool refused = false;  // a piece outside the file, or a read the engine refused: the job fails
};

// What the reads of one job came to.
struct Landed {
  bool ok = true;
  uint64_t bytes = 0;
  int64_t start_ns = INT64_MAX, end_ns = 0;
};

mt_io* read_engine_entry(mt_backend* b);

class DiskBackend : public RamBackend {
 public:
  DiskBackend(const mt_backend_config& c, mt_io* io, bool direct)
      : RamBackend(c), io_(io), direct_(direct), thread_([this] { run(); }) {
    iface.read_engine = read_engine_entry;
  }
  ~DiskBackend() override {
    drain();  // the completion thread waits on io_: it stops first
    mt_io_destroy(io_);
  }

  void submit(const UploadJob& job) override;
  void drain() override;
  void stats(mt_backend_disk_stats* out);
  void hold(bool on) { mt_io_hold_lane(io_, kLane, on ? 1 : 0); }
  mt_io* engine() const { return io_; }

 private:
  bool in_file(const mt_upload_piece& p) const;
  void issue(DiskJob& d);  // under queue_mu_
  void issue_waiting();    // under queue_mu_
  Landed wait_reads(const DiskJob& d);
  void note_read(const mt_io_info& info);
  void drop_cached(const mt_io_info& info) const;
  void run();

  static constexpr int32_t kLane = MT_IO_LANE_NORMAL;  // the backend's lane of the shared engine
  mt_io* const io_;
  const bool direct_;
  std::mutex queue_mu_;  // after mu (submit holds it), before the engine's; never held across a wait
  std::condition_variable queue_cv_;
  std::deque<DiskJob> issued_;   // reads issued; completed in this order
  std::deque<DiskJob> waiting_;  // no read issued yet: the outstanding limit was reached
  int32_t outstanding_ = 0;      // reads of issued_ (and of the job being completed) not yet waited
  bool stopping_ = false;
  // The completion thread's alone: end times of the reads that may still overlap the next one.
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> open_ends_;
  std::atomic<int32_t> reads_in_flight_peak_{0};
  std::thread thread_;  // last: it starts once every member above exists
};

bool DiskBackend::in_file(const mt_upload_piece& p) const {
  uint64_t offset = 0;
  return model_file_offset(config, p.src, p.bytes, &offset);
}

// Under mu (mt_backend_upload counted the job in uploads_in_flight before this); never blocks:
// the reads go to the engine's queue.
void DiskBackend::submit(const UploadJob& job) {
  DiskJob d;
  d.job = job;
  for (int32_t i = 0; i < job.n_pieces; i++) d.refused = d.refused || !in_file(job.pieces[i]);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    MT_ASSERT(!stopping_, "no upload is submitted once drain began (the backend is closed first)");
    if (waiting_.empty() && outstanding_ + job.n_pieces <= MT_BACKEND_DISK_READS_OUTSTANDING_MAX)
      issue(d);
    else
      waiting_.push_back(d);  // after the jobs waiting already: reads go to the disk in upload order
  }
  queue_cv_.notify_one();
}

// One read per piece, back to back from the slot's start; a refused read stops the job (it fails
// once the reads issued before it landed: they write into its slot).
void DiskBackend::issue(DiskJob& d) {
  uint64_t at = 0;
  for (int32_t i = 0; i < d.job.n_pieces && !d.refused; i++) {
    const mt_upload_piece& p = d.job.pieces[i];
    if (p.bytes == 0) continue;  // nothing to read (the engine refuses empty reads)
    const uint64_t offset = uint64_t(static_cast<const uint8_t*>(p.src) - config.file_base);
    mt_io_id id = 0;
    if (mt_io_read(io_, offset, p.bytes, d.job.dst + at, int64_t(d.job.event), &id, nullptr, 0) != MT_IO_OK)
      d.refused = true;
    else
      d.reads[d.n_reads++] = id;
    at += p.bytes;
  }
  outstanding_ += d.n_reads;
  issued_.push_back(d);
}

void DiskBackend::issue_waiting() {
  while (!waiting_.empty() && outstanding_ + waiting_.front().job.n_pieces <= MT_BACKEND_DISK_READS_OUTSTANDING_MAX) {
    issue(waiting_.front());
    waiting_.pop_front();
  }
}

// Blocks (no lock held) until each of the job's reads landed or failed.
Landed DiskBackend::wait_reads(const DiskJob& d) {
  Landed l;
  l.ok = !d.refused;
  for (int32_t i = 0; i < d.n_reads; i++) {
    mt_io_info info{};
    const int rc = mt_io_wait(io_, d.reads[i], &info, nullptr, 0);
    MT_ASSERT(rc == MT_IO_OK, "a read is waited for before the engine prunes it (the outstanding limit)");
    if (rc != MT_IO_OK || info.state != MT_IO_DONE) l.ok = false;
    if (rc != MT_IO_OK) continue;
    l.bytes += info.bytes_read;
    if (info.start_ns > 0 && info.start_ns < l.start_ns) l.start_ns = info.start_ns;
    if (info.end_ns > l.end_ns) l.end_ns = info.end_ns;
    note_read(info);
    if (!direct_) drop_cached(info);
  }
  if (l.start_ns == INT64_MAX) l.start_ns = l.end_ns = monotonic_ns();  // no read started: it failed here
  return l;
}

// The peak of reads in flight, from the disk's own times: reads arrive here in issue order, which
// is the order the engine starts them in (its lane's queue is FIFO), so their starts never go back;
// the reads still open at this one's start are those whose end lies after it (at most queue depth).
void DiskBackend::note_read(const mt_io_info& info) {
  if (info.start_ns <= 0) return;  // failed before it started
  while (!open_ends_.empty() && open_ends_.top() <= info.start_ns) open_ends_.pop();
  open_ends_.push(info.end_ns);
  if (int32_t(open_ends_.size()) > reads_in_flight_peak_.load(std::memory_order_relaxed))
    reads_in_flight_peak_.store(int32_t(open_ends_.size()), std::memory_order_relaxed);
}

// Buffered (no O_DIRECT): the page cache must not keep a second copy of what the slot now holds.
void DiskBackend::drop_cached(const mt_io_info& info) const {
  mt_io_advise(io_, MT_IO_ADVICE_DONTNEED, info.file_offset, info.bytes_read);
}

// Jobs finish in issue order; stopping only ends the loop once nothing is issued or waiting.
// Normal priority (not the cpu copier's SCHED_BATCH): it only settles what the disk did, in a few
// microseconds, and a batch wake-up would hold a landed upload back by up to a time slice.
void DiskBackend::run() {
  for (;;) {
    DiskJob d;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !issued_.empty(); });
      if (issued_.empty()) {
        MT_ASSERT(waiting_.empty(), "a job waits only while reads are outstanding (their landing issues it)");
        return;
      }
      d = issued_.front();
      issued_.pop_front();
    }
    const Landed l = wait_reads(d);
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      outstanding_ -= d.n_reads;
      MT_ASSERT(outstanding_ >= 0, "outstanding reads never go below 0");
      issue_waiting();
    }
    MT_ASSERT(l.bytes <= d.job.bytes, "the reads land at most the upload's bytes");
    d.job.copy_limit = l.ok ? d.job.bytes : l.bytes;  // a failed upload counts the bytes that landed
    complete(d.job, l.ok, l.start_ns, l.end_ns);
  }
}

void DiskBackend::drain() {
  mt_io_hold_lane(io_, kLane, 0);  // a held lane would never land the reads waited for
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(queue_mu_);
  MT_ASSERT(issued_.empty() && waiting_.empty() && outstanding_ == 0,
            "the completion thread ends only once every job completed");
}

void DiskBackend::stats(mt_backend_disk_stats* out) {
  mt_io_stats io{};
  mt_io_stats_get(io_, &io);
  const mt_io_lane_stats& own = io.lanes[kLane];  // the tier's reads on the same engine are not ours
  *out = mt_backend_disk_stats{};
  out->io_kind = io.kind;
  out->direct = io.direct;
  out->queue_depth = io.queue_depth;
  out->reads_in_flight_peak = reads_in_flight_peak_.load(std::memory_order_relaxed);
  out->reads_in_flight = own.reads_in_flight;
  out->reads_queued = own.reads_queued;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    out->uploads_waiting = int32_t(waiting_.size());
  }
  out->reads_issued = own.reads_issued;
  out->reads_failed = own.reads_failed;
  out->bytes_read = own.bytes_read;
  out->reads_bounced = own.reads_bounced;
  out->alignment_bytes = io.alignment_bytes;
}

DiskBackend* as_disk(mt_backend* b) {
  return b != nullptr && b->config.kind == MT_BACKEND_DISK ? static_cast<DiskBackend*>(b) : nullptr;
}

// The interface's optional read_engine entry (include/mt_backend.h): this kind is the one that sets it.
mt_io* read_engine_entry(mt_backend* b) { return static_cast<DiskBackend*>(b)->engine(); }

}  // namespace

mt_backend* create_disk_backend(const mt_backend_config& c, char* err, size_t err_bytes) {
  if (c.file_fd < 0 || c.file_base == nullptr || c.file_length == 0)
    return fail(err, err_bytes, MT_BACKEND_INVALID,
                "create: disk: expected the model file (file_fd, file_base, file_length)"),
           nullptr;
  bool direct = false;
  std::string why;
  mt_io* io = open_model_file_engine(c, &direct, &why);  // O_DIRECT: the disk's bytes go to the slot and nowhere else
  if (io == nullptr)
    return fail(err, err_bytes, MT_BACKEND_INVALID, "create: disk: the read engine over the model file: " + why),
           nullptr;
  try {
    return new DiskBackend(c, io, direct);
  } catch (const std::exception& e) {  // no memory, or no completion thread
    mt_io_destroy(io);
    fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what());
    return nullptr;
  }
}

}  // namespace mt

extern "C" {

int mt_backend_disk_stats_get(mt_backend* b, mt_backend_disk_stats* out, char* err, size_t err_bytes) {
  mt::DiskBackend* d = mt::as_disk(b);
  if (d == nullptr) return mt::fail(err, err_bytes, MT_BACKEND_UNSUPPORTED, "disk_stats: not a disk backend");
  d->stats(out);
  return MT_BACKEND_OK;
}

int mt_backend_disk_hold(mt_backend* b, int32_t hold, char* err, size_t err_bytes) {
  mt::DiskBackend* d = mt::as_disk(b);
  if (d == nullptr) return mt::fail(err, err_bytes, MT_BACKEND_UNSUPPORTED, "disk_hold: not a disk backend");
  d->hold(hold != 0);
  return MT_BACKEND_OK;
}

}  // extern "C"
