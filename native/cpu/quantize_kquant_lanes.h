// The k-quant scale searches, scalar and lane-parallel. Included by quantize_kquant.cc (the
// scalar path, 4 lanes) and by the AVX2 / AVX-512 files under their target pragmas (8, 16 lanes);
// everything here has internal linkage (static), so no copy built for a wider target can be
// merged into a narrower caller.
//
// The searches' sums are sequential f32 chains over one sub-block's elements (the order is the
// result), so one sub-block cannot use SIMD without changing its bits. N sub-blocks can: lane l
// of every vector is sub-block l, each lane does the scalar code's operations in the scalar
// code's order (compare-and-select for its branches), so each lane's result is the scalar
// result bit for bit; and the N chains run side by side where one waits on the adder's latency.
// N is the target's native vector width: GCC lowers a wider vector type badly (measured 5-8x
// slower than the native width on AVX2 and SSE2).
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

// ggml nearest_int for |v| <= 4194303 (round half to even by the 1.5 * 2^23 trick); beyond,
// src/model/quant-k-search.ts nearestInt's Math.round (0 for NaN and inf).
static inline int mt_nearest_int(float v) {
  if (fabsf(v) <= 4194303.0f) {
    const float t = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &t, 4);
    return bits - 0x4B400000;
  }
  if (!isfinite(v)) return 0;
  const double r = floor((double)v + 0.5);
  return r >= 2147483647.0 ? 2147483647 : r <= -2147483648.0 ? (-2147483647 - 1) : (int)r;
}

static inline int mt_clamp_level(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// sum w (scale L + min - x)^2, or sum w |.| with use_mad, in order.
static inline float mt_weighted_error(const float* x, int n, const float* w, float scale, float min, const uint8_t* L,
                                      bool use_mad) {
  float sum = 0.0f;
  for (int i = 0; i < n; i++) {
    const float diff = (scale * (float)L[i] + min) - x[i];
    sum = sum + w[i] * (use_mad ? fabsf(diff) : diff * diff);
  }
  return sum;
}

// make_qkx2_quants (quant-k-search.ts fitScaleMin): x [n] ~ scale * L + min, min <= 0, L in
// [0, nmax]; *min_neg = -min.
static inline void mt_fit_scale_min(const float* x, int n, int nmax, const float* w, uint8_t* L, float rmin,
                                    float rdelta, int nstep, bool use_mad, float* scale_out, float* min_neg) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w = sum_w + w[i];
    sum_x = sum_x + w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    memset(L, 0, (size_t)n);
    *scale_out = 0.0f;
    *min_neg = -min;
    return;
  }
  float iscale = (float)nmax / (max - min);
  float scale = 1.0f / iscale;
  for (int i = 0; i < n; i++) L[i] = (uint8_t)mt_clamp_level(mt_nearest_int(iscale * (x[i] - min)), 0, nmax);
  float best_error = mt_weighted_error(x, n, w, scale, min, L, use_mad);
  uint8_t laux[32];
  for (int step = 0; step <= nstep; step++) {
    iscale = ((rmin + rdelta * (float)step) + (float)nmax) / (max - min);  // min: the best fit so far, as ggml
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; i++) {
      const int l = mt_clamp_level(mt_nearest_int(iscale * (x[i] - min)), 0, nmax);
      laux[i] = (uint8_t)l;
      const float wl = w[i] * (float)l;
      sum_l = sum_l + wl;
      sum_l2 = sum_l2 + wl * (float)l;
      sum_xl = sum_xl + wl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    const float cur_error = mt_weighted_error(x, n, w, this_scale, this_min, laux, use_mad);
    if (cur_error < best_error) {
      memcpy(L, laux, (size_t)n);
      best_error = cur_error;
      scale = this_scale;
      min = this_min;
    }
  }
  *scale_out = scale;
  *min_neg = -min;
}

// GCC vector types of 4, 8 and 16 lanes (a dependent vector_size is not allowed in a template).
typedef float mt_v4f __attribute__((vector_size(16)));
typedef int32_t mt_v4i __attribute__((vector_size(16)));
typedef float mt_v8f __attribute__((vector_size(32)));
typedef int32_t mt_v8i __attribute__((vector_size(32)));
typedef float mt_v16f __attribute__((vector_size(64)));
typedef int32_t mt_v16i __attribute__((vector_size(64)));
template <int N>
struct mt_lanes;
template <>
struct mt_lanes<4> {
  typedef mt_v4f vf;
  typedef mt_v4i vi;
};
template <>
struct mt_lanes<8> {
  typedef mt_v8f vf;
  typedef mt_v8i vi;
};
template <>
struct mt_lanes<16> {
  typedef mt_v16f vf;
  typedef mt_v16i vi;
};

// mt_fit_scale_min (squared error, n = 32) for N sub-blocks at x + 32 l (weights w + 32 l,
// levels L + 32 l). A lane whose values leave nearest_int's exact range (|v| > 4194303 or NaN:
// a flat sub-block, which divides by 0, or weights no real tensor has) is redone by the scalar code.
template <int N>
static void mt_fit_scale_min_lanes(const float* x, const float* w, int nmax, float rmin, float rdelta, int nstep,
                                   uint8_t* L, float* scales, float* min_negs) {
  typedef typename mt_lanes<N>::vf vf;
  typedef typename mt_lanes<N>::vi vi;
  constexpr int n = 32;
  vf xt[n], wt[n];
  for (int i = 0; i < n; i++)
    for (int l = 0; l < N; l++) xt[i][l] = x[32 * l + i], wt[i][l] = w[32 * l + i];
  const vf zero = vf{} + 0.0f;
  const vi zero_i = vi{} + 0, nmax_i = zero_i + nmax;
  vi wide = zero_i;
  vf min = xt[0], max = xt[0], sum_w = wt[0];
  vf sum_x = sum_w * xt[0];
  for (int i = 1; i < n; i++) {
    min = xt[i] < min ? xt[i] : min;
    max = xt[i] > max ? xt[i] : max;
    sum_w = sum_w + wt[i];
    sum_x = sum_x + wt[i] * xt[i];
  }
  min = min > zero ? zero : min;
  vi Lt[n], laux[n];
#define MT_NEAREST_LEVEL(out, v)                                 \
  do {                                                           \
    const vf v_ = (v);                                           \
    wide |= (v_ > 4194303.0f) | (v_ < -4194303.0f) | (v_ != v_); \
    vi q_ = (vi)(v_ + 12582912.0f) - 0x4B400000;                 \
    q_ = q_ < zero_i ? zero_i : q_;                              \
    (out) = q_ > nmax_i ? nmax_i : q_;                           \
  } while (0)
  vf iscale = ((float)nmax) / (max - min);
  vf scale = 1.0f / iscale;
  for (int i = 0; i < n; i++) MT_NEAREST_LEVEL(Lt[i], iscale * (xt[i] - min));
  vf best_error = zero;
  for (int i = 0; i < n; i++) {
    const vf diff = (scale * __builtin_convertvector(Lt[i], vf) + min) - xt[i];
    best_error = best_error + wt[i] * (diff * diff);
  }
  for (int step = 0; step <= nstep; step++) {
    iscale = ((rmin + rdelta * (float)step) + (float)nmax) / (max - min);  // min: the best fit so far, as ggml
    vf sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < n; i++) {
      MT_NEAREST_LEVEL(laux[i], iscale * (xt[i] - min));
      const vf l = __builtin_convertvector(laux[i], vf);
      const vf wl = wt[i] * l;
      sum_l = sum_l + wl;
      sum_l2 = sum_l2 + wl * l;
      sum_xl = sum_xl + wl * xt[i];
    }
    const vf D = sum_w * sum_l2 - sum_l * sum_l;
    vf this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    vf this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    const vi positive = this_min > zero;
    this_min = positive ? zero : this_min;
    this_scale = positive ? sum_xl / sum_l2 : this_scale;
    vf cur_error = zero;
    for (int i = 0; i < n; i++) {
      const vf diff = (this_scale * __builtin_convertvector(laux[i], vf) + this_min) - xt[i];
      cur_error = cur_error + wt[i] * (diff * diff);
    }
    const vi better = (D > zero) & (cur_error < best_error);
    for (int i = 0; i < n; i++) Lt[i] = better ? laux[i] : Lt[i];
    best_error = better ? cur_error : best_error;
    scale = better ? this_scale : scale;
    min = better ? this_min : min;
  }
#undef MT_NEAREST_LEVEL
  for (int l = 0; l < N; l++) {
    if (wide[l]) {
      mt_fit_scale_min(x + 32 * l, 32, nmax, w + 32 * l, L + 32 * l, rmin, rdelta, nstep, false, &scales[l],
                       &min_negs[l]);
      continue;
    }
    for (int i = 0; i < n; i++) L[32 * l + i] = (uint8_t)Lt[i][l];
    scales[l] = scale[l];
    min_negs[l] = -min[l];
  }
}

// make_qx_quants, rmse_type 1, no importance weights (quant-k-search.ts fitSymmetricScale) for N
// sub-blocks of 16 at x + 16 l: levels l + nmax in L + 16 l, l in [-nmax, nmax - 1]; the scales.
// iscale * x stays within +-(nmax + 1) (|x| <= |max|), far inside nearest_int's exact range; a
// sub-block below GROUP_MAX_EPS (whose lane computes NaNs) gets the scalar code's zeros.
template <int N>
static void mt_fit_symmetric_lanes(const float* x, int nmax, uint8_t* L, float* scales) {
  typedef typename mt_lanes<N>::vf vf;
  typedef typename mt_lanes<N>::vi vi;
  constexpr int n = 16;
  vf xt[n];
  for (int i = 0; i < n; i++)
    for (int l = 0; l < N; l++) xt[i][l] = x[16 * l + i];
  const vf zero = vf{} + 0.0f;
  const vi lo = (vi{} + 0) - nmax, hi = (vi{} + 0) + (nmax - 1);
  vf max = zero, amax = zero;
  for (int i = 0; i < n; i++) {
    const vf ax = xt[i] < zero ? -xt[i] : xt[i];
    const vi above = ax > amax;
    amax = above ? ax : amax;
    max = above ? xt[i] : max;
  }
  vi Lt[n], laux[n];
  // sums(iscale): the levels into laux, sumlx and suml2 in order.
  auto sums = [&](vf iscale, vf* sumlx, vf* suml2) __attribute__((always_inline)) {
    vf slx = zero, sl2 = zero;
    for (int i = 0; i < n; i++) {
      const vf v = xt[i];
      vi q = (vi)(iscale * v + 12582912.0f) - 0x4B400000;
      q = q < lo ? lo : q;
      q = q > hi ? hi : q;
      laux[i] = q;
      const vf l = __builtin_convertvector(q, vf);
      const vf wv = v * v;
      slx = slx + (wv * v) * l;
      sl2 = sl2 + (wv * l) * l;
    }
    *sumlx = slx;
    *suml2 = sl2;
  };
  vf iscale = ((float)-nmax) / max;
  vf sumlx, suml2;
  sums(iscale, &sumlx, &suml2);
  for (int i = 0; i < n; i++) Lt[i] = laux[i];
  vf scale = suml2 != zero ? sumlx / suml2 : zero;
  vf best = scale * sumlx;
  for (int step = -9; step <= 9; step++) {
    if (step == 0) continue;
    iscale = -((float)nmax + 0.1f * (float)step) / max;
    sums(iscale, &sumlx, &suml2);
    const vi better = (suml2 > zero) & (sumlx * sumlx > best * suml2);
    for (int i = 0; i < n; i++) Lt[i] = better ? laux[i] : Lt[i];
    scale = better ? sumlx / suml2 : scale;
    best = better ? scale * sumlx : best;
  }
  const vi tiny = amax < 1e-15f;  // ggml GROUP_MAX_EPS
  for (int l = 0; l < N; l++) {
    if (tiny[l]) {
      memset(L + 16 * l, 0, 16);
      scales[l] = 0.0f;
      continue;
    }
    for (int i = 0; i < n; i++) L[16 * l + i] = (uint8_t)(Lt[i][l] + nmax);
    scales[l] = scale[l];
  }
}

// The searches over a run of sub-blocks, N at a time; a last group short of N is padded with
// copies of its first sub-block (their results are dropped).
template <int N>
static void mt_fit_scale_min_run(const float* x, const float* w, int64_t nsub, int nmax, float rmin, float rdelta,
                                 int nstep, uint8_t* L, float* scales, float* min_negs) {
  int64_t s = 0;
  for (; s + N <= nsub; s += N)
    mt_fit_scale_min_lanes<N>(x + 32 * s, w + 32 * s, nmax, rmin, rdelta, nstep, L + 32 * s, scales + s, min_negs + s);
  if (s == nsub) return;
  float xp[32 * N], wp[32 * N], sp[N], mp[N];
  uint8_t lp[32 * N];
  for (int l = 0; l < N; l++) {
    const int64_t from = s + l < nsub ? s + l : s;
    memcpy(xp + 32 * l, x + 32 * from, 32 * sizeof(float));
    memcpy(wp + 32 * l, w + 32 * from, 32 * sizeof(float));
  }
  mt_fit_scale_min_lanes<N>(xp, wp, nmax, rmin, rdelta, nstep, lp, sp, mp);
  const int64_t rest = nsub - s;
  memcpy(L + 32 * s, lp, (size_t)(32 * rest));
  memcpy(scales + s, sp, (size_t)rest * sizeof(float));
  memcpy(min_negs + s, mp, (size_t)rest * sizeof(float));
}

template <int N>
static void mt_fit_symmetric_run(const float* x, int64_t nsub, int nmax, uint8_t* L, float* scales) {
  int64_t s = 0;
  for (; s + N <= nsub; s += N) mt_fit_symmetric_lanes<N>(x + 16 * s, nmax, L + 16 * s, scales + s);
  if (s == nsub) return;
  float xp[16 * N], sp[N];
  uint8_t lp[16 * N];
  for (int l = 0; l < N; l++) memcpy(xp + 16 * l, x + 16 * (s + l < nsub ? s + l : s), 16 * sizeof(float));
  mt_fit_symmetric_lanes<N>(xp, nmax, lp, sp);
  const int64_t rest = nsub - s;
  memcpy(L + 16 * s, lp, (size_t)(16 * rest));
  memcpy(scales + s, sp, (size_t)rest * sizeof(float));
}
