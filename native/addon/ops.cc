// Kernel verbs for tests and benchmarks: ISA control, matvec / matmul / dequantRow on
// caller-owned typed arrays, a thread pool handle, and a read-bandwidth probe.
// Every argument is checked here; bad input becomes a thrown TypeError / RangeError
// (code MT_BAD_ARGUMENT, errors.h) that names the verb, the argument and what was expected.
// The kernels assume valid input.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include <unistd.h>
#include "mt_pool.h"
#include "errors.h"
#include "mt_backend.h"
#include "mt_forward.h"
#include "mt_io.h"
#include "mt_tier.h"
#include "registry.h"

namespace {

void Throw(Napi::Env env, bool range, const std::string& msg) {
  if (range)
    mtjs::ThrowRangeError(env, msg);
  else
    mtjs::ThrowTypeError(env, msg);
}

// An integer argument in [lo, hi].
bool ArgInt(const Napi::CallbackInfo& info, size_t i, const char* verb, const char* name, int64_t lo, int64_t hi,
            int64_t* out) {
  Napi::Env env = info.Env();
  if (i >= info.Length() || !info[i].IsNumber()) {
    Throw(env, false, std::string(verb) + ": " + name + ": expected a number");
    return false;
  }
  double v = info[i].As<Napi::Number>().DoubleValue();
  if (!(v >= (double)lo && v <= (double)hi) || v != (double)(int64_t)v) {
    Throw(env, true,
          std::string(verb) + ": " + name + ": expected an integer in [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "], got " + std::to_string(v));
    return false;
  }
  *out = (int64_t)v;
  return true;
}

// A typed array of the wanted kind with exactly `want` elements. napi_get_typedarray_info
// returns the data pointer already offset, and works for SharedArrayBuffer-backed arrays.
bool ArgArray(const Napi::CallbackInfo& info, size_t i, const char* verb, const char* name, napi_typedarray_type kind,
              size_t want, void** data) {
  Napi::Env env = info.Env();
  const char* kind_name = kind == napi_uint8_array ? "Uint8Array" : "Float32Array";
  bool is_typed = false;
  if (i < info.Length()) napi_is_typedarray(env, info[i], &is_typed);
  napi_typedarray_type got_kind;
  size_t length = 0;
  if (!is_typed || napi_get_typedarray_info(env, info[i], &got_kind, &length, data, nullptr, nullptr) != napi_ok ||
      got_kind != kind) {
    Throw(env, false, std::string(verb) + ": " + name + ": expected a " + kind_name);
    return false;
  }
  if (length != want) {
    Throw(env, true,
          std::string(verb) + ": " + name + ": expected " + std::to_string(want) + " elements, got " +
              std::to_string(length));
    return false;
  }
  return true;
}

// A supported weight type and a column count that is a whole number of its blocks.
bool ArgTypeCols(const Napi::CallbackInfo& info, const char* verb, int64_t type, int64_t cols) {
  if (!mt_type_supported((int)type)) {
    Throw(info.Env(), true,
          std::string(verb) +
              ": typeId: expected one of 0 (F32), 1 (F16), 2 (Q4_0), 6 (Q5_0), 7 (Q5_1), 8 (Q8_0), 10..14 "
              "(Q2_K..Q6_K), 20 (IQ4_NL), 23 (IQ4_XS), 30 (BF16), 39 (MXFP4), got " +
              std::to_string(type));
    return false;
  }
  if (mt_row_bytes((int)type, cols) == 0) {
    const char* unit = (type >= MT_Q2_K && type <= MT_Q6_K) || type == MT_IQ4_XS ? "256 for a k-quant type or IQ4_XS"
                                                                                 : "32 for a quantised type";
    Throw(info.Env(), true,
          std::string(verb) + ": cols: expected a multiple of " + unit + ", got " + std::to_string(cols));
    return false;
  }
  return true;
}

// rows, n <= 2^31 and cols <= 2^28 keep rows * rowBytes, n * cols and n * rows far below 2^63.
constexpr int64_t kDimMax = int64_t(1) << 31;
constexpr int64_t kColsMax = int64_t(1) << 28;

Napi::Value IsaBest(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), mt_isa_best()); }
Napi::Value IsaActive(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), mt_isa_active()); }
Napi::Value IsaDetected(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), mt_isa_detected()); }

Napi::Value IsaVerify(const Napi::CallbackInfo& info) {
  int64_t isa;
  if (!ArgInt(info, 0, "isaVerify", "isa", 0, 2, &isa)) return info.Env().Undefined();
  bool inject = info.Length() > 1 && info[1].ToBoolean().Value();
  return Napi::Number::New(info.Env(), mt_isa_verify((int)isa, inject ? 1 : 0));
}

Napi::Value IsaSet(const Napi::CallbackInfo& info) {
  int64_t isa;
  if (!ArgInt(info, 0, "isaSet", "isa", 0, 2, &isa)) return info.Env().Undefined();
  return Napi::Boolean::New(info.Env(), mt_isa_set((int)isa) == 0);
}

Napi::Value IsaName(const Napi::CallbackInfo& info) {
  int64_t isa;
  if (!ArgInt(info, 0, "isaName", "isa", 0, 2, &isa)) return info.Env().Undefined();
  return Napi::String::New(info.Env(), mt_isa_name((int)isa));
}

// The operands of matvec / matmul once checked: W [rows, cols], X [n, cols], Y [n, rows].
struct MatArgs {
  int type;
  int64_t rows, cols, n;
  const void* w;
  const float* x;
  float* y;
};

// (typeId, weights, rows, cols, x, [n,] y) starting at argument `first`.
bool ReadMatArgs(const Napi::CallbackInfo& info, const char* verb, size_t first, bool has_n, MatArgs* m) {
  int64_t type;
  size_t a = first;
  if (!ArgInt(info, a, verb, "typeId", 0, 1000, &type) || !ArgInt(info, a + 2, verb, "rows", 1, kDimMax, &m->rows) ||
      !ArgInt(info, a + 3, verb, "cols", 1, kColsMax, &m->cols) || !ArgTypeCols(info, verb, type, m->cols))
    return false;
  m->type = (int)type;
  m->n = 1;
  if (has_n && !ArgInt(info, a + 5, verb, "n", 1, kDimMax, &m->n)) return false;
  void *w, *x, *y;
  size_t y_arg = a + (has_n ? 6 : 5);
  if (!ArgArray(info, a + 1, verb, "weights", napi_uint8_array, m->rows * mt_row_bytes(m->type, m->cols), &w) ||
      !ArgArray(info, a + 4, verb, "x", napi_float32_array, m->n * m->cols, &x) ||
      !ArgArray(info, y_arg, verb, "y", napi_float32_array, m->n * m->rows, &y))
    return false;
  m->w = w;
  m->x = (const float*)x;
  m->y = (float*)y;
  return true;
}

// The prepared activation rows; null (and a thrown Error) if they do not fit in memory.
std::unique_ptr<uint8_t[]> PrepareActs(const Napi::CallbackInfo& info, const MatArgs& m) {
  size_t act_bytes = mt_act_row_bytes(m.type, m.cols);
  std::unique_ptr<uint8_t[]> acts(new (std::nothrow) uint8_t[act_bytes * m.n]);
  if (!acts) {
    mtjs::ThrowError(info.Env(), mtjs::kNoMemory,
                     "cannot allocate " + std::to_string(act_bytes * m.n) + " bytes of activations");
    return acts;
  }
  for (int64_t i = 0; i < m.n; i++) mt_act_prepare(m.type, m.x + i * m.cols, m.cols, acts.get() + i * act_bytes);
  return acts;
}

Napi::Value Matvec(const Napi::CallbackInfo& info) {
  MatArgs m;
  if (!ReadMatArgs(info, "matvec", 0, false, &m)) return info.Env().Undefined();
  auto act = PrepareActs(info, m);
  if (act) mt_matvec_rows(m.type, m.w, m.cols, act.get(), m.y, 0, m.rows);
  return info.Env().Undefined();
}

Napi::Value Matmul(const Napi::CallbackInfo& info) {
  MatArgs m;
  if (!ReadMatArgs(info, "matmul", 0, true, &m)) return info.Env().Undefined();
  auto acts = PrepareActs(info, m);
  if (acts) mt_matmul_rows(m.type, m.w, m.cols, acts.get(), m.n, m.y, m.rows, 0, m.rows);
  return info.Env().Undefined();
}

Napi::Value DequantRow(const Napi::CallbackInfo& info) {
  int64_t type, cols;
  void *row, *out;
  if (!ArgInt(info, 0, "dequantRow", "typeId", 0, 1000, &type) ||
      !ArgInt(info, 2, "dequantRow", "cols", 1, kColsMax, &cols) || !ArgTypeCols(info, "dequantRow", type, cols) ||
      !ArgArray(info, 1, "dequantRow", "row", napi_uint8_array, mt_row_bytes((int)type, cols), &row) ||
      !ArgArray(info, 3, "dequantRow", "out", napi_float32_array, (size_t)cols, &out))
    return info.Env().Undefined();
  mt_dequant_row((int)type, row, cols, (float*)out);
  return info.Env().Undefined();
}

// A pool handle: External<PoolBox>; freePool destroys it, the finalizer covers a forgotten one.
struct PoolBox {
  mt_pool* pool;
};

// The pool handle's type tag: another handle (a backend, a tier, a mapped file) is refused, not
// read as a pool.
constexpr napi_type_tag kPoolTag = {0x6d6f6574696572ULL, 0x504f4f4cULL};

mt_pool* ArgPool(const Napi::CallbackInfo& info, const char* verb) {
  if (info.Length() < 1 || !info[0].IsExternal() || !info[0].As<Napi::External<PoolBox>>().CheckTypeTag(&kPoolTag)) {
    Throw(info.Env(), false, std::string(verb) + ": pool: expected a pool handle from createPool");
    return nullptr;
  }
  PoolBox* box = info[0].As<Napi::External<PoolBox>>().Data();
  if (box->pool == nullptr)
    mtjs::Throw(info.Env(), mtjs::Kind::kTypeError, mtjs::kFreed, std::string(verb) + ": pool: already freed");
  return box->pool;
}

Napi::Value CreatePool(const Napi::CallbackInfo& info) {
  int64_t threads, spin_us = MT_POOL_SPIN_US_DEFAULT;
  if (!ArgInt(info, 0, "createPool", "threads", 1, MT_POOL_THREADS_MAX, &threads)) return info.Env().Undefined();
  if (info.Length() > 1 && !info[1].IsUndefined() && !ArgInt(info, 1, "createPool", "spinUs", 0, 1000000, &spin_us))
    return info.Env().Undefined();
  mt_pool* pool = mt_pool_create((int)threads);
  if (pool == nullptr) {
    return mtjs::ThrowError(info.Env(), mtjs::kNoThreads,
                            "createPool: could not start " + std::to_string(threads) + " threads");
  }
  mt_pool_set_spin_us(pool, (int)spin_us);
  auto handle = Napi::External<PoolBox>::New(info.Env(), new PoolBox{pool}, [](Napi::Env, PoolBox* box) {
    mt_pool_destroy(box->pool);
    delete box;
  });
  handle.TypeTag(&kPoolTag);
  return handle;
}

Napi::Value FreePool(const Napi::CallbackInfo& info) {
  mt_pool* pool = ArgPool(info, "freePool");
  if (pool == nullptr) return info.Env().Undefined();
  mt_pool_destroy(pool);
  info[0].As<Napi::External<PoolBox>>().Data()->pool = nullptr;
  return info.Env().Undefined();
}

Napi::Value PoolMatvec(const Napi::CallbackInfo& info) {
  MatArgs m;
  mt_pool* pool = ArgPool(info, "poolMatvec");
  if (pool == nullptr || !ReadMatArgs(info, "poolMatvec", 1, false, &m)) return info.Env().Undefined();
  auto act = PrepareActs(info, m);
  if (act) mt_pool_matvec(pool, m.type, m.w, m.rows, m.cols, act.get(), m.y);
  return info.Env().Undefined();
}

Napi::Value PoolMatmul(const Napi::CallbackInfo& info) {
  MatArgs m;
  mt_pool* pool = ArgPool(info, "poolMatmul");
  if (pool == nullptr || !ReadMatArgs(info, "poolMatmul", 1, true, &m)) return info.Env().Undefined();
  auto acts = PrepareActs(info, m);
  if (acts) mt_pool_matmul(pool, m.type, m.w, m.rows, m.cols, acts.get(), m.n, m.y);
  return info.Env().Undefined();
}

// poolCheck(pool, jobs, workerDelayUs = 0, forChunks = 0, callerGapUs = 0) -> { runsPerThread, threadsPerJob, nthOk,
//   stragglerJobs, chunkRuns, chunksOnWorkers } (see mt_pool_check)
Napi::Value PoolCheck(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t jobs, delay_us = 0, chunks = 0, gap_us = 0;
  mt_pool* pool = ArgPool(info, "poolCheck");
  if (pool == nullptr || !ArgInt(info, 1, "poolCheck", "jobs", 1, 1000000, &jobs)) return env.Undefined();
  if (info.Length() > 2 && !info[2].IsUndefined() &&
      !ArgInt(info, 2, "poolCheck", "workerDelayUs", 0, 100000, &delay_us))
    return env.Undefined();
  if (info.Length() > 3 && !info[3].IsUndefined() && !ArgInt(info, 3, "poolCheck", "forChunks", 0, 100000, &chunks))
    return env.Undefined();
  if (info.Length() > 4 && !info[4].IsUndefined() && !ArgInt(info, 4, "poolCheck", "callerGapUs", 0, 100000, &gap_us))
    return env.Undefined();
  int nth = mt_pool_threads(pool);
  std::vector<int64_t> per_thread(nth, 0), per_job(jobs, 0), per_chunk(chunks, 0);
  int64_t on_workers = 0;
  int rc = mt_pool_check(pool, jobs, (int)delay_us, per_thread.data(), per_job.data(), chunks, per_chunk.data(),
                         &on_workers, (int)gap_us);
  auto to_array = [&](const std::vector<int64_t>& v) {
    Napi::Array a = Napi::Array::New(env, v.size());
    for (size_t i = 0; i < v.size(); i++) a.Set((uint32_t)i, Napi::Number::New(env, (double)v[i]));
    return a;
  };
  Napi::Object out = Napi::Object::New(env);
  out.Set("runsPerThread", to_array(per_thread));
  out.Set("threadsPerJob", to_array(per_job));
  out.Set("nthOk", Napi::Boolean::New(env, rc == 0));
  out.Set("stragglerJobs", Napi::Number::New(env, (double)mt_pool_straggler_jobs(pool)));
  out.Set("chunkRuns", to_array(per_chunk));
  out.Set("chunksOnWorkers", Napi::Number::New(env, (double)on_workers));
  return out;
}

// poolForStress(pool, jobs, maxChunks) -> the jobs in which a chunk ran other than once (see mt_pool_for_stress)
Napi::Value PoolForStress(const Napi::CallbackInfo& info) {
  int64_t jobs, max_chunks;
  mt_pool* pool = ArgPool(info, "poolForStress");
  if (pool == nullptr || !ArgInt(info, 1, "poolForStress", "jobs", 1, 10000000, &jobs) ||
      !ArgInt(info, 2, "poolForStress", "maxChunks", 2, 4096, &max_chunks))
    return info.Env().Undefined();
  return Napi::Number::New(info.Env(), double(mt_pool_for_stress(pool, jobs, max_chunks)));
}

// poolIsStragglerWait(budgetUs, waitedUs, woke) -> boolean (see mt_pool_is_straggler_wait)
Napi::Value PoolIsStragglerWait(const Napi::CallbackInfo& info) {
  int64_t budget_us, waited_us;
  if (!ArgInt(info, 0, "poolIsStragglerWait", "budgetUs", 0, 100000000, &budget_us) ||
      !ArgInt(info, 1, "poolIsStragglerWait", "waitedUs", 0, 100000000, &waited_us))
    return info.Env().Undefined();
  bool woke = info.Length() > 2 && info[2].ToBoolean().Value();
  return Napi::Boolean::New(info.Env(),
                            mt_pool_is_straggler_wait(budget_us * 1000, waited_us * 1000, woke ? 1 : 0) != 0);
}

// poolIsStragglerTail(budgetUs, tailUs, ownUs) -> boolean (see mt_pool_is_straggler_tail)
Napi::Value PoolIsStragglerTail(const Napi::CallbackInfo& info) {
  int64_t budget_us, tail_us, own_us;
  if (!ArgInt(info, 0, "poolIsStragglerTail", "budgetUs", 0, 100000000, &budget_us) ||
      !ArgInt(info, 1, "poolIsStragglerTail", "tailUs", 0, 100000000, &tail_us) ||
      !ArgInt(info, 2, "poolIsStragglerTail", "ownUs", 0, 100000000, &own_us))
    return info.Env().Undefined();
  return Napi::Boolean::New(info.Env(),
                            mt_pool_is_straggler_tail(budget_us * 1000, tail_us * 1000, own_us * 1000) != 0);
}

Napi::Value MeasureReadBandwidth(const Napi::CallbackInfo& info) {
  int64_t bytes, threads;
  // At most half the RAM: the buffer is touched in full, and overcommit would not save us.
  int64_t half_ram = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) / 2;
  if (!ArgInt(info, 0, "measureReadBandwidth", "bytes", 1 << 20, half_ram, &bytes) ||
      !ArgInt(info, 1, "measureReadBandwidth", "threads", 1, MT_POOL_THREADS_MAX, &threads))
    return info.Env().Undefined();
  double gbs = mt_read_bandwidth_gbs((size_t)bytes, (int)threads);
  if (gbs < 0) {
    return mtjs::ThrowError(info.Env(), mtjs::kNoMemory,
                            "measureReadBandwidth: could not allocate " + std::to_string(bytes) + " bytes");
  }
  return Napi::Number::New(info.Env(), gbs);
}

}  // namespace

void RegisterOps(Napi::Env env, Napi::Object exports) {
  // The numbers TypeScript must agree on (src/native/constants.ts checks them at load).
  Napi::Object constants = Napi::Object::New(env);
  constants.Set("layerStatsFields", MT_LAYER_STATS_FIELDS);
  constants.Set("slotAlignBytes", MT_BACKEND_SLOT_ALIGN_BYTES);
  constants.Set("tierReportsMax", MT_TIER_REPORTS_MAX);
  constants.Set("ioQueueDepthDefault", MT_IO_QUEUE_DEPTH_DEFAULT);
  constants.Set("evalChunkRows", MT_EVAL_CHUNK_ROWS);
  constants.Set("tierPrefetchQueueMax", MT_TIER_PREFETCH_QUEUE_MAX);
  constants.Set("tierGateBytesDefault", double(MT_TIER_GATE_BYTES_DEFAULT));
  constants.Set("tierGateTransfersDefault", MT_TIER_GATE_TRANSFERS_DEFAULT);
  constants.Set("tierGateQueueDefault", MT_TIER_GATE_QUEUE_DEFAULT);
  exports.Set("constants", constants);
  exports.Set("isaBest", Napi::Function::New(env, IsaBest));
  exports.Set("isaActive", Napi::Function::New(env, IsaActive));
  exports.Set("isaDetected", Napi::Function::New(env, IsaDetected));
  exports.Set("isaVerify", Napi::Function::New(env, IsaVerify));
  exports.Set("isaSet", Napi::Function::New(env, IsaSet));
  exports.Set("isaName", Napi::Function::New(env, IsaName));
  exports.Set("matvec", Napi::Function::New(env, Matvec));
  exports.Set("matmul", Napi::Function::New(env, Matmul));
  exports.Set("dequantRow", Napi::Function::New(env, DequantRow));
  exports.Set("createPool", Napi::Function::New(env, CreatePool));
  exports.Set("freePool", Napi::Function::New(env, FreePool));
  exports.Set("poolMatvec", Napi::Function::New(env, PoolMatvec));
  exports.Set("poolMatmul", Napi::Function::New(env, PoolMatmul));
  exports.Set("poolCheck", Napi::Function::New(env, PoolCheck));
  exports.Set("poolForStress", Napi::Function::New(env, PoolForStress));
  exports.Set("poolIsStragglerWait", Napi::Function::New(env, PoolIsStragglerWait));
  exports.Set("poolIsStragglerTail", Napi::Function::New(env, PoolIsStragglerTail));
  exports.Set("measureReadBandwidth", Napi::Function::New(env, MeasureReadBandwidth));
}
