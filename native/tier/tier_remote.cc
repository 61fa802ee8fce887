// Residents in device memory (a backend whose slots the host cannot read: cuda, cuda-sim).
// bind marks such a resident remote (leased, a hit); the forward pass hands the layer's remote
// runs to remote_start right after bind, and this worker thread runs them one by one on the
// backend (its interface's run_experts entry: the runs' hidden rows in, their output rows out) while the eval
// thread computes the layer's other runs on the CPU; remote_wait joins before the combine.
//
//   eval thread:   bind (lease, remote = 1) -> remote_start (gather rows, post) -> host runs
//                  -> remote_wait (join; first error) -> combine -> layer_end (release leases)
//   remote thread: run_experts(the layer's jobs, in calls of <= RUNS_MAX runs and ROWS_MAX rows)
//
// The leases stay held until layer_end, after remote_wait, so no upload overwrites a slot the
// device still reads; tier_abandon_layer joins the worker before it releases them.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include "tier.h"
#include "tier_remote.h"

namespace mt {

namespace {

mt_tier& tier_of(void* self) { return *static_cast<mt_tier*>(self); }

// The layer's geometry for a run of `rows` rows at x / y.
mt_backend_run run_of(const mt_tier& t, int32_t layer, int32_t slot, int32_t rows, const float* x, float* y) {
  const mt_layer_experts& e = t.experts[size_t(layer)];
  mt_backend_run r{};
  r.slot = slot;
  mt_backend_expert_args& a = r.args;
  a.n_embd = e.gate.cols, a.n_ff = e.gate.rows;
  a.gate_type = e.gate.type, a.up_type = e.up.type, a.down_type = e.down.type;
  a.gate_bytes = e.gate_bytes, a.up_bytes = e.up_bytes, a.down_bytes = e.down_bytes;
  a.count = rows, a.x = x, a.y = y;
  return r;
}

// One run_experts call over w.calls [0, n); the device's time joins w's span. 0, or -1 with the
// call's slots and the backend's message in w.error.
int flush(mt_tier& t, RemoteWorker& w, int32_t layer, int32_t n) {
  if (n == 0) return 0;
  mt_backend_span span{};
  char why[320] = "";
  if (w.run_experts(t.backend, w.calls.data(), n, &span, why, sizeof why) != MT_BACKEND_OK) {
    std::string slots;
    for (int32_t i = 0; i < n && slots.size() < 96; i++)
      slots += (i ? "," : "") + std::to_string(w.calls[size_t(i)].slot);
    std::snprintf(w.error, sizeof w.error,
                  "tier: layer %d: computing resident slot %d on the device (one call with slots %s): %s", layer,
                  w.calls[0].slot, slots.c_str(), why);
    return -1;
  }
  if (span.end_ns > span.start_ns && span.start_ns > 0) {
    w.span_busy_ns += span.end_ns - span.start_ns;
    w.span_end_ns = span.end_ns;
  }
  return 0;
}

// The layer's jobs in as few run_experts calls as their limits allow: at most RUNS_MAX runs and
// RUN_ROWS_MAX rows per call (a job longer than that goes in pieces; rows are independent).
int run_layer(mt_tier& t, RemoteWorker& w, int32_t layer, int32_t n_jobs) {
  const size_t E = size_t(t.experts[size_t(layer)].gate.cols);
  int32_t n = 0, rows = 0;
  for (int32_t j = 0; j < n_jobs; j++) {
    const RemoteJob& job = w.jobs[size_t(j)];
    for (int32_t done = 0; done < job.rows;) {
      if (n == MT_BACKEND_RUNS_MAX || rows == MT_BACKEND_RUN_ROWS_MAX) {
        if (flush(t, w, layer, n) != 0) return -1;
        n = rows = 0;
      }
      const int32_t piece = std::min(job.rows - done, MT_BACKEND_RUN_ROWS_MAX - rows);
      w.calls[size_t(n++)] = run_of(t, layer, job.slot, piece, job.x + size_t(done) * E, job.y + size_t(done) * E);
      rows += piece, done += piece;
    }
  }
  return flush(t, w, layer, n);
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
    // The worker alone touches calls, the span and (until busy is cleared) error.
    w.span_end_ns = w.span_busy_ns = 0;
    const int status = run_layer(t, w, layer, n);
    lock.lock();
    w.status = status;
    w.busy = false;
    w.finished.notify_all();
  }
}

int remote_start(void* self, int32_t layer, const float* h, const mt_remote_run* runs, int32_t n_runs, char* err,
                 size_t err_bytes) {
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
    for (int32_t j = 0; j < r.rows; j++)
      std::memcpy(x + size_t(j) * size_t(E), h + size_t(r.row_of[j]) * size_t(E), size_t(E) * sizeof(float));
    w.jobs[size_t(i)] = RemoteJob{t.remote->run_slot[size_t(r.binding)], r.rows, x, r.y};
    x += size_t(r.rows) * size_t(E);
  }
  w.layer = layer, w.n_jobs = n_runs, w.status = 0, w.error[0] = '\0';
  w.busy = true;
  w.posted.notify_one();
  return 0;
}

int remote_wait(void* self, int32_t, int64_t device_ns[2], char* err, size_t err_bytes) {
  mt_tier& t = tier_of(self);
  RemoteWorker& w = *t.remote;
  std::unique_lock<std::mutex> lock(w.mu);
  w.finished.wait(lock, [&] { return !w.busy; });
  // The layer's calls as one span: its last end, and their device time summed (mt_forward.h).
  device_ns[1] = w.span_end_ns;
  device_ns[0] = w.span_busy_ns > 0 ? w.span_end_ns - w.span_busy_ns : 0;
  if (w.status == 0) return 0;
  std::snprintf(err, err_bytes, "%s", w.error);
  w.status = 0;
  lock.unlock();
  tier_abandon_layer(t);  // the eval ends here: the layer's leases go now (mt_forward.h)
  return -1;
}

}  // namespace

// With a stream descriptor the misses are read from the file too, each into scratch for its call
// (tier_stream.cc admits none into a slot: the host computes a miss, and cannot read a device slot).
bool tier_remote_start(mt_tier& t, char* err, size_t err_bytes) {
  const mt_backend_i* iface = mt_backend_interface(t.backend);
  if (iface->run_experts == nullptr) {
    std::snprintf(err, err_bytes,
                  "createTier: the backend's slots are not host-visible and it has no device compute (run_experts)");
    return false;
  }
  t.remote = std::make_unique<RemoteWorker>();
  t.remote->run_experts = iface->run_experts;
  t.remote->jobs.resize(size_t(t.n_expert));
  t.remote->calls.resize(MT_BACKEND_RUNS_MAX);
  t.remote->run_slot.assign(size_t(t.n_expert), -1);
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
