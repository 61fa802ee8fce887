// The policies' pure verbs for `moetier replay`: the replay runs the code the tier runs.
//
// The eviction policy (include/mt_policy.h), over rows the replay owns (src/tiers/policies/dlfu.ts):
//   dlfuAdd(count, stamp, adds, now, halfLife)     adds[e] > 0: count[e] decayed to now, plus adds[e]
//   dlfuVictim(count, stamp, eligible, halfLife)   the eligible expert of lowest score, -1: none
//   dlfuScore(count, stamp, expert, halfLife)      one expert's score
// count and stamp: Float64Array [nExpert] (one layer); adds: Float64Array, eligible: Uint8Array of the same length.
//
// The prefetch queue and its ledger (include/mt_prefetch_ledger.h), a handle owning one ledger's
// state and tables, grown as it admits (src/tiers/prefetch-ledger.ts):
//   prefetchLedgerCreate(layers, experts, queueLengthMax, inflightBytesMax)   the handle
//   prefetchLedgerEvent(ledger, event, atMs, ...args)                          one event's outcome
//   prefetchLedgerRead(ledger, what, ...args)                                  tallies, a task, the queue
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "errors.h"
#include "mt_policy.h"
#include "mt_prefetch_ledger.h"
#include "registry.h"
#include "typed_arg.h"

namespace {

struct Rows {
  double* count = nullptr;
  double* stamp = nullptr;
  size_t n = 0;
};

// info[0], info[1] as one layer's rows and info[hl] as the half-life; false with a RangeError pending.
bool ReadRows(const Napi::CallbackInfo& info, const char* verb, size_t hl, Rows* rows, double* half_life) {
  size_t n_stamp = 0;
  if (!TypedArg(info[0], napi_float64_array, &rows->count, &rows->n) ||
      !TypedArg(info[1], napi_float64_array, &rows->stamp, &n_stamp) || n_stamp != rows->n || rows->n == 0 ||
      rows->n > size_t(INT32_MAX)) {
    mtjs::ThrowRangeError(info.Env(),
                          std::string(verb) + ": count, stamp: expected two Float64Arrays of one layer's experts");
    return false;
  }
  *half_life = hl < info.Length() && info[hl].IsNumber() ? info[hl].As<Napi::Number>().DoubleValue() : NAN;
  if (!(*half_life >= 1 && *half_life <= MT_DLFU_HALF_LIFE_MAX)) {
    mtjs::ThrowRangeError(info.Env(), std::string(verb) + ": halfLife: expected a number of tokens in [1, " +
                                          std::to_string(int64_t(MT_DLFU_HALF_LIFE_MAX)) + "]");
    return false;
  }
  return true;
}

Napi::Value DlfuAdd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Rows r;
  double half_life = 0, *adds = nullptr;
  size_t n = 0;
  if (!ReadRows(info, "dlfuAdd", 4, &r, &half_life)) return env.Undefined();
  if (!TypedArg(info[2], napi_float64_array, &adds, &n) || n != r.n)
    return mtjs::ThrowRangeError(env, "dlfuAdd: adds: expected a Float64Array as long as count");
  const double now = info[3].IsNumber() ? info[3].As<Napi::Number>().DoubleValue() : NAN;
  if (!std::isfinite(now)) return mtjs::ThrowRangeError(env, "dlfuAdd: now: expected a finite number of tokens");
  for (size_t e = 0; e < n; e++)
    if (adds[e] > 0) mt_dlfu_add(r.count, r.stamp, int32_t(e), adds[e], now, half_life);
  return env.Undefined();
}

Napi::Value DlfuVictim(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Rows r;
  double half_life = 0;
  uint8_t* eligible = nullptr;
  size_t n = 0;
  if (!ReadRows(info, "dlfuVictim", 3, &r, &half_life)) return env.Undefined();
  if (!TypedArg(info[2], napi_uint8_array, &eligible, &n) || n != r.n)
    return mtjs::ThrowRangeError(env, "dlfuVictim: eligible: expected a Uint8Array as long as count");
  return Napi::Number::New(env, mt_dlfu_victim(r.count, r.stamp, eligible, int32_t(n), half_life));
}

Napi::Value DlfuScore(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Rows r;
  double half_life = 0;
  if (!ReadRows(info, "dlfuScore", 3, &r, &half_life)) return env.Undefined();
  const double e = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : NAN;
  if (!(e >= 0 && e < double(r.n) && e == std::floor(e)))
    return mtjs::ThrowRangeError(env, "dlfuScore: expert: expected an index into count");
  return Napi::Number::New(env, mt_dlfu_score(r.count, r.stamp, int32_t(e), half_life));
}

// One ledger and its tables. A task takes a new entry each time (its id is entry + 1), so a task's
// state stays readable after it ended; the tables grow before an admit that needs room.
struct Ledger {
  mt_prefetch_ledger l{};
  std::vector<mt_prefetch_task> tasks;
  std::vector<int32_t> live, queue;
  std::vector<mt_prefetch_tallies> by_layer;
  mt_prefetch_tallies total{};
  int32_t used = 0;

  // Room for one more task and one more queued (up to the queue's limit); the tables may move.
  bool Grow() {
    if (size_t(used) == tasks.size()) {
      if (tasks.size() >= size_t(INT32_MAX / 2)) return false;
      tasks.resize(tasks.size() * 2);
    }
    if (l.queue_n == l.queue_cap && l.queue_cap < l.queue_max)
      queue.resize(size_t(std::min<int64_t>(int64_t(l.queue_max), int64_t(queue.size()) * 2)));
    l.task = tasks.data(), l.task_cap = int32_t(tasks.size());
    l.queue = queue.data(), l.queue_cap = int32_t(queue.size());
    return true;
  }
};

constexpr napi_type_tag kLedgerTag = {0x6d6f6574696572ULL, 0x50464c4544474552ULL};

Ledger* UnwrapLedger(const Napi::CallbackInfo& info, const char* verb) {
  Napi::Value v = info[0];
  if (!v.IsExternal() || !v.As<Napi::External<Ledger>>().CheckTypeTag(&kLedgerTag)) {
    mtjs::ThrowTypeError(info.Env(), std::string(verb) + ": expected a prefetch ledger handle");
    return nullptr;
  }
  return v.As<Napi::External<Ledger>>().Data();
}

// info[i] as an integer in [lo, hi]; NaN (and a RangeError pending) otherwise.
double IntArg(const Napi::CallbackInfo& info, size_t i, double lo, double hi, const char* what) {
  const double v = i < info.Length() && info[i].IsNumber() ? info[i].As<Napi::Number>().DoubleValue() : NAN;
  if (v >= lo && v <= hi && v == std::floor(v)) return v;
  mtjs::ThrowRangeError(info.Env(), std::string("prefetchLedger: ") + what + ": expected an integer in [" +
                                        std::to_string(int64_t(lo)) + ", " + std::to_string(int64_t(hi)) + "]");
  return NAN;
}

constexpr double kSafeIntegerMax = 9007199254740991.0;

Napi::Value PrefetchLedgerCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double layers = IntArg(info, 0, 1, 65536, "layers");
  if (std::isnan(layers)) return env.Undefined();
  const double experts = IntArg(info, 1, 1, 65536, "experts");
  if (std::isnan(experts)) return env.Undefined();
  const double queue_max = IntArg(info, 2, 1, INT32_MAX, "queueLengthMax");
  if (std::isnan(queue_max)) return env.Undefined();
  const double bytes_max = IntArg(info, 3, 1, kSafeIntegerMax, "inflightBytesMax");
  if (std::isnan(bytes_max)) return env.Undefined();
  if (layers * experts > double(1 << 24))
    return mtjs::ThrowRangeError(env, "prefetchLedgerCreate: layers x experts: expected at most 2^24");
  auto* h = new Ledger();
  h->tasks.resize(64), h->queue.resize(size_t(std::min(queue_max, 64.0)));
  h->live.resize(size_t(layers * experts)), h->by_layer.resize(size_t(layers));
  mt_prefetch_ledger& l = h->l;
  l.n_layer = int32_t(layers), l.n_expert = int32_t(experts), l.queue_max = int32_t(queue_max),
  l.bytes_max = uint64_t(bytes_max);
  l.task = h->tasks.data(), l.task_cap = int32_t(h->tasks.size()), l.live = h->live.data();
  l.queue = h->queue.data(), l.queue_cap = int32_t(h->queue.size());
  l.total = &h->total, l.by_layer = h->by_layer.data();
  mt_prefetch_ledger_reset(&l);
  auto handle = Napi::External<Ledger>::New(env, h, [](Napi::Env, Ledger* p) { delete p; });
  handle.TypeTag(&kLedgerTag);
  return handle;
}

const char* OutcomeName(int32_t outcome) {
  switch (outcome) {
    case MT_PF_WRONG_STATE:
      return "wrong-state";
    case MT_PF_REFUSED_DUPLICATE:
      return "refusedDuplicate";
    case MT_PF_REFUSED_QUEUE_FULL:
      return "refusedQueueFull";
    case MT_PF_REFUSED_BYTES_FULL:
      return "refusedBytesFull";
    case MT_PF_LANDED:
      return "landed";
    case MT_PF_COVERED:
      return "covered";
    case MT_PF_LATE:
      return "late";
    case MT_PF_AWAITING:
      return "awaiting";
    case MT_PF_UNCOVERED:
      return "uncovered";
    case MT_PF_RESIDENT:
      return "resident";
    case MT_PF_WASTED:
      return "wasted";
    case MT_PF_NONE:
      return "none";
    default:
      return "";
  }
}

// event, atMs, then the event's arguments from info[3].
Napi::Value PrefetchLedgerEvent(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Ledger* h = UnwrapLedger(info, "prefetchLedgerEvent");
  if (h == nullptr) return env.Undefined();
  mt_prefetch_ledger& l = h->l;
  const std::string event = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  const double at = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : NAN;
  if (!std::isfinite(at)) return mtjs::ThrowRangeError(env, "prefetchLedgerEvent: atMs: expected a finite time");
  if (event == "begin") {
    const double g = IntArg(info, 3, 0, kSafeIntegerMax, "generation");
    return std::isnan(g) ? env.Undefined() : Napi::Number::New(env, mt_prefetch_begin(&l, uint64_t(g), at));
  }
  if (event == "issue" || event == "complete" || event == "fail" || event == "cancel" || event == "drop") {
    const double id = IntArg(info, 3, 1, INT32_MAX, "id");
    if (std::isnan(id)) return env.Undefined();
    int32_t (*fn)(mt_prefetch_ledger*, int32_t, double) = event == "issue"      ? mt_prefetch_issue
                                                          : event == "complete" ? mt_prefetch_complete
                                                          : event == "fail"     ? mt_prefetch_fail
                                                          : event == "cancel"   ? mt_prefetch_cancel
                                                                                : mt_prefetch_drop;
    const int32_t outcome = id <= h->used ? fn(&l, int32_t(id) - 1, at) : MT_PF_WRONG_STATE;
    return Napi::String::New(env, outcome == MT_PF_WRONG_STATE ? "wrong-state" : "");
  }
  if (event != "admit" && event != "route" && event != "evict")
    return mtjs::ThrowRangeError(
        env, "prefetchLedgerEvent: event: expected admit, begin, issue, complete, fail, cancel, drop, route or evict");
  const double layer = IntArg(info, 3, 0, l.n_layer - 1, "layer");
  if (std::isnan(layer)) return env.Undefined();
  const double expert = IntArg(info, 4, 0, l.n_expert - 1, "expert");
  if (std::isnan(expert)) return env.Undefined();
  if (event == "evict")
    return Napi::String::New(env, OutcomeName(mt_prefetch_evict(&l, int32_t(layer), int32_t(expert), at)));
  const double bytes = IntArg(info, 5, event == "admit" ? 1 : 0, kSafeIntegerMax, "bytes");
  if (std::isnan(bytes)) return env.Undefined();
  if (event == "route") {
    const bool resident = info.Length() > 6 && info[6].ToBoolean().Value();
    return Napi::String::New(env, OutcomeName(mt_prefetch_route(&l, int32_t(layer), int32_t(expert), uint64_t(bytes),
                                                                resident, MT_PF_READ_UNKNOWN, at)));
  }
  if (!h->Grow()) return mtjs::ThrowRangeError(env, "prefetchLedgerEvent: admit: the ledger holds 2^30 tasks already");
  const int32_t outcome =
      mt_prefetch_admit(&l, h->used, int32_t(layer), int32_t(expert), uint64_t(bytes), l.generation, at);
  if (outcome != MT_PF_OK) return Napi::String::New(env, OutcomeName(outcome));
  return Napi::Number::New(env, ++h->used);  // the id: entry + 1
}

Napi::Value PrefetchLedgerRead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Ledger* h = UnwrapLedger(info, "prefetchLedgerRead");
  if (h == nullptr) return env.Undefined();
  const mt_prefetch_ledger& l = h->l;
  const std::string what = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  std::vector<double> out;
  if (what == "tallies") {
    const double layer = IntArg(info, 2, -1, l.n_layer - 1, "layer");
    if (std::isnan(layer)) return env.Undefined();
    const mt_prefetch_tallies& t = layer < 0 ? h->total : h->by_layer[size_t(layer)];
    for (int i = 0; i < MT_PF_TALLIES; i++) out.push_back(double(t.count[i])), out.push_back(double(t.bytes[i]));
    out.push_back(t.late_ms);
  } else if (what == "task") {
    const double id = IntArg(info, 2, 0, INT32_MAX, "id");
    if (std::isnan(id)) return env.Undefined();
    if (id >= 1 && id <= h->used) {
      const mt_prefetch_task& t = l.task[int32_t(id) - 1];
      out = {double(t.layer), double(t.expert), double(t.bytes), double(t.generation),
             t.admitted_ms,   double(t.state),  double(t.flags)};
    }
  } else if (what == "queue") {
    for (int32_t i = 0; i < l.queue_n; i++) out.push_back(double(l.queue[i] + 1));
  } else if (what == "live") {
    const double layer = IntArg(info, 2, 0, l.n_layer - 1, "layer");
    if (std::isnan(layer)) return env.Undefined();
    const double expert = IntArg(info, 3, 0, l.n_expert - 1, "expert");
    if (std::isnan(expert)) return env.Undefined();
    const int32_t task = l.live[size_t(layer) * size_t(l.n_expert) + size_t(expert)];
    if (task >= 0) out.push_back(double(task + 1));
  } else if (what == "state") {
    out = {double(l.generation), double(l.queue_n), double(l.inflight_bytes), double(l.outstanding_bytes),
           double(mt_prefetch_ledger_landed_unrouted(&l))};
  } else {
    return mtjs::ThrowRangeError(env, "prefetchLedgerRead: what: expected tallies, task, queue, live or state");
  }
  Napi::Float64Array a = Napi::Float64Array::New(env, out.size());
  for (size_t i = 0; i < out.size(); i++) a[i] = out[i];
  return a;
}

}  // namespace

void RegisterPolicy(Napi::Env env, Napi::Object exports) {
  exports.Set("dlfuAdd", Napi::Function::New(env, DlfuAdd));
  exports.Set("dlfuVictim", Napi::Function::New(env, DlfuVictim));
  exports.Set("dlfuScore", Napi::Function::New(env, DlfuScore));
  exports.Set("prefetchLedgerCreate", Napi::Function::New(env, PrefetchLedgerCreate));
  exports.Set("prefetchLedgerEvent", Napi::Function::New(env, PrefetchLedgerEvent));
  exports.Set("prefetchLedgerRead", Napi::Function::New(env, PrefetchLedgerRead));
}
