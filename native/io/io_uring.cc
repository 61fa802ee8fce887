// The uring kind of include/mt_io.h: io_uring by its raw system calls (no liburing). One thread,
// the ring's owner, does everything with the ring: it submits an SQE (IORING_OP_READ) per read
// that takes a place, blocks in io_uring_enter(GETEVENTS), takes each CQE and either submits the
// rest of a short read or finishes the read (io.h). A caller's mt_io_read only queues the read and
// wakes the owner through an eventfd (a read of it always sits in the ring).
//
// Why one owner: a read's completion runs as task work of the task that submitted it, so with
// callers submitting, the JavaScript thread (or the eval thread) would be interrupted for every
// read that lands, and a submitting thread's end would concern its reads. With one owner the task
// work runs where the CQE is wanted, and the owner batches its submissions into the enter that
// waits (IORING_SETUP_SINGLE_ISSUER; a plain ring where refused).
//
//   SQ ring  entries >= queue_depth + 1 (the +1: the eventfd read); at most that many requests are
//            ever outstanding, so an SQE always has room
//   CQ ring  twice the SQ: it cannot overflow
//   user_data  place + 1 of a read; kWakeData for the eventfd read
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <thread>
#include "io.h"

#if defined(__linux__) && defined(__NR_io_uring_setup) && defined(__NR_io_uring_enter) && \
    defined(__NR_io_uring_register) && __has_include(<linux/io_uring.h>)
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
int sys_register(int ring, unsigned opcode, void* arg, unsigned n) {
  return int(syscall(__NR_io_uring_register, ring, opcode, arg, n));
}

unsigned load_acquire(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store_release(unsigned* p, unsigned v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

constexpr uint64_t kWakeData = UINT64_MAX;

// The rings of one io_uring instance, mapped into this process; its owner's thread alone uses it.
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

  // False with why (the errno's name and what failed) when this kernel gives no ring that reads:
  // mt_io_create's auto then takes the threads kind.
  bool open(unsigned entries, std::string* why) {
    io_uring_params p{};
#if defined(IORING_SETUP_SINGLE_ISSUER)
    // The calling thread owns the ring (a hint the kernel may use). Not DEFER_TASKRUN: with it,
    // on 6.18, buffered reads into memory not yet faulted in failed with EFAULT about half the
    // time (64 MB reads, the page cache dropped); without it, never in the same runs.
    p.flags = IORING_SETUP_SINGLE_ISSUER;
    fd = sys_setup(entries, &p);
    if (fd < 0 && errno == EINVAL) p = io_uring_params{}, fd = sys_setup(entries, &p);  // before 6.0
#else
    fd = sys_setup(entries, &p);
#endif
    if (fd < 0) return *why = "io_uring_setup: " + errno_text(errno), false;
    if (!supports_read()) return *why = "io_uring: this kernel has no IORING_OP_READ (5.6)", close(), false;
    sq_entries = p.sq_entries;
    sq_map_bytes = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_map_bytes = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) sq_map_bytes = cq_map_bytes = sq_map_bytes > cq_map_bytes ? sq_map_bytes : cq_map_bytes;
    sq_map = mmap(nullptr, sq_map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (sq_map == MAP_FAILED) return *why = "io_uring: mmap of the SQ ring: " + errno_text(errno), close(), false;
    cq_map =
        single ? sq_map
               : mmap(nullptr, cq_map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
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

  // Puts one SQE in the ring for the next io_uring_enter.
  void push(const io_uring_sqe& sqe) {
    const unsigned tail = *sq_tail;
    MT_ASSERT(tail - load_acquire(sq_head) < sq_entries,
              "the SQ ring has room: at most queue_depth + 1 requests are outstanding");
    const unsigned index = tail & *sq_mask;
    sqes[index] = sqe;
    sq_array[index] = index;
    store_release(sq_tail, tail + 1);
  }

  // SQEs pushed that the kernel has not consumed yet.
  unsigned unsubmitted() const { return *sq_tail - load_acquire(sq_head); }
};

class UringIo final : public mt_io {
 public:
  UringIo(const mt_io_config& c, const File& file) : mt_io(c, file), flights_(size_t(c.queue_depth)) {
    for (int32_t i = c.queue_depth - 1; i >= 0; i--) free_.push_back(i);
  }

  ~UringIo() override {
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  // Starts the owner, which opens the ring: MT_IO_OK; MT_IO_UNSUPPORTED when the kernel gives no
  // ring that reads (the owner has ended again); MT_IO_SYSTEM when no eventfd or thread could be had.
  int start(std::string* why) {
    // Blocking: io_uring waits on it (an O_NONBLOCK eventfd would make the read fail with EAGAIN).
    wake_fd_ = eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) return *why = "eventfd: " + errno_text(errno), MT_IO_SYSTEM;
    try {
      owner_ = std::thread([this] { run(); });
    } catch (const std::exception& e) {
      return *why = e.what(), MT_IO_SYSTEM;
    }
    std::unique_lock<std::mutex> lk(mu);
    ready_cv_.wait(lk, [this] { return ready_ != 0; });
    if (ready_ > 0) return g_threads++, MT_IO_OK;
    lk.unlock();
    owner_.join();
    return *why = why_, MT_IO_UNSUPPORTED;
  }

  int32_t kind() const override { return MT_IO_URING; }

  // Under mu: a read was queued or a hold ended: the owner starts it (only the owner touches the ring).
  void start_queued() override {
    if (wake_pending_ || std::this_thread::get_id() == owner_id_)
      return;  // the owner looks at the queue before it waits
    wake_pending_ = true;
    const uint64_t one = 1;
    const ssize_t n = write(wake_fd_, &one, sizeof one);
    MT_ASSERT(n == ssize_t(sizeof one), "an eventfd write of 1 cannot fail");
    (void)n;
  }

  void release_place(int32_t place) override { free_.push_back(place); }  // under mu, on the owner's thread

  void shutdown() override {
    {
      std::unique_lock<std::mutex> lk(mu);
      settled.wait(lk, [this] { return in_flight == 0; });
      stop_ = true;
      wake_pending_ = false;
      start_queued();  // the eventfd read completes: the owner sees stop_ and ends
    }
    owner_.join();
    g_threads--;
  }

 private:
  void run() {
    std::string why;
    const bool ok = ring_.open(unsigned(config.queue_depth) + 1, &why);
    {
      std::lock_guard<std::mutex> lock(mu);
      owner_id_ = std::this_thread::get_id();
      ready_ = ok ? 1 : -1;
      why_ = why;
    }
    ready_cv_.notify_all();
    if (!ok) return;
    loop();
    ring_.close();  // nothing is outstanding: no request writes into our memory after this
  }

  void loop() {
    bool armed = false;  // the eventfd read is in the ring
    for (;;) {
      bool stopping = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        wake_pending_ = false;
        stopping = stop_;
        if (stopping && in_flight == 0 && !armed) return;
        start_places();
      }
      if (!armed && !stopping) {
        io_uring_sqe wake{};
        wake.opcode = IORING_OP_READ;
        wake.fd = wake_fd_;
        wake.addr = uint64_t(uintptr_t(&wake_value_));
        wake.len = sizeof wake_value_;
        wake.user_data = kWakeData;
        ring_.push(wake);
        armed = true;
      }
      // Submits what was pushed and waits for at least one completion, in one call.
      const int n = sys_enter(ring_.fd, ring_.unsubmitted(), 1, IORING_ENTER_GETEVENTS);
      if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY) {
        MT_ASSERT(false, "io_uring_enter fails only when interrupted or short of resources");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // never a hot loop
      }
      unsigned head = *ring_.cq_head;
      for (unsigned tail = load_acquire(ring_.cq_tail); head != tail; tail = load_acquire(ring_.cq_tail)) {
        const io_uring_cqe cqe = ring_.cqes[head & *ring_.cq_mask];
        store_release(ring_.cq_head, ++head);
        if (cqe.user_data == kWakeData)
          armed = false;
        else
          on_completion(int32_t(cqe.user_data - 1), cqe.res);
      }
    }
  }

  // Under mu: queued reads take free places; their SQEs go in with the next enter.
  void start_places() {
    while (startable() && !free_.empty()) {
      const mt_io_id id = take_queued();
      const int32_t place = free_.back();
      free_.pop_back();
      Flight& f = flights_[size_t(place)];
      if (!begin(id, place, &f)) {
        free_.push_back(place);
        continue;
      }
      push_read(f);
    }
  }

  void push_read(const Flight& f) {
    io_uring_sqe sqe{};
    sqe.opcode = IORING_OP_READ;
    sqe.fd = fd;
    sqe.off = f.span_offset + f.got;
    sqe.addr = uint64_t(uintptr_t(f.buffer + f.got));
    sqe.len = unsigned(next_length(f));  // <= MT_IO_READ_BYTES_MAX + an alignment: fits
    sqe.user_data = uint64_t(f.place) + 1;
    ring_.push(sqe);
  }

  // On the owner's thread, which alone writes flights_ (begin too runs here, under mu).
  void on_completion(int32_t place, int32_t res) {
    MT_ASSERT(place >= 0 && place < config.queue_depth, "a CQE names a place");
    Flight& f = flights_[size_t(place)];
    MT_ASSERT(f.place == place && f.id != 0, "a CQE's place holds a read in flight");
    if (res == -EINTR || res == -EAGAIN || (res > 0 && advance(f, uint64_t(res)) == Next::kMore)) {
      push_read(f);  // the rest of a short read (or the same again), with the next enter
      return;
    }
    const Flight done = f;
    f.id = 0;
    std::unique_lock<std::mutex> lk(mu, std::defer_lock);
    finish(done, res < 0 ? -res : 0, "io_uring read", lk);
  }

  Ring ring_;                    // the owner's alone
  std::vector<Flight> flights_;  // by place; the owner's alone
  std::vector<int32_t> free_;    // places with no read (under mu)
  std::thread owner_;
  std::thread::id owner_id_;  // under mu
  int wake_fd_ = -1;
  uint64_t wake_value_ = 0;    // where the eventfd read lands
  bool wake_pending_ = false;  // under mu: an eventfd write the owner has not yet looked behind
  bool stop_ = false;          // under mu
  int ready_ = 0;              // under mu: 1 the ring is open, -1 it could not be (why_)
  std::string why_;
  std::condition_variable ready_cv_;
};

}  // namespace

mt_io* create_uring(const mt_io_config& c, const File& file, char* err, size_t err_bytes, int* status) {
  UringIo* io = nullptr;
  try {
    io = new UringIo(c, file);
  } catch (const std::exception&) {
    close(file.fd);
    *status = fail(err, err_bytes, MT_IO_NO_MEMORY, "mt_io_create: no memory for the engine");
    return nullptr;
  }
  std::string why;
  const int rc = io->start(&why);
  if (rc == MT_IO_OK) return io;
  if (rc == MT_IO_UNSUPPORTED) io->fd = -1;  // handed back: the threads kind may take the file
  delete io;
  *status = fail(
      err, err_bytes, rc,
      rc == MT_IO_UNSUPPORTED ? "mt_io_create: uring: " + why : "mt_io_create: cannot start the ring's thread: " + why);
  return nullptr;
}

#else

mt_io* create_uring(const mt_io_config&, const File&, char* err, size_t err_bytes, int* status) {
  *status = fail(err, err_bytes, MT_IO_UNSUPPORTED,
                 "mt_io_create: uring: this build has no io_uring (not Linux, or no <linux/io_uring.h>)");
  return nullptr;
}

#endif

}  // namespace mt::io
