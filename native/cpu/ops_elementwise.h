// The elementwise ops of the forward pass (docs/FORWARD.md), on f32 rows.
// Matrix products are not here: they go through mt_kernels.h.
// The ops the addon exports to tests (`forwardOps`) are declared in include/mt_ops.h; the rest
// are the forward pass's own.
#pragma once
#include <cstdint>
#include "mt_ops.h"  // the ops the addon reaches too

namespace mt {

float sigmoid(float z);

float dot(const float* a, const float* b, int64_t n);
// y [n] += a * x
void axpy(float a, const float* x, float* y, int64_t n);

// One query head over n_kv cached positions (causal masking is the caller's n_kv):
//   s_j = q . k_j * scale; a = softmax(s [, sink]); out = sum_j a_j v_j
// q, out [head_dim]; k_j = k + j * kv_stride (same for v); scores [n_kv] is scratch; sink: a logit
// in the softmax's max and denominator that carries no value (gpt-oss), or null.
void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_kv, int32_t head_dim,
                    float scale, float* scores, float* out, const float* sink = nullptr);

}  // namespace mt
