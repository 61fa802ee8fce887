// Jobs that run on the pool: row-split matvec / matmul, the pool self-check and the
// read-bandwidth probe. The forward pass splits its own ops the same way.
#include <atomic>
#include <chrono>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <thread>
#include "mt_pool.h"

namespace {

// Rows are handed out in chunks (mt_pool_for) rather than as fixed halves: a thread that
// starts late (woken from sleep, or preempted on a shared machine) takes fewer chunks, or
// none, instead of holding the others up. Each row's result does not depend on which
// thread computes it, so the output is the same for every thread count.
struct MatJob {
  int wtype;
  const void* W;
  int64_t rows, cols, n;
  const void* acts;
  float* Y;
  int64_t chunk_rows;
};

// About 8 chunks per thread, at least 16 rows (a few KB of weights) each.
int64_t chunk_rows_for(int64_t rows, int nth) {
  int64_t c = rows / (8 * (int64_t)nth);
  return c < 16 ? 16 : c;
}

void run_matvec(void* arg, int64_t chunk, int) {
  const MatJob* j = (const MatJob*)arg;
  int64_t r0 = chunk * j->chunk_rows;
  int64_t r1 = r0 + j->chunk_rows < j->rows ? r0 + j->chunk_rows : j->rows;
  mt_matvec_rows(j->wtype, j->W, j->cols, j->acts, j->Y, r0, r1);
}

void run_matmul(void* arg, int64_t chunk, int) {
  const MatJob* j = (const MatJob*)arg;
  int64_t r0 = chunk * j->chunk_rows;
  int64_t r1 = r0 + j->chunk_rows < j->rows ? r0 + j->chunk_rows : j->rows;
  mt_matmul_rows(j->wtype, j->W, j->cols, j->acts, j->n, j->Y, j->rows, r0, r1);
}

struct CheckJob {
  int nth_expected;
  int worker_delay_us;  // thread 1 sleeps this long in every job (straggler tests)
  int64_t job;
  int64_t* runs_per_thread;               // written only by thread ith: no race
  std::atomic<int64_t>* threads_per_job;  // all threads add to one slot per job
  std::atomic<int> bad_nth;
};

struct ChunkCheck {
  std::atomic<int64_t>* chunk_runs;
  std::atomic<int64_t> on_workers;
};

void run_chunk_check(void* arg, int64_t chunk, int ith) {
  ChunkCheck* c = (ChunkCheck*)arg;
  c->chunk_runs[chunk].fetch_add(1, std::memory_order_relaxed);
  if (ith > 0) c->on_workers.fetch_add(1, std::memory_order_relaxed);
}

void run_check(void* arg, int ith, int nth) {
  CheckJob* c = (CheckJob*)arg;
  if (nth != c->nth_expected || ith < 0 || ith >= nth) c->bad_nth.store(1);
  if (ith == 1 && c->worker_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(c->worker_delay_us));
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

// A for job of n chunks that counts each chunk's runs (and runs past n).
struct StressJob {
  std::atomic<int32_t>* runs;
  int64_t n;
  std::atomic<int64_t> out_of_range{0};
};

void run_stress_chunk(void* arg, int64_t chunk, int) {
  StressJob* s = (StressJob*)arg;
  if (chunk < 0 || chunk >= s->n)
    s->out_of_range.fetch_add(1, std::memory_order_relaxed);
  else
    s->runs[chunk].fetch_add(1, std::memory_order_relaxed);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {

void mt_pool_matvec(mt_pool* pool, int wtype, const void* W, int64_t rows, int64_t cols, const void* act, float* y) {
  MatJob j{wtype, W, rows, cols, 1, act, y, chunk_rows_for(rows, mt_pool_threads(pool))};
  mt_pool_for(pool, (rows + j.chunk_rows - 1) / j.chunk_rows, run_matvec, &j);
}

void mt_pool_matmul(mt_pool* pool, int wtype, const void* W, int64_t rows, int64_t cols, const void* acts, int64_t n,
                    float* Y) {
  MatJob j{wtype, W, rows, cols, n, acts, Y, chunk_rows_for(rows, mt_pool_threads(pool))};
  mt_pool_for(pool, (rows + j.chunk_rows - 1) / j.chunk_rows, run_matmul, &j);
}

int mt_pool_check(mt_pool* pool, int64_t jobs, int worker_delay_us, int64_t* runs_per_thread, int64_t* threads_per_job,
                  int64_t for_chunks, int64_t* chunk_runs, int64_t* chunks_on_workers, int caller_gap_us) {
  std::atomic<int64_t>* per_job = new std::atomic<int64_t>[jobs];
  for (int64_t i = 0; i < jobs; i++) per_job[i].store(0);
  std::atomic<int64_t>* per_chunk = new std::atomic<int64_t>[for_chunks > 0 ? for_chunks : 1];
  for (int64_t i = 0; i < for_chunks; i++) per_chunk[i].store(0);
  CheckJob c;
  c.nth_expected = mt_pool_threads(pool);
  c.worker_delay_us = worker_delay_us;
  c.runs_per_thread = runs_per_thread;
  c.threads_per_job = per_job;
  c.bad_nth.store(0);
  ChunkCheck cc;
  cc.chunk_runs = per_chunk;
  cc.on_workers.store(0);
  for (int64_t i = 0; i < jobs; i++) {
    c.job = i;
    if (caller_gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(caller_gap_us));
    mt_pool_run(pool, run_check, &c);
    if (for_chunks > 0) mt_pool_for(pool, for_chunks, run_chunk_check, &cc);
  }
  for (int64_t i = 0; i < jobs; i++) threads_per_job[i] = per_job[i].load();
  for (int64_t i = 0; i < for_chunks; i++) chunk_runs[i] = per_chunk[i].load();
  *chunks_on_workers = cc.on_workers.load();
  delete[] per_job;
  delete[] per_chunk;
  return c.bad_nth.load() ? -1 : 0;
}

int64_t mt_pool_for_stress(mt_pool* pool, int64_t jobs, int64_t max_chunks) {
  std::vector<std::atomic<int32_t>> runs((size_t)max_chunks);
  int64_t bad = 0;
  for (int64_t j = 0; j < jobs; j++) {
    // Small and large jobs in turn: a worker late in a small one meets a larger one's n_chunks.
    StressJob s;
    s.n = j % 2 == 0 ? 2 : max_chunks;
    s.runs = runs.data();
    for (int64_t c = 0; c < s.n; c++) runs[(size_t)c].store(0, std::memory_order_relaxed);
    mt_pool_for(pool, s.n, run_stress_chunk, &s);
    bool ok = s.out_of_range.load() == 0;
    for (int64_t c = 0; c < s.n; c++) ok = ok && runs[(size_t)c].load() == 1;
    bad += ok ? 0 : 1;
  }
  return bad;
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
