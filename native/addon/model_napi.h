// Helpers of model.cc (the model / context / eval verbs), split out to keep files small:
// model_args.cc reads JS arguments into the C structs of mt_forward.h, model_ops.cc
// exposes the forward pass's elementwise ops to tests.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "mt_forward.h"
#include "mt_tier.h"
#include "registry.h"

struct TierState;  // tier.cc: an expert tier attached to a context

// Type tags of the handles that are not mapped files (createModel refuses them as a file).
constexpr napi_type_tag kTierTag = {0x6d6f6574696572ULL, 0x54494552ULL};
constexpr napi_type_tag kBackendTagOfModel = {0x6d6f6574696572ULL, 0x4241434b454e44ULL};  // = backend.cc's kBackendTag

struct ModelState {
  mt_model* model = nullptr;
  MappedFile* file = nullptr;
  Napi::Reference<Napi::Value> file_ref;  // keeps the mapping's handle (and so the mapping) alive
  int contexts = 0;
  ~ModelState() {
    mt_model_free(model);
    if (file != nullptr) file->users--;
  }
};

struct ContextState {
  std::shared_ptr<ModelState> model;
  mt_context* ctx = nullptr;
  bool busy = false;                // an eval runs (JS thread only)
  std::shared_ptr<TierState> tier;  // attached by createTier, detached by freeTier
  ~ContextState() {
    mt_context_free(ctx);
    if (ctx != nullptr) model->contexts--;
  }
};

// The state behind a model / context handle; null with a JS exception pending otherwise.
std::shared_ptr<ModelState> UnwrapModel(Napi::Env env, Napi::Value v);
std::shared_ptr<ContextState> UnwrapContext(Napi::Env env, Napi::Value v);
// tier.cc: the native tier of an attached TierState (null once freed).
mt_tier* TierOf(const TierState& s);

// hparams (src/model/types.ts HParams) -> mt_hparams; false with a message naming the field.
bool ReadHParams(Napi::Value v, mt_hparams* hp, std::string* err);
// desc.rope ({ dims, invFreq: Float64Array, magnitude }: src/model/rope.ts) into hp, its table held in
// inv_freq; absent: the plain rotation, refused when hparams carry ropeDims or ropeScaling.
bool ReadRope(Napi::Object desc, const Napi::Object& hparams, mt_hparams* hp, std::vector<double>* inv_freq,
              std::string* err);
// [{ name, typeId, dims, offset }] -> descs whose names point into `names`.
bool ReadTensors(Napi::Value v, std::vector<std::string>* names, std::vector<mt_tensor_desc>* out, std::string* err);
// An integer field of an object, within int32.
bool ReadInt(Napi::Object o, const char* key, int32_t* out, std::string* err);

// The `forwardOps` object: rmsNorm, rope, softmax, swiglu, topK, attention.
Napi::Object ForwardOps(Napi::Env env);
