// Each addon source file registers its own verbs; addon.cc calls them all.
#pragma once
#include <napi.h>
#include <atomic>
#include <cstdint>
#include <memory>

void RegisterMmap(Napi::Env env, Napi::Object exports);     // mmap.cc
void RegisterOps(Napi::Env env, Napi::Object exports);      // ops.cc: kernels for tests and benches
void RegisterModel(Napi::Env env, Napi::Object exports);    // model.cc: model, context, eval
void RegisterBackend(Napi::Env env, Napi::Object exports);  // backend.cc: slots, uploads, events, leases
void RegisterTier(Napi::Env env, Napi::Object exports);     // tier.cc: the expert tier of a context
void RegisterIo(Napi::Env env, Napi::Object exports);       // io.cc: the read engine (reads of file ranges)
void RegisterSynth(Napi::Env env, Napi::Object exports);    // synth.cc: gen-model's quantise / fill verbs
void RegisterPolicy(Napi::Env env, Napi::Object exports);   // policy.cc: the eviction policy's pure verbs (replay)

// The mapping behind a MappedFileHandle (an External<MappedFile>), for model.cc.
struct MappedFile {
  void* base = nullptr;
  size_t length = 0;
  // The open file, kept for the mapping's life: readers that need the file again (rebuild
  // workers) open this descriptor's file, never the path, which may name another file by then.
  int fd = -1;
  bool closed = false;
  // Native objects reading the mapping (models: their contexts, tiers and uploads hold them).
  // unmapFile refuses while any is alive, so no native reader can outlive the mapping.
  std::atomic<int> users{0};
  // SIGBUS faults past the file's end that the guard turned into zero pages (sigbus_guard.cc):
  // once non-zero, what the mapping reads is no longer the file the model was loaded from.
  std::atomic<uint32_t> faults{0};
};
// The SIGBUS guard (sigbus_guard.cc): false when the mapping is left unguarded (another handler
// owns SIGBUS, or the registry is full). Unguard before munmap.
bool GuardMapping(MappedFile* m);
void UnguardMapping(MappedFile* m);
MappedFile* UnwrapMappedFile(Napi::Env env, Napi::Value handle);
// The backend behind a backend handle, shared: it lives while the holder does (tier.cc). Null with
// a JS exception pending when the handle is not a live backend.
std::shared_ptr<struct mt_backend> ShareBackend(Napi::Env env, Napi::Value handle);
