// Jobs that run on the pool: row-split matvec / matmul, the pool self-check and the
// read-bandwidth probe. The forward pass splits its own ops the same way.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include "pool.h"

namespace {

// Thread ith of nth owns rows [r0, r1) of `rows`.
inline void split_rows(int64_t rows, int ith, int nth, int64_t* r0, int64_t* r1) {
  *r0 = rows * ith / nth;
  *r1 = rows * (ith + 1) / nth;
}

struct MatJob {
  int wtype;
  const void* W;
  int64_t rows, cols, n;
  const void* acts;
  float* Y;
};

void run_matvec(void* arg, int ith, int nth) {
  const MatJob* j = (const MatJob*)arg;
  int64_t r0, r1;
  split_rows(j->rows, ith, nth, &r0, &r1);
  mt_matvec_rows(j->wtype, j->W, j->cols, j->acts, j->Y, r0, r1);
}

void run_matmul(void* arg, int ith, int nth) {
  const MatJob* j = (const MatJob*)arg;
  int64_t r0, r1;
  split_rows(j->rows, ith, nth, &r0, &r1);
  mt_matmul_rows(j->wtype, j->W, j->cols, j->acts, j->n, j->Y, j->rows, r0, r1);
}

struct CheckJob {
  int nth_expected;
  int64_t job;
  int64_t* runs_per_thread;            // written only by thread ith: no race
  std::atomic<int64_t>* threads_per_job;  // all threads add to one slot per job
  std::atomic<int> bad_nth;
};

void run_check(void* arg, int ith, int nth) {
  CheckJob* c = (CheckJob*)arg;
  if (nth != c->nth_expected || ith < 0 || ith >= nth) c->bad_nth.store(1);
  c->runs_per_thread[ith] += 1;
  c->threads_per_job[c->job].fetch_add(1, std::memory_order_relaxed);
}

struct ReadJob {
  const uint8_t* buf;
  size_t bytes;
  std::atomic<uint64_t> sink;
};

void run_read(void* arg, int ith, int nth) {
  ReadJob* r = (ReadJob*)arg;
  size_t chunk = (r->bytes / (size_t)nth) & ~(size_t)127;
  uint64_t s = mt_read_sum(r->buf + chunk * (size_t)ith, chunk);
  r->sink.fetch_add(s, std::memory_order_relaxed);  // keeps the loads alive
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {

void mt_pool_matvec(mt_pool* pool, int wtype, const void* W, int64_t rows, int64_t cols, const void* act, float* y) {
  MatJob j{wtype, W, rows, cols, 1, act, y};
  mt_pool_run(pool, run_matvec, &j);
}

void mt_pool_matmul(mt_pool* pool, int wtype, const void* W, int64_t rows, int64_t cols, const void* acts, int64_t n,
                    float* Y) {
  MatJob j{wtype, W, rows, cols, n, acts, Y};
  mt_pool_run(pool, run_matmul, &j);
}

int mt_pool_check(mt_pool* pool, int64_t jobs, int64_t* runs_per_thread, int64_t* threads_per_job) {
  std::atomic<int64_t>* per_job = new std::atomic<int64_t>[jobs];
  for (int64_t i = 0; i < jobs; i++) per_job[i].store(0);
  CheckJob c;
  c.nth_expected = mt_pool_threads(pool);
  c.runs_per_thread = runs_per_thread;
  c.threads_per_job = per_job;
  c.bad_nth.store(0);
  for (int64_t i = 0; i < jobs; i++) {
    c.job = i;
    mt_pool_run(pool, run_check, &c);
  }
  for (int64_t i = 0; i < jobs; i++) threads_per_job[i] = per_job[i].load();
  delete[] per_job;
  return c.bad_nth.load() ? -1 : 0;
}

double mt_read_bandwidth_gbs(size_t bytes, int threads) {
  bytes = (bytes + 4095) & ~(size_t)4095;
  uint8_t* buf = (uint8_t*)aligned_alloc(4096, bytes);
  mt_pool* pool = buf ? mt_pool_create(threads) : nullptr;
  if (!pool) {
    free(buf);
    return -1.0;
  }
  memset(buf, 1, bytes);  // fault every page in before timing
  ReadJob r{buf, bytes, {0}};
  mt_pool_run(pool, run_read, &r);  // warm-up pass
  double best = 0.0;
  auto start = std::chrono::steady_clock::now();
  for (int pass = 0; pass < 3 || (pass < 50 && seconds_since(start) < 0.3); pass++) {
    auto t0 = std::chrono::steady_clock::now();
    mt_pool_run(pool, run_read, &r);
    double s = seconds_since(t0);
    size_t read = ((bytes / (size_t)threads) & ~(size_t)127) * (size_t)threads;
    if (s > 0 && read / s / 1e9 > best) best = read / s / 1e9;
  }
  mt_pool_destroy(pool);
  free(buf);
  return best;
}

}  // extern "C"
