/*
 * The disk backend's own verbs, beside include/mt_backend.h (kind disk): how its uploads read the
 * model file. Every other verb is mt_backend.h's; these refuse another kind (MT_BACKEND_UNSUPPORTED).
 *
 * An upload's pieces become reads of the read engine (include/mt_io.h), all issued when the upload
 * is, so the reads of several uploads are in flight at the disk together (at most the engine's
 * queue depth; the rest wait in its queue):
 *
 *   mt_backend_upload --submit--> one mt_io_read per piece, straight into the slot
 *                                      |  (the engine: io_uring or pread threads, O_DIRECT)
 *   completion thread:  waits the upload's reads in issue order --> complete(ok, first read's
 *                       start, last read's end: the disk's own times)
 *
 * The engine reads with O_DIRECT, so nothing of the file stays in the page cache; a filesystem that
 * refuses O_DIRECT (tmpfs) gets a buffered engine instead (stats.direct = 0) with no readahead, and
 * the pages each read brought in are dropped after it (posix_fadvise DONTNEED).
 * fail_transfer_after_bytes is the engine's fail_after_bytes on the backend's lane: the read that
 * takes the bytes read past it fails (EIO), so its upload fails, once; an upload refused before any
 * read (a piece that is not the model file's bytes) does not count.
 *
 * The engine is the interface's read_engine (mt_backend.h): the disk tier shares it on its own lane
 * (MT_IO_LANE_URGENT, whose queued reads start before the uploads'). The stats, the fault and the
 * hold below are the backend's lane's only (MT_IO_LANE_NORMAL); queue_depth, io_kind, direct and the
 * alignment are the engine's.
 */
#ifndef MT_BACKEND_DISK_H
#define MT_BACKEND_DISK_H
#include <stddef.h>
#include <stdint.h>
#include "mt_backend.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Reads the backend has handed the engine and not yet seen land, at most: past it an upload's reads
 * wait in the backend, in order, until earlier ones land. Half of MT_IO_FINISHED_RETAINED, so the
 * engine never prunes a read before the completion thread waited for it, and below
 * MT_IO_QUEUED_MAX, so the engine never refuses one as busy. */
#define MT_BACKEND_DISK_READS_OUTSTANDING_MAX 2048

typedef struct mt_backend_disk_stats {
  int32_t io_kind;              /* enum mt_io_kind: MT_IO_URING or MT_IO_THREADS */
  int32_t direct;               /* 1: O_DIRECT; 0: buffered (the filesystem refused O_DIRECT) */
  int32_t queue_depth;          /* the engine's reads in flight at most */
  int32_t reads_in_flight_peak; /* the most reads in flight at once, from the reads' own start and end
                                   times (an upload's pieces are one read each) */
  int32_t reads_in_flight;      /* now, at the disk (the backend's reads) */
  int32_t reads_queued;         /* now, in the engine's queue (the backend's lane) */
  int32_t uploads_waiting;      /* now, in the backend: their reads wait for the outstanding limit */
  uint64_t reads_issued, reads_failed;
  uint64_t bytes_read;      /* bytes that landed in slots, over every read */
  uint64_t reads_bounced;   /* direct reads through a bounce buffer (GGUF pieces are 32-byte aligned) */
  uint64_t alignment_bytes; /* what direct reads align to (1 when buffered) */
} mt_backend_disk_stats;

int mt_backend_disk_stats_get(mt_backend* b, mt_backend_disk_stats* out, char* err, size_t err_bytes);
/* Test only: while held (hold = 1), the engine starts no queued read of the backend's lane
 * (mt_io_hold_lane; the tier's lane goes on), so uploads issued meanwhile stay in flight together,
 * deterministically; hold = 0 lets them go. Destroy ends a hold. */
int mt_backend_disk_hold(mt_backend* b, int32_t hold, char* err, size_t err_bytes);

#ifdef __cplusplus
}
#endif
#endif
