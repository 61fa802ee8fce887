// gen-model's bulk tensors on a pool: rows quantised in parallel (mt_pool_quantize_rows), and
// uniform random rows drawn from an sfc32 stream and quantised (mt_pool_synth_uniform), the
// same bytes as src/synth/weights.ts's TypeScript path for the same stream.
//
//   stream (serial: sfc32 is one chain) ──fill──> buffer A ──quantise (rows split)──> out
//                                          fill─> buffer B ──quantise──> ...
// The fill of the next buffer is one chunk of the pool job that quantises the current one, so
// the serial stream runs beside the quantisers. Each row's bytes depend only on its floats,
// whichever thread quantises it: the output is the same for every thread count.
#include <atomic>
#include <new>
#include <vector>
#include "mt_pool.h"

namespace {

// Floats drawn per buffer (two buffers: 32 MiB of working memory).
constexpr int64_t kFillElems = int64_t(4) << 20;

// src/synth/prng.ts Rng.fillUniform: t = a + b + d (the sfc32 step), out = t (as int32) * scale,
// the product in double rounded once to f32, as a Float32Array store rounds it.
void fill_uniform(uint32_t* s, double scale, float* out, int64_t n) {
  uint32_t a = s[0], b = s[1], c = s[2], d = s[3];
  for (int64_t i = 0; i < n; i++) {
    const uint32_t t = a + b + d;
    d += 1;
    a = b ^ (b >> 9);
    b = c + (c << 3);
    c = (c << 21) | (c >> 11);
    c += t;
    out[i] = (float)((double)(int32_t)t * scale);
  }
  s[0] = a, s[1] = b, s[2] = c, s[3] = d;
}

struct QuantJob {
  int type;
  const float* x;
  int64_t rows, cols;
  uint8_t* out;
  size_t row_bytes;
  int64_t piece_rows;
  std::atomic<int> failed{0};
  // The next buffer's fill, as chunk 0 (when fill_rows > 0).
  uint32_t* state = nullptr;
  double scale = 0;
  float* fill_dst = nullptr;
  int64_t fill_rows = 0;
};

void run_piece(QuantJob* j, int64_t piece) {
  const int64_t r0 = piece * j->piece_rows;
  const int64_t r1 = r0 + j->piece_rows < j->rows ? r0 + j->piece_rows : j->rows;
  if (mt_quantize_rows(j->type, j->x + r0 * j->cols, r1 - r0, j->cols, j->out + (size_t)r0 * j->row_bytes) != 0)
    j->failed.store(1, std::memory_order_relaxed);
}

void run_quant(void* arg, int64_t chunk, int) {
  QuantJob* j = (QuantJob*)arg;
  if (j->fill_rows > 0) {
    if (chunk == 0) return fill_uniform(j->state, j->scale, j->fill_dst, j->fill_rows * j->cols);
    chunk--;
  }
  run_piece(j, chunk);
}

// About 8 pieces per thread, at least 4 rows each.
int64_t pieces_for(QuantJob* j, int nth) {
  int64_t p = j->rows / (8 * (int64_t)nth);
  j->piece_rows = p < 4 ? 4 : p;
  return (j->rows + j->piece_rows - 1) / j->piece_rows;
}

}  // namespace

extern "C" int mt_pool_quantize_rows(mt_pool* pool, int type, const float* x, int64_t rows, int64_t cols, void* out) {
  const size_t row_bytes = mt_row_bytes(type, cols);
  if (!mt_type_supported(type) || row_bytes == 0 || rows < 0) return -1;
  if (rows == 0) return 0;
  QuantJob j;
  j.type = type, j.x = x, j.rows = rows, j.cols = cols, j.out = (uint8_t*)out, j.row_bytes = row_bytes;
  mt_pool_for(pool, pieces_for(&j, mt_pool_threads(pool)), run_quant, &j);
  return j.failed.load() ? -2 : 0;
}

extern "C" int mt_pool_synth_uniform(mt_pool* pool, uint32_t state[4], double scale, int type, int64_t rows,
                                     int64_t cols, void* out) {
  const size_t row_bytes = mt_row_bytes(type, cols);
  if (!mt_type_supported(type) || row_bytes == 0 || rows < 0) return -1;
  if (rows == 0) return 0;
  const int64_t buffer_rows = cols >= kFillElems ? 1 : kFillElems / cols;
  std::vector<float> buffers[2];
  try {
    const int64_t first = rows < buffer_rows ? rows : buffer_rows;
    buffers[0].resize((size_t)(first * cols));
    if (rows > first) buffers[1].resize((size_t)(buffer_rows * cols));
  } catch (const std::bad_alloc&) {
    return -2;
  }
  int64_t r0 = 0, n0 = rows < buffer_rows ? rows : buffer_rows;
  fill_uniform(state, scale, buffers[0].data(), n0 * cols);
  for (int k = 0; r0 < rows; k ^= 1) {
    const int64_t next = r0 + n0;
    const int64_t n1 = rows - next < buffer_rows ? rows - next : buffer_rows;
    QuantJob j;
    j.type = type, j.x = buffers[k].data(), j.rows = n0, j.cols = cols, j.out = (uint8_t*)out + (size_t)r0 * row_bytes;
    j.row_bytes = row_bytes;
    j.state = state, j.scale = scale, j.fill_dst = n1 > 0 ? buffers[k ^ 1].data() : nullptr,
    j.fill_rows = n1 > 0 ? n1 : 0;
    mt_pool_for(pool, pieces_for(&j, mt_pool_threads(pool)) + (j.fill_rows > 0 ? 1 : 0), run_quant, &j);
    if (j.failed.load()) return -2;
    r0 = next, n0 = n1;
  }
  return 0;
}
