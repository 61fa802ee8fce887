// A typed-array argument's data and length, shared by the addon's verbs.
#pragma once
#include <napi.h>

template <class T>
bool TypedArg(Napi::Value v, napi_typedarray_type type, T** data, size_t* length) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) return false;
  void* p = nullptr;
  napi_typedarray_type t;
  napi_get_typedarray_info(v.Env(), v, &t, length, &p, nullptr, nullptr);
  *data = static_cast<T*>(p);
  return true;
}
