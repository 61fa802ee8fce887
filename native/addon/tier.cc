// Tier verbs over include/mt_tier.h (declared in src/native/binding.ts).
//
//   createTier(ctx, backend, { slotsPerLayer, hostCopies?, hostCopyOffsets?, streamFile? }) -> tier handle
//       attaches the tier to the context (its evals use it); the tier holds the model, the
//       backend and the host-copy arrays alive
//   tierExpertBytes / tierStats / tierResetStats / tierRequestSwap / tierPoll
//   tierPoll between evals first issues what the last eval's boundaries posted (mt_tier_flush)
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
#include "errors.h"
#include "model_napi.h"
#include "typed_arg.h"
#include "mt_tier.h"

struct TierState {
  mt_tier* tier = nullptr;
  std::shared_ptr<ModelState> model;  // the weights the tier uploads from
  std::shared_ptr<mt_backend> backend;
  std::weak_ptr<ContextState> ctx;
  Napi::Reference<Napi::Value> host_ref, offsets_ref;  // the arrays the eval reads
  int warm_running = 0;                                // warmstarts not settled yet (JS thread)
  int32_t n_layer = 0, n_expert = 0;
  // Waits for in-flight uploads (tier_destroy), then lets go of the model, so that its
  // mapping can be unmapped right after freeTier rather than when the handle is collected.
  void close() {
    mt_tier_free(tier);
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

Napi::Value ThrowRange(Napi::Env env, const std::string& message) { return mtjs::ThrowRangeError(env, message); }

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
    ThrowRange(info.Env(), what + ": expected an integer in [" + std::to_string(int64_t(lo)) + ", " +
                               std::to_string(int64_t(hi)) + "]");
    return false;
  }
  *out = int32_t(v);
  return true;
}

// Reads { slotsPerLayer, hostCopies?, hostCopyOffsets? } into o; false with a message.
bool ReadOptions(Napi::Value v, const mt_hparams& hp, std::vector<int32_t>* slots_per_layer, mt_tier_options* o,
                 std::string* err) {
  if (!v.IsObject()) return *err = "options: expected { slotsPerLayer, hostCopies?, hostCopyOffsets? }", false;
  Napi::Object opts = v.As<Napi::Object>();
  Napi::Value slots = opts.Get("slotsPerLayer");
  if (!slots.IsArray())
    return *err = "options.slotsPerLayer: expected an array of " + std::to_string(mt_moe_layers(&hp)) +
                  " integers (one per MoE layer)",
           false;
  Napi::Array a = slots.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value n = a.Get(i);
    const double d = n.IsNumber() ? n.As<Napi::Number>().DoubleValue() : NAN;
    if (!(d >= 0 && d <= hp.n_expert && d == std::floor(d)))
      return *err = "options.slotsPerLayer[" + std::to_string(i) + "]: expected an integer in [0, " +
                    std::to_string(hp.n_expert) + "]",
             false;
    slots_per_layer->push_back(int32_t(d));
  }
  o->slots_per_layer = slots_per_layer->data();
  o->n_layer = int32_t(slots_per_layer->size());
  // streamFile: the mapped model file; misses without a host copy are read from it (mt_tier.h).
  Napi::Value stream = opts.Get("streamFile");
  if (!stream.IsUndefined()) {
    MappedFile* file = UnwrapMappedFile(v.Env(), stream);
    if (file == nullptr) {
      v.Env().GetAndClearPendingException();  // the caller throws one error, with the option named
      return *err = "options.streamFile: expected the model's mapped file handle (open, not unmapped)", false;
    }
    o->stream_fd = file->fd, o->stream_base = static_cast<const uint8_t*>(file->base);
  }
  // streamFailAfterBytes (tests only): the streamed read that takes the bytes read past it fails.
  Napi::Value fail_after = opts.Get("streamFailAfterBytes");
  if (!fail_after.IsUndefined()) {
    const double d = fail_after.IsNumber() ? fail_after.As<Napi::Number>().DoubleValue() : NAN;
    if (!(d >= 1 && d <= 9007199254740991.0 && d == std::floor(d)) || o->stream_fd < 0)
      return *err = "options.streamFailAfterBytes: expected an integer >= 1, with streamFile", false;
    o->stream_fail_after_bytes = uint64_t(d);
  }
  Napi::Value host = opts.Get("hostCopies"), offsets = opts.Get("hostCopyOffsets");
  if (host.IsUndefined() != offsets.IsUndefined())
    return *err = "options.hostCopies and options.hostCopyOffsets: expected both or neither", false;
  if (host.IsUndefined()) return true;
  uint8_t* host_data = nullptr;
  int32_t* offset_data = nullptr;
  size_t host_len = 0, offsets_len = 0;
  if (!TypedArg(host, napi_uint8_array, &host_data, &host_len))
    return *err = "options.hostCopies: expected a Uint8Array", false;
  if (!TypedArg(offsets, napi_int32_array, &offset_data, &offsets_len) ||
      offsets_len != size_t(mt_moe_layers(&hp)) * size_t(hp.n_expert))
    return *err = "options.hostCopyOffsets: expected an Int32Array of nLayer x nExpert = " +
                  std::to_string(size_t(mt_moe_layers(&hp)) * size_t(hp.n_expert)) + " offsets",
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
  std::vector<int32_t> slots_per_layer;
  mt_tier_options o{};
  o.stream_fd = -1;
  std::string why;
  if (!ReadOptions(info[2], hp, &slots_per_layer, &o, &why)) return ThrowRange(env, "createTier: " + why);
  char err[512] = "";
  mt_tier* tier = mt_tier_create(ctx->model->model, backend.get(), &o, err, sizeof err);
  if (tier == nullptr) return Throw(env, mtjs::kTierFailed, std::string("createTier: ") + err);
  auto state = std::make_shared<TierState>();
  state->tier = tier, state->model = ctx->model, state->backend = backend, state->ctx = ctx;
  state->n_layer = mt_moe_layers(&hp), state->n_expert = hp.n_expert;
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
  uint64_t container = 0, host_copy = 0;
  mt_tier_expert_bytes(s->tier, &container, &host_copy);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("container", double(container));
  o.Set("hostCopy", double(host_copy));
  return o;
}

Napi::Value TierRequestSwap(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierRequestSwap");
  int32_t layer = 0, victim = 0, newcomer = 0;
  if (!s || !ArgInt(info, 1, "tierRequestSwap: layer", 0, s->n_layer - 1, &layer) ||
      !ArgInt(info, 2, "tierRequestSwap: victim", 0, s->n_expert - 1, &victim) ||
      !ArgInt(info, 3, "tierRequestSwap: newcomer", 0, s->n_expert - 1, &newcomer))
    return info.Env().Undefined();
  const double task = info[4].IsNumber() ? info[4].As<Napi::Number>().DoubleValue() : NAN;
  if (!(std::fabs(task) <= 9007199254740991.0 && task == std::floor(task)))
    return ThrowRange(info.Env(), "tierRequestSwap: taskId: expected a safe integer");
  bool issue_now = false;
  if (info.Length() > 5 && !info[5].IsUndefined()) {
    if (!info[5].IsObject())
      return mtjs::ThrowTypeError(info.Env(), "tierRequestSwap: options: expected { issueNow?: boolean }");
    issue_now = info[5].As<Napi::Object>().Get("issueNow").ToBoolean().Value();
  }
  return Napi::Number::New(info.Env(), mt_tier_request_swap(s->tier, layer, victim, newcomer, task, issue_now ? 1 : 0));
}

Napi::Value TierPoll(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierPoll");
  if (!s) return env.Undefined();
  auto ctx = s->ctx.lock();
  if (!ctx || !ctx->busy) mt_tier_flush(s->tier);  // between evals: the last eval's boundaries issued first
  // Static: each poll's reports fit (at most MT_TIER_REPORTS_MAX), and the JS thread is the only poller.
  static std::vector<mt_tier_upload> uploads(MT_TIER_REPORTS_MAX);
  static std::vector<mt_tier_eviction> evicted(MT_TIER_REPORTS_MAX);
  static std::vector<mt_tier_read> reads(MT_TIER_REPORTS_MAX);
  int32_t n_uploads = 0, n_evicted = 0, n_reads = 0;
  mt_tier_poll(s->tier, uploads.data(), &n_uploads, evicted.data(), &n_evicted, reads.data(), &n_reads);
  Napi::Array up = Napi::Array::New(env, size_t(n_uploads));
  for (int32_t i = 0; i < n_uploads; i++) {
    const mt_tier_upload& r = uploads[size_t(i)];
    Napi::Object o = Napi::Object::New(env);
    o.Set("taskId", r.task_id);
    o.Set("layer", r.layer);
    o.Set("expert", r.expert);
    o.Set("victim", r.victim);
    o.Set("ok", r.ok != 0);
    o.Set("inPlace", r.in_place != 0);
    o.Set("fellBack", r.fell_back != 0);
    o.Set("admitted", r.admitted != 0);
    o.Set("prefetch", r.prefetch != 0);
    o.Set("bytes", double(r.bytes));
    o.Set("issuedNs", double(r.issued_ns));
    o.Set("startNs", double(r.start_ns));
    o.Set("endNs", double(r.end_ns));
    up.Set(uint32_t(i), o);
  }
  Napi::Array ev = Napi::Array::New(env, size_t(n_evicted));
  for (int32_t i = 0; i < n_evicted; i++) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("layer", evicted[size_t(i)].layer);
    o.Set("expert", evicted[size_t(i)].expert);
    ev.Set(uint32_t(i), o);
  }
  Napi::Array rd = Napi::Array::New(env, size_t(n_reads));
  for (int32_t i = 0; i < n_reads; i++) {
    const mt_tier_read& r = reads[size_t(i)];
    Napi::Object o = Napi::Object::New(env);
    o.Set("layer", r.layer);
    o.Set("expert", r.expert);
    o.Set("bytes", double(r.bytes));
    o.Set("issuedNs", double(r.issued_ns));
    o.Set("startNs", double(r.start_ns));
    o.Set("endNs", double(r.end_ns));
    rd.Set(uint32_t(i), o);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("uploads", up);
  out.Set("evicted", ev);
  out.Set("reads", rd);
  return out;
}

// The one gate's budget, in flight and ledger by class (mt_tier.h, tier_gate.cc).
Napi::Object GateStats(Napi::Env env, const mt_tier_stats& st) {
  Napi::Object g = Napi::Object::New(env);
  g.Set("inflightBytesMax", double(st.gate_bytes_max));
  g.Set("inflightTransfersMax", st.gate_transfers_max);
  g.Set("queueDepthMax", st.gate_queue_max);
  g.Set("inflightBytes", double(st.gate_inflight_bytes));
  g.Set("inflightTransfers", st.gate_inflight_transfers);
  g.Set("swapsQueued", st.gate_swaps_queued);
  const char* classes[MT_TIER_GATE_CLASSES] = {"miss", "prefetch", "swap", "warm"};
  Napi::Object by = Napi::Object::New(env);
  for (int c = 0; c < MT_TIER_GATE_CLASSES; c++) {
    Napi::Object l = Napi::Object::New(env);
    l.Set("issued", double(st.gate_issued[c]));
    l.Set("completed", double(st.gate_completed[c]));
    l.Set("failed", double(st.gate_failed[c]));
    l.Set("refused", double(st.gate_refused[c]));
    l.Set("cancelled", double(st.gate_cancelled[c]));
    by.Set(classes[c], l);
  }
  g.Set("byClass", by);
  return g;
}

// tierSetGate(tier, inflightBytesMax, inflightTransfersMax, queueDepthMax): the one gate's budget (mt_tier.h).
Napi::Value TierSetGate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierSetGate");
  if (!s) return env.Undefined();
  const double bytes = info[1].IsNumber() ? info[1].As<Napi::Number>().DoubleValue() : NAN;
  if (!(bytes >= 1 && bytes <= 9007199254740991.0 && bytes == std::floor(bytes)))
    return ThrowRange(env, "tierSetGate: inflightBytesMax: expected an integer number of bytes >= 1");
  int32_t transfers = 0, queue = 0;
  if (!ArgInt(info, 2, "tierSetGate: inflightTransfersMax", 1, INT32_MAX, &transfers)) return env.Undefined();
  if (!ArgInt(info, 3, "tierSetGate: queueDepthMax", 1, INT32_MAX, &queue)) return env.Undefined();
  mt_tier_set_gate(s->tier, uint64_t(bytes), transfers, queue);
  return env.Undefined();
}

// tierGate(tier): the one gate's budget, in flight and ledger, alone (cheaper than tierStats).
Napi::Value TierGate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierGate");
  if (!s) return env.Undefined();
  mt_tier_stats st{};
  mt_tier_gate_stats(s->tier, &st);
  return GateStats(env, st);
}

// tierCancelSwaps(tier) between evals: the swaps still queued at the gate are dropped; how many.
Napi::Value TierCancelSwaps(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierCancelSwaps");
  if (!s) return env.Undefined();
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy)
    return Throw(env, mtjs::kBusy, "tierCancelSwaps: an eval is running on this tier; await it first");
  return Napi::Number::New(env, mt_tier_cancel_swaps(s->tier));
}

// tierSetPolicy(tier, mode: 'off' | 'evict' | 'keep', halfLifeTokens, prior?: Float64Array
// [nLayer * nExpert]) between evals: the tier's eviction policy (mt_tier.h mt_tier_set_policy).
Napi::Value TierSetPolicy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierSetPolicy");
  if (!s) return env.Undefined();
  const std::string mode = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  const int32_t m = mode == "off"     ? MT_TIER_POLICY_OFF
                    : mode == "evict" ? MT_TIER_POLICY_EVICT
                    : mode == "keep"  ? MT_TIER_POLICY_KEEP
                                      : -1;
  const double half_life = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : NAN;
  double* prior = nullptr;
  size_t n = 0;
  if (!info[3].IsUndefined() && !TypedArg(info[3], napi_float64_array, &prior, &n))
    return ThrowRange(env, "tierSetPolicy: prior: expected a Float64Array");
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy)
    return Throw(env, mtjs::kBusy, "tierSetPolicy: an eval is running on this tier; await it first");
  if (m < 0 || mt_tier_set_policy(s->tier, m, half_life, prior, n) != MT_TIER_OK)
    return ThrowRange(env, "tierSetPolicy: expected mode 'off', 'evict' or 'keep', halfLifeTokens in [1, " +
                               std::to_string(int64_t(MT_DLFU_HALF_LIFE_MAX)) + "] and a prior of nLayer x nExpert = " +
                               std::to_string(size_t(s->n_layer) * size_t(s->n_expert)) +
                               " finite counts >= 0 (or none)");
  return env.Undefined();
}

// tierPolicyTick(tier) between evals: one decode token passed (the policy's clock).
Napi::Value TierPolicyTick(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierPolicyTick");
  if (!s) return env.Undefined();
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy)
    return Throw(env, mtjs::kBusy, "tierPolicyTick: an eval is running on this tier; await it first");
  mt_tier_policy_tick(s->tier);
  return env.Undefined();
}

// tierPolicyScores(tier) -> Float64Array [nLayer * nExpert]: each expert's score (mt_policy.h).
Napi::Value TierPolicyScores(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierPolicyScores");
  if (!s) return env.Undefined();
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy)
    return Throw(env, mtjs::kBusy, "tierPolicyScores: an eval is running on this tier; await it first");
  const size_t n = size_t(s->n_layer) * size_t(s->n_expert);
  Napi::Float64Array out = Napi::Float64Array::New(env, n);
  mt_tier_policy_scores(s->tier, out.Data(), n);
  return out;
}

// tierSetPrefetch(tier, mode: 'off' | 'observe' | 'enforce', predictK, budget?: Int32Array [nLayer],
// queueMax?) between evals (mt_tier.h, tier_prefetch.cc); its bytes in flight are the gate's.
Napi::Value TierSetPrefetch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierSetPrefetch");
  if (!s) return env.Undefined();
  const std::string mode = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  const int32_t m = mode == "off"       ? MT_TIER_PREFETCH_OFF
                    : mode == "observe" ? MT_TIER_PREFETCH_OBSERVE
                    : mode == "enforce" ? MT_TIER_PREFETCH_ENFORCE
                                        : -1;
  const int32_t k = info[2].IsNumber() ? info[2].As<Napi::Number>().Int32Value() : 0;
  int32_t* budget = nullptr;
  size_t n = 0;
  if (!info[3].IsUndefined() && !TypedArg(info[3], napi_int32_array, &budget, &n))
    return ThrowRange(env, "tierSetPrefetch: budget: expected an Int32Array");
  const int32_t queue_max = info[4].IsNumber() ? info[4].As<Napi::Number>().Int32Value() : MT_TIER_PREFETCH_QUEUE_MAX;
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy)
    return Throw(env, mtjs::kBusy, "tierSetPrefetch: an eval is running on this tier; await it first");
  if (m < 0 || mt_tier_set_prefetch(s->tier, m, k, budget, n, queue_max) != MT_TIER_OK)
    return ThrowRange(
        env,
        "tierSetPrefetch: expected mode 'off', 'observe' or 'enforce'; with a mode other than off, predictK in "
        "[1, nExpert], a budget of nLayer counts in [0, nExpert] and queueMax in [1, " +
            std::to_string(MT_TIER_PREFETCH_QUEUE_MAX) + "]");
  return env.Undefined();
}

// tierSetPrefillPath(tier, 'on-demand' | 'whole-layer') between evals (mt_tier.h, tier_bulk.cc).
Napi::Value TierSetPrefillPath(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierSetPrefillPath");
  if (!s) return env.Undefined();
  const std::string path = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  const int32_t p = path == "on-demand"     ? MT_TIER_PREFILL_ON_DEMAND
                    : path == "whole-layer" ? MT_TIER_PREFILL_WHOLE_LAYER
                                            : -1;
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy)
    return Throw(env, mtjs::kBusy, "tierSetPrefillPath: an eval is running on this tier; await it first");
  if (p < 0 || mt_tier_set_prefill_path(s->tier, p) != MT_TIER_OK)
    return ThrowRange(
        env, "tierSetPrefillPath: expected 'on-demand', or 'whole-layer' on a tier reading its misses (streamFile)");
  return env.Undefined();
}

// tierExpertStates(tier, into?) -> { states: Uint8Array, slots: Int32Array } ([nLayer * nExpert] each:
// enum mt_expert_state, and the slot compute reads or -1), one consistent snapshot.
Napi::Value TierExpertStates(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierExpertStates");
  if (!s) return info.Env().Undefined();
  const size_t n = size_t(s->n_layer) * size_t(s->n_expert);
  // into: { states, slots } of the right lengths, filled in place (one step's read, no allocation).
  if (info.Length() > 1 && !info[1].IsUndefined()) {
    uint8_t* states = nullptr;
    int32_t* slots = nullptr;
    size_t ns = 0, nl = 0;
    Napi::Object into = info[1].IsObject() ? info[1].As<Napi::Object>() : Napi::Object::New(info.Env());
    if (!TypedArg(into.Get("states"), napi_uint8_array, &states, &ns) ||
        !TypedArg(into.Get("slots"), napi_int32_array, &slots, &nl) || ns != n || nl != n)
      return ThrowRange(
          info.Env(),
          "tierExpertStates: into: expected { states: Uint8Array, slots: Int32Array } of nLayer x nExpert = " +
              std::to_string(n) + " each");
    mt_tier_expert_states(s->tier, states, slots);
    return info[1];
  }
  Napi::Uint8Array states = Napi::Uint8Array::New(info.Env(), n);
  Napi::Int32Array slots = Napi::Int32Array::New(info.Env(), n);
  mt_tier_expert_states(s->tier, states.Data(), slots.Data());
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("states", states);
  out.Set("slots", slots);
  return out;
}

Napi::Value TierStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierStats");
  if (!s) return env.Undefined();
  mt_tier_stats st{};
  std::vector<int32_t> used_n(size_t(s->n_layer)), budget_n(size_t(s -> n_layer));
  mt_tier_stats_get(s->tier, &st, used_n.data(), budget_n.data());
  Napi::Object o = Napi::Object::New(env);
  o.Set("hits", double(st.hits));
  o.Set("misses", double(st.misses));
  o.Set("lazyMisses", double(st.lazy_misses));
  Napi::Array used = Napi::Array::New(env, size_t(s->n_layer)), budget = Napi::Array::New(env, size_t(s->n_layer));
  for (int32_t l = 0; l < s->n_layer; l++)
    used.Set(uint32_t(l), used_n[size_t(l)]), budget.Set(uint32_t(l), budget_n[size_t(l)]);
  o.Set("leases", double(st.leases));
  o.Set("slotsSpare", double(st.slots_spare));
  o.Set("slotsUsed", used);
  o.Set("slotsBudget", budget);
  o.Set("reportsDropped", double(st.reports_dropped));
  o.Set("layerHookCalls", double(st.hook_calls));
  o.Set("layerHookNs", double(st.hook_ns));
  o.Set("layerHookDropped", double(st.hook_dropped));
  o.Set("swapsStartedNow", double(st.swaps_started_now));
  o.Set("swapsIssuedByIssuer", double(st.swaps_issued_by_issuer));
  o.Set("boundariesPosted", double(st.boundaries_posted));
  o.Set("issuerStalePosts", double(st.stale_posts));
  o.Set("streamedReads", double(st.streamed_reads));
  o.Set("streamedBytes", double(st.streamed_bytes));
  o.Set("streamFailures", double(st.stream_failures));
  o.Set("admittedReads", double(st.admitted_reads));
  o.Set("streamEngineBytes", double(st.stream_engine_bytes));
  o.Set("stallNs", double(st.stall_ns));
  o.Set("expertReads", double(st.expert_reads));
  o.Set("distinctExpertsRead", double(st.distinct_experts_read));
  o.Set("bulkLayers", double(st.bulk_layers));
  std::vector<uint64_t> paths(size_t(s->n_layer) * 2);
  mt_tier_path_by_layer(s->tier, paths.data(), paths.size());
  Napi::Array on_demand = Napi::Array::New(env, size_t(s->n_layer)), whole = Napi::Array::New(env, size_t(s->n_layer));
  for (int32_t l = 0; l < s->n_layer; l++)
    on_demand.Set(uint32_t(l), double(paths[size_t(l) * 2])), whole.Set(uint32_t(l), double(paths[size_t(l) * 2 + 1]));
  Napi::Object path_calls = Napi::Object::New(env);
  path_calls.Set("onDemand", on_demand);
  path_calls.Set("wholeLayer", whole);
  o.Set("pathCalls", path_calls);
  Napi::Object prefetch = Napi::Object::New(info.Env());
  prefetch.Set("covered", double(st.prefetch_covered));
  prefetch.Set("late", double(st.prefetch_late));
  prefetch.Set("lateNs", double(st.prefetch_late_ns));
  prefetch.Set("wasted", double(st.prefetch_wasted));
  prefetch.Set("uncovered", double(st.prefetch_uncovered));
  prefetch.Set("wouldIssue", double(st.prefetch_would_issue));
  prefetch.Set("wouldCover", double(st.prefetch_would_cover));
  prefetch.Set("queued", double(st.prefetch_queued));
  prefetch.Set("refused", double(st.prefetch_refused));
  prefetch.Set("issued", double(st.prefetch_issued));
  prefetch.Set("completed", double(st.prefetch_completed));
  prefetch.Set("failed", double(st.prefetch_failed));
  prefetch.Set("cancelled", double(st.prefetch_cancelled));
  prefetch.Set("dropped", double(st.prefetch_dropped));
  prefetch.Set("admittedBytes", double(st.prefetch_admitted_bytes));
  prefetch.Set("retiredBytes", double(st.prefetch_retired_bytes));
  prefetch.Set("inflightBytes", double(st.prefetch_inflight_bytes));
  prefetch.Set("queueLength", st.prefetch_queue_length);
  // By layer: [covered, late, wasted, uncovered] per layer since the stats mark.
  std::vector<uint64_t> by(size_t(s->n_layer) * 4);
  mt_tier_prefetch_by_layer(s->tier, by.data(), by.size());
  const char* names[] = {"covered", "late", "wasted", "uncovered"};
  Napi::Object layers = Napi::Object::New(env);
  for (int k = 0; k < 4; k++) {
    Napi::Array a = Napi::Array::New(env, size_t(s->n_layer));
    for (int32_t l = 0; l < s->n_layer; l++) a.Set(uint32_t(l), double(by[size_t(l) * 4 + size_t(k)]));
    layers.Set(names[k], a);
  }
  prefetch.Set("byLayer", layers);
  o.Set("gate", GateStats(env, st));
  o.Set("prefetch", prefetch);
  return o;
}

Napi::Value TierResetStats(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info, "tierResetStats");
  if (s) mt_tier_reset_stats(s->tier);
  return info.Env().Undefined();
}

// Waits for a warmstart's uploads off the event loop; holds the tier until it settles.
class WarmWorker : public Napi::AsyncWorker {
 public:
  WarmWorker(Napi::Env env, std::shared_ptr<TierState> s, mt_tier_warm* uploads, std::string issue_error,
             Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "moetier.tierWarmstart"),
        state_(std::move(s)),
        uploads_(uploads),
        error_(std::move(issue_error)),
        deferred_(deferred) {
    state_->warm_running++;
  }
  void Execute() override {
    char err[512] = "";
    if (mt_tier_warm_finish(state_->tier, uploads_, err, sizeof err) != MT_TIER_OK && error_.empty()) error_ = err;
  }
  void OnOK() override {
    state_->warm_running--;
    if (error_.empty())
      deferred_.Resolve(Env().Undefined());
    else
      deferred_.Reject(mtjs::New(Env(), mtjs::Kind::kError, mtjs::kTierFailed, error_).Value());
  }

 private:
  std::shared_ptr<TierState> state_;
  mt_tier_warm* uploads_;  // finish frees it
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
  if (s && ArgInt(info, 1, "tierWarmstart: layer", 0, s->n_layer - 1, &layer) &&
      !TypedArg(info[2], napi_int32_array, &experts, &n))
    mtjs::ThrowTypeError(env, "tierWarmstart: experts: expected an Int32Array");
  if (env.IsExceptionPending()) {
    deferred.Reject(env.GetAndClearPendingException().Value());
    return deferred.Promise();
  }
  char err[512] = "";
  int status = MT_TIER_OK;
  mt_tier_warm* uploads = mt_tier_warm_issue(s->tier, layer, experts, int32_t(n), &status, err, sizeof err);
  if (uploads == nullptr) {
    deferred.Reject(mtjs::New(env, mtjs::Kind::kRangeError, mtjs::kBadArgument, err).Value());
    return deferred.Promise();
  }
  (new WarmWorker(env, s, uploads, status == MT_TIER_OK ? "" : err, deferred))->Queue();
  return deferred.Promise();
}

// tierResize(tier, layer, slots, victims: Int32Array): between evals and warmstarts only.
Napi::Value TierResize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info, "tierResize");
  int32_t layer = 0, count = 0;
  if (!s || !ArgInt(info, 1, "tierResize: layer", 0, s->n_layer - 1, &layer) ||
      !ArgInt(info, 2, "tierResize: slots", 0, s->n_expert, &count))
    return env.Undefined();
  int32_t* victims = nullptr;
  size_t n = 0;
  if (!TypedArg(info[3], napi_int32_array, &victims, &n))
    return mtjs::ThrowTypeError(env, "tierResize: victims: expected an Int32Array");
  auto ctx = s->ctx.lock();
  if (ctx && ctx->busy) return Throw(env, mtjs::kBusy, "tierResize: an eval is running on its context; await it first");
  if (s->warm_running > 0)
    return Throw(env, mtjs::kBusy, "tierResize: a tierWarmstart is still running; await it first");
  char err[512] = "";
  if (mt_tier_resize(s->tier, layer, count, victims, int32_t(n), err, sizeof err) != MT_TIER_OK)
    return Throw(env, mtjs::kTierFailed, err);
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
  if (!ArgInt(info, 1, "requantizeExpertToQ8: layer", 0, mt_moe_layers(&hp) - 1, &layer) ||
      !ArgInt(info, 2, "requantizeExpertToQ8: expert", 0, hp.n_expert - 1, &expert))
    return env.Undefined();
  uint8_t* dst = nullptr;
  size_t length = 0;
  if (!TypedArg(info[3], napi_uint8_array, &dst, &length))
    return mtjs::ThrowTypeError(env, "requantizeExpertToQ8: dst: expected a Uint8Array");
  int32_t offset = 0;
  if (!ArgInt(info, 4, "requantizeExpertToQ8: dstOffset", 0, double(length), &offset)) return env.Undefined();
  char err[512] = "";
  if (mt_tier_requantize(model->model, layer, expert, dst + offset, length - size_t(offset), err, sizeof err) !=
      MT_TIER_OK)
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
  exports.Set("tierSetPolicy", Napi::Function::New(env, TierSetPolicy));
  exports.Set("tierSetGate", Napi::Function::New(env, TierSetGate));
  exports.Set("tierCancelSwaps", Napi::Function::New(env, TierCancelSwaps));
  exports.Set("tierGate", Napi::Function::New(env, TierGate));
  exports.Set("tierPolicyTick", Napi::Function::New(env, TierPolicyTick));
  exports.Set("tierPolicyScores", Napi::Function::New(env, TierPolicyScores));
  exports.Set("tierSetPrefetch", Napi::Function::New(env, TierSetPrefetch));
  exports.Set("tierSetPrefillPath", Napi::Function::New(env, TierSetPrefillPath));
  exports.Set("tierExpertStates", Napi::Function::New(env, TierExpertStates));
  exports.Set("tierStats", Napi::Function::New(env, TierStats));
  exports.Set("tierResetStats", Napi::Function::New(env, TierResetStats));
  exports.Set("tierResize", Napi::Function::New(env, TierResize));
  exports.Set("freeTier", Napi::Function::New(env, FreeTier));
  exports.Set("requantizeExpertToQ8", Napi::Function::New(env, RequantizeExpertToQ8));
}
