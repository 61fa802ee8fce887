// Residents in device memory (a backend whose slots the host cannot read: cuda, cuda-sim).
// bind marks such a resident remote (leased, a hit); the forward pass hands the layer's remote
// runs to remote_start right after bind, and this worker thread runs them one by one on the
// backend (mt_backend_run_expert: the run's hidden rows in, its output rows out) while the eval
// thread computes the layer's other runs on the CPU; remote_wait joins before the combine.
//
//   eval thread:   bind (lease, remote = 1) -> remote_start (gather rows, post) -> host runs
//                  -> remote_wait (join; first error) -> combine -> layer_end (release leases)
//   remote thread: for each job: run_expert(slot, x rows, y rows) on the backend
//
// The leases stay held until layer_end, after remote_wait, so no upload overwrites a slot the
// device still reads; tier_abandon_layer joins the worker before it releases them.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include "../cuda/mt_backend_cuda.h"
#include "tier.h"

namespace mt {

namespace {

mt_tier& tier_of(void* self) { return *static_cast<mt_tier*>(self); }

// One job on the backend: the layer's geometry and the slot's bytes (gate | up | down).
int run_job(mt_tier& t, int32_t layer, const RemoteJob& job, char* err, size_t err_bytes) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  mt_backend_cuda_expert_args run{};
  run.n_embd = e.gate.cols, run.n_ff = e.gate.rows;
  run.gate_type = e.gate.type, run.up_type = e.up.type, run.down_type = e.down.type;
  run.gate_bytes = e.gate_bytes, run.up_bytes = e.up_bytes, run.down_bytes = e.down_bytes;
  const size_t E = size_t(run.n_embd);
  for (int32_t done = 0; done < job.rows;) {  // rows are independent: a long run goes in pieces
    run.count = std::min<int32_t>(job.rows - done, MT_BACKEND_CUDA_EXPERT_ROWS_MAX);
    run.x = job.x + size_t(done) * E, run.y = job.y + size_t(done) * E;
    if (mt_backend_run_expert(t.backend, job.slot, &run, err, err_bytes) != MT_BACKEND_OK) return -1;
    done += run.count;
  }
  return 0;
}

void work(mt_tier* tier) {
  mt_tier& t = *tier;
  RemoteWorker& w = *t.remote;
  std::unique_lock<std::mutex> lock(w.mu);
  for (;;) {
    w.posted.wait(lock, [&] { return w.stop || w.busy; });
    if (w.stop) return;
    const int32_t layer = w.layer, n = w.n_jobs;
    lock.unlock();
    char why[320] = "";
    int status = 0;
    int32_t failed = -1;
    for (int32_t i = 0; i < n && status == 0; i++)
      if (run_job(t, layer, w.jobs[size_t(i)], why, sizeof why) != 0) status = -1, failed = i;
    lock.lock();
    if (status != 0) {
      w.status = status;
      std::snprintf(w.error, sizeof w.error, "tier: layer %d: computing resident slot %d on the device: %s", layer,
                    w.jobs[size_t(failed)].slot, why);
    }
    w.busy = false;
    w.finished.notify_all();
  }
}

int remote_start(void* self, int32_t layer, const float* h, const mt_remote_run* runs, int32_t n_runs, char* err, size_t err_bytes) {
  mt_tier& t = tier_of(self);
  RemoteWorker& w = *t.remote;
  const int64_t E = t.experts[size_t(layer)].gate.cols;
  size_t rows = 0;
  for (int32_t i = 0; i < n_runs; i++) rows += size_t(runs[i].rows);
  if (n_runs > t.n_expert) {  // not reached by a correct forward pass; the eval ends, so the layer's leases go
    std::snprintf(err, err_bytes, "tier: remote_start: %d runs, at most %d", n_runs, t.n_expert);
    tier_abandon_layer(t);
    return -1;
  }
  std::lock_guard<std::mutex> lock(w.mu);
  MT_ASSERT(!w.busy, "one layer's remote runs at a time (remote_wait joins before the next start)");
  if (w.x.size() < rows * size_t(E)) w.x.resize(rows * size_t(E));  // grows to the largest chunk, then stays
  float* x = w.x.data();
  for (int32_t i = 0; i < n_runs; i++) {
    const mt_remote_run& r = runs[i];
    for (int32_t j = 0; j < r.rows; j++) std::memcpy(x + size_t(j) * size_t(E), h + size_t(r.row_of[j]) * size_t(E), size_t(E) * sizeof(float));
    w.jobs[size_t(i)] = RemoteJob{t.remote_slot[size_t(r.binding)], r.rows, x, r.y};
    x += size_t(r.rows) * size_t(E);
  }
  w.layer = layer, w.n_jobs = n_runs, w.status = 0, w.error[0] = '\0';
  w.busy = true;
  w.posted.notify_one();
  return 0;
}

int remote_wait(void* self, int32_t, char* err, size_t err_bytes) {
  mt_tier& t = tier_of(self);
  RemoteWorker& w = *t.remote;
  std::unique_lock<std::mutex> lock(w.mu);
  w.finished.wait(lock, [&] { return !w.busy; });
  if (w.status == 0) return 0;
  std::snprintf(err, err_bytes, "%s", w.error);
  w.status = 0;
  lock.unlock();
  tier_abandon_layer(t);  // the eval ends here: the layer's leases go now (mt_forward.h)
  return -1;
}

}  // namespace

bool tier_remote_start(mt_tier& t, char* err, size_t err_bytes) {
  if (t.stream_io != nullptr) {
    std::snprintf(err, err_bytes, "tier: a backend whose slots the host cannot read (device memory) cannot take misses read from the file "
                                  "into its slots; use the disk tier on the cpu backend");
    return false;
  }
  t.remote = std::make_unique<RemoteWorker>();
  t.remote->jobs.resize(size_t(t.n_expert));
  t.remote_slot.assign(size_t(t.n_expert), -1);
  t.source.remote_start = remote_start;
  t.source.remote_wait = remote_wait;
  t.remote->thread = std::thread(work, &t);
  return true;
}

void tier_remote_join(mt_tier& t) {
  if (!t.remote) return;
  RemoteWorker& w = *t.remote;
  std::unique_lock<std::mutex> lock(w.mu);
  w.finished.wait(lock, [&] { return !w.busy; });
}

void tier_remote_stop(mt_tier& t) {
  if (!t.remote) return;
  {
    std::lock_guard<std::mutex> lock(t.remote->mu);
    t.remote->stop = true;
  }
  t.remote->posted.notify_one();
  t.remote->thread.join();
}

}  // namespace mt
