// The k-quant writers: quantize_row_q2_K_ref .. quantize_row_q6_K_ref (no importance matrix), in
// the f32 operations and order of src/model/quant-k.ts and quant-k-search.ts, so that a row gives
// the same bytes here and there (tests/native/quantize.test.ts). Block layouts: quant-k.ts's header.
//
// The scale searches (make_qkx2_quants, make_qx_quants) dominate gen-model's time: Q4_K tries 21
// level spacings per 32 elements. Their sums are sequential f32 chains (the order is the result),
// so a row's sub-blocks go to the searches of the active kernel path all at once, which run 4, 8 or
// 16 of them side by side, each lane exactly the scalar sequence (quantize_kquant_lanes.h). Measured
// per weight on one core here: Q4_K 390 ns in TypeScript, 57 / 18 / 9 ns on the scalar / AVX2 /
// AVX-512 path; Q6_K 255 ns, 18 / 19 / 6 ns. Q2_K and Q3_K keep scalar searches: no preset writes
// them in bulk.
#include <math.h>
#include <string.h>
#include "kernels_internal.h"
#include "kernels_kquant.h"
#include "quantize_internal.h"
#include "quantize_kquant_lanes.h"

namespace {

const float kGroupMaxEps = 1e-15f;  // ggml GROUP_MAX_EPS

inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// The f16 bits of v into o (little-endian); returns the value they hold.
inline float put_f16(uint8_t* o, float v) {
  const uint16_t h = mt_f32_to_f16(v);
  memcpy(o, &h, 2);
  return mt_f16_to_f32(h);
}

// make_q3_quants with do_rmse: levels l + nmax, l in [-nmax, nmax - 1]; up to 5 passes moving one level at a time.
float fit_q3_scale(const float* x, int n, int nmax, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; i++) {
    const float ax = fabsf(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    memset(L, 0, (size_t)n);
    return 0.0f;
  }
  const float iscale = (float)-nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; i++) {
    const float v = x[i];
    const int l = clampi(mt_nearest_int(iscale * v), -nmax, nmax - 1);
    L[i] = (int8_t)l;
    const float w = v * v;
    sumlx = sumlx + (w * v) * (float)l;
    suml2 = suml2 + (w * (float)l) * (float)l;
  }
  for (int pass = 0; pass < 5; pass++) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      const float v = x[i];
      const float w = v * v;
      const float old = (float)L[i];
      float slx = sumlx - (w * v) * old;
      if (!(slx > 0.0f)) continue;
      float sl2 = suml2 - (w * old) * old;
      const int next = clampi(mt_nearest_int((v * sl2) / slx), -nmax, nmax - 1);
      if (next == L[i]) continue;
      slx = slx + (w * v) * (float)next;
      sl2 = sl2 + (w * (float)next) * (float)next;
      if (sl2 > 0.0f && (slx * slx) * suml2 > (sumlx * sumlx) * sl2) {
        L[i] = (int8_t)next;
        sumlx = slx;
        suml2 = sl2;
        changed++;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Levels L[0..256) of 2 bits into 64 bytes, as Q2_K / Q3_K's qs hold them.
void pack_2bit(const uint8_t* L, uint8_t* o) {
  for (int h = 0; h < 2; h++)
    for (int l = 0; l < 32; l++) {
      const int e = 128 * h + l;
      o[32 * h + l] = (uint8_t)(L[e] | (L[e + 32] << 2) | (L[e + 64] << 4) | (L[e + 96] << 6));
    }
}

void block_q2_k(const float* x, uint8_t* o) {
  uint8_t L[MT_QK_K];
  float weights[16], scales[16], mins[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 16; j++) {
    for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
    mt_fit_scale_min(x + 16 * j, 16, 3, weights, L + 16 * j, -0.5f, 0.1f, 15, true, &scales[j], &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float q4scale = 15.0f;
  float d, dmin;
  if (max_scale > 0.0f) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < 16; j++) o[j] = (uint8_t)mt_nearest_int(iscale * scales[j]);
    d = put_f16(o + 80, max_scale / q4scale);
  } else {
    d = put_f16(o + 80, 0.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < 16; j++) o[j] |= (uint8_t)(mt_nearest_int(iscale * mins[j]) << 4);
    dmin = put_f16(o + 82, max_min / q4scale);
  } else {
    dmin = put_f16(o + 82, 0.0f);
  }
  for (int j = 0; j < 16; j++) {
    const float dl = d * (float)(o[j] & 0x0f);
    if (dl == 0.0f) continue;
    const float ml = dmin * (float)(o[j] >> 4);
    for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clampi(mt_nearest_int((x[16 * j + i] + ml) / dl), 0, 3);
  }
  pack_2bit(L, o + 16);
}

// Q3_K's 6-bit scale s (0..15) from the 12 packed bytes at p.
inline int scale_q3k(const uint8_t* p, int s) {
  const int low = s < 8 ? p[s] & 0x0f : p[s - 8] >> 4;
  const int high = (p[8 + (s % 4)] >> (2 * (s >> 2))) & 3;
  return low | (high << 4);
}

void block_q3_k(const float* x, uint8_t* o) {
  int8_t L[MT_QK_K];
  float scales[16];
  float max_scale = 0.0f, amax = 0.0f;
  for (int j = 0; j < 16; j++) {
    scales[j] = fit_q3_scale(x + 16 * j, 16, 4, L + 16 * j);
    const float a = fabsf(scales[j]);
    if (a > amax) {
      amax = a;
      max_scale = scales[j];
    }
  }
  uint8_t* sc = o + 96;
  float d;
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; j++) {
      const int l = clampi((int8_t)mt_nearest_int(iscale * scales[j]), -32, 31) + 32;
      if (j < 8)
        sc[j] = (uint8_t)(l & 0x0f);
      else
        sc[j - 8] |= (uint8_t)((l & 0x0f) << 4);
      sc[8 + (j % 4)] |= (uint8_t)((l >> 4) << (2 * (j >> 2)));
    }
    d = put_f16(o + 108, 1.0f / iscale);
  } else {
    d = put_f16(o + 108, 0.0f);
  }
  for (int j = 0; j < 16; j++) {
    const float dl = d * (float)(scale_q3k(sc, j) - 32);
    if (dl == 0.0f) continue;
    for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(mt_nearest_int(x[16 * j + i] / dl), -4, 3) + 4);
  }
  uint8_t U[MT_QK_K];
  for (int e = 0; e < MT_QK_K; e++) {
    int l = L[e];
    if (l > 3) {
      o[e & 31] |= (uint8_t)(1 << (e >> 5));  // hmask
      l -= 4;
    }
    U[e] = (uint8_t)l;
  }
  pack_2bit(U, o + 32);
}

// ggml get_scale_min_k4 over the 12 packed bytes at p.
inline void scale_min_k4(const uint8_t* p, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = p[j] & 63;
    *m = p[j + 4] & 63;
  } else {
    *sc = (p[j + 4] & 0x0f) | ((p[j - 4] >> 6) << 4);
    *m = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K, one super-block from its fitted levels, scales and mins: scales and mins to 6 bits
// against max / 63, the levels refitted to them.
void pack_q45_k(int bits, const float* x, uint8_t* L, const float* scales, const float* mins, uint8_t* o) {
  const int nmax = bits == 4 ? 15 : 31;
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; j++) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t* sc = o + 4;
  for (int j = 0; j < 8; j++) {
    int ls = mt_nearest_int(inv_scale * scales[j]) & 0xff, lm = mt_nearest_int(inv_min * mins[j]) & 0xff;
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      sc[j] = (uint8_t)ls;
      sc[j + 4] = (uint8_t)lm;
    } else {
      sc[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
      sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
      sc[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  const float d = put_f16(o, max_scale / 63.0f);
  const float dmin = put_f16(o + 2, max_min / 63.0f);
  for (int j = 0; j < 8; j++) {
    int ls, lm;
    scale_min_k4(sc, j, &ls, &lm);
    const float dl = d * (float)ls;
    if (dl == 0.0f) continue;
    const float ml = dmin * (float)lm;
    for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(mt_nearest_int((x[32 * j + i] + ml) / dl), 0, nmax);
  }
  uint8_t* qs = o + (bits == 4 ? 16 : 48);
  for (int e = 0; e < MT_QK_K; e++) {
    const int low = L[e] & 0x0f;
    qs[32 * (e >> 6) + (e & 31)] |= (uint8_t)(e & 32 ? low << 4 : low);
    if (bits == 5 && L[e] > 15) o[16 + (e & 31)] |= (uint8_t)(1 << (e >> 5));  // qh
  }
}

// Q4_K / Q5_K rows of nb super-blocks: the weights av_x + |x| (av_x a sub-block's rms), every
// sub-block's scale search in one run (lanes side by side), then each super-block packed.
void row_q45_k(const mt_kquant_searches* searches, int bits, const float* x, int64_t nb, uint8_t* out,
               mt_kquant_scratch* s) {
  const int64_t nsub = 8 * nb;
  for (int64_t j = 0; j < nsub; j++) {
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; l++) sum_x2 = sum_x2 + x[32 * j + l] * x[32 * j + l];
    const float av_x = sqrtf(sum_x2 / 32.0f);
    for (int l = 0; l < 32; l++) s->weights[32 * j + l] = av_x + fabsf(x[32 * j + l]);
  }
  if (bits == 4)
    searches->scale_min32(x, s->weights, nsub, 15, -1.0f, 0.1f, 20, s->levels, s->scales, s->mins);
  else
    searches->scale_min32(x, s->weights, nsub, 31, -0.5f, 0.1f, 15, s->levels, s->scales, s->mins);
  const int bytes = bits == 4 ? 144 : 176;
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* o = out + b * bytes;
    memset(o, 0, (size_t)bytes);
    pack_q45_k(bits, x + b * MT_QK_K, s->levels + b * MT_QK_K, s->scales + 8 * b, s->mins + 8 * b, o);
  }
}

// Q6_K, one super-block from its 16 fitted levels and scales: int8 scales against max / -128.
void pack_q6_k(const float* x, uint8_t* L, const float* scales, uint8_t* o) {
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int j = 0; j < 16; j++) {
    const float a = fabsf(scales[j]);
    if (a > max_abs_scale) {
      max_abs_scale = a;
      max_scale = scales[j];
    }
  }
  if (max_abs_scale < kGroupMaxEps) return;  // an all-zero block: every byte 0
  const float iscale = -128.0f / max_scale;
  const float d = put_f16(o + 208, 1.0f / iscale);
  for (int j = 0; j < 16; j++) {
    const int sc = mt_nearest_int(iscale * scales[j]);
    o[192 + j] = (uint8_t)(sc < 127 ? sc : 127);
  }
  for (int j = 0; j < 16; j++) {
    const float dl = d * (float)(int8_t)o[192 + j];
    if (dl == 0.0f) continue;
    for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)(clampi(mt_nearest_int(x[16 * j + i] / dl), -32, 31) + 32);
  }
  for (int e = 0; e < MT_QK_K; e++) {
    const int h = e >> 7, g = (e >> 5) & 3, l = e & 31;
    o[64 * h + l + 32 * (g & 1)] |= (uint8_t)((L[e] & 0x0f) << (4 * (g >> 1)));
    o[128 + 32 * h + l] |= (uint8_t)((L[e] >> 4) << (2 * g));
  }
}

void row_q6_k(const mt_kquant_searches* searches, const float* x, int64_t nb, uint8_t* out, mt_kquant_scratch* s) {
  searches->symmetric16(x, 16 * nb, 32, s->levels, s->scales);
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* o = out + b * 210;
    memset(o, 0, 210);
    pack_q6_k(x + b * MT_QK_K, s->levels + b * MT_QK_K, s->scales + 16 * b, o);
  }
}

}  // namespace

// The scalar path's searches: 4 lanes (SSE2 on x86-64, NEON on arm64, plain code elsewhere).
static void scale_min32_4(const float* x, const float* w, int64_t nsub, int nmax, float rmin, float rdelta, int nstep,
                          uint8_t* L, float* scales, float* min_negs) {
  mt_fit_scale_min_run<4>(x, w, nsub, nmax, rmin, rdelta, nstep, L, scales, min_negs);
}
static void symmetric16_4(const float* x, int64_t nsub, int nmax, uint8_t* L, float* scales) {
  mt_fit_symmetric_run<4>(x, nsub, nmax, L, scales);
}
const mt_kquant_searches mt_kquant_searches_scalar = {scale_min32_4, symmetric16_4};

void mt_quantize_row_kquant(const mt_kquant_searches* searches, int type, const float* x, int64_t cols, uint8_t* out,
                            mt_kquant_scratch* scratch) {
  const int64_t nb = cols / MT_QK_K;
  if (type == MT_Q4_K || type == MT_Q5_K) return row_q45_k(searches, type == MT_Q4_K ? 4 : 5, x, nb, out, scratch);
  if (type == MT_Q6_K) return row_q6_k(searches, x, nb, out, scratch);
  const int bytes = mt_kquant_block_bytes(type);
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* o = out + b * bytes;
    memset(o, 0, (size_t)bytes);
    if (type == MT_Q2_K)
      block_q2_k(x + b * MT_QK_K, o);
    else
      block_q3_k(x + b * MT_QK_K, o);
  }
}
