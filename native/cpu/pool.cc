// The compute thread pool. The caller is thread 0; workers 1..n-1 wait for the job
// generation counter `gen` to move. A worker spins on it for spin_us after its last job
// before it sleeps on a condition variable, because a futex wake-up costs more than many
// of the small matvecs inside one token. Two kinds of job:
//
//   run (mt_pool_run): fn(ith) on every thread exactly once; the caller waits for all.
//     caller: fn, arg, pending = n-1; job = RUN(g); gen = g; fn(0); wait pending == 0
//     worker: sees gen move; job RUN(g) not yet run -> fn(ith); pending--
//   for (mt_pool_for): chunks [0, n_chunks) handed out from a claim word (for_id, next);
//     the caller waits for the chunks, not for the workers. A worker that starts late
//     (asleep, or preempted on a busy machine) finds nothing left and skips the job.
//     caller: fn, arg, n_chunks; claim = (id, 0); job = FOR(g); gen = g; claim chunks; wait done == n_chunks
//     worker: claim = CAS (id, c) -> (id, c + 1) while c < n_chunks; fn(c); done++
//   Before it rewrites fn / arg / n_chunks for a new job, the caller closes the old one's
//   claim word: (old id, kChunkMask), which no chunk index passes. A worker late in the old
//   job may read the old claim and then the new n_chunks (larger than the old one's claims):
//   its CAS on (old id, c) then fails, as the closed word is visible to it by then (n_chunks
//   is stored with release after the close, and loaded with acquire). Without the close that
//   CAS succeeded, ran the new job's fn on a chunk outside its claim, and counted a chunk done
//   that the new job then never reached (its caller waited for ever). A successful CAS on
//   (id, c) therefore proves job id was open, so the fn / arg / n_chunks the worker read were
//   job id's.
//
// Spinning only pays while every thread has a core. On a shared machine a spinning worker
// gets preempted, and a run job then waits a scheduler slice for it (measured on 2 busy
// cores: 5x slower than sleeping). So the caller times its wait for the others after its own
// share, in two parts: until every worker had started the job, and after. A worker that
// started more than the spin budget (at most 100 us) late was not running; one that started
// in time but kept the caller waiting past the budget and twice the caller's own share was
// preempted inside it (the pieces of a phase cost alike, so finishing its last one takes no
// longer than the caller's share). Either way the pool sleeps instead of spinning for the
// next kBackoffJobs jobs. A job that found a worker asleep (idle past its spin) also waits for
// its wake-up, and is allowed that.
//   The wait for a worker still inside its last piece is work, not a straggler: counting all
// of it (as this pool once did) called every large phase's tail a straggler, and on 2 quiet
// cores a quarter of a decode's jobs then paid a futex wake-up (2T decode 1.3x 1T).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>
#include "mt_assert.h"
#include "mt_pool.h"

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

constexpr int kBackoffJobs = 256;           // about half a decode token's matvecs
constexpr int64_t kStragglerMinNs = 50000;  // waits below this are normal wake-up jitter
// The caller's wait for the others before it calls them stragglers: the spin budget, at most
// this. Separate from the idle spin (which covers gaps between evaluations, longer than this).
constexpr int64_t kStragglerBudgetMaxNs = 100000;
// What a futex wake-up of a sleeping worker may add to that (tens of us on a free core).
constexpr int64_t kWakeAllowanceNs = 500000;
constexpr uint64_t kChunkMask = 0xffffffffu;

typedef void (*run_fn)(void*, int, int);
typedef void (*for_fn)(void*, int64_t, int);

}  // namespace

struct mt_pool {
  int n_threads = 1;
  std::atomic<int> spin_us{MT_POOL_SPIN_US_DEFAULT};
  std::atomic<int> backoff_jobs{0};  // > 0: spin 0 for that many more jobs
  std::atomic<int64_t> straggler_jobs{0};
  std::vector<std::thread> workers;

  std::atomic<uint64_t> gen{0};  // moves once per job; workers wait on it
  std::atomic<uint64_t> job{0};  // (gen of the job << 1) | 1 for run, 0 for for
  std::atomic<bool> stop{false};

  std::atomic<run_fn> fn{nullptr};  // run jobs
  std::atomic<void*> arg{nullptr};
  std::atomic<int> pending{0};
  std::atomic<int> started{0};  // workers that entered the open run job

  std::atomic<for_fn> ffn{nullptr};  // for jobs
  std::atomic<void*> farg{nullptr};
  std::atomic<int64_t> n_chunks{0};
  std::atomic<uint64_t> claim{0};  // (for_id << 32) | next chunk
  std::atomic<int64_t> chunks_done{0};
  uint32_t for_id = 0;  // caller only
  // Debug build: MOETIER_DEBUG_POOL_HANDOVER_US widens the hand-over from one for job to the next, as
  // preempted threads would: a worker sleeps this long between loading the claim word and the job's
  // fields, the caller 4x as long between writing a new job's fields and opening its claim word.
  int debug_handover_us = 0;

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

// Claim and run chunks of the open for job until none is left (or the job is over).
void claim_chunks(mt_pool* p, int ith) {
  uint64_t c = p->claim.load(std::memory_order_acquire);
  const uint64_t id = c >> 32;
  if (p->debug_handover_us > 0 && ith != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(p->debug_handover_us));
  for_fn fn = p->ffn.load(std::memory_order_relaxed);
  void* arg = p->farg.load(std::memory_order_relaxed);
  const int64_t n = p->n_chunks.load(std::memory_order_acquire);  // a new n: the old job's close is seen
  while ((c >> 32) == id && (int64_t)(c & kChunkMask) < n) {
    if (!p->claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    fn(arg, (int64_t)(c & kChunkMask), ith);
    const int64_t done = p->chunks_done.fetch_add(1, std::memory_order_release) + 1;
    MT_ASSERT(done <= n, "each chunk of a for job runs once: chunks done never pass n_chunks");
    c = c + 1;
  }
}

void worker_main(mt_pool* p, int ith) {
  uint64_t seen = 0, last_run = 0;
  for (;;) {
    uint64_t g = wait_for_job(p, seen);
    if (g == seen) return;  // stopping
    seen = g;
    // The newest job: its gen may be ahead of g (published just now), never a run job
    // that this worker skipped (a run job waits for every worker before the next one).
    uint64_t job = p->job.load(std::memory_order_acquire);
    if ((job & 1) == 0) {
      claim_chunks(p, ith);
    } else if ((job >> 1) > last_run) {
      last_run = job >> 1;
      p->started.fetch_add(1, std::memory_order_relaxed);
      p->fn.load(std::memory_order_relaxed)(p->arg.load(std::memory_order_relaxed), ith, p->n_threads);
      const int before = p->pending.fetch_sub(1, std::memory_order_release);
      MT_ASSERT(before > 0, "each worker runs a run job once: the pending counter never goes below 0");
    }
  }
}

// Publish job word `job` for generation gen + 1 and wake sleepers. Returns whether a worker
// was asleep (it had been idle past its spin budget, and now pays a futex wake-up).
bool publish(mt_pool* p, bool run) {
  uint64_t g = p->gen.load(std::memory_order_relaxed) + 1;
  p->job.store((g << 1) | (run ? 1 : 0), std::memory_order_release);
  p->gen.fetch_add(1);  // seq_cst: orders before the sleepers check
  if (p->sleepers.load() == 0) return false;
  std::lock_guard<std::mutex> lock(p->mu);
  p->cv.notify_all();
  return true;
}

// Wait until done() after the caller's own share (own_ns); back off spinning after a straggler
// (mt_pool_is_straggler_wait on the wait until every worker had started, mt_pool_is_straggler_tail
// on the rest). A job that had to wake a sleeping worker also waits for the wake-up: the first job
// after an idle gap (between two evaluations, JavaScript ran for longer than the spin) is allowed
// kWakeAllowanceNs more before it counts, or every such gap would stop the spinning for the next
// kBackoffJobs jobs; a wake-up that takes longer than that found no free core (a busy machine), and
// backs off like a straggler.
template <typename Done, typename Started>
void wait_rest(mt_pool* p, bool woke, int64_t own_ns, Done done, Started all_started) {
  const int64_t budget_ns = std::min(spin_ns(p), kStragglerBudgetMaxNs);
  const int64_t wait_start = now_ns();
  int64_t start_wait_ns = all_started() ? 0 : -1;
  for (uint32_t i = 1; !done(); i++) {
    cpu_relax();
    if ((i & 63) != 0) continue;
    const int64_t waited = now_ns() - wait_start;
    if (start_wait_ns < 0 && all_started()) start_wait_ns = waited;
    if (waited > budget_ns) std::this_thread::yield();
  }
  const int64_t waited_ns = now_ns() - wait_start;
  if (start_wait_ns < 0) start_wait_ns = waited_ns;  // started and finished between two looks
  int backoff = p->backoff_jobs.load(std::memory_order_relaxed);
  if (backoff > 0) {
    p->backoff_jobs.store(backoff - 1, std::memory_order_relaxed);
  } else if (mt_pool_is_straggler_wait(budget_ns, start_wait_ns, woke ? 1 : 0) ||
             mt_pool_is_straggler_tail(budget_ns, waited_ns - start_wait_ns, own_ns)) {
    p->straggler_jobs.fetch_add(1, std::memory_order_relaxed);
    p->backoff_jobs.store(kBackoffJobs, std::memory_order_relaxed);
  }
}

}  // namespace

extern "C" {

mt_pool* mt_pool_create(int n_threads) {
  if (n_threads < 1 || n_threads > MT_POOL_THREADS_MAX) return nullptr;
  mt_pool* p = new mt_pool();
  p->n_threads = n_threads;
#if MT_DEBUG_ASSERTS_ENABLED
  if (const char* us = std::getenv("MOETIER_DEBUG_POOL_HANDOVER_US")) p->debug_handover_us = std::atoi(us);
#endif
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

int64_t mt_pool_straggler_jobs(const mt_pool* p) { return p->straggler_jobs.load(); }

int mt_pool_is_straggler_wait(int64_t budget_ns, int64_t waited_ns, int woke) {
  if (budget_ns <= 0) return 0;  // not spinning: nobody was expected to be running
  return waited_ns > budget_ns + (woke ? kWakeAllowanceNs : 0) && waited_ns > kStragglerMinNs;
}

int mt_pool_is_straggler_tail(int64_t budget_ns, int64_t tail_ns, int64_t own_ns) {
  if (budget_ns <= 0) return 0;
  return tail_ns > budget_ns + 2 * own_ns && tail_ns > kStragglerMinNs;
}

void mt_pool_run(mt_pool* p, void (*fn)(void*, int, int), void* arg) {
  if (p->n_threads == 1) {
    fn(arg, 0, 1);
    return;
  }
  MT_ASSERT(p->pending.load(std::memory_order_acquire) == 0,
            "a run job starts only after every worker finished the last one");
  p->fn.store(fn, std::memory_order_relaxed);
  p->arg.store(arg, std::memory_order_relaxed);
  p->pending.store(p->n_threads - 1, std::memory_order_relaxed);
  p->started.store(0, std::memory_order_relaxed);
  bool woke = publish(p, true);
  const int64_t own_start = now_ns();
  fn(arg, 0, p->n_threads);
  const int workers = p->n_threads - 1;
  wait_rest(
      p, woke, now_ns() - own_start, [p] { return p->pending.load(std::memory_order_acquire) == 0; },
      [p, workers] { return p->started.load(std::memory_order_relaxed) == workers; });
}

void mt_pool_for(mt_pool* p, int64_t n_chunks, void (*fn)(void*, int64_t, int), void* arg) {
  MT_ASSERT(n_chunks >= 0 && (uint64_t)n_chunks <= kChunkMask, "chunk indices fit the claim word's low 32 bits");
  // The last for job: every chunk was claimed once and ran once, and no straggler ran one after it returned.
  MT_ASSERT(
      (int64_t)(p->claim.load(std::memory_order_acquire) & kChunkMask) == p->n_chunks.load(std::memory_order_relaxed),
      "chunk claims never pass n_chunks");
  MT_ASSERT(p->chunks_done.load(std::memory_order_acquire) == p->n_chunks.load(std::memory_order_relaxed),
            "a for job returns with each chunk run once, and none runs after");
  if (p->n_threads == 1 || n_chunks == 1) {
    for (int64_t c = 0; c < n_chunks; c++) fn(arg, c, 0);
    return;
  }
  // Close the last job's claim word before its fields change (see the header).
  p->claim.store(((uint64_t)p->for_id << 32) | kChunkMask, std::memory_order_relaxed);
  p->ffn.store(fn, std::memory_order_relaxed);
  p->farg.store(arg, std::memory_order_relaxed);
  p->n_chunks.store(n_chunks, std::memory_order_release);
  p->chunks_done.store(0, std::memory_order_relaxed);
  if (p->debug_handover_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(4 * p->debug_handover_us));
  p->for_id++;
  p->claim.store((uint64_t)p->for_id << 32, std::memory_order_release);
  bool woke = publish(p, false);
  const int64_t own_start = now_ns();
  claim_chunks(p, 0);
  // A worker that has not started takes no chunk and is not waited for: only the tail counts.
  wait_rest(
      p, woke, now_ns() - own_start,
      [p, n_chunks] { return p->chunks_done.load(std::memory_order_acquire) == n_chunks; }, [] { return true; });
}

}  // extern "C"
