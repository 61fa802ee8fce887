// Host-side facts about the weight types: which the device kernels handle, row sizes and the
// prepared-activation row sizes, mirroring native/cpu/quant_rows.cc (mt_row_bytes,
// mt_act_row_bytes) so the scratch layout agrees with what the CPU would allocate.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "device_common.cuh"

namespace mtc {

// How a weight type wants its activations: f32 as they are, Q8_0 groups, or Q8_K blocks.
enum ActKind { kActF32 = 0, kActQ8 = 1, kActQ8K = 2, kActNone = -1 };

inline bool is_quant32(int t) { return t == Q8_0 || t == Q4_0 || t == Q5_0 || t == Q5_1 || t == IQ4_NL || t == MXFP4; }
inline bool is_kquant(int t) { return (t >= Q2_K && t <= Q6_K) || t == IQ4_XS; }
inline bool is_float(int t) { return t == F32 || t == F16 || t == BF16; }
inline bool type_known(int t) { return is_quant32(t) || is_kquant(t) || is_float(t); }

inline ActKind act_kind(int t) {
  if (is_quant32(t)) return kActQ8;
  if (is_kquant(t)) return kActQ8K;
  if (is_float(t)) return kActF32;
  return kActNone;
}

// Bytes of one block and elements per block (floats: one element "block").
inline int block_bytes(int t) {
  switch (t) {
    case F32:
      return 4;
    case F16:
    case BF16:
      return 2;
    case Q8_0:
      return 34;
    case Q4_0:
    case IQ4_NL:
      return 18;
    case MXFP4:
      return 17;
    case Q5_0:
      return 22;
    case Q5_1:
      return 24;
    case Q2_K:
      return 84;
    case Q3_K:
      return 110;
    case Q4_K:
      return 144;
    case Q5_K:
      return 176;
    case Q6_K:
      return 210;
    case IQ4_XS:
      return 136;
    default:
      return 0;
  }
}
inline int block_elems(int t) { return is_quant32(t) ? kQK : is_kquant(t) ? kQKK : 1; }

// 0 for an unknown type or a partial block, as mt_row_bytes.
inline size_t row_bytes(int t, int64_t cols) {
  const int be = block_elems(t);
  if (!type_known(t) || cols < 0 || cols % be) return 0;
  return (size_t)(cols / be) * (size_t)block_bytes(t);
}

inline size_t act_row_bytes(int t, int64_t cols) {
  if (!type_known(t) || cols < 0 || cols % block_elems(t)) return 0;
  switch (act_kind(t)) {
    case kActQ8:
      return (size_t)((cols / kQK + kGroupBlocks - 1) / kGroupBlocks) * kActGroupBytes;
    case kActQ8K:
      return (size_t)(cols / kQKK) * kActKBytes;
    default:
      return (size_t)cols * sizeof(float);
  }
}

}  // namespace mtc
