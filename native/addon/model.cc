// Model, context and eval verbs over include/mt_forward.h.
//
//   createModel(file, desc)  -> model handle   (holds the file handle: the mapping outlives it)
//   createContext(model, o)  -> context handle (holds the model)
//   evalAsync(ctx, ...)      -> Promise        (AsyncWorker: runs off the event loop, holds
//                                               ctx, tokens, logits and routes until it settles)
//   evalSync(ctx, ...)       same on the calling thread
//     options.onLayerRouted(layer, counts)   evalAsync with a tier only: after each layer's
//                              routing its rows per expert (Int32Array [nExpert]) are posted
//                              to JS through a ThreadSafeFunction (non-blocking, at most
//                              kLayerHookQueueMax waiting, the rest dropped and counted), so JS
//                              can react while later layers compute; every posted call runs
//                              before the eval's promise settles; a throw rejects it
//   freeContext / freeModel  explicit release; refused while an eval runs / contexts live
//
// Handles are type-tagged externals, so a wrong handle is a TypeError, not a crash.
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include "errors.h"
#include "mt_assert.h"
#include "mt_tier.h"
#include "model_napi.h"

namespace {

constexpr napi_type_tag kModelTag = {0x6d6f6574696572ULL, 0x4d4f44454cULL};
constexpr napi_type_tag kContextTag = {0x6d6f6574696572ULL, 0x43545854ULL};

template <class State>
struct Handle {
  std::shared_ptr<State> state;
};

template <class State>
std::shared_ptr<State> Unwrap(Napi::Env env, Napi::Value v, const napi_type_tag& tag, const char* what) {
  if (!v.IsExternal() || !v.As<Napi::External<Handle<State>>>().CheckTypeTag(&tag)) {
    mtjs::ThrowTypeError(env, std::string("expected a ") + what + " handle");
    return nullptr;
  }
  auto state = v.As<Napi::External<Handle<State>>>().Data()->state;
  if (!state) mtjs::ThrowError(env, mtjs::kFreed, std::string(what) + " was already freed");
  return state;
}

template <class State>
Napi::Value Wrap(Napi::Env env, std::shared_ptr<State> state, const napi_type_tag& tag) {
  auto handle = Napi::External<Handle<State>>::New(env, new Handle<State>{std::move(state)},
                                                   [](Napi::Env, Handle<State>* h) { delete h; });
  handle.TypeTag(&tag);
  return handle;
}

}  // namespace

std::shared_ptr<ModelState> UnwrapModel(Napi::Env env, Napi::Value v) {
  return Unwrap<ModelState>(env, v, kModelTag, "model");
}
std::shared_ptr<ContextState> UnwrapContext(Napi::Env env, Napi::Value v) {
  return Unwrap<ContextState>(env, v, kContextTag, "context");
}

namespace {

Napi::Value Throw(Napi::Env env, const char* code, const std::string& message) {
  return mtjs::ThrowError(env, code, message);
}

Napi::Value CreateModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  // Our own handles are externals too: refuse them before they are read as a mapping.
  if (info[0].IsExternal() && (info[0].As<Napi::External<void>>().CheckTypeTag(&kModelTag) ||
                               info[0].As<Napi::External<void>>().CheckTypeTag(&kContextTag) ||
                               info[0].As<Napi::External<void>>().CheckTypeTag(&kTierTag) ||
                               info[0].As<Napi::External<void>>().CheckTypeTag(&kBackendTagOfModel))) {
    mtjs::ThrowTypeError(env,
                         "createModel: expected a mapped file handle (got a model, context, tier or backend handle)");
    return env.Undefined();
  }
  MappedFile* file = UnwrapMappedFile(env, info[0]);
  if (file == nullptr) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsObject())
    return Throw(env, mtjs::kBadArgument, "createModel(file, desc): desc must be an object");
  Napi::Object desc = info[1].As<Napi::Object>();
  mt_hparams hp{};
  std::vector<std::string> names;
  std::vector<mt_tensor_desc> tensors;
  std::vector<double> rope_inv_freq;  // hp points into it until mt_model_create_owned copies it
  std::string err;
  if (!ReadHParams(desc.Get("hparams"), &hp, &err) ||
      !ReadRope(desc, desc.Get("hparams").As<Napi::Object>(), &hp, &rope_inv_freq, &err) ||
      !ReadTensors(desc.Get("tensors"), &names, &tensors, &err))
    return Throw(env, mtjs::kBadArgument, "createModel: " + err);
  char message[512] = "";
  // desc.ownDense: dense tensors are read from the file into the model's own memory (mt_forward.h).
  const int dense_fd = desc.Get("ownDense").ToBoolean().Value() ? file->fd : -1;
  mt_model* model =
      mt_model_create_owned(&hp, tensors.data(), int32_t(tensors.size()), static_cast<const uint8_t*>(file->base),
                            file->length, dense_fd, message, sizeof message);
  if (model == nullptr) return Throw(env, mtjs::kBadArgument, std::string("createModel: ") + message);
  auto state = std::make_shared<ModelState>();
  state->model = model;
  state->file = file;
  file->users++;
  state->file_ref = Napi::Reference<Napi::Value>::New(info[0], 1);
  return Wrap(env, std::move(state), kModelTag);
}

// modelBytes(model) -> { ownedDense, hostCopyExpert }: bytes of dense tensors held in the model's own
// memory (ownDense), and of one expert's Q8_0 host copy (0: the expert tier offers none for this
// container; mt_tier_host_copy_bytes). The engine sizes its memory plan and host-copy arena from these.
Napi::Value ModelBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto model = UnwrapModel(env, info[0]);
  if (!model) return env.Undefined();
  Napi::Object out = Napi::Object::New(env);
  out.Set("ownedDense", double(mt_model_owned_dense_bytes(model->model)));
  out.Set("hostCopyExpert", double(mt_tier_host_copy_bytes(model->model)));
  return out;
}

// The optional nSeq of createContext / contextBytes: sequences in the KV cache (default 1).
bool ReadSeqs(const Napi::Object& options, int32_t* n_seq, std::string* err) {
  if (options.Get("nSeq").IsUndefined()) return *n_seq = 1, true;
  return ReadInt(options, "nSeq", n_seq, err);
}

// contextBytes(model, { nCtx, threads, nSeq? }) -> { kvBytes, scratchBytes }: what createContext would allocate.
Napi::Value ContextBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto model = UnwrapModel(env, info[0]);
  if (!model) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsObject())
    return Throw(env, mtjs::kBadArgument, "contextBytes(model, { nCtx, threads })");
  Napi::Object options = info[1].As<Napi::Object>();
  int32_t n_ctx = 0, threads = 0, n_seq = 1;
  std::string err;
  if (!ReadInt(options, "nCtx", &n_ctx, &err) || !ReadInt(options, "threads", &threads, &err) ||
      !ReadSeqs(options, &n_seq, &err))
    return Throw(env, mtjs::kBadArgument, "contextBytes: " + err);
  size_t kv = 0, scratch = 0;
  if (mt_context_bytes(model->model, n_ctx, n_seq, threads, &kv, &scratch) != 0)
    return Throw(env, mtjs::kBadArgument,
                 "contextBytes: expected nCtx 1..1048576, nSeq 1..256 with nCtx x nSeq <= 1048576, threads 1..64");
  Napi::Object out = Napi::Object::New(env);
  out.Set("kvBytes", double(kv));
  out.Set("scratchBytes", double(scratch));
  return out;
}

Napi::Value CreateContext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto model = Unwrap<ModelState>(env, info[0], kModelTag, "model");
  if (!model) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsObject())
    return Throw(env, mtjs::kBadArgument, "createContext(model, { nCtx, threads, nSeq? })");
  Napi::Object options = info[1].As<Napi::Object>();
  int32_t n_ctx = 0, threads = 0, n_seq = 1;
  std::string err;
  if (!ReadInt(options, "nCtx", &n_ctx, &err) || !ReadInt(options, "threads", &threads, &err) ||
      !ReadSeqs(options, &n_seq, &err))
    return Throw(env, mtjs::kBadArgument, "createContext: " + err);
  char message[512] = "";
  mt_context* ctx = mt_context_create(model->model, n_ctx, n_seq, threads, message, sizeof message);
  if (ctx == nullptr) return Throw(env, mtjs::kBadArgument, std::string("createContext: ") + message);
  auto state = std::make_shared<ContextState>();
  state->model = model;
  state->ctx = ctx;
  model->contexts++;
  return Wrap(env, std::move(state), kContextTag);
}

// Arguments of one eval, checked on the JS thread; outputs are written in place. An async
// eval copies the tokens (JS may change them meanwhile); a sync one reads them where they are.
struct EvalCall {
  std::shared_ptr<ContextState> state;
  std::shared_ptr<TierState> tier;  // the attached tier, held until the eval settles
  mt_tier* tier_handle = nullptr;   // its native tier (the eval's expert source)
  std::vector<int32_t> tokens;
  std::vector<int32_t> seq_ids, positions, logit_rows;  // copies: JS may change its arrays meanwhile
  mt_eval_args args{};
};

// An optional Int32Array option copied into `out`; false (err set) when it is something else.
bool ReadIds(const Napi::Object& o, const char* key, std::vector<int32_t>* out, bool* present, std::string* err) {
  Napi::Value v = o.Get(key);
  *present = !v.IsUndefined();
  if (!*present) return true;
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
    return *err = std::string("eval: options.") + key + " must be an Int32Array", false;
  Napi::Int32Array a = v.As<Napi::Int32Array>();
  out->assign(a.Data(), a.Data() + a.ElementLength());
  return true;
}

// seqIds, positions and logitRows (continuous batching, mt_eval_args; mt_eval checks their values).
bool ReadBatchRows(const Napi::Object& o, EvalCall* call, std::string* err) {
  bool has_seq = false, has_pos = false, has_logit = false;
  if (!ReadIds(o, "seqIds", &call->seq_ids, &has_seq, err) ||
      !ReadIds(o, "positions", &call->positions, &has_pos, err) ||
      !ReadIds(o, "logitRows", &call->logit_rows, &has_logit, err))
    return false;
  mt_eval_args& a = call->args;
  if (has_seq || has_pos) {
    if (call->seq_ids.size() != call->positions.size())
      return *err = "eval: options.seqIds and options.positions must both be given, with one entry per token", false;
    a.seq_ids = call->seq_ids.data();
    a.positions = call->positions.data();
    a.seq_len = call->seq_ids.size();
  }
  if (has_logit) {
    static const int32_t kNoRow = 0;  // an empty list still means "these rows: none", not NULL's "the last"
    a.logit_rows = call->logit_rows.empty() ? &kNoRow : call->logit_rows.data();
    a.n_logit_rows = int32_t(call->logit_rows.size() > 0x7fffffff ? 0x7fffffff : call->logit_rows.size());
  }
  return true;
}

bool PrepareEval(const Napi::CallbackInfo& info, bool copy_tokens, EvalCall* call, std::string* err) {
  Napi::Env env = info.Env();
  call->state = Unwrap<ContextState>(env, info[0], kContextTag, "context");
  if (!call->state) return false;
  if (call->state->busy) return *err = "eval: the context is already running an eval; await it first", false;
  if (call->state->model->file->closed) return *err = "eval: the model's file was unmapped", false;
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
    return *err = "eval: tokens must be an Int32Array", false;
  if (!info[2].IsNumber()) return *err = "eval: pos must be a number", false;
  if (!info[3].IsTypedArray() || info[3].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    return *err = "eval: logits must be a Float32Array", false;
  Napi::Int32Array tokens = info[1].As<Napi::Int32Array>();
  Napi::Float32Array logits = info[3].As<Napi::Float32Array>();
  if (copy_tokens) call->tokens.assign(tokens.Data(), tokens.Data() + tokens.ElementLength());
  const double pos = info[2].As<Napi::Number>().DoubleValue();
  if (!(pos >= 0 && pos <= 2147483647.0 && pos == double(int64_t(pos))))
    return *err = "eval: pos must be an integer >= 0", false;
  mt_eval_args& a = call->args;
  a.tokens = copy_tokens ? call->tokens.data() : tokens.Data();
  a.n_tokens = int32_t(tokens.ElementLength() > 0x7fffffff ? 0x7fffffff : tokens.ElementLength());
  a.pos = int32_t(pos);
  a.logits = logits.Data();
  a.logits_len = logits.ElementLength();
  if (info.Length() > 4 && info[4].IsObject()) {
    Napi::Object o = info[4].As<Napi::Object>();
    a.all_logits = o.Get("allLogits").ToBoolean().Value() ? 1 : 0;
    Napi::Value routes = o.Get("routes");
    if (!routes.IsUndefined()) {
      if (!routes.IsTypedArray() || routes.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        return *err = "eval: options.routes must be an Int32Array", false;
      a.routes = routes.As<Napi::Int32Array>().Data();
      a.routes_len = routes.As<Napi::Int32Array>().ElementLength();
    }
    // forcedRoutes (Int32Array, nTokens x nLayer x nExpertUsed): the experts each row runs instead of
    // the router's top-k (mt_eval_args.forced_routes; checked by mt_eval before anything runs).
    Napi::Value forced = o.Get("forcedRoutes");
    if (!forced.IsUndefined()) {
      if (!forced.IsTypedArray() || forced.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        return *err = "eval: options.forcedRoutes must be an Int32Array", false;
      a.forced_routes = forced.As<Napi::Int32Array>().Data();
      a.forced_routes_len = forced.As<Napi::Int32Array>().ElementLength();
    }
    if (!ReadBatchRows(o, call, err)) return false;
    Napi::Value stats = o.Get("layerStats");
    if (!stats.IsUndefined()) {
      if (!stats.IsTypedArray() || stats.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
        return *err = "eval: options.layerStats must be a Float64Array", false;
      a.layer_stats = stats.As<Napi::Float64Array>().Data();
      a.layer_stats_len = stats.As<Napi::Float64Array>().ElementLength();
    }
    // predicted (Int32Array, nLayer x predictK) and predictK: each layer's routes predicted from
    // the state entering it (a one-token eval; mt_forward.h).
    Napi::Value predicted = o.Get("predicted");
    if (!predicted.IsUndefined()) {
      if (!predicted.IsTypedArray() || predicted.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        return *err = "eval: options.predicted must be an Int32Array", false;
      const double k = o.Get("predictK").IsNumber() ? o.Get("predictK").As<Napi::Number>().DoubleValue() : 0;
      if (!(k >= 1 && k <= 65536 && k == double(int32_t(k))))
        return *err = "eval: options.predictK must be an integer >= 1 with options.predicted", false;
      a.predicted = predicted.As<Napi::Int32Array>().Data();
      a.predicted_len = predicted.As<Napi::Int32Array>().ElementLength();
      a.predict_k = int32_t(k);
      const Napi::Value ahead = o.Get("predictAhead");
      a.predict_ahead = ahead.IsNumber() ? ahead.As<Napi::Number>().Int32Value() : 0;
    }
  }
  if (call->state->tier) {
    call->tier = call->state->tier;
    call->tier_handle = TierOf(*call->tier);
    a.experts = mt_tier_source(call->tier_handle);
  }
  if (info.Length() > 4 && info[4].IsObject()) {
    Napi::Value hook = info[4].As<Napi::Object>().Get("onLayerRouted");
    if (!hook.IsUndefined() && !hook.IsFunction())
      return *err = "eval: options.onLayerRouted must be a function", false;
    if (hook.IsFunction() && !copy_tokens)
      return *err = "eval: options.onLayerRouted needs evalAsync (evalSync blocks the thread it would run on)", false;
    if (hook.IsFunction() && call->tier_handle == nullptr)
      return *err = "eval: options.onLayerRouted needs a tier attached to the context (createTier)", false;
  }
  return true;
}

Napi::Value EvalSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  EvalCall call;
  std::string err;
  if (!PrepareEval(info, false, &call, &err))
    return err.empty() ? env.Undefined() : Throw(env, mtjs::kBadArgument, err);
  char message[512] = "";
  call.state->busy = true;
  const int rc = mt_eval(call.state->ctx, &call.args, message, sizeof message);
  call.state->busy = false;
  if (rc != 0) return Throw(env, mtjs::kEvalFailed, std::string("eval: ") + message);
  return env.Undefined();
}

// Layer-count calls waiting for the JS thread, per eval (a bounded queue: beyond, dropped).
constexpr size_t kLayerHookQueueMax = 256;

struct RoutedCall {
  int32_t layer = 0;
  std::vector<int32_t> counts;  // [nExpert]
};

// How the eval settles once its hook calls are drained (the hook's finalizer settles it).
struct HookSettle {
  Napi::Promise::Deferred deferred;
  std::shared_ptr<ContextState> state;
  Napi::Reference<Napi::Value> error;  // the eval's error, else the hook's first throw
};

void CallHook(Napi::Env env, Napi::Function fn, HookSettle* settle, RoutedCall* call) {
  std::unique_ptr<RoutedCall> owned(call);
  if (env == nullptr || settle == nullptr) return;  // closing: the call is dropped
  Napi::Int32Array counts = Napi::Int32Array::New(env, call->counts.size());
  std::copy(call->counts.begin(), call->counts.end(), counts.Data());
  fn.Call({Napi::Number::New(env, call->layer), counts});
  if (!env.IsExceptionPending()) return;
  Napi::Value thrown = env.GetAndClearPendingException().Value();
  if (settle->error.IsEmpty()) settle->error = Napi::Reference<Napi::Value>::New(thrown, 1);
}

using LayerHookFn = Napi::TypedThreadSafeFunction<HookSettle, RoutedCall, CallHook>;

void SettleAfterHook(Napi::Env env, void*, HookSettle* settle) {
  std::unique_ptr<HookSettle> owned(settle);
  settle->state->busy = false;
  if (settle->error.IsEmpty())
    settle->deferred.Resolve(env.Undefined());
  else
    settle->deferred.Reject(settle->error.Value());
}

class EvalWorker : public Napi::AsyncWorker {
 public:
  EvalWorker(const Napi::CallbackInfo& info, EvalCall call, Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(info.Env(), "moetier.eval"), call_(std::move(call)), deferred_(deferred) {
    // The JS objects whose memory the eval reads or writes stay referenced until it settles.
    for (size_t i = 0; i < info.Length() && i < 5; i++)
      if (info[i].IsObject() || info[i].IsExternal()) refs_.push_back(Napi::Reference<Napi::Value>::New(info[i], 1));
    if (info.Length() > 4 && info[4].IsObject()) {
      for (const char* key : {"routes", "layerStats", "predicted", "forcedRoutes"}) {
        Napi::Value v = info[4].As<Napi::Object>().Get(key);
        if (v.IsObject()) refs_.push_back(Napi::Reference<Napi::Value>::New(v, 1));
      }
    }
    call_.state->busy = true;
    if (call_.tier_handle != nullptr) mt_tier_kick(call_.tier_handle);  // here, not on the eval thread
    if (info.Length() > 4 && info[4].IsObject()) {
      Napi::Value fn = info[4].As<Napi::Object>().Get("onLayerRouted");
      if (fn.IsFunction()) {
        settle_ = new HookSettle{deferred_, call_.state, {}};
        hook_ = LayerHookFn::New(info.Env(), fn.As<Napi::Function>(), "moetier.layerRouted", kLayerHookQueueMax, 1,
                                 settle_, SettleAfterHook, static_cast<void*>(nullptr));
      }
    }
  }
  // A C++ exception (std::bad_alloc from the STL, a bug) must not leave Execute: on libuv's
  // thread it would terminate the process. It rejects the eval with MT_INTERNAL instead. The
  // debug build throws one on purpose under MOETIER_DEBUG_EVAL_THROW (tests/native/debug-asserts.test.ts).
  void Execute() override {
    char message[512] = "";
    mt_tier* tier = call_.tier_handle;
    if (settle_ != nullptr) mt_tier_set_layer_hook(tier, PostCounts, this);
    try {
#if MT_DEBUG_ASSERTS_ENABLED
      if (std::getenv("MOETIER_DEBUG_EVAL_THROW") != nullptr)
        throw std::runtime_error("thrown on purpose (MOETIER_DEBUG_EVAL_THROW)");
#endif
      if (mt_eval(call_.state->ctx, &call_.args, message, sizeof message) != 0)
        SetError(std::string("eval: ") + message);
    } catch (const std::exception& e) {
      error_code_ = mtjs::kInternal;
      SetError(std::string("eval: internal error: ") + e.what());
    } catch (...) {
      error_code_ = mtjs::kInternal;
      SetError("eval: internal error: a C++ exception that is not a std::exception");
    }
    if (settle_ != nullptr) mt_tier_set_layer_hook(tier, nullptr, nullptr);
  }
  void OnOK() override {
    if (settle_ != nullptr) return hook_.Release(), void();  // SettleAfterHook resolves, after the queued calls
    call_.state->busy = false;
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& e) override {
    e.Value().Set("code", Napi::String::New(Env(), error_code_));
    if (settle_ != nullptr) {
      settle_->error = Napi::Reference<Napi::Value>::New(e.Value(), 1);
      return hook_.Release(), void();
    }
    call_.state->busy = false;
    deferred_.Reject(e.Value());
  }

  // Eval thread: one layer's counts, queued without blocking (dropped and counted when full).
  static void PostCounts(void* user, int32_t layer, const int32_t* counts, int32_t n_expert) {
    auto* self = static_cast<EvalWorker*>(user);
    auto* call = new RoutedCall{layer, std::vector<int32_t>(counts, counts + n_expert)};
    if (self->hook_.NonBlockingCall(call) != napi_ok) {
      delete call;
      mt_tier_count_hook_dropped(self->call_.tier_handle);
    }
  }

 private:
  EvalCall call_;
  Napi::Promise::Deferred deferred_;
  std::vector<Napi::Reference<Napi::Value>> refs_;
  HookSettle* settle_ = nullptr;  // owned by hook_ (freed by its finalizer)
  LayerHookFn hook_;
  const char* error_code_ = mtjs::kEvalFailed;  // what OnError's error carries as `code`
};

Napi::Value EvalAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  EvalCall call;
  std::string err;
  if (!PrepareEval(info, true, &call, &err)) {
    Napi::Value error = env.Undefined();
    if (env.IsExceptionPending())
      error = env.GetAndClearPendingException().Value();
    else
      error = mtjs::New(env, mtjs::Kind::kError, mtjs::kBadArgument, err).Value();
    deferred.Reject(error);
    return deferred.Promise();
  }
  (new EvalWorker(info, std::move(call), deferred))->Queue();
  return deferred.Promise();
}

Napi::Value FreeContext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto state = Unwrap<ContextState>(env, info[0], kContextTag, "context");
  if (!state) return env.Undefined();
  if (state->busy) return Throw(env, mtjs::kBusy, "freeContext: an eval is running on this context; await it first");
  info[0].As<Napi::External<Handle<ContextState>>>().Data()->state.reset();
  return env.Undefined();
}

Napi::Value FreeModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto state = Unwrap<ModelState>(env, info[0], kModelTag, "model");
  if (!state) return env.Undefined();
  if (state->contexts > 0)
    return Throw(env, mtjs::kBusy,
                 "freeModel: " + std::to_string(state->contexts) + " context(s) still use this model; free them first");
  info[0].As<Napi::External<Handle<ModelState>>>().Data()->state.reset();
  return env.Undefined();
}

}  // namespace

void RegisterModel(Napi::Env env, Napi::Object exports) {
  exports.Set("createModel", Napi::Function::New(env, CreateModel));
  exports.Set("createContext", Napi::Function::New(env, CreateContext));
  exports.Set("contextBytes", Napi::Function::New(env, ContextBytes));
  exports.Set("modelBytes", Napi::Function::New(env, ModelBytes));
  exports.Set("evalSync", Napi::Function::New(env, EvalSync));
  exports.Set("evalAsync", Napi::Function::New(env, EvalAsync));
  exports.Set("freeContext", Napi::Function::New(env, FreeContext));
  exports.Set("freeModel", Napi::Function::New(env, FreeModel));
  exports.Set("forwardOps", ForwardOps(env));
}
