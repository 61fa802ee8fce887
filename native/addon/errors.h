// Every error the addon throws (or rejects a promise with) carries a string `code`, so that
// JavaScript branches on it instead of on the message. src/native/binding.ts lists them
// (NativeErrorCode):
//
//   MT_BAD_ARGUMENT    a wrong argument: a TypeError (wrong type, wrong handle) or a
//                      RangeError (out of range, unknown slot / event: MT_BACKEND_INVALID)
//   MT_FREED           the handle's object was already freed / destroyed / unmapped
//   MT_BUSY            something still runs on or uses the object: await or free it first
//                      (a read engine whose queue is full: wait for some reads)
//   MT_IO              a file could not be opened or mapped, or a read engine could not open
//                      it the way asked (O_DIRECT refused, no io_uring) or start; read engine
//                      errors also keep `ioStatus` (mt_io_status_name)
//   MT_NO_MEMORY       an allocation failed
//   MT_NO_THREADS      a thread could not be started
//   MT_BACKEND_<S>     a backend refusal, S = mt_backend_status_name upper-cased with '_'
//                      for '-' (MT_BACKEND_BUDGET, MT_BACKEND_BUSY, MT_BACKEND_NO_OVERWRITE, ...);
//                      the error also keeps `backendStatus` (src/native/backend.ts reads it)
//   MT_DEVICE_UNAVAILABLE  a cuda backend has no usable device; the error also keeps
//                      `deviceUnavailable` ('not-built', 'load-failed', 'no-driver', 'no-device')
//   MT_TIER_FAILED     the tier refused or failed (create, resize, a warmstart's uploads)
//   MT_EVAL_FAILED     mt_eval refused or failed ("eval: ..."; src/native/eval-errors.ts)
//   MT_INTERNAL        a C++ exception caught at the boundary: a bug, never an input error
//
// Thrown with the same class as before (Error, TypeError, RangeError), so `instanceof` keeps
// working; only the code is added.
#pragma once
#include <napi.h>
#include <string>

namespace mtjs {

constexpr const char* kBadArgument = "MT_BAD_ARGUMENT";
constexpr const char* kFreed = "MT_FREED";
constexpr const char* kBusy = "MT_BUSY";
constexpr const char* kIo = "MT_IO";
constexpr const char* kNoMemory = "MT_NO_MEMORY";
constexpr const char* kNoThreads = "MT_NO_THREADS";
constexpr const char* kTierFailed = "MT_TIER_FAILED";
constexpr const char* kDeviceUnavailable = "MT_DEVICE_UNAVAILABLE";
constexpr const char* kEvalFailed = "MT_EVAL_FAILED";
constexpr const char* kInternal = "MT_INTERNAL";

enum class Kind { kError, kTypeError, kRangeError };

// The error, not thrown: for a promise to reject with, or to throw.
inline Napi::Error New(Napi::Env env, Kind kind, const std::string& code, const std::string& message) {
  Napi::Error e = kind == Kind::kTypeError    ? Napi::TypeError::New(env, message)
                  : kind == Kind::kRangeError ? Napi::RangeError::New(env, message)
                                              : Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  return e;
}

// Throws it as the pending JavaScript exception; returns undefined, for `return Throw(...)`.
inline Napi::Value Throw(Napi::Env env, Kind kind, const std::string& code, const std::string& message) {
  New(env, kind, code, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

// The shapes nearly every site uses.
inline Napi::Value ThrowTypeError(Napi::Env env, const std::string& message) {
  return Throw(env, Kind::kTypeError, kBadArgument, message);
}
inline Napi::Value ThrowRangeError(Napi::Env env, const std::string& message) {
  return Throw(env, Kind::kRangeError, kBadArgument, message);
}
inline Napi::Value ThrowError(Napi::Env env, const std::string& code, const std::string& message) {
  return Throw(env, Kind::kError, code, message);
}

// MT_BACKEND_<NAME> for a backend status name ("no-overwrite" -> MT_BACKEND_NO_OVERWRITE).
inline std::string BackendCode(const char* status_name) {
  std::string code = "MT_BACKEND_";
  for (const char* c = status_name; *c != '\0'; c++)
    code += *c == '-' ? '_' : char(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
  return code;
}

}  // namespace mtjs
