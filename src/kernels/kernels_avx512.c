// SPDX-License-Identifier: MIT
// kernels_avx512: AVX-512 (F/BW/VL/DQ + VNNI + BF16) variants of the weight x activation dot
// products, registered on top of the AVX2 table (activation quantizers and dequantizers stay AVX2:
// they run once per row, not once per weight). Spec: gl_vec_dot_ref in src/quant/quant.c.
// Invariants as in kernels_avx2.c: exact int32 sums per scale group (maddubs pair sums < 2^15,
// then vpdpwssd with the group scale), one float FMA per block, a horizontal sum per row.
// BF16 uses vdpbf16ps, which treats denormal inputs as zero (documented tolerance in the tests).
// vec_dot4 (F32, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) unpacks a weight row once for four activation
// rows and is bit-identical to vec_dot per token (same lanes, block order and reductions).
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <string.h>

// ---- helpers ----

GL_X86_INLINE __mmask16 tail16(int64_t r)
{
    return (__mmask16)((1u << r) - 1);
}

// 128-bit-lane pshufb control that broadcasts int16 element e (0..7) of each lane.
GL_X86_INLINE __m128i bcast16_ctl(int e)
{
    return _mm_set1_epi16((short)(((2 * e + 1) << 8) | (2 * e)));
}

// A zmm control whose four 128-bit lanes broadcast int16 elements e[0..3] respectively.
GL_X86_INLINE __m512i bcast16_ctl4(int e0, int e1, int e2, int e3)
{
    __m256i lo = _mm256_setr_m128i(bcast16_ctl(e0), bcast16_ctl(e1));
    __m256i hi = _mm256_setr_m128i(bcast16_ctl(e2), bcast16_ctl(e3));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// ---- float dots (n arbitrary; masked tails) ----

static void vec_dot_f32(int64_t n, float *s, const void *vx, const void *vy)
{
    const float *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    if (i < n) {
        __mmask16 k = tail16(n - i);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i), a1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

GL_X86_INLINE __m512 load_f16x16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static void vec_dot_f16(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(load_f16x16(x + i), load_f16x16(y + i), a0);
        a1 = _mm512_fmadd_ps(load_f16x16(x + i + 16), load_f16x16(y + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(load_f16x16(x + i), load_f16x16(y + i), a0);
    if (i < n) {
        __mmask16 k = tail16(n - i);
        __m512 xt = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, x + i));
        __m512 yt = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, y + i));
        a1 = _mm512_fmadd_ps(xt, yt, a1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// vdpbf16ps: each f32 lane += x[2l]*y[2l] + x[2l+1]*y[2l+1] (products exact, denormals as 0).
static void vec_dot_bf16(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i x0 = _mm512_loadu_si512(x + i), y0 = _mm512_loadu_si512(y + i);
        __m512i x1 = _mm512_loadu_si512(x + i + 32), y1 = _mm512_loadu_si512(y + i + 32);
        a0 = _mm512_dpbf16_ps(a0, (__m512bh)x0, (__m512bh)y0);
        a1 = _mm512_dpbf16_ps(a1, (__m512bh)x1, (__m512bh)y1);
    }
    for (; i + 32 <= n; i += 32) {
        __m512i x0 = _mm512_loadu_si512(x + i), y0 = _mm512_loadu_si512(y + i);
        a0 = _mm512_dpbf16_ps(a0, (__m512bh)x0, (__m512bh)y0);
    }
    if (i < n) {
        __mmask32 k = (__mmask32)((1ull << (n - i)) - 1);
        __m512i xt = _mm512_maskz_loadu_epi16(k, x + i), yt = _mm512_maskz_loadu_epi16(k, y + i);
        a1 = _mm512_dpbf16_ps(a1, (__m512bh)xt, (__m512bh)yt);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// ---- 32-element block dots (activation q8_0), 256-bit VNNI ----

// One block: |x| (u8, exact for -128) times y carrying x's sign (y is never -128: activation
// quants are clamped to [-127, 127]), then acc += d * sum.
GL_X86_INLINE __m256 q8_0_block(const struct gl_block_q8_0 *x, const struct gl_block_q8_0 *y,
                                __m256 acc)
{
    __m256i qx = _mm256_loadu_si256((const __m256i *)x->qs);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i p =
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(qx), _mm256_sign_epi8(qy, qx));
    return _mm256_fmadd_ps(_mm256_set1_ps(x86_fp16(x->d) * x86_fp16(y->d)), _mm256_cvtepi32_ps(p),
                           acc);
}

// sum (q - 8) * y = sum q*y - sum 8*y, both unsigned x signed VNNI.
GL_X86_INLINE __m256 q4_0_block(const struct gl_block_q4_0 *x, const struct gl_block_q8_0 *y,
                                __m256 acc)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
    __m128i b = _mm_loadu_si128((const __m128i *)x->qs);
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, qy);
    p = _mm256_sub_epi32(p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, qy));
    return _mm256_fmadd_ps(_mm256_set1_ps(x86_fp16(x->d) * x86_fp16(y->d)), _mm256_cvtepi32_ps(p),
                           acc);
}

// Four accumulators: a block is only a few cycles of work, less than one FMA latency chain.
static void vec_dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK8_0 == 0);
    const struct gl_block_q8_0 *x = vx;
    const struct gl_block_q8_0 *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int64_t nb = n / GL_QK8_0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        a0 = q8_0_block(&x[i], &y[i], a0);
        a1 = q8_0_block(&x[i + 1], &y[i + 1], a1);
        a2 = q8_0_block(&x[i + 2], &y[i + 2], a2);
        a3 = q8_0_block(&x[i + 3], &y[i + 3], a3);
    }
    for (; i < nb; i++)
        a0 = q8_0_block(&x[i], &y[i], a0);
    *s = x86_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

static void vec_dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK4_0 == 0);
    const struct gl_block_q4_0 *x = vx;
    const struct gl_block_q8_0 *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int64_t nb = n / GL_QK4_0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        a0 = q4_0_block(&x[i], &y[i], a0);
        a1 = q4_0_block(&x[i + 1], &y[i + 1], a1);
        a2 = q4_0_block(&x[i + 2], &y[i + 2], a2);
        a3 = q4_0_block(&x[i + 3], &y[i + 3], a3);
    }
    for (; i < nb; i++)
        a0 = q4_0_block(&x[i], &y[i], a0);
    *s = x86_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

// ---- k-quant dots (activation q8_K) ----

// Shared q4_K/q5_K body. A 64-element chunk j is 32 qs bytes broadcast to both halves of a zmm;
// shifting the upper half by 4 (srlv) puts sub-block 2j (low nibbles) then 2j+1 (high nibbles)
// in element order, so the activations load contiguously. q5_K adds 16 where its qh bit is set.
GL_X86_INLINE __m512i k4_chunk(__m512i sum, int j, __m512i scales16, const uint8_t *qs,
                               const uint8_t *qh, __m512i h, const int8_t *q8)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i nib_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * j)));
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(b, nib_shift), m4);
    if (qh) {
        __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * j))),
                                         _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
        q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(h, sel), q, _mm512_set1_epi8(16));
    }
    __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(q8 + 64 * j));
    __m512i sv = _mm512_shuffle_epi8(scales16, bcast16_ctl4(2 * j, 2 * j, 2 * j + 1, 2 * j + 1));
    return _mm512_dpwssd_epi32(sum, p, sv);
}

// Returns the scale-weighted int32 sums (16 lanes) of the block. Written out (not a loop) so
// every chunk's constants fold; two accumulators halve the vpdpwssd dependency chain.
GL_X86_INLINE __m512i dot_k4_block(__m128i scm, const uint8_t *qs, const uint8_t *qh,
                                   const int8_t *q8)
{
    const __m512i scales16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scm));
    __m512i h = qh ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh))
                   : _mm512_setzero_si512();
    __m512i s0 = k4_chunk(_mm512_setzero_si512(), 0, scales16, qs, qh, h, q8);
    __m512i s1 = k4_chunk(_mm512_setzero_si512(), 1, scales16, qs, qh, h, q8);
    s0 = k4_chunk(s0, 2, scales16, qs, qh, h, q8);
    s1 = k4_chunk(s1, 3, scales16, qs, qh, h, q8);
    return _mm512_add_epi32(s0, s1);
}

// (d, dmin) of a q4_K/q5_K block (adjacent fp16 at dd) times the activation scale, in lanes 0, 1:
// one conversion for both instead of two scalar ones.
GL_X86_INLINE __m128 k4_super_scales(const uint16_t *dd, float yd)
{
    uint32_t bits;
    memcpy(&bits, dd, 4);
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)bits)), _mm_set1_ps(yd));
}

// acc += d * (scale-weighted sums), acc_m += dmin * (min-weighted bsums) for one q4_K/q5_K block.
GL_X86_INLINE void k4_block(const uint16_t *dd, const uint8_t *scales, const uint8_t *qs,
                            const uint8_t *qh, const struct gl_block_q8_K *y, __m512 *acc,
                            __m256 *acc_m)
{
    const __m128i scm = x86_k4_scales_mins(scales);
    const __m128 d = k4_super_scales(dd, y->d);
    *acc_m = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(d)),
                             _mm256_cvtepi32_ps(x86_k4_min_sums(scm, y->bsums)), *acc_m);
    __m512i sum = dot_k4_block(scm, qs, qh, y->qs);
    *acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(d), _mm512_cvtepi32_ps(sum), *acc);
}

static void vec_dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q4_K *x = vx;
    const struct gl_block_q8_K *y = vy;
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++)
        k4_block(&x[i].d, x[i].scales, x[i].qs, NULL, &y[i], &acc, &acc_m);
    *s = _mm512_reduce_add_ps(acc) - x86_hsum256(acc_m);
}

static void vec_dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q5_K *x = vx;
    const struct gl_block_q8_K *y = vy;
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++)
        k4_block(&x[i].d, x[i].scales, x[i].qs, x[i].qh, &y[i], &acc, &acc_m);
    *s = _mm512_reduce_add_ps(acc) - x86_hsum256(acc_m);
}

// q6_K (layout in kernels_avx2.c). Per 128-element half: 64 ql bytes in one zmm give elements
// 0..63 (low nibbles) and 64..127 (high nibbles) in order; the 32 qh bytes, broadcast to both
// halves, are shifted per half (sllv/srlv) so the two wanted bits land at positions 4..5.
// A 16-element group is exactly one 128-bit lane of int16 pair sums, so its scale is a per-lane
// broadcast. The -32 offset is folded in once per block through bsums.
static void vec_dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q6_K *x = vx;
    const struct gl_block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x30);
    const __m512i shl_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i ctl_lo = bcast16_ctl4(0, 1, 2, 3), ctl_hi = bcast16_ctl4(4, 5, 6, 7);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums),
                                        _mm256_cvtepi8_epi16(sc8));
        __m512i sum = _mm512_zextsi256_si512(
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
        for (int h = 0; h < 2; h++) {
            __m512i l = _mm512_loadu_si512(x[i].ql + 64 * h);
            __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h)));
            __m512i hb0 = _mm512_and_si512(_mm512_sllv_epi16(qh, shl_lo), m2);
            __m512i hb1 = _mm512_and_si512(_mm512_srlv_epi16(qh, shr_hi), m2);
            // (a & m4) | b: ternary-logic truth table 0xEA with (a, m4, b).
            __m512i q0 = _mm512_ternarylogic_epi32(l, m4, hb0, 0xEA);
            __m512i q1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4, hb1, 0xEA);
            __m512i s16 =
                _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8, 8) : sc8));
            const int8_t *q8 = y[i].qs + 128 * h;
            __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512(q8));
            __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512(q8 + 64));
            sum = _mm512_dpwssd_epi32(sum, p0, _mm512_shuffle_epi8(s16, ctl_lo));
            sum = _mm512_dpwssd_epi32(sum, p1, _mm512_shuffle_epi8(s16, ctl_hi));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(x86_fp16(x[i].d) * y[i].d), _mm512_cvtepi32_ps(sum),
                              acc);
    }
    *s = _mm512_reduce_add_ps(acc);
}

// ---- four-token dots (vec_dot4): one weight-row unpack shared by four activation rows ----
// Each token keeps exactly the accumulators, lanes and block order of the single-token kernel
// above, so every result is bit-identical to vec_dot on that pair (integer lane sums are exact,
// so only the lane layout of each block's int32 vector matters, and it is the same); what is
// shared is the weight-side work: nibble/qh unpacking, scale broadcasts, fp16 conversions.

// Full unrolling of the per-token loops keeps the accumulator arrays in registers (-O2 alone
// leaves them on the stack).
#define GL_UNROLL4 _Pragma("GCC unroll 4")

#define DOT4_ROWS(T, yv, ys)                                                                       \
    const T *y[4];                                                                                 \
    GL_UNROLL4                                                                                     \
    for (int t = 0; t < 4; t++)                                                                    \
        y[t] = (const T *)((const uint8_t *)(yv) + (size_t)t * (ys));

// Shared q4_K/q5_K body: the unpacked 4-bit (q5_K: 5-bit) quants of chunk j and their scale
// vectors are built once per block, as in k4_chunk, then dotted with each token's q8.
GL_X86_INLINE void k4_block4(const uint16_t *dd, const uint8_t *scales, const uint8_t *qs,
                             const uint8_t *qh, const struct gl_block_q8_K *const y[4], int64_t i,
                             __m512 acc[4], __m256 acc_m[4])
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i nib_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m128i dup = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __m128i scm = x86_k4_scales_mins(scales);
    const __m512i scales16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scm));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scm, dup));
    // (d, dmin) as floats, broadcast once; each token's products with y->d below are the same
    // single-rounded float products k4_super_scales forms, so the results keep their bits.
    uint32_t bits;
    memcpy(&bits, dd, 4);
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128((int)bits));
    const __m512 dx = _mm512_broadcastss_ps(dw);
    const __m256 dmx = _mm256_broadcastss_ps(_mm_movehdup_ps(dw));
    __m512i h = qh ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh))
                   : _mm512_setzero_si512();
    __m512i q[4], sv[4];
    GL_UNROLL4
    for (int j = 0; j < 4; j++) {
        __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * j)));
        q[j] = _mm512_and_si512(_mm512_srlv_epi16(b, nib_shift), m4);
        if (qh) {
            __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * j))),
                                             _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
            q[j] = _mm512_mask_add_epi8(q[j], _mm512_test_epi8_mask(h, sel), q[j],
                                        _mm512_set1_epi8(16));
        }
        sv[j] = _mm512_shuffle_epi8(scales16, bcast16_ctl4(2 * j, 2 * j, 2 * j + 1, 2 * j + 1));
    }
    GL_UNROLL4
    for (int t = 0; t < 4; t++) {
        const struct gl_block_q8_K *yb = &y[t][i];
        __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)yb->bsums), mins16);
        acc_m[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmx, _mm256_set1_ps(yb->d)),
                                   _mm256_cvtepi32_ps(ms), acc_m[t]);
        // One integer chain: with four tokens in flight there is parallelism enough, and the
        // lane sums are exact in any order.
        __m512i sum = _mm512_setzero_si512();
        GL_UNROLL4
        for (int j = 0; j < 4; j++)
            sum = _mm512_dpwssd_epi32(
                sum, _mm512_maddubs_epi16(q[j], _mm512_loadu_si512(yb->qs + 64 * j)), sv[j]);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(yb->d)), _mm512_cvtepi32_ps(sum),
                                 acc[t]);
    }
}

static void vec_dot4_q4_K_q8_K(int64_t n, float *s, int64_t s_stride, const void *vx,
                               const void *vy, size_t y_stride)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q4_K *x = vx;
    DOT4_ROWS(struct gl_block_q8_K, vy, y_stride)
    __m512 acc[4];
    __m256 acc_m[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm512_setzero_ps();
        acc_m[t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / GL_QK_K; i++)
        k4_block4(&x[i].d, x[i].scales, x[i].qs, NULL, y, i, acc, acc_m);
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = _mm512_reduce_add_ps(acc[t]) - x86_hsum256(acc_m[t]);
}

static void vec_dot4_q5_K_q8_K(int64_t n, float *s, int64_t s_stride, const void *vx,
                               const void *vy, size_t y_stride)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q5_K *x = vx;
    DOT4_ROWS(struct gl_block_q8_K, vy, y_stride)
    __m512 acc[4];
    __m256 acc_m[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm512_setzero_ps();
        acc_m[t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / GL_QK_K; i++)
        k4_block4(&x[i].d, x[i].scales, x[i].qs, x[i].qh, y, i, acc, acc_m);
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = _mm512_reduce_add_ps(acc[t]) - x86_hsum256(acc_m[t]);
}

// q6_K: the two halves' quants (q0/q1 per half) and scale vectors are unpacked once per block.
static void vec_dot4_q6_K_q8_K(int64_t n, float *s, int64_t s_stride, const void *vx,
                               const void *vy, size_t y_stride)
{
    GL_ASSERT(n % GL_QK_K == 0);
    const struct gl_block_q6_K *x = vx;
    DOT4_ROWS(struct gl_block_q8_K, vy, y_stride)
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x30);
    const __m512i shl_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i ctl_lo = bcast16_ctl4(0, 1, 2, 3), ctl_hi = bcast16_ctl4(4, 5, 6, 7);
    __m512 acc[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / GL_QK_K; i++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const float dx = x86_fp16(x[i].d);
        __m512i q[4], sv[4];
        GL_UNROLL4
        for (int h = 0; h < 2; h++) {
            __m512i l = _mm512_loadu_si512(x[i].ql + 64 * h);
            __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h)));
            __m512i hb0 = _mm512_and_si512(_mm512_sllv_epi16(qh, shl_lo), m2);
            __m512i hb1 = _mm512_and_si512(_mm512_srlv_epi16(qh, shr_hi), m2);
            q[2 * h] = _mm512_ternarylogic_epi32(l, m4, hb0, 0xEA);
            q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4, hb1, 0xEA);
            __m512i s16 =
                _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8, 8) : sc8));
            sv[2 * h] = _mm512_shuffle_epi8(s16, ctl_lo);
            sv[2 * h + 1] = _mm512_shuffle_epi8(s16, ctl_hi);
        }
        GL_UNROLL4
        for (int t = 0; t < 4; t++) {
            const struct gl_block_q8_K *yb = &y[t][i];
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)yb->bsums), sc16);
            __m512i sum = _mm512_zextsi256_si512(
                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
            GL_UNROLL4
            for (int k = 0; k < 4; k++)
                sum = _mm512_dpwssd_epi32(
                    sum, _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(yb->qs + 64 * k)), sv[k]);
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(dx * yb->d), _mm512_cvtepi32_ps(sum), acc[t]);
        }
    }
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = _mm512_reduce_add_ps(acc[t]);
}

// q8_0 / q4_0: per token the same four accumulators (block index mod 4, tail blocks in the
// first) as the one-token kernels; the weight block's quants and fp16 scale are decoded once.
GL_X86_INLINE void q8_0_block4(const struct gl_block_q8_0 *xb,
                               const struct gl_block_q8_0 *const y[4], int64_t i, __m256 a[4])
{
    const __m256i qx = _mm256_loadu_si256((const __m256i *)xb->qs), ax = _mm256_abs_epi8(qx);
    const float dx = x86_fp16(xb->d);
    GL_UNROLL4
    for (int t = 0; t < 4; t++) {
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[t][i].qs);
        __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, _mm256_sign_epi8(qy, qx));
        a[t] =
            _mm256_fmadd_ps(_mm256_set1_ps(dx * x86_fp16(y[t][i].d)), _mm256_cvtepi32_ps(p), a[t]);
    }
}

GL_X86_INLINE void q4_0_block4(const struct gl_block_q4_0 *xb,
                               const struct gl_block_q8_0 *const y[4], int64_t i, __m256 a[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
    __m128i b = _mm_loadu_si128((const __m128i *)xb->qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4);
    const float dx = x86_fp16(xb->d);
    GL_UNROLL4
    for (int t = 0; t < 4; t++) {
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[t][i].qs);
        __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, qy);
        p = _mm256_sub_epi32(p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, qy));
        a[t] =
            _mm256_fmadd_ps(_mm256_set1_ps(dx * x86_fp16(y[t][i].d)), _mm256_cvtepi32_ps(p), a[t]);
    }
}

#define DOT4_BLOCK32(name, WT, block4)                                                             \
    static void name(int64_t n, float *s, int64_t s_stride, const void *vx, const void *vy,        \
                     size_t y_stride)                                                              \
    {                                                                                              \
        GL_ASSERT(n % 32 == 0);                                                                    \
        const WT *x = vx;                                                                          \
        DOT4_ROWS(struct gl_block_q8_0, vy, y_stride)                                              \
        __m256 a0[4], a1[4], a2[4], a3[4];                                                         \
        GL_UNROLL4                                                                                 \
        for (int t = 0; t < 4; t++)                                                                \
            a0[t] = a1[t] = a2[t] = a3[t] = _mm256_setzero_ps();                                   \
        const int64_t nb = n / 32;                                                                 \
        int64_t i = 0;                                                                             \
        for (; i + 4 <= nb; i += 4) {                                                              \
            block4(&x[i], y, i, a0);                                                               \
            block4(&x[i + 1], y, i + 1, a1);                                                       \
            block4(&x[i + 2], y, i + 2, a2);                                                       \
            block4(&x[i + 3], y, i + 3, a3);                                                       \
        }                                                                                          \
        for (; i < nb; i++)                                                                        \
            block4(&x[i], y, i, a0);                                                               \
        GL_UNROLL4                                                                                 \
        for (int t = 0; t < 4; t++)                                                                \
            s[t * s_stride] = x86_hsum256(                                                         \
                _mm256_add_ps(_mm256_add_ps(a0[t], a1[t]), _mm256_add_ps(a2[t], a3[t])));          \
    }

DOT4_BLOCK32(vec_dot4_q8_0_q8_0, struct gl_block_q8_0, q8_0_block4)
DOT4_BLOCK32(vec_dot4_q4_0_q8_0, struct gl_block_q4_0, q4_0_block4)

// f32: the weight vectors are loaded once for the four tokens; per token the same four
// accumulators, masked tail and reduction as vec_dot_f32.
static void vec_dot4_f32(int64_t n, float *s, int64_t s_stride, const void *vx, const void *vy,
                         size_t y_stride)
{
    const float *x = vx;
    DOT4_ROWS(float, vy, y_stride)
    __m512 a0[4], a1[4], a2[4], a3[4];
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        a0[t] = a1[t] = a2[t] = a3[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
        __m512 x2 = _mm512_loadu_ps(x + i + 32), x3 = _mm512_loadu_ps(x + i + 48);
        GL_UNROLL4
        for (int t = 0; t < 4; t++) {
            a0[t] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(y[t] + i), a0[t]);
            a1[t] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(y[t] + i + 16), a1[t]);
            a2[t] = _mm512_fmadd_ps(x2, _mm512_loadu_ps(y[t] + i + 32), a2[t]);
            a3[t] = _mm512_fmadd_ps(x3, _mm512_loadu_ps(y[t] + i + 48), a3[t]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m512 x0 = _mm512_loadu_ps(x + i);
        GL_UNROLL4
        for (int t = 0; t < 4; t++)
            a0[t] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(y[t] + i), a0[t]);
    }
    if (i < n) {
        __mmask16 k = tail16(n - i);
        __m512 xt = _mm512_maskz_loadu_ps(k, x + i);
        GL_UNROLL4
        for (int t = 0; t < 4; t++)
            a1[t] = _mm512_fmadd_ps(xt, _mm512_maskz_loadu_ps(k, y[t] + i), a1[t]);
    }
    GL_UNROLL4
    for (int t = 0; t < 4; t++)
        s[t * s_stride] = _mm512_reduce_add_ps(
            _mm512_add_ps(_mm512_add_ps(a0[t], a1[t]), _mm512_add_ps(a2[t], a3[t])));
}

// ---- registration ----

void gl_kernels__register_avx512(struct gl_kernels *k)
{
    k->vec_dot[GL_TYPE_F32] = vec_dot_f32;
    k->vec_dot[GL_TYPE_F16] = vec_dot_f16;
    k->vec_dot[GL_TYPE_BF16] = vec_dot_bf16;
    k->vec_dot[GL_TYPE_Q8_0] = vec_dot_q8_0_q8_0;
    k->vec_dot[GL_TYPE_Q4_0] = vec_dot_q4_0_q8_0;
    k->vec_dot[GL_TYPE_Q4_K] = vec_dot_q4_K_q8_K;
    k->vec_dot[GL_TYPE_Q5_K] = vec_dot_q5_K_q8_K;
    k->vec_dot[GL_TYPE_Q6_K] = vec_dot_q6_K_q8_K;

    k->vec_dot4[GL_TYPE_F32] = vec_dot4_f32;
    k->vec_dot4[GL_TYPE_Q8_0] = vec_dot4_q8_0_q8_0;
    k->vec_dot4[GL_TYPE_Q4_0] = vec_dot4_q4_0_q8_0;
    k->vec_dot4[GL_TYPE_Q4_K] = vec_dot4_q4_K_q8_K;
    k->vec_dot4[GL_TYPE_Q5_K] = vec_dot4_q5_K_q8_K;
    k->vec_dot4[GL_TYPE_Q6_K] = vec_dot4_q6_K_q8_K;
    gl_kernels__register_avx512_r16(k);
    gl_kernels__register_avx512_attn(k);
    gl_kernels__register_avx512_bf16(k);
    gl_kernels__register_avx512_q8(k);
}
