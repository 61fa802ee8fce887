// forwardOps: the forward pass's elementwise ops (native/include/mt_ops.h) on typed
// arrays, for tests that compare each op with a plain TypeScript version. Lengths are
// checked here so a wrong call is a TypeError, never an out-of-bounds write.
#include <cmath>
#include <vector>
#include "mt_ops.h"
#include "errors.h"
#include "model_napi.h"

namespace {

bool Floats(const Napi::Value& v, size_t at_least, float** data, size_t* length = nullptr) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) return false;
  Napi::Float32Array a = v.As<Napi::Float32Array>();
  if (a.ElementLength() < at_least) return false;
  *data = a.Data();
  if (length != nullptr) *length = a.ElementLength();
  return true;
}

int64_t Int(const Napi::Value& v) { return v.IsNumber() ? v.As<Napi::Number>().Int64Value() : -1; }

Napi::Value Usage(Napi::Env env, const char* usage) { return mtjs::ThrowTypeError(env, usage); }

// rmsNorm(x, w, eps, out)
Napi::Value RmsNorm(const Napi::CallbackInfo& info) {
  float *x, *w, *out;
  size_t n = 0;
  if (!Floats(info[0], 1, &x, &n) || !Floats(info[1], n, &w) || !info[2].IsNumber() || !Floats(info[3], n, &out))
    return Usage(info.Env(), "rmsNorm(x: Float32Array, w: Float32Array, eps: number, out: Float32Array)");
  mt::rms_norm(x, w, int64_t(n), info[2].As<Napi::Number>().DoubleValue(), out);
  return info.Env().Undefined();
}

// rope(v, nHeads, headDim, pos, base, neox): in place, as the forward pass does it.
Napi::Value Rope(const Napi::CallbackInfo& info) {
  float* v;
  const int64_t heads = Int(info[1]), dim = Int(info[2]), pos = Int(info[3]);
  if (heads < 1 || dim < 2 || dim % 2 != 0 || pos < 0 || !info[4].IsNumber() ||
      !Floats(info[0], size_t(heads * dim), &v))
    return Usage(info.Env(), "rope(v: Float32Array, nHeads, headDim (even), pos >= 0, base: number, neox: boolean)");
  const double base = info[4].As<Napi::Number>().DoubleValue();
  std::vector<double> inv_freq(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; i++) inv_freq[size_t(i)] = std::pow(base, -2.0 * double(i) / double(dim));
  std::vector<float> cos_t(size_t(dim / 2)), sin_t(size_t(dim / 2));
  mt::rope_table(inv_freq.data(), int32_t(dim / 2), pos, 1.0, cos_t.data(), sin_t.data());
  mt::rope_apply(v, int32_t(heads), int32_t(dim), int32_t(dim), cos_t.data(), sin_t.data(),
                 info[5].ToBoolean().Value());
  return info.Env().Undefined();
}

// softmax(x): in place.
Napi::Value Softmax(const Napi::CallbackInfo& info) {
  float* x;
  size_t n = 0;
  if (!Floats(info[0], 1, &x, &n)) return Usage(info.Env(), "softmax(x: Float32Array)");
  mt::softmax(x, int64_t(n));
  return info.Env().Undefined();
}

// swiglu(g, u): g = silu(g) * u.
Napi::Value Swiglu(const Napi::CallbackInfo& info) {
  float *g, *u;
  size_t n = 0;
  if (!Floats(info[0], 1, &g, &n) || !Floats(info[1], n, &u))
    return Usage(info.Env(), "swiglu(g: Float32Array, u: Float32Array)");
  mt::swiglu(g, u, int64_t(n));
  return info.Env().Undefined();
}

// swigluOai(g, u): g = gpt-oss's clamped SwiGLU of g and u (mt_ops.h swiglu_oai).
Napi::Value SwigluOai(const Napi::CallbackInfo& info) {
  float *g, *u;
  size_t n = 0;
  if (!Floats(info[0], 1, &g, &n) || !Floats(info[1], n, &u))
    return Usage(info.Env(), "swigluOai(g: Float32Array, u: Float32Array)");
  mt::swiglu_oai(g, u, int64_t(n));
  return info.Env().Undefined();
}

// topK(p, k) -> Int32Array of k ids, descending, ties to the lower id.
Napi::Value TopK(const Napi::CallbackInfo& info) {
  float* p;
  size_t n = 0;
  const int64_t k = Int(info[1]);
  if (!Floats(info[0], 1, &p, &n) || k < 1 || size_t(k) > n)
    return Usage(info.Env(), "topK(p: Float32Array, k in [1, p.length])");
  Napi::Int32Array ids = Napi::Int32Array::New(info.Env(), size_t(k));
  mt::top_k(p, int32_t(n), int32_t(k), ids.Data());
  return ids;
}

// attention(q, keys, values, nHead, nHeadKv, headDim, nKv, out): one row over nKv cached positions.
Napi::Value Attention(const Napi::CallbackInfo& info) {
  const int64_t heads = Int(info[3]), kv_heads = Int(info[4]), dim = Int(info[5]), n_kv = Int(info[6]);
  float *q, *k, *v, *out;
  const bool shape = heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0 && dim >= 1 && n_kv >= 1;
  if (!shape || !Floats(info[0], size_t(heads * dim), &q) || !Floats(info[1], size_t(n_kv * kv_heads * dim), &k) ||
      !Floats(info[2], size_t(n_kv * kv_heads * dim), &v) || !Floats(info[7], size_t(heads * dim), &out))
    return Usage(
        info.Env(),
        "attention(q [nHead*hd], keys [nKv*nHeadKv*hd], values, nHead, nHeadKv, headDim, nKv, out [nHead*hd])");
  std::vector<float> scores(static_cast<size_t>(n_kv));
  mt::attention_heads(q, k, v, int32_t(heads), int32_t(kv_heads), int32_t(dim), int32_t(n_kv), 0, int32_t(heads), 0.0f,
                      scores.data(), out);
  return info.Env().Undefined();
}

}  // namespace

Napi::Object ForwardOps(Napi::Env env) {
  Napi::Object ops = Napi::Object::New(env);
  ops.Set("rmsNorm", Napi::Function::New(env, RmsNorm));
  ops.Set("rope", Napi::Function::New(env, Rope));
  ops.Set("softmax", Napi::Function::New(env, Softmax));
  ops.Set("swiglu", Napi::Function::New(env, Swiglu));
  ops.Set("swigluOai", Napi::Function::New(env, SwigluOai));
  ops.Set("topK", Napi::Function::New(env, TopK));
  ops.Set("attention", Napi::Function::New(env, Attention));
  return ops;
}
