// Norms, RoPE, softmax, SwiGLU, top-k and the small vector helpers (see ops_elementwise.h).
// Loops keep 8 independent accumulators so the compiler can vectorise them without -ffast-math.
// dot and axpy (attention's inner loops) are also built for x86-64-v3 (AVX2 + FMA), chosen
// at load time; the baseline build stays for older CPUs.
#include "ops_elementwise.h"
#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#define MT_AVX2_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MT_AVX2_CLONES
#endif

namespace mt {

void rms_norm(const float* x, const float* w, int64_t n, double eps, float* out) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < n; i++) sum_squares += double(x[i]) * double(x[i]);
  const float scale = float(1.0 / std::sqrt(sum_squares / double(n) + eps));
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

void rope_table(const double* inv_freq, int32_t half, int64_t pos, double magnitude, float* cos_out, float* sin_out) {
  for (int32_t i = 0; i < half; i++) {
    const double theta = double(pos) * inv_freq[i];
    cos_out[i] = float(std::cos(theta) * magnitude);
    sin_out[i] = float(std::sin(theta) * magnitude);
  }
}

void rope_apply(float* v, int32_t n_heads, int32_t head_dim, int32_t rope_dims, const float* cos_t, const float* sin_t,
                bool neox) {
  const int32_t half = rope_dims / 2;
  for (int32_t h = 0; h < n_heads; h++) {
    float* x = v + int64_t(h) * head_dim;
    for (int32_t i = 0; i < half; i++) {
      const int32_t ia = neox ? i : 2 * i;
      const int32_t ib = neox ? i + half : 2 * i + 1;
      const float a = x[ia], b = x[ib];
      x[ia] = a * cos_t[i] - b * sin_t[i];
      x[ib] = a * sin_t[i] + b * cos_t[i];
    }
  }
}

void softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

void swiglu(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void swiglu_oai(float* g, const float* u, int64_t n) {
  constexpr float alpha = 1.702f, limit = 7.0f;  // llama.cpp's build_moe_ffn constants
  for (int64_t i = 0; i < n; i++) {
    const float x = std::fmin(g[i], limit), y = std::fmin(std::fmax(u[i], -limit), limit);
    g[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
  }
}

void top_k(const float* p, int32_t n, int32_t k, int32_t* ids) {
  // Insertion into a descending list of k: a later (higher) id goes after equal values.
  int32_t count = 0;
  for (int32_t e = 0; e < n; e++) {
    if (count == k && !(p[e] > p[ids[k - 1]])) continue;
    int32_t at = count < k ? count++ : k - 1;
    while (at > 0 && p[e] > p[ids[at - 1]]) {
      ids[at] = ids[at - 1];
      at--;
    }
    ids[at] = e;
  }
}

MT_AVX2_CLONES float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) sum += a[i] * b[i];
  return sum;
}

MT_AVX2_CLONES void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

}  // namespace mt
