// The disk backend: the cpu backend's RAM slots, filled by reading the model file instead of
// copying from its mapping (include/mt_backend.h, kind disk). An upload's pieces point into the
// mapping; each becomes a pread of the same range of the file, on the upload thread:
//
//   piece.src - file_base = file offset  --pread-->  slot bytes  --posix_fadvise DONTNEED-->
//                                                    (the page cache does not keep a second copy)
//
// No readahead (POSIX_FADV_RANDOM on a descriptor of its own): reading one expert must not pull
// its neighbours into the page cache. A failed or short read (or the injected failure of
// fail_transfer_after_bytes) fails the upload: the slot turns invalid and the event failed, as a
// failed copy does on the other kinds (the tier retries or reports it).
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include "../cpu_backend/cpu_backend.h"

namespace mt {
namespace {

class DiskBackend : public CpuBackend {
 public:
  DiskBackend(const mt_backend_config& c, int fd) : CpuBackend(c), fd_(fd) {}
  ~DiskBackend() override {
    drain();  // the upload thread reads fd_: it stops first
    close(fd_);
  }

  void prepare_upload(UploadJob& job) override {
    job.copy_limit = job.bytes;
    if (fail_after_ != 0 && submitted_bytes_ + job.bytes > fail_after_) {
      job.copy_limit = fail_after_ - submitted_bytes_;  // fails here, once
      fail_after_ = 0;
    }
    submitted_bytes_ += job.bytes;
  }

 protected:
  bool transfer(const UploadJob& job) override {
    uint64_t at = 0;
    for (int32_t i = 0; i < job.n_pieces && at < job.copy_limit; i++) {
      const uint8_t* src = static_cast<const uint8_t*>(job.pieces[i].src);
      const uint64_t room = job.copy_limit - at;
      const uint64_t n = job.pieces[i].bytes < room ? job.pieces[i].bytes : room;
      if (src < config.file_base || uint64_t(src - config.file_base) + n > config.file_length) {
        return false;  // not the model file's bytes: nothing to read them from
      }
      if (!read_range(uint64_t(src - config.file_base), n, job.dst + at)) return false;
      at += n;
    }
    return at == job.bytes;
  }

 private:
  bool read_range(uint64_t offset, uint64_t bytes, uint8_t* dst) {
    for (uint64_t done = 0; done < bytes;) {
      const ssize_t n = pread(fd_, dst + done, bytes - done, off_t(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;  // an I/O error, or the file ended early (truncated under us)
      done += uint64_t(n);
    }
    const off_t page = off_t(sysconf(_SC_PAGESIZE));
    const off_t from = off_t(offset) / page * page, to = (off_t(offset + bytes) + page - 1) / page * page;
    posix_fadvise(fd_, from, to - from, POSIX_FADV_DONTNEED);
    return true;
  }

  const int fd_;
  uint64_t fail_after_ = config.fail_transfer_after_bytes;
  uint64_t submitted_bytes_ = 0;
};

}  // namespace

mt_backend* create_disk_backend(const mt_backend_config& c, char* err, size_t err_bytes) {
  if (c.file_fd < 0 || c.file_base == nullptr || c.file_length == 0)
    return fail(err, err_bytes, MT_BACKEND_INVALID, "create: disk: expected the model file (file_fd, file_base, file_length)"), nullptr;
  // A descriptor of its own (its own file position and readahead state) on the same file.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", int(c.file_fd));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(err, err_bytes, MT_BACKEND_INVALID, std::string("create: disk: reopening the model file: ") + std::strerror(errno)), nullptr;
  posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  try {
    return new DiskBackend(c, fd);
  } catch (const std::exception& e) {
    close(fd);
    fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what());
    return nullptr;
  }
}

}  // namespace mt
