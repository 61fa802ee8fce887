// The engine-neutral half of the read engine (include/mt_io.h): the read table, the queue, the
// bounce buffers and the one way a read finishes. A kind (io_uring.cc, io_threads.cc) derives
// from mt_io and moves the bytes:
//
//   mt_io_read (any thread) --lock--> checks, Read in the table, id queued on its lane --> start_queued()
//   kind: a free place takes the next queued id (take_queued: the highest lane not held first)
//         --> begin(id, place) --> syscalls into the Flight's buffer
//         ... advance(flight, n) after each: more (the rest of a short read) | done | failed
//   completion side (reaper / pool thread): finish(flight) --> bounce copy (no lock) --lock-->
//         settle: info, counters, waiters woken; the place takes the next queued read
//
// A place is one read in flight: there are queue_depth of them, and place i owns bounce buffer i;
// the places are shared by the lanes, and everything else of a read's user is its Lane's.
// One mutex (mu) guards everything below; functions marked "under mu" are called holding it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include "mt_assert.h"
#include "mt_io.h"

namespace mt::io {

struct Read {
  mt_io_info info{};
  int32_t lane = MT_IO_LANE_NORMAL;
  uint8_t* dst = nullptr;
  bool bounce = false;
  bool queued = true;                // not yet started (cancel takes it out of the queue)
  uint64_t span_offset = 0;          // what the syscalls read: the covering aligned range,
  uint64_t span_bytes = 0;           // or the wanted one itself when nothing bounces
  uint64_t land_limit = UINT64_MAX;  // fault injection: wanted bytes that land before it fails
};

// One read in flight, as the syscalls see it; a copy of what finishing needs, so that the
// completion side reads it without the lock.
struct Flight {
  mt_io_id id = 0;
  int32_t place = -1;
  int32_t lane = MT_IO_LANE_NORMAL;
  uint8_t* buffer = nullptr;  // the bounce buffer, or dst
  uint8_t* dst = nullptr;     // where the wanted bytes go (= buffer when nothing bounces)
  uint64_t span_offset = 0, span_bytes = 0;
  uint64_t skip = 0;   // wanted offset - span offset
  uint64_t bytes = 0;  // wanted bytes
  uint64_t land_limit = UINT64_MAX;
  uint64_t got = 0;  // span bytes read so far
  uint64_t resubmits = 0;
  bool bounce = false;
};

enum class Next { kMore, kDone, kEndOfFile };

// One user's side of the engine (include/mt_io.h, "Lanes"): its queue, its finished reads, its
// hold, its fault injection and its counts.
struct Lane {
  std::deque<mt_io_id> queue;     // queued ids, oldest first
  std::deque<mt_io_id> finished;  // finish order: the oldest are pruned first
  bool held = false;              // mt_io_hold / mt_io_hold_lane: its queued reads wait
  uint64_t fail_after_bytes = 0;  // fault injection: 0 off
  uint64_t bytes_asked = 0;       // fault injection's count, in mt_io_read order
  bool injected = false;
  int32_t in_flight = 0;
  uint64_t reads_issued = 0, reads_done = 0, reads_failed = 0, reads_cancelled = 0;
  uint64_t bytes_read = 0, reads_bounced = 0, resubmits = 0, bounce_copy_ns = 0;
};

struct Bounce {
  uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// The engine's own descriptor and how its direct syscalls align (io_file.cc).
struct File {
  int fd = -1;
  uint64_t align = 1;
  int32_t align_source = MT_IO_ALIGN_NONE;
};
// Reopens the caller's fd as the engine's own (O_DIRECT when direct) and finds the alignment.
int open_file(int caller_fd, bool direct, File* out, char* err, size_t err_bytes);

// Process-wide counts for mt_io_live (leak checks).
extern std::atomic<int64_t> g_engines, g_threads, g_bounce_bytes;

// "what: message" into err; returns status.
int fail(char* err, size_t err_bytes, int status, const std::string& message);
std::string errno_text(int error);  // "EIO (Input/output error)"

}  // namespace mt::io

struct mt_io {
  mt_io(const mt_io_config& c, const mt::io::File& file);  // takes the file's descriptor
  virtual ~mt_io();

  // --- what a kind supplies ---
  virtual void start_queued() = 0;                // under mu: queued reads take free places (or wake the pool)
  virtual void release_place(int32_t place) = 0;  // under mu: the place's read settled
  virtual void shutdown() = 0;                    // not under mu; the queue is empty: wait for the flights, stop
  virtual int32_t kind() const = 0;

  // Under mu: the read takes the place: its Flight, a bounce buffer grown if needed. False: the
  // read failed at once (no memory for the bounce) and was settled.
  bool begin(mt_io_id id, int32_t place, mt::io::Flight* f);
  // The syscall's next length and offset for the flight (honours chunk_bytes_max).
  uint64_t next_length(const mt::io::Flight& f) const;
  // After a syscall read n > 0 bytes: whether the wanted range is whole, needs more, or ended.
  mt::io::Next advance(mt::io::Flight& f, uint64_t n) const;
  // The read ends (error 0: the span syscalls are over; else errno from `what`). lk: unlocked on
  // entry (the bounce copy runs without the lock), locked on return.
  void finish(const mt::io::Flight& f, int error, const char* what, std::unique_lock<std::mutex>& lk);
  // Under mu: the read's final state; wakes waiters. reason: "" when done.
  void settle(mt_io_id id, int32_t state, int error, uint64_t bytes_read, const std::string& reason);
  // Under mu: cancels the lane's queued reads (drain), or every lane's (lane -1: destroy).
  void cancel_queued(int32_t lane);
  // Under mu: a queued read may start now (a lane not held has one).
  bool startable() const;
  // Under mu: takes the next read to start off its lane's queue (startable() is true).
  mt_io_id take_queued();
  // Under mu: reads queued on every lane.
  size_t queued() const;

  const mt_io_config config;
  int fd;                // the engine's own descriptor (closed by the destructor);
                         // set once, before any read (a failed uring start hands it back)
  const uint64_t align;  // direct syscalls' alignment (1 when buffered)
  const int32_t align_source;
  const uint64_t bounce_bytes_max;
  const uint64_t chunk_bytes;  // a syscall's bytes at most (chunk_bytes_max, aligned; or no limit)

  std::mutex mu;
  std::condition_variable settled;  // a read finished
  std::unordered_map<mt_io_id, mt::io::Read> reads;
  mt::io::Lane lanes[MT_IO_LANES];
  std::vector<mt::io::Bounce> bounces;  // one per place
  mt_io_id next_id = 1;
  bool closing = false;
  int32_t in_flight = 0;  // places taken, over every lane
  uint64_t bounce_bytes = 0;
};

namespace mt::io {
// The kinds' constructors: null with a message (and *status) when the kind cannot start.
// The engine owns the file's descriptor once created. On a failure *status says why: with
// MT_IO_UNSUPPORTED (no io_uring here) the descriptor is left open, for the threads kind to take;
// any other failure closed it.
mt_io* create_uring(const mt_io_config& c, const File& file, char* err, size_t err_bytes, int* status);
mt_io* create_threads(const mt_io_config& c, const File& file, char* err, size_t err_bytes, int* status);
}  // namespace mt::io
