// Tier verbs over native/tier/tier.h (declared in src/native/binding.ts).
//
//   createTier(ctx, backend, { slotsPerLayer, hostCopies?, hostCopyOffsets? }) -> tier handle
//       attaches the tier to the context (its evals use it); the tier holds the model, the
//       backend and the host-copy arrays alive
//   tierExpertBytes / tierResidency / tierStats / tierResetStats / tierRequestSwap / tierPoll
//   tierRequestSwap(tier, layer, victim, newcomer, taskId, { issueNow }?) -> 0 queued | 1 started
//       now (issueNow, the layer not being computed) | a negative SwapCode
//   tierWarmstart(tier, layer, experts) -> Promise   (AsyncWorker waits for the uploads)
//   tierResize(tier, layer, slots, victims)   between evals: the layer's slot count grows
//       (spare, then reserved slots) or shrinks (free slots, then victims evicted); throws, nothing changed
//   freeTier(tier)     detaches; waits for in-flight uploads; frees the tier's slots
//   requantizeExpertToQ8(model, layer, expert, dst, dstOffset)
//
// Bad arguments throw TypeError / RangeError; every error has a code (errors.h); nothing here aborts the process.
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include "../backend/backend.h"
#include "../tier/tier.h"
#include "errors.h"
#include "model_napi.h"

struct TierState {
  mt_tier* tier = nullptr;
  std::shared_ptr<ModelState> model;   // the weights the tier uploads from
  std::shared_ptr<mt_backend> backend;
  std::weak_ptr<ContextState> ctx;
  Napi::Reference<Napi::Value> host_ref, offsets_ref;  // the arrays the eval reads
  int warm_running = 0;                                 // warmstarts not settled yet (JS thread)
  // Waits for in-flight uploads (tier_destroy), then lets go of the model, so that its
  // mapping can be unmapped right after freeTier rather than when the handle is collected.
  void close() {
    mt::tier_destroy(tier);
    tier = nullptr;
    model.reset();
  }
  ~TierState() { close(); }
};

mt_tier* TierOf(const TierState& s) { return s.tier; }

namespace {

struct Handle {
  std::shared_ptr<TierState> state;
};

Napi::Value Throw(Napi::Env env, const char* code, const std::string& message) {
  return mtjs::ThrowError(env, code, message);
}

Napi::Value ThrowRange(Napi::Env env, const std::string& message) {
  return mtjs::ThrowRangeError(env, message);
}

// The live tier behind info[0]; null with a JS exception pending.
std::shared_ptr<TierState> Unwrap(const Napi::CallbackInfo& info, const char* verb) {
  Napi::Value v = info[0];
  if (!v.IsExternal() || !v.As<Napi::External<Handle>>().CheckTypeTag(&kTierTag)) {
    mtjs::ThrowTypeError(info.Env(), std::string(verb) + ": expected a tier handle");
    return nullptr;
  }
  auto state = v.As<Napi::External<Handle>>().Data()->state;
  if (!state || state->tier == nullptr) {
    mtjs::ThrowError(info.Env(), mtjs::kFreed, std::string(verb) + ": the tier was already freed");
    return nullptr;
  }
  return state;
}

// info[i] as an integer in [lo, hi]; false with a RangeError pending.
bool ArgInt(const Napi::CallbackInfo& info, size_t i, const std::string& what, double lo, double hi, int32_t* out) {
  const double v = i < info.Length() && info[i].IsNumber() ? info[i].As<Napi::Number>().DoubleValue() : NAN;
  if (!(v >= lo && v <= hi && v == std::floor(v))) {
    ThrowRange(info.Env(), what + ": expected an integer in [" + std::to_string(int64_t(lo)) + ", " + std::to_string(int64_t(hi)) + "]");
    return false;
  }
  *out = int32_t(v);
  return true;
}

template <class T>
bool TypedArg(Napi::Value v, napi_typedarray_type type, T** data, size_t* length) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) return false;
  void* p = nullptr;
  napi_typedarray_type t;
  napi_get_typedarray_info(v.Env(), v, &t, length, &p, nullptr, nullptr);
  *data = static_cast<T*>(p);
  return true;
}

// Reads { slotsPerLayer, hostCopies?, hostCopyOffsets? } into o; false with a message.
bool ReadOptions(Napi::Value v, const mt_hparams& hp, mt::TierOptions* o, std::string* err) {
  if (!v.IsObject()) return *err = "options: expected { slotsPerLayer, hostCopies?, hostCopyOffsets? }", false;
  Napi::Object opts = v.As<Napi::Object>();
  Napi::Value slots = opts.Get("slotsPerLayer");
  if (!slots.IsArray()) return *err = "options.slotsPerLayer: expected an array of " + std::to_string(hp.n_layer) + " integers", false;
  Napi::Array a = slots.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value n = a.Get(i);
    const double d = n.IsNumber() ? n.As<Napi::Number>().DoubleValue() : NAN;
    if (!(d >= 0 && d <= hp.n_expert && d == std::floor(d)))
      return *err = "options.slotsPerLayer[" + std::to_string(i) + "]: expected an integer in [0, " + std::to_string(hp.n_expert) + "]", false;
    o->slots_per_layer.push_back(int32_t(d));
  }
  Napi::Value host = opts.Get("hostCopies"), offsets = opts.Get("hostCopyOffsets");
  if (host.IsUndefined() != offsets.IsUndefined())
    return *err = "options.hostCopies and options.hostCopyOffsets: expected both or neither", false;
  if (host.IsUndefined()) return true;
  uint8_t* host_data = nullptr;
  int32_t* offset_data = nullptr;
  size_t host_len = 0, offsets_len = 0;
  if (!TypedArg(host, napi_uint8_array, &host_data, &host_len)) return *err = "options.hostCopies: expected a Uint8Array", false;
  if (!TypedArg(offsets, napi_int32_array, &offset_data, &offsets_len) || offsets_len != size_t(hp.n_layer) * size_t(hp.n_expert))
    return *err = "options.hostCopyOffsets: expected an Int32Array of nLayer x nExpert = " + std::to_string(size_t(hp.n_layer) * size_t(hp.n_expert)) +
                  " offsets",
           false;
  o->host = host_data, o->host_bytes = host_len, o->host_offsets = offset_data;
  return true;
}

Napi::Value CreateTier(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto ctx = UnwrapContext(env, info[0]);
  if (!ctx) return env.Undefined();
  auto backend = ShareBackend(env, info[1]);
  if (!backend) return env.Undefined();
  if (ctx->busy) return Throw(env, mtjs::kBusy, "createTier: an eval is running on this context; await it first");
  if (ctx->tier) return Throw(env, mtjs::kBusy, "createTier: this context already has a tier; freeTier it first");
  const mt_hparams& hp = *mt_model_hparams(ctx->model->model);
  mt::TierOptions o;
  std::string why;
  if (!ReadOptions(info[2], hp, &o, &why)) return ThrowRange(env, "createTier: " + why);
  char err[512] = "";
  mt_tier* tier = mt::tier_create(ctx->model->model, backend.get(), backend->config.kind == MT_BACKEND_FAKE, o, err, sizeof err);
  if (tier == nullptr) return Throw(env, mtjs::kTierFailed, std::string("createTier: ") + err);
  auto state = std::make_shared<TierState>();
  state->tier = tier, state->model = ctx->model, state->backend = backend, state->ctx = ctx;
  if (o.host != nullptr) {
    Napi::Object opts = info[2].As<Napi::Object>();
    state->host_ref = Napi::Reference<Napi::Value>::New(opts.Get("hostCopies"), 1);
    state->offsets_ref = Napi::Reference<Napi::Value>::New(opts.Get("hostCopyOffsets"), 1);
  }
  ctx->tier = state;
  auto handle = Napi::External<Handle>::New(env, new Handle{state}, [](Napi::Env, Handle* h) { delete h; });
  handle.TypeTag(&kTierTag);
  return handle;
}

Napi::Value TierExpertBytes(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierExpertBytes");
  if (!s) return info.Env().Undefined();
  const mt::LayerWeights& L = s->model->model->layers[0];
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("container", double(L.gate.expert_bytes + L.up.expert_bytes + L.down.expert_bytes));
  o.Set("hostCopy", double(s->tier->host_copy_bytes));
  return o;
}

Napi::Value TierRequestSwap(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierRequestSwap");
  int32_t layer = 0, victim = 0, newcomer = 0;
  if (!s || !ArgInt(info, 1, "tierRequestSwap: layer", 0, s->tier->n_layer - 1, &layer) ||
      !ArgInt(info, 2, "tierRequestSwap: victim", 0, s->tier->n_expert - 1, &victim) ||
      !ArgInt(info, 3, "tierRequestSwap: newcomer", 0, s->tier->n_expert - 1, &newcomer))
    return info.Env().Undefined();
  const double task = info[4].IsNumber() ? info[4].As<Napi::Number>().DoubleValue() : NAN;
  if (!(std::fabs(task) <= 9007199254740991.0 && task == std::floor(task)))
    return ThrowRange(info.Env(), "tierRequestSwap: taskId: expected a safe integer");
  bool issue_now = false;
  if (info.Length() > 5 && !info[5].IsUndefined()) {
    if (!info[5].IsObject()) return mtjs::ThrowTypeError(info.Env(), "tierRequestSwap: options: expected { issueNow?: boolean }");
    issue_now = info[5].As<Napi::Object>().Get("issueNow").ToBoolean().Value();
  }
  return Napi::Number::New(info.Env(), mt::tier_request_swap(*s->tier, layer, victim, newcomer, task, issue_now));
}

Napi::Value TierPoll(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierPoll");
  if (!s) return env.Undefined();
  std::vector<mt::UploadReport> uploads;
  std::vector<mt::Eviction> evicted;
  mt::tier_drain(*s->tier, &uploads, &evicted);
  Napi::Array up = Napi::Array::New(env, uploads.size());
  for (size_t i = 0; i < uploads.size(); i++) {
    const mt::UploadReport& r = uploads[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("taskId", r.task_id);
    o.Set("layer", r.layer);
    o.Set("expert", r.expert);
    o.Set("victim", r.victim);
    o.Set("ok", r.ok);
    o.Set("inPlace", r.in_place);
    o.Set("fellBack", r.fell_back);
    o.Set("bytes", double(r.bytes));
    o.Set("issuedNs", double(r.issued_ns));
    o.Set("startNs", double(r.start_ns));
    o.Set("endNs", double(r.end_ns));
    up.Set(uint32_t(i), o);
  }
  Napi::Array ev = Napi::Array::New(env, evicted.size());
  for (size_t i = 0; i < evicted.size(); i++) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("layer", evicted[i].layer);
    o.Set("expert", evicted[i].expert);
    ev.Set(uint32_t(i), o);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("uploads", up);
  out.Set("evicted", ev);
  return out;
}

Napi::Value TierResidency(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierResidency");
  if (!s) return info.Env().Undefined();
  const size_t n = size_t(s->tier->n_layer) * size_t(s->tier->n_expert);
  Napi::Int32Array out = Napi::Int32Array::New(info.Env(), n);
  for (size_t i = 0; i < n; i++) out[i] = s->tier->residency[i].load(std::memory_order_acquire);
  return out;
}

Napi::Value TierStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierStats");
  if (!s) return env.Undefined();
  mt_tier& t = *s->tier;
  Napi::Object o = Napi::Object::New(env);
  o.Set("hits", double(t.hits.load()));
  o.Set("misses", double(t.misses.load()));
  o.Set("lazyMisses", double(t.lazy_misses.load()));
  int64_t leases = 0;
  Napi::Array used = Napi::Array::New(env, size_t(t.n_layer)), budget = Napi::Array::New(env, size_t(t.n_layer));
  std::lock_guard<std::mutex> lock(t.mu);
  for (int32_t l = 0; l < t.n_layer; l++) {
    int32_t n = 0;
    for (int32_t slot : t.layer_slots[size_t(l)]) {
      n += t.slot_expert[size_t(slot)] >= 0;
      leases += mt_backend_lease_count(t.backend, slot);
    }
    used.Set(uint32_t(l), n);
    budget.Set(uint32_t(l), int32_t(t.layer_slots[size_t(l)].size()));
  }
  for (int32_t slot : t.spare_slots) leases += mt_backend_lease_count(t.backend, slot);
  o.Set("leases", double(leases));
  o.Set("slotsSpare", double(t.spare_slots.size()));
  o.Set("slotsUsed", used);
  o.Set("slotsBudget", budget);
  o.Set("reportsDropped", double(t.reports_dropped));
  o.Set("layerHookCalls", double(t.hook_calls.load()));
  o.Set("layerHookNs", double(t.hook_ns.load()));
  o.Set("layerHookDropped", double(t.hook_dropped.load()));
  o.Set("swapsStartedNow", double(t.swaps_started_now.load()));
  return o;
}

Napi::Value TierResetStats(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierResetStats");
  if (s) s->tier->hits = 0, s->tier->misses = 0, s->tier->lazy_misses = 0;
  return info.Env().Undefined();
}

// Waits for a warmstart's uploads off the event loop; holds the tier until it settles.
class WarmWorker : public Napi::AsyncWorker {
 public:
  WarmWorker(Napi::Env env, std::shared_ptr<TierState> s, std::vector<mt::WarmUpload> uploads, std::string issue_error,
             Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "moetier.tierWarmstart"), state_(std::move(s)), uploads_(std::move(uploads)), error_(std::move(issue_error)),
        deferred_(deferred) {
    state_->warm_running++;
  }
  void Execute() override {
    char err[512] = "";
    if (!mt::tier_warm_finish(*state_->tier, uploads_, err, sizeof err) && error_.empty()) error_ = err;
  }
  void OnOK() override {
    state_->warm_running--;
    if (error_.empty()) deferred_.Resolve(Env().Undefined());
    else deferred_.Reject(mtjs::New(Env(), mtjs::Kind::kError, mtjs::kTierFailed, error_).Value());
  }

 private:
  std::shared_ptr<TierState> state_;
  std::vector<mt::WarmUpload> uploads_;
  std::string error_;
  Napi::Promise::Deferred deferred_;
};

Napi::Value TierWarmstart(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  auto s = Unwrap(info, "tierWarmstart");
  int32_t layer = 0;
  int32_t* experts = nullptr;
  size_t n = 0;
  if (s && ArgInt(info, 1, "tierWarmstart: layer", 0, s->tier->n_layer - 1, &layer) &&
      !TypedArg(info[2], napi_int32_array, &experts, &n))
    mtjs::ThrowTypeError(env, "tierWarmstart: experts: expected an Int32Array");
  if (env.IsExceptionPending()) {
    deferred.Reject(env.GetAndClearPendingException().Value());
    return deferred.Promise();
  }
  std::vector<mt::WarmUpload> uploads;
  char err[512] = "";
  const bool issued = mt::tier_warm_issue(*s->tier, layer, experts, int32_t(n), &uploads, err, sizeof err);
  if (!issued && uploads.empty()) {
    deferred.Reject(mtjs::New(env, mtjs::Kind::kRangeError, mtjs::kBadArgument, err).Value());
    return deferred.Promise();
  }
  (new WarmWorker(env, s, std::move(uploads), issued ? "" : err, deferred))->Queue();
  return deferred.Promise();
}

// tierResize(tier, layer, slots, victims: Int32Array): between evals and warmstarts only.
Napi::Value TierResize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierResize");
  int32_t layer = 0, count = 0;
  if (!s || !ArgInt(info, 1, "tierResize: layer", 0, s->tier->n_layer - 1, &layer) ||
      !ArgInt(info, 2, "tierResize: slots", 0, s->tier->n_expert, &count))
    return env.Undefined();
  int32_t* victims = nullptr;
  size_t n = 0;
  if (!TypedArg(info[3], napi_int32_array, &victims, &n))
    return mtjs::ThrowTypeError(env, "tierResize: victims: expected an Int32Array");
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy) return Throw(env, mtjs::kBusy, "tierResize: an eval is running on its context; await it first");
  if (s->warm_running > 0) return Throw(env, mtjs::kBusy, "tierResize: a tierWarmstart is still running; await it first");
  char err[512] = "";
  if (!mt::tier_resize(*s->tier, layer, count, victims, int32_t(n), err, sizeof err)) return Throw(env, mtjs::kTierFailed, err);
  return env.Undefined();
}

Napi::Value FreeTier(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "freeTier");
  if (!s) return env.Undefined();
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy) return Throw(env, mtjs::kBusy, "freeTier: an eval is running on its context; await it first");
  if (s->warm_running > 0) return Throw(env, mtjs::kBusy, "freeTier: a tierWarmstart is still running; await it first");
  if (ctx && ctx->tier == s) ctx->tier.reset();
  s->close();
  return env.Undefined();
}

Napi::Value RequantizeExpertToQ8(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto model = UnwrapModel(env, info[0]);
  if (!model) return env.Undefined();
  if (model->file->closed) return Throw(env, mtjs::kFreed, "requantizeExpertToQ8: the model's file was unmapped");
  const mt_hparams& hp = *mt_model_hparams(model->model);
  int32_t layer = 0, expert = 0;
  if (!ArgInt(info, 1, "requantizeExpertToQ8: layer", 0, hp.n_layer - 1, &layer) ||
      !ArgInt(info, 2, "requantizeExpertToQ8: expert", 0, hp.n_expert - 1, &expert))
    return env.Undefined();
  uint8_t* dst = nullptr;
  size_t length = 0;
  if (!TypedArg(info[3], napi_uint8_array, &dst, &length))
    return mtjs::ThrowTypeError(env, "requantizeExpertToQ8: dst: expected a Uint8Array");
  int32_t offset = 0;
  if (!ArgInt(info, 4, "requantizeExpertToQ8: dstOffset", 0, double(length), &offset)) return env.Undefined();
  char err[512] = "";
  if (!mt::tier_requantize(*model->model, layer, expert, dst + offset, length - size_t(offset), err, sizeof err))
    return ThrowRange(env, err);
  return env.Undefined();
}

}  // namespace

void RegisterTier(Napi::Env env, Napi::Object exports) {
  exports.Set("createTier", Napi::Function::New(env, CreateTier));
  exports.Set("tierExpertBytes", Napi::Function::New(env, TierExpertBytes));
  exports.Set("tierWarmstart", Napi::Function::New(env, TierWarmstart));
  exports.Set("tierRequestSwap", Napi::Function::New(env, TierRequestSwap));
  exports.Set("tierPoll", Napi::Function::New(env, TierPoll));
  exports.Set("tierResidency", Napi::Function::New(env, TierResidency));
  exports.Set("tierStats", Napi::Function::New(env, TierStats));
  exports.Set("tierResetStats", Napi::Function::New(env, TierResetStats));
  exports.Set("tierResize", Napi::Function::New(env, TierResize));
  exports.Set("freeTier", Napi::Function::New(env, FreeTier));
  exports.Set("requantizeExpertToQ8", Napi::Function::New(env, RequantizeExpertToQ8));
}
