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

// Attention of n_q query rows over n_k keys, all visible, normalised (the vision encoder's windows
// and full layers: non-causal runs of 1k-4k keys): out_r = sum_k p_rk v_k / sum_k p_rk with
// p_rk = exp(s_rk - max_k s_rk), s_rk = scale * (q_r . k_k). q, k, v, out are rows of D floats
// at their strides (in floats). Keys go in chunks of GL_ATTN_CHUNK with an online softmax; the
// scores of a chunk are a register tile, so exp and the running max and sum are vector work per
// 16 keys, not per key (attn_tile's per-key scalar expf is the cost at these lengths). scratch:
// gl_attn_rows_scratch(D, n_q) floats. Not bit-identical across ISAs (the AVX-512 exp is a
// polynomial within 2 ulp of expf, and its sums run in lanes): every entry is within a few f32
// ulps per term of the exact value (test_kernels holds the two to a float64 reference).
// 16 <= D <= 256, D a multiple of 16.
#define GL_ATTN_CHUNK 64
typedef void (*gl_attn_rows_fn)(int D, int n_q, const float *q, int64_t q_stride, int n_k,
                                const float *k, int64_t k_stride, const float *v, int64_t v_stride,
                                float scale, float *out, int64_t out_stride, float *scratch);
int64_t gl_attn_rows_scratch(int D, int n_q); // floats

// BF16 weights x activations in token lanes (the vision encoder's matmuls, M = 1k-4k tokens):
// activations are packed by gl_pack_bf16 into groups of GL_BF16_GROUP tokens, each group
// [n_in / 2 pairs][16 tokens][2] bf16, so one zmm holds one k-pair of 16 tokens and vdpbf16ps
// with a broadcast weight pair (two consecutive bf16 of a row-layout weight row) adds 32 products
// into 16 per-token f32 lanes: the weights need no repacking. A call computes n_cols (1..
// GL_BF16_MAX_COLS) weight rows w + c * w_stride (elements) by n_groups (1..GL_BF16_MAX_GROUPS)
// groups act + g * group_stride (elements) over n_pairs pairs, into the transposed tile
// tile[c * tile_stride + 16 g + lane]; accumulate = 0 starts the sums at +0, 1 continues
// from the tile's values (a split over k gives the same bits as one call). Per output, pair p
// ascending: acc = fma(a[2p+1], w[2p+1], acc); acc = fma(a[2p], w[2p], acc), in f32 (each
// bf16 product is exact in f32, so the fma is one rounding), bf16 denormal inputs read as zero
// and denormal results flushed to zero: vdpbf16ps's definition, which the reference copies.
#define GL_BF16_GROUP      16
#define GL_BF16_MAX_GROUPS 2
#define GL_BF16_MAX_COLS   12
typedef void (*gl_gemm_bf16_fn)(int64_t n_pairs, const uint16_t *act, size_t group_stride,
                                int n_groups, const uint16_t *w, size_t w_stride, int n_cols,
                                float *tile, size_t tile_stride, int accumulate);

// Q8_0 weights x Q8_0 activations in token lanes (the vision encoder's matmuls on a Q8_0 mmproj):
// the int8 analogue of gemm_bf16. Activations are quantized per 32-element block exactly as the
// row path's from_float[Q8_0] does, then packed by gl_pack_q8_0 into groups of GL_Q8_GROUP tokens,
// each group [n_in / 32 blocks][GL_Q8_BLOCK_BYTES], a block being [8 quads][16 tokens][4] u8
// (quant + 128) then [16 tokens] f32 scales: one zmm holds one k-quad of 16 tokens, and vpdpbusd
// with a broadcast weight quad (four consecutive int8 of a row-layout Q8_0 block) adds 64
// products into 16 per-token int32 lanes: the weights need no repacking. The +128 is taken back
// exactly per (row, block) by starting the int32 sum at corr = -128 * (sum of the block's 32
// weight quants), precomputed by gl_prep_q8_0 with the block's scale as f32. A call computes
// n_cols (1..GL_Q8_MAX_COLS) weight rows (row c at block c * w_stride of w and of ws) by n_groups
// (1..GL_Q8_MAX_GROUPS) groups act + g * group_stride (bytes) over n_blocks blocks, into the
// transposed tile tile[c * tile_stride + 16 g + lane]; accumulate = 0 starts the sums at +0, 1
// continues from the tile's values (a split over blocks gives the same bits as one call). Per
// output, block b ascending: s = exact int32 sum of the 32 quant products (|s| <= 32 * 127 * 128
// < 2^24, so (float)s is exact), acc = fma(d_w * d_a, (float)s, acc) in f32; d_w * d_a, two fp16
// values, is exact in f32, so each block adds one rounding.
#define GL_Q8_GROUP       16
#define GL_Q8_MAX_GROUPS  2
#define GL_Q8_MAX_COLS    6
#define GL_Q8_BLOCK_BYTES (32 * GL_Q8_GROUP + 4 * GL_Q8_GROUP) // 512 B of quants, 64 B of scales
struct gl_q8_0_wsum {
    int32_t corr; // -128 * sum of the block's 32 weight quants
    float d;      // the block's fp16 scale, as f32
};
typedef void (*gl_gemm_q8_0_fn)(int64_t n_blocks, const uint8_t *act, size_t group_stride,
                                int n_groups, const struct gl_block_q8_0 *w,
                                const struct gl_q8_0_wsum *ws, size_t w_stride, int n_cols,
                                float *tile, size_t tile_stride, int accumulate);

// Elementwise activations over n floats (any n >= 0; each element's result depends on its own
// inputs only, never on n or its position, so a row gives the same bits alone or in a batch):
//   swiglu:   g[i] = g[i] * sigmoid(g[i]) * u[i]            (SiLU gate times up)
//   gate:     d[i] = d[i] * sigmoid(s[i])                   (attention output gate)
//   softcap:  z[i] = cap * tanh(scale * z[i] / cap), or scale * z[i] when cap == 0
// The reference calls libm expf / tanhf per element (17 ns per tanhf, 6.6 ns per SiLU on Zen 3:
// at 4 rows a 52-layer step spent ~20 ms in them); the SIMD tables use a vector exp and tanh
// within a few ulp of it (test_kernels bounds the difference).
typedef void (*gl_swiglu_fn)(float *g, const float *u, int64_t n);
typedef void (*gl_gate_fn)(float *d, const float *s, int64_t n);
typedef void (*gl_softcap_fn)(float *z, int64_t n, float scale, float cap);

// RMS norm of one row of n >= 1 floats: y[i] = x[i] * r * w[i] (x[i] * r when w is NULL), r =
// (float)(1 / sqrt(ss / n + eps)) and ss the sum of x[i]^2 in double; y may be x. A float's square
// is exact in double, so only the order of the adds rounds: every ISA adds in 16 lanes (lane l:
// the elements i = l mod 16, in order) and then one fixed pairwise tree (16 -> 8 -> 4 -> 2 -> 1),
// so all agree bit for bit. One serial chain (the loop this replaced) cost ~10 us a 6,656-wide row
// on Zen 3 (4-cycle double adds), ~100 such rows a 52-layer decode step.
typedef void (*gl_rms_norm_fn)(float *y, const float *x, const float *w, int64_t n, float eps);

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
    // Token-lane BF16 tile (above): the reference and AVX-512 tables have one; NULL in the AVX2
    // table (no vdpbf16ps), whose callers keep the row-layout BF16 vec_dot.
    gl_gemm_bf16_fn gemm_bf16;
    // Long-run attention (above): the reference and AVX-512 tables have one; NULL in the AVX2
    // table, whose callers keep attn_tile.
    gl_attn_rows_fn attn_rows;
    // Token-lane Q8_0 tile (above): the reference and AVX-512 (VNNI) tables have one; NULL in the
    // AVX2 table, whose callers keep the row-layout Q8_0 vec_dot.
    gl_gemm_q8_0_fn gemm_q8_0;
    gl_swiglu_fn swiglu;
    gl_gate_fn gate;
    gl_rms_norm_fn rms_norm;
    gl_softcap_fn softcap;
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

// Bytes of n_tok activation rows of n_in (even) elements packed by gl_pack_bf16: n_tok rounded up
// to a whole group of 16, times n_in bf16.
size_t gl_bf16_packed_bytes(int64_t n_tok, int64_t n_in);
// Packs n_tok rows of n_in (even) floats, row stride x_stride floats, into the token-lane layout
// above at dst (gl_bf16_packed_bytes), rounding each to bf16 as gl_f32_to_bf16 does (the same
// activations the BF16 vec_dot path sees); the last group's missing tokens are zeros. Groups are
// split over the pool's threads.
void gl_pack_bf16(struct gl_pool *pool, const float *x, int64_t n_tok, int64_t n_in,
                  int64_t x_stride, void *dst);
// out[t][r] = dot(W row r, act token t) for r < n_rows, t < n_tok, with W BF16 in the row layout
// (n_rows rows of n_in bf16, n_in even) and act packed by gl_pack_bf16 with the same n_tok and
// n_in. Items (up to 96 rows x 64 tokens) are claimed by the threads from a counter; inside one,
// k is cut in blocks of 512 so the tile's weights and activations stay in L1/L2. Every element
// is one k-ordered sum as defined for gemm_bf16, so results do not depend on the thread count or
// the tiling, and equal the reference table's bit for bit.
void gl_matmul_bf16(struct gl_pool *pool, const struct gl_kernels *k, const void *W, int64_t n_rows,
                    int64_t n_in, const void *act, int64_t n_tok, float *out, int64_t out_stride);

// Bytes of n_tok activation rows of n_in (a multiple of 32) elements packed by gl_pack_q8_0: n_tok
// rounded up to a whole group of 16, times n_in / 32 blocks of GL_Q8_BLOCK_BYTES / 16 per token.
size_t gl_q8_0_packed_bytes(int64_t n_tok, int64_t n_in);
// Packs n_tok rows of n_in floats (row stride x_stride floats) into the layout above at dst
// (gl_q8_0_packed_bytes): each row quantized by k->from_float[GL_TYPE_Q8_0] block by block (the
// activations the row-layout Q8_0 path sees), quants stored + 128 as u8, scales as f32; the last
// group's missing tokens are quants 0 (u8 128) with scale 0. Groups are split over the threads.
void gl_pack_q8_0(struct gl_pool *pool, const struct gl_kernels *k, const float *x, int64_t n_tok,
                  int64_t n_in, int64_t x_stride, void *dst);
// ws[r * (n_in / 32) + b] = {-128 * sum of the quants, scale} of block b of row r of the Q8_0
// weight W (n_rows rows of n_in / 32 blocks): what gl_matmul_q8_0 needs beside W. Rows are split
// over the threads.
void gl_prep_q8_0(struct gl_pool *pool, const void *W, int64_t n_rows, int64_t n_in,
                  struct gl_q8_0_wsum *ws);
// out[t][r] = dot(W row r, act token t) for r < n_rows, t < n_tok, with W Q8_0 in the row layout,
// ws its gl_prep_q8_0 sums and act packed by gl_pack_q8_0 with the same n_tok and n_in. Items (up
// to 96 rows x 64 tokens) are claimed by the threads from a counter; inside one, k is cut in
// blocks of 512 so the tile's weights and activations stay in L1/L2. Every element is one
// block-ordered sum as defined for gemm_q8_0, so results do not depend on the thread count or
// the tiling, and equal the reference table's bit for bit. They differ from gl_matmul's Q8_0
// vec_dot (same integer block sums and scale products) only in the order of the f32 additions.
void gl_matmul_q8_0(struct gl_pool *pool, const struct gl_kernels *k, const void *W,
                    const struct gl_q8_0_wsum *ws, int64_t n_rows, int64_t n_in, const void *act,
                    int64_t n_tok, float *out, int64_t out_stride);

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
