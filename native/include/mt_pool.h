/*
 * The thread pool's and the memory probes' extras beyond mt_kernels.h (which creates, runs and
 * frees a pool), for the addon's test and bench verbs (native/cpu/pool.cc, pool_jobs.cc,
 * synth_fill.cc implement them).
 */
#ifndef MT_POOL_H
#define MT_POOL_H
#include <stddef.h>
#include <stdint.h>
#include "mt_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Run fn(arg, chunk, ith) once for every chunk in [0, n_chunks) (n_chunks < 2^32), chunks
 * claimed by whichever threads are running; returns when all chunks are done. Unlike
 * mt_pool_run it does not wait for a worker that has not started (asleep or preempted):
 * the running threads take its share. */
void mt_pool_for(mt_pool* pool, int64_t n_chunks, void (*fn)(void* arg, int64_t chunk, int ith), void* arg);

/* How long an idle worker spins on the job counter before it sleeps (microseconds).
 * 0 sleeps at once: every job then pays a futex wake-up per worker. */
void mt_pool_set_spin_us(mt_pool* pool, int spin_us);
int mt_pool_spin_us(const mt_pool* pool);
/* Jobs after which the caller found a worker had not been running (it started past the spin
 * budget, or was preempted inside its share); each one switches the pool to sleeping for the next 256 jobs (see pool.cc). */
int64_t mt_pool_straggler_jobs(const mt_pool* pool);
/* The caller's verdict after waiting waited_ns for the other threads under a spin budget of
 * budget_ns (0: not spinning): 1 if that wait means a worker was not running. woke != 0: the
 * job had to wake a sleeping worker, which is allowed a futex wake-up more (see pool.cc).
 * Pure, so its thresholds are tested without timing anything. */
int mt_pool_is_straggler_wait(int64_t budget_ns, int64_t waited_ns, int woke);
/* The verdict on the rest of the wait, tail_ns after every worker had started: 1 if a worker
 * was preempted inside its share (the wait passed the budget and twice the caller's own share
 * own_ns, which takes at least as long as a worker's last piece). Pure, like the one above. */
int mt_pool_is_straggler_tail(int64_t budget_ns, int64_t tail_ns, int64_t own_ns);
/* 500 us covers the idle gap between two decode evaluations (the token's JavaScript and two
 * thread hand-offs, ~100-200 us measured), so the workers are still spinning when the next
 * token's first job comes: on 2 cores, 2 threads, small preset, 8-13 % faster per token than
 * 100 us (paired rounds; bench/README.md). */
#define MT_POOL_SPIN_US_DEFAULT 500
#define MT_POOL_THREADS_MAX 64

/* Sum of `bytes` bytes read with the active ISA's widest loads (a streaming read probe). */
uint64_t mt_read_sum(const void* p, size_t bytes);

/* Jobs on a pool (pool_jobs.cc): mt_pool_for over chunks of rows. */
/* y [rows] = W [rows, cols] . act (one prepared row). */
void mt_pool_matvec(mt_pool* pool, int wtype, const void* W, int64_t rows, int64_t cols, const void* act, float* y);
/* Y [n, rows] = acts [n prepared rows] W^T. */
void mt_pool_matmul(mt_pool* pool, int wtype, const void* W, int64_t rows, int64_t cols, const void* acts, int64_t n,
                    float* Y);
/* Run `jobs` run jobs back to back; each adds 1 to runs_per_thread[ith] (pool_threads entries)
 * and to threads_per_job[job] (jobs entries); thread 1 first sleeps worker_delay_us.
 * With for_chunks > 0, a for job of that many chunks follows every run job; each chunk
 * adds 1 to chunk_runs[chunk] (for_chunks entries) and, when a worker (ith > 0) ran it,
 * to *chunks_on_workers. caller_gap_us > 0: the caller sleeps that long before each job (an
 * idle gap, as between two evaluations). Returns 0, or -1 if a job saw a wrong nth. */
/* jobs mt_pool_for jobs back to back, of 2 and max_chunks chunks in turn, each chunk counting its
 * runs: returns the jobs in which a chunk ran other than once (0: each ran once). Stresses the
 * hand-over from one for job to the next (pool.cc: the claim word's close). */
int64_t mt_pool_for_stress(mt_pool* pool, int64_t jobs, int64_t max_chunks);
int mt_pool_check(mt_pool* pool, int64_t jobs, int worker_delay_us, int64_t* runs_per_thread, int64_t* threads_per_job,
                  int64_t for_chunks, int64_t* chunk_runs, int64_t* chunks_on_workers, int caller_gap_us);
/* Rows x [rows, cols] quantised as mt_quantize_rows does, rows split over the pool's threads
 * (synth_fill.cc). Returns 0, -1 for a bad type / cols, -2 when scratch could not be allocated. */
int mt_pool_quantize_rows(mt_pool* pool, int type, const float* x, int64_t rows, int64_t cols, void* out);
/* gen-model's uniform tensors: rows [rows, cols] of src/synth/prng.ts's fillUniform stream (the sfc32
 * state[4] = a, b, c, d, advanced past the rows; value = (int32) step * scale, rounded to f32),
 * quantised to `type` into out on the pool. The same bytes as the TypeScript path, for any thread
 * count. Working memory: two buffers of 4 Mi floats. Returns as mt_pool_quantize_rows. */
int mt_pool_synth_uniform(mt_pool* pool, uint32_t state[4], double scale, int type, int64_t rows, int64_t cols,
                          void* out);
/* Streaming read bandwidth over a fresh buffer of `bytes`, split over `threads` threads:
 * the best of several passes, in GB/s (1e9 bytes per second); negative if allocation fails. */
double mt_read_bandwidth_gbs(size_t bytes, int threads);
#ifdef __cplusplus
}
#endif
#endif
