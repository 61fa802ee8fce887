// The engine's own descriptor for the caller's file, and the alignment its direct syscalls need
// (include/mt_io.h: "The file", "Direct I/O and alignment").
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/stat.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cerrno>
#include <string>
#include "io.h"

namespace mt::io {

namespace {

constexpr uint64_t kDefaultAlignBytes = 4096;

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// ioctl BLKSSZGET on a block device: the logical block size, or 0.
uint64_t block_size_of(int block_fd) {
  int size = 0;
  return ioctl(block_fd, BLKSSZGET, &size) == 0 && size > 0 ? uint64_t(size) : 0;
}

// The file's block device by its number (/dev/block/MAJ:MIN, a udev link), or 0 where unreachable.
uint64_t block_size_of_device(const struct stat& st) {
  if (S_ISBLK(st.st_mode)) return 0;  // the caller asks the fd itself
  const std::string path = "/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  const int dev = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (dev < 0) return 0;
  const uint64_t size = block_size_of(dev);
  close(dev);
  return size;
}

// statx STATX_DIOALIGN (Linux 6.1): the larger of the offset and the memory alignment, or 0.
uint64_t statx_dio_align(int fd) {
#if defined(__NR_statx) && defined(STATX_DIOALIGN)
  struct statx sx{};
  if (syscall(__NR_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 || (sx.stx_mask & STATX_DIOALIGN) == 0)
    return 0;
  const uint64_t a = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align : sx.stx_dio_mem_align;
  return a;
#else
  (void)fd;
  return 0;
#endif
}

void find_alignment(int fd, const struct stat& st, File* out) {
  uint64_t a = S_ISBLK(st.st_mode) ? block_size_of(fd) : block_size_of_device(st);
  if (power_of_two(a)) {
    out->align = a, out->align_source = MT_IO_ALIGN_BLKSSZGET;
    return;
  }
  a = statx_dio_align(fd);
  if (power_of_two(a)) {
    out->align = a, out->align_source = MT_IO_ALIGN_STATX;
    return;
  }
  out->align = kDefaultAlignBytes, out->align_source = MT_IO_ALIGN_DEFAULT;
}

}  // namespace

int open_file(int caller_fd, bool direct, File* out, char* err, size_t err_bytes) {
  const std::string what = "fd " + std::to_string(caller_fd);
  struct stat st{};
  if (caller_fd < 0 || fcntl(caller_fd, F_GETFD) < 0 || fstat(caller_fd, &st) != 0)
    return fail(err, err_bytes, MT_IO_INVALID,
                what + ": expected an open file descriptor (" + errno_text(caller_fd < 0 ? EBADF : errno) + ")");
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
    return fail(err, err_bytes, MT_IO_INVALID, what + ": expected a regular file or a block device");
  const int flags = fcntl(caller_fd, F_GETFL);
  if ((flags & O_ACCMODE) == O_WRONLY)
    return fail(err, err_bytes, MT_IO_INVALID, what + ": expected a readable descriptor (it is write-only)");

  // Our own open file description: the caller's flags (an O_DIRECT it set, or not) stay its own.
  const std::string proc = "/proc/self/fd/" + std::to_string(caller_fd);
  int fd = open(proc.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0 && direct && errno == EINVAL)
    return fail(err, err_bytes, MT_IO_UNSUPPORTED,
                what + ": direct I/O: the filesystem refuses O_DIRECT (EINVAL); use direct 0");
  if (fd < 0 && errno == ENOENT && !direct && (flags & O_DIRECT) == 0)
    fd = fcntl(caller_fd, F_DUPFD_CLOEXEC, 0);  // no /proc
  if (fd < 0)
    return fail(err, err_bytes, MT_IO_SYSTEM, what + ": cannot reopen it as " + proc + ": " + errno_text(errno));
  struct stat mine{};
  if (fstat(fd, &mine) != 0 || mine.st_dev != st.st_dev || mine.st_ino != st.st_ino) {
    close(fd);
    return fail(err, err_bytes, MT_IO_SYSTEM, what + ": " + proc + " opened another file");
  }
  out->fd = fd;
  out->align = 1, out->align_source = MT_IO_ALIGN_NONE;
  if (direct) find_alignment(fd, mine, out);
  return MT_IO_OK;
}

}  // namespace mt::io
