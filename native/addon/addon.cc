// The addon's entry point: every verb is registered by the file that implements it.
#include <napi.h>
#include "mt_assert.h"
#include "registry.h"

static Napi::Value Version(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), "0.1.0"); }

// Whether this build checks the MT_ASSERT invariants (cmake -DMT_DEBUG_ASSERTS=ON, native/build-debug).
static Napi::Value DebugAssertsEnabled(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), MT_DEBUG_ASSERTS_ENABLED != 0);
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("version", Napi::Function::New(env, Version));
  exports.Set("debugAssertsEnabled", Napi::Function::New(env, DebugAssertsEnabled));
  RegisterMmap(env, exports);
  RegisterOps(env, exports);
  RegisterModel(env, exports);
  RegisterBackend(env, exports);
  RegisterTier(env, exports);
  RegisterIo(env, exports);
  RegisterSynth(env, exports);
  RegisterPolicy(env, exports);
  return exports;
}

NODE_API_MODULE(moetier, Init)
