// The uring kind of include/mt_io.h: io_uring by its raw system calls (no liburing). One SQE
// (IORING_OP_READ) per read in flight, submitted under the engine's lock by whichever thread
// starts the read; one reaper thread blocks in io_uring_enter(GETEVENTS), takes each CQE and
// either submits the rest of a short read or finishes the read (io.h).
//
//   SQ ring  entries >= queue_depth + 1 (the +1: the NOP that wakes the reaper at shutdown);
//            the kernel consumes an SQE inside the io_uring_enter that submits it (no SQPOLL),
//            so at most one entry is ever unconsumed
//   CQ ring  twice the SQ: more than the reads in flight plus the NOP, so it cannot overflow
//   user_data  place + 1 of the read; 0 is the shutdown NOP
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <thread>
#include "io.h"

#if defined(__linux__) && defined(__NR_io_uring_setup) && defined(__NR_io_uring_enter) && defined(__NR_io_uring_register) && \
    __has_include(<linux/io_uring.h>)
#define MT_HAVE_IO_URING 1
#include <linux/io_uring.h>
#else
#define MT_HAVE_IO_URING 0
#endif

namespace mt::io {

#if MT_HAVE_IO_URING
namespace {

int sys_setup(unsigned entries, io_uring_params* p) { return int(syscall(__NR_io_uring_setup, entries, p)); }
int sys_enter(int ring, unsigned to_submit, unsigned min_complete, unsigned flags) {
  return int(syscall(__NR_io_uring_enter, ring, to_submit, min_complete, flags, nullptr, 0));
}
int sys_register(int ring, unsigned opcode, void* arg, unsigned n) { return int(syscall(__NR_io_uring_register, ring, opcode, arg, n)); }

unsigned load_acquire(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store_release(unsigned* p, unsigned v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// The rings of one io_uring instance, mapped into this process.
struct Ring {
  int fd = -1;
  void* sq_map = MAP_FAILED;
  size_t sq_map_bytes = 0;
  void* cq_map = MAP_FAILED;
  size_t cq_map_bytes = 0;
  io_uring_sqe* sqes = nullptr;
  size_t sqes_bytes = 0;
  unsigned *sq_head = nullptr, *sq_tail = nullptr, *sq_mask = nullptr, *sq_array = nullptr;
  unsigned *cq_head = nullptr, *cq_tail = nullptr, *cq_mask = nullptr;
  io_uring_cqe* cqes = nullptr;
  unsigned sq_entries = 0;

  // False with why (the errno's name and what failed) when this kernel cannot give us a ring
  // that reads: the caller falls back to the threads kind.
  bool open(unsigned entries, std::string* why) {
    io_uring_params p{};
    fd = sys_setup(entries, &p);
    if (fd < 0) return *why = "io_uring_setup: " + errno_text(errno), false;
    if (!supports_read()) return *why = "io_uring: this kernel has no IORING_OP_READ (5.6)", close(), false;
    sq_entries = p.sq_entries;
    sq_map_bytes = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_map_bytes = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) sq_map_bytes = cq_map_bytes = sq_map_bytes > cq_map_bytes ? sq_map_bytes : cq_map_bytes;
    sq_map = mmap(nullptr, sq_map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (sq_map == MAP_FAILED) return *why = "io_uring: mmap of the SQ ring: " + errno_text(errno), close(), false;
    cq_map = single ? sq_map : mmap(nullptr, cq_map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    if (cq_map == MAP_FAILED) return *why = "io_uring: mmap of the CQ ring: " + errno_text(errno), close(), false;
    sqes_bytes = p.sq_entries * sizeof(io_uring_sqe);
    void* s = mmap(nullptr, sqes_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (s == MAP_FAILED) return *why = "io_uring: mmap of the SQEs: " + errno_text(errno), close(), false;
    sqes = static_cast<io_uring_sqe*>(s);
    uint8_t* sq = static_cast<uint8_t*>(sq_map);
    uint8_t* cq = static_cast<uint8_t*>(cq_map);
    sq_head = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
    sq_tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
    sq_mask = reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
    sq_array = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
    cq_head = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
    cq_tail = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
    cq_mask = reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
    cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
    return true;
  }

  bool supports_read() const {
    constexpr unsigned kOps = 256;
    std::vector<uint8_t> buf(sizeof(io_uring_probe) + kOps * sizeof(io_uring_probe_op), 0);
    auto* probe = reinterpret_cast<io_uring_probe*>(buf.data());
    // No probe verb (before 5.6) means no IORING_OP_READ either.
    if (sys_register(fd, IORING_REGISTER_PROBE, probe, kOps) < 0) return false;
    return probe->ops_len > IORING_OP_READ && (probe->ops[IORING_OP_READ].flags & IO_URING_OP_SUPPORTED) != 0;
  }

  void close() {
    if (sqes != nullptr) munmap(sqes, sqes_bytes);
    if (cq_map != MAP_FAILED && cq_map != sq_map) munmap(cq_map, cq_map_bytes);
    if (sq_map != MAP_FAILED) munmap(sq_map, sq_map_bytes);
    if (fd >= 0) ::close(fd);
    *this = Ring{};
  }

  // Queues one SQE and submits it: 0, or the errno of io_uring_enter (the SQE taken back).
  int submit(const io_uring_sqe& sqe) {
    const unsigned tail = *sq_tail;
    MT_ASSERT(tail - load_acquire(sq_head) < sq_entries, "the SQ ring has room: every SQE is consumed by the enter that submits it");
    const unsigned index = tail & *sq_mask;
    sqes[index] = sqe;
    sq_array[index] = index;
    store_release(sq_tail, tail + 1);
    for (;;) {
      const int n = sys_enter(fd, 1, 0, 0);
      if (n == 1) return 0;
      if (n < 0 && errno == EINTR) continue;
      const int error = n < 0 ? errno : EAGAIN;
      store_release(sq_tail, tail);  // not consumed: the kernel only reads SQEs inside io_uring_enter
      return error;
    }
  }
};

class UringIo final : public mt_io {
 public:
  UringIo(const mt_io_config& c, const File& file, const Ring& ring) : mt_io(c, file), ring_(ring), flights_(size_t(c.queue_depth)) {
    for (int32_t i = c.queue_depth - 1; i >= 0; i--) free_.push_back(i);
  }

  ~UringIo() override {
    if (!leaked_) ring_.close();
  }

  bool start(std::string* why) {
    try {
      reaper_ = std::thread([this] { reap(); });
      g_threads++;
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
    return true;
  }

  int32_t kind() const override { return MT_IO_URING; }

  void start_queued() override {  // under mu
    while (!held && !queue.empty() && !free_.empty()) {
      const mt_io_id id = queue.front();
      queue.pop_front();
      const int32_t place = free_.back();
      free_.pop_back();
      Flight& f = flights_[size_t(place)];
      if (!begin(id, place, &f)) {
        free_.push_back(place);
        continue;
      }
      if (const int error = submit_read(f)) {
        in_flight--;
        settle(id, MT_IO_FAILED, error, 0, "io_uring_enter: " + std::string(mt_io_errno_name(error)) + " submitting the read at offset " + std::to_string(f.span_offset + f.skip));
        free_.push_back(place);
      }
    }
  }

  void release_place(int32_t place) override {  // under mu
    free_.push_back(place);
    start_queued();
  }

  void shutdown() override {
    std::unique_lock<std::mutex> lk(mu);
    settled.wait(lk, [this] { return in_flight == 0; });
    io_uring_sqe nop{};
    nop.opcode = IORING_OP_NOP;
    nop.user_data = 0;
    int error = 0;
    for (int attempt = 0; attempt < 1000 && (error = ring_.submit(nop)) != 0; attempt++) {
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lk.lock();
    }
    lk.unlock();
    MT_ASSERT(error == 0, "the shutdown NOP is submitted");
    if (error != 0) {  // the reaper cannot be woken: leave it blocked on a ring we never unmap
      reaper_.detach();
      leaked_ = true;
      return;
    }
    reaper_.join();
    g_threads--;
  }

 private:
  int submit_read(const Flight& f) {  // under mu
    io_uring_sqe sqe{};
    sqe.opcode = IORING_OP_READ;
    sqe.fd = fd;
    sqe.off = f.span_offset + f.got;
    sqe.addr = uint64_t(uintptr_t(f.buffer + f.got));
    sqe.len = unsigned(next_length(f));  // <= MT_IO_READ_BYTES_MAX + an alignment: fits
    sqe.user_data = uint64_t(f.place) + 1;
    return ring_.submit(sqe);
  }

  void reap() {
    for (;;) {
      const int n = sys_enter(ring_.fd, 0, 1, IORING_ENTER_GETEVENTS);
      if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY) {
        MT_ASSERT(false, "io_uring_enter(GETEVENTS) fails only when interrupted");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // never a hot loop
      }
      bool stop = false;
      unsigned head = *ring_.cq_head;
      for (unsigned tail = load_acquire(ring_.cq_tail); head != tail; tail = load_acquire(ring_.cq_tail)) {
        const io_uring_cqe cqe = ring_.cqes[head & *ring_.cq_mask];
        store_release(ring_.cq_head, ++head);
        if (cqe.user_data == 0) stop = true;
        else on_completion(int32_t(cqe.user_data - 1), cqe.res);
      }
      if (stop) return;
    }
  }

  void on_completion(int32_t place, int32_t res) {
    std::unique_lock<std::mutex> lk(mu);
    MT_ASSERT(place >= 0 && place < config.queue_depth, "a CQE names a place");
    Flight& f = flights_[size_t(place)];
    MT_ASSERT(f.place == place && f.id != 0, "a CQE's place holds a read in flight");
    int error = 0;
    const char* what = "io_uring read";
    const bool retry = res == -EINTR || res == -EAGAIN;
    if (retry || (res > 0 && advance(f, uint64_t(res)) == Next::kMore)) {
      error = submit_read(f);
      if (error == 0) return;
      what = "io_uring_enter";
    } else if (res < 0) {
      error = -res;
    }
    const Flight done = f;
    f.id = 0;
    lk.unlock();
    finish(done, error, what, lk);
  }

  Ring ring_;
  std::vector<Flight> flights_;  // by place
  std::vector<int32_t> free_;    // places with no read
  std::thread reaper_;
  bool leaked_ = false;
};

}  // namespace

mt_io* create_uring(const mt_io_config& c, const File& file, char* err, size_t err_bytes, int* status) {
  Ring ring;
  std::string why;
  if (!ring.open(unsigned(c.queue_depth) + 1, &why)) {
    *status = fail(err, err_bytes, MT_IO_UNSUPPORTED, "mt_io_create: uring: " + why);
    return nullptr;
  }
  UringIo* io = nullptr;
  try {
    io = new UringIo(c, file, ring);
  } catch (const std::exception&) {
    ring.close();
    close(file.fd);
    *status = fail(err, err_bytes, MT_IO_NO_MEMORY, "mt_io_create: no memory for the engine");
    return nullptr;
  }
  if (!io->start(&why)) {
    delete io;
    *status = fail(err, err_bytes, MT_IO_SYSTEM, "mt_io_create: cannot start the completion thread: " + why);
    return nullptr;
  }
  return io;
}

#else

mt_io* create_uring(const mt_io_config&, const File&, char* err, size_t err_bytes, int* status) {
  *status = fail(err, err_bytes, MT_IO_UNSUPPORTED, "mt_io_create: uring: this build has no io_uring (not Linux, or no <linux/io_uring.h>)");
  return nullptr;
}

#endif

}  // namespace mt::io
