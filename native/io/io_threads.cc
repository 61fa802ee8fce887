// The threads kind of include/mt_io.h: queue_depth threads, each a place in flight. A thread takes
// the next queued read (the oldest of the highest lane not held), calls pread until the wanted range is whole (a short read's rest is read
// by the next pread), then finishes it (bounce copy, settle) and takes the next.
#include <unistd.h>
#include <cerrno>
#include <thread>
#include "io.h"

namespace mt::io {

namespace {

class ThreadsIo final : public mt_io {
 public:
  ThreadsIo(const mt_io_config& c, const File& file) : mt_io(c, file) {}

  // Starts the threads; false (with the ones started stopped again) when one could not start.
  bool start(std::string* why) {
    try {
      for (int32_t i = 0; i < config.queue_depth; i++) {
        workers_.emplace_back([this, i] { run(i); });
        g_threads++;
      }
    } catch (const std::exception& e) {
      *why = e.what();
      shutdown();
      return false;
    }
    return true;
  }

  void start_queued() override { work_.notify_one(); }  // under mu: a read was queued (or, per read, the hold ended)
  void release_place(int32_t) override {}               // the thread itself takes the next read
  int32_t kind() const override { return MT_IO_THREADS; }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu);
      MT_ASSERT(queued() == 0, "shutdown comes after the queue was cancelled");
      stop_ = true;
    }
    work_.notify_all();
    for (std::thread& t : workers_) {
      t.join();
      g_threads--;
    }
    workers_.clear();
  }

 private:
  void run(int32_t place) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      work_.wait(lk, [this] { return stop_ || startable(); });
      if (!startable()) return;  // stopping (destroy emptied the queues and ended any hold)
      const mt_io_id id = take_queued();
      Flight f;
      if (!begin(id, place, &f)) continue;
      lk.unlock();
      finish(f, read_span(f), "pread", lk);
    }
  }

  // preads until the wanted range is whole or the file ends: 0, or the errno of a failed pread.
  int read_span(Flight& f) {
    for (;;) {
      const ssize_t n = pread(fd, f.buffer + f.got, next_length(f), off_t(f.span_offset + f.got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0 || advance(f, uint64_t(n)) != Next::kMore) return 0;  // done, or short: finish tells which
    }
  }

  std::condition_variable work_;  // a read was queued, or stop
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

}  // namespace

mt_io* create_threads(const mt_io_config& c, const File& file, char* err, size_t err_bytes, int* status) {
  ThreadsIo* io = nullptr;
  try {
    io = new ThreadsIo(c, file);
  } catch (const std::exception&) {
    close(file.fd);
    *status = fail(err, err_bytes, MT_IO_NO_MEMORY, "mt_io_create: no memory for the engine");
    return nullptr;
  }
  std::string why;
  if (!io->start(&why)) {
    delete io;
    *status = fail(err, err_bytes, MT_IO_SYSTEM,
                   "mt_io_create: cannot start the " + std::to_string(c.queue_depth) + " read threads: " + why);
    return nullptr;
  }
  return io;
}

}  // namespace mt::io
