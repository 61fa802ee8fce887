// Shared by the quantiser files only (not part of the C ABI): quantize.cc, quantize_kquant.cc,
// quantize_mxfp4.cc and the AVX2 / AVX-512 searches (kernels_avx2_quantize.cc, kernels_avx512_quantize.cc).
#pragma once
#include <stdint.h>

// The k-quant scale searches over a run of nsub sub-blocks (quantize_kquant_lanes.h): what differs
// by instruction set (the lane count), never the bytes.
//   scale_min32: make_qkx2_quants (squared error) on sub-blocks of 32, x and weights w [nsub, 32];
//                levels L [nsub, 32], scales and -mins [nsub].
//   symmetric16: make_qx_quants (rmse_type 1) on sub-blocks of 16, x [nsub, 16]; levels + nmax
//                L [nsub, 16], scales [nsub].
typedef struct {
  void (*scale_min32)(const float* x, const float* w, int64_t nsub, int nmax, float rmin, float rdelta, int nstep,
                      uint8_t* L, float* scales, float* min_negs);
  void (*symmetric16)(const float* x, int64_t nsub, int nmax, uint8_t* L, float* scales);
} mt_kquant_searches;

extern const mt_kquant_searches mt_kquant_searches_scalar;
#if (defined(__x86_64__) || defined(__i386__)) && !defined(MT_NO_X86_SIMD)
extern const mt_kquant_searches mt_kquant_searches_avx2;
extern const mt_kquant_searches mt_kquant_searches_avx512;
#endif

// A row's working memory for the k-quants: weights [cols], levels [cols], scales and mins [cols / 16].
typedef struct {
  float* weights;
  uint8_t* levels;
  float* scales;
  float* mins;
} mt_kquant_scratch;

// One row of `cols` (a multiple of 256) elements to Q2_K..Q6_K, as src/model/quant-k.ts writes it.
void mt_quantize_row_kquant(const mt_kquant_searches* searches, int type, const float* x, int64_t cols, uint8_t* out,
                            mt_kquant_scratch* scratch);

// One 32-element block to MXFP4 (17 bytes), as src/model/quant-mxfp4.ts writes it.
void mt_quantize_block_mxfp4(const float* x, uint8_t* out);
