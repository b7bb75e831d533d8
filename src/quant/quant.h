// SPDX-License-Identifier: MIT
// quant: ggml tensor type ids and block layouts (bit-exact with GGUF files written by llama.cpp),
// plus the scalar reference quantizers, dequantizers and dot products. These are the spec the
// SIMD kernels in src/kernels/ are tested against. No state, no allocation.
//
// Activation ("vec_dot") formats: a weight row of type T is dotted with an activation row in
// gl_type_vec_dot_type(T): F32->F32, F16->F16, BF16->BF16, Q8_0/Q4_0->Q8_0, Q4_K/Q5_K/Q6_K->Q8_K.
// This matches llama.cpp's CPU backend so the two agree to within float reordering.
#pragma once

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

// ggml_type ids as stored in GGUF tensor infos.
enum gl_type {
    GL_TYPE_F32 = 0,
    GL_TYPE_F16 = 1,
    GL_TYPE_Q4_0 = 2,
    GL_TYPE_Q4_1 = 3,
    GL_TYPE_Q5_0 = 6,
    GL_TYPE_Q5_1 = 7,
    GL_TYPE_Q8_0 = 8,
    GL_TYPE_Q8_1 = 9,
    GL_TYPE_Q2_K = 10,
    GL_TYPE_Q3_K = 11,
    GL_TYPE_Q4_K = 12,
    GL_TYPE_Q5_K = 13,
    GL_TYPE_Q6_K = 14,
    GL_TYPE_Q8_K = 15,
    GL_TYPE_I8 = 24,
    GL_TYPE_I16 = 25,
    GL_TYPE_I32 = 26,
    GL_TYPE_I64 = 27,
    GL_TYPE_F64 = 28,
    GL_TYPE_BF16 = 30,
    GL_TYPE_COUNT = 40, // table size; ids >= this are unknown
};

struct gl_type_traits {
    const char *name;  // "Q4_K"; NULL for ids that are not ggml types we can size
    int64_t blck_size; // elements per block
    size_t type_size;  // bytes per block
    int supported;     // 1 if this project can compute with it (quantize/dequantize/dot)
};

// Traits for a type id; returns NULL for an unknown or unsized id (never asserts: ids come from
// files).
const struct gl_type_traits *gl_type_traits_of(uint32_t type);
// Bytes of a row of n elements; 0 if n is not a multiple of the block size or the type is unknown.
size_t gl_type_row_size(uint32_t type, int64_t n);
// Parses "Q4_K" / "f16" (case-insensitive); returns -1 if unknown.
int gl_type_from_name(const char *name);
enum gl_type gl_type_vec_dot_type(enum gl_type weight_type);

// ---- block layouts (ggml-common.h layout; sizes static_assert'ed) ----
#define GL_QK4_0        32
#define GL_QK8_0        32
#define GL_QK_K         256
#define GL_K_SCALE_SIZE 12

struct gl_block_q4_0 {
    uint16_t d;               // fp16 scale
    uint8_t qs[GL_QK4_0 / 2]; // nibbles: low = elements 0..15, high = 16..31
};
static_assert(sizeof(struct gl_block_q4_0) == 18, "q4_0 block");

struct gl_block_q8_0 {
    uint16_t d; // fp16 scale
    int8_t qs[GL_QK8_0];
};
static_assert(sizeof(struct gl_block_q8_0) == 34, "q8_0 block");

struct gl_block_q4_K {
    uint16_t d;                      // fp16 super-block scale for quantized scales
    uint16_t dmin;                   // fp16 super-block scale for quantized mins
    uint8_t scales[GL_K_SCALE_SIZE]; // 8 scales + 8 mins, 6 bits each
    uint8_t qs[GL_QK_K / 2];         // 4-bit quants
};
static_assert(sizeof(struct gl_block_q4_K) == 144, "q4_K block");

struct gl_block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[GL_K_SCALE_SIZE];
    uint8_t qh[GL_QK_K / 8]; // high bit of each quant
    uint8_t qs[GL_QK_K / 2]; // low 4 bits
};
static_assert(sizeof(struct gl_block_q5_K) == 176, "q5_K block");

struct gl_block_q6_K {
    uint8_t ql[GL_QK_K / 2];     // low 4 bits
    uint8_t qh[GL_QK_K / 4];     // high 2 bits
    int8_t scales[GL_QK_K / 16]; // 8-bit scales per 16 elements
    uint16_t d;                  // fp16 super-block scale
};
static_assert(sizeof(struct gl_block_q6_K) == 210, "q6_K block");

// Activation format for k-quant dots (never stored in files).
struct gl_block_q8_K {
    float d; // scale
    int8_t qs[GL_QK_K];
    int16_t bsums[GL_QK_K / 16]; // sums of each group of 16 quants
};
static_assert(sizeof(struct gl_block_q8_K) == 292, "q8_K block");

// ---- 16-row interleaved layouts ("r16": built at load time, never stored in files) ----
// A Q4_K or Q6_K matrix whose row count is a multiple of 16 is repacked so that one int8 VNNI
// instruction (vpdpbusd) multiplies 16 rows x 4 columns of weights by 4 activations of one
// token: group g (rows 16g..16g+15) is nb = n_in / 256 consecutive r16 blocks, block b holding
// super-block b of each of the 16 rows. Same bytes as the source (16 x 144 and 16 x 210), so
// decode reads as much memory as before. Element k (0..255) of row r of a block:
//  Q4_K_R16: qs[k / 8][r][k % 4], low nibble for k % 8 < 4, high nibble otherwise; d, dmin and
//            the 12-byte 6-bit scale field of row r are transposed (scales[byte][row]).
//  Q6_K_R16: low 4 bits as in Q4_K_R16 (sub[k / 16].ql[(k / 8) % 2]); high 2 bits in
//            sub[k / 16].qh[r][k % 4] at bit 2 * ((k % 16) / 4); the int8 scales and d
//            transposed.
#define GL_R16_ROWS 16
struct gl_block_q4_K_r16 {
    uint16_t d[GL_R16_ROWS];
    uint16_t dmin[GL_R16_ROWS];
    uint8_t scales[GL_K_SCALE_SIZE][GL_R16_ROWS];
    uint8_t qs[GL_QK_K / 8][GL_R16_ROWS][4];
};
static_assert(sizeof(struct gl_block_q4_K_r16) == GL_R16_ROWS * 144, "q4_K r16 block");

struct gl_block_q6_K_r16 {
    uint16_t d[GL_R16_ROWS];
    int8_t scales[GL_QK_K / 16][GL_R16_ROWS];
    // Sub-block j (16 elements) in one 192-byte piece: one forward stream for the prefetchers
    // (three interleaved streams ran 3x slower from DRAM).
    struct {
        uint8_t ql[2][GL_R16_ROWS][4]; // chunk pairs 2j, 2j+1
        uint8_t qh[GL_R16_ROWS][4];
    } sub[GL_QK_K / 16];
};
static_assert(sizeof(struct gl_block_q6_K_r16) == GL_R16_ROWS * 210, "q6_K r16 block");

// 1 for the weight types that have an r16 layout (Q4_K, Q6_K).
int gl_r16_supported(enum gl_type t);
// Repacks n_rows (a multiple of 16) rows of n_in elements of type t (row-major, row stride
// gl_type_row_size(t, n_in)) into dst, which holds the same number of bytes.
void gl_repack_r16(enum gl_type t, const void *src, int64_t n_rows, int64_t n_in, void *dst);
// The r16 product, the spec of the SIMD kernels (bit-exact: integer sums are exact and the float
// steps below are the same single-rounded operations in the same order). For one 16-row group w
// (nb = n_in / 256 blocks) and n_tok q8_K activation rows (stride act_stride bytes):
// out[t * out_stride + r] for r < 16 = sum over blocks b, in order, of
//   Q4_K: acc = fmaf((float)B, d_r * y_b.d, acc); acc = fmaf(-(float)M, dmin_r * y_b.d, acc)
//         B = sum_j sc_rj * dot(q_r, y) over sub-block j (32), M = sum_j m_rj * (bsum 2j + 2j+1)
//   Q6_K: acc = fmaf((float)(B - 32 * O), d_r * y_b.d, acc)
//         B = sum_j sc_rj * dot(q_r, y) over sub-block j (16), O = sum_j sc_rj * bsum j
// starting from acc = 0. Any n_tok >= 1.
void gl_gemm_r16_ref(enum gl_type t, int64_t n_in, const void *w, const void *act,
                     size_t act_stride, int64_t n_tok, float *out, int64_t out_stride);

// ---- reference (scalar) implementations ----
// n must be a multiple of the type's block size (asserted: callers size rows from validated
// shapes). Quantize n floats of x into y (row of gl_type_row_size(t, n) bytes).
// F32/F16/BF16/Q8_0/Q4_0/ Q4_K/Q5_K/Q6_K/Q8_K are supported; other types assert.
void gl_quantize_row_ref(enum gl_type t, const float *x, void *y, int64_t n);
// Dequantize a row back to floats.
void gl_dequantize_row_ref(enum gl_type t, const void *x, float *y, int64_t n);
// *s = dot(weight row x of type t, activation row y of type gl_type_vec_dot_type(t)), n elements.
void gl_vec_dot_ref(enum gl_type t, int64_t n, float *s, const void *x, const void *y);
