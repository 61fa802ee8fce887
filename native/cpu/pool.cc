// The compute thread pool. The caller of mt_pool_run is thread 0; workers 1..n-1 wait
// for the job generation counter to move. A worker spins on it for spin_us after its
// last job before it sleeps on a condition variable, because a futex wake-up costs
// more than many of the small matvecs inside one token.
//
//   caller: fn, arg = ...; gen++ (release); [notify sleepers]; fn(0); wait pending == 0
//   worker: spin / sleep until gen != seen; fn(ith); pending-- (release)
//
// One job at a time: the caller waits for every worker before it publishes the next
// job, so each worker sees every generation and runs every job exactly once.
//
// Spinning only pays while every thread has a core. On a shared machine a spinning
// worker gets preempted, and the caller then waits a whole scheduler slice for it
// (measured on 2 busy cores: 5x slower than sleeping). So the caller times how long it
// waited for the others after its own share; a wait longer than the spin budget means a
// worker was not running, and the pool sleeps instead of spinning for the next
// kBackoffJobs jobs before it tries spinning again.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#include "pool.h"

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

constexpr int kBackoffJobs = 256;      // about half a decode token's matvecs
constexpr int64_t kStragglerMinNs = 50000;  // waits below this are normal wake-up jitter

struct mt_pool {
  int n_threads = 1;
  std::atomic<int> spin_us{MT_POOL_SPIN_US_DEFAULT};
  std::atomic<int> backoff_jobs{0};  // > 0: spin 0 for that many more jobs
  std::atomic<int64_t> straggler_jobs{0};
  std::vector<std::thread> workers;

  // Written by the caller before gen moves; read by workers after they see it move.
  void (*fn)(void*, int, int) = nullptr;
  void* arg = nullptr;

  std::atomic<uint64_t> gen{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};

  // Sleep path. sleepers and gen are seq_cst on both sides (Dekker): either the
  // caller sees a sleeper and notifies under the mutex, or the sleeper sees the new gen.
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};
};

namespace {

// The spin budget now: the configured one, or 0 while backing off.
int64_t spin_ns(const mt_pool* p) {
  if (p->backoff_jobs.load(std::memory_order_relaxed) > 0) return 0;
  return (int64_t)p->spin_us.load(std::memory_order_relaxed) * 1000;
}

// Returns the new generation, or `seen` when the pool is stopping.
uint64_t wait_for_job(mt_pool* p, uint64_t seen) {
  int64_t deadline = now_ns() + spin_ns(p);
  for (uint32_t i = 1;; i++) {
    uint64_t g = p->gen.load(std::memory_order_acquire);
    if (g != seen) return g;
    if (p->stop.load(std::memory_order_relaxed)) return seen;
    cpu_relax();
    if ((i & 63) == 0 && now_ns() > deadline) break;
  }
  std::unique_lock<std::mutex> lock(p->mu);
  p->sleepers.fetch_add(1);
  p->cv.wait(lock, [&] { return p->gen.load() != seen || p->stop.load(); });
  p->sleepers.fetch_sub(1);
  return p->stop.load() ? seen : p->gen.load(std::memory_order_acquire);
}

void worker_main(mt_pool* p, int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = wait_for_job(p, seen);
    if (g == seen) return;  // stopping
    seen = g;
    p->fn(p->arg, ith, p->n_threads);
    p->pending.fetch_sub(1, std::memory_order_release);
  }
}

void wake_sleepers(mt_pool* p) {
  if (p->sleepers.load() == 0) return;
  std::lock_guard<std::mutex> lock(p->mu);
  p->cv.notify_all();
}

}  // namespace

extern "C" {

mt_pool* mt_pool_create(int n_threads) {
  if (n_threads < 1 || n_threads > MT_POOL_THREADS_MAX) return nullptr;
  mt_pool* p = new mt_pool();
  p->n_threads = n_threads;
  p->workers.reserve(n_threads - 1);
  for (int i = 1; i < n_threads; i++) p->workers.emplace_back(worker_main, p, i);
  return p;
}

void mt_pool_destroy(mt_pool* p) {
  if (p == nullptr) return;
  p->stop.store(true);
  {
    std::lock_guard<std::mutex> lock(p->mu);
    p->cv.notify_all();
  }
  for (std::thread& t : p->workers) t.join();
  delete p;
}

int mt_pool_threads(const mt_pool* p) { return p->n_threads; }

void mt_pool_set_spin_us(mt_pool* p, int spin_us) { p->spin_us.store(spin_us < 0 ? 0 : spin_us); }

int mt_pool_spin_us(const mt_pool* p) { return p->spin_us.load(); }

void mt_pool_run(mt_pool* p, void (*fn)(void*, int, int), void* arg) {
  if (p->n_threads == 1) {
    fn(arg, 0, 1);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->pending.store(p->n_threads - 1, std::memory_order_relaxed);
  p->gen.fetch_add(1);  // seq_cst: publishes fn / arg / pending, and orders before the sleepers check
  wake_sleepers(p);
  fn(arg, 0, p->n_threads);
  // The caller's share is done; the others normally finish within microseconds.
  int64_t budget_ns = spin_ns(p);
  int64_t wait_start = now_ns();
  for (uint32_t i = 1; p->pending.load(std::memory_order_acquire) != 0; i++) {
    cpu_relax();
    if ((i & 63) == 0 && now_ns() - wait_start > budget_ns) std::this_thread::yield();
  }
  int64_t waited_ns = now_ns() - wait_start;
  int backoff = p->backoff_jobs.load(std::memory_order_relaxed);
  if (backoff > 0) {
    p->backoff_jobs.store(backoff - 1, std::memory_order_relaxed);
  } else if (budget_ns > 0 && waited_ns > budget_ns && waited_ns > kStragglerMinNs) {
    p->straggler_jobs.fetch_add(1, std::memory_order_relaxed);
    p->backoff_jobs.store(kBackoffJobs, std::memory_order_relaxed);
  }
}

int64_t mt_pool_straggler_jobs(const mt_pool* p) { return p->straggler_jobs.load(); }

}  // extern "C"
