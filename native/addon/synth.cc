// gen-model's native writer verbs (src/synth/weights.ts):
//   quantizeRows(typeId, src, rows, cols, dst)                          -> undefined (tests: one call, this thread)
//   quantizeRowsAsync(typeId, src, rows, cols, dst, threads)             -> Promise<void>
//   synthUniformAsync(state, scale, typeId, rows, cols, dst, threads)    -> Promise<void>
// The async verbs run on an AsyncWorker with a pool of `threads` (the worker is thread 0), never
// on the event loop; they hold their typed arrays until they settle, and the caller must leave
// them alone meanwhile. state: Int32Array(4), the sfc32 words a, b, c, d of a src/synth/prng.ts
// Rng, advanced past the drawn rows when the promise resolves. Bytes as mt_quantize_rows writes.
#include <cmath>
#include <string>
#include "mt_pool.h"
#include "errors.h"
#include "registry.h"

namespace {

constexpr int64_t kDimMax = int64_t(1) << 40;  // rows * cols elements: far below 2^53 and any memory
constexpr int64_t kColsMax = int64_t(1) << 28;

bool Fail(Napi::Env env, bool range, const std::string& msg) {
  if (range)
    mtjs::ThrowRangeError(env, msg);
  else
    mtjs::ThrowTypeError(env, msg);
  return false;
}

bool ArgInt(const Napi::CallbackInfo& info, size_t i, const char* verb, const char* name, int64_t lo, int64_t hi,
            int64_t* out) {
  if (i >= info.Length() || !info[i].IsNumber())
    return Fail(info.Env(), false, std::string(verb) + ": " + name + ": expected a number");
  const double v = info[i].As<Napi::Number>().DoubleValue();
  if (!(v >= (double)lo && v <= (double)hi) || v != (double)(int64_t)v)
    return Fail(info.Env(), true,
                std::string(verb) + ": " + name + ": expected an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got " + std::to_string(v));
  *out = (int64_t)v;
  return true;
}

// A typed array of `kind` with exactly `want` elements.
bool ArgArray(const Napi::CallbackInfo& info, size_t i, const char* verb, const char* name, napi_typedarray_type kind,
              int64_t want, void** data) {
  const char* kind_name = kind == napi_uint8_array   ? "Uint8Array"
                          : kind == napi_int32_array ? "Int32Array"
                                                     : "Float32Array";
  // napi_get_typedarray_info gives the data pointer already offset, SharedArrayBuffer-backed arrays too.
  napi_typedarray_type got = napi_int8_array;
  size_t length = 0;
  if (i >= info.Length() || !info[i].IsTypedArray() ||
      napi_get_typedarray_info(info.Env(), info[i], &got, &length, data, nullptr, nullptr) != napi_ok || got != kind)
    return Fail(info.Env(), false, std::string(verb) + ": " + name + ": expected a " + kind_name);
  if ((int64_t)length != want)
    return Fail(info.Env(), true,
                std::string(verb) + ": " + name + ": expected " + std::to_string(want) + " elements, got " +
                    std::to_string(length));
  return true;
}

// typeId at info[at_type], rows and cols at info[at_rows], info[at_rows + 1]: a supported type whose blocks divide cols.
bool ArgShape(const Napi::CallbackInfo& info, size_t at_type, size_t at_rows, const char* verb, int64_t* type,
              int64_t* rows, int64_t* cols) {
  if (!ArgInt(info, at_type, verb, "typeId", 0, 1000, type) || !ArgInt(info, at_rows, verb, "rows", 0, kDimMax, rows) ||
      !ArgInt(info, at_rows + 1, verb, "cols", 1, kColsMax, cols))
    return false;
  if (!mt_type_supported((int)*type) || mt_row_bytes((int)*type, *cols) == 0)
    return Fail(info.Env(), true,
                std::string(verb) + ": typeId " + std::to_string(*type) + " cannot hold rows of " +
                    std::to_string(*cols) + " elements (a supported type whose blocks divide cols)");
  if (*rows * *cols > kDimMax)
    return Fail(info.Env(), true, std::string(verb) + ": rows * cols: at most 2^40 elements");
  return true;
}

Napi::Value QuantizeRows(const Napi::CallbackInfo& info) {
  int64_t type, rows, cols;
  void *src, *dst;
  if (!ArgShape(info, 0, 2, "quantizeRows", &type, &rows, &cols) ||
      !ArgArray(info, 1, "quantizeRows", "src", napi_float32_array, rows * cols, &src) ||
      !ArgArray(info, 4, "quantizeRows", "dst", napi_uint8_array, rows * (int64_t)mt_row_bytes((int)type, cols), &dst))
    return info.Env().Undefined();
  if (mt_quantize_rows((int)type, (const float*)src, rows, cols, dst) != 0)
    return mtjs::ThrowError(info.Env(), mtjs::kNoMemory, "quantizeRows: no memory for a row's scratch");
  return info.Env().Undefined();
}

// One pool job off the event loop: quantise rows, or draw and quantise them (state given).
class QuantizeWorker : public Napi::AsyncWorker {
 public:
  QuantizeWorker(Napi::Env env, const char* verb, Napi::Promise::Deferred deferred, int threads)
      : Napi::AsyncWorker(env, verb), verb_(verb), deferred_(deferred), threads_(threads) {}

  int type = 0;
  int64_t rows = 0, cols = 0;
  const float* src = nullptr;
  uint8_t* dst = nullptr;
  int32_t* state = nullptr;  // synthUniformAsync: the JS Int32Array's words, written back in OnOK
  double scale = 0;
  Napi::Reference<Napi::Value> keep[2];  // the typed arrays, alive until the promise settles

  void Execute() override {
    mt_pool* pool = mt_pool_create(threads_);
    if (pool == nullptr) {
      code_ = mtjs::kNoThreads;
      return SetError(std::string(verb_) + ": could not start " + std::to_string(threads_) + " threads");
    }
    int rc;
    if (state != nullptr) {
      for (int k = 0; k < 4; k++) words_[k] = (uint32_t)state[k];
      rc = mt_pool_synth_uniform(pool, words_, scale, type, rows, cols, dst);
    } else {
      rc = mt_pool_quantize_rows(pool, type, src, rows, cols, dst);
    }
    mt_pool_destroy(pool);
    if (rc != 0) {
      code_ = mtjs::kNoMemory;
      SetError(std::string(verb_) + ": no memory for the fill buffers or a row's scratch");
    }
  }
  void OnOK() override {
    if (state != nullptr)
      for (int k = 0; k < 4; k++) state[k] = (int32_t)words_[k];
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(mtjs::New(Env(), mtjs::Kind::kError, code_, e.Message()).Value());
  }

 private:
  const char* verb_;
  Napi::Promise::Deferred deferred_;
  int threads_;
  uint32_t words_[4] = {0, 0, 0, 0};
  std::string code_ = mtjs::kInternal;
};

Napi::Value Rejected(Napi::Env env, Napi::Promise::Deferred deferred) {
  deferred.Reject(env.GetAndClearPendingException().Value());
  return deferred.Promise();
}

// quantizeRowsAsync(typeId, src: Float32Array [rows * cols], rows, cols, dst: Uint8Array, threads)
Napi::Value QuantizeRowsAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  const char* verb = "quantizeRowsAsync";
  int64_t type, rows, cols, threads;
  void *src, *dst;
  if (!ArgShape(info, 0, 2, verb, &type, &rows, &cols) ||
      !ArgArray(info, 1, verb, "src", napi_float32_array, rows * cols, &src) ||
      !ArgArray(info, 4, verb, "dst", napi_uint8_array, rows * (int64_t)mt_row_bytes((int)type, cols), &dst) ||
      !ArgInt(info, 5, verb, "threads", 1, MT_POOL_THREADS_MAX, &threads))
    return Rejected(env, deferred);
  auto* w = new QuantizeWorker(env, "moetier.quantizeRowsAsync", deferred, (int)threads);
  w->type = (int)type, w->rows = rows, w->cols = cols, w->src = (const float*)src, w->dst = (uint8_t*)dst;
  w->keep[0] = Napi::Persistent(info[1]);
  w->keep[1] = Napi::Persistent(info[4]);
  w->Queue();
  return deferred.Promise();
}

// synthUniformAsync(state: Int32Array(4), scale, typeId, rows, cols, dst: Uint8Array, threads)
Napi::Value SynthUniformAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  const char* verb = "synthUniformAsync";
  int64_t type, rows, cols, threads;
  void *state, *dst;
  if (!ArgArray(info, 0, verb, "state", napi_int32_array, 4, &state)) return Rejected(env, deferred);
  if (info.Length() < 2 || !info[1].IsNumber() || !std::isfinite(info[1].As<Napi::Number>().DoubleValue())) {
    Fail(env, false, std::string(verb) + ": scale: expected a finite number");
    return Rejected(env, deferred);
  }
  if (!ArgShape(info, 2, 3, verb, &type, &rows, &cols) ||
      !ArgArray(info, 5, verb, "dst", napi_uint8_array, rows * (int64_t)mt_row_bytes((int)type, cols), &dst) ||
      !ArgInt(info, 6, verb, "threads", 1, MT_POOL_THREADS_MAX, &threads))
    return Rejected(env, deferred);
  auto* w = new QuantizeWorker(env, "moetier.synthUniformAsync", deferred, (int)threads);
  w->type = (int)type, w->rows = rows, w->cols = cols, w->dst = (uint8_t*)dst;
  w->state = (int32_t*)state, w->scale = info[1].As<Napi::Number>().DoubleValue();
  w->keep[0] = Napi::Persistent(info[0]);
  w->keep[1] = Napi::Persistent(info[5]);
  w->Queue();
  return deferred.Promise();
}

}  // namespace

void RegisterSynth(Napi::Env env, Napi::Object exports) {
  exports.Set("quantizeRows", Napi::Function::New(env, QuantizeRows));
  exports.Set("quantizeRowsAsync", Napi::Function::New(env, QuantizeRowsAsync));
  exports.Set("synthUniformAsync", Napi::Function::New(env, SynthUniformAsync));
}
