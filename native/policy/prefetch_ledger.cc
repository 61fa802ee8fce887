// The prefetch queue and its ledger (include/mt_prefetch_ledger.h): the tier's prefetch and the
// replay's. Every function checks the state it needs and changes nothing when it is not there.
#include <cstring>
#include <initializer_list>
#include "mt_prefetch_ledger.h"

namespace {

size_t key_of(const mt_prefetch_ledger* l, int32_t layer, int32_t expert) {
  return size_t(layer) * size_t(l->n_expert) + size_t(expert);
}

void tally(mt_prefetch_ledger* l, int name, int32_t layer, uint64_t bytes) {
  for (mt_prefetch_tallies* t : {l->total, l->by_layer != nullptr ? l->by_layer + layer : nullptr}) {
    if (t == nullptr) continue;
    t->count[name]++;
    t->bytes[name] += bytes;
  }
}

void tally_task(mt_prefetch_ledger* l, int name, const mt_prefetch_task& t) { tally(l, name, t.layer, t.bytes); }

// Only its own entry: an evicted task's key may hold a newer task by now.
void unlive(mt_prefetch_ledger* l, int32_t task) {
  const mt_prefetch_task& t = l->task[task];
  int32_t& live = l->live[key_of(l, t.layer, t.expert)];
  if (live == task) live = -1;
}

bool has(const mt_prefetch_ledger* l, int32_t task, int32_t state) {
  return task >= 0 && task < l->task_cap && l->task[task].state == state;
}

void unqueue(mt_prefetch_ledger* l, int32_t task) {
  for (int32_t i = 0; i < l->queue_n; i++) {
    if (l->queue[i] != task) continue;
    std::memmove(l->queue + i, l->queue + i + 1, sizeof(int32_t) * size_t(l->queue_n - i - 1));
    l->queue_n--;
    return;
  }
}

// The one place a task's bytes leave the outstanding count.
void end(mt_prefetch_ledger* l, int32_t task, int32_t state) {
  mt_prefetch_task& t = l->task[task];
  t.state = state;
  l->outstanding_bytes -= t.bytes;
  static const int kTally[] = {0, 0, 0, MT_PF_COMPLETED, MT_PF_FAILED, MT_PF_CANCELLED, MT_PF_DROPPED};
  tally_task(l, kTally[state], t);
  tally_task(l, MT_PF_RETIRED, t);
  if (state == MT_PF_TASK_CANCELLED || state == MT_PF_TASK_DROPPED) unlive(l, task);
}

int32_t unqueue_end(mt_prefetch_ledger* l, int32_t task, int32_t state) {
  if (!has(l, task, MT_PF_TASK_QUEUED)) return MT_PF_WRONG_STATE;
  unqueue(l, task);
  end(l, task, state);
  return MT_PF_OK;
}

}  // namespace

extern "C" void mt_prefetch_ledger_reset(mt_prefetch_ledger* l) {
  for (int32_t i = 0; i < l->task_cap; i++) l->task[i] = mt_prefetch_task{};
  for (size_t k = 0; k < size_t(l->n_layer) * size_t(l->n_expert); k++) l->live[k] = -1;
  l->queue_n = 0;
  l->generation = l->outstanding_bytes = l->inflight_bytes = 0;
  if (l->total != nullptr) *l->total = mt_prefetch_tallies{};
  for (int32_t i = 0; l->by_layer != nullptr && i < l->n_layer; i++) l->by_layer[i] = mt_prefetch_tallies{};
}

extern "C" int32_t mt_prefetch_ledger_landed_unrouted(const mt_prefetch_ledger* l) {
  int32_t n = 0;
  for (size_t k = 0; k < size_t(l->n_layer) * size_t(l->n_expert); k++)
    n += l->live[k] >= 0 && l->task[l->live[k]].state == MT_PF_TASK_COMPLETED;
  return n;
}

extern "C" int32_t mt_prefetch_admit(mt_prefetch_ledger* l, int32_t task, int32_t layer, int32_t expert, uint64_t bytes,
                                     uint64_t generation, double at_ms) {
  int32_t& live = l->live[key_of(l, layer, expert)];
  int32_t refused = live >= 0                                     ? MT_PF_REFUSED_DUPLICATE
                    : l->queue_n >= l->queue_max                  ? MT_PF_REFUSED_QUEUE_FULL
                    : l->outstanding_bytes + bytes > l->bytes_max ? MT_PF_REFUSED_BYTES_FULL
                                                                  : MT_PF_OK;
  if (refused != MT_PF_OK) {
    static const int kTally[] = {0, MT_PF_T_REFUSED_DUPLICATE, MT_PF_T_REFUSED_QUEUE_FULL, MT_PF_T_REFUSED_BYTES_FULL};
    tally(l, kTally[refused], layer, bytes);
    return refused;
  }
  // The entry must be free: never used, or ended and no key's live task (a landed one may still be).
  if (task < 0 || task >= l->task_cap || l->queue_n >= l->queue_cap) return MT_PF_WRONG_STATE;
  const mt_prefetch_task& old = l->task[task];
  if (old.state != MT_PF_TASK_FREE &&
      (old.state < MT_PF_TASK_COMPLETED || l->live[key_of(l, old.layer, old.expert)] == task))
    return MT_PF_WRONG_STATE;
  l->task[task] = mt_prefetch_task{layer, expert, bytes, generation, at_ms, 0, MT_PF_TASK_QUEUED, 0};
  live = task;
  l->queue[l->queue_n++] = task;
  l->outstanding_bytes += bytes;
  tally(l, MT_PF_ADMITTED, layer, bytes);
  return MT_PF_OK;
}

extern "C" int32_t mt_prefetch_begin(mt_prefetch_ledger* l, uint64_t generation, double) {
  l->generation = generation;
  int32_t cancelled = 0;
  for (int32_t i = 0; i < l->queue_n;) {
    const int32_t task = l->queue[i];
    if (l->task[task].generation >= generation) {
      i++;
      continue;
    }
    unqueue_end(l, task, MT_PF_TASK_CANCELLED);  // the entries behind it move up to i
    cancelled++;
  }
  return cancelled;
}

extern "C" int32_t mt_prefetch_issue(mt_prefetch_ledger* l, int32_t task, double) {
  if (!has(l, task, MT_PF_TASK_QUEUED)) return MT_PF_WRONG_STATE;
  unqueue(l, task);
  mt_prefetch_task& t = l->task[task];
  t.state = MT_PF_TASK_ISSUED;
  l->inflight_bytes += t.bytes;
  tally_task(l, MT_PF_ISSUED, t);
  return MT_PF_OK;
}

extern "C" int32_t mt_prefetch_cancel(mt_prefetch_ledger* l, int32_t task, double) {
  return unqueue_end(l, task, MT_PF_TASK_CANCELLED);
}

extern "C" int32_t mt_prefetch_drop(mt_prefetch_ledger* l, int32_t task, double) {
  return unqueue_end(l, task, MT_PF_TASK_DROPPED);
}

extern "C" int32_t mt_prefetch_complete(mt_prefetch_ledger* l, int32_t task, double at_ms) {
  if (!has(l, task, MT_PF_TASK_ISSUED)) return MT_PF_WRONG_STATE;
  mt_prefetch_task& t = l->task[task];
  l->inflight_bytes -= t.bytes;
  end(l, task, MT_PF_TASK_COMPLETED);
  if (t.flags & MT_PF_TASK_EVICTED) {
    tally_task(l, MT_PF_T_WASTED, t);
    return MT_PF_WASTED;
  }
  if (t.flags & MT_PF_TASK_AWAITED) {
    tally_task(l, MT_PF_T_LATE, t);
    for (mt_prefetch_tallies* x : {l->total, l->by_layer != nullptr ? l->by_layer + t.layer : nullptr})
      if (x != nullptr) x->late_ms += at_ms - t.awaited_ms;
    unlive(l, task);
    return MT_PF_LATE;
  }
  // Landed: live until routed (covered) or evicted (wasted), unless a route already took it.
  return l->live[key_of(l, t.layer, t.expert)] == task ? MT_PF_LANDED : MT_PF_OK;
}

extern "C" int32_t mt_prefetch_fail(mt_prefetch_ledger* l, int32_t task, double) {
  if (!has(l, task, MT_PF_TASK_ISSUED)) return MT_PF_WRONG_STATE;
  mt_prefetch_task& t = l->task[task];
  l->inflight_bytes -= t.bytes;
  end(l, task, MT_PF_TASK_FAILED);
  unlive(l, task);
  // A route that waited on it now needs a demand read of its own.
  if ((t.flags & MT_PF_TASK_AWAITED) && !(t.flags & MT_PF_TASK_EVICTED)) {
    tally_task(l, MT_PF_T_UNCOVERED, t);
    return MT_PF_UNCOVERED;
  }
  return MT_PF_OK;
}

extern "C" int32_t mt_prefetch_route(mt_prefetch_ledger* l, int32_t layer, int32_t expert, uint64_t bytes,
                                     int32_t resident, int32_t read, double at_ms) {
  int32_t& live = l->live[key_of(l, layer, expert)];
  const int32_t task = live;
  tally(l, MT_PF_ROUTED, layer, bytes);
  if (task >= 0 && l->task[task].state == MT_PF_TASK_QUEUED) unqueue_end(l, task, MT_PF_TASK_CANCELLED);
  const int32_t state = task >= 0 ? l->task[task].state : MT_PF_TASK_FREE;
  mt_prefetch_task* t = task >= 0 ? &l->task[task] : nullptr;
  if (state == MT_PF_TASK_COMPLETED || (state == MT_PF_TASK_ISSUED && read == MT_PF_READ_LANDED)) {
    live = -1;
    tally_task(l, MT_PF_T_COVERED, *t);
    return MT_PF_COVERED;
  }
  if (state == MT_PF_TASK_ISSUED && read == MT_PF_READ_PENDING) {
    live = -1;
    tally_task(l, MT_PF_T_LATE, *t);
    return MT_PF_LATE;
  }
  const bool issued = state == MT_PF_TASK_ISSUED;
  if (issued && !(t->flags & MT_PF_TASK_AWAITED)) {
    t->flags |= MT_PF_TASK_AWAITED;
    t->awaited_ms = at_ms;
    return MT_PF_AWAITING;
  }
  // A second route of a read already awaited costs no read of its own: resident, as it lands.
  tally(l, resident || issued ? MT_PF_T_RESIDENT : MT_PF_T_UNCOVERED, layer, bytes);
  return issued ? MT_PF_AWAITING : resident ? MT_PF_RESIDENT : MT_PF_UNCOVERED;
}

extern "C" int32_t mt_prefetch_evict(mt_prefetch_ledger* l, int32_t layer, int32_t expert, double) {
  int32_t& live = l->live[key_of(l, layer, expert)];
  if (live < 0 || l->task[live].state == MT_PF_TASK_QUEUED) return MT_PF_NONE;  // a queued read holds no slot yet
  mt_prefetch_task& t = l->task[live];
  live = -1;
  if (t.state == MT_PF_TASK_COMPLETED) {
    tally_task(l, MT_PF_T_WASTED, t);
    return MT_PF_WASTED;
  }
  t.flags |= MT_PF_TASK_EVICTED;  // wasted as it lands
  if (t.flags & MT_PF_TASK_AWAITED) {
    tally_task(l, MT_PF_T_UNCOVERED, t);
    return MT_PF_UNCOVERED;
  }
  return MT_PF_OK;
}
