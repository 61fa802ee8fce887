/*
 * moetier expert tier: the C ABI between the addon and the native tier, beside mt_backend.h
 * (the device it puts residents on) and mt_forward.h (the forward pass it feeds experts to).
 *
 *   mt_tier     per layer, which routed experts are resident in backend slots (a budget of
 *               slots per layer), which are computed from host int8 copies, which from the
 *               container; the swaps that change that, and their uploads in flight.
 *
 * The tier alone owns residency, the expert states, the swap queue and the uploads in flight.
 * Callers read them (mt_tier_expert_states, one call per step) and ask for changes
 * (mt_tier_request_swap, mt_tier_resize, mt_tier_warm_issue); nothing else keeps a copy.
 *
 * Expert states (per layer and expert):
 *
 *   NONE --request_swap (newcomer)--> INCOMING --upload done, promoted--> RESIDENT
 *   RESIDENT --request_swap (victim)--> OUTGOING --upload into its slot issued--> NONE
 *   INCOMING --upload failed--> NONE          OUTGOING --upload refused--> RESIDENT
 *   RESIDENT --resize (shrink, victim)--> NONE        NONE --warm_issue--> INCOMING
 *
 * An OUTGOING expert is still computed from its slot until the upload into that slot is issued.
 *
 * Swaps and the boundary. A swap of layer l is queued, and issued right after layer l next
 * computes (its slots carry no leases then), so its copy overlaps layer l + 1 onwards. At that
 * boundary the eval thread only posts the layer to the tier's issuer thread (a queue push: no
 * system call, no lock); the issuer, polling while swaps are queued, issues the uploads, and
 * never while compute is on the layer. (The fake backend, whose times are decided at issue from its virtual compute
 * clock, issues inline at the boundary: that keeps its clock independent of scheduling.)
 * With issue_now, a swap is issued at once by the caller when its layer is not being computed.
 * A finished upload is promoted (its expert turns RESIDENT) when its layer next begins.
 *
 * Threads: mt_tier_source's callbacks run on the eval thread (the forward pass); every other
 * verb may be called from any one other thread at a time (the addon: the JS thread, and one
 * worker per warmstart), concurrently with an eval. mt_tier_resize and mt_tier_free need no
 * eval running (the caller checks). Every verb returns MT_TIER_OK or a status below; errors
 * write a message naming the layer, expert or option and what was expected into err.
 */
#ifndef MT_TIER_H
#define MT_TIER_H
#include <stddef.h>
#include <stdint.h>
#include "mt_backend.h"
#include "mt_forward.h"
#include "mt_policy.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_tier mt_tier;

enum mt_tier_status {
  MT_TIER_OK = 0,
  MT_TIER_STARTED = 1,           /* request_swap with issue_now: issued at once */
  MT_TIER_NOT_RESIDENT = -2,     /* the victim is not RESIDENT (incoming, outgoing or none) */
  MT_TIER_ALREADY_RESIDENT = -3, /* the newcomer is not NONE */
  MT_TIER_QUEUE_FULL = -4,       /* request_swap: the gate's queue holds its queue_max swaps already */
  MT_TIER_INVALID = -10,         /* a bad argument (message in err) */
  MT_TIER_FAILED = -11           /* an operating failure: a backend refusal, a failed upload */
};

enum mt_expert_state { MT_EXPERT_NONE = 0, MT_EXPERT_INCOMING = 1, MT_EXPERT_RESIDENT = 2, MT_EXPERT_OUTGOING = 3 };

/* The one gate (tier_gate.cc): every byte that enters a slot (a miss admitted or kept, a
 * prefetch, a swap of the caller's, a warm start) passes one in-flight budget, bytes and transfers,
 * in one priority order: a miss its layer waits on goes at once (never held; it counts, so the rest
 * wait behind it), then prefetches for the next layer from their queue, then the caller's swaps, each
 * issued at its layer's boundary while the budget has room (one held back then goes as soon as room
 * frees: mt_tier_poll issues it, else its layer's next boundary). Warm
 * starts are awaited by their caller between requests and never held. One ledger by class in
 * mt_tier_stats. The caller's upload queue (src/actors/upload-queue) is this gate's face: it keeps
 * no state of its own. Defaults below; mt_tier_set_gate changes them (engine.tune). */
#define MT_TIER_GATE_BYTES_DEFAULT (512ull * 1024 * 1024)
#define MT_TIER_GATE_TRANSFERS_DEFAULT 8
#define MT_TIER_GATE_QUEUE_DEFAULT 4096
enum mt_tier_gate_class {
  MT_TIER_GATE_MISS = 0,
  MT_TIER_GATE_PREFETCH = 1,
  MT_TIER_GATE_SWAP = 2,
  MT_TIER_GATE_WARM = 3,
  MT_TIER_GATE_CLASSES = 4
};
/* Upload outcomes (and evictions) kept until polled; more are counted (reports_dropped) and dropped. */
#define MT_TIER_REPORTS_MAX 4096
/* Prefetch tasks queued at once at most (waiting for room under the in-flight cap; the engine's
 * prefetch.queueMax may set fewer); more are refused (counted). */
#define MT_TIER_PREFETCH_QUEUE_MAX 64

typedef struct mt_tier_options {
  const int32_t* slots_per_layer; /* [n_layer]: slots each layer may hold, 0..nExpert */
  int32_t n_layer;                /* must be the model's */
  const uint8_t* host;            /* host copy arena (Q8_0 experts), or NULL */
  size_t host_bytes;
  const int32_t* host_offsets;      /* [nLayer * nExpert]: offset of an expert's copy in host, or -1
                                     (the container); read with acquire loads during evals */
  int32_t stream_fd;                /* >= 0: a descriptor of the model file; a miss with no host copy is
                                     read from it before its layer runs it: into a slot when one can
                                     take it (admitted; never on a backend whose slots the host cannot
                                     read), else into the tier's scratch for that call (streamed), on
                                     MT_IO_LANE_URGENT of the backend's read engine where its interface
                                     offers one over the same file (disk), else of an engine of the
                                     tier's own (mt_io.h); never computed from the mapping. -1: from
                                     the mapping */
  const uint8_t* stream_base;       /* where that file is mapped (the experts' views point into it) */
  uint64_t stream_fail_after_bytes; /* test only: the tier's read that takes the bytes it asked past
                                     this fails (its lane's fail_after_bytes: mt_io_lane_fail_after;
                                     the backend's uploads do not count); 0: never */
} mt_tier_options;

/* The model and backend must outlive the tier; so must host / host_offsets. */
mt_tier* mt_tier_create(const mt_model* model, mt_backend* backend, const mt_tier_options* options, char* err,
                        size_t err_bytes);
/* Waits for uploads in flight, stops the issuer, frees the tier's slots. No eval may run. */
void mt_tier_free(mt_tier* tier);
/* The tier as the forward pass's expert source (mt_eval_args.experts); owned by the tier. */
const mt_expert_source* mt_tier_source(mt_tier* tier);

/* Bytes of one expert: in the container (gate | up | down, a slot's content) and as a Q8_0
 * host copy (0: the model's experts have no exact int8 copy). */
void mt_tier_expert_bytes(const mt_tier* tier, uint64_t* container, uint64_t* host_copy);
uint64_t mt_tier_host_copy_bytes(const mt_model* model);
/* Q4_0 / Q8_0 expert -> its Q8_0 host copy at dst (dst_bytes >= mt_tier_host_copy_bytes). */
int mt_tier_requantize(const mt_model* model, int32_t layer, int32_t expert, uint8_t* dst, size_t dst_bytes, char* err,
                       size_t err_bytes);

/* states [nLayer * nExpert] (enum mt_expert_state) and slots [nLayer * nExpert] (the slot a
 * compute would read, or -1); either may be NULL. A consistent snapshot (under the tier's lock). */
void mt_tier_expert_states(mt_tier* tier, uint8_t* states, int32_t* slots);

/* Victim RESIDENT -> OUTGOING, newcomer NONE -> INCOMING, queued at the gate: MT_TIER_OK; with
 * issue_now and the layer not being computed, the layer's queue issued at once as far as the budget
 * allows: MT_TIER_STARTED when it issued any; else a negative status and nothing changed
 * (MT_TIER_QUEUE_FULL: the gate holds queue_max swaps). task_id comes back in the upload's report. */
int mt_tier_request_swap(mt_tier* tier, int32_t layer, int32_t victim, int32_t newcomer, double task_id,
                         int32_t issue_now);

/* Any time: the gate's budget (bytes and transfers in flight at once, each >= 1) and the most swaps
 * it holds queued (>= 1; more are refused). MT_TIER_INVALID for a value below 1 (nothing changes). */
int mt_tier_set_gate(mt_tier* tier, uint64_t inflight_bytes_max, int32_t inflight_transfers_max, int32_t queue_max);
/* Between evals: every swap still queued at the gate is dropped (victim RESIDENT again, newcomer
 * NONE; counted cancelled): a request ended. Returns how many. */
int32_t mt_tier_cancel_swaps(mt_tier* tier);

/* The tier's eviction policy (include/mt_policy.h: decayed LFU, the code `moetier replay --policy
 * dlfu` runs): every eviction at need is decided here, once, from the policy's counts as they are at
 * that moment; no order is published by the caller. Each bind adds the layer's routed rows to its
 * experts' counts (at the clock's time), whatever the mode.
 *   OFF    a routed miss (stream_fd) or a prefetch with no free slot evicts nobody (streamed; dropped)
 *   EVICT  it evicts the layer's lowest-scored RESIDENT expert that its call does not run (a
 *          prefetch: nor one of the top nExpertUsed predicted)
 *   KEEP   EVICT, and on a tier without stream_fd each routed miss of a one-token call (a decode
 *          step; a prompt's are not kept) is kept, decayed LFU as a demand policy: admitted as a
 *          disk tier's miss would be (a free slot, else the victim's slot; an upload of task 0
 *          issued at bind, overlapping the rest of the layer), computed from its host copy this time
 * Between evals. half_life: decode tokens, [1, MT_DLFU_HALF_LIFE_MAX]; prior [nLayer * nExpert] or
 * NULL: the counts at time 0 (a heat file, scaled by the caller); the clock restarts at 0.
 * MT_TIER_INVALID for a bad value (nothing changes). */
enum mt_tier_policy_mode { MT_TIER_POLICY_OFF = 0, MT_TIER_POLICY_EVICT = 1, MT_TIER_POLICY_KEEP = 2 };
int mt_tier_set_policy(mt_tier* tier, int32_t mode, double half_life, const double* prior, size_t n);
/* Between evals: one decode token passed (the policy's clock). */
void mt_tier_policy_tick(mt_tier* tier);
/* Between evals: every expert's score (mt_dlfu_score) into out [nLayer * nExpert] (n: room in out). */
void mt_tier_policy_scores(mt_tier* tier, double* out, size_t n);

/* Prefetch (docs/SPEC.md section 4; tier_prefetch.cc). Between evals: the mode, how many predicted experts the
 * forward pass hands over per layer (predict_k, 1..nExpert), budget [nLayer]: how many of them a
 * layer's prediction may start reading (0..nExpert: the engine's transfer window over one
 * expert's bytes), and the prefetch queue's length (1..MT_TIER_PREFETCH_QUEUE_MAX; more are
 * refused): a predicted expert waits there for room under the gate's budget. OFF needs none of
 * them (budget may be NULL). Leaving
 * ENFORCE cancels what is queued. MT_TIER_INVALID for a bad value (nothing changes). */
enum mt_tier_prefetch_mode { MT_TIER_PREFETCH_OFF = 0, MT_TIER_PREFETCH_OBSERVE = 1, MT_TIER_PREFETCH_ENFORCE = 2 };
int mt_tier_set_prefetch(mt_tier* tier, int32_t mode, int32_t predict_k, const int32_t* budget, size_t n,
                         int32_t queue_max);
/* The routes' prefetch outcomes by layer since the stats mark: out[l * 4 + k] for k = covered,
 * late, wasted, uncovered (n: room in out, nLayer * 4 for all). */
void mt_tier_prefetch_by_layer(mt_tier* tier, uint64_t* out, size_t n);

/* A prefill's path on a tier with stream_fd (docs/SPEC.md section 5; tier_bulk.cc), set between evals: ON_DEMAND
 * (a layer's routed misses are read once it routed: tier_stream.cc) or WHOLE_LAYER (each layer's
 * experts are read whole, the next layer's while this one computes; misses computed from there).
 * MT_TIER_INVALID for another value, or WHOLE_LAYER without stream_fd or on device slots (a backend
 * the host cannot read: its residents run remote, and that path is not wired beside them). */
enum mt_tier_prefill_path { MT_TIER_PREFILL_ON_DEMAND = 0, MT_TIER_PREFILL_WHOLE_LAYER = 1 };
int mt_tier_set_prefill_path(mt_tier* tier, int32_t path);
/* Layer calls by path since the stats mark: out[l * 2] whose misses were read on demand, out[l * 2 + 1]
 * whose misses were computed from a whole-layer read (n: room in out, nLayer * 2 for all). */
void mt_tier_path_by_layer(mt_tier* tier, uint64_t* out, size_t n);

/* Between evals: issues now what the last eval's boundaries posted and the issuer has not
 * reached yet (no layer computes then, so every queued swap goes), on the caller's thread, and
 * makes every landed upload resident; so a poll right after sees every eviction the last eval's
 * boundaries made, and reports no newcomer that is not resident yet. Posts the issuer took and
 * has not handled go stale (not issued). */
void mt_tier_flush(mt_tier* tier);

/* An eval on this tier is about to start (the caller's thread, not the eval's): the posts of the
 * evals before it go stale (issued only in their own eval or the flush after it), and an issuer
 * that stopped polling a queue no boundary posted for (the engine idled) polls again. */
void mt_tier_kick(mt_tier* tier);

typedef struct mt_tier_upload {
  double task_id;
  int32_t layer, expert, victim;
  int32_t ok, in_place, fell_back; /* fell_back: the slot was freed, then uploaded into empty */
  int32_t admitted;                /* issued at bind for a routed miss waiting on it (admit before run) */
  int32_t prefetch;                /* issued by a prediction, a layer ahead (tier_prefetch.cc) */
  uint64_t bytes;
  int64_t issued_ns, start_ns, end_ns;
} mt_tier_upload;

typedef struct mt_tier_eviction {
  int32_t layer, expert;
} mt_tier_eviction;

/* A streamed miss's read into scratch (stream_fd): its three ranges, issued at bind; start: the
 * first reached the disk, end: the last landed (mt_io's times, CLOCK_MONOTONIC). */
typedef struct mt_tier_read {
  int32_t layer, expert;
  uint64_t bytes;
  int64_t issued_ns, start_ns, end_ns;
} mt_tier_read;

/* Moves out the uploads settled, the experts evicted and the streamed reads landed since the
 * last poll (each array holds MT_TIER_REPORTS_MAX entries); their counts in *n_uploads,
 * *n_evictions and *n_reads (reads may be NULL: dropped). */
void mt_tier_poll(mt_tier* tier, mt_tier_upload* uploads, int32_t* n_uploads, mt_tier_eviction* evictions,
                  int32_t* n_evictions, mt_tier_read* reads, int32_t* n_reads);

typedef struct mt_tier_stats {
  uint64_t hits, misses, lazy_misses; /* routed rows: from slots / from host copies or the container / the container */
  int64_t leases;                     /* live leases on the tier's slots (0 between evals) */
  int32_t slots_spare;                /* reserved slots no layer uses (a shrink left them) */
  uint64_t reports_dropped;
  uint64_t hook_calls, hook_ns, hook_dropped;
  uint64_t swaps_started_now;      /* issue_now swaps the caller issued itself */
  uint64_t swaps_issued_by_issuer; /* swaps the issuer thread issued after their boundary */
  uint64_t boundaries_posted;      /* boundaries the eval thread posted to the issuer */
  uint64_t stale_posts; /* posts the issuer reached after their eval's poll or the next eval's start: not issued */
  uint64_t streamed_reads, streamed_bytes; /* misses read from the file into scratch for their call */
  uint64_t stream_failures;                /* reads before a run that failed (the eval failed with them) */
  uint64_t admitted_reads;                 /* misses read into a slot before they ran (also uploads) */
  uint64_t stream_engine_bytes;            /* bytes the tier's own reads read since creation (its lane of the
                                          read engine; never the backend's uploads; never reset) */
  uint64_t stall_ns;                       /* from the stats mark: time the forward pass waited for reads of
                                          misses with nothing else of the layer left to run */
  uint64_t expert_reads;                   /* from the stats mark: routed misses read by their own call
                                          (admitted or streamed; a wait on an earlier upload is not one) */
  uint64_t distinct_experts_read;          /* the distinct (layer, expert) among them: reads / distinct is
                                          a prefill's reads per distinct expert (1.0 at best) */
  uint64_t bulk_layers;                    /* layers read whole (the whole-layer path) since creation */
  /* Prefetch, by expert, from the stats mark: of the routed experts a prediction read, covered
   * (landed by their bind) and late (not landed then: late_ns waited in all, on the disk tier);
   * wasted (read, evicted before any routing); uncovered (routed, needed bytes moved, no
   * prefetch of it); observe: the reads enforce would have started, and the routed among them. */
  uint64_t prefetch_covered, prefetch_late, prefetch_late_ns, prefetch_wasted, prefetch_uncovered;
  uint64_t prefetch_would_issue, prefetch_would_cover;
  /* The prefetch queue's ledger since creation (never reset): tasks queued (their bytes
   * admitted), refused (the queue was full), and each queued task's one end: issued (then
   * completed or failed), cancelled (a newer eval or its layer began first), dropped (no slot or
   * the backend refused); bytes retired at those ends; bytes in flight now. */
  uint64_t prefetch_queued, prefetch_refused, prefetch_issued, prefetch_completed, prefetch_failed, prefetch_cancelled,
      prefetch_dropped;
  uint64_t prefetch_admitted_bytes, prefetch_retired_bytes, prefetch_inflight_bytes;
  int32_t prefetch_queue_length;
  /* The one gate: its budget, what is in flight under it now (every class), the swaps it holds
   * queued, and by class (mt_tier_gate_class) uploads issued, then completed or failed, swaps
   * refused (queue full) and cancelled (a request ended) since creation. */
  uint64_t gate_bytes_max;
  int32_t gate_transfers_max, gate_queue_max;
  uint64_t gate_inflight_bytes;
  int32_t gate_inflight_transfers, gate_swaps_queued;
  uint64_t gate_issued[MT_TIER_GATE_CLASSES], gate_completed[MT_TIER_GATE_CLASSES], gate_failed[MT_TIER_GATE_CLASSES];
  uint64_t gate_refused[MT_TIER_GATE_CLASSES], gate_cancelled[MT_TIER_GATE_CLASSES];
} mt_tier_stats;
/* Any time: only the gate_* fields of out are filled (the rest untouched): cheaper than mt_tier_stats_get. */
void mt_tier_gate_stats(mt_tier* tier, mt_tier_stats* out);
/* used [nLayer] (slots holding or receiving an expert) and budget [nLayer] may be NULL. */
void mt_tier_stats_get(mt_tier* tier, mt_tier_stats* out, int32_t* used, int32_t* budget);
/* hits, misses, lazy_misses and the streamed reads back to 0 (the stats mark after a prefill). */
void mt_tier_reset_stats(mt_tier* tier);

/* Between evals: the layer's slot count becomes count. Growing takes spare slots first, then
 * reserves more; shrinking frees free slots first, then the victims' slots in the given order
 * (lowest score first) that are plainly RESIDENT, evicting them (reported by poll). On an
 * error nothing changed. */
int mt_tier_resize(mt_tier* tier, int32_t layer, int32_t count, const int32_t* victims, int32_t n_victims, char* err,
                   size_t err_bytes);

/* Warmstart: fill free slots of the layer with the experts (NONE ones; others are skipped) and
 * wait for them. issue (any thread) returns a handle, also when it failed part-way (then
 * *status < 0 and err says why; the handle still holds the uploads issued); NULL when nothing
 * was issued. finish waits (any thread, e.g. a worker), promotes what landed, frees the handle. */
typedef struct mt_tier_warm mt_tier_warm;
mt_tier_warm* mt_tier_warm_issue(mt_tier* tier, int32_t layer, const int32_t* experts, int32_t n, int* status,
                                 char* err, size_t err_bytes);
int mt_tier_warm_finish(mt_tier* tier, mt_tier_warm* warm, char* err, size_t err_bytes);

/* Called on the eval thread after each layer's routing with the rows per expert [nExpert]
 * (for a prefill replan); fn NULL removes it. Set only between evals. */
typedef void (*mt_tier_layer_hook)(void* user, int32_t layer, const int32_t* counts, int32_t n_expert);
void mt_tier_set_layer_hook(mt_tier* tier, mt_tier_layer_hook fn, void* user);
/* The hook's owner could not deliver one call (its queue was full): counted in hook_dropped. */
void mt_tier_count_hook_dropped(mt_tier* tier);

#ifdef __cplusplus
}
#endif
#endif
