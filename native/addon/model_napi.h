// Helpers of model.cc (the model / context / eval verbs), split out to keep files small:
// model_args.cc reads JS arguments into the C structs of mt_forward.h, model_ops.cc
// exposes the forward pass's elementwise ops to tests.
#pragma once
#include <string>
#include <vector>
#include "mt_forward.h"
#include "registry.h"

// hparams (src/model/types.ts HParams) -> mt_hparams; false with a message naming the field.
bool ReadHParams(Napi::Value v, mt_hparams* hp, std::string* err);
// [{ name, typeId, dims, offset }] -> descs whose names point into `names`.
bool ReadTensors(Napi::Value v, std::vector<std::string>* names, std::vector<mt_tensor_desc>* out, std::string* err);
// An integer field of an object, within int32.
bool ReadInt(Napi::Object o, const char* key, int32_t* out, std::string* err);

// The `forwardOps` object: rmsNorm, rope, softmax, swiglu, topK, attention.
Napi::Object ForwardOps(Napi::Env env);
