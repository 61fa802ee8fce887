// Q2_K .. Q6_K and IQ4_XS weights against Q8_K activation blocks. A warp takes two super-blocks at a time,
// one per half-warp; lane k of a half decodes 16-element sub-block k (its integer scale, min and
// 16 codes), and the half sums sc[k] * (codes . q_x) and m[k] * bsum[k] exactly in integers with
// shuffles, as the CPU sums a whole super-block before its one fmaf. The CPU's lane b % 8
// accumulators live in lanes 0..7 and take the super-blocks in order. Decoders: the formulas of
// native/cpu/kernels_kquant.h, element by element.
// The kernels only (no launches), so native/cuda/kernels/emu can run them on the host.
#pragma once
#include "matmul.cuh"

namespace mtc {
namespace kq {

template <int T>
__host__ __device__ constexpr int kq_bytes() {
  return T == Q2_K ? 84 : T == Q3_K ? 110 : T == Q4_K ? 144 : T == Q5_K ? 176 : T == Q6_K ? 210 : 136;
}
template <int T>
__host__ __device__ constexpr int kq_d_at() {
  return T == Q2_K ? 80 : T == Q3_K ? 108 : T == Q6_K ? 208 : 0;
}
template <int T>
__host__ __device__ constexpr int kq_dmin_at() {
  return T == Q2_K ? 82 : 2;
}
template <int T>
__host__ __device__ constexpr bool kq_has_min() {
  return T == Q2_K || T == Q4_K || T == Q5_K;
}

// Integer scale and min of 16-element sub-block k (mt_kquant_scales).
template <int T>
__device__ __forceinline__ void kq_scale(const uint8_t* blk, int k, int* sc, int* m) {
  *m = 0;
  if (T == Q2_K) {
    *sc = blk[k] & 0x0f;
    *m = blk[k] >> 4;
  } else if (T == Q3_K) {
    const uint8_t* s = blk + 96;
    const int lo = k < 8 ? s[k] & 0x0f : s[k - 8] >> 4;
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    *sc = (lo | (hi << 4)) - 32;
  } else if (T == Q4_K || T == Q5_K) {
    const uint8_t* s = blk + 4;
    const int j = k / 2;  // 32-element sub-block
    if (j < 4) {
      *sc = s[j] & 63;
      *m = s[j + 4] & 63;
    } else {
      *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
      *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  } else if (T == IQ4_XS) {  // 6-bit scale of 32-element sub-block k / 2, minus 32
    const int j = k / 2;
    const int lo = (blk[4 + j / 2] >> (4 * (j % 2))) & 0x0f;
    const int hi = (load_u16(blk + 2) >> (2 * j)) & 3;
    *sc = (lo | (hi << 4)) - 32;
  } else {  // Q6_K
    *sc = (int8_t)blk[192 + k];
  }
}

// The signed code of element e of a super-block (mt_kquant_q).
template <int T>
__device__ __forceinline__ int kq_code(const uint8_t* blk, int e) {
  if (T == Q2_K) return (blk[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
  if (T == Q3_K) {
    const int lo = (blk[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    return lo + 4 * ((blk[e % 32] >> (e / 32)) & 1) - 4;
  }
  if (T == Q4_K) return (blk[16 + 32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0f;
  if (T == Q5_K) {
    const int lo = (blk[48 + 32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0f;
    return lo + 16 * ((blk[16 + e % 32] >> (e / 32)) & 1);
  }
  if (T == IQ4_XS) return iq4nl_value(blk[8 + 16 * (e / 32) + e % 16] >> (4 * ((e % 32) / 16)));
  const int n = e / 128, p = (e % 128) / 32, l = e % 32;  // Q6_K
  const int lo = (blk[64 * n + 32 * (p % 2) + l] >> (4 * (p / 2))) & 0x0f;
  const int hi = (blk[128 + 32 * n + l] >> (2 * p)) & 3;
  return (lo | (hi << 4)) - 32;
}

struct SubBlock {
  int q[4];  // the 16 codes, four per int
  int sc, m;
  float d, dmin;  // the super-block's f16 scales
};

template <int T>
__device__ __forceinline__ void decode_sub(const uint8_t* blk, int k, SubBlock& o) {
  kq_scale<T>(blk, k, &o.sc, &o.m);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int e = 16 * k + 4 * i;
    o.q[i] = pack4(kq_code<T>(blk, e), kq_code<T>(blk, e + 1), kq_code<T>(blk, e + 2), kq_code<T>(blk, e + 3));
  }
  o.d = f16_at(blk + kq_d_at<T>());
  o.dmin = kq_has_min<T>() ? f16_at(blk + kq_dmin_at<T>()) : 0.0f;
}

// The fmaf terms of super-block b (lanes 0 and 16 hold those of their half) into CPU lane b % 8.
template <int T>
__device__ __forceinline__ void accumulate(int64_t b, int src, float scale, float isumf, float mscale, float msumf,
                                           float* acc) {
  const float s = __shfl_sync(0xffffffffu, scale, src), v = __shfl_sync(0xffffffffu, isumf, src);
  const float ms = __shfl_sync(0xffffffffu, mscale, src), mv = __shfl_sync(0xffffffffu, msumf, src);
  if ((int)(threadIdx.x % kWarp) == (int)(b % 8)) {
    *acc = fmaf(s, v, *acc);
    if (kq_has_min<T>()) *acc = fmaf(ms, mv, *acc);
  }
}

template <int T, int NR>
__device__ __forceinline__ void dot_rows(const MatmulArgs& a, const uint8_t* wrow, int i0, float* acc) {
  const int lane = threadIdx.x % kWarp, half = lane / 16, k = lane % 16;
  const int64_t nb = a.cols / kQKK;
  for (int64_t c = 0; c < nb; c += 2) {
    const int64_t b = c + half;
    const bool valid = b < nb;  // not warp-uniform: the shuffles below still run on every lane
    SubBlock w = {};
    if (valid) decode_sub<T>(wrow + b * kq_bytes<T>(), k, w);
#pragma unroll
    for (int j = 0; j < NR; j++) {
      if (i0 + j >= a.count) continue;  // warp-uniform
      int is = 0, ms = 0;
      float dx = 0.0f;
      if (valid) {
        const uint8_t* ab = a.acts + (i0 + j) * a.act_stride + b * kActKBytes;
        const int* xq = reinterpret_cast<const int*>(ab + 16 * k);
        int sub = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) sub = __dp4a(w.q[i], xq[i], sub);
        is = w.sc * sub;
        ms = w.m * (int)reinterpret_cast<const int16_t*>(ab + kActKBsumAt)[k];
        dx = *reinterpret_cast<const float*>(ab + kActKDAt);
      }
      is = warp_sum_int(is, 16);
      ms = warp_sum_int(ms, 16);
      const float scale = w.d * dx, mscale = -(w.dmin * dx);
      accumulate<T>(c, 0, scale, (float)is, mscale, (float)ms, &acc[j]);
      if (c + 1 < nb) accumulate<T>(c + 1, 16, scale, (float)is, mscale, (float)ms, &acc[j]);
    }
  }
}

template <int T, int NR>
__global__ void __launch_bounds__(kRowsPerBlock* kWarp) matmul_kq_kernel(MatmulArgs a) {
  block_rows<NR>(a, (a.cols / kQKK) * kq_bytes<T>(),
                 [&](const uint8_t* wrow, int i0, float* acc) { dot_rows<T, NR>(a, wrow, i0, acc); });
}

}  // namespace kq
}  // namespace mtc
