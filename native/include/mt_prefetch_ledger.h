/*
 * moetier prefetch ledger: the one implementation of the prefetch queue and its exact-route ledger,
 * the state machine the tier's prefetch runs (native/tier/tier_prefetch.cc) and that `moetier replay
 * --prefetch` runs offline (src/tiers/prefetch-ledger.ts, through the addon's handle). Pure functions
 * over a state the caller owns, arrays included: no clock (the caller passes at_ms, never going
 * back), no I/O, no locks, no allocation.
 *
 *   admit ──▶ queued ──issue──▶ issued (in flight) ──complete──▶ completed (landed)
 *               │                    └───────fail───────▶ failed
 *               ├── cancel, or begin (a newer generation) ──▶ cancelled
 *               └── drop (no slot could take it when its turn came) ──▶ dropped
 *   refused: never queued (a duplicate of a live task, a full queue, no byte room); counted only
 *
 * A task's bytes are outstanding (queued + in flight, against bytes_max) from admit until its end,
 * where they retire exactly once: completed, failed, cancelled or dropped. So at rest admitted bytes
 * == retired bytes, and admitted == issued + cancelled + dropped + queued.
 *
 * Exact-route accounting by (layer, expert): a key's live task is its queued, in-flight or landed
 * unrouted one (at most one; live[key] holds its index):
 *   covered    prefetched, routed after it landed
 *   late       prefetched, routed while in flight: counted as it lands, with the wait (late_ms);
 *              a caller that knows at the route that the read is still pending and counts it there
 *              (the tier: its run waits at the bind, or computes without it) passes MT_PF_READ_PENDING
 *   uncovered  routed, not resident, with no prefetch read for it; or a route that waited on a read
 *              that then failed or was evicted (it needs a demand read after all)
 *   wasted     prefetched and landed, evicted before any routing (evicted in flight: as it lands)
 *   resident   routed and resident by other means (not a prefetch's doing)
 * A route overtaking a queued read cancels it (the demand read goes first).
 *
 * Tallies (count and bytes each, total and by layer) are kept where the caller gives arrays for them;
 * every function also returns its outcome, which is what a caller keeping its own counters reads.
 */
#ifndef MT_PREFETCH_LEDGER_H
#define MT_PREFETCH_LEDGER_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum mt_prefetch_task_state {
  MT_PF_TASK_FREE = 0, /* a table entry never used */
  MT_PF_TASK_QUEUED = 1,
  MT_PF_TASK_ISSUED = 2,
  MT_PF_TASK_COMPLETED = 3,
  MT_PF_TASK_FAILED = 4,
  MT_PF_TASK_CANCELLED = 5,
  MT_PF_TASK_DROPPED = 6
};

/* A task's flags: a route found it in flight (awaited_ms is set); it was evicted in flight. */
#define MT_PF_TASK_AWAITED 1u
#define MT_PF_TASK_EVICTED 2u

/* What each event did. Negative: the event did not apply (nothing changed). */
enum mt_prefetch_outcome {
  MT_PF_WRONG_STATE = -1,       /* the task is not in the state the event needs (a caller's bug) */
  MT_PF_OK = 0,                 /* admit: queued; issue, cancel, drop: done; complete, fail: nothing more */
  MT_PF_REFUSED_DUPLICATE = 1,  /* admit: the key has a live task */
  MT_PF_REFUSED_QUEUE_FULL = 2, /* admit: queue_n == queue_max */
  MT_PF_REFUSED_BYTES_FULL = 3, /* admit: outstanding + bytes > bytes_max */
  MT_PF_LANDED = 4,             /* complete: landed unrouted, live until routed (covered) or evicted (wasted) */
  MT_PF_COVERED = 5,            /* route */
  MT_PF_LATE = 6,               /* route (MT_PF_READ_PENDING), complete (an awaited read) */
  MT_PF_AWAITING = 7,  /* route: in flight (late or uncovered as it ends); resident as it lands, a second route */
  MT_PF_UNCOVERED = 8, /* route; fail or evict of an awaited read */
  MT_PF_RESIDENT = 9,  /* route */
  MT_PF_WASTED = 10,   /* evict, complete (evicted in flight) */
  MT_PF_NONE = 11      /* evict: no prefetch of it holds a slot */
};

/* What the caller knows of a live in-flight read at its route. */
enum mt_prefetch_read {
  MT_PF_READ_UNKNOWN = 0, /* the ledger's view: issued is in flight until complete or fail (the replay) */
  MT_PF_READ_LANDED = 1,  /* landed by the route, its completion not yet recorded: covered */
  MT_PF_READ_PENDING = 2  /* still in flight, and late now (its end adds nothing) */
};

/* The tallies, in the order of src/tiers/prefetch-ledger.ts TALLY_NAMES. */
enum mt_prefetch_tally_name {
  MT_PF_ADMITTED,
  MT_PF_T_REFUSED_QUEUE_FULL,
  MT_PF_T_REFUSED_BYTES_FULL,
  MT_PF_T_REFUSED_DUPLICATE,
  MT_PF_ISSUED,
  MT_PF_COMPLETED,
  MT_PF_FAILED,
  MT_PF_CANCELLED,
  MT_PF_DROPPED,
  MT_PF_RETIRED,
  MT_PF_ROUTED,
  MT_PF_T_RESIDENT,
  MT_PF_T_COVERED,
  MT_PF_T_LATE,
  MT_PF_T_UNCOVERED,
  MT_PF_T_WASTED,
  MT_PF_TALLIES
};

typedef struct mt_prefetch_tallies {
  uint64_t count[MT_PF_TALLIES], bytes[MT_PF_TALLIES];
  double late_ms;
} mt_prefetch_tallies;

typedef struct mt_prefetch_task {
  int32_t layer, expert;
  uint64_t bytes, generation;
  double admitted_ms, awaited_ms;
  int32_t state;  /* mt_prefetch_task_state */
  uint32_t flags; /* MT_PF_TASK_* */
} mt_prefetch_task;

typedef struct mt_prefetch_ledger {
  int32_t n_layer, n_expert;
  int32_t queue_max;      /* queued tasks at most (<= queue_cap) */
  uint64_t bytes_max;     /* outstanding bytes at most */
  mt_prefetch_task* task; /* [task_cap]: a task is named by its index */
  int32_t task_cap;
  int32_t* live;  /* [n_layer * n_expert]: the key's live task, -1 none */
  int32_t* queue; /* [queue_cap]: the queued tasks, oldest first */
  int32_t queue_cap, queue_n;
  uint64_t generation, outstanding_bytes, inflight_bytes;
  mt_prefetch_tallies* total;    /* NULL: not kept */
  mt_prefetch_tallies* by_layer; /* [n_layer], NULL: not kept */
} mt_prefetch_ledger;

/* Empties the ledger (its arrays and limits set by the caller): no task, no tallies, generation 0. */
void mt_prefetch_ledger_reset(mt_prefetch_ledger* l);
/* Tasks landed and neither routed nor evicted yet. */
int32_t mt_prefetch_ledger_landed_unrouted(const mt_prefetch_ledger* l);

/* Queues a read of (layer, expert) into table entry `task`, stamped with `generation`: the refusals
 * first, then MT_PF_WRONG_STATE unless the entry is free (never used, or ended and no key's live
 * task) and the queue's table has room. The replay's handle takes a new entry each time (a task's id
 * is its entry + 1); the tier takes the key's own (at most one task of a key is unended there). */
int32_t mt_prefetch_admit(mt_prefetch_ledger* l, int32_t task, int32_t layer, int32_t expert, uint64_t bytes,
                          uint64_t generation, double at_ms);
/* A new generation: queued tasks of older ones are cancelled; returns how many. */
int32_t mt_prefetch_begin(mt_prefetch_ledger* l, uint64_t generation, double at_ms);
int32_t mt_prefetch_issue(mt_prefetch_ledger* l, int32_t task, double at_ms);
int32_t mt_prefetch_cancel(mt_prefetch_ledger* l, int32_t task, double at_ms);
int32_t mt_prefetch_drop(mt_prefetch_ledger* l, int32_t task, double at_ms);
int32_t mt_prefetch_complete(mt_prefetch_ledger* l, int32_t task, double at_ms);
int32_t mt_prefetch_fail(mt_prefetch_ledger* l, int32_t task, double at_ms);
/* (layer, expert) is routed now; resident: it holds a slot by other means; read: mt_prefetch_read. */
int32_t mt_prefetch_route(mt_prefetch_ledger* l, int32_t layer, int32_t expert, uint64_t bytes, int32_t resident,
                          int32_t read, double at_ms);
/* (layer, expert) left its slot. */
int32_t mt_prefetch_evict(mt_prefetch_ledger* l, int32_t layer, int32_t expert, double at_ms);

#ifdef __cplusplus
}
#endif
#endif
