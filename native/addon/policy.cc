// The eviction policy's pure verbs (include/mt_policy.h) for `moetier replay`: the replay's dlfu
// (src/tiers/policies/dlfu.ts) runs the code the tier runs at need, over rows the replay owns.
//
//   dlfuAdd(count, stamp, adds, now, halfLife)     adds[e] > 0: count[e] decayed to now, plus adds[e]
//   dlfuVictim(count, stamp, eligible, halfLife)   the eligible expert of lowest score, -1: none
//   dlfuScore(count, stamp, expert, halfLife)      one expert's score
// count and stamp: Float64Array [nExpert] (one layer); adds: Float64Array, eligible: Uint8Array of the same length.
#include <cmath>
#include <string>
#include "errors.h"
#include "mt_policy.h"
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
  if (!TypedArg(info[0], napi_float64_array, &rows->count, &rows->n) || !TypedArg(info[1], napi_float64_array, &rows->stamp, &n_stamp) ||
      n_stamp != rows->n || rows->n == 0 || rows->n > size_t(INT32_MAX)) {
    mtjs::ThrowRangeError(info.Env(), std::string(verb) + ": count, stamp: expected two Float64Arrays of one layer's experts");
    return false;
  }
  *half_life = hl < info.Length() && info[hl].IsNumber() ? info[hl].As<Napi::Number>().DoubleValue() : NAN;
  if (!(*half_life >= 1 && *half_life <= MT_DLFU_HALF_LIFE_MAX)) {
    mtjs::ThrowRangeError(info.Env(), std::string(verb) + ": halfLife: expected a number of tokens in [1, " + std::to_string(int64_t(MT_DLFU_HALF_LIFE_MAX)) + "]");
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
  if (!TypedArg(info[2], napi_float64_array, &adds, &n) || n != r.n) return mtjs::ThrowRangeError(env, "dlfuAdd: adds: expected a Float64Array as long as count");
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
  if (!TypedArg(info[2], napi_uint8_array, &eligible, &n) || n != r.n) return mtjs::ThrowRangeError(env, "dlfuVictim: eligible: expected a Uint8Array as long as count");
  return Napi::Number::New(env, mt_dlfu_victim(r.count, r.stamp, eligible, int32_t(n), half_life));
}

Napi::Value DlfuScore(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Rows r;
  double half_life = 0;
  if (!ReadRows(info, "dlfuScore", 3, &r, &half_life)) return env.Undefined();
  const double e = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : NAN;
  if (!(e >= 0 && e < double(r.n) && e == std::floor(e))) return mtjs::ThrowRangeError(env, "dlfuScore: expert: expected an index into count");
  return Napi::Number::New(env, mt_dlfu_score(r.count, r.stamp, int32_t(e), half_life));
}

}  // namespace

void RegisterPolicy(Napi::Env env, Napi::Object exports) {
  exports.Set("dlfuAdd", Napi::Function::New(env, DlfuAdd));
  exports.Set("dlfuVictim", Napi::Function::New(env, DlfuVictim));
  exports.Set("dlfuScore", Napi::Function::New(env, DlfuScore));
}
