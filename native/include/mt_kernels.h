/*
 * moetier CPU kernels: the C ABI between the forward pass and the matrix code.
 *
 * Weights stay in their container type (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K..Q6_K,
 * IQ4_XS; type ids and block layouts as in GGML).
 * A weight matrix W [rows, cols] is `rows` rows of `cols` elements, each row
 * mt_row_bytes(type, cols) bytes, rows contiguous (ggml order: dims = [cols, rows]).
 *
 * Activations are prepared once per op (quantised to 8-bit blocks for the integer dot
 * products: 32-element blocks for Q8_0 / Q4_0 / Q5_0 / Q5_1 / IQ4_NL / MXFP4, 256-element Q8_K blocks for the
 * k-quants and IQ4_XS)
 * and then read by every thread.
 * Row-range entry points let the caller split rows across its thread pool.
 */
#ifndef MT_KERNELS_H
#define MT_KERNELS_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum mt_type {
  MT_F32 = 0,
  MT_F16 = 1,
  MT_Q4_0 = 2,
  MT_Q5_0 = 6,
  MT_Q5_1 = 7,
  MT_Q8_0 = 8,
  MT_Q2_K = 10,
  MT_Q3_K = 11,
  MT_Q4_K = 12,
  MT_Q5_K = 13,
  MT_Q6_K = 14,   /* 256-element super-blocks */
  MT_IQ4_NL = 20, /* 32-element blocks of 4-bit indices into a non-linear table */
  MT_IQ4_XS = 23, /* 256-element super-blocks of the same table, 6-bit sub-block scales */
  MT_BF16 = 30,
  MT_MXFP4 = 39 /* 32-element blocks: an E8M0 exponent and 4-bit E2M1 codes (gpt-oss's experts) */
};

/* Instruction-set paths, chosen at run time; every path computes the same op. */
enum mt_isa { MT_ISA_SCALAR = 0, MT_ISA_AVX2 = 1, MT_ISA_AVX512VNNI = 2 };
int mt_isa_best(void);     /* the best path this CPU supports that passed its self-check against scalar */
int mt_isa_detected(void); /* the best path the CPU reports, verified or not */
/* Run a path's self-check: 1 agrees with scalar, 0 disagrees, -1 the CPU lacks the path.
 * inject_error perturbs the reference, so tests can show the check notices a difference. */
int mt_isa_verify(int isa, int inject_error);
int mt_isa_active(void); /* the path in use */
int mt_isa_set(int isa); /* force a path (tests, benches); returns 0, or -1 if the CPU lacks it */
const char* mt_isa_name(int isa);

int mt_type_supported(int type);
size_t mt_row_bytes(int type, int64_t cols);

/* Bytes needed to hold one prepared activation row of `cols` elements for weights of `wtype`. */
size_t mt_act_row_bytes(int wtype, int64_t cols);
/* Prepare one activation row x [cols] for weights of `wtype` into act (mt_act_row_bytes bytes). */
void mt_act_prepare(int wtype, const float* x, int64_t cols, void* act);

/* y[r] = W[r, :] . x for r in [r0, r1). act: one prepared row. */
void mt_matvec_rows(int wtype, const void* W, int64_t cols, const void* act, float* y, int64_t r0, int64_t r1);

/* Y[i, r] = W[r, :] . X[i, :] for i in [0, n), r in [r0, r1); acts: n prepared rows back to back,
 * Y row-major with row stride ldy floats. Streams each weight row once for all n rows. */
void mt_matmul_rows(int wtype, const void* W, int64_t cols, const void* acts, int64_t n, float* Y, int64_t ldy,
                    int64_t r0, int64_t r1);

/* Dequantise one row to f32 (embedding lookup, tests). */
void mt_dequant_row(int type, const void* row, int64_t cols, float* out);

/* Quantise rows x [rows, cols] of finite floats into out (rows * mt_row_bytes(type, cols) bytes):
 * ggml's reference quantisers (quantize_row_*_ref, no importance matrix; IQ4_NL / IQ4_XS / MXFP4: moetier's
 * own encoders, src/model/quant-iq4.ts, quant-mxfp4.ts), the same bytes as src/model/quant.ts writes. Returns 0, -1 for
 * an unsupported type or a partial block, -2 when
 * its scratch (k-quants: 6 bytes per column) cannot be allocated. */
int mt_quantize_rows(int type, const float* x, int64_t rows, int64_t cols, void* out);

/* A pool of compute threads. The caller is thread 0; the others spin briefly between
 * jobs before sleeping, so back-to-back ops inside one token do not pay a wake-up. */
typedef struct mt_pool mt_pool;
mt_pool* mt_pool_create(int n_threads);
void mt_pool_destroy(mt_pool* pool);
int mt_pool_threads(const mt_pool* pool);
/* Run fn(arg, ith, nth) on every thread (ith in [0, nth)) and return when all are done. */
void mt_pool_run(mt_pool* pool, void (*fn)(void* arg, int ith, int nth), void* arg);

#ifdef __cplusplus
}
#endif
#endif
