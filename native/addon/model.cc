// Model, context and eval verbs (filled in with the forward pass).
#include "registry.h"
void RegisterModel(Napi::Env, Napi::Object) {}
