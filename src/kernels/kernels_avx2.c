// SPDX-License-Identifier: MIT
// kernels_avx2: AVX2 + FMA + F16C variants of the dot products, activation quantizers and row
// dequantizers declared by kernels.h. Spec: the scalar reference in src/quant/quant.c (ggml block
// layouts). Invariants: integer partial sums are exact (no saturation for valid blocks: weights
// within their nibble/6-bit ranges, activations in [-127, 127]); only the float summation order
// differs from the reference. from_float output is byte-identical to the reference quantizers
// (same products, nearest-int rounding with the reference tie rule), so results never depend on
// the ISA beyond float reassociation in the dots. Reduction order: lane-wise accumulation in
// block order, then one horizontal sum at the end of the row. vec_dot4 (Q8_0, Q4_K, Q6_K) keeps
// that order per token, so it is bit-identical to vec_dot.
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

// ---- helpers ----

// 8 bf16 values -> 8 floats (bf16 is the top half of an f32).
static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Signed int8 dot of 32 pairs into 8 int32 lanes: |x| * (y with x's sign). Exact for x in
// [-128, 127] and y in [-127, 127] (pair sums <= 2*128*127 fit int16).
static inline __m256i dot_i8x32(__m256i x, __m256i y)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// The 12-byte q4_K/q5_K scale field -> a[0..1]: the 8 six-bit scales, a[2..3]: the 8 mins, one
// byte each. Scale/min j < 4: low 6 bits of bytes j / j+4; j >= 4: low/high nibble of byte j+4
// plus the top 2 bits of byte j-4 (scale) / j (min).
static inline void unpack_k4_scales(const uint8_t *q, uint32_t a[4])
{
    uint32_t w[3];
    memcpy(w, q, 12);
    a[0] = w[0] & 0x3f3f3f3fu;                                               // sc 0..3
    a[1] = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);        // sc 4..7
    a[2] = w[1] & 0x3f3f3f3fu;                                               // m 0..3
    a[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4); // m 4..7
}

// ---- float dots (n arbitrary; scalar tail) ----

static void vec_dot_f32(int64_t n, float *s, const void *vx, const void *vy)
{
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = x86_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        sum += x[i] * y[i];
    *s = sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        __m256 y0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i)));
        __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8)));
        __m256 y1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i + 8)));
        a0 = _mm256_fmadd_ps(x0, y0, a0);
        a1 = _mm256_fmadd_ps(x1, y1, a1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        __m256 y0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i)));
        a0 = _mm256_fmadd_ps(x0, y0, a0);
    }
    float sum = x86_hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        sum += x86_fp16(x[i]) * x86_fp16(y[i]);
    *s = sum;
}

static void vec_dot_bf16(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load_bf16x8(x + i), load_bf16x8(y + i), a0);
        a1 = _mm256_fmadd_ps(load_bf16x8(x + i + 8), load_bf16x8(y + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(load_bf16x8(x + i), load_bf16x8(y + i), a0);
    float sum = x86_hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        sum += gl_bf16_to_f32(x[i]) * gl_bf16_to_f32(y[i]);
    *s = sum;
}

// ---- 32-element block dots (activation q8_0) ----

static void vec_dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK8_0 == 0);
    const struct gl_block_q8_0 *x = vx;
    const struct gl_block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK8_0; i++) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(x86_fp16(x[i].d) * x86_fp16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8x32(qx, qy)), acc);
    }
    *s = x86_hsum256(acc);
}

static void vec_dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK4_0 == 0);
    const struct gl_block_q4_0 *x = vx;
    const struct gl_block_q8_0 *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), off = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK4_0; i++) {
        // bytes 0..15: low nibbles (elements 0..15); 16..31: high nibbles (16..31); minus 8.
        __m128i b = _mm_loadu_si128((const __m128i *)x[i].qs);
        __m256i q = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
        q = _mm256_sub_epi8(_mm256_and_si256(q, m4), off);
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(x86_fp16(x[i].d) * x86_fp16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8x32(q, qy)), acc);
    }
    *s = x86_hsum256(acc);
}

// ---- k-quant dots (activation q8_K) ----

// 16-bit broadcast controls: lane-wise pshufb picking int16 element e into every position.
static inline __m256i bcast16_ctl(int e)
{
    return _mm256_set1_epi16((short)(((2 * e + 1) << 8) | (2 * e)));
}

// One 64-element chunk of a q4_K/q5_K block: q_lo/q_hi hold the 32 unsigned quants of the two
// 32-element sub-blocks; returns their scale-weighted int32 dot with y (8 lanes).
static inline __m256i k4_chunk(__m256i q_lo, __m256i q_hi, const int8_t *y, __m256i sc_lo,
                               __m256i sc_hi)
{
    __m256i p_lo = _mm256_maddubs_epi16(q_lo, _mm256_loadu_si256((const __m256i *)y));
    __m256i p_hi = _mm256_maddubs_epi16(q_hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
    return _mm256_add_epi32(_mm256_madd_epi16(p_lo, sc_lo), _mm256_madd_epi16(p_hi, sc_hi));
}

// The 8 scales of k4_scales_mins as int16, in both 128-bit lanes.
static inline __m256i k4_scales16(__m128i scm)
{
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
}

static void vec_dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q4_K *x = vx;
    const struct gl_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        const __m128i scm = x86_k4_scales_mins(x[i].scales);
        const float d = x86_fp16(x[i].d) * y[i].d;
        const float dmin = x86_fp16(x[i].dmin) * y[i].d;
        __m256i mins = x86_k4_min_sums(scm, y[i].bsums);
        acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), acc_m);

        __m256i scales = k4_scales16(scm);
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            // 32 bytes: low nibbles = sub-block 2j, high nibbles = sub-block 2j+1.
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i s_lo = _mm256_shuffle_epi8(scales, bcast16_ctl(2 * j));
            __m256i s_hi = _mm256_shuffle_epi8(scales, bcast16_ctl(2 * j + 1));
            sum = _mm256_add_epi32(sum, k4_chunk(lo, hi, y[i].qs + 64 * j, s_lo, s_hi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    *s = x86_hsum256(acc) - x86_hsum256(acc_m);
}

static void vec_dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q5_K *x = vx;
    const struct gl_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        const __m128i scm = x86_k4_scales_mins(x[i].scales);
        const float d = x86_fp16(x[i].d) * y[i].d;
        const float dmin = x86_fp16(x[i].dmin) * y[i].d;
        __m256i mins = x86_k4_min_sums(scm, y[i].bsums);
        acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), acc_m);

        __m256i scales = k4_scales16(scm);
        // qh[l] bit 2j / 2j+1 is the fifth bit of element 64j+l / 64j+32+l. Shifting the whole
        // register right by 2 per chunk keeps the bits of interest at positions 0 and 1.
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
            qh = _mm256_srli_epi16(qh, 2);
            __m256i s_lo = _mm256_shuffle_epi8(scales, bcast16_ctl(2 * j));
            __m256i s_hi = _mm256_shuffle_epi8(scales, bcast16_ctl(2 * j + 1));
            sum = _mm256_add_epi32(sum, k4_chunk(lo, hi, y[i].qs + 64 * j, s_lo, s_hi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    *s = x86_hsum256(acc) - x86_hsum256(acc_m);
}

// q6_K: in each 128-element half h (ql += 64h, qh += 32h), element 128h + 32k + l (l < 32) has
// low 4 bits from ql[l + 32(k & 1)] (low nibble for k < 2, high for k >= 2) and high 2 bits from
// qh[l] bits 2k..2k+1; its value is that 6-bit number - 32, times the int8 scale of its
// 16-element group. Unsigned 6-bit quants go through maddubs; the -32 is folded in via bsums.
static void vec_dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q6_K *x = vx;
    const struct gl_block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        const float d = x86_fp16(x[i].d) * y[i].d;
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        // The -32 offset: sum_g sc[g] * 32 * bsums[g], subtracted once per block.
        __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), sc16);
        __m256i sum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h;
            const int8_t *q8 = y[i].qs + 128 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            __m256i q[4];
            // Each 16-bit shift moves the wanted qh bits to positions 4..5 of every byte; bits
            // spilling across the byte boundary land outside the 0x30 mask.
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_and_si256(qh, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
            // Scales for groups 8h + 2k (bytes 0..15 of q[k]) and 8h + 2k + 1 (bytes 16..31).
            __m256i s8 =
                _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8, 8) : sc8));
            for (int k = 0; k < 4; k++) {
                __m256i p =
                    _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
                __m256i ctl = _mm256_setr_m128i(_mm256_castsi256_si128(bcast16_ctl(2 * k)),
                                                _mm256_castsi256_si128(bcast16_ctl(2 * k + 1)));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(s8, ctl)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    *s = x86_hsum256(acc);
}

// ---- four-token dots (vec_dot4): one weight-row unpack shared by four activation rows ----
// Per token, the same accumulators, lanes, block order and scalar scale products as the
// one-token kernels above, so each result is bit-identical to vec_dot on that pair (integer lane
// sums are exact in any order). With 16 ymm registers the weight side is unpacked one 64-element
// chunk at a time and applied to the four tokens before the next chunk.

// Full unrolling keeps the per-token accumulator arrays in registers (-O2 alone does not).
#define GL_UNROLL4 _Pragma("GCC unroll 4")

#define DOT4_ROWS(T, yv, ys)                                                                       \
    const T *y[4];                                                                                 \
    GL_UNROLL4                                                                                     \
    for (int t = 0; t < 4; t++)                                                                    \
        y[t] = (const T *)((const uint8_t *)(yv) + (size_t)t * (ys));

static void vec_dot4_q4_K_q8_K(int64_t n, float *s, int64_t s_stride, const void *vx,
                               const void *vy, size_t y_stride)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q4_K *x = vx;
    DOT4_ROWS(struct gl_block_q8_K, vy, y_stride)
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4], acc_m[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        acc[t] = acc_m[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        const __m128i scm = x86_k4_scales_mins(x[i].scales);
        const float dx = x86_fp16(x[i].d), dmx = x86_fp16(x[i].dmin);
        const __m256i scales = k4_scales16(scm);
        __m256i sum[4];
        GL_UNROLL4
        for (int t = 0; t < 4; t++)
            sum[t] = _mm256_setzero_si256();
        GL_UNROLL4
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i s_lo = _mm256_shuffle_epi8(scales, bcast16_ctl(2 * j));
            __m256i s_hi = _mm256_shuffle_epi8(scales, bcast16_ctl(2 * j + 1));
            GL_UNROLL4
            for (int t = 0; t < 4; t++)
                sum[t] =
                    _mm256_add_epi32(sum[t], k4_chunk(lo, hi, y[t][i].qs + 64 * j, s_lo, s_hi));
        }
        GL_UNROLL4
        for (int t = 0; t < 4; t++) {
            const float d = dx * y[t][i].d, dmin = dmx * y[t][i].d;
            __m256i mins = x86_k4_min_sums(scm, y[t][i].bsums);
            acc_m[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins), acc_m[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum[t]), acc[t]);
        }
    }
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = x86_hsum256(acc[t]) - x86_hsum256(acc_m[t]);
}

static void vec_dot4_q6_K_q8_K(int64_t n, float *s, int64_t s_stride, const void *vx,
                               const void *vy, size_t y_stride)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q6_K *x = vx;
    DOT4_ROWS(struct gl_block_q8_K, vy, y_stride)
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        const float dx = x86_fp16(x[i].d);
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i sum[4];
        GL_UNROLL4
        for (int t = 0; t < 4; t++) {
            __m256i off =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t][i].bsums), sc16);
            sum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            __m256i s8 =
                _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8, 8) : sc8));
            GL_UNROLL4
            for (int k = 0; k < 4; k++) {
                __m256i q;
                if (k == 0)
                    q = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                        _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
                else if (k == 1)
                    q = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                        _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
                else if (k == 2)
                    q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                        _mm256_and_si256(qh, m2));
                else
                    q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
                __m256i ctl = _mm256_setr_m128i(_mm256_castsi256_si128(bcast16_ctl(2 * k)),
                                                _mm256_castsi256_si128(bcast16_ctl(2 * k + 1)));
                __m256i sv = _mm256_shuffle_epi8(s8, ctl);
                GL_UNROLL4
                for (int t = 0; t < 4; t++) {
                    const int8_t *q8 = y[t][i].qs + 128 * h + 32 * k;
                    __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                    sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(p, sv));
                }
            }
        }
        GL_UNROLL4
        for (int t = 0; t < 4; t++)
            acc[t] =
                _mm256_fmadd_ps(_mm256_set1_ps(dx * y[t][i].d), _mm256_cvtepi32_ps(sum[t]), acc[t]);
    }
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = x86_hsum256(acc[t]);
}

static void vec_dot4_q8_0_q8_0(int64_t n, float *s, int64_t s_stride, const void *vx,
                               const void *vy, size_t y_stride)
{
    GL_ASSERT(n % GL_QK8_0 == 0);
    const struct gl_block_q8_0 *x = vx;
    DOT4_ROWS(struct gl_block_q8_0, vy, y_stride)
    __m256 acc[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK8_0; i++) {
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256i ax = _mm256_sign_epi8(qx, qx);
        const float dx = x86_fp16(x[i].d);
        GL_UNROLL4
        for (int t = 0; t < 4; t++) {
            __m256i qy = _mm256_loadu_si256((const __m256i *)y[t][i].qs);
            __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(qy, qx)),
                                          _mm256_set1_epi16(1));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * x86_fp16(y[t][i].d)),
                                     _mm256_cvtepi32_ps(p), acc[t]);
        }
    }
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = x86_hsum256(acc[t]);
}

// ---- activation quantizers (byte-identical to the reference) ----

static inline __m256 abs_ps(__m256 v)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// max |x[j]| over n (multiple of 8) floats. max_ps returns its second operand when either is
// NaN, so NaN inputs are skipped exactly as the reference's `fabsf(x) > amax` test skips them.
static inline float amax_ps(const float *x, int n)
{
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8)
        m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + j)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

// 32 floats times s, rounded half-to-even (cvtps under the default MXCSR mode, as the
// reference's nearest_int), clamped to [lo, hi] and packed to int8 in element order.
static inline __m256i round_pack32(const float *x, __m256 s, int lo, int hi)
{
    __m256i v[4];
    for (int k = 0; k < 4; k++) {
        __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), s));
        q = _mm256_min_epi32(q, _mm256_set1_epi32(hi));
        v[k] = _mm256_max_epi32(q, _mm256_set1_epi32(lo));
    }
    // packs interleave 128-bit lanes: dwords come out as 0,2,4,6,1,3,5,7; undo with a permute.
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void from_float_q8_0(const float *x, void *vy, int64_t n)
{
    GL_ASSERT(n % GL_QK8_0 == 0);
    struct gl_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / GL_QK8_0; i++, x += GL_QK8_0) {
        float amax = amax_ps(x, GL_QK8_0);
        float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
        y[i].d = gl_f32_to_fp16(d);
        __m256i q = round_pack32(x, _mm256_set1_ps(id), -127, 127);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
    }
}

// The reference's max is the signed value at the FIRST index holding the largest |x|.
static inline float first_at_amax(const float *x, int n, float amax)
{
    __m256 a = _mm256_set1_ps(amax);
    for (int j = 0; j < n; j += 8) {
        int m = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), a, _CMP_EQ_OQ));
        if (m)
            return x[j + __builtin_ctz((unsigned)m)];
    }
    GL_ASSERT(0);
}

static void from_float_q8_K(const float *x, void *vy, int64_t n)
{
    GL_ASSERT(n % GL_QK_K == 0);
    struct gl_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / GL_QK_K; i++, x += GL_QK_K) {
        float amax = amax_ps(x, GL_QK_K);
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.f / first_at_amax(x, GL_QK_K, amax);
        __m256 s = _mm256_set1_ps(iscale);
        for (int j = 0; j < GL_QK_K; j += 32)
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), round_pack32(x + j, s, -128, 127));
        for (int g = 0; g < GL_QK_K / 16; g++) {
            // 16 int8 -> sum via pairwise widening adds.
            __m128i q = _mm_loadu_si128((const __m128i *)(y[i].qs + 16 * g));
            __m128i w = _mm_madd_epi16(_mm_maddubs_epi16(_mm_set1_epi8(1), q), _mm_set1_epi16(1));
            w = _mm_add_epi32(w, _mm_shuffle_epi32(w, 0x4e));
            w = _mm_add_epi32(w, _mm_shuffle_epi32(w, 0xb1));
            y[i].bsums[g] = (int16_t)_mm_cvtsi128_si32(w);
        }
        y[i].d = 1 / iscale;
    }
}

static void from_float_f16(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        // Hardware keeps NaN payloads; the reference writes one canonical quiet NaN.
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            break;
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        y[i] = gl_f32_to_fp16(x[i]);
}

// f32 -> bf16 with round-to-nearest-even on the bits, NaN -> quiet NaN, as gl_f32_to_bf16 (the
// AVX-512 BF16 convert flushes denormals, so it is not used).
static void from_float_bf16(const float *x, void *vy, int64_t n)
{
    uint16_t *y = vy;
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int k = 0; k < 2; k++) {
            __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * k));
            __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
            __m256i rne = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, odd)), 16);
            __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
            __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
            r[k] = _mm256_blendv_epi8(rne, qnan, is_nan);
        }
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++)
        y[i] = gl_f32_to_bf16(x[i]);
}

// ---- row dequantizers (bit-identical to the reference: same products, no FMA contraction) ----

static inline void store_scaled_i8x8(float *y, __m128i q8, __m256 d)
{
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d));
}

static void to_float_q8_0(const void *vx, float *y, int64_t n)
{
    GL_ASSERT(n % GL_QK8_0 == 0);
    const struct gl_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / GL_QK8_0; i++, y += GL_QK8_0) {
        __m256 d = _mm256_set1_ps(x86_fp16(x[i].d));
        for (int k = 0; k < 4; k++)
            store_scaled_i8x8(y + 8 * k, _mm_loadl_epi64((const __m128i *)(x[i].qs + 8 * k)), d);
    }
}

static void to_float_q4_0(const void *vx, float *y, int64_t n)
{
    GL_ASSERT(n % GL_QK4_0 == 0);
    const struct gl_block_q4_0 *x = vx;
    const __m128i m4 = _mm_set1_epi8(0x0f), off = _mm_set1_epi8(8);
    for (int64_t i = 0; i < n / GL_QK4_0; i++, y += GL_QK4_0) {
        __m256 d = _mm256_set1_ps(x86_fp16(x[i].d));
        __m128i b = _mm_loadu_si128((const __m128i *)x[i].qs);
        __m128i lo = _mm_sub_epi8(_mm_and_si128(b, m4), off);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m4), off);
        store_scaled_i8x8(y, lo, d);
        store_scaled_i8x8(y + 8, _mm_srli_si128(lo, 8), d);
        store_scaled_i8x8(y + 16, hi, d);
        store_scaled_i8x8(y + 24, _mm_srli_si128(hi, 8), d);
    }
}

// 32 unsigned quants q (bytes) -> y = ds * q - dm, in element order.
static inline void store_affine_u8x32(float *y, __m256i q, float ds, float dm)
{
    const __m256 a = _mm256_set1_ps(ds), b = _mm256_set1_ps(dm);
    __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int k = 0; k < 4; k++) {
        __m128i v = k & 1 ? _mm_srli_si128(h[k / 2], 8) : h[k / 2];
        __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(a, f), b));
    }
}

static void to_float_k4(const uint16_t *dd, const uint8_t *scales, const uint8_t *qs,
                        const uint8_t *qh, float *y)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    uint32_t a[4];
    uint8_t sc[8], m[8];
    unpack_k4_scales(scales, a);
    memcpy(sc, &a[0], 8);
    memcpy(m, &a[2], 8);
    const float d = gl_fp16_to_f32(dd[0]), dmin = gl_fp16_to_f32(dd[1]);
    __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
        h = _mm256_srli_epi16(h, 2);
        store_affine_u8x32(y + 64 * j, lo, d * (float)sc[2 * j], dmin * (float)m[2 * j]);
        store_affine_u8x32(y + 64 * j + 32, hi, d * (float)sc[2 * j + 1],
                           dmin * (float)m[2 * j + 1]);
    }
}

static void to_float_q4_K(const void *vx, float *y, int64_t n)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q4_K *x = vx;
    for (int64_t i = 0; i < n / GL_QK_K; i++, y += GL_QK_K) {
        uint16_t dd[2] = {x[i].d, x[i].dmin};
        to_float_k4(dd, x[i].scales, x[i].qs, NULL, y);
    }
}

static void to_float_q5_K(const void *vx, float *y, int64_t n)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q5_K *x = vx;
    for (int64_t i = 0; i < n / GL_QK_K; i++, y += GL_QK_K) {
        uint16_t dd[2] = {x[i].d, x[i].dmin};
        to_float_k4(dd, x[i].scales, x[i].qs, x[i].qh, y);
    }
}

static void to_float_q6_K(const void *vx, float *y, int64_t n)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q6_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    const __m256i off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / GL_QK_K; i++, y += GL_QK_K) {
        const float d = gl_fp16_to_f32(x[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_and_si256(qh, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
            for (int k = 0; k < 4; k++) {
                __m256i v = _mm256_sub_epi8(q[k], off); // -32..31
                float *yo = y + 128 * h + 32 * k;
                for (int g = 0; g < 2; g++) {
                    int grp = 8 * h + 2 * k + g;
                    __m256 ds = _mm256_set1_ps(d * (float)x[i].scales[grp]);
                    __m128i b = g ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
                    store_scaled_i8x8(yo + 16 * g, b, ds);
                    store_scaled_i8x8(yo + 16 * g + 8, _mm_srli_si128(b, 8), ds);
                }
            }
        }
    }
}

// fp16 -> f32 with F16C, except blocks holding a NaN: the hardware quietens signalling NaNs, the
// reference keeps their bits.
static void to_float_f16(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    const __m128i exp_all = _mm_set1_epi16(0x7c00), abs_mask = _mm_set1_epi16(0x7fff);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, abs_mask), exp_all)))
            break;
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++)
        y[i] = gl_fp16_to_f32(x[i]);
}

static void to_float_bf16(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, load_bf16x8(x + i));
    for (; i < n; i++)
        y[i] = gl_bf16_to_f32(x[i]);
}

// ---- registration ----

// ---- attention tile (kernels.h; spec ref_attn_tile) ----
// The 16 keys of a tile in two ymm (keys 0..7, 8..15); per lane the reference's operations in
// its order (fmaf over d ascending, one multiply by the scale, scalar expf, sums in key order).
static void attn_tile_avx2(int D, int n_rows, const float *q, const float *KT, const float *V,
                           int klo, int khi, float scale, float *m, float *l, float *O)
{
    GL_ASSERT(0 <= klo && klo < khi && khi <= GL_ATTN_TILE && D % 16 == 0);
    for (int r = 0; r < n_rows; r++) {
        const float *qr = q + (size_t)r * (size_t)D;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (int d = 0; d < D; d++) {
            __m256 qd = _mm256_set1_ps(qr[d]);
            a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(KT + d * GL_ATTN_TILE), a0);
            a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(KT + d * GL_ATTN_TILE + 8), a1);
        }
        float w[GL_ATTN_TILE], mx = m[r];
        _mm256_storeu_ps(w, _mm256_mul_ps(a0, _mm256_set1_ps(scale)));
        _mm256_storeu_ps(w + 8, _mm256_mul_ps(a1, _mm256_set1_ps(scale)));
        for (int k = klo; k < khi; k++)
            mx = w[k] > mx ? w[k] : mx;
        const float corr = expf(m[r] - mx);
        float sum = l[r] * corr;
        for (int k = klo; k < khi; k++) {
            w[k] = expf(w[k] - mx);
            sum += w[k];
        }
        m[r] = mx;
        l[r] = sum;
        float *o = O + (size_t)r * (size_t)D;
        const __m256 cv = _mm256_set1_ps(corr);
        for (int d = 0; d < D; d += 8) {
            __m256 ov = _mm256_mul_ps(_mm256_loadu_ps(o + d), cv);
            for (int k = klo; k < khi; k++)
                ov = _mm256_fmadd_ps(_mm256_set1_ps(w[k]), _mm256_loadu_ps(V + k * D + d), ov);
            _mm256_storeu_ps(o + d, ov);
        }
    }
}

// ---- elementwise activations (kernels.h; spec ref_swiglu / ref_gate / ref_softcap) ----

// e^x: Cephes' expf (kernels_x86.h), times 2^n built in the exponent field. x is clamped
// to [-88, 88.8]: at -88, n = -127 gives 0 (expf: 6e-39, a denormal that sigmoid's 1 + e^x
// absorbs); above 88.72, n = 128 gives +inf, as expf overflows.
static inline __m256 exp_ps(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0f)), _mm256_set1_ps(88.8f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(X86_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(X86_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(X86_EXP_LN2_LO), r);
    static const float c[6] = X86_EXP_POLY;
    __m256 p = _mm256_set1_ps(c[0]);
    for (int k = 1; k < 6; k++)
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c[k]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// tanh x: below |x| = 0.625 Cephes' tanhf odd polynomial (no cancellation near 0), above it
// 1 - 2 / (e^2|x| + 1) (at least 0.55, so the subtraction loses nothing; +inf gives 1), with the
// sign of x put back.
static inline __m256 tanh_ps(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x), z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    const __m256 e = exp_ps(_mm256_add_ps(ax, ax));
    __m256 big =
        _mm256_sub_ps(_mm256_set1_ps(1.0f),
                      _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
    return _mm256_blendv_ps(small, big, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_GE_OQ));
}

// 1 + e^-x: sigmoid's denominator. swiglu divides by it as the reference does (g / (1 + e^-g)),
// so the two round alike.
static inline __m256 sigmoid_den(__m256 x)
{
    return _mm256_add_ps(_mm256_set1_ps(1.0f), exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x)));
}

enum act_op { ACT_SWIGLU, ACT_GATE, ACT_SOFTCAP };

// One op on 8 elements: d the destination's values, s the source's (unused by softcap).
GL_X86_INLINE __m256 act8(enum act_op op, __m256 d, __m256 s, float scale, float cap)
{
    switch (op) {
    case ACT_SWIGLU:
        return _mm256_mul_ps(_mm256_div_ps(d, sigmoid_den(d)), s);
    case ACT_GATE:
        return _mm256_mul_ps(d, _mm256_div_ps(_mm256_set1_ps(1.0f), sigmoid_den(s)));
    case ACT_SOFTCAP:
        break;
    }
    const __m256 v = _mm256_mul_ps(d, _mm256_set1_ps(scale));
    if (cap == 0.0f)
        return v;
    return _mm256_mul_ps(_mm256_set1_ps(cap), tanh_ps(_mm256_div_ps(v, _mm256_set1_ps(cap))));
}

// d[0..n) <- op(d, s) by 8s; the last n % 8 through masked loads and stores, with the same vector
// code, so an element's bits do not depend on where it falls.
GL_X86_INLINE void act_map(enum act_op op, float *d, const float *s, int64_t n, float scale,
                           float cap)
{
    const int src = op != ACT_SOFTCAP;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i,
                         act8(op, _mm256_loadu_ps(d + i),
                              src ? _mm256_loadu_ps(s + i) : _mm256_setzero_ps(), scale, cap));
    if (i < n) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(d + i, m,
                            act8(op, _mm256_maskload_ps(d + i, m),
                                 src ? _mm256_maskload_ps(s + i, m) : _mm256_setzero_ps(), scale,
                                 cap));
    }
}

static void swiglu_avx2(float *g, const float *u, int64_t n)
{
    act_map(ACT_SWIGLU, g, u, n, 0.0f, 0.0f);
}

static void gate_avx2(float *d, const float *s, int64_t n)
{
    act_map(ACT_GATE, d, s, n, 0.0f, 0.0f);
}

static void softcap_avx2(float *z, int64_t n, float scale, float cap)
{
    act_map(ACT_SOFTCAP, z, NULL, n, scale, cap);
}

// Spec ref_rms_norm: the 16 lane sums are 4 accumulators of 4 doubles (accumulator q, lane l:
// elements i = 4q + l mod 16); gl_kernels__rms_r adds the tail and reduces. v * v is exact in
// double, so the fused multiply-add rounds as the reference's add does.
static void rms_norm_avx2(float *y, const float *x, const float *w, int64_t n, float eps)
{
    __m256d a[4];
    for (int q = 0; q < 4; q++)
        a[q] = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 4; q++) {
            const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * q));
            a[q] = _mm256_fmadd_pd(v, v, a[q]);
        }
    double s[16];
    for (int q = 0; q < 4; q++)
        _mm256_storeu_pd(s + 4 * q, a[q]);
    const float r = gl_kernels__rms_r(s, x, i, n, eps);
    const __m256 rv = _mm256_set1_ps(r);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), rv);
        _mm256_storeu_ps(y + j, w ? _mm256_mul_ps(v, _mm256_loadu_ps(w + j)) : v);
    }
    gl_kernels__rms_scale(y, x, w, j, n, r);
}

void gl_kernels__register_avx2(struct gl_kernels *k)
{
    k->attn_tile = attn_tile_avx2;
    // No vdpbf16ps: the scalar reference tile would be far slower than the AVX2 BF16 vec_dot,
    // so BF16 weights keep the row-layout path here (callers check gemm_bf16 != NULL).
    k->gemm_bf16 = NULL;
    k->attn_rows = NULL; // the vision encoder keeps attn_tile here (its scalar reference is slower)
    // Nor a token-lane Q8_0 tile (it is built on 512-bit vpdpbusd): Q8_0 keeps vec_dot here.
    k->gemm_q8_0 = NULL;
    k->swiglu = swiglu_avx2; // the AVX-512 table keeps these four
    k->gate = gate_avx2;
    k->rms_norm = rms_norm_avx2;
    k->softcap = softcap_avx2;
    k->vec_dot[GL_TYPE_F32] = vec_dot_f32;
    k->vec_dot[GL_TYPE_F16] = vec_dot_f16;
    k->vec_dot[GL_TYPE_BF16] = vec_dot_bf16;
    k->vec_dot[GL_TYPE_Q8_0] = vec_dot_q8_0_q8_0;
    k->vec_dot[GL_TYPE_Q4_0] = vec_dot_q4_0_q8_0;
    k->vec_dot[GL_TYPE_Q4_K] = vec_dot_q4_K_q8_K;
    k->vec_dot[GL_TYPE_Q5_K] = vec_dot_q5_K_q8_K;
    k->vec_dot[GL_TYPE_Q6_K] = vec_dot_q6_K_q8_K;

    k->vec_dot4[GL_TYPE_Q8_0] = vec_dot4_q8_0_q8_0;
    k->vec_dot4[GL_TYPE_Q4_K] = vec_dot4_q4_K_q8_K;
    k->vec_dot4[GL_TYPE_Q6_K] = vec_dot4_q6_K_q8_K;

    k->from_float[GL_TYPE_Q8_0] = from_float_q8_0;
    k->from_float[GL_TYPE_Q8_K] = from_float_q8_K;
    k->from_float[GL_TYPE_F16] = from_float_f16;
    k->from_float[GL_TYPE_BF16] = from_float_bf16;

    k->to_float[GL_TYPE_F16] = to_float_f16;
    k->to_float[GL_TYPE_BF16] = to_float_bf16;
    k->to_float[GL_TYPE_Q8_0] = to_float_q8_0;
    k->to_float[GL_TYPE_Q4_0] = to_float_q4_0;
    k->to_float[GL_TYPE_Q4_K] = to_float_q4_K;
    k->to_float[GL_TYPE_Q5_K] = to_float_q5_K;
    k->to_float[GL_TYPE_Q6_K] = to_float_q6_K;

    gl_kernels__register_avx2_r16(k);
}
