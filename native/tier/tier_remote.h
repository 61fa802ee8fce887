// The tier's remote worker (tier_remote.cc): on a backend whose slots the host cannot read (cuda,
// cuda-sim) the residents of the layer being computed run on the device, posted by the eval thread
// to this worker's thread while the eval computes the layer's other runs on the CPU.
//
//   owner    mt_tier::remote (tier.h): null for host-visible slots; created at create, stopped at free
//   guards   run_slot: the eval thread's (bind writes, remote_start reads)
//            stop, busy, layer, jobs, n_jobs, x, status, error: RemoteWorker::mu (posted / finished);
//            while busy the worker thread alone touches calls, the span and error
//            calls, span_end_ns, span_busy_ns: the worker thread's, read after busy clears
//            run_experts: set at start, read by the worker
//
// The device is reached only through the backend interface's optional run_experts entry
// (include/mt_backend.h): the tier names no backend kind.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>
#include "mt_backend.h"

namespace mt {

// One remote run: the slot, its rows' inputs and where its outputs go.
struct RemoteJob {
  int32_t slot = -1, rows = 0;
  const float* x = nullptr;  // rows x nEmbd, gathered from the forward pass's h
  float* y = nullptr;        // rows x nEmbd, the forward pass's slot_down rows
};

struct RemoteWorker {
  std::vector<int32_t> run_slot;  // [nExpert] the slot of bind's run i, when remote
  std::thread thread;
  std::mutex mu;
  std::condition_variable posted, finished;
  bool stop = false;
  bool busy = false;  // a layer's jobs are posted and not all run
  int32_t layer = -1;
  std::vector<RemoteJob> jobs;  // capacity nExpert
  int32_t n_jobs = 0;
  std::vector<float> x;  // the jobs' gathered rows (grows to the largest chunk seen, then stays)
  int status = 0;        // 0, or -1 with error: the first failed call of the layer
  char error[448] = "";
  decltype(mt_backend_i::run_experts) run_experts = nullptr;  // the backend's entry (never NULL once started)
  std::vector<mt_backend_run> calls;                          // one run_experts call's runs (MT_BACKEND_RUNS_MAX)
  int64_t span_end_ns = 0, span_busy_ns = 0;                  // its calls' last end, their summed time
};

}  // namespace mt

struct mt_tier;

namespace mt {

// tier_remote.cc. start: the worker and the source's remote verbs (false: a combination it cannot
// serve); join: wait for the posted layer's runs; stop: end the thread (destroy).
bool tier_remote_start(mt_tier& t, char* err, size_t err_bytes);
void tier_remote_join(mt_tier& t);
void tier_remote_stop(mt_tier& t);

}  // namespace mt
