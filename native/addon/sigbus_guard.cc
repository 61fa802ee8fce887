// The SIGBUS guard over model mappings. A page of a MAP_SHARED file mapping
// past the end of a file that shrank under us raises SIGBUS on read; left alone, that ends the
// process without a word, whatever thread read it (the pool's, a tier's, V8's). The guard
// catches it for a registered mapping, maps zero pages over everything past the file's new end
// (so the read, retried when the handler returns, reads zeros and every later one does too),
// and counts the fault on the mapping. The engine reads the count after every eval and turns a
// fault into ModelFileChangedError, dropping that eval's logits: nothing computed from the zeros
// reaches a caller. A SIGBUS anywhere else keeps its default action, after a word on stderr.
//
// Only async-signal-safe calls in the handler: fstat, mmap, write, signal, raise, and atomics
// (lock-free on every target). The registry is a fixed array of atomic pointers so the handler
// never takes a lock the interrupted thread may hold.
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include "registry.h"

namespace {

// Mappings guarded at once: one per open model file; more go unguarded (the old behaviour: the
// process ends, with a word). Nobody opens 1024 models in one process.
constexpr int kGuardedMappingsMax = 1024;
std::atomic<MappedFile*> g_guarded[kGuardedMappingsMax];
size_t g_page_bytes = 4096;

void Say(const char* msg, size_t n) {
  ssize_t ignored = write(2, msg, n);
  (void)ignored;
}

// The default action, now: the signal is blocked inside the handler, so raise() lands as soon as
// it returns, with SIG_DFL in place.
void DieOfSigbus(const char* msg, size_t n) {
  Say(msg, n);
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

MappedFile* GuardedMappingAt(uintptr_t address) {
  for (auto& slot : g_guarded) {
    MappedFile* m = slot.load(std::memory_order_acquire);
    if (m == nullptr) continue;
    const uintptr_t base = reinterpret_cast<uintptr_t>(m->base);
    if (address >= base && address < base + m->length) return m;
  }
  return nullptr;
}

// Zero pages over [the file's new end, the mapping's end); only the faulting page when the file
// reads as long enough again (it grew back between the fault and here).
bool ZeroPastEnd(MappedFile* m, uintptr_t address) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(m->base);
  const uintptr_t page_mask = ~uintptr_t(g_page_bytes - 1);
  const uintptr_t end = (base + m->length + g_page_bytes - 1) & page_mask;
  struct stat st;
  uintptr_t from = address & page_mask;
  if (fstat(m->fd, &st) == 0 && st.st_size >= 0) {
    const uintptr_t file_end = (base + uintptr_t(st.st_size) + g_page_bytes - 1) & page_mask;
    if (file_end <= from) from = file_end;
  }
  void* p = mmap(reinterpret_cast<void*>(from), end - from, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p != MAP_FAILED;
}

void OnSigbus(int, siginfo_t* info, void*) {
  static const char kOutside[] = "moetier: SIGBUS outside any model mapping; the process cannot continue\n";
  static const char kUnpatched[] =
      "moetier: SIGBUS: a memory-mapped model file was truncated while it was being read, and its pages past the new "
      "end "
      "could not be replaced; the process cannot continue (do not modify a model file that an engine has open)\n";
  if (info == nullptr || info->si_code <= 0) return DieOfSigbus(kOutside, sizeof kOutside - 1);  // sent, not faulted
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  MappedFile* m = GuardedMappingAt(address);
  if (m == nullptr) return DieOfSigbus(kOutside, sizeof kOutside - 1);
  if (!ZeroPastEnd(m, address)) return DieOfSigbus(kUnpatched, sizeof kUnpatched - 1);
  m->faults.fetch_add(1, std::memory_order_release);
}

// Installed once, only where SIGBUS still has its default action (an embedder's own handler wins:
// its mappings, its rules).
bool Install() {
  struct sigaction old{};
  if (sigaction(SIGBUS, nullptr, &old) != 0) return false;
  const bool is_default = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL;
  if (!is_default) return false;
  g_page_bytes = size_t(sysconf(_SC_PAGESIZE));
  struct sigaction sa{};
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGBUS, &sa, nullptr) == 0;
}

bool InstallOnce() {
  static const bool installed = Install();  // a thread-safe static: mapFile may run in workers too
  return installed;
}

}  // namespace

bool GuardMapping(MappedFile* m) {
  if (!InstallOnce()) return false;
  for (auto& slot : g_guarded) {
    MappedFile* expected = nullptr;
    if (slot.compare_exchange_strong(expected, m, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void UnguardMapping(MappedFile* m) {
  for (auto& slot : g_guarded) {
    MappedFile* expected = m;
    if (slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) return;
  }
}
