// Rows of f32 -> a tensor type: the writer's half of the types (gen-model), byte for byte what
// src/model/quant.ts and quant-k.ts write for the same finite floats (ggml's quantize_row_*_ref).
// Every float operation is one f32 rounding in the TypeScript's order (-ffp-contract=off), so the
// bytes do not depend on the compiler or the CPU. The k-quants are in quantize_kquant.cc, MXFP4 in
// quantize_mxfp4.cc.
// Not matched: NaN and inf inputs (the TypeScript turns them into its own codes; gen-model's
// weights are finite).
#include <math.h>
#include <string.h>
#include <new>
#include <vector>
#include "kernels_internal.h"
#include "quantize_internal.h"

namespace {

inline void put_u16(uint8_t* p, uint16_t v) { memcpy(p, &v, 2); }

// The signed element of largest |x| (the first of equals) over one 32-element block.
inline float signed_max(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < MT_QK; j++) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

// roundf (half away from zero) for |v| < 2^31, inline: v - trunc(v) is exact.
inline int round_away(float v) {
  int i = (int)v;
  const float frac = v - (float)i;
  if (frac >= 0.5f)
    i++;
  else if (frac <= -0.5f)
    i--;
  return i;
}

// d = amax / 127, q = round(x * (1 / d)) half away from zero (|q| <= 127), d stored as f16.
void block_q8_0(const float* x, uint8_t* o) {
  float amax = 0.0f;
  for (int j = 0; j < MT_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(o, mt_f32_to_f16(d));
  for (int j = 0; j < MT_QK; j++) o[2 + j] = (uint8_t)round_away(x[j] * id);
}

// d = max / -8 (max signed), q = min(15, trunc(x / d + 8.5)): x * id + 8.5 >= 0.5, so the cast floors.
void block_q4_0(const float* x, uint8_t* o) {
  const float d = signed_max(x) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(o, mt_f32_to_f16(d));
  for (int j = 0; j < MT_QK / 2; j++) {
    int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + MT_QK / 2] * id + 8.5f);
    q0 = q0 < 15 ? q0 : 15;
    q1 = q1 < 15 ? q1 : 15;
    o[2 + j] = (uint8_t)(q0 | (q1 << 4));
  }
}

// 32 five-bit levels: 16 bytes of nibbles at qs, the 5th bits as a little-endian u32 at qh.
void pack_q5(const uint8_t* levels, uint8_t* qh, uint8_t* qs) {
  uint32_t high = 0;
  for (int j = 0; j < MT_QK / 2; j++) {
    qs[j] = (uint8_t)((levels[j] & 0x0f) | ((levels[j + MT_QK / 2] & 0x0f) << 4));
    high |= (uint32_t)((levels[j] >> 4) & 1) << j;
    high |= (uint32_t)((levels[j + MT_QK / 2] >> 4) & 1) << (j + MT_QK / 2);
  }
  for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(high >> (8 * k));
}

void block_q5_0(const float* x, uint8_t* o) {
  const float d = signed_max(x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(o, mt_f32_to_f16(d));
  uint8_t levels[MT_QK];
  for (int j = 0; j < MT_QK; j++) {
    const int q = (int)(x[j] * id + 16.5f);
    levels[j] = (uint8_t)(q < 31 ? q : 31);
  }
  pack_q5(levels, o + 2, o + 6);
}

void block_q5_1(const float* x, uint8_t* o) {
  float min = INFINITY, max = -INFINITY;
  for (int j = 0; j < MT_QK; j++) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(o, mt_f32_to_f16(d));
  put_u16(o + 2, mt_f32_to_f16(min));
  uint8_t levels[MT_QK];
  for (int j = 0; j < MT_QK; j++) levels[j] = (uint8_t)(int)((x[j] - min) * id + 0.5f);
  pack_q5(levels, o + 4, o + 8);
}

// The index of the table value nearest t (the first of equals): |t - v| in f32, as quant-iq4.ts.
inline int nearest_iq4(float t) {
  int best = 0;
  float best_err = fabsf(t - (float)mt_iq4nl_values[0]);
  for (int k = 1; k < 16; k++) {
    const float err = fabsf(t - (float)mt_iq4nl_values[k]);
    if (err < best_err) {
      best_err = err;
      best = k;
    }
  }
  return best;
}

// One 32-element block fitted to the table (src/model/quant-iq4.ts fitBlock): d0 = max / -127 puts
// the element of largest |x| on the table's -127; each x takes the nearest table value v of x / d0
// (idx); returns sum(v x) / sum(v v), the least-squares scale for those indices.
float fit_iq4(const float* x, uint8_t* idx) {
  const float d0 = signed_max(x) / -127.0f;
  const float id = d0 != 0.0f ? 1.0f / d0 : 0.0f;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < MT_QK; j++) {
    idx[j] = (uint8_t)nearest_iq4(x[j] * id);
    const float v = (float)mt_iq4nl_values[idx[j]];
    sumqx = sumqx + v * x[j];
    sumq2 = sumq2 + v * v;
  }
  return sumqx / sumq2;
}

// IQ4_NL (quant-iq4.ts quantizeIq4NlBlock): fit_iq4's indices and scale (as f16).
void block_iq4_nl(const float* x, uint8_t* o) {
  uint8_t idx[MT_QK];
  put_u16(o, mt_f32_to_f16(fit_iq4(x, idx)));
  for (int j = 0; j < MT_QK / 2; j++) o[2 + j] = (uint8_t)(idx[j] | (idx[j + MT_QK / 2] << 4));
}

// IQ4_XS (quant-iq4.ts quantizeIq4XsBlock): each sub-block of 32 fitted alone, d = the scale of
// largest |scale| / -32 as f16, ls - 32 = round(scale / d) in -32..31, then each sub-block's indices
// chosen again for d (ls - 32).
void block_iq4_xs(const float* x, uint8_t* o) {
  uint8_t idx[MT_QK];
  float scales[8];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 8; j++) {
    scales[j] = fit_iq4(x + 32 * j, idx);
    if (amax < fabsf(scales[j])) {
      amax = fabsf(scales[j]);
      max = scales[j];
    }
  }
  const uint16_t h = mt_f32_to_f16(max != 0.0f ? max / -32.0f : 0.0f);  // +0 for a zero block, not -0
  const float d = mt_f16_to_f32(h);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_u16(o, h);
  memset(o + 4, 0, 4);
  uint16_t scales_h = 0;
  for (int j = 0; j < 8; j++) {
    int l = round_away(scales[j] * id);
    l = l < -32 ? -32 : (l > 31 ? 31 : l);
    const int ls = l + 32;
    o[4 + j / 2] |= (uint8_t)((ls & 15) << (4 * (j % 2)));
    scales_h |= (uint16_t)((ls >> 4) << (2 * j));
    const float dl = d * (float)l;
    const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int k = 0; k < 16; k++) {
      const int lo = nearest_iq4(x[32 * j + k] * inv), hi = nearest_iq4(x[32 * j + k + 16] * inv);
      o[8 + 16 * j + k] = (uint8_t)(lo | (hi << 4));
    }
  }
  put_u16(o + 2, scales_h);
}

// Round to nearest even on the top 16 bits (src/model/f16.ts f32ToBf16).
inline uint16_t f32_to_bf16(float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

void quantize_row(const mt_kquant_searches* searches, int type, const float* x, int64_t cols, uint8_t* out,
                  mt_kquant_scratch* scratch) {
  switch (type) {
    case MT_F32:
      memcpy(out, x, (size_t)cols * 4);
      return;
    case MT_F16:
      for (int64_t i = 0; i < cols; i++) put_u16(out + 2 * i, mt_f32_to_f16(x[i]));
      return;
    case MT_BF16:
      for (int64_t i = 0; i < cols; i++) put_u16(out + 2 * i, f32_to_bf16(x[i]));
      return;
    case MT_Q8_0:
      for (int64_t b = 0; b < cols / MT_QK; b++) block_q8_0(x + b * MT_QK, out + b * MT_Q8_0_BYTES);
      return;
    case MT_Q4_0:
      for (int64_t b = 0; b < cols / MT_QK; b++) block_q4_0(x + b * MT_QK, out + b * MT_Q4_0_BYTES);
      return;
    case MT_Q5_0:
      for (int64_t b = 0; b < cols / MT_QK; b++) block_q5_0(x + b * MT_QK, out + b * MT_Q5_0_BYTES);
      return;
    case MT_Q5_1:
      for (int64_t b = 0; b < cols / MT_QK; b++) block_q5_1(x + b * MT_QK, out + b * MT_Q5_1_BYTES);
      return;
    case MT_IQ4_NL:
      for (int64_t b = 0; b < cols / MT_QK; b++) block_iq4_nl(x + b * MT_QK, out + b * MT_IQ4_NL_BYTES);
      return;
    case MT_IQ4_XS:
      for (int64_t b = 0; b < cols / MT_QK_K; b++) block_iq4_xs(x + b * MT_QK_K, out + b * MT_IQ4_XS_BYTES);
      return;
    case MT_MXFP4:
      for (int64_t b = 0; b < cols / MT_QK; b++) mt_quantize_block_mxfp4(x + b * MT_QK, out + b * MT_MXFP4_BYTES);
      return;
    default:
      mt_quantize_row_kquant(searches, type, x, cols, out, scratch);
      return;
  }
}

// The k-quant searches of the active kernel path: every path gives the same bytes, the wider faster.
const mt_kquant_searches* active_searches() {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(MT_NO_X86_SIMD)
  switch (mt_isa_active()) {
    case MT_ISA_AVX512VNNI:
      return &mt_kquant_searches_avx512;
    case MT_ISA_AVX2:
      return &mt_kquant_searches_avx2;
    default:
      break;
  }
#endif
  return &mt_kquant_searches_scalar;
}

}  // namespace

extern "C" int mt_quantize_rows(int type, const float* x, int64_t rows, int64_t cols, void* out) {
  const size_t row_bytes = mt_row_bytes(type, cols);
  if (!mt_type_supported(type) || row_bytes == 0 || rows < 0) return -1;
  std::vector<float> weights, scales, mins;
  std::vector<uint8_t> levels;
  mt_kquant_scratch scratch{};
  if (mt_is_kquant(type) && type != MT_IQ4_XS) {  // the k-quant searches' scratch
    try {
      weights.resize((size_t)cols), levels.resize((size_t)cols), scales.resize((size_t)cols / 16),
          mins.resize((size_t)cols / 16);
    } catch (const std::bad_alloc&) {
      return -2;
    }
    scratch = {weights.data(), levels.data(), scales.data(), mins.data()};
  }
  const mt_kquant_searches* searches = active_searches();
  uint8_t* o = (uint8_t*)out;
  for (int64_t r = 0; r < rows; r++)
    quantize_row(searches, type, x + r * cols, cols, o + (size_t)r * row_bytes, &scratch);
  return 0;
}
