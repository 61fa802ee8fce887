// kernel_digest: prints one FNV-1a digest of the bits every kernel path gives on fixed inputs,
// one line per path this CPU has ("scalar 0123abcd..."). The kernels promise one set of bits on
// every path and every machine; tests/native/cross-build.test.ts builds this program for the host
// and, cross-compiled, for arm64 (run under qemu where it is installed), and compares the lines.
// Built from native/cpu alone: no Node, no addon.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#include "mt_kernels.h"

namespace {

uint32_t next(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

// Well-formed random rows of a type: finite floats, f16 scales ~2^-10 .. 2^-5 of either sign.
std::vector<uint8_t> weights(int type, int64_t rows, int64_t cols, uint32_t* seed) {
  std::vector<uint8_t> w(mt_row_bytes(type, cols) * rows);
  const size_t block = type == MT_Q8_0 ? 34 : type == MT_Q4_0 || type == MT_IQ4_NL ? 18 : 0;
  for (size_t i = 0; i < w.size(); i++) w[i] = (uint8_t)next(seed);
  if (type == MT_F32)
    for (size_t i = 3; i < w.size(); i += 4) w[i] = (w[i] & 0x80) | 0x3e;
  if (type == MT_F16)
    for (size_t i = 1; i < w.size(); i += 2) w[i] = (w[i] & 0x83) | 0x30;
  if (type == MT_BF16)
    for (size_t i = 1; i < w.size(); i += 2) w[i] = (w[i] & 0x80) | 0x3e;
  for (size_t b = 0; block && b < w.size(); b += block)
    w[b + 1] = (uint8_t)((w[b + 1] & 0x80) | (0x14 + next(seed) % 5));
  // Q5_0 / Q5_1 (any qh and nibbles; d and Q5_1's m), the k-quants (ggml's block_q*_K: any codes
  // and sub-block scales; d and dmin) and IQ4_XS (any indices and scales; d): the f16 scales kept finite.
  struct KScales {
    int type;
    size_t bytes;
    int at[2];
  };
  const KScales ks[] = {{MT_Q5_0, 22, {0, -1}},    {MT_Q5_1, 24, {0, 2}},    {MT_Q2_K, 84, {80, 82}},
                        {MT_Q3_K, 110, {108, -1}}, {MT_Q4_K, 144, {0, 2}},   {MT_Q5_K, 176, {0, 2}},
                        {MT_Q6_K, 210, {208, -1}}, {MT_IQ4_XS, 136, {0, -1}}};
  for (const KScales& k : ks)
    if (k.type == type)
      for (size_t b = 0; b < w.size(); b += k.bytes)
        for (int at : k.at)
          if (at >= 0) w[b + at + 1] = (uint8_t)((w[b + at + 1] & 0x80) | (0x14 + next(seed) % 5));
  // MXFP4 (any nibbles): E8M0 e for 2^-10 .. 2^5, one block in 8 the subnormal 2^-128 or 2^-127.
  if (type == MT_MXFP4)
    for (size_t b = 0; b < w.size(); b += 17) w[b] = (uint8_t)(next(seed) % 8 == 0 ? w[b] % 2 : 118 + w[b] % 16);
  return w;
}

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const uint8_t* b = (const uint8_t*)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint64_t digest_path() {
  const int types[] = {MT_F32,  MT_F16,  MT_BF16, MT_Q8_0, MT_Q4_0,   MT_Q5_0,   MT_Q5_1, MT_Q2_K,
                       MT_Q3_K, MT_Q4_K, MT_Q5_K, MT_Q6_K, MT_IQ4_NL, MT_IQ4_XS, MT_MXFP4};
  const int64_t cols_list[] = {32, 96, 256, 288, 768, 544, 7, 45, 2304};
  const int64_t rows = 13, n = 9;
  uint64_t h = 1469598103934665603ull;
  for (int type : types)
    for (int64_t cols : cols_list) {
      if (mt_row_bytes(type, cols) == 0) continue;
      uint32_t seed = (uint32_t)(type * 7919 + cols);
      std::vector<uint8_t> w = weights(type, rows, cols, &seed);
      std::vector<float> x(n * cols);
      for (float& v : x) v = (float)((int32_t)(next(&seed) % 20001) - 10000) / 4000.0f;
      const size_t act_bytes = mt_act_row_bytes(type, cols);
      std::vector<uint8_t> acts(act_bytes * n);
      for (int64_t i = 0; i < n; i++) mt_act_prepare(type, x.data() + i * cols, cols, acts.data() + i * act_bytes);
      std::vector<float> y(rows), Y(rows * n);
      mt_matvec_rows(type, w.data(), cols, acts.data(), y.data(), 0, rows);
      mt_matmul_rows(type, w.data(), cols, acts.data(), n, Y.data(), rows, 0, rows);
      h = fnv1a(h, acts.data(), acts.size());
      h = fnv1a(h, y.data(), y.size() * sizeof(float));
      h = fnv1a(h, Y.data(), Y.size() * sizeof(float));
    }
  return h;
}

}  // namespace

int main() {
  for (int isa = MT_ISA_SCALAR; isa <= mt_isa_best(); isa++) {
    if (mt_isa_set(isa) != 0) continue;
    std::printf("%s %016llx\n", mt_isa_name(isa), (unsigned long long)digest_path());
  }
  return 0;
}
