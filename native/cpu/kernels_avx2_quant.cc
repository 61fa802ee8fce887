// The AVX2 quantised kernels (Q8_0, Q4_0 weights x prepared 8-bit activation blocks).
//
// Per 32-element block the integer dot ends as 8 int32 lanes, lane j = elements 4j..4j+3:
//   Q8_0: maddubs(|w|, sign(q_x, w)) -> int16 pairs -> madd(1) -> int32 lanes
//   Q4_0: maddubs(nibble 0..15, q_x) - maddubs(8, q_x) -> int16 pairs -> madd(1) -> int32 lanes
// The Q4_0 form needs no sign instructions: the unsigned nibble is maddubs' unsigned operand,
// and subtracting 8 * (q_x pair sum) per int16 pair restores (nibble - 8) * q_x exactly
// (|pair| <= 2 * 15 * 127, no saturation). So a Q4_0 row and its exact Q8_0 copy
// (q = nibble - 8, the same d) reach the same int32 lanes, then the same float steps:
//   acc_row += float(lanes) * (d_w * d_x)     one accumulator per (weight row, activation row),
//   y = hsum(acc_row)                         blocks in order, on every kernel below
// which makes them bit-identical (the tier computes a missed 4-bit expert from its int8 copy),
// and also makes matvec, matmul and every row grouping give the same bits for a row.
//
// Decode (matvec) runs kRows weight rows against each activation block (its load and the
// Q4_0 offset term are shared); prefill (matmul) runs a register tile of kTileRows weight
// rows x kTileActs activation rows (each weight block decoded once per tile row).
#include <immintrin.h>
#include "kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

constexpr int kRows = 8;                   // matvec: weight rows per pass over the activation
constexpr size_t kPrefetchLeadBytes = 4096;  // matvec, short rows: how far ahead whole groups are fetched
constexpr size_t kLongGroupBytes = 24576;    // matvec: a row group larger than this (~L1) counts as long rows
constexpr size_t kRowLeadBytes = 1024;       // matvec, long rows: how far ahead each row is fetched
constexpr int kTileRows = 2;               // matmul tile: weight rows ...
constexpr int kTileActs = 4;               // ... x activation rows = 8 accumulators

// f16 -> f32 for every bit pattern, filled once with F16C. A block scale then costs one load
// instead of an insert and a conversion on the vector pipes, which bound the Q4_0 matvec
// (~256 KB, but a tensor's scales span a few exponents: a few KB of it stay hot in L1).
const float* f16_table() {
  static const float* table = [] {
    static float t[65536];
    for (uint32_t h = 0; h < 65536; h++) t[h] = _cvtsh_ss((unsigned short)h);
    return t;
  }();
  return table;
}

inline float scale_f16(const float* table, const uint8_t* blk) { return table[mt_load_u16(blk)]; }

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One activation block, loaded once for every weight row it meets. off = 8 * (q pair sums),
// int16, used by Q4_0 only (the compiler drops it for Q8_0).
struct ActBlock {
  __m256i q, off;
  float d;
};

inline ActBlock load_act(const mt_act_q8& a) {
  __m256i q = _mm256_loadu_si256((const __m256i*)a.q);
  return {q, _mm256_maddubs_epi16(_mm256_set1_epi8(8), q), a.d};
}

// A weight block ready for maddubs' unsigned operand. Q4_0: 16 bytes of nibbles -> 32 bytes in
// element order (low nibbles = elements 0..15, high = 16..31): the bytes go to both halves, the
// high half shifts right by 4 (64-bit lanes: a neighbour's bits land in the top nibble), both are
// masked to 0..15. Q8_0: |w|, and w itself to carry the sign onto q_x.
template <bool kQ4>
struct WeightBlock {
  __m256i u, w;
  explicit WeightBlock(const uint8_t* blk) {
    if (kQ4) {
      __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(blk + 2)));
      u = _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
      w = u;
    } else {
      w = _mm256_loadu_si256((const __m256i*)(blk + 2));
      u = _mm256_sign_epi8(w, w);
    }
  }
};

// The block's 8 int32 lanes (see the header: identical for a Q4_0 block and its Q8_0 copy).
template <bool kQ4>
inline __m256i block_lanes(const WeightBlock<kQ4>& wb, const ActBlock& x) {
  __m256i p16 = kQ4 ? _mm256_sub_epi16(_mm256_maddubs_epi16(wb.u, x.q), x.off)
                    : _mm256_maddubs_epi16(wb.u, _mm256_sign_epi8(x.q, wb.w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

inline __m256 accumulate(__m256i lanes, float dw, float dx, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(dw * dx), acc);
}

// y[r] = row r . a for R consecutive rows (rows are row_bytes apart, nb blocks each).
// Prefetch: short rows (a group of them computes in less than a memory latency, as an expert's
// down rows do) fetch whole groups at least kPrefetchLeadBytes ahead; long rows (a group about as
// large as L1: the next one would evict this one) fetch each row's own stream kRowLeadBytes ahead.
template <int kBlockBytes, bool kQ4, int R, bool kLongRows>
void dot_rows(const float* f16, const uint8_t* w, size_t row_bytes, const mt_act_q8* a, int64_t nb, float* y) {
  __m256 acc[R];
  for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  const size_t group_bytes = R * row_bytes;
  const uint8_t* next = w + group_bytes * ((kPrefetchLeadBytes + group_bytes - 1) / group_bytes);
  for (int64_t b = 0; b < nb; b++) {
    const ActBlock x = load_act(a[b]);
    if (!kLongRows)
      for (int p = 0; p < R * kBlockBytes; p += 64) _mm_prefetch((const char*)(next + b * R * kBlockBytes + p), _MM_HINT_T0);
    for (int r = 0; r < R; r++) {
      const uint8_t* blk = w + r * row_bytes + b * kBlockBytes;
      if (kLongRows) _mm_prefetch((const char*)(blk + kRowLeadBytes), _MM_HINT_T0);
      acc[r] = accumulate(block_lanes<kQ4>(WeightBlock<kQ4>(blk), x), scale_f16(f16, blk), x.d, acc[r]);
    }
  }
  for (int r = 0; r < R; r++) y[r] = hsum8(acc[r]);
}

template <int kBlockBytes, bool kQ4, bool kLongRows>
void matvec_rows(const float* f16, const uint8_t* W, size_t row_bytes, const mt_act_q8* a, int64_t nb, float* y,
                 int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) dot_rows<kBlockBytes, kQ4, kRows, kLongRows>(f16, W + r * row_bytes, row_bytes, a, nb, y + r);
  for (; r < r1; r++) dot_rows<kBlockBytes, kQ4, 1, kLongRows>(f16, W + r * row_bytes, row_bytes, a, nb, y + r);
}

template <int kBlockBytes, bool kQ4>
void matvec(const uint8_t* W, int64_t cols, const mt_act_q8* a, float* y, int64_t r0, int64_t r1) {
  const size_t row_bytes = (size_t)(cols / MT_QK) * kBlockBytes;
  const int64_t nb = cols / MT_QK;
  if (kRows * row_bytes > kLongGroupBytes) matvec_rows<kBlockBytes, kQ4, true>(f16_table(), W, row_bytes, a, nb, y, r0, r1);
  else matvec_rows<kBlockBytes, kQ4, false>(f16_table(), W, row_bytes, a, nb, y, r0, r1);
}

// out[r * A + k] = row r . a_k: an R x A register tile, blocks in order.
template <int kBlockBytes, bool kQ4, int R, int A>
void dot_tile(const float* f16, const uint8_t* w, size_t row_bytes, const mt_act_q8* const* a, int64_t nb, float* out) {
  __m256 acc[R][A];
  for (int r = 0; r < R; r++)
    for (int k = 0; k < A; k++) acc[r][k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    // Activation blocks stream through one at a time (holding all A of them in registers next
    // to the R x A accumulators spilled the accumulators); the weight decode is hoisted.
    const uint8_t* blk[R];
    float dw[R];
    for (int r = 0; r < R; r++) {
      blk[r] = w + r * row_bytes + b * kBlockBytes;
      dw[r] = scale_f16(f16, blk[r]);
    }
    for (int k = 0; k < A; k++) {
      const ActBlock x = load_act(a[k][b]);
      for (int r = 0; r < R; r++) acc[r][k] = accumulate(block_lanes<kQ4>(WeightBlock<kQ4>(blk[r]), x), dw[r], x.d, acc[r][k]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int k = 0; k < A; k++) out[r * A + k] = hsum8(acc[r][k]);
}

// A tile of R weight rows x m activation rows (m <= kTileActs): the short last tile of an expert
// with few rows computes only its m rows (prefill gives most experts a handful of rows).
template <int kBlockBytes, bool kQ4, int R>
void dot_tile_m(int64_t m, const float* f16, const uint8_t* w, size_t row_bytes, const mt_act_q8* const* a, int64_t nb,
                float* out) {
  static_assert(kTileActs == 4, "one case per tile width");
  switch (m) {
    case 1: dot_tile<kBlockBytes, kQ4, R, 1>(f16, w, row_bytes, a, nb, out); break;
    case 2: dot_tile<kBlockBytes, kQ4, R, 2>(f16, w, row_bytes, a, nb, out); break;
    case 3: dot_tile<kBlockBytes, kQ4, R, 3>(f16, w, row_bytes, a, nb, out); break;
    default: dot_tile<kBlockBytes, kQ4, R, 4>(f16, w, row_bytes, a, nb, out); break;
  }
}

// Y [n, ldy] (columns r0..r1) = acts [n, cols] W^T. Weight rows go kTileRows at a time (a short
// last group row by row) through every activation tile.
template <int kBlockBytes, bool kQ4>
void matmul(const uint8_t* W, int64_t cols, const uint8_t* acts, int64_t n, float* Y, int64_t ldy, int64_t r0,
            int64_t r1) {
  const size_t row_bytes = (size_t)(cols / MT_QK) * kBlockBytes;
  const size_t act_bytes = (size_t)(cols / MT_QK) * sizeof(mt_act_q8);
  const int64_t nb = cols / MT_QK;
  const float* f16 = f16_table();
  for (int64_t r = r0; r < r1;) {
    const int64_t rows = r + kTileRows <= r1 ? kTileRows : 1;
    const uint8_t* w = W + r * row_bytes;
    for (int64_t i0 = 0; i0 < n; i0 += kTileActs) {
      const int64_t m = n - i0 < kTileActs ? n - i0 : kTileActs;
      const mt_act_q8* tile[kTileActs];
      for (int64_t k = 0; k < m; k++) tile[k] = (const mt_act_q8*)(acts + (i0 + k) * act_bytes);
      float out[kTileRows * kTileActs];
      if (rows == kTileRows) dot_tile_m<kBlockBytes, kQ4, kTileRows>(m, f16, w, row_bytes, tile, nb, out);
      else dot_tile_m<kBlockBytes, kQ4, 1>(m, f16, w, row_bytes, tile, nb, out);
      for (int64_t q = 0; q < rows; q++)
        for (int64_t k = 0; k < m; k++) Y[(i0 + k) * ldy + r + q] = out[q * m + k];
    }
    r += rows;
  }
}

}  // namespace

extern "C" {

void mt_matvec_quant_avx2(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1) {
  const mt_act_q8* a = (const mt_act_q8*)act;
  if (wtype == MT_Q4_0) matvec<MT_Q4_0_BYTES, true>((const uint8_t*)W, cols, a, y, r0, r1);
  else matvec<MT_Q8_0_BYTES, false>((const uint8_t*)W, cols, a, y, r0, r1);
}

void mt_matmul_quant_avx2(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                          int64_t r0, int64_t r1) {
  const uint8_t* w = (const uint8_t*)W;
  const uint8_t* x = (const uint8_t*)acts;
  if (wtype == MT_Q4_0) matmul<MT_Q4_0_BYTES, true>(w, cols, x, n, Y, ldy, r0, r1);
  else matmul<MT_Q8_0_BYTES, false>(w, cols, x, n, Y, ldy, r0, r1);
}

}  // extern "C"

#pragma GCC pop_options
