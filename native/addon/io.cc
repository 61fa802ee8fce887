// Read engine verbs over include/mt_io.h (declared in src/native/binding.ts, NativeIoVerbs).
//
//   createIo(fd | path, { engine, queueDepth, direct, ... }) -> handle      ioLimits: the C limits
//   ioRead(handle, offset, bytes, dst: Uint8Array, dstOffset, { label, aligned, lane }) -> id
//   ioQuery (sync) / ioWait (Promise: an AsyncWorker blocks off the event loop) -> info
//   ioCancel / ioStats                      ioLive() -> process-wide counts (leak checks)
//   destroyIo(handle)   fails the queued reads at once; the engine waits for those in flight and
//                       frees itself once the last ioWait / ioProbe on it settled
//   ioHold(handle, hold, lane?)             test only: queued reads (of one lane) wait while held
//   ioProbe(handle, offsets, bytes, { dstMisalignBytes }) -> Promise: the engine's own loop keeps
//     queueDepth reads in flight over the offsets, into buffers it owns (bench/disk-probe.mjs:
//     no JavaScript between a read landing and the next starting)
//   allocAligned(bytes, alignBytes) -> Uint8Array over aligned native memory (reads with aligned)
//
// A read's dst array stays referenced until the read settles: the map `dsts` drops settled ones
// (swept as it grows, and by ioWait / ioQuery when they see one settle) and is emptied on destroy,
// after the reads in flight drained. A failed read is not an error here: its info says failed,
// with errno and reason. Refusals throw with code (errors.h) and `ioStatus` (mt_io_status_name).
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include "errors.h"
#include "mt_clock.h"
#include "mt_io.h"
#include "registry.h"

namespace {

constexpr napi_type_tag kIoTag = {0x6d6f6574696572ULL, 0x494f454e47494eULL};

struct IoState {
  mt_io* io = nullptr;
  std::unordered_map<mt_io_id, Napi::Reference<Napi::Value>> dsts;  // JS thread only
  size_t sweep_at = 64;
  ~IoState() {
    mt_io_destroy(io);  // drains first: the arrays below outlive every read into them
    dsts.clear();
  }
};

struct Handle {
  std::shared_ptr<IoState> state;
};

Napi::Error StatusError(Napi::Env env, int status, const std::string& message) {
  Napi::Error e = status == MT_IO_INVALID     ? mtjs::New(env, mtjs::Kind::kRangeError, mtjs::kBadArgument, message)
                  : status == MT_IO_NO_MEMORY ? mtjs::New(env, mtjs::Kind::kError, mtjs::kNoMemory, message)
                  : status == MT_IO_BUSY      ? mtjs::New(env, mtjs::Kind::kError, mtjs::kBusy, message)
                                              : mtjs::New(env, mtjs::Kind::kError, mtjs::kIo, message);
  e.Set("ioStatus", Napi::String::New(env, mt_io_status_name(status)));
  return e;
}

Napi::Value Throw(Napi::Env env, int status, const std::string& message) {
  StatusError(env, status, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

bool Settled(mt_io* io, mt_io_id id) {
  mt_io_info info{};
  return mt_io_query(io, id, &info, nullptr, 0) != MT_IO_OK || info.state != MT_IO_PENDING;
}

// Drops the arrays of settled reads once the map has doubled since the last sweep (amortised).
void Sweep(IoState& s) {
  if (s.dsts.size() < s.sweep_at) return;
  for (auto it = s.dsts.begin(); it != s.dsts.end();) it = Settled(s.io, it->first) ? s.dsts.erase(it) : std::next(it);
  s.sweep_at = s.dsts.size() * 2 > 64 ? s.dsts.size() * 2 : 64;
}

std::shared_ptr<IoState> Unwrap(Napi::Env env, Napi::Value v) {
  if (!v.IsExternal() || !v.As<Napi::External<Handle>>().CheckTypeTag(&kIoTag)) {
    mtjs::ThrowTypeError(env, "expected a read engine handle");
    return nullptr;
  }
  auto state = v.As<Napi::External<Handle>>().Data()->state;
  if (!state)
    mtjs::ThrowError(env, mtjs::kFreed, "the read engine was already destroyed");
  else
    Sweep(*state);
  return state;
}

// A non-negative integer argument up to max (offsets, byte counts, ids: up to 2^53).
bool ArgUint(const Napi::CallbackInfo& info, size_t i, const std::string& what, double max, uint64_t* out) {
  const double v = i < info.Length() && info[i].IsNumber() ? info[i].As<Napi::Number>().DoubleValue() : -1;
  if (!(v >= 0 && v <= max) || v != double(uint64_t(v))) {
    mtjs::ThrowRangeError(info.Env(), what + ": expected an integer in [0, " + std::to_string(uint64_t(max)) + "]");
    return false;
  }
  *out = uint64_t(v);
  return true;
}

// An optional integer option in [min, max]; absent: fallback.
bool OptUint(Napi::Env env, Napi::Object o, const char* key, double min, double max, uint64_t fallback, uint64_t* out) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return *out = fallback, true;
  const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!(d >= min && d <= max) || d != double(uint64_t(d))) {
    mtjs::ThrowRangeError(env, std::string("createIo: ") + key + ": expected an integer in [" +
                                   std::to_string(uint64_t(min)) + ", " + std::to_string(uint64_t(max)) + "]");
    return false;
  }
  *out = uint64_t(d);
  return true;
}

constexpr double kMaxSafe = 9007199254740991.0;

// createIo(fd | path, options?): options.engine 'auto' | 'uring' | 'threads', queueDepth,
// direct (default true), bounceBytesMax, and the test-only failAfterBytes, chunkBytesMax.
Napi::Value CreateIo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber() && !info[0].IsString())
    return mtjs::ThrowTypeError(env, "createIo(file, options?): file: expected an fd (number) or a path");
  Napi::Object o = info.Length() > 1 && info[1].IsObject() ? info[1].As<Napi::Object>() : Napi::Object::New(env);
  if (info.Length() > 1 && !info[1].IsObject() && !info[1].IsUndefined())
    return mtjs::ThrowTypeError(env, "createIo: options: expected an object");
  mt_io_config c{};
  mt_io_config_default(&c);
  Napi::Value engine = o.Get("engine");
  const std::string kind = engine.IsString()      ? engine.As<Napi::String>().Utf8Value()
                           : engine.IsUndefined() ? "auto"
                                                  : "";
  if (kind != "auto" && kind != "uring" && kind != "threads")
    return mtjs::ThrowTypeError(env, "createIo: engine: expected \"auto\", \"uring\" or \"threads\"");
  c.kind = kind == "uring" ? MT_IO_URING : kind == "threads" ? MT_IO_THREADS : MT_IO_AUTO;
  uint64_t depth = 0, bounce = 0, fail_after = 0, chunk = 0;
  // The depth range is the C layer's check (so its message is the one a caller sees): pass it through.
  if (!OptUint(env, o, "queueDepth", 0, 1e6, MT_IO_QUEUE_DEPTH_DEFAULT, &depth) ||
      !OptUint(env, o, "bounceBytesMax", 0, kMaxSafe, 0, &bounce) ||
      !OptUint(env, o, "failAfterBytes", 0, kMaxSafe, 0, &fail_after) ||
      !OptUint(env, o, "chunkBytesMax", 0, kMaxSafe, 0, &chunk))
    return env.Undefined();
  c.queue_depth = int32_t(depth);
  c.direct = o.Get("direct").IsUndefined() || o.Get("direct").ToBoolean().Value() ? 1 : 0;
  c.bounce_bytes_max = bounce, c.fail_after_bytes = fail_after, c.chunk_bytes_max = chunk;

  int fd = -1;
  std::string path;
  if (info[0].IsString()) {
    path = info[0].As<Napi::String>().Utf8Value();
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mtjs::ThrowError(env, mtjs::kIo, "createIo: " + path + ": cannot open: " + std::strerror(errno));
  } else {
    const double d = info[0].As<Napi::Number>().DoubleValue();
    fd = d >= 0 && d <= 2147483647.0 && d == double(int(d)) ? int(d) : -1;
  }
  char err[512] = "";
  int status = MT_IO_OK;
  mt_io* io = mt_io_create(fd, &c, &status, err, sizeof err);
  if (!path.empty()) close(fd);  // the engine reopened the file as its own
  if (io == nullptr) return Throw(env, status, "createIo: " + (path.empty() ? "" : path + ": ") + err);
  auto state = std::make_shared<IoState>();
  state->io = io;
  auto handle = Napi::External<Handle>::New(env, new Handle{std::move(state)}, [](Napi::Env, Handle* h) { delete h; });
  handle.TypeTag(&kIoTag);
  return handle;
}

// ioRead(handle, offset, bytes, dst: Uint8Array, dstOffset, { label, aligned, lane }?) -> id
// lane: 0 normal (the default), 1 urgent (include/mt_io.h, "Lanes"); aligned reads are lane 0's.
Napi::Value IoRead(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(env, info[0]);
  uint64_t offset = 0, bytes = 0, dst_offset = 0;
  if (!s || !ArgUint(info, 1, "ioRead: offset", kMaxSafe, &offset) ||
      !ArgUint(info, 2, "ioRead: bytes", kMaxSafe, &bytes))
    return env.Undefined();
  if (!info[3].IsTypedArray() || info[3].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    return mtjs::ThrowTypeError(env, "ioRead: dst: expected a Uint8Array");
  if (!ArgUint(info, 4, "ioRead: dstOffset", kMaxSafe, &dst_offset)) return env.Undefined();
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  // napi_get_typedarray_info: offset-adjusted data, also for SharedArrayBuffer-backed arrays.
  if (napi_get_typedarray_info(env, info[3], &type, &length, &data, nullptr, nullptr) != napi_ok)
    return mtjs::ThrowTypeError(env, "ioRead: dst: expected a Uint8Array");
  if (dst_offset > length || bytes > length - dst_offset)
    return mtjs::ThrowRangeError(env, "ioRead: dstOffset " + std::to_string(dst_offset) + " + bytes " +
                                          std::to_string(bytes) + ": expected to fit in dst (" +
                                          std::to_string(length) + " bytes)");
  int64_t label = 0;
  bool aligned = false;
  int32_t lane = MT_IO_LANE_NORMAL;
  if (info.Length() > 5 && info[5].IsObject()) {
    Napi::Object o = info[5].As<Napi::Object>();
    label = o.Get("label").IsNumber() ? o.Get("label").As<Napi::Number>().Int64Value() : 0;
    aligned = o.Get("aligned").ToBoolean().Value();
    // Any other number is passed through: the C layer's check names the range.
    lane = o.Get("lane").IsNumber() ? o.Get("lane").As<Napi::Number>().Int32Value() : MT_IO_LANE_NORMAL;
  }
  uint8_t* dst = data == nullptr ? nullptr : static_cast<uint8_t*>(data) + dst_offset;
  char err[512] = "";
  mt_io_id id = 0;
  const int rc = aligned ? mt_io_read_aligned(s->io, offset, bytes, dst, label, &id, err, sizeof err)
                         : mt_io_read_lane(s->io, lane, offset, bytes, dst, label, &id, err, sizeof err);
  if (rc != MT_IO_OK) return Throw(env, rc, std::string("ioRead: ") + err);
  s->dsts.emplace(id, Napi::Reference<Napi::Value>::New(info[3], 1));
  return Napi::Number::New(env, double(id));
}

Napi::Object InfoObject(Napi::Env env, const mt_io_info& i) {
  static const char* states[] = {"pending", "done", "failed"};
  Napi::Object o = Napi::Object::New(env);
  o.Set("state", states[i.state]);
  o.Set("error", i.error);
  o.Set("errorName", i.error == 0 ? "" : mt_io_errno_name(i.error));
  o.Set("reason", i.reason);
  o.Set("label", double(i.label));
  o.Set("offset", double(i.file_offset));
  o.Set("bytes", double(i.bytes));
  o.Set("bytesRead", double(i.bytes_read));
  o.Set("issuedNs", Napi::BigInt::New(env, i.issued_ns));
  o.Set("startNs", Napi::BigInt::New(env, i.start_ns));
  o.Set("endNs", Napi::BigInt::New(env, i.end_ns));
  o.Set("bounced", i.bounced != 0);
  return o;
}

Napi::Value IoQuery(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(env, info[0]);
  uint64_t id = 0;
  if (!s || !ArgUint(info, 1, "ioQuery: id", kMaxSafe, &id)) return env.Undefined();
  char err[512] = "";
  mt_io_info i{};
  if (int rc = mt_io_query(s->io, id, &i, err, sizeof err)) return Throw(env, rc, std::string("ioQuery: ") + err);
  if (i.state != MT_IO_PENDING) s->dsts.erase(id);
  return InfoObject(env, i);
}

// Blocks a libuv pool thread (not the event loop) until the read settles. It holds the engine's
// state, so a destroyIo meanwhile only takes effect once this settles.
class WaitWorker : public Napi::AsyncWorker {
 public:
  WaitWorker(Napi::Env env, std::shared_ptr<IoState> s, mt_io_id id, Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "moetier.ioWait"), state_(std::move(s)), id_(id), deferred_(deferred) {}
  void Execute() override { rc_ = mt_io_wait(state_->io, id_, &info_, err_, sizeof err_); }
  void OnOK() override {
    state_->dsts.erase(id_);
    if (rc_ == MT_IO_OK)
      deferred_.Resolve(InfoObject(Env(), info_));
    else
      deferred_.Reject(StatusError(Env(), rc_, std::string("ioWait: ") + err_).Value());
  }

 private:
  std::shared_ptr<IoState> state_;
  mt_io_id id_;
  Napi::Promise::Deferred deferred_;
  mt_io_info info_{};
  int rc_ = 0;
  char err_[512] = "";
};

Napi::Value IoWait(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  auto s = Unwrap(env, info[0]);
  uint64_t id = 0;
  if (!s || !ArgUint(info, 1, "ioWait: id", kMaxSafe, &id)) {
    deferred.Reject(env.GetAndClearPendingException().Value());
    return deferred.Promise();
  }
  (new WaitWorker(env, s, id, deferred))->Queue();
  return deferred.Promise();
}

Napi::Value IoCancel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(env, info[0]);
  uint64_t id = 0;
  if (!s || !ArgUint(info, 1, "ioCancel: id", kMaxSafe, &id)) return env.Undefined();
  char err[512] = "";
  if (int rc = mt_io_cancel(s->io, id, err, sizeof err)) return Throw(env, rc, std::string("ioCancel: ") + err);
  return env.Undefined();
}

// ioHold(handle, hold, lane?): test only (mt_io_hold, mt_io_hold_lane): while held, queued reads
// (of every lane, or of the lane given) do not start.
Napi::Value IoHold(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(env, info[0]);
  if (!s) return env.Undefined();
  if (!info[1].IsBoolean()) return mtjs::ThrowTypeError(env, "ioHold: hold: expected a boolean");
  const int32_t hold = info[1].As<Napi::Boolean>().Value() ? 1 : 0;
  if (info.Length() < 3 || info[2].IsUndefined()) {
    mt_io_hold(s->io, hold);
    return env.Undefined();
  }
  const double lane = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : -1;
  if (!(lane >= 0 && lane < MT_IO_LANES) || lane != double(int32_t(lane)))
    return mtjs::ThrowRangeError(env, "ioHold: lane: expected 0 to " + std::to_string(MT_IO_LANES - 1));
  mt_io_hold_lane(s->io, int32_t(lane), hold);
  return env.Undefined();
}

Napi::Value IoStats(const Napi::CallbackInfo& info) {
  static const char* sources[] = {"none", "blksszget", "statx", "default"};
  Napi::Env env = info.Env();
  auto s = Unwrap(env, info[0]);
  if (!s) return env.Undefined();
  mt_io_stats st{};
  mt_io_stats_get(s->io, &st);
  Napi::Object o = Napi::Object::New(env);
  o.Set("engine", mt_io_kind_name(st.kind));
  o.Set("queueDepth", st.queue_depth);
  o.Set("direct", st.direct != 0);
  o.Set("alignmentBytes", double(st.alignment_bytes));
  o.Set("alignmentSource", sources[st.alignment_source]);
  o.Set("readsIssued", double(st.reads_issued));
  o.Set("readsDone", double(st.reads_done));
  o.Set("readsFailed", double(st.reads_failed));
  o.Set("readsCancelled", double(st.reads_cancelled));
  o.Set("bytesRead", double(st.bytes_read));
  o.Set("readsBounced", double(st.reads_bounced));
  o.Set("bounceCopyNs", double(st.bounce_copy_ns));
  o.Set("resubmits", double(st.resubmits));
  o.Set("readsInFlight", st.reads_in_flight);
  o.Set("readsQueued", st.reads_queued);
  o.Set("bounceBytes", double(st.bounce_bytes));
  Napi::Array lanes = Napi::Array::New(env, MT_IO_LANES);
  for (uint32_t i = 0; i < MT_IO_LANES; i++) {
    const mt_io_lane_stats& l = st.lanes[i];
    Napi::Object lo = Napi::Object::New(env);
    lo.Set("readsIssued", double(l.reads_issued));
    lo.Set("readsDone", double(l.reads_done));
    lo.Set("readsFailed", double(l.reads_failed));
    lo.Set("readsCancelled", double(l.reads_cancelled));
    lo.Set("bytesRead", double(l.bytes_read));
    lo.Set("readsBounced", double(l.reads_bounced));
    lo.Set("readsInFlight", l.reads_in_flight);
    lo.Set("readsQueued", l.reads_queued);
    lo.Set("held", l.held != 0);
    lanes.Set(i, lo);
  }
  o.Set("lanes", lanes);
  for (auto it = s->dsts.begin(); it != s->dsts.end();)
    it = Settled(s->io, it->first) ? s->dsts.erase(it) : std::next(it);
  o.Set("dstsHeld", double(s->dsts.size()));
  return o;
}

Napi::Value DestroyIo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto s = Unwrap(env, info[0]);
  if (!s) return env.Undefined();
  // The queued reads fail now (ECANCELED), so an ioWait on one settles and lets the engine go.
  for (const auto& held : s->dsts) mt_io_cancel(s->io, held.first, nullptr, 0);
  info[0].As<Napi::External<Handle>>().Data()->state.reset();
  return env.Undefined();  // s drops here: the engine drains and frees unless an ioWait / ioProbe holds it
}

Napi::Value IoLive(const Napi::CallbackInfo& info) {
  mt_io_live_counts c{};
  mt_io_live(&c);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("engines", double(c.engines));
  o.Set("threads", double(c.threads));
  o.Set("bounceBytes", double(c.bounce_bytes));
  return o;
}

// The engine's own read loop for the disk probe: queueDepth reads in flight over `offsets`, each
// `bytes` long, into per-place buffers (page-aligned + dstMisalignBytes). Per read: latency
// end - issued; in order of the offsets.
class ProbeWorker : public Napi::AsyncWorker {
 public:
  ProbeWorker(Napi::Env env, std::shared_ptr<IoState> s, std::vector<double> offsets, uint64_t bytes, uint64_t misalign,
              Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "moetier.ioProbe"),
        state_(std::move(s)),
        offsets_(std::move(offsets)),
        bytes_(bytes),
        misalign_(misalign),
        deferred_(deferred) {}

  void Execute() override {
    mt_io_stats st{};
    mt_io_stats_get(state_->io, &st);
    const size_t depth = size_t(st.queue_depth);
    const uint64_t stride = (bytes_ + misalign_ + 4095) / 4096 * 4096;
    void* mem = nullptr;
    if (posix_memalign(&mem, 4096, stride * depth) != 0) return SetError("ioProbe: no memory for the buffers");
    std::unique_ptr<void, void (*)(void*)> buffers(mem, std::free);
    std::vector<mt_io_id> ids(depth, 0);  // by place: the read in flight into its buffer, or 0
    std::vector<size_t> index(depth, 0);
    latency_.assign(offsets_.size(), 0);
    std::string error;
    size_t next = 0;
    const int64_t t0 = mt_monotonic_ns();
    for (;;) {
      for (size_t place = 0; place < depth && next < offsets_.size() && error.empty(); place++) {
        if (ids[place] != 0) continue;
        uint8_t* dst = static_cast<uint8_t*>(mem) + place * stride + misalign_;
        if (mt_io_read(state_->io, uint64_t(offsets_[next]), bytes_, dst, int64_t(next), &ids[place], err_,
                       sizeof err_) != MT_IO_OK)
          error = std::string("ioProbe: ") + err_, ids[place] = 0;
        else
          index[place] = next++;
      }
      std::vector<mt_io_id> flying;  // whichever lands first among the reads in flight
      std::vector<size_t> where;
      for (size_t p = 0; p < depth; p++)
        if (ids[p] != 0) flying.push_back(ids[p]), where.push_back(p);
      if (flying.empty()) break;
      int32_t which = 0;
      mt_io_info info{};
      if (mt_io_wait_any(state_->io, flying.data(), int32_t(flying.size()), &which, &info, err_, sizeof err_) !=
          MT_IO_OK) {
        error = std::string("ioProbe: ") +
                err_;  // cannot happen for ids just issued; never leave reads into our buffers behind
        for (mt_io_id id : flying) mt_io_wait(state_->io, id, &info, nullptr, 0);
        break;
      }
      const size_t p = where[size_t(which)];
      latency_[index[p]] = double(info.end_ns - info.issued_ns);
      if (info.state != MT_IO_DONE && failed_++ == 0) first_reason_ = info.reason;
      ids[p] = 0;
    }
    wall_ns_ = double(mt_monotonic_ns() - t0);
    if (!error.empty()) SetError(error);
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object o = Napi::Object::New(env);
    o.Set("wallNs", wall_ns_);
    Napi::Float64Array lat = Napi::Float64Array::New(env, latency_.size());
    for (size_t i = 0; i < latency_.size(); i++) lat[i] = latency_[i];
    o.Set("latencyNs", lat);
    o.Set("failed", double(failed_));
    o.Set("firstFailure", first_reason_);
    deferred_.Resolve(o);
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(mtjs::New(Env(), mtjs::Kind::kError, mtjs::kIo, e.Message()).Value());
  }

 private:
  std::shared_ptr<IoState> state_;
  std::vector<double> offsets_;
  uint64_t bytes_, misalign_;
  Napi::Promise::Deferred deferred_;
  std::vector<double> latency_;
  double wall_ns_ = 0;
  uint64_t failed_ = 0;
  std::string first_reason_;
  char err_[512] = "";
};

// ioProbe(handle, offsets: Float64Array, bytes, { dstMisalignBytes }?) -> Promise<{ wallNs, latencyNs, failed, firstFailure }>
Napi::Value IoProbe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  auto s = Unwrap(env, info[0]);
  uint64_t bytes = 0, misalign = 0;
  bool ok = s && ArgUint(info, 2, "ioProbe: bytes", double(MT_IO_READ_BYTES_MAX), &bytes);
  if (ok && (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array))
    ok = false, mtjs::ThrowTypeError(env, "ioProbe: offsets: expected a Float64Array");
  if (ok && info.Length() > 3 && info[3].IsObject()) {
    Napi::Value m = info[3].As<Napi::Object>().Get("dstMisalignBytes");
    const double d = m.IsNumber() ? m.As<Napi::Number>().DoubleValue() : 0;
    if (!(d >= 0 && d < 4096) || d != double(uint64_t(d)))
      ok = false, mtjs::ThrowRangeError(env, "ioProbe: dstMisalignBytes: expected an integer in [0, 4096)");
    else
      misalign = uint64_t(d);
  }
  if (!ok) {
    deferred.Reject(env.GetAndClearPendingException().Value());
    return deferred.Promise();
  }
  Napi::Float64Array offsets = info[1].As<Napi::Float64Array>();
  std::vector<double> copy(offsets.Data(), offsets.Data() + offsets.ElementLength());
  (new ProbeWorker(env, s, std::move(copy), bytes, misalign, deferred))->Queue();
  return deferred.Promise();
}

// allocAligned(bytes, alignBytes) -> a Uint8Array over native memory aligned to alignBytes (a
// power of two, 8..1 MiB), freed when the array is collected: dst memory for aligned reads.
Napi::Value AllocAligned(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint64_t bytes = 0, align = 0;
  if (!ArgUint(info, 0, "allocAligned: bytes", double(MT_IO_READ_BYTES_MAX), &bytes) ||
      !ArgUint(info, 1, "allocAligned: alignBytes", 1 << 20, &align))
    return env.Undefined();
  if (bytes == 0 || align < 8 || (align & (align - 1)) != 0)
    return mtjs::ThrowRangeError(env, "allocAligned: expected bytes > 0 and alignBytes a power of two in [8, 1048576]");
  void* mem = nullptr;
  if (posix_memalign(&mem, size_t(align), size_t(bytes)) != 0)
    return mtjs::ThrowError(env, mtjs::kNoMemory, "allocAligned: out of memory");
  std::memset(mem, 0, size_t(bytes));
  Napi::ArrayBuffer buffer =
      Napi::ArrayBuffer::New(env, mem, size_t(bytes), [](Napi::Env, void* data) { std::free(data); });
  if (env.IsExceptionPending()) return std::free(mem), env.Undefined();  // a runtime without external buffers
  return Napi::Uint8Array::New(env, size_t(bytes), buffer, 0);
}

}  // namespace

void RegisterIo(Napi::Env env, Napi::Object exports) {
  Napi::Object limits = Napi::Object::New(env);
  limits.Set("queueDepthMax", MT_IO_QUEUE_DEPTH_MAX);
  limits.Set("queueDepthDefault", MT_IO_QUEUE_DEPTH_DEFAULT);
  limits.Set("queuedMax", MT_IO_QUEUED_MAX);
  limits.Set("readBytesMax", double(MT_IO_READ_BYTES_MAX));
  exports.Set("ioLimits", limits);
  exports.Set("createIo", Napi::Function::New(env, CreateIo));
  exports.Set("ioRead", Napi::Function::New(env, IoRead));
  exports.Set("ioQuery", Napi::Function::New(env, IoQuery));
  exports.Set("ioWait", Napi::Function::New(env, IoWait));
  exports.Set("ioCancel", Napi::Function::New(env, IoCancel));
  exports.Set("ioStats", Napi::Function::New(env, IoStats));
  exports.Set("ioHold", Napi::Function::New(env, IoHold));
  exports.Set("destroyIo", Napi::Function::New(env, DestroyIo));
  exports.Set("ioLive", Napi::Function::New(env, IoLive));
  exports.Set("ioProbe", Napi::Function::New(env, IoProbe));
  exports.Set("allocAligned", Napi::Function::New(env, AllocAligned));
}
