// SPDX-License-Identifier: MIT
// kernels: the CPU compute dispatch table (one entry per weight type and per ISA), and the
// threaded matrix-times-activations routine built on it. The table starts with the reference
// functions from src/quant and is overwritten by AVX2 then AVX-512 variants when the CPU has
// them (or up to the ISA pinned by GLINT_ISA=ref|avx2|avx512). Read-only after init.
#pragma once

#include "quant/quant.h"

#include <stdint.h>

// *s = dot(weight row x (weight type), activation row y (its vec_dot type)), n elements.
typedef void (*gl_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);
// Quantize n floats into a row of the given (activation) type.
typedef void (*gl_from_float_fn)(const float *x, void *y, int64_t n);
// Dequantize n elements of a row into floats.
typedef void (*gl_to_float_fn)(const void *x, float *y, int64_t n);
// Optional, for prefill: s[i * s_stride] = dot(weight row x, activation row y + i * y_stride)
// for i < 4, each bit-identical to the same table's vec_dot on that pair (the weight row is
// unpacked once for four activation rows). NULL where an ISA has none; gl_matmul then uses vec_dot.
typedef void (*gl_vec_dot4_fn)(int64_t n, float *s, int64_t s_stride, const void *x, const void *y,
                               size_t y_stride);
// The r16 layouts (quant.h): out[t * out_stride + r] = dot(row r of the 16-row group w, activation
// row t) for r < 16, t < n_tok (1..GL_R16_MAX_TOK), bit-identical to gl_gemm_r16_ref, so a
// token's result does not depend on which or how many tokens share its call.
#define GL_R16_MAX_TOK 8
typedef void (*gl_gemm_r16_fn)(int64_t n_in, const void *w, const void *act, size_t act_stride,
                               int n_tok, float *out, int64_t out_stride);

// Attention over one tile of GL_ATTN_TILE consecutive keys, flash-style (online softmax), for
// n_rows query rows of one token (the query heads sharing a kv head). KT is the tile's keys
// transposed, KT[d * GL_ATTN_TILE + k] (D x 16 f32); V its values, V[k * D + d]. Keys k in
// [klo, khi) are visible (0 <= klo < khi <= 16); the others get exactly zero weight. Row r: q
// at q + r * D, running max m[r], sum l[r] and unnormalised output O + r * D (start at -inf, 0,
// 0). Per row: s_k = (sum over d ascending of fmaf(q_d, K_kd)) * scale; m' = max(m, s_k);
// c = expf(m - m'); p_k = expf(s_k - m'); l = l * c + p_k (k ascending); O_d = O_d * c, then
// O_d = fmaf(p_k, V_kd, O_d) for k ascending. Every ISA's entry does exactly these operations,
// so results are bit-identical across ISAs and independent of which rows share a call.
// D is a multiple of 16.
#define GL_ATTN_TILE 16
typedef void (*gl_attn_tile_fn)(int D, int n_rows, const float *q, const float *KT, const float *V,
                                int klo, int khi, float scale, float *m, float *l, float *O);

struct gl_kernels {
    const char *isa;                            // "ref", "avx2", "avx512"
    gl_vec_dot_fn vec_dot[GL_TYPE_COUNT];       // indexed by weight type
    gl_from_float_fn from_float[GL_TYPE_COUNT]; // indexed by activation type
    gl_to_float_fn to_float[GL_TYPE_COUNT];     // indexed by weight type
    gl_vec_dot4_fn vec_dot4[GL_TYPE_COUNT];     // indexed by weight type; entries may be NULL
    // Indexed by the source weight type (Q4_K, Q6_K); NULL where this ISA has no r16 kernel
    // (the model then keeps the row layout).
    gl_gemm_r16_fn gemm_r16[GL_TYPE_COUNT];
    gl_attn_tile_fn attn_tile;
};

// The process-wide table, initialised on first call (thread-safe), honouring GLINT_ISA.
const struct gl_kernels *gl_kernels_get(void);
// Fills k for a specific ISA name ("ref", "avx2", "avx512"); returns 0 if the CPU lacks it or the
// name is unknown. Used by tests to hold every variant to the reference.
int gl_kernels_init_isa(struct gl_kernels *k, const char *isa);

// ---- thread pool ----
// A fixed pool of worker threads with a spin-then-sleep barrier; run() executes fn on every
// thread (ith = 0..nth-1, the caller being thread 0) and returns when all are done.
struct gl_pool;
struct gl_pool *gl_pool_new(int n_threads); // NULL on failure
void gl_pool_delete(struct gl_pool *p);
int gl_pool_size(const struct gl_pool *p);
typedef void (*gl_pool_fn)(void *ctx, int ith, int nth);
void gl_pool_run(struct gl_pool *p, gl_pool_fn fn, void *ctx);
// Pins worker ith (1..nth-1) to cpus[ith] (the caller, thread 0, pins itself: cpus[0]), so the
// OS does not move threads between cores mid-step or stack two on one core. Workers with ith >= n
// and ids < 0 are left unpinned. Returns the number pinned (the first refusal is logged).
int gl_pool_pin(struct gl_pool *p, const int32_t *cpus, int n);

// ---- matmul ----
// out[t][r] = dot(W row r, act row t) for r < n_rows, t < n_tok.
// W: n_rows rows of n_in elements of type wtype, row stride gl_type_row_size(wtype, n_in).
// act: n_tok rows already converted to gl_type_vec_dot_type(wtype), stride act_stride bytes.
// out: n_tok x out_stride floats. Rows are split across the pool's threads; tokens are tiled so
// each weight block is read once per tile of tokens (prefill is compute-bound, decode is
// bandwidth-bound).
void gl_matmul(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type wtype, const void *W,
               int64_t n_rows, int64_t n_in, const void *act, size_t act_stride, int64_t n_tok,
               float *out, int64_t out_stride);

// Converts n_tok rows of n_in floats (row stride n_in) to vdt, a vec_dot activation type
// (gl_type_vec_dot_type), into dst rows stride bytes apart: the activations gl_matmul takes.
// Rows are split over the pool's threads when n_tok > 1.
void gl_quantize_rows(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type vdt,
                      const float *x, int64_t n_tok, int64_t n_in, void *dst, size_t stride);

// Same product for a weight repacked by gl_repack_r16 (n_rows a multiple of 16, k->gemm_r16[wtype]
// set): groups of 16 rows are split across the threads, tokens tiled as above.
void gl_matmul_r16(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type wtype,
                   const void *W, int64_t n_rows, int64_t n_in, const void *act, size_t act_stride,
                   int64_t n_tok, float *out, int64_t out_stride);
// The rows of the listed 16-row groups only (rows 16 g .. 16 g + 15 for each g of groups,
// ascending and distinct), either layout (r16: repacked by gl_repack_r16). Each computed element
// is bit-identical to the full product's; other rows of out are left as they were. For the
// output head under a grammar mask, whose allowed tokens may touch few groups.
void gl_matmul_groups(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type wtype, int r16,
                      const void *W, int64_t n_rows, int64_t n_in, const void *act,
                      size_t act_stride, int64_t n_tok, float *out, int64_t out_stride,
                      const int32_t *groups, int64_t n_groups);
