// JS arguments of createModel / createContext read into the C structs of mt_forward.h.
#include <cmath>
#include <utility>
#include "model_napi.h"

namespace {

bool ReadNumber(Napi::Object o, const char* key, double* out, std::string* err) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) return *err = std::string(key) + ": expected a number", false;
  *out = v.As<Napi::Number>().DoubleValue();
  return true;
}

bool ReadBool(Napi::Object o, const char* key, int32_t* out, std::string* err) {
  Napi::Value v = o.Get(key);
  if (!v.IsBoolean()) return *err = std::string(key) + ": expected a boolean", false;
  *out = v.As<Napi::Boolean>().Value() ? 1 : 0;
  return true;
}

// One of `choices` (index into it).
bool ReadChoice(Napi::Object o, const char* key, std::initializer_list<const char*> choices, int32_t* out,
                std::string* err) {
  Napi::Value v = o.Get(key);
  std::string got = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  int32_t i = 0;
  std::string names;
  for (const char* c : choices) {
    if (got == c) return *out = i, true;
    names += (i++ ? " | " : "") + std::string("'") + c + "'";
  }
  return *err = std::string(key) + ": expected " + names, false;
}

}  // namespace

bool ReadInt(Napi::Object o, const char* key, int32_t* out, std::string* err) {
  double d = 0;
  if (!ReadNumber(o, key, &d, err)) return false;
  if (!(d == std::floor(d) && d >= -2147483648.0 && d <= 2147483647.0))
    return *err = std::string(key) + ": expected an integer (got " + std::to_string(d) + ")", false;
  *out = int32_t(d);
  return true;
}

// gpt-oss's optional HParams (absent: the other archs' layer).
static bool ReadGptOss(Napi::Object o, mt_hparams* hp, std::string* err) {
  const std::pair<const char*, int32_t*> flags[] = {{"attnOutBias", &hp->attn_out_bias},
                                                    {"attnSinks", &hp->attn_sinks},
                                                    {"routerBias", &hp->router_bias},
                                                    {"expertFfnBias", &hp->expert_ffn_bias}};
  for (const auto& [key, out] : flags)
    if (!o.Get(key).IsUndefined() && !ReadBool(o, key, out, err)) return false;
  if (!o.Get("expertAct").IsUndefined() && !ReadChoice(o, "expertAct", {"silu", "swiglu_oai"}, &hp->expert_act, err))
    return false;
  Napi::Value swa = o.Get("slidingWindow");
  if (swa.IsUndefined()) return true;
  if (!swa.IsObject()) return *err = "slidingWindow: expected { window, period }", false;
  Napi::Object w = swa.As<Napi::Object>();
  return ReadInt(w, "window", &hp->sliding_window, err) && ReadInt(w, "period", &hp->swa_period, err);
}

// The optional routing fields of HParams (src/model/types.ts): absent, today's softmax top-k.
bool ReadRouting(Napi::Object o, mt_hparams* hp, std::string* err) {
  if (!o.Get("gating").IsUndefined() &&
      !ReadChoice(o, "gating", {"softmax", "sigmoid", "softmax_weight"}, &hp->gating, err))
    return false;
  if (!ReadGptOss(o, hp, err)) return false;
  if (!o.Get("expertBias").IsUndefined() && !ReadBool(o, "expertBias", &hp->expert_bias, err)) return false;
  if (!o.Get("expertWeightsScale").IsUndefined() &&
      !ReadNumber(o, "expertWeightsScale", &hp->expert_weights_scale, err))
    return false;
  if (!o.Get("ffnNorm").IsUndefined() &&
      !ReadChoice(o, "ffnNorm", {"ffn_norm", "post_attention_norm"}, &hp->ffn_norm_post_attention, err))
    return false;
  if (!o.Get("sharedExpertGate").IsUndefined()) {
    int32_t gated = 1;
    if (!ReadBool(o, "sharedExpertGate", &gated, err)) return false;
    hp->shared_expert_ungated = gated ? 0 : 1;
  }
  Napi::Value groups = o.Get("expertGroups");
  if (groups.IsUndefined()) return true;
  if (!groups.IsObject()) return *err = "expertGroups: expected { count, used }", false;
  Napi::Object g = groups.As<Napi::Object>();
  return ReadInt(g, "count", &hp->expert_groups, err) && ReadInt(g, "used", &hp->expert_groups_used, err);
}

bool ReadHParams(Napi::Value v, mt_hparams* hp, std::string* err) {
  if (!v.IsObject()) return *err = "hparams: expected an object", false;
  Napi::Object o = v.As<Napi::Object>();
  bool ok = ReadInt(o, "nLayer", &hp->n_layer, err) && ReadInt(o, "nEmbd", &hp->n_embd, err) &&
            ReadInt(o, "nHead", &hp->n_head, err) && ReadInt(o, "nHeadKv", &hp->n_head_kv, err) &&
            ReadInt(o, "headDim", &hp->head_dim, err) && ReadInt(o, "nVocab", &hp->n_vocab, err) &&
            ReadInt(o, "nExpert", &hp->n_expert, err) && ReadInt(o, "nExpertUsed", &hp->n_expert_used, err) &&
            ReadInt(o, "nFfExp", &hp->n_ff_exp, err) && ReadInt(o, "nFfShexp", &hp->n_ff_shexp, err) &&
            ReadNumber(o, "rmsEps", &hp->rms_eps, err) && ReadNumber(o, "ropeBase", &hp->rope_base, err) &&
            ReadChoice(o, "ropeType", {"norm", "neox"}, &hp->rope_neox, err) &&
            ReadChoice(o, "qkNorm", {"none", "head", "full"}, &hp->qk_norm, err) &&
            ReadBool(o, "normTopK", &hp->norm_top_k, err) && ReadBool(o, "attnBias", &hp->attn_bias, err) &&
            ReadBool(o, "sharedExpert", &hp->shared_expert, err) && ReadBool(o, "tiedOutput", &hp->tied_output, err);
  if (ok) ok = ReadRouting(o, hp, err);
  // Leading dense layers (optional; absent: every layer MoE).
  if (ok && !o.Get("denseLayers").IsUndefined()) {
    Napi::Value d = o.Get("denseLayers");
    if (!d.IsObject()) return *err = "hparams.denseLayers: expected { count, nFf }", false;
    Napi::Object dense = d.As<Napi::Object>();
    ok = ReadInt(dense, "count", &hp->n_layer_dense_lead, err) && ReadInt(dense, "nFf", &hp->n_ff, err);
    if (!ok) *err = "denseLayers." + *err;
  }
  // Multi-head latent attention (deepseek2; optional) and the scores' scale.
  if (ok && !o.Get("mla").IsUndefined()) {
    Napi::Value v = o.Get("mla");
    if (!v.IsObject()) return *err = "hparams.mla: expected { qLora, kvLora, nope, vHead }", false;
    Napi::Object mla = v.As<Napi::Object>();
    ok = ReadInt(mla, "qLora", &hp->mla_q_lora, err) && ReadInt(mla, "kvLora", &hp->mla_kv_lora, err) &&
         ReadInt(mla, "nope", &hp->mla_nope, err) && ReadInt(mla, "vHead", &hp->mla_v_head, err);
    if (!ok) *err = "mla." + *err;
  }
  if (ok && !o.Get("attnScale").IsUndefined()) ok = ReadNumber(o, "attnScale", &hp->attn_scale, err);
  if (!ok) *err = "hparams." + *err;
  return ok;
}

bool ReadRope(Napi::Object desc, const Napi::Object& hparams, mt_hparams* hp, std::vector<double>* inv_freq,
              std::string* err) {
  Napi::Value v = desc.Get("rope");
  if (v.IsUndefined()) {
    // The plain rotation; a scaled or partial one without its table would run wrong, silently.
    for (const char* key : {"ropeDims", "ropeScaling"})
      if (!hparams.Get(key).IsUndefined())
        return *err =
                   std::string("rope: expected the rotation table (src/model/rope.ts ropeTable) beside hparams.") + key,
               false;
    return true;
  }
  if (!v.IsObject()) return *err = "rope: expected { dims, invFreq, magnitude }", false;
  Napi::Object o = v.As<Napi::Object>();
  if (!ReadInt(o, "dims", &hp->rope_dims, err) || !ReadNumber(o, "magnitude", &hp->rope_magnitude, err))
    return *err = "rope." + *err, false;
  Napi::Value f = o.Get("invFreq");
  if (!f.IsTypedArray() || f.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    return *err = "rope.invFreq: expected a Float64Array", false;
  Napi::Float64Array a = f.As<Napi::Float64Array>();
  if (hp->rope_dims < 2 || a.ElementLength() != size_t(hp->rope_dims / 2))
    return *err = "rope.invFreq: expected dims / 2 numbers", false;
  inv_freq->assign(a.Data(), a.Data() + a.ElementLength());
  hp->rope_inv_freq = inv_freq->data();
  return true;
}

bool ReadTensors(Napi::Value v, std::vector<std::string>* names, std::vector<mt_tensor_desc>* out, std::string* err) {
  if (!v.IsArray()) return *err = "tensors: expected an array", false;
  Napi::Array a = v.As<Napi::Array>();
  names->resize(a.Length());
  out->resize(a.Length());
  for (uint32_t i = 0; i < a.Length(); i++) {
    const std::string at = "tensors[" + std::to_string(i) + "]";
    Napi::Value e = a.Get(i);
    if (!e.IsObject()) return *err = at + ": expected { name, typeId, dims, offset }", false;
    Napi::Object t = e.As<Napi::Object>();
    if (!t.Get("name").IsString()) return *err = at + ".name: expected a string", false;
    (*names)[i] = t.Get("name").As<Napi::String>().Utf8Value();
    mt_tensor_desc& d = (*out)[i];
    d.name = (*names)[i].c_str();
    const std::string where = at + " (" + (*names)[i] + ")";
    double offset = 0;
    if (!ReadInt(t, "typeId", &d.type, err) || !ReadNumber(t, "offset", &offset, err))
      return *err = where + "." + *err, false;
    if (!(offset >= 0 && offset <= 9007199254740991.0 && offset == std::floor(offset)))
      return *err = where + ".offset: expected an integer >= 0", false;
    d.offset = uint64_t(offset);
    Napi::Value dims = t.Get("dims");
    if (!dims.IsArray() || dims.As<Napi::Array>().Length() < 1 || dims.As<Napi::Array>().Length() > 4)
      return *err = where + ".dims: expected an array of 1 to 4 sizes", false;
    Napi::Array da = dims.As<Napi::Array>();
    d.n_dims = int32_t(da.Length());
    for (uint32_t j = 0; j < da.Length(); j++) {
      Napi::Value x = da.Get(j);
      const double n = x.IsNumber() ? x.As<Napi::Number>().DoubleValue() : -1;
      if (!(n >= 1 && n <= 2147483647.0 && n == std::floor(n)))
        return *err = where + ".dims: expected integers >= 1", false;
      d.dims[j] = int64_t(n);
    }
  }
  return true;
}
