// The fake backend: the cpu backend's memory and copies (so results computed from its
// slots are real) on a deterministic virtual clock, with overwrite refusal and one
// half-way transfer failure on demand. The formulas are in include/mt_backend.h:
//
//   upload   start = max(upload_clock, compute_clock) + fixed_ns
//            end   = start + round(bytes_copied * 1e9 / bandwidth)
//   compute  compute_clock += round(work_bytes * 1e9 / compute_rate)
//   wait     compute_clock = max(compute_clock, event end)
//
// Times are decided when the upload is issued (under the backend mutex, in issue order),
// never by the thread that copies, so they do not depend on scheduling.
#include <cmath>
#include <exception>
#include <string>
#include "../cpu_backend/cpu_backend.h"

namespace mt {
namespace {

class FakeBackend : public CpuBackend {
 public:
  explicit FakeBackend(const mt_backend_config& c)
      : CpuBackend(c),
        fixed_ns_(std::llround(c.transfer_fixed_us * 1000.0)),
        fail_after_(c.fail_transfer_after_bytes) {}

  void prepare_upload(UploadJob& job) override {
    job.copy_limit = job.bytes;
    if (fail_after_ != 0 && submitted_bytes_ + job.bytes > fail_after_) {
      job.copy_limit = fail_after_ - submitted_bytes_;  // fails here, once
      fail_after_ = 0;
    }
    MT_ASSERT(job.copy_limit <= job.bytes, "the injected failure copies at most the requested bytes");
    submitted_bytes_ += job.bytes;
    job.virtual_times = true;
    // The fixed cost (driver and DMA setup) passes before the bytes move: issued -> start holds
    // it (with any queue wait) and start -> end the bytes alone, as the calibration reads them.
    job.start_ns = (upload_clock_ > compute_clock_ ? upload_clock_ : compute_clock_) + fixed_ns_;
    job.end_ns = job.start_ns + ns_for(job.copy_limit, config.bandwidth_bytes_per_s);
    MT_ASSERT(job.start_ns >= upload_clock_ && job.end_ns >= job.start_ns,
              "the virtual upload clock never goes back: uploads serialise");
    upload_clock_ = job.end_ns;
  }

  int64_t compute_stamp(uint64_t work_bytes) override {
    const int64_t ns = ns_for(work_bytes, config.compute_bytes_per_s);
    MT_ASSERT(ns >= 0, "the virtual compute clock never goes back");
    compute_clock_ += ns;
    return compute_clock_;
  }

  void on_waited(const mt_event_info& info) override {
    if (info.end_ns > compute_clock_) compute_clock_ = info.end_ns;
  }

  bool overwrite_supported() const override { return config.overwrite_supported != 0; }

 private:
  static int64_t ns_for(uint64_t bytes, double bytes_per_s) { return std::llround(double(bytes) * 1e9 / bytes_per_s); }

  const int64_t fixed_ns_;
  uint64_t fail_after_;
  uint64_t submitted_bytes_ = 0;
  int64_t upload_clock_ = 0, compute_clock_ = 0;
};

}  // namespace

mt_backend* create_fake_backend(const mt_backend_config& c, char* err, size_t err_bytes) {
  if (!(c.bandwidth_bytes_per_s > 0) || !std::isfinite(c.bandwidth_bytes_per_s))
    return fail(err, err_bytes, MT_BACKEND_INVALID, "create: bandwidthBytesPerS: expected a finite number > 0"),
           nullptr;
  if (!(c.compute_bytes_per_s > 0) || !std::isfinite(c.compute_bytes_per_s))
    return fail(err, err_bytes, MT_BACKEND_INVALID, "create: computeBytesPerS: expected a finite number > 0"), nullptr;
  if (!(c.transfer_fixed_us >= 0) || !std::isfinite(c.transfer_fixed_us))
    return fail(err, err_bytes, MT_BACKEND_INVALID, "create: transferFixedUs: expected a finite number >= 0"), nullptr;
  try {
    return new FakeBackend(c);
  } catch (const std::exception& e) {
    fail(err, err_bytes, MT_BACKEND_NO_MEMORY, std::string("create: ") + e.what());
    return nullptr;
  }
}

}  // namespace mt
