// Backend verbs over include/mt_backend.h (src/native/backend.ts wraps them).
//
//   createBackend(kind, config) -> handle      backendPreset(name) -> config
//   slotsReserve / upload / freeSlot / slotState / overwriteSupported
//   eventQuery (sync) / eventWait (Promise: an AsyncWorker blocks off the event loop)
//   computeRecord / lease / release / leaseCount / backendStats (a disk backend's adds `disk`:
//                                 its read engine, native/include/mt_backend_disk.h)
//   slotRead(handle, slot, out)   copies a slot's bytes out (tests); the forward pass reads
//                                 mt_backend_slot_data natively, never through JS
//   destroyBackend(handle)        waits for in-flight uploads (after the last eventWait settles)
//   diskHold(handle, hold)        test only (disk): while held, its read engine starts no read
//   runExpert(handle, slot, args)  a resident expert on the device (cuda, cuda-sim; native/include/mt_backend_cuda.h)
//   cudaSlotRead(handle, slot, out) test only (cuda, cuda-sim): a slot's bytes copied back from the device
//   cudaLibraryPath() / cudaLimits()  where the cuda kind looks for its library; the staging ring's sizes
//
// A cuda create refused because there is no usable device throws MT_DEVICE_UNAVAILABLE with
// `deviceUnavailable` ('not-built', 'load-failed', 'no-driver', 'no-device'): backend.ts turns
// it into a DeviceUnavailableError.
//
// An upload's source typed arrays stay referenced until its event has finished: the map
// `sources` is swept on every verb and emptied on destroy, after the uploads drained.
// Operating errors throw an Error with `backendStatus` (mt_backend_status_name) that the
// wrapper turns into a typed BackendError, and code MT_BACKEND_<STATUS> (errors.h); a bad slot
// or event id is a RangeError (MT_BAD_ARGUMENT).
//
// The debug build (MT_DEBUG_ASSERTS) adds debugBackendRecomplete, which breaks an invariant
// on purpose (see there).
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include "errors.h"
#include "mt_assert.h"
#include "mt_backend.h"
#include "mt_io.h"
#include "registry.h"
#include "mt_backend_disk.h"
#include "mt_backend_cuda.h"
#if MT_DEBUG_ASSERTS_ENABLED
#include "mt_backend_debug.h"
#endif

namespace {

constexpr napi_type_tag kBackendTag = {0x6d6f6574696572ULL, 0x4241434b454e44ULL};

struct BackendState {
  mt_backend* backend = nullptr;
  std::unordered_map<mt_event_id, std::vector<Napi::Reference<Napi::Value>>> sources;  // JS thread only
  ~BackendState() {
    mt_backend_destroy(backend);  // drains first: the sources below outlive every copy
    sources.clear();
  }
};

struct Handle {
  std::shared_ptr<BackendState> state;
};

// A refusal with this status, not thrown (EventWaitWorker rejects with it).
Napi::Error StatusError(Napi::Env env, int status, const std::string& message) {
  if (status == MT_BACKEND_INVALID) return mtjs::New(env, mtjs::Kind::kRangeError, mtjs::kBadArgument, message);
  Napi::Error e = mtjs::New(env, mtjs::Kind::kError, mtjs::BackendCode(mt_backend_status_name(status)), message);
  e.Set("backendStatus", Napi::String::New(env, mt_backend_status_name(status)));
  return e;
}

Napi::Value Throw(Napi::Env env, int status, const std::string& message) {
  StatusError(env, status, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value TypeError(Napi::Env env, const std::string& message) { return mtjs::ThrowTypeError(env, message); }

// Releases the sources of finished uploads.
void Sweep(BackendState& s) {
  for (auto it = s.sources.begin(); it != s.sources.end();) {
    mt_event_info info{};
    const bool finished = mt_backend_event_query(s.backend, it->first, &info, nullptr, 0) != MT_BACKEND_OK ||
                          info.state != MT_EVENT_PENDING;
    it = finished ? s.sources.erase(it) : std::next(it);
  }
}

std::shared_ptr<BackendState> Unwrap(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Value v = info[0];
  if (!v.IsExternal() || !v.As<Napi::External<Handle>>().CheckTypeTag(&kBackendTag)) {
    TypeError(env, "expected a backend handle");
    return nullptr;
  }
  auto state = v.As<Napi::External<Handle>>().Data()->state;
  if (!state)
    mtjs::ThrowError(env, mtjs::kFreed, "the backend was already destroyed");
  else
    Sweep(*state);
  return state;
}

// A non-negative integer argument (ids, counts, byte sizes up to 2^53).
bool ArgUint(const Napi::CallbackInfo& info, size_t i, const char* what, double max, uint64_t* out) {
  const double v = i < info.Length() && info[i].IsNumber() ? info[i].As<Napi::Number>().DoubleValue() : -1;
  if (!(v >= 0 && v <= max) || v != double(uint64_t(v))) {
    mtjs::ThrowRangeError(info.Env(),
                          std::string(what) + ": expected an integer in [0, " + std::to_string(uint64_t(max)) + "]");
    return false;
  }
  *out = uint64_t(v);
  return true;
}

double Number(Napi::Object o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : fallback;
}

Napi::Object ConfigObject(Napi::Env env, const mt_backend_config& c) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("budgetBytes", double(c.budget_bytes));
  o.Set("bandwidthBytesPerS", c.bandwidth_bytes_per_s);
  o.Set("transferFixedUs", c.transfer_fixed_us);
  o.Set("computeBytesPerS", c.compute_bytes_per_s);
  o.Set("overwriteSupported", c.overwrite_supported != 0);
  o.Set("failTransferAfterBytes", double(c.fail_transfer_after_bytes));
  return o;
}

Napi::Value BackendPreset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString() || info[0].As<Napi::String>().Utf8Value() != "consumer-8gb")
    return TypeError(env, "backendPreset: name: expected \"consumer-8gb\"");
  mt_backend_config c{};
  mt_backend_config_preset_consumer_8gb(&c);
  return ConfigObject(env, c);
}

// enum mt_backend_kind for a kind's name, or -1.
int32_t KindId(const std::string& kind) {
  if (kind == "cpu") return MT_BACKEND_CPU;
  if (kind == "fake") return MT_BACKEND_FAKE;
  if (kind == "disk") return MT_BACKEND_DISK;
  if (kind == "cuda") return MT_BACKEND_CUDA;
  if (kind == "cuda-sim") return MT_BACKEND_CUDA_SIM;
  return -1;
}

// createBackend(kind, config): numbers are validated by the wrapper; C checks them again.
Napi::Value CreateBackend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string kind = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  const int32_t kind_id = KindId(kind);
  if (kind_id < 0 || !info[1].IsObject())
    return TypeError(env,
                     "createBackend(kind, config): kind: expected \"cpu\", \"fake\", \"disk\", \"cuda\" or "
                     "\"cuda-sim\", config: an object");
  Napi::Object o = info[1].As<Napi::Object>();
  mt_backend_config c{};
  c.kind = kind_id;
  c.file_fd = -1;
  // config.file: the mapped model file whose experts the uploads read (mapFile's handle): the disk
  // kind's source always, the cuda kinds' when given (their staging ring is then filled by reads).
  const bool cuda_kind = kind == "cuda" || kind == "cuda-sim";
  if (kind == "disk" || (cuda_kind && !o.Get("file").IsUndefined())) {
    MappedFile* file = UnwrapMappedFile(env, o.Get("file"));
    if (file == nullptr) return env.Undefined();
    c.file_fd = file->fd, c.file_base = static_cast<const uint8_t*>(file->base), c.file_length = file->length;
  }
  c.budget_bytes = uint64_t(Number(o, "budgetBytes", 0));
  c.bandwidth_bytes_per_s = Number(o, "bandwidthBytesPerS", 0);
  c.transfer_fixed_us = Number(o, "transferFixedUs", 0);
  c.compute_bytes_per_s = Number(o, "computeBytesPerS", 0);
  c.overwrite_supported =
      o.Get("overwriteSupported").IsUndefined() || o.Get("overwriteSupported").ToBoolean().Value() ? 1 : 0;
  c.fail_transfer_after_bytes = uint64_t(Number(o, "failTransferAfterBytes", 0));
  c.sim_device_bytes = uint64_t(Number(o, "simDeviceBytes", 0));
  c.sim_no_device = o.Get("simNoDevice").ToBoolean().Value() ? 1 : 0;
  c.sim_async_copy_fault = o.Get("simAsyncCopyFault").ToBoolean().Value() ? 1 : 0;
  char err[512] = "";
  int32_t unavailable = MT_CUDA_AVAILABLE;
  const bool cuda = c.kind == MT_BACKEND_CUDA || c.kind == MT_BACKEND_CUDA_SIM;
  mt_backend* b =
      cuda ? mt_backend_cuda_create(&c, &unavailable, err, sizeof err) : mt_backend_create(&c, err, sizeof err);
  if (b == nullptr && unavailable != MT_CUDA_AVAILABLE) {
    Napi::Error e = mtjs::New(env, mtjs::Kind::kError, mtjs::kDeviceUnavailable, std::string("createBackend: ") + err);
    e.Set("deviceUnavailable", Napi::String::New(env, mt_cuda_unavailable_name(unavailable)));
    e.ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (b == nullptr) return Throw(env, MT_BACKEND_INVALID, std::string("createBackend: ") + err);
  auto state = std::make_shared<BackendState>();
  state->backend = b;
  auto handle = Napi::External<Handle>::New(env, new Handle{std::move(state)}, [](Napi::Env, Handle* h) { delete h; });
  handle.TypeTag(&kBackendTag);
  return handle;
}

Napi::Value SlotsReserve(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t n = 0, bytes = 0;
  if (!s || !ArgUint(info, 1, "slotsReserve: n", 2147483647.0, &n) ||
      !ArgUint(info, 2, "slotsReserve: slotBytes", 9007199254740991.0, &bytes))
    return info.Env().Undefined();
  char err[512] = "";
  int32_t first = 0;
  if (int rc = mt_backend_slots_reserve(s->backend, int32_t(n), bytes, &first, err, sizeof err))
    return Throw(info.Env(), rc, err);
  return Napi::Number::New(info.Env(), first);
}

// upload(handle, slot, sources: ArrayBufferView[], overwrite, label, keepAlive?) -> event id
Napi::Value Upload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, "upload: slot", 2147483647.0, &slot)) return env.Undefined();
  if (!info[2].IsArray()) return TypeError(env, "upload: sources: expected an array of typed arrays");
  Napi::Array list = info[2].As<Napi::Array>();
  if (list.Length() < 1 || list.Length() > MT_UPLOAD_PIECES_MAX)
    return Throw(env, MT_BACKEND_INVALID,
                 "upload: sources: expected 1 to " + std::to_string(MT_UPLOAD_PIECES_MAX) + " typed arrays");
  mt_upload_piece pieces[MT_UPLOAD_PIECES_MAX] = {};
  std::vector<Napi::Reference<Napi::Value>> refs;
  for (uint32_t i = 0; i < list.Length(); i++) {
    Napi::Value v = list.Get(i);
    bool is_typed = false;
    napi_is_typedarray(env, v, &is_typed);
    napi_typedarray_type type;
    size_t length = 0;
    void* data = nullptr;
    // napi_get_typedarray_info: offset-adjusted data, also for SharedArrayBuffer-backed arrays.
    if (!is_typed || napi_get_typedarray_info(env, v, &type, &length, &data, nullptr, nullptr) != napi_ok)
      return TypeError(env, "upload: sources[" + std::to_string(i) + "]: expected a typed array");
    pieces[i] = mt_upload_piece{data, length * size_t(v.As<Napi::TypedArray>().ElementSize())};
    refs.push_back(Napi::Reference<Napi::Value>::New(v, 1));
  }
  // keepAlive: what owns the sources' memory (a mapped file's handle: its ArrayBuffer does not).
  if (info.Length() > 5 && (info[5].IsObject() || info[5].IsExternal()))
    refs.push_back(Napi::Reference<Napi::Value>::New(info[5], 1));
  const int32_t overwrite = info[3].ToBoolean().Value() ? 1 : 0;
  const int64_t label = info[4].IsNumber() ? info[4].As<Napi::Number>().Int64Value() : 0;
  char err[512] = "";
  mt_event_id event = 0;
  if (int rc = mt_backend_upload(s->backend, int32_t(slot), pieces, int32_t(list.Length()), overwrite, label, &event,
                                 err, sizeof err))
    return Throw(env, rc, err);
  s->sources.emplace(event, std::move(refs));
  return Napi::Number::New(env, double(event));
}

Napi::Value OverwriteSupported(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  if (!s) return info.Env().Undefined();
  return Napi::Boolean::New(info.Env(), mt_backend_overwrite_supported(s->backend) != 0);
}

// A verb on one slot that returns nothing: freeSlot, discardSlot.
Napi::Value OnSlot(const Napi::CallbackInfo& info, const char* what, int (*verb)(mt_backend*, int32_t, char*, size_t)) {
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, what, 2147483647.0, &slot)) return info.Env().Undefined();
  char err[512] = "";
  if (int rc = verb(s->backend, int32_t(slot), err, sizeof err)) return Throw(info.Env(), rc, err);
  return info.Env().Undefined();
}

Napi::Value FreeSlot(const Napi::CallbackInfo& info) { return OnSlot(info, "freeSlot: slot", mt_backend_free); }

Napi::Value DiscardSlot(const Napi::CallbackInfo& info) {
  return OnSlot(info, "discardSlot: slot", mt_backend_discard);
}

Napi::Value SlotState(const Napi::CallbackInfo& info) {
  static const char* names[] = {"empty", "uploading", "valid", "invalid"};
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, "slotState: slot", 2147483647.0, &slot)) return info.Env().Undefined();
  char err[512] = "";
  int32_t state = 0;
  if (int rc = mt_backend_slot_state(s->backend, int32_t(slot), &state, err, sizeof err))
    return Throw(info.Env(), rc, err);
  return Napi::String::New(info.Env(), names[state]);
}

Napi::Object EventObject(Napi::Env env, const mt_event_info& e) {
  static const char* states[] = {"pending", "done", "failed"};
  Napi::Object o = Napi::Object::New(env);
  o.Set("state", states[e.state]);
  o.Set("kind", e.kind == MT_EVENT_UPLOAD ? "upload" : "compute");
  o.Set("startNs", Napi::BigInt::New(env, e.start_ns));
  o.Set("endNs", Napi::BigInt::New(env, e.end_ns));
  o.Set("label", double(e.label));
  o.Set("slot", e.slot);
  o.Set("bytes", double(e.bytes));
  return o;
}

Napi::Value EventQuery(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t event = 0;
  if (!s || !ArgUint(info, 1, "eventQuery: event", 9007199254740991.0, &event)) return info.Env().Undefined();
  char err[512] = "";
  mt_event_info e{};
  if (int rc = mt_backend_event_query(s->backend, event, &e, err, sizeof err)) return Throw(info.Env(), rc, err);
  return EventObject(info.Env(), e);
}

// Blocks a libuv pool thread (not the event loop) until the event finishes. It holds the
// backend state, so a destroy meanwhile only takes effect once this settles.
class EventWaitWorker : public Napi::AsyncWorker {
 public:
  EventWaitWorker(Napi::Env env, std::shared_ptr<BackendState> s, mt_event_id event, Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "moetier.eventWait"), state_(std::move(s)), event_(event), deferred_(deferred) {}
  void Execute() override { rc_ = mt_backend_event_wait(state_->backend, event_, &info_, err_, sizeof err_); }
  void OnOK() override {
    Sweep(*state_);
    if (rc_ == MT_BACKEND_OK)
      deferred_.Resolve(EventObject(Env(), info_));
    else
      deferred_.Reject(StatusError(Env(), rc_, err_).Value());
  }

 private:
  std::shared_ptr<BackendState> state_;
  mt_event_id event_;
  Napi::Promise::Deferred deferred_;
  mt_event_info info_{};
  int rc_ = 0;
  char err_[512] = "";
};

Napi::Value EventWait(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  auto s = Unwrap(info);
  uint64_t event = 0;
  if (!s || !ArgUint(info, 1, "eventWait: event", 9007199254740991.0, &event)) {
    deferred.Reject(env.GetAndClearPendingException().Value());
    return deferred.Promise();
  }
  (new EventWaitWorker(env, s, event, deferred))->Queue();
  return deferred.Promise();
}

Napi::Value ComputeRecord(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t work = 0;
  if (!s || !ArgUint(info, 2, "computeRecord: workBytes", 9007199254740991.0, &work)) return info.Env().Undefined();
  const int64_t label = info[1].IsNumber() ? info[1].As<Napi::Number>().Int64Value() : 0;
  char err[512] = "";
  mt_event_id event = 0;
  if (int rc = mt_backend_compute_record(s->backend, label, work, &event, err, sizeof err))
    return Throw(info.Env(), rc, err);
  return Napi::Number::New(info.Env(), double(event));
}

Napi::Value Lease(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, "lease: slot", 2147483647.0, &slot)) return info.Env().Undefined();
  char err[512] = "";
  mt_lease_id lease = 0;
  if (int rc = mt_backend_lease(s->backend, int32_t(slot), &lease, err, sizeof err)) return Throw(info.Env(), rc, err);
  return Napi::Number::New(info.Env(), double(lease));
}

Napi::Value Release(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t lease = 0;
  if (s && ArgUint(info, 1, "release: lease", 9007199254740991.0, &lease)) mt_backend_release(s->backend, lease);
  return info.Env().Undefined();
}

// leaseCount(handle, slot?): one slot's leases, or every lease.
Napi::Value LeaseCount(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s) return info.Env().Undefined();
  if (info.Length() > 1 && !info[1].IsUndefined() && !ArgUint(info, 1, "leaseCount: slot", 2147483647.0, &slot))
    return info.Env().Undefined();
  const bool all = info.Length() < 2 || info[1].IsUndefined();
  return Napi::Number::New(info.Env(), double(mt_backend_lease_count(s->backend, all ? -1 : int32_t(slot))));
}

Napi::Object DiskStatsObject(Napi::Env env, const mt_backend_disk_stats& d) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("engine", mt_io_kind_name(d.io_kind));
  o.Set("direct", d.direct != 0);
  o.Set("queueDepth", d.queue_depth);
  o.Set("readsInFlightPeak", d.reads_in_flight_peak);
  o.Set("readsInFlight", d.reads_in_flight);
  o.Set("readsQueued", d.reads_queued);
  o.Set("uploadsWaiting", d.uploads_waiting);
  o.Set("readsIssued", double(d.reads_issued));
  o.Set("readsFailed", double(d.reads_failed));
  o.Set("bytesRead", double(d.bytes_read));
  o.Set("readsBounced", double(d.reads_bounced));
  o.Set("alignmentBytes", double(d.alignment_bytes));
  return o;
}

Napi::Value BackendStats(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  if (!s) return info.Env().Undefined();
  mt_backend_stats st{};
  mt_backend_stats_get(s->backend, &st);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("slots", st.slots);
  o.Set("slotBytes", double(st.slot_bytes));
  o.Set("slotStrideBytes", double(st.slot_stride_bytes));
  o.Set("reservedBytes", double(st.reserved_bytes));
  o.Set("budgetBytes", double(st.budget_bytes));
  o.Set("leases", double(st.leases));
  o.Set("uploadsInFlight", st.uploads_in_flight);
  o.Set("uploadsDone", double(st.uploads_done));
  o.Set("uploadsFailed", double(st.uploads_failed));
  o.Set("bytesUploaded", double(st.bytes_uploaded));
  o.Set("discards", double(st.discards));
  o.Set("overwriteSupported", st.overwrite_supported != 0);
  o.Set("hostVisible", st.host_visible != 0);
  o.Set("sourcesHeld", double(s->sources.size()));
  mt_backend_disk_stats disk{};
  if (mt_backend_disk_stats_get(s->backend, &disk, nullptr, 0) == MT_BACKEND_OK)
    o.Set("disk", DiskStatsObject(info.Env(), disk));
  return o;
}

// diskHold(handle, hold): test only; refused ('unsupported') on another kind.
Napi::Value DiskHold(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  if (!s) return info.Env().Undefined();
  char err[512] = "";
  if (int rc = mt_backend_disk_hold(s->backend, info[1].ToBoolean().Value() ? 1 : 0, err, sizeof err))
    return Throw(info.Env(), rc, err);
  return info.Env().Undefined();
}

// slotRead(handle, slot, out: Uint8Array): copies min(out.length, slotBytes) bytes (tests).
Napi::Value SlotRead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, "slotRead: slot", 2147483647.0, &slot)) return env.Undefined();
  if (!info[2].IsTypedArray() || info[2].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    return TypeError(env, "slotRead: out: expected a Uint8Array");
  napi_typedarray_type type;
  size_t length = 0;
  void* out = nullptr;
  napi_get_typedarray_info(env, info[2], &type, &length, &out, nullptr, nullptr);
  char err[512] = "";
  uint8_t* data = nullptr;
  if (int rc = mt_backend_slot_data(s->backend, int32_t(slot), &data, err, sizeof err)) return Throw(env, rc, err);
  mt_backend_stats st{};
  mt_backend_stats_get(s->backend, &st);
  const size_t n = length < st.slot_bytes ? length : size_t(st.slot_bytes);
  std::memcpy(out, data, n);
  return Napi::Number::New(env, double(n));
}

// A Float32Array argument's data and length, or null (a TypeError is pending).
float* FloatsArg(const Napi::CallbackInfo& info, Napi::Value v, const char* what, size_t* length) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    TypeError(info.Env(), std::string(what) + ": expected a Float32Array");
    return nullptr;
  }
  napi_typedarray_type type;
  void* data = nullptr;
  napi_get_typedarray_info(info.Env(), v, &type, length, &data, nullptr, nullptr);
  return static_cast<float*>(data);
}

// runExpert(handle, slot, { x, y, count, gateType, upType, downType, gateBytes, upBytes, downBytes, nEmbd, nFf }):
// y = Down (silu(Gate x) * (Up x)) on the device, synchronously (the slot must be valid and leased).
// One run's args object ({x, y, count, gateType, ..., nEmbd, nFf}) into a; false once it threw.
bool ExpertArgs(const Napi::CallbackInfo& info, Napi::Value value, const std::string& verb,
                mt_backend_cuda_expert_args* a) {
  Napi::Env env = info.Env();
  if (!value.IsObject()) return TypeError(env, verb + ": expected an object"), false;
  Napi::Object o = value.As<Napi::Object>();
  *a = mt_backend_cuda_expert_args{};
  size_t x_len = 0, y_len = 0;
  a->x = FloatsArg(info, o.Get("x"), (verb + ".x").c_str(), &x_len);
  if (a->x == nullptr) return false;
  a->y = FloatsArg(info, o.Get("y"), (verb + ".y").c_str(), &y_len);
  if (a->y == nullptr) return false;
  a->count = int32_t(Number(o, "count", 0));
  a->gate_type = int32_t(Number(o, "gateType", -1)), a->up_type = int32_t(Number(o, "upType", -1)),
  a->down_type = int32_t(Number(o, "downType", -1));
  a->gate_bytes = uint64_t(Number(o, "gateBytes", 0)), a->up_bytes = uint64_t(Number(o, "upBytes", 0)),
  a->down_bytes = uint64_t(Number(o, "downBytes", 0));
  a->n_embd = int64_t(Number(o, "nEmbd", 0)), a->n_ff = int64_t(Number(o, "nFf", 0));
  const double need = double(a->count) * double(a->n_embd);
  if (a->count < 1 || a->n_embd < 1 || double(x_len) != need || double(y_len) != need)
    return Throw(env, MT_BACKEND_INVALID, verb + ": x and y: expected count * nEmbd floats each, count >= 1"), false;
  return true;
}

Napi::Value RunExpert(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, "runExpert: slot", 2147483647.0, &slot)) return env.Undefined();
  mt_backend_cuda_expert_args a{};
  if (!ExpertArgs(info, info[2], "runExpert: args", &a)) return env.Undefined();
  char err[512] = "";
  if (int rc = mt_backend_run_expert(s->backend, int32_t(slot), &a, err, sizeof err)) return Throw(env, rc, err);
  return env.Undefined();
}

// runExperts(handle, runs: [{slot, args}]) -> {startNs, endNs}: the device's span of them.
Napi::Value RunExperts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info);
  if (!s) return env.Undefined();
  if (!info[1].IsArray()) return TypeError(env, "runExperts: runs: expected an array of {slot, args}");
  Napi::Array list = info[1].As<Napi::Array>();
  if (list.Length() < 1 || list.Length() > MT_BACKEND_CUDA_RUNS_MAX)
    return Throw(env, MT_BACKEND_INVALID,
                 "runExperts: runs: expected 1 to " + std::to_string(MT_BACKEND_CUDA_RUNS_MAX) + " runs");
  std::vector<mt_backend_cuda_run> runs(list.Length());
  for (uint32_t i = 0; i < list.Length(); i++) {
    const std::string verb = "runExperts: runs[" + std::to_string(i) + "]";
    Napi::Value item = list.Get(i);
    if (!item.IsObject()) return TypeError(env, verb + ": expected {slot, args}");
    const double slot = Number(item.As<Napi::Object>(), "slot", -1);
    if (!(slot >= 0 && slot <= 2147483647.0) || slot != double(int64_t(slot)))
      return TypeError(env, verb + ".slot: expected an integer >= 0");
    runs[i].slot = int32_t(slot);
    if (!ExpertArgs(info, item.As<Napi::Object>().Get("args"), verb + ".args", &runs[i].args)) return env.Undefined();
  }
  mt_backend_cuda_span span{};
  char err[512] = "";
  if (int rc = mt_backend_cuda_run_experts(s->backend, runs.data(), int32_t(runs.size()), &span, err, sizeof err))
    return Throw(env, rc, err);
  Napi::Object o = Napi::Object::New(env);
  o.Set("startNs", double(span.start_ns));
  o.Set("endNs", double(span.end_ns));
  return o;
}

// cudaSlotRead(handle, slot, out: Uint8Array): test only; copies min(out.length, slotBytes) bytes back.
Napi::Value CudaSlotRead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(info);
  uint64_t slot = 0;
  if (!s || !ArgUint(info, 1, "cudaSlotRead: slot", 2147483647.0, &slot)) return env.Undefined();
  if (!info[2].IsTypedArray() || info[2].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    return TypeError(env, "cudaSlotRead: out: expected a Uint8Array");
  napi_typedarray_type type;
  size_t length = 0, copied = 0;
  void* out = nullptr;
  napi_get_typedarray_info(env, info[2], &type, &length, &out, nullptr, nullptr);
  char err[512] = "";
  if (int rc = mt_backend_cuda_slot_read(s->backend, int32_t(slot), out, length, &copied, err, sizeof err))
    return Throw(env, rc, err);
  return Napi::Number::New(env, double(copied));
}

Napi::Value CudaLibraryPath(const Napi::CallbackInfo& info) {
  char path[4096] = "";
  if (mt_backend_cuda_library_path(path, sizeof path) != MT_BACKEND_OK)
    return mtjs::ThrowError(info.Env(), mtjs::kIo, "cudaLibraryPath: the path is too long");
  return Napi::String::New(info.Env(), path);
}

Napi::Value CudaLimits(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("stagingBuffers", MT_BACKEND_CUDA_STAGING_BUFFERS);
  o.Set("stagingBufferBytes", double(MT_BACKEND_CUDA_STAGING_BUFFER_BYTES));
  o.Set("expertRowsMax", MT_BACKEND_CUDA_EXPERT_ROWS_MAX);
  o.Set("runsMax", MT_BACKEND_CUDA_RUNS_MAX);
  return o;
}

Napi::Value DestroyBackend(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  if (!s) return info.Env().Undefined();
  info[0].As<Napi::External<Handle>>().Data()->state.reset();
  return info.Env().Undefined();  // s drops here: the backend drains and frees unless an eventWait holds it
}

#if MT_DEBUG_ASSERTS_ENABLED
// debugBackendRecomplete(handle, event), the debug build only: completes an upload that has
// already finished a second time, as a transfer thread with a bug would. complete()'s invariants
// (the slot was uploading, the event pending, uploads in flight above 0) abort the process:
// tests/native/debug-asserts.test.ts runs it in a child to prove the build's asserts are live.
Napi::Value DebugBackendRecomplete(const Napi::CallbackInfo& info) {
  auto s = Unwrap(info);
  uint64_t event = 0;
  if (!s || !ArgUint(info, 1, "debugBackendRecomplete: event", 9007199254740991.0, &event))
    return info.Env().Undefined();
  if (mt_backend_debug_recomplete(s->backend, event) != MT_BACKEND_OK)
    return mtjs::ThrowRangeError(info.Env(), "debugBackendRecomplete: event: expected a finished upload");
  return info.Env().Undefined();
}
#endif

}  // namespace

std::shared_ptr<mt_backend> ShareBackend(Napi::Env env, Napi::Value handle) {
  if (!handle.IsExternal() || !handle.As<Napi::External<Handle>>().CheckTypeTag(&kBackendTag)) {
    TypeError(env, "expected a backend handle");
    return nullptr;
  }
  auto state = handle.As<Napi::External<Handle>>().Data()->state;
  if (!state) {
    mtjs::ThrowError(env, mtjs::kFreed, "the backend was already destroyed");
    return nullptr;
  }
  return std::shared_ptr<mt_backend>(state, state->backend);  // shares the state: destroyBackend waits for it
}

void RegisterBackend(Napi::Env env, Napi::Object exports) {
  exports.Set("backendPreset", Napi::Function::New(env, BackendPreset));
  exports.Set("createBackend", Napi::Function::New(env, CreateBackend));
  exports.Set("slotsReserve", Napi::Function::New(env, SlotsReserve));
  exports.Set("upload", Napi::Function::New(env, Upload));
  exports.Set("overwriteSupported", Napi::Function::New(env, OverwriteSupported));
  exports.Set("freeSlot", Napi::Function::New(env, FreeSlot));
  exports.Set("discardSlot", Napi::Function::New(env, DiscardSlot));
  exports.Set("slotState", Napi::Function::New(env, SlotState));
  exports.Set("eventQuery", Napi::Function::New(env, EventQuery));
  exports.Set("eventWait", Napi::Function::New(env, EventWait));
  exports.Set("computeRecord", Napi::Function::New(env, ComputeRecord));
  exports.Set("lease", Napi::Function::New(env, Lease));
  exports.Set("release", Napi::Function::New(env, Release));
  exports.Set("leaseCount", Napi::Function::New(env, LeaseCount));
  exports.Set("backendStats", Napi::Function::New(env, BackendStats));
  exports.Set("slotRead", Napi::Function::New(env, SlotRead));
  exports.Set("destroyBackend", Napi::Function::New(env, DestroyBackend));
  exports.Set("diskHold", Napi::Function::New(env, DiskHold));
  exports.Set("runExpert", Napi::Function::New(env, RunExpert));
  exports.Set("runExperts", Napi::Function::New(env, RunExperts));
  exports.Set("cudaSlotRead", Napi::Function::New(env, CudaSlotRead));
  exports.Set("cudaLibraryPath", Napi::Function::New(env, CudaLibraryPath));
  exports.Set("cudaLimits", Napi::Function::New(env, CudaLimits));
#if MT_DEBUG_ASSERTS_ENABLED
  exports.Set("debugBackendRecomplete", Napi::Function::New(env, DebugBackendRecomplete));
#endif
}
