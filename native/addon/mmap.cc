// mapFile / unmapFile: read-only memory mapping of a model file, exposed to JS as an
// external ArrayBuffer. The mapping lives until unmapFile or until the handle is collected.
#include <algorithm>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>
#include "errors.h"
#include "mt_clock.h"
#include "registry.h"

static void ReleaseMapping(MappedFile* m) {
  UnguardMapping(m);
  if (!m->closed && m->base != nullptr && m->length > 0) munmap(m->base, m->length);
  if (m->fd >= 0) close(m->fd);
  m->fd = -1;
  m->closed = true;
  m->base = nullptr;
}

// The mapped file handle's type tag: another handle (a pool, a backend, a tier) is refused, not
// read as a mapping.
constexpr napi_type_tag kMappedFileTag = {0x6d6f6574696572ULL, 0x4d4150ULL};

MappedFile* UnwrapMappedFile(Napi::Env env, Napi::Value handle) {
  if (!handle.IsExternal() || !handle.As<Napi::External<MappedFile>>().CheckTypeTag(&kMappedFileTag)) {
    mtjs::ThrowTypeError(env, "expected a mapped file handle");
    return nullptr;
  }
  MappedFile* m = handle.As<Napi::External<MappedFile>>().Data();
  if (m->closed) {
    mtjs::ThrowError(env, mtjs::kFreed, "mapped file was already unmapped");
    return nullptr;
  }
  return m;
}

// The most of a mapping JavaScript sees as one ArrayBuffer: just under 4 GiB, the largest a
// Uint8Array may be on Node 20 (a file up to that size is seen whole, as before; a bigger one,
// the 7-18 GB models users run, only up to here: far past any GGUF header).
static constexpr size_t kJsViewBytesMax = (size_t{1} << 32) - (size_t{1} << 16);

static Napi::Value MapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    mtjs::ThrowTypeError(env, "mapFile(path: string)");
    return env.Undefined();
  }
  std::string path = info[0].As<Napi::String>();
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    mtjs::ThrowError(env, mtjs::kIo, path + ": cannot open: " + std::strerror(errno));
    return env.Undefined();
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    mtjs::ThrowError(env, mtjs::kIo, path + ": empty or unreadable file");
    return env.Undefined();
  }
  size_t length = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    mtjs::ThrowError(env, mtjs::kIo, path + ": mmap failed: " + std::strerror(errno));
    return env.Undefined();
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);  // pinned for this process only: children do not inherit it
  // { access: 'random' }: no readahead around faults, so reading the header (or one expert)
  // through the mapping brings in the pages read and no neighbours (a tier that reads experts
  // from the file must not find the page cache filling with them behind its back).
  if (info.Length() > 1 && info[1].IsObject()) {
    Napi::Value access = info[1].As<Napi::Object>().Get("access");
    if (!access.IsUndefined()) {
      const std::string a = access.IsString() ? access.As<Napi::String>().Utf8Value() : "";
      if (a != "random" && a != "normal") {
        munmap(base, length);
        close(fd);
        return mtjs::ThrowTypeError(env, "mapFile: options.access: expected 'normal' or 'random'");
      }
      if (a == "random") madvise(base, length, MADV_RANDOM);
    }
  }
  auto* m = new MappedFile();
  m->base = base;
  m->length = length;
  m->fd = fd;
  // A read past the end of a file truncated under us reads zeros and counts a fault (mappedFaults),
  // instead of ending the process (sigbus_guard.cc).
  const bool guarded = GuardMapping(m);
  auto handle = Napi::External<MappedFile>::New(env, m, [](Napi::Env, MappedFile* mf) {
    ReleaseMapping(mf);
    delete mf;
  });
  handle.TypeTag(&kMappedFileTag);
  // The ArrayBuffer does not own the mapping; JS must not use it after unmapFile. It covers at
  // most kJsViewBytesMax: an ArrayBuffer cannot be larger on Node 20 (a 7-18 GB model is), and
  // JavaScript reads only the header and the first MiB of weights (the model's identity); the
  // native model reads the whole mapping through the handle. `size` is the file's.
  auto buffer = Napi::ArrayBuffer::New(env, base, std::min(length, kJsViewBytesMax));
  Napi::Object result = Napi::Object::New(env);
  result.Set("handle", handle);
  result.Set("buffer", buffer);
  result.Set("size", Napi::Number::New(env, static_cast<double>(length)));
  result.Set("fd", Napi::Number::New(env, fd));
  result.Set("guarded", Napi::Boolean::New(env, guarded));
  return result;
}

// mappedFaults(handle) -> the reads past the end of the truncated file that the SIGBUS guard
// answered with zeros. Non-zero: the mapping no longer reads as the file the model was loaded from.
static Napi::Value MappedFaults(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  MappedFile* m = UnwrapMappedFile(env, info[0]);
  if (m == nullptr) return env.Undefined();
  return Napi::Number::New(env, double(m->faults.load(std::memory_order_acquire)));
}

static Napi::Value UnmapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  MappedFile* m = UnwrapMappedFile(env, info[0]);
  if (m == nullptr) return env.Undefined();
  if (m->users.load() > 0) {
    return mtjs::ThrowError(env, mtjs::kBusy,
                            "unmapFile: the mapping is still read by " + std::to_string(m->users.load()) +
                                " model(s); free their contexts, tiers and models first");
  }
  ReleaseMapping(m);
  return env.Undefined();
}

// mappedResidency(handle, offset = 0, length = the rest) -> { pages, resident, pageBytes }: how
// many pages of the range the page cache holds (mincore on the file's mapping), to check that a
// tier reading experts from the file never brings them in through the mapping (the disk tier), and how
// much of a model the page cache holds. Reading it does not change it.
Napi::Value MappedResidency(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  MappedFile* m = UnwrapMappedFile(env, info[0]);
  if (m == nullptr) return env.Undefined();
  const double offset = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().DoubleValue() : 0;
  const double length =
      info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : double(m->length) - offset;
  if (!(offset >= 0 && length >= 0 && offset + length <= double(m->length) && offset == double(size_t(offset)) &&
        length == double(size_t(length))))
    return mtjs::ThrowRangeError(env, "mappedResidency: offset, length: expected a range inside the mapping of " +
                                          std::to_string(m->length) + " bytes");
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t from = size_t(offset) / page * page, to = (size_t(offset) + size_t(length) + page - 1) / page * page;
  const size_t pages = (to - from) / page;
  std::vector<unsigned char> vec(pages);
  if (pages > 0 && mincore(static_cast<uint8_t*>(m->base) + from, to - from, vec.data()) != 0)
    return mtjs::ThrowError(env, mtjs::kIo, std::string("mappedResidency: mincore: ") + std::strerror(errno));
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  Napi::Object out = Napi::Object::New(env);
  out.Set("pages", double(pages));
  out.Set("resident", double(resident));
  out.Set("pageBytes", double(page));
  return out;
}

// populateMapping(handle) -> Promise<{ bytes, ms, method }>: every page of the mapping faulted in
// now and read once, off the event loop, so that the first requests do not pay a page fault per
// page of weights they touch first (llama.cpp maps with MAP_POPULATE for the same reason).
// MADV_POPULATE_READ (Linux 5.14) maps the page cache's pages, reading those it lacks; on an older
// kernel the read of each page faults it in ('touch'). The read pass is kept after a populate too:
// on the VMs this project runs on, the first read of each freshly mapped page still cost ~1.7 us
// below the guest (no fault counted; one read per page of a 1.16 GB file took 450-520 ms, a second
// pass 7 ms), which a fresh engine's first prompt paid at half speed. The mapping counts as used
// until it settles, so unmapFile cannot pull it from under the worker. A read error rejects (code MT_IO); running short of memory stops
// early and resolves with the bytes populated so far (the rest come in when used).
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
namespace {

class PopulateWorker : public Napi::AsyncWorker {
 public:
  PopulateWorker(Napi::Env env, MappedFile* m, Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "moetier.populateMapping"), m_(m), deferred_(deferred) {
    m_->users++;
  }
  ~PopulateWorker() override { m_->users--; }

  void Execute() override {
    const int64_t start = mt_monotonic_ns();
    auto* base = static_cast<uint8_t*>(m_->base);
    // In slices, so that a short-of-memory stop still reports how far it got.
    constexpr size_t kSliceBytes = size_t(64) << 20;
    for (size_t at = 0; at < m_->length && error_ == 0; at += kSliceBytes) {
      const size_t n = std::min(kSliceBytes, m_->length - at);
      if (method_ == "populate-read" && madvise(base + at, n, MADV_POPULATE_READ) != 0) {
        if (errno == EINVAL && at == 0) {
          method_ = "touch";  // a kernel without MADV_POPULATE_READ
        } else if (errno == ENOMEM || errno == EAGAIN || errno == EINTR) {
          break;
        } else {
          error_ = errno;
          break;
        }
      }
      volatile uint8_t sink = 0;
      const size_t page = size_t(sysconf(_SC_PAGESIZE));
      for (size_t i = 0; i < n; i += page) sink = sink + base[at + i];
      populated_ = at + n;
    }
    ms_ = double(mt_monotonic_ns() - start) / 1e6;
  }
  void OnOK() override {
    if (error_ != 0) {
      deferred_.Reject(mtjs::New(Env(), mtjs::Kind::kError, mtjs::kIo,
                                 std::string("populateMapping: madvise(MADV_POPULATE_READ): ") + std::strerror(error_))
                           .Value());
      return;
    }
    Napi::Object out = Napi::Object::New(Env());
    out.Set("bytes", double(populated_));
    out.Set("ms", ms_);
    out.Set("method", method_);
    deferred_.Resolve(out);
  }

 private:
  MappedFile* m_;
  Napi::Promise::Deferred deferred_;
  std::string method_ = "populate-read";
  size_t populated_ = 0;
  double ms_ = 0;
  int error_ = 0;
};

Napi::Value PopulateMapping(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  MappedFile* m = UnwrapMappedFile(env, info[0]);
  if (m == nullptr) {
    deferred.Reject(env.GetAndClearPendingException().Value());
    return deferred.Promise();
  }
  (new PopulateWorker(env, m, deferred))->Queue();
  return deferred.Promise();
}

}  // namespace

// dropFileCache(path): the file's clean pages leave the page cache (fdatasync, then
// posix_fadvise DONTNEED on the whole file). For benchmarks that start cold without dropping
// every cache on the machine, and for tests of mappedResidency. Pages mapped and locked by
// someone may stay.
Napi::Value DropFileCache(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString())
    return mtjs::ThrowTypeError(env, "dropFileCache(path): path must be a string");
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return mtjs::ThrowError(env, mtjs::kIo, "dropFileCache: " + path + ": " + std::strerror(errno));
  fdatasync(fd);
  const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  if (rc != 0)
    return mtjs::ThrowError(env, mtjs::kIo, "dropFileCache: " + path + ": posix_fadvise: " + std::strerror(rc));
  return env.Undefined();
}

void RegisterMmap(Napi::Env env, Napi::Object exports) {
  exports.Set("dropFileCache", Napi::Function::New(env, DropFileCache));
  exports.Set("mapFile", Napi::Function::New(env, MapFile));
  exports.Set("mappedFaults", Napi::Function::New(env, MappedFaults));
  exports.Set("mappedResidency", Napi::Function::New(env, MappedResidency));
  exports.Set("populateMapping", Napi::Function::New(env, PopulateMapping));
  exports.Set("unmapFile", Napi::Function::New(env, UnmapFile));
}
