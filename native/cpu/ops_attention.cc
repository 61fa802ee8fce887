// Attention of one query head over a KV cache (see ops_elementwise.h for the shapes).
#include <cmath>
#include "ops_elementwise.h"

namespace mt {

void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_kv, int32_t head_dim,
                    float scale, float* scores, float* out, const float* sink) {
  float max = sink != nullptr ? *sink : -INFINITY;
  for (int32_t j = 0; j < n_kv; j++) {
    const float s = dot(q, k + j * kv_stride, head_dim) * scale;
    scores[j] = s;
    max = s > max ? s : max;
  }
  double sum = sink != nullptr ? std::exp(*sink - max) : 0.0;
  for (int32_t j = 0; j < n_kv; j++) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  const float inv = float(1.0 / sum);
  for (int32_t d = 0; d < head_dim; d++) out[d] = 0.0f;
  for (int32_t j = 0; j < n_kv; j++) axpy(scores[j] * inv, v + j * kv_stride, out, head_dim);
}

void attention_heads(const float* q, const float* k_cache, const float* v_cache, int32_t n_head, int32_t n_head_kv,
                     int32_t head_dim, int32_t n_kv, int32_t h0, int32_t h1, float scale_or_0, float* scores,
                     float* out, const float* sinks) {
  const int64_t kv_dim = int64_t(n_head_kv) * head_dim, group = n_head / n_head_kv;
  const float scale = scale_or_0 != 0.0f ? scale_or_0 : float(1.0 / std::sqrt(double(head_dim)));
  for (int32_t h = h0; h < h1; h++) {
    const int64_t kv_off = (h / group) * head_dim;
    attention_head(q + int64_t(h) * head_dim, k_cache + kv_off, v_cache + kv_off, kv_dim, n_kv, head_dim, scale, scores,
                   out + int64_t(h) * head_dim, sinks != nullptr ? sinks + h : nullptr);
  }
}

}  // namespace mt
