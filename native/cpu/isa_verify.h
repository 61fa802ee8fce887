// The self-check a SIMD path passes before isa.cc dispatches to it (see isa_verify.cc).
#pragma once
#include <stdint.h>

typedef void (*mt_matvec_rows_fn)(int, const void*, int64_t, const void*, float*, int64_t, int64_t);
typedef void (*mt_matmul_rows_fn)(int, const void*, int64_t, const void*, int64_t, float*, int64_t, int64_t, int64_t);
typedef void (*mt_act_prepare_fn)(int, const float*, int64_t, void*);

int mt_isa_verify_path(mt_matvec_rows_fn matvec, mt_matmul_rows_fn matmul, mt_act_prepare_fn prepare, int inject_error);
