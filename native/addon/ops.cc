// Kernel verbs for tests and benchmarks (filled in with the kernels).
#include "registry.h"
void RegisterOps(Napi::Env, Napi::Object) {}
