// Q8_0 / Q4_0 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 weights against Q8_0 activation groups. Lane l of a warp decodes
// block 32 c + l of the row into 32 signed codes (four per int, for __dp4a); the CPU's lane
// b % 8 accumulators then live in lanes 0..7, each taking its four blocks of the chunk in order
// through shuffles, which is the canonical order exactly.
// The kernels only (no launches), so native/cuda/kernels/emu can run them on the host.
#pragma once
#include "matmul.cuh"

namespace mtc {
namespace q32 {

struct Block32 {
  int q[8];    // codes of elements 4i .. 4i + 3 (Q5_1: unsigned 0..31, else signed; IQ4_NL, MXFP4: table values)
  float d, m;  // scale (MXFP4: 2^(e - 128) from its E8M0 byte) and, for Q5_1, min
};

template <int T>
__device__ __forceinline__ void decode32(const uint8_t* blk, Block32& o) {
  o.d = T == MXFP4 ? e8m0_half(blk[0]) : f16_at(blk);
  o.m = 0.0f;
  if (T == Q8_0) {
    for (int i = 0; i < 8; i++) o.q[i] = load_i32_bytes(blk + 2 + 4 * i);
  } else if (T == Q4_0) {
    for (int i = 0; i < 4; i++) {
      const uint32_t raw = (uint32_t)load_i32_bytes(blk + 2 + 4 * i);
      o.q[i] = (int)__vsub4(raw & 0x0f0f0f0fu, 0x08080808u);             // element j: low nibble - 8
      o.q[i + 4] = (int)__vsub4((raw >> 4) & 0x0f0f0f0fu, 0x08080808u);  // element j + 16: high nibble - 8
    }
  } else if (T == IQ4_NL) {  // nibbles as Q4_0's, each through the table
    const uint8_t* qs = blk + 2;
    for (int i = 0; i < 4; i++) {
      const uint8_t* b = qs + 4 * i;
      o.q[i] = pack4(iq4nl_value(b[0]), iq4nl_value(b[1]), iq4nl_value(b[2]), iq4nl_value(b[3]));
      o.q[i + 4] =
          pack4(iq4nl_value(b[0] >> 4), iq4nl_value(b[1] >> 4), iq4nl_value(b[2] >> 4), iq4nl_value(b[3] >> 4));
    }
  } else if (T == MXFP4) {  // nibbles as Q4_0's after the E8M0 byte, each through the table
    const uint8_t* qs = blk + 1;
    for (int i = 0; i < 4; i++) {
      const uint8_t* b = qs + 4 * i;
      o.q[i] = pack4(mxfp4_value(b[0]), mxfp4_value(b[1]), mxfp4_value(b[2]), mxfp4_value(b[3]));
      o.q[i + 4] =
          pack4(mxfp4_value(b[0] >> 4), mxfp4_value(b[1] >> 4), mxfp4_value(b[2] >> 4), mxfp4_value(b[3] >> 4));
    }
  } else {  // Q5_0, Q5_1: nibble | 5th bit from qh (little-endian uint32)
    const int qh_at = T == Q5_1 ? 4 : 2;
    if (T == Q5_1) o.m = f16_at(blk + 2);
    const uint32_t qh = (uint32_t)load_i32_bytes(blk + qh_at);
    const uint8_t* qs = blk + qh_at + 4;
    const int off = T == Q5_0 ? 16 : 0;
    for (int i = 0; i < 8; i++) {
      int c[4];
      for (int k = 0; k < 4; k++) {
        const int e = 4 * i + k;
        const int nib = e < 16 ? (qs[e] & 0x0f) : (qs[e - 16] >> 4);
        c[k] = (nib | (int)(((qh >> e) & 1u) << 4)) - off;
      }
      o.q[i] = pack4(c[0], c[1], c[2], c[3]);
    }
  }
}

template <int T>
__host__ __device__ constexpr int bytes32() {
  return T == Q8_0 ? 34 : T == Q4_0 || T == IQ4_NL ? 18 : T == MXFP4 ? 17 : T == Q5_0 ? 22 : 24;
}

// Row r's dot with NR activation rows starting at i0, in lanes 0..7's accumulators acc[].
template <int T, int NR>
__device__ __forceinline__ void dot_rows(const MatmulArgs& a, const uint8_t* wrow, int i0, float* acc) {
  const int lane = threadIdx.x % kWarp;
  const int64_t nb = a.cols / kQK;
  for (int64_t c = 0; c < nb; c += kWarp) {
    const int64_t b = c + lane;
    Block32 w;
    if (b < nb) decode32<T>(wrow + b * bytes32<T>(), w);
#pragma unroll
    for (int j = 0; j < NR; j++) {
      if (i0 + j >= a.count) continue;  // warp-uniform; continue, not break, so acc[] stays in registers
      float scale = 0.0f, isumf = 0.0f, mscale = 0.0f, sumf = 0.0f;
      if (b < nb) {
        const uint8_t* grp = a.acts + (i0 + j) * a.act_stride + (b / kGroupBlocks) * kActGroupBytes;
        const int bj = (int)(b % kGroupBlocks);
        const int* xq = reinterpret_cast<const int*>(grp + 64 + kQK * bj);
        int isum = 0;
        for (int i = 0; i < 8; i++) isum = __dp4a(w.q[i], xq[i], isum);
        const float dx = reinterpret_cast<const float*>(grp)[bj];
        scale = w.d * dx;
        isumf = (float)isum;
        if (T == Q5_1) {
          mscale = w.m * dx;
          sumf = (float)reinterpret_cast<const int32_t*>(grp + 32)[bj];
        }
      }
      // CPU lane k = lane & 7 takes blocks c + k, c + k + 8, c + k + 16, c + k + 24 in order.
#pragma unroll
      for (int t = 0; t < kWarp / 8; t++) {
        const int src = (lane & 7) + 8 * t;
        const float s = __shfl_sync(0xffffffffu, scale, src), v = __shfl_sync(0xffffffffu, isumf, src);
        const float ms = __shfl_sync(0xffffffffu, mscale, src), sv = __shfl_sync(0xffffffffu, sumf, src);
        if (c + src < nb) {
          acc[j] = fmaf(s, v, acc[j]);
          if (T == Q5_1) acc[j] = fmaf(ms, sv, acc[j]);
        }
      }
    }
  }
}

template <int T, int NR>
__global__ void __launch_bounds__(kRowsPerBlock* kWarp) matmul_q32_kernel(MatmulArgs a) {
  block_rows<NR>(a, (a.cols / kQK) * bytes32<T>(),
                 [&](const uint8_t* wrow, int i0, float* acc) { dot_rows<T, NR>(a, wrow, i0, acc); });
}

}  // namespace q32
}  // namespace mtc
