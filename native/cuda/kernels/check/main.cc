// moetier_cuda_check: the device check of libmoetier_cuda.so's expert kernels. For every weight
// type (and two mixed-type experts as real files hold them) it runs expert_ffn on random blocks
// for count 1 (the matvec form) and count 7 (the grouped form), compares with the CPU scalar
// kernels, and runs each case twice to check the bytes repeat. Prints one JSON line:
//   {"verdict": "pass" | "fail" | "no-device", "tolerance": ..., "cases": [...]}
// Exit 0 pass, 1 fail, 2 no device (or no driver).
//
// Tolerance: max |gpu - cpu| / max |cpu| <= 1e-3 over y. The device matrix products follow the
// CPU's canonical order (same activation codes, same integer block sums, same fmaf sequence), so
// Gate, Up and Down alone give the CPU's bits; the one difference is silu's expf (CUDA's is within
// 2 ulp, glibc's within 1). A few ulp in h can move a value of silu(g) * u across a rounding
// boundary of Down's 8-bit activation quantiser, changing one code by 1: y then moves by
// |w| * d_x with d_x = max|h| / 127, about 1e-4 .. 5e-4 of max |y| for these shapes (n_ff 768),
// so 1e-3 admits a couple of such flips and still fails any real kernel error (a wrong code, scale
// or block is >= 1e-2 here). "bitExact" reports whether a case met the CPU's bits outright.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "../../mt_cuda_runtime.h"
#include "mt_kernels.h"
#include "reference.h"

namespace {

constexpr double kTolerance = 1e-3;
constexpr int kGroupedCount = 7;

struct DeviceBuffers {
  const mt_cuda_runtime& rt;
  std::vector<void*> ptrs;
  explicit DeviceBuffers(const mt_cuda_runtime& r) : rt(r) {}
  ~DeviceBuffers() {
    for (void* p : ptrs) rt.device_free(p);
  }
  void* alloc(size_t bytes, int* err) {
    void* p = nullptr;
    if (*err == 0) *err = rt.device_malloc(&p, bytes ? bytes : 1);
    if (p) ptrs.push_back(p);
    return p;
  }
};

struct CaseResult {
  std::string json;
  bool pass;
};

// expert_ffn twice on the device; out1 / out2: the two y's.
int run_device(const mt_cuda_runtime& rt, const mtcheck::Shape& s, const std::vector<uint8_t>& slot, uint64_t gb,
               uint64_t ub, uint64_t db, const std::vector<float>& x, int count, std::vector<float>* out1,
               std::vector<float>* out2) {
  int err = 0;
  DeviceBuffers buf(rt);
  const size_t scratch_bytes = rt.expert_scratch_bytes(s.gate, s.up, s.down, s.n_embd, s.n_ff, count);
  if (scratch_bytes == 0) return MT_CUDA_ERROR_UNKNOWN;
  void* d_slot = buf.alloc(slot.size(), &err);
  void* d_x = buf.alloc(x.size() * 4, &err);
  void* d_y = buf.alloc((size_t)count * s.n_embd * 4, &err);
  void* d_scratch = buf.alloc(scratch_bytes, &err);
  void* stream = nullptr;
  if (!err) err = rt.stream_create(&stream);
  if (err) return err;
  mt_cuda_expert_args a = {d_slot,      gb,     ub,        db,           s.gate,
                           s.up,        s.down, s.n_embd,  s.n_ff,       (const float*)d_x,
                           (float*)d_y, count,  d_scratch, scratch_bytes};
  out1->assign((size_t)count * s.n_embd, 0.0f);
  out2->assign(out1->size(), 0.0f);
  err = rt.memcpy_h2d_async(d_slot, slot.data(), slot.size(), stream);
  if (!err) err = rt.memcpy_h2d_async(d_x, x.data(), x.size() * 4, stream);
  for (std::vector<float>* out : {out1, out2}) {
    if (!err) err = rt.expert_ffn(&a, stream);
    if (!err) err = rt.memcpy_d2h_async(out->data(), d_y, out->size() * 4, stream);
    if (!err) err = rt.stream_synchronize(stream);
  }
  rt.stream_destroy(stream);
  return err;
}

CaseResult run_case(const mt_cuda_runtime& rt, const mtcheck::Shape& s, int count, uint32_t seed) {
  uint64_t gb, ub, db;
  const std::vector<uint8_t> slot = mtcheck::random_slot(s, &seed, &gb, &ub, &db);
  const std::vector<float> x = mtcheck::random_rows(count * s.n_embd, &seed);
  const std::vector<float> ref = mtcheck::expert_ffn_cpu(s, slot.data(), gb, ub, x.data(), count);
  std::vector<float> y1, y2;
  const int err = run_device(rt, s, slot, gb, ub, db, x, count, &y1, &y2);
  double max_ref = 0.0, max_diff = 0.0;
  bool finite = true;
  for (size_t i = 0; i < ref.size() && !err; i++) {
    max_ref = std::fmax(max_ref, std::fabs((double)ref[i]));
    max_diff = std::fmax(max_diff, std::fabs((double)y1[i] - (double)ref[i]));
    finite = finite && std::isfinite(y1[i]) && std::isfinite(ref[i]);
  }
  const double rel = max_ref > 0.0 ? max_diff / max_ref : max_diff;
  const bool same = !err && memcmp(y1.data(), y2.data(), y1.size() * 4) == 0;
  const bool exact = !err && memcmp(y1.data(), ref.data(), ref.size() * 4) == 0;
  const bool pass = !err && finite && max_ref > 0.0 && rel <= kTolerance && same;
  char line[512];
  snprintf(line, sizeof line,
           "{\"gate\":\"%s\",\"up\":\"%s\",\"down\":\"%s\",\"count\":%d,\"error\":%d,\"relErr\":%.3g,"
           "\"maxAbsCpu\":%.4g,\"deterministic\":%s,\"bitExact\":%s,\"pass\":%s}",
           mtcheck::type_name(s.gate), mtcheck::type_name(s.up), mtcheck::type_name(s.down), count, err, rel, max_ref,
           same ? "true" : "false", exact ? "true" : "false", pass ? "true" : "false");
  return {line, pass};
}

std::vector<mtcheck::Shape> shapes() {
  const int types[] = {MT_Q8_0, MT_Q4_0, MT_Q5_0, MT_Q5_1, MT_Q2_K,   MT_Q3_K,   MT_Q4_K, MT_Q5_K,
                       MT_Q6_K, MT_F32,  MT_F16,  MT_BF16, MT_IQ4_NL, MT_IQ4_XS, MT_MXFP4};
  std::vector<mtcheck::Shape> out;
  for (int t : types) out.push_back({t, t, t, 512, 768});
  out.push_back({MT_Q4_K, MT_Q4_K, MT_Q6_K, 512, 768});  // a Q4_K_M expert
  out.push_back({MT_Q8_0, MT_Q4_K, MT_F16, 512, 768});   // three activation kinds in one expert
  return out;
}

}  // namespace

int main() {
  mt_cuda_runtime rt;
  const int load = mt_cuda_runtime_load(&rt);
  int devices = 0;
  if (load != 0 || rt.get_device_count(&devices) != 0 || devices == 0 || rt.set_device(0) != 0) {
    const int err = load ? load : MT_CUDA_ERROR_NO_DEVICE;
    printf("{\"verdict\":\"no-device\",\"error\":%d,\"message\":\"%s\",\"cases\":[]}\n", err,
           rt.error_string ? rt.error_string(err) : "");
    return 2;
  }
  char name[256] = "";
  rt.device_name(0, name, sizeof name);
  bool all = true;
  std::string cases;
  for (int t = 0; t <= 40; t++) {  // type_supported must name exactly the CPU's types
    if ((rt.type_supported(t) != 0) != (mt_type_supported(t) != 0)) {
      all = false;
      cases += (cases.empty() ? "" : ",") + std::string("{\"typeSupportedMismatch\":") + std::to_string(t) + "}";
    }
  }
  uint32_t seed = 0x9e3779b9u;
  for (const mtcheck::Shape& s : shapes())
    for (int count : {1, kGroupedCount}) {
      const CaseResult r = run_case(rt, s, count, seed += 0x1234567u);
      all = all && r.pass;
      cases += (cases.empty() ? "" : ",") + r.json;
    }
  printf("{\"verdict\":\"%s\",\"device\":\"%s\",\"runtime\":\"%s\",\"tolerance\":%g,\"cases\":[%s]}\n",
         all ? "pass" : "fail", name, rt.name, kTolerance, cases.c_str());
  return all ? 0 : 1;
}
