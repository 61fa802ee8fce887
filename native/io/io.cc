// The verbs of include/mt_io.h for every kind: create, destroy, read, query, wait, cancel, stats;
// and the one way a read begins and finishes (io.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "io.h"
#include "mt_clock.h"

namespace mt::io {

std::atomic<int64_t> g_engines{0}, g_threads{0}, g_bounce_bytes{0};

int fail(char* err, size_t err_bytes, int status, const std::string& message) {
  if (err != nullptr && err_bytes > 0) std::snprintf(err, err_bytes, "%s", message.c_str());
  return status;
}

std::string errno_text(int error) { return std::string(mt_io_errno_name(error)) + " (" + std::strerror(error) + ")"; }

namespace {

constexpr uint64_t kPageBytes = 4096;

uint64_t round_down(uint64_t v, uint64_t a) { return v / a * a; }
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string at(uint64_t offset, uint64_t got, uint64_t bytes) {
  return "at offset " + std::to_string(offset) + ": got " + std::to_string(got) + " of " + std::to_string(bytes) +
         " bytes";
}

void copy_reason(mt_io_info* info, const std::string& reason) {
  std::snprintf(info->reason, sizeof info->reason, "%s", reason.c_str());
}

int check_read(mt_io* io, uint64_t offset, uint64_t bytes, const void* dst, const char* verb, char* err,
               size_t err_bytes) {
  const std::string v = verb;
  if (io == nullptr) return fail(err, err_bytes, MT_IO_INVALID, v + ": io: expected an engine");
  if (bytes == 0 || bytes > MT_IO_READ_BYTES_MAX)
    return fail(
        err, err_bytes, MT_IO_INVALID,
        v + ": bytes: expected 1 to " + std::to_string(MT_IO_READ_BYTES_MAX) + ", got " + std::to_string(bytes));
  if (dst == nullptr) return fail(err, err_bytes, MT_IO_INVALID, v + ": dst: expected memory to read into, got NULL");
  if (offset > uint64_t(INT64_MAX) - bytes)
    return fail(err, err_bytes, MT_IO_INVALID,
                v + ": file_offset " + std::to_string(offset) + " + bytes: expected an end below 2^63");
  return MT_IO_OK;
}

int start_read(mt_io* io, int32_t lane, uint64_t offset, uint64_t bytes, void* dst, int64_t label, bool aligned_only,
               mt_io_id* id, char* err, size_t err_bytes) {
  const char* verb = aligned_only ? "mt_io_read_aligned" : "mt_io_read";
  if (int rc = check_read(io, offset, bytes, dst, verb, err, err_bytes)) return rc;
  if (lane < 0 || lane >= MT_IO_LANES)
    return fail(err, err_bytes, MT_IO_INVALID,
                std::string(verb) + ": lane: expected 0 to " + std::to_string(MT_IO_LANES - 1) + ", got " +
                    std::to_string(lane));
  const uint64_t a = io->align;
  const bool aligned = offset % a == 0 && bytes % a == 0 && uintptr_t(dst) % a == 0;
  if (aligned_only && !aligned)
    return fail(err, err_bytes, MT_IO_INVALID,
                std::string(verb) + ": file_offset " + std::to_string(offset) + ", bytes " + std::to_string(bytes) +
                    " and dst: expected multiples of the alignment, " + std::to_string(a) + " bytes");
  mt::io::Read r;
  r.dst = static_cast<uint8_t*>(dst);
  r.bounce = io->config.direct != 0 && !aligned;
  r.span_offset = r.bounce ? round_down(offset, a) : offset;
  r.span_bytes = r.bounce ? round_up(offset + bytes, a) - r.span_offset : bytes;
  if (r.bounce && r.span_bytes > io->bounce_bytes_max)
    return fail(err, err_bytes, MT_IO_INVALID,
                std::string(verb) + ": bytes " + std::to_string(bytes) + " at offset " + std::to_string(offset) +
                    ": its aligned range of " + std::to_string(r.span_bytes) +
                    " bytes exceeds the bounce buffers' limit, " + std::to_string(io->bounce_bytes_max));
  r.lane = lane;
  r.info.state = MT_IO_PENDING;
  r.info.label = label;
  r.info.file_offset = offset;
  r.info.bytes = bytes;

  std::lock_guard<std::mutex> lock(io->mu);
  MT_ASSERT(!io->closing, "no verb races mt_io_destroy");
  Lane& l = io->lanes[lane];
  if (l.queue.size() >= MT_IO_QUEUED_MAX)
    return fail(
        err, err_bytes, MT_IO_BUSY,
        std::string(verb) + ": " + std::to_string(MT_IO_QUEUED_MAX) + " reads queued already: wait for some first");
  if (l.fail_after_bytes > 0 && !l.injected && l.bytes_asked + bytes > l.fail_after_bytes) {
    r.land_limit = l.fail_after_bytes - l.bytes_asked;
    l.injected = true;
  }
  l.bytes_asked += bytes;
  const mt_io_id new_id = io->next_id++;
  r.info.issued_ns = mt_monotonic_ns();
  const bool added = io->reads.emplace(new_id, r).second;
  MT_ASSERT(added, "read ids are never reused");
  (void)added;
  l.queue.push_back(new_id);
  l.reads_issued++;
  io->start_queued();
  *id = new_id;
  return MT_IO_OK;
}

}  // namespace

}  // namespace mt::io

using mt::io::fail;

mt_io::mt_io(const mt_io_config& c, const mt::io::File& file)
    : config(c),
      fd(file.fd),
      align(file.align),
      align_source(file.align_source),
      bounce_bytes_max(c.bounce_bytes_max > 0 ? c.bounce_bytes_max : MT_IO_READ_BYTES_MAX),
      chunk_bytes(c.chunk_bytes_max == 0           ? UINT64_MAX
                  : c.chunk_bytes_max < file.align ? file.align
                                                   : mt::io::round_down(c.chunk_bytes_max, file.align)),
      bounces(size_t(c.queue_depth)) {
  lanes[MT_IO_LANE_NORMAL].fail_after_bytes = c.fail_after_bytes;
  mt::io::g_engines++;
}

mt_io::~mt_io() {
  MT_ASSERT(in_flight == 0, "an engine is freed with no read in flight");
  for (mt::io::Bounce& b : bounces) std::free(b.data);
  mt::io::g_bounce_bytes -= int64_t(bounce_bytes);
  if (fd >= 0) close(fd);
  mt::io::g_engines--;
}

bool mt_io::begin(mt_io_id id, int32_t place, mt::io::Flight* f) {
  auto it = reads.find(id);
  MT_ASSERT(it != reads.end() && it->second.queued && it->second.info.state == MT_IO_PENDING,
            "a started read was queued");
  MT_ASSERT(place >= 0 && size_t(place) < bounces.size(), "a place is one of queue_depth");
  mt::io::Read& r = it->second;
  r.queued = false;
  *f = mt::io::Flight{};
  f->id = id, f->place = place, f->lane = r.lane, f->dst = r.dst, f->bounce = r.bounce;
  f->span_offset = r.span_offset, f->span_bytes = r.span_bytes;
  f->skip = r.info.file_offset - r.span_offset, f->bytes = r.info.bytes, f->land_limit = r.land_limit;
  f->buffer = r.dst;
  if (r.bounce) {
    mt::io::Bounce& b = bounces[size_t(place)];
    if (b.bytes < r.span_bytes) {  // grown to the largest range seen, page-aligned (a multiple of any block size)
      const uint64_t want = mt::io::round_up(r.span_bytes, mt::io::kPageBytes);
      const uint64_t alignment = align > mt::io::kPageBytes ? align : mt::io::kPageBytes;
      void* data = nullptr;
      if (posix_memalign(&data, alignment, want) != 0) {
        settle(id, MT_IO_FAILED, ENOMEM, 0,
               "bounce buffer of " + std::to_string(want) + " bytes: out of memory (offset " +
                   std::to_string(r.info.file_offset) + ", " + std::to_string(r.info.bytes) + " bytes)");
        return false;
      }
      std::free(b.data);
      bounce_bytes += want - b.bytes;
      mt::io::g_bounce_bytes += int64_t(want - b.bytes);
      b.data = static_cast<uint8_t*>(data), b.bytes = want;
    }
    f->buffer = b.data;
  }
  r.info.start_ns = mt_monotonic_ns();
  r.info.bounced = r.bounce ? 1 : 0;
  if (r.bounce) lanes[r.lane].reads_bounced++;
  in_flight++;
  lanes[r.lane].in_flight++;
  return true;
}

uint64_t mt_io::next_length(const mt::io::Flight& f) const {
  const uint64_t rest = f.span_bytes - f.got;
  return rest < chunk_bytes ? rest : chunk_bytes;
}

mt::io::Next mt_io::advance(mt::io::Flight& f, uint64_t n) const {
  f.got += n;
  if (f.got >= f.skip + f.bytes)
    return mt::io::Next::kDone;  // a direct span may stop short past the wanted end (end of file)
  MT_ASSERT(f.got < f.span_bytes, "a syscall reads no more than it was asked");
  if (f.got >= f.span_bytes) return mt::io::Next::kEndOfFile;
  // A direct read that stops off the alignment has met the end of the file: no syscall can go on from there.
  if (config.direct != 0 && (f.span_offset + f.got) % align != 0) return mt::io::Next::kEndOfFile;
  f.resubmits++;
  return mt::io::Next::kMore;
}

void mt_io::finish(const mt::io::Flight& f, int error, const char* what, std::unique_lock<std::mutex>& lk) {
  MT_ASSERT(!lk.owns_lock(), "finish copies without the lock");
  const uint64_t got = f.got > f.skip ? f.got - f.skip : 0;
  uint64_t landed = got < f.bytes ? got : f.bytes;
  const bool injected = f.land_limit < f.bytes;
  if (injected && landed > f.land_limit) landed = f.land_limit;
  int64_t copy_ns = 0;
  if (f.bounce && landed > 0) {
    const int64_t t0 = mt_monotonic_ns();
    std::memcpy(f.dst, f.buffer + f.skip, landed);
    copy_ns = mt_monotonic_ns() - t0;
  }
  const uint64_t offset = f.span_offset + f.skip;
  std::string reason;
  int state = MT_IO_DONE, err = 0;
  if (error != 0) {
    state = MT_IO_FAILED, err = error;
    reason = std::string(what) + ": " + mt_io_errno_name(error) + " " + mt::io::at(offset, landed, f.bytes);
  } else if (landed < f.bytes && !injected) {
    state = MT_IO_FAILED, err = ENODATA;
    reason = "short read " + mt::io::at(offset, landed, f.bytes) + " (end of file)";
  } else if (injected) {
    state = MT_IO_FAILED, err = EIO;
    reason = "injected failure " + mt::io::at(offset, landed, f.bytes);
  }
  lk.lock();
  mt::io::Lane& l = lanes[f.lane];
  MT_ASSERT(in_flight > 0 && l.in_flight > 0, "in_flight never goes below 0");
  in_flight--;
  l.in_flight--;
  l.resubmits += f.resubmits;
  l.bounce_copy_ns += uint64_t(copy_ns);
  settle(f.id, state, err, landed, reason);
  release_place(f.place);
}

void mt_io::settle(mt_io_id id, int32_t state, int error, uint64_t landed, const std::string& reason) {
  auto it = reads.find(id);
  MT_ASSERT(it != reads.end(), "a pending read is never pruned");
  if (it == reads.end()) return;
  mt_io_info& info = it->second.info;
  MT_ASSERT(info.state == MT_IO_PENDING, "a read settles once");
  info.state = state;
  info.error = error;
  info.bytes_read = landed;
  info.end_ns = mt_monotonic_ns();
  mt::io::copy_reason(&info, reason);
  mt::io::Lane& l = lanes[it->second.lane];
  l.bytes_read += landed;
  if (state == MT_IO_DONE)
    l.reads_done++;
  else
    l.reads_failed++;
  if (error == ECANCELED) l.reads_cancelled++;
  l.finished.push_back(id);
  while (l.finished.size() > MT_IO_FINISHED_RETAINED) {
    reads.erase(l.finished.front());
    l.finished.pop_front();
  }
  settled.notify_all();
}

void mt_io::cancel_queued(int32_t lane) {
  for (int32_t i = 0; i < MT_IO_LANES; i++) {
    if (lane >= 0 && i != lane) continue;
    // settle appends to the lane's finished reads, never to its queue: the queue is walked whole.
    for (mt_io_id id : lanes[i].queue) {
      mt::io::Read& r = reads.at(id);
      r.queued = false;
      settle(id, MT_IO_FAILED, ECANCELED, 0,
             "cancelled before it started (offset " + std::to_string(r.info.file_offset) + ", " +
                 std::to_string(r.info.bytes) + " bytes)");
    }
    lanes[i].queue.clear();
  }
}

bool mt_io::startable() const {
  for (const mt::io::Lane& l : lanes)
    if (!l.held && !l.queue.empty()) return true;
  return false;
}

mt_io_id mt_io::take_queued() {
  for (int32_t i = MT_IO_LANES - 1; i >= 0; i--) {  // the highest lane first
    mt::io::Lane& l = lanes[i];
    if (l.held || l.queue.empty()) continue;
    const mt_io_id id = l.queue.front();
    l.queue.pop_front();
    return id;
  }
  MT_ASSERT(false, "take_queued is called only when a read is startable");
  return 0;
}

size_t mt_io::queued() const {
  size_t n = 0;
  for (const mt::io::Lane& l : lanes) n += l.queue.size();
  return n;
}

extern "C" {

void mt_io_config_default(mt_io_config* out) {
  *out = mt_io_config{};
  out->kind = MT_IO_AUTO;
  out->queue_depth = MT_IO_QUEUE_DEPTH_DEFAULT;
  out->direct = 1;
}

mt_io* mt_io_create(int fd, const mt_io_config* config, int* status, char* err, size_t err_bytes) {
  int ignored = MT_IO_OK;
  int& rc = status != nullptr ? *status : ignored;
  rc = MT_IO_OK;
  if (config == nullptr)
    return rc = fail(err, err_bytes, MT_IO_INVALID, "mt_io_create: config: expected a config, got NULL"), nullptr;
  const mt_io_config& c = *config;
  if (c.kind != MT_IO_AUTO && c.kind != MT_IO_URING && c.kind != MT_IO_THREADS)
    return rc = fail(err, err_bytes, MT_IO_INVALID,
                     "mt_io_create: kind: expected auto (0), uring (1) or threads (2), got " + std::to_string(c.kind)),
           nullptr;
  if (c.queue_depth < 1 || c.queue_depth > MT_IO_QUEUE_DEPTH_MAX)
    return rc = fail(err, err_bytes, MT_IO_INVALID,
                     "mt_io_create: queue_depth: expected 1 to " + std::to_string(MT_IO_QUEUE_DEPTH_MAX) + ", got " +
                         std::to_string(c.queue_depth)),
           nullptr;
  if (c.direct != 0 && c.direct != 1)
    return rc = fail(err, err_bytes, MT_IO_INVALID,
                     "mt_io_create: direct: expected 0 or 1, got " + std::to_string(c.direct)),
           nullptr;
  mt::io::File file;
  if ((rc = mt::io::open_file(fd, c.direct != 0, &file, err, err_bytes)) != MT_IO_OK) return nullptr;
  if (c.kind != MT_IO_THREADS) {
    mt_io* io = mt::io::create_uring(c, file, err, err_bytes, &rc);
    if (io != nullptr || rc != MT_IO_UNSUPPORTED) return io;
    if (c.kind == MT_IO_URING) return close(file.fd), nullptr;
  }
  return mt::io::create_threads(c, file, err, err_bytes, &rc);  // auto without io_uring: the same file
}

void mt_io_destroy(mt_io* io) {
  if (io == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(io->mu);
    io->closing = true;
    for (mt::io::Lane& l : io->lanes) l.held = false;
    io->cancel_queued(-1);
  }
  io->shutdown();
  delete io;
}

int mt_io_read(mt_io* io, uint64_t file_offset, uint64_t bytes, void* dst, int64_t label, mt_io_id* id, char* err,
               size_t err_bytes) {
  return mt::io::start_read(io, MT_IO_LANE_NORMAL, file_offset, bytes, dst, label, false, id, err, err_bytes);
}

int mt_io_read_lane(mt_io* io, int32_t lane, uint64_t file_offset, uint64_t bytes, void* dst, int64_t label,
                    mt_io_id* id, char* err, size_t err_bytes) {
  return mt::io::start_read(io, lane, file_offset, bytes, dst, label, false, id, err, err_bytes);
}

int mt_io_read_aligned(mt_io* io, uint64_t file_offset, uint64_t bytes, void* dst, int64_t label, mt_io_id* id,
                       char* err, size_t err_bytes) {
  return mt::io::start_read(io, MT_IO_LANE_NORMAL, file_offset, bytes, dst, label, true, id, err, err_bytes);
}

static int unknown_id(mt_io* io, mt_io_id id, const char* verb, char* err, size_t err_bytes) {
  const std::string why =
      id == 0 || id >= io->next_id
          ? "never issued"
          : "pruned: only the last " + std::to_string(MT_IO_FINISHED_RETAINED) + " finished reads of a lane are kept";
  return fail(err, err_bytes, MT_IO_INVALID,
              std::string(verb) + ": read " + std::to_string(id) + ": unknown (" + why + ")");
}

int mt_io_query(mt_io* io, mt_io_id id, mt_io_info* info, char* err, size_t err_bytes) {
  if (io == nullptr || info == nullptr)
    return fail(err, err_bytes, MT_IO_INVALID, "mt_io_query: expected an engine and an info");
  std::lock_guard<std::mutex> lock(io->mu);
  auto it = io->reads.find(id);
  if (it == io->reads.end()) return unknown_id(io, id, "mt_io_query", err, err_bytes);
  *info = it->second.info;
  return MT_IO_OK;
}

int mt_io_wait(mt_io* io, mt_io_id id, mt_io_info* info, char* err, size_t err_bytes) {
  int32_t which = 0;
  return mt_io_wait_any(io, &id, 1, &which, info, err, err_bytes);
}

int mt_io_wait_any(mt_io* io, const mt_io_id* ids, int32_t n, int32_t* which, mt_io_info* info, char* err,
                   size_t err_bytes) {
  if (io == nullptr || info == nullptr || which == nullptr)
    return fail(err, err_bytes, MT_IO_INVALID, "mt_io_wait: expected an engine, which and an info");
  if (ids == nullptr || n < 1)
    return fail(err, err_bytes, MT_IO_INVALID, "mt_io_wait_any: ids: expected at least one id");
  std::unique_lock<std::mutex> lock(io->mu);
  for (int32_t i = 0; i < n; i++)
    if (io->reads.find(ids[i]) == io->reads.end()) return unknown_id(io, ids[i], "mt_io_wait", err, err_bytes);
  for (;;) {
    for (int32_t i = 0; i < n; i++) {
      auto it = io->reads.find(ids[i]);
      // Pruned while waited for: it settled (only finished reads are pruned), its info is gone.
      if (it == io->reads.end()) return unknown_id(io, ids[i], "mt_io_wait", err, err_bytes);
      if (it->second.info.state != MT_IO_PENDING) {
        *which = i;
        *info = it->second.info;
        return MT_IO_OK;
      }
    }
    io->settled.wait(lock);
  }
}

int mt_io_cancel(mt_io* io, mt_io_id id, char* err, size_t err_bytes) {
  if (io == nullptr) return fail(err, err_bytes, MT_IO_INVALID, "mt_io_cancel: io: expected an engine");
  std::lock_guard<std::mutex> lock(io->mu);
  auto it = io->reads.find(id);
  if (it == io->reads.end()) return unknown_id(io, id, "mt_io_cancel", err, err_bytes);
  mt::io::Read& r = it->second;
  if (!r.queued) return MT_IO_OK;  // in flight (it runs to its end) or finished
  std::deque<mt_io_id>& queue = io->lanes[r.lane].queue;
  for (auto q = queue.begin(); q != queue.end(); ++q)
    if (*q == id) {
      queue.erase(q);
      break;
    }
  r.queued = false;
  io->settle(id, MT_IO_FAILED, ECANCELED, 0,
             "cancelled before it started (offset " + std::to_string(r.info.file_offset) + ", " +
                 std::to_string(r.info.bytes) + " bytes)");
  return MT_IO_OK;
}

void mt_io_stats_get(mt_io* io, mt_io_stats* out) {
  *out = mt_io_stats{};
  if (io == nullptr) return;
  std::lock_guard<std::mutex> lock(io->mu);
  out->kind = io->kind();
  out->queue_depth = io->config.queue_depth;
  out->direct = io->config.direct;
  out->alignment_source = io->align_source;
  out->alignment_bytes = io->align;
  for (int32_t i = 0; i < MT_IO_LANES; i++) {
    const mt::io::Lane& l = io->lanes[i];
    mt_io_lane_stats& o = out->lanes[i];
    o.reads_issued = l.reads_issued, o.reads_done = l.reads_done, o.reads_failed = l.reads_failed;
    o.reads_cancelled = l.reads_cancelled, o.bytes_read = l.bytes_read, o.reads_bounced = l.reads_bounced;
    o.bounce_copy_ns = l.bounce_copy_ns, o.resubmits = l.resubmits;
    o.reads_in_flight = l.in_flight, o.reads_queued = int32_t(l.queue.size()), o.held = l.held ? 1 : 0;
    out->reads_issued += o.reads_issued, out->reads_done += o.reads_done, out->reads_failed += o.reads_failed;
    out->reads_cancelled += o.reads_cancelled, out->bytes_read += o.bytes_read;
    out->reads_bounced += o.reads_bounced, out->bounce_copy_ns += o.bounce_copy_ns, out->resubmits += o.resubmits;
    out->reads_queued += o.reads_queued;
  }
  out->reads_in_flight = io->in_flight;
  out->bounce_bytes = io->bounce_bytes;
}

// Under mu: the lanes' holds (lane -1: every lane), then one start per read that can go now (the
// threads kind wakes one thread per call).
static void hold_locked(mt_io* io, int32_t lane, bool hold) {
  for (int32_t i = 0; i < MT_IO_LANES; i++)
    if (lane < 0 || i == lane) io->lanes[i].held = hold;
  size_t can_start = 0;
  for (const mt::io::Lane& l : io->lanes)
    if (!l.held) can_start += l.queue.size();
  for (size_t i = 0; i < can_start && i < size_t(io->config.queue_depth); i++) io->start_queued();
}

void mt_io_hold(mt_io* io, int32_t hold) {
  if (io == nullptr) return;
  std::lock_guard<std::mutex> lock(io->mu);
  hold_locked(io, -1, hold != 0);
}

void mt_io_hold_lane(mt_io* io, int32_t lane, int32_t hold) {
  if (io == nullptr || lane < 0 || lane >= MT_IO_LANES) return;
  std::lock_guard<std::mutex> lock(io->mu);
  hold_locked(io, lane, hold != 0);
}

int mt_io_lane_fail_after(mt_io* io, int32_t lane, uint64_t fail_after_bytes) {
  if (io == nullptr || lane < 0 || lane >= MT_IO_LANES) return MT_IO_INVALID;
  std::lock_guard<std::mutex> lock(io->mu);
  mt::io::Lane& l = io->lanes[lane];
  l.fail_after_bytes = fail_after_bytes == 0 ? 0 : l.bytes_asked + fail_after_bytes;
  l.injected = false;
  return MT_IO_OK;
}

void mt_io_lane_drain(mt_io* io, int32_t lane) {
  if (io == nullptr || lane < 0 || lane >= MT_IO_LANES) return;
  std::unique_lock<std::mutex> lock(io->mu);
  io->cancel_queued(lane);
  io->settled.wait(lock, [&] { return io->lanes[lane].in_flight == 0; });
}

int mt_io_same_file(mt_io* io, int fd) {
  struct stat mine{}, theirs{};
  if (io == nullptr || fd < 0 || fstat(io->fd, &mine) != 0 || fstat(fd, &theirs) != 0) return 0;
  return mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino ? 1 : 0;
}

void mt_io_advise(mt_io* io, int32_t advice, uint64_t offset, uint64_t bytes) {
  if (io == nullptr || io->config.direct != 0) return;
  if (advice == MT_IO_ADVICE_RANDOM) {
    posix_fadvise(io->fd, off_t(offset), off_t(bytes), POSIX_FADV_RANDOM);
    return;
  }
  if (advice != MT_IO_ADVICE_DONTNEED || bytes == 0) return;
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t from = offset / page * page, to = (offset + bytes + page - 1) / page * page;
  posix_fadvise(io->fd, off_t(from), off_t(to - from), POSIX_FADV_DONTNEED);
}

void mt_io_live(mt_io_live_counts* out) {
  out->engines = mt::io::g_engines.load();
  out->threads = mt::io::g_threads.load();
  out->bounce_bytes = mt::io::g_bounce_bytes.load();
}

const char* mt_io_status_name(int status) {
  switch (status) {
    case MT_IO_OK:
      return "ok";
    case MT_IO_INVALID:
      return "invalid";
    case MT_IO_NO_MEMORY:
      return "no-memory";
    case MT_IO_SYSTEM:
      return "system";
    case MT_IO_UNSUPPORTED:
      return "unsupported";
    case MT_IO_BUSY:
      return "busy";
    default:
      return "unknown";
  }
}

const char* mt_io_kind_name(int kind) {
  switch (kind) {
    case MT_IO_AUTO:
      return "auto";
    case MT_IO_URING:
      return "uring";
    case MT_IO_THREADS:
      return "threads";
    default:
      return "unknown";
  }
}

const char* mt_io_errno_name(int error) {
  switch (error) {
    case 0:
      return "0";
    case EIO:
      return "EIO";
    case ENODATA:
      return "ENODATA";
    case ECANCELED:
      return "ECANCELED";
    case ENOMEM:
      return "ENOMEM";
    case EINVAL:
      return "EINVAL";
    case EBADF:
      return "EBADF";
    case EFAULT:
      return "EFAULT";
    case EAGAIN:
      return "EAGAIN";
    case EINTR:
      return "EINTR";
    case ENOSYS:
      return "ENOSYS";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case ENOENT:
      return "ENOENT";
    case EOVERFLOW:
      return "EOVERFLOW";
    case ENXIO:
      return "ENXIO";
    case EISDIR:
      return "EISDIR";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case EBUSY:
      return "EBUSY";
    case ESPIPE:
      return "ESPIPE";
    case EMFILE:
      return "EMFILE";
    default: {
      static thread_local char buf[24];
      std::snprintf(buf, sizeof buf, "E%d", error);
      return buf;
    }
  }
}

}  // extern "C"
