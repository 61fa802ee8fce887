// The forward pass's elementwise ops (docs/FORWARD.md) on f32 rows that the addon hands to tests
// through its `forwardOps` object (native/addon/model_ops.cc); native/cpu/ops_elementwise.cc
// implements them, and native/cpu/ops_elementwise.h adds the ones only the kernels use.
#pragma once
#include <cstdint>

namespace mt {

// out [n] = x / sqrt(mean(x^2) + eps) * w; out may alias x. Sum of squares in f64.
void rms_norm(const float* x, const float* w, int64_t n, double eps, float* out);

// RoPE for one position: cos/sin [half] of theta_i = pos * invFreq[i], computed in f64, times magnitude.
void rope_table(const double* inv_freq, int32_t half, int64_t pos, double magnitude, float* cos_out, float* sin_out);
// Rotate the first rope_dims dims of n_heads heads of v [n_heads * head_dim] in place; neox pairs
// (i, i + rope_dims / 2), else (2i, 2i + 1); dims [rope_dims, head_dim) pass through.
void rope_apply(float* v, int32_t n_heads, int32_t head_dim, int32_t rope_dims, const float* cos_t, const float* sin_t,
                bool neox);

// In-place softmax over x [n] (max-subtracted, sum in f64).
void softmax(float* x, int64_t n);

// g [n] = silu(g) * u, silu(z) = z / (1 + e^-z).
void swiglu(float* g, const float* u, int64_t n);
// gpt-oss's clamped SwiGLU (ggml's swiglu_oai, alpha 1.702, limit 7): g [n] = x / (1 + e^(-1.702 x)) * (y + 1)
// with x = min(g, 7), y = clamp(u, -7, 7).
void swiglu_oai(float* g, const float* u, int64_t n);

// The k largest of p [n], descending; ties go to the lower index. ids [k]; k <= n.
void top_k(const float* p, int32_t n, int32_t k, int32_t* ids);

// Query heads [h0, h1) of one row with grouped KV heads: head h reads KV head h / (n_head / n_head_kv).
// q, out [n_head * head_dim]; the cache holds n_kv positions of kv_dim = n_head_kv * head_dim floats.
// sinks [n_head] (gpt-oss), or null: head h's sink logit joins its softmax's denominator, unscaled.
// scale: the scores' (0: 1 / sqrt(head_dim); MLA's is its query head's, not the cached row's).
void attention_heads(const float* q, const float* k_cache, const float* v_cache, int32_t n_head, int32_t n_head_kv,
                     int32_t head_dim, int32_t n_kv, int32_t h0, int32_t h1, float scale, float* scores, float* out,
                     const float* sinks = nullptr);

}  // namespace mt
