// Run-time ISA choice: detect what the CPU (and the OS, for the wider register
// state) supports, pick the best path once, and let tests and benches force another.
#include <atomic>
#include "kernels_internal.h"
#include "isa_verify.h"

namespace {

typedef void (*matvec_fn)(int, const void*, int64_t, const void*, float*, int64_t, int64_t);
typedef void (*matmul_fn)(int, const void*, int64_t, const void*, int64_t, float*, int64_t, int64_t, int64_t);
typedef uint64_t (*read_sum_fn)(const void*, size_t);
typedef void (*prepare_fn)(int, const float*, int64_t, void*);

struct Path {
  const char* name;
  matvec_fn matvec;
  matmul_fn matmul;
  read_sum_fn read_sum;
  prepare_fn prepare;
};

// Off x86 (or with MT_NO_X86_SIMD) the SIMD files are not built (native/CMakeLists.txt): their
// rows name no functions, and detect_best() never reaches them.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(MT_NO_X86_SIMD)
#define MT_HAVE_X86_SIMD 1
#define MT_X86_PATH(matvec, matmul, read_sum, prepare) matvec, matmul, read_sum, prepare
#else
#define MT_X86_PATH(matvec, matmul, read_sum, prepare) nullptr, nullptr, nullptr, nullptr
#endif

const Path kPaths[] = {
    {"scalar", mt_matvec_rows_scalar, mt_matmul_rows_scalar, mt_read_sum_scalar, mt_act_prepare_scalar},
    {"avx2", MT_X86_PATH(mt_matvec_rows_avx2, mt_matmul_rows_avx2, mt_read_sum_avx2, mt_act_prepare_avx2)},
    // AVX2 prepare: already identical and cheap
    {"avx512vnni", MT_X86_PATH(mt_matvec_rows_avx512, mt_matmul_rows_avx512, mt_read_sum_avx512, mt_act_prepare_avx2)},
};
constexpr int kPathCount = sizeof(kPaths) / sizeof(kPaths[0]);

// __builtin_cpu_supports reads cpuid and, for AVX / AVX-512, also checks XCR0
// (xgetbv) so a CPU whose OS does not save ymm / zmm state reports no support.
int detect_best() {
#ifdef MT_HAVE_X86_SIMD
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  if (avx512) return MT_ISA_AVX512VNNI;
  if (avx2) return MT_ISA_AVX2;
#endif
  return MT_ISA_SCALAR;
}

bool verify(int isa, int inject_error) {
  const Path& p = kPaths[isa];
  return isa == MT_ISA_SCALAR || mt_isa_verify_path(p.matvec, p.matmul, p.prepare, inject_error) == 1;
}

// The best path the CPU has that also agrees with scalar (isa_verify.cc says why).
int verified_best() {
  int isa = detect_best();
  while (isa > MT_ISA_SCALAR && !verify(isa, 0)) isa--;
  return isa;
}

int best() {
  static const int b = verified_best();
  return b;
}

std::atomic<int> g_active{-1};  // -1: not chosen yet, take best()

const Path& active_path() {
  int a = g_active.load(std::memory_order_relaxed);
  if (a < 0) a = best();
  return kPaths[a];
}

}  // namespace

extern "C" {

int mt_isa_best(void) { return best(); }

int mt_isa_detected(void) { return detect_best(); }

int mt_isa_verify(int isa, int inject_error) {
  if (isa < 0 || isa >= kPathCount || isa > detect_best()) return -1;
  return verify(isa, inject_error) ? 1 : 0;
}

int mt_isa_active(void) {
  int a = g_active.load(std::memory_order_relaxed);
  return a < 0 ? best() : a;
}

// Paths are ordered: each one's CPU features include the previous one's.
int mt_isa_set(int isa) {
  if (isa < 0 || isa >= kPathCount || isa > best()) return -1;
  g_active.store(isa, std::memory_order_relaxed);
  return 0;
}

const char* mt_isa_name(int isa) { return isa >= 0 && isa < kPathCount ? kPaths[isa].name : "unknown"; }

void mt_act_prepare(int wtype, const float* x, int64_t cols, void* act) { active_path().prepare(wtype, x, cols, act); }

void mt_matvec_rows(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  active_path().matvec(wtype, W, cols, act, y, r0, r1);
}

void mt_matmul_rows(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  active_path().matmul(wtype, W, cols, acts, n, Y, ldy, r0, r1);
}

// Not in the C ABI: the streaming loop behind the addon's read-bandwidth probe.
uint64_t mt_read_sum(const void* p, size_t bytes) { return active_path().read_sum(p, bytes); }

}  // extern "C"
