/*
 * moetier read engine: the C ABI that reads byte ranges of one file into memory, asynchronously,
 * keeping the disk busy (the disk tier's reads: experts read from the model file on demand).
 *
 *   mt_io      an engine over one open file: a queue of reads, at most queue_depth of them in
 *              flight at the disk, a pool of aligned bounce buffers (direct I/O), the reads' infos
 *   read       [file_offset, file_offset + bytes) into caller memory dst; an id (> 0, never reused)
 *
 * Read life:  queued --started (a place in flight)--> in flight --landed--> done
 *                 \                                          \--error / short--> failed
 *                  \--mt_io_cancel / mt_io_destroy--> failed (ECANCELED)
 * mt_io_read returns at once; the read waits in the queue while queue_depth reads are in flight
 * (at most MT_IO_QUEUED_MAX queued per lane: more are refused with MT_IO_BUSY). A failed read leaves the
 * engine usable: the next reads run as before.
 *
 * Engines (the same verbs, the same bytes):
 *   uring    io_uring by its raw system calls (io_uring_setup / io_uring_enter, rings mapped by
 *            the engine; no liburing). One thread owns the ring: mt_io_read queues the read and
 *            wakes it (an eventfd write); it submits one IORING_OP_READ per read in flight in the
 *            same io_uring_enter that waits for completions (GETEVENTS), reaps the CQEs,
 *            finishes the reads (bounce copy, info, wakes waiters) and resubmits the rest of a
 *            short read. The disk does the copy: no thread of ours waits per read, and the
 *            completions' task work never interrupts a caller's thread.
 *   threads  queue_depth threads, each taking a queued read and calling pread until it is whole
 *            (a short read's rest is read again), then finishing it the same way.
 *   auto     uring where io_uring_setup works and the kernel has IORING_OP_READ (5.6), else
 *            threads (io_uring disabled by sysctl or seccomp, an old kernel, not Linux).
 *
 * The file: mt_io_create reopens the caller's fd as its own (/proc/self/fd/N, O_RDONLY, plus
 * O_DIRECT when direct): the engine owns that descriptor and the caller may close its fd at once.
 * Reopening, not fcntl(F_SETFL, O_DIRECT) on a dup, because a dup shares the caller's open file
 * description and its flags; reopening keeps the caller's fd as it was. The reopened file is
 * checked to be the same one (device and inode), so even a deleted file works. A filesystem that
 * refuses O_DIRECT (tmpfs) fails create with MT_IO_UNSUPPORTED; use direct = 0 there.
 *
 * Direct I/O and alignment: with direct = 1 the offset, length and memory of each syscall must be
 * multiples of the device's logical block size, found as (stats.alignment_source):
 *   1. ioctl BLKSSZGET on the file's block device (/dev/block/MAJ:MIN, where it exists),
 *   2. statx STATX_DIOALIGN: the larger of stx_dio_offset_align and stx_dio_mem_align (6.1+),
 *   3. else 4096.
 * GGUF aligns tensors to 32 bytes only, so mt_io_read reads the covering aligned range into one of
 * the engine's bounce buffers (one per read in flight, page-aligned, grown to the largest covering
 * range seen, at most bounce_bytes_max) and copies the wanted bytes to dst on the completion side
 * (the completion thread or the pool thread, never the caller). When offset, bytes and dst are all
 * aligned there is nothing to bounce: the read goes straight into dst (info.bounced = 0);
 * mt_io_read_aligned demands that case and refuses any other. With direct = 0 every read is a
 * buffered read straight into dst (the page cache keeps what it read). What the bounce costs:
 * bench/disk-probe.mjs measures it (bench/README.md, "disk probe").
 *
 * Short reads: a syscall that returns fewer bytes than asked is continued from where it stopped
 * (stats.resubmits counts them) until the wanted range is whole; a read that reaches the end of
 * the file first (a 0-byte return, or a direct read ending off the alignment) fails with ENODATA
 * and "short read at offset X: got N of M bytes (end of file)". A syscall error fails it with that
 * errno ("pread: EIO at offset X: got N of M bytes", "io_uring read: ..."). After a failed read
 * dst's bytes are unspecified (the first bytes_read of them landed).
 *
 * Lanes: the users of one engine. Each read is issued on a lane (mt_io_read: MT_IO_LANE_NORMAL;
 * mt_io_read_lane: either). The places in flight (queue_depth) and their bounce buffers are the
 * engine's, shared; everything else is the lane's own:
 *   priority   a free place takes the oldest queued read of the highest lane that has one and is
 *              not held (URGENT before NORMAL); a read in flight is never preempted, so an urgent
 *              read waits at most for the first read in flight to land, never for the queue
 *   counts     mt_io_stats.lanes[lane]: reads, bytes, bounces, in flight and queued per lane (the
 *              engine's totals are their sums)
 *   faults     fail_after_bytes counts the bytes asked on one lane (config: NORMAL's;
 *              mt_io_lane_fail_after: any lane's)
 *   hold       mt_io_hold_lane holds one lane's queued reads; the others go on
 *   limits     MT_IO_QUEUED_MAX queued and MT_IO_FINISHED_RETAINED finished reads per lane, so one
 *              user's traffic never refuses or prunes another's reads
 *   drain      mt_io_lane_drain: a user that leaves a shared engine cancels its queued reads and
 *              waits for its reads in flight; the other lanes go on
 * The disk backend and the disk tier share one engine this way (include/mt_backend.h, read_engine):
 * the backend's uploads on NORMAL, the tier's reads that a layer waits on on URGENT.
 *
 * Times (info): issued_ns at mt_io_read, start_ns when the read was handed to the kernel (its
 * first syscall: start - issued is the queue wait), end_ns when it finished (after the bounce
 * copy); on mt_clock.h's CLOCK_MONOTONIC, the clock of process.hrtime.bigint().
 *
 * Ownership: the caller keeps dst alive and untouched until the read is done or failed
 * (mt_io_wait / mt_io_query), also after mt_io_cancel (an in-flight read cannot be recalled).
 * The engine owns its descriptor, rings, threads and bounce buffers; destroy frees them all.
 *
 * Threads: every verb is thread-safe (one mutex per engine) and may be called from any thread;
 * mt_io_destroy must not race another verb on the same engine. Errors: every verb returns MT_IO_OK
 * or a negative status and writes a message naming the argument and what was expected into err
 * (err_bytes bytes; err may be NULL). Nothing aborts the process on an input or disk error; the
 * MT_ASSERT invariants (mt_assert.h) check the engine's own bookkeeping in the debug build.
 */
#ifndef MT_IO_H
#define MT_IO_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_io mt_io;
typedef uint64_t mt_io_id; /* > 0; ids are never reused by one engine */

enum mt_io_kind { MT_IO_AUTO = 0, MT_IO_URING = 1, MT_IO_THREADS = 2 };

enum mt_io_status {
  MT_IO_OK = 0,
  MT_IO_INVALID = -1,     /* a bad argument: bytes 0, dst NULL, queue depth out of range, a closed
                             fd, an unknown id, an unaligned mt_io_read_aligned (a caller bug) */
  MT_IO_NO_MEMORY = -2,   /* an allocation failed */
  MT_IO_SYSTEM = -3,      /* the system refused: reopening the file, io_uring_setup, a thread */
  MT_IO_UNSUPPORTED = -4, /* asked for what this system lacks: MT_IO_URING without io_uring,
                             direct I/O on a filesystem that refuses O_DIRECT */
  MT_IO_BUSY = -5         /* MT_IO_QUEUED_MAX reads queued: wait for some first */
};

enum mt_io_read_state { MT_IO_PENDING = 0, MT_IO_DONE = 1, MT_IO_FAILED = 2 };

/* A read's lane: higher lanes start first (see "Lanes" above). */
enum mt_io_lane { MT_IO_LANE_NORMAL = 0, MT_IO_LANE_URGENT = 1 };
#define MT_IO_LANES 2

/* Page-cache advice on the engine's own descriptor (mt_io_advise). */
enum mt_io_advice {
  MT_IO_ADVICE_RANDOM = 0,  /* no readahead: a read of one range pulls no neighbours into the cache */
  MT_IO_ADVICE_DONTNEED = 1 /* the pages of the range leave the cache (after a buffered read) */
};

enum mt_io_alignment_source {
  MT_IO_ALIGN_NONE = 0,
  MT_IO_ALIGN_BLKSSZGET = 1,
  MT_IO_ALIGN_STATX = 2,
  MT_IO_ALIGN_DEFAULT = 3
};

/* Limits, named once. */
#define MT_IO_QUEUE_DEPTH_MAX 64
/* Reads in flight by default: 8, from bench/disk-probe.mjs (bench/results/disk-probe.json, 2026-12-01,
 * this project's 2-core VM, page cache dropped, direct, uring). The disk tier reads an expert as its
 * three matrices, and random 208,896-byte reads gave 1.49 GB/s at depth 1, 2.17 at 8 and 2.85 at 16
 * (the run's best; median latency 0.71 ms at 8, 1.07 ms at 16). Rounds of one cell swing by ~30 %,
 * and in the four runs made that day depth 8 and depth 16 each came out ahead twice: equal within
 * the noise. 8, because whole-expert (626,688-byte) reads gain nothing past 2-4 and collapse beyond
 * 8 (2.38 GB/s at 2, 1.93 at 8, 1.53 at 16, 0.99 at 32, p90 latency 18-55 ms: this disk chokes on
 * ~10 MB in flight), and because a shallower queue keeps per-read latency and the bounce pool (one
 * buffer per read in flight) small. */
#define MT_IO_QUEUE_DEPTH_DEFAULT 8
#define MT_IO_QUEUED_MAX 4096             /* reads of one lane waiting for a place in flight */
#define MT_IO_READ_BYTES_MAX (1ull << 30) /* one read's bytes */
#define MT_IO_FINISHED_RETAINED 4096      /* finished reads of one lane kept for query; older ones pruned */
#define MT_IO_REASON_BYTES 112

typedef struct mt_io_config {
  int32_t kind;              /* enum mt_io_kind */
  int32_t queue_depth;       /* reads in flight at most, 1..MT_IO_QUEUE_DEPTH_MAX */
  int32_t direct;            /* 1: O_DIRECT, through the bounce buffers where unaligned; 0: buffered */
  uint64_t bounce_bytes_max; /* direct: the largest covering range a bounce buffer grows to (a longer
                                unaligned read is refused); 0: MT_IO_READ_BYTES_MAX */
  /* Test only (fault injection; 0 = off). */
  uint64_t fail_after_bytes; /* MT_IO_LANE_NORMAL's: the read that takes the bytes asked on the lane
                                (in mt_io_read order) past this fails: the bytes before the limit
                                land, the read fails with EIO ("injected failure ..."); once per
                                lane (mt_io_lane_fail_after sets any lane's) */
  uint64_t chunk_bytes_max;  /* each syscall reads at most this many bytes (rounded down to the
                                alignment when direct, at least one block), so every longer read
                                takes the short-read path: the rest is read by a further syscall */
} mt_io_config;

/* kind auto, queue depth MT_IO_QUEUE_DEPTH_DEFAULT, direct 1, no limit of its own, no injection. */
void mt_io_config_default(mt_io_config* out);

typedef struct mt_io_info {
  int32_t state;                       /* enum mt_io_read_state */
  int32_t error;                       /* errno when failed (EIO, ENODATA: end of file, ECANCELED, ENOMEM), else 0 */
  int64_t label;                       /* the caller's tag */
  uint64_t file_offset;                /* as asked */
  uint64_t bytes;                      /* as asked */
  uint64_t bytes_read;                 /* bytes of the wanted range that landed in dst */
  int64_t issued_ns, start_ns, end_ns; /* start 0 while queued, end 0 while pending */
  int32_t bounced;                     /* 1: read through a bounce buffer and copied */
  char reason[MT_IO_REASON_BYTES];     /* "" when done; else why, naming the offset and the bytes */
} mt_io_info;

/* One lane's share of an engine's counts (mt_io_stats.lanes). */
typedef struct mt_io_lane_stats {
  uint64_t reads_issued, reads_done, reads_failed, reads_cancelled;
  uint64_t bytes_read, reads_bounced, bounce_copy_ns, resubmits;
  int32_t reads_in_flight, reads_queued;
  int32_t held; /* 1: mt_io_hold / mt_io_hold_lane holds its queued reads */
} mt_io_lane_stats;

typedef struct mt_io_stats {
  int32_t kind; /* the engine in use: MT_IO_URING or MT_IO_THREADS */
  int32_t queue_depth;
  int32_t direct;
  int32_t alignment_source; /* enum mt_io_alignment_source (MT_IO_ALIGN_NONE when buffered) */
  uint64_t alignment_bytes; /* what direct syscalls align offset, length and memory to (1 when buffered) */
  uint64_t reads_issued;    /* mt_io_read calls accepted */
  uint64_t reads_done, reads_failed, reads_cancelled; /* cancelled ones are counted in failed too */
  uint64_t bytes_read;                                /* wanted bytes that landed, over every read */
  uint64_t reads_bounced;                             /* reads that went through a bounce buffer */
  uint64_t bounce_copy_ns;                            /* time the completion side spent copying out of bounce buffers */
  uint64_t resubmits;                                 /* syscalls that continued a short read */
  int32_t reads_in_flight, reads_queued;
  uint64_t bounce_bytes;               /* bounce memory the engine holds now */
  mt_io_lane_stats lanes[MT_IO_LANES]; /* the same counts per lane (above: their sums) */
} mt_io_stats;

/* The caller keeps fd; the engine reopens the file as its own (see above). NULL on failure, with
 * *status (status may be NULL) and the message in err. */
mt_io* mt_io_create(int fd, const mt_io_config* config, int* status, char* err, size_t err_bytes);
/* Fails the queued reads (ECANCELED), waits for the reads in flight, then frees everything. */
void mt_io_destroy(mt_io* io);

/* Starts reading [file_offset, file_offset + bytes) into dst (any alignment, any length up to
 * MT_IO_READ_BYTES_MAX) and returns at once with its id. */
int mt_io_read(mt_io* io, uint64_t file_offset, uint64_t bytes, void* dst, int64_t label, mt_io_id* id, char* err,
               size_t err_bytes);
/* The same on a lane (enum mt_io_lane). */
int mt_io_read_lane(mt_io* io, int32_t lane, uint64_t file_offset, uint64_t bytes, void* dst, int64_t label,
                    mt_io_id* id, char* err, size_t err_bytes);
/* The same, but offset, bytes and dst must all be multiples of stats.alignment_bytes (refused
 * with MT_IO_INVALID otherwise): never bounced. */
int mt_io_read_aligned(mt_io* io, uint64_t file_offset, uint64_t bytes, void* dst, int64_t label, mt_io_id* id,
                       char* err, size_t err_bytes);

/* The read's info now (MT_IO_INVALID for an id never issued or pruned). */
int mt_io_query(mt_io* io, mt_io_id id, mt_io_info* info, char* err, size_t err_bytes);
/* Blocks until the read is done or failed; fills info. */
int mt_io_wait(mt_io* io, mt_io_id id, mt_io_info* info, char* err, size_t err_bytes);
/* Blocks until any of ids[0..n) is done or failed (the first such in ids order); *which = its
 * index, info its info. */
int mt_io_wait_any(mt_io* io, const mt_io_id* ids, int32_t n, int32_t* which, mt_io_info* info, char* err,
                   size_t err_bytes);
/* A queued read fails at once (ECANCELED, "cancelled before it started"); one in flight runs to
 * its end and settles as usual (wait for it before reusing dst); a finished one is left as is. */
int mt_io_cancel(mt_io* io, mt_io_id id, char* err, size_t err_bytes);

void mt_io_stats_get(mt_io* io, mt_io_stats* out);

/* Test only: while held (hold = 1), queued reads do not start (reads in flight go on); hold = 0
 * lets them start again. Makes a queue that cancel, destroy and the limits act on deterministic.
 * mt_io_hold: every lane; mt_io_hold_lane: one lane's reads (the other lanes' go on). */
void mt_io_hold(mt_io* io, int32_t hold);
void mt_io_hold_lane(mt_io* io, int32_t lane, int32_t hold);
/* Test only: the lane's fail_after_bytes (as mt_io_config's), counted from the bytes already asked on
 * the lane; 0: off. MT_IO_INVALID for an unknown lane. */
int mt_io_lane_fail_after(mt_io* io, int32_t lane, uint64_t fail_after_bytes);
/* The lane's queued reads fail at once (ECANCELED); returns once its reads in flight ended. For a
 * user leaving a shared engine (its memory must not be written after); the other lanes go on. */
void mt_io_lane_drain(mt_io* io, int32_t lane);

/* 1 when fd (the caller's) names the file the engine reads (same device and inode), else 0: a
 * caller that reads the same file may share the engine on a lane of its own. */
int mt_io_same_file(mt_io* io, int fd);
/* Page-cache advice (enum mt_io_advice) for [offset, offset + bytes), widened to whole pages
 * (bytes 0 with RANDOM: the whole file), on a buffered engine (direct 0); a direct engine leaves
 * nothing in the page cache and does nothing. */
void mt_io_advise(mt_io* io, int32_t advice, uint64_t offset, uint64_t bytes);

/* Process-wide, for leak checks: engines alive, their threads running, bounce bytes held. */
typedef struct mt_io_live_counts {
  int64_t engines, threads, bounce_bytes;
} mt_io_live_counts;
void mt_io_live(mt_io_live_counts* out);

const char* mt_io_status_name(int status); /* "ok", "invalid", "no-memory", ... */
const char* mt_io_kind_name(int kind);     /* "auto", "uring", "threads" */
/* "EIO", "ENODATA", ... for the errnos a read reports; "E<number>" for others (a static buffer
 * per thread). */
const char* mt_io_errno_name(int error);

#ifdef __cplusplus
}
#endif
#endif
