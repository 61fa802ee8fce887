// Streamed misses (admit-before-run's fallback, issue 12): with a stream descriptor, a routed
// expert that has neither a slot nor a host copy is read from the model file into the tier's
// scratch for this layer call, and computed from there: never from the mapping. One read per miss
// and call, synchronous on the eval thread for now (the reads do not overlap compute yet).
//
//   scratch: entries of one expert each (gate | up | down, the container's bytes), 64-byte aligned;
//            sized for nExpertUsed misses at creation, grown once if a prefill call misses more
//   read:    three preads (gate, up, down live in three tensors), then the pages dropped from the
//            page cache (the scratch holds them; the page cache would be a second copy)
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include "tier.h"

namespace mt {
namespace {

size_t aligned_expert_bytes(const mt_tier& t) { return (t.slot_bytes + 63) / 64 * 64; }

bool grow(mt_tier& t, size_t needed, char* err, size_t err_bytes) {
  if (needed <= t.scratch_experts) return true;
  void* p = nullptr;
  if (posix_memalign(&p, 64, needed * aligned_expert_bytes(t)) != 0) {
    std::snprintf(err, err_bytes, "tier: streamed misses: out of memory for %zu experts of scratch", needed);
    return false;
  }
  t.scratch.reset(static_cast<uint8_t*>(p));
  t.scratch_experts = needed;
  return true;
}

bool read_range(mt_tier& t, uint64_t offset, size_t bytes, uint8_t* dst) {
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = pread(t.stream_fd, dst + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  const off_t page = off_t(sysconf(_SC_PAGESIZE));
  const off_t from = off_t(offset) / page * page, to = (off_t(offset + bytes) + page - 1) / page * page;
  posix_fadvise(t.stream_fd, from, to - from, POSIX_FADV_DONTNEED);
  return true;
}

}  // namespace

bool tier_stream_open(mt_tier& t, int fd, const uint8_t* base, char* err, size_t err_bytes) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  t.stream_fd = open(path, O_RDONLY | O_CLOEXEC);  // its own descriptor: no readahead on it
  if (t.stream_fd < 0) {
    std::snprintf(err, err_bytes, "createTier: streamFile: reopening the model file: %s", std::strerror(errno));
    return false;
  }
  posix_fadvise(t.stream_fd, 0, 0, POSIX_FADV_RANDOM);
  t.stream_base = base;
  return grow(t, size_t(mt_model_hparams(t.model)->n_expert_used), err, err_bytes);
}

bool tier_stream_expert(mt_tier& t, int32_t layer, int32_t expert, size_t i, size_t needed, const uint8_t** data, char* err, size_t err_bytes) {
  if (!grow(t, needed, err, err_bytes)) return false;
  MT_ASSERT(i < t.scratch_experts, "a scratch entry per miss of the call");
  uint8_t* dst = t.scratch.get() + i * aligned_expert_bytes(t);
  mt_upload_piece pieces[3];
  tier_pieces(t, layer, expert, pieces);
  size_t at = 0;
  for (const mt_upload_piece& piece : pieces) {
    const uint64_t offset = uint64_t(static_cast<const uint8_t*>(piece.src) - t.stream_base);
    if (!read_range(t, offset, piece.bytes, dst + at)) {
      t.stream_failures.fetch_add(1, std::memory_order_relaxed);
      std::snprintf(err, err_bytes, "tier: reading layer %d expert %d from the model file failed at offset %llu (%zu bytes): %s", layer, expert,
                    (unsigned long long)offset, piece.bytes, errno != 0 ? std::strerror(errno) : "the file ended early");
      return false;
    }
    at += piece.bytes;
  }
  t.streamed_reads.fetch_add(1, std::memory_order_relaxed);
  t.streamed_bytes.fetch_add(at, std::memory_order_relaxed);
  *data = dst;
  return true;
}

}  // namespace mt
