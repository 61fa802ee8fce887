/*
 * moetier backends: the C ABI between the expert tier and the memory that computes
 * resident experts (the "device"). One narrow set of verbs over opaque handles; every
 * implementation (cpu, fake, later cuda) sits behind the same verbs.
 *
 *   mt_backend   a device: slots under a byte budget, an upload queue, timing events
 *   slot         room for one expert: gate | up | down of one expert, in the container's
 *                type, back to back. All slots of a backend have one size, so a newcomer
 *                is written into a victim's slot in place.
 *   event        a timing record: an upload (pending -> done | failed) or a compute
 *                marker; times in ns on CLOCK_MONOTONIC (the clock of Node's
 *                process.hrtime.bigint()), or on the fake backend's virtual clock.
 *   lease        compute holds a slot's content: uploads into a leased slot and frees
 *                of it are refused (MT_BACKEND_BUSY) instead of racing the reader.
 *
 * Slot layout the forward pass expects (one upload, three pieces straight from the mapping):
 *   [0, g)          gate rows of expert e   g = ffn_gate_exps' expert_bytes
 *   [g, g + u)      up rows                 u = ffn_up_exps'   expert_bytes
 *   [g + u, g+u+d)  down rows               d = ffn_down_exps' expert_bytes
 * so slot_bytes = g + u + d and a resident runs with the mt_kernels.h kernels on Matrix views
 * at those offsets of mt_backend_slot_data, under a lease (cpu, fake).
 *
 * Slot life:  empty --upload--> uploading --done--> valid --free--> empty
 *                                          \--failed--> invalid --free--> empty
 *             valid / invalid --upload(overwrite)--> uploading   (in place, where supported)
 *
 * Uploads are asynchronous: mt_backend_upload returns at once with an event; the bytes
 * move on the backend's own upload thread (cpu, fake) or stream (cuda), overlapping
 * compute. The caller keeps the source bytes alive until the event is done or failed.
 *
 * Errors: every verb returns MT_BACKEND_OK or a negative status and writes a message
 * naming the slot, event or option and what was expected into err (err_bytes bytes).
 * Nothing aborts the process. Verbs are thread-safe (one mutex per backend).
 *
 * Kinds:
 *   cpu   the device is an aligned arena in RAM, one block per reserve call; uploads are
 *         real memcpys on the upload thread; events carry real monotonic timestamps.
 *   fake  the same memory and copies (so compute from its slots gives real results), but
 *         time is a deterministic virtual clock starting at 0 ns:
 *           upload   start = max(upload clock, compute clock) + round(transfer_fixed_us * 1000)
 *                    end   = start + round(bytes * 1e9 / bandwidth_bytes_per_s)
 *                    upload clock = end            (one queue: uploads serialise)
 *                    (the fixed cost passes before the bytes move, as on a device: a caller
 *                    that stamps its issue time reads fixed cost + queue wait as start - issued
 *                    and the bandwidth as bytes / (end - start))
 *           compute  mt_backend_compute_record(label, work_bytes) advances the compute
 *                    clock by round(work_bytes * 1e9 / compute_bytes_per_s), then stamps
 *           wait     mt_backend_event_wait moves the compute clock to the event's end
 *                    (the host blocked on the transfer)
 *         It can refuse in-place overwrite (MT_BACKEND_NO_OVERWRITE) and fail one transfer
 *         half-way (fail_transfer_after_bytes): the bytes before the limit are copied,
 *         the rest of the slot keeps old garbage, the slot turns invalid, the event failed.
 *
 *   disk  the cpu backend's memory, but an upload reads its pieces from the model file on the
 *         read engine (mt_io.h: io_uring or pread threads, 8 reads in flight, O_DIRECT, or
 *         buffered without readahead and its pages dropped after where O_DIRECT is refused),
 *         every upload's reads issued at once and completed by a thread of the backend, so a
 *         resident expert lives in the backend's RAM and nowhere else; the mapping's pages
 *         are never touched. A failed or short read fails the upload's event
 *         (the slot turns invalid), as a failed copy does. Its engine is the interface's
 *         read_engine: the disk tier reads the same file on it, on a lane of its own.
 *
 *   cuda      device memory through the runtime table of native/cuda/mt_cuda_runtime.h, filled by
 *             libmoetier_cuda.so (dlopened from the addon's directory; create fails with a reason:
 *             include/mt_backend_cuda.h). Not host-visible: run_expert and the interface's
 *             run_experts entry compute a resident.
 *   cuda-sim  the cuda kind's host code on a simulated runtime (native/cuda/host/sim_runtime.cc:
 *             host threads as streams, host memory as device memory, the CPU kernels as the expert
 *             kernel) for tests, with faults: sim_device_bytes, fail_transfer_after_bytes (every
 *             host-to-device copy counts, run_expert's x too; sim_async_copy_fault: reported by the
 *             events after it instead of by the call), overwrite_supported, sim_no_device.
 *
 * A CUDA backend fits the same verbs (native/cuda/host/cuda_backend.h):
 *   reserve        one cudaMalloc block per call (slots contiguous inside it)
 *   upload         cudaMemcpyAsync on a non-blocking upload stream, through a pinned
 *                  staging ring (the container is pageable mmap), then cudaEventRecord;
 *                  the event's state comes from cudaEventQuery, its times from
 *                  cudaEventElapsedTime against a base event stamped at creation
 *   overwrite      the same cudaMemcpyAsync into the victim's device pointer: leases
 *                  guarantee no kernel reads the slot, so no free/alloc (each of which
 *                  synchronises the device)
 *   compute_record cudaEventRecord on the compute stream
 *   slot_data      refused (MT_BACKEND_UNSUPPORTED: device memory is not host-visible);
 *                  run_expert is then the way to compute a resident
 */
#ifndef MT_BACKEND_H
#define MT_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_backend mt_backend;
struct mt_io; /* include/mt_io.h: the read engine a backend may share (mt_backend_i.read_engine) */
/* A slot's stride: its bytes rounded up to this; the budget counts strides. */
#define MT_BACKEND_SLOT_ALIGN_BYTES 64
typedef uint64_t mt_event_id; /* > 0; ids are never reused by one backend */
typedef uint64_t mt_lease_id; /* > 0; ids are never reused by one backend */

/* CUDA: device memory through libmoetier_cuda.so; CUDA_SIM: the same host code on a simulated
 * runtime (tests). Both: include/mt_backend_cuda.h. */
enum mt_backend_kind {
  MT_BACKEND_CPU = 0,
  MT_BACKEND_FAKE = 1,
  MT_BACKEND_DISK = 2,
  MT_BACKEND_CUDA = 3,
  MT_BACKEND_CUDA_SIM = 4
};

enum mt_backend_status {
  MT_BACKEND_OK = 0,
  MT_BACKEND_INVALID = -1,      /* bad argument: unknown slot / event, wrong size (a caller bug) */
  MT_BACKEND_BUDGET = -2,       /* reserving would pass the byte budget; nothing reserved */
  MT_BACKEND_BUSY = -3,         /* the slot is leased or an upload into it is in flight */
  MT_BACKEND_NO_OVERWRITE = -4, /* in-place overwrite refused: free the slot, then upload */
  MT_BACKEND_STATE = -5,        /* the slot's state forbids it (upload into a full slot without
                                    overwrite, lease of an empty or invalid slot, reserve with
                                    another slot size) */
  MT_BACKEND_NO_MEMORY = -6,    /* the allocation of a slot block failed */
  MT_BACKEND_UNSUPPORTED = -7,  /* an optional verb this backend does not implement */
  MT_BACKEND_CLOSED = -8        /* the backend is shutting down */
};

enum mt_slot_state { MT_SLOT_EMPTY = 0, MT_SLOT_UPLOADING = 1, MT_SLOT_VALID = 2, MT_SLOT_INVALID = 3 };
enum mt_event_state { MT_EVENT_PENDING = 0, MT_EVENT_DONE = 1, MT_EVENT_FAILED = 2 };
enum mt_event_kind { MT_EVENT_UPLOAD = 0, MT_EVENT_COMPUTE = 1 };

/* Fields that do not apply to a kind are ignored. */
typedef struct mt_backend_config {
  int32_t kind;          /* enum mt_backend_kind */
  uint64_t budget_bytes; /* slot bytes the device may hold (all reserve calls together) */
  /* fake only */
  double bandwidth_bytes_per_s;       /* > 0 */
  double transfer_fixed_us;           /* >= 0, per upload */
  double compute_bytes_per_s;         /* > 0, weight bytes streamed per second of compute */
  int32_t overwrite_supported;        /* 0: refuse in-place overwrite (fake, cuda-sim) */
  uint64_t fail_transfer_after_bytes; /* 0: never; else the upload that would take the backend's
                                        total uploaded bytes past this fails there (once); disk too
                                        (and a cuda kind given the file): the read crossing it;
                                        cuda-sim: the copy call crossing it copies the bytes
                                        before the limit, then reports an error (once) */
  /* disk (always) and cuda / cuda-sim (when given; file_fd -1 otherwise): the model file, and
     where it is mapped. An upload's pieces point into [file_base, file_base + file_length); the
     backend reads those ranges from file_fd (native/backend/model_file.h: O_DIRECT where allowed)
     instead of copying from the mapping, whose pages it never touches: the disk kind into the
     slot, the cuda kinds into their pinned staging ring. A piece outside the file fails its upload. */
  int32_t file_fd;
  const uint8_t* file_base;
  uint64_t file_length;
  /* cuda-sim only (the simulated runtime's faults, for tests): */
  uint64_t sim_device_bytes;    /* 0: 1 GiB; device allocations past this fail (error 2) */
  int32_t sim_no_device;        /* 1: get_device_count reports no device (error 100) */
  int32_t sim_async_copy_fault; /* 1: the copy crossing fail_transfer_after_bytes is accepted by
                                        the call; its error turns up in every event its stream reaches
                                        after it (sticky, as CUDA's asynchronous errors: the device is
                                        lost, later uploads fail too) */
} mt_backend_config;

/* An "8 GB consumer card on PCIe 4.0" (kind fake): 25 GB/s, 330 us per transfer
 * (MoE-Infinity's figure), 8 GiB of slots, compute streaming 448 GB/s of weights (an RTX
 * 3070's memory bandwidth: decode is bandwidth-bound), overwrite supported. */
void mt_backend_config_preset_consumer_8gb(mt_backend_config* out);

typedef struct mt_event_info {
  int32_t state;    /* enum mt_event_state */
  int32_t kind;     /* enum mt_event_kind */
  int64_t start_ns; /* upload: when its copy began; compute: the marker's instant */
  int64_t end_ns;   /* upload: when it ended (0 while pending); compute: = start_ns */
  int64_t label;    /* the caller's tag (e.g. invocation * 1024 + layer) */
  int32_t slot;     /* upload: the slot; compute: -1 */
  uint64_t bytes;   /* upload: bytes requested; compute: the work bytes recorded */
} mt_event_info;

typedef struct mt_backend_stats {
  int32_t slots;              /* reserved slots */
  uint64_t slot_bytes;        /* bytes of one slot as requested */
  uint64_t slot_stride_bytes; /* slot_bytes rounded up to the alignment; what the budget counts */
  uint64_t reserved_bytes;    /* slots * slot_stride_bytes <= budget_bytes, always */
  uint64_t budget_bytes;
  int64_t leases; /* live leases over all slots */
  int32_t uploads_in_flight;
  uint64_t uploads_done, uploads_failed, bytes_uploaded;
  uint64_t discards; /* mt_backend_discard calls that gave a slot's memory back */
  int32_t overwrite_supported;
  int32_t host_visible;  /* slot_data works */
  int32_t virtual_clock; /* event times are on a virtual clock decided at issue (fake) */
} mt_backend_stats;

/* One source piece of an upload; pieces land back to back from the slot's start. */
typedef struct mt_upload_piece {
  const void* src;
  size_t bytes;
} mt_upload_piece;
#define MT_UPLOAD_PIECES_MAX 4

mt_backend* mt_backend_create(const mt_backend_config* config, char* err, size_t err_bytes);
/* Waits for in-flight uploads, then frees every slot block. Leases die with it. */
void mt_backend_destroy(mt_backend* b);

/* Adds n slots of slot_bytes each (ids [*first, *first + n)); every call must use the same
 * slot_bytes. Refused past the budget (MT_BACKEND_BUDGET) with nothing reserved. */
int mt_backend_slots_reserve(mt_backend* b, int32_t n, uint64_t slot_bytes, int32_t* first, char* err,
                             size_t err_bytes);

/* Starts copying the pieces (their bytes summing to at most slot_bytes) into the slot and
 * returns at once. overwrite = 0: the slot must be empty. overwrite = 1: a valid or invalid
 * slot is written in place (MT_BACKEND_NO_OVERWRITE where the backend refuses). */
int mt_backend_upload(mt_backend* b, int32_t slot, const mt_upload_piece* pieces, int32_t n_pieces, int32_t overwrite,
                      int64_t label, mt_event_id* event, char* err, size_t err_bytes);
int mt_backend_overwrite_supported(const mt_backend* b);
/* Drops the slot's content (valid or invalid -> empty). Refused while leased or uploading. */
int mt_backend_free(mt_backend* b, int32_t slot, char* err, size_t err_bytes);
/* Gives an empty slot's memory back while the slot stays reserved (a slot a shrink left spare):
 * cpu / fake release its whole pages to the OS (the next upload into it faults them in again);
 * a CUDA backend would keep them (device memory comes back only with its block). Refused
 * (MT_BACKEND_STATE) unless the slot is empty. */
int mt_backend_discard(mt_backend* b, int32_t slot, char* err, size_t err_bytes);
int mt_backend_slot_state(mt_backend* b, int32_t slot, int32_t* state, char* err, size_t err_bytes);

int mt_backend_event_query(mt_backend* b, mt_event_id event, mt_event_info* info, char* err, size_t err_bytes);
/* Blocks until the event is done or failed; fills info. */
int mt_backend_event_wait(mt_backend* b, mt_event_id event, mt_event_info* info, char* err, size_t err_bytes);
/* A compute timing marker (label: e.g. invocation and layer), stamped now on the compute
 * queue; work_bytes: weight bytes computed since the previous marker (fake: moves its clock). */
int mt_backend_compute_record(mt_backend* b, int64_t label, uint64_t work_bytes, mt_event_id* event, char* err,
                              size_t err_bytes);

/* Compute holds the slot's content; refused unless the slot is valid. Release is idempotent:
 * releasing a released (or unknown) lease does nothing. slot = -1 counts every lease. */
int mt_backend_lease(mt_backend* b, int32_t slot, mt_lease_id* lease, char* err, size_t err_bytes);
void mt_backend_release(mt_backend* b, mt_lease_id lease);
int64_t mt_backend_lease_count(mt_backend* b, int32_t slot);

void mt_backend_stats_get(mt_backend* b, mt_backend_stats* out);

/* Optional: where the slot's bytes live, for host kernels (cpu, fake). The forward pass
 * reads a resident from here with the mt_kernels.h kernels while it holds a lease. */
int mt_backend_slot_data(mt_backend* b, int32_t slot, uint8_t** data, char* err, size_t err_bytes);
/* Optional: compute a resident on the device (cuda, cuda-sim: args is an mt_backend_expert_args,
 * the slot must be valid and leased). cpu, fake and disk return MT_BACKEND_UNSUPPORTED: the forward
 * pass computes their residents from mt_backend_slot_data. */
int mt_backend_run_expert(mt_backend* b, int32_t slot, const void* args, char* err, size_t err_bytes);

/* Device compute: a resident expert's rows, y = Down (silu(Gate x) * (Up x)) for `count` rows, with
 * the slot laid out gate | up | down (above). x and y are HOST memory ([count, n_embd] f32 each):
 * the backend copies x to the device, runs the kernel, copies y back and returns once y is written.
 * The slot must be valid and leased by the caller. */
typedef struct mt_backend_expert_args {
  const float* x;
  float* y;
  int32_t count;                         /* 1 .. MT_BACKEND_RUN_ROWS_MAX */
  int32_t gate_type, up_type, down_type; /* enum mt_type (mt_kernels.h) */
  uint64_t gate_bytes, up_bytes, down_bytes;
  int64_t n_embd, n_ff;
} mt_backend_expert_args;
/* Rows one run computes at most (prefill chunks are 256 rows: mt_forward.h), and one run_experts
 * call over all its runs. */
#define MT_BACKEND_RUN_ROWS_MAX 4096
/* Runs one run_experts call takes at most (a layer's experts: 128 in Qwen3-30B-A3B, 256 in the
 * largest routed layers llama.cpp loads). */
#define MT_BACKEND_RUNS_MAX 256

/* One resident's run in a run_experts call: its leased slot and its args. */
typedef struct mt_backend_run {
  int32_t slot;
  mt_backend_expert_args args;
} mt_backend_run;

/* Where the device spent a run_experts call, on CLOCK_MONOTONIC (the upload events' clock). */
typedef struct mt_backend_span {
  int64_t start_ns, end_ns;
} mt_backend_span;

/* The backend's interface entries that a caller looks up rather than calls as verbs, in
 * ggml-backend-impl.h's style: an entry marked optional is NULL where the kind does not have it,
 * and a caller tests the entry, never the kind. */
typedef struct mt_backend_i {
  /* (optional) compute a layer's residents on the device in one call: every run's x goes to the
   * device in one copy, the expert kernels run back to back, the y rows come back in one copy, and
   * the device is synchronised once. Each run's y is as mt_backend_run_expert would write it. All
   * slots valid and leased; at most MT_BACKEND_RUNS_MAX runs and MT_BACKEND_RUN_ROWS_MAX rows in
   * all; span may be NULL. NULL on the host kinds (cpu, fake, disk), whose residents the forward
   * pass computes from mt_backend_slot_data; set on cuda and cuda-sim. */
  int (*run_experts)(mt_backend* b, const mt_backend_run* runs, int32_t n, mt_backend_span* span, char* err,
                     size_t err_bytes);
  /* (optional) the read engine over the model file (include/mt_io.h) whose MT_IO_LANE_NORMAL the
   * backend's uploads read on, for a caller that reads the same file (mt_io_same_file) to share on
   * its own lane instead of running a second engine: the disk tier's reads a layer waits on, on
   * MT_IO_LANE_URGENT. The backend owns it (it lives as long as the backend, and its destroy ends
   * it); the caller uses its own lane only (reads, waits, queries, its lane's stats, fault and hold)
   * and drains that lane (mt_io_lane_drain) before it lets go. NULL on every kind but disk (the cuda
   * kinds' engine fills their staging ring and is theirs alone). */
  struct mt_io* (*read_engine)(mt_backend* b);
} mt_backend_i;

/* The backend's interface (never NULL; it lives as long as the backend). */
const mt_backend_i* mt_backend_interface(const mt_backend* b);

const char* mt_backend_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
