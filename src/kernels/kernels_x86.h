// SPDX-License-Identifier: MIT
// kernels: small x86 helpers shared by the ISA files (kernels_avx2.c, kernels_avx512.c and the
// r16 GEMMs). Needs at least AVX2 + F16C, so only files compiled with those flags may include it;
// kernels.c must not.
#pragma once

#include <immintrin.h>
#include <stdint.h>

// Hot-loop helpers must be inlined: a call boundary spills the vector accumulators.
#define GL_X86_INLINE static inline __attribute__((always_inline))

GL_X86_INLINE float x86_fp16(uint16_t h)
{
    return _cvtsh_ss(h);
}

// Horizontal sum of 8 floats.
GL_X86_INLINE float x86_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The 12-byte q4_K/q5_K scale field (8 scales, 8 mins, 6 bits each: bytes 0..3 hold the low 6
// bits of scales 0..3 and their top 2 bits of scales 4..7; bytes 4..7 the same for mins; bytes
// 8..11 the low 4 bits of scales 4..7 (low nibble) and mins 4..7 (high nibble)) as one register:
// bytes 0..7 = scales, 8..15 = mins. Computed in SIMD on the field's dwords w0..w2, since scalar
// unpacking plus GPR->XMM moves showed up as a large share of the block. Reads 16 bytes at q: the 4
// bytes past the field are the block's own quants.
GL_X86_INLINE __m128i x86_k4_scales_mins(const uint8_t *q)
{
    __m128i v = _mm_loadu_si128((const __m128i *)q);
    __m128i lo =
        _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    lo = _mm_and_si128(lo, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i hi = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    hi = _mm_and_si128(hi, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(lo, hi);
}

// Sum over the 8 sub-blocks of m[j] * (bsums[2j] + bsums[2j+1]), as 8 int32 lanes; scm is
// x86_k4_scales_mins() (mins in bytes 8..15), bsums the q8_K block's 16 group sums.
GL_X86_INLINE __m256i x86_k4_min_sums(__m128i scm, const int16_t *bsums)
{
    const __m128i dup = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    __m128i mb = _mm_shuffle_epi8(scm, dup);
    __m256i bs = _mm256_loadu_si256((const __m256i *)bsums);
    return _mm256_madd_epi16(bs, _mm256_cvtepu8_epi16(mb));
}

// Cephes' expf, shared by the AVX2 activations and the AVX-512 attention: x = n ln2 + r with n =
// round(x log2 e) and ln2 in two parts (the high one exact in n ln2), so |r| <= ln2 / 2; then
// e^r = 1 + r + r^2 p(r), p's coefficients highest first. Within 2 ulp of expf.
#define X86_EXP_LOG2E  1.44269504088896341f
#define X86_EXP_LN2_HI 0.693359375f
#define X86_EXP_LN2_LO -2.12194440e-4f
// (An initializer, not an array here: files that include this and do not use it stay clean under
// -Wunused-const-variable=2.)
#define X86_EXP_POLY                                                                               \
    {                                                                                              \
        1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,  \
            5.0000001201e-1f                                                                       \
    }

// ---- shared by the r16 kernels (gemm_r16_avx2.c, gemm_r16_avx512.c) ----

// Prefetches into L1 the lines of the `bytes` bytes that start `ahead` bytes past p, one per 64
// bytes. The addresses are formed as integers, not as pointers past the object: they may lie past
// the matrix, where a prefetch never faults.
GL_X86_INLINE void x86_prefetch_ahead(const void *p, int bytes, int ahead)
{
    for (int i = 0; i < bytes; i += 64)
        _mm_prefetch((const char *)((uintptr_t)p + (uintptr_t)(ahead + i)), _MM_HINT_T0);
}

// Scale and min j (0..7) of 16 rows from the transposed 12-byte fields s[0..11] (one xmm each,
// byte r = row r), decoded lane-wise as scale_min_k4 does per row. The 16-bit shifts move bits
// across bytes, but the masks keep only bits that came from the same byte.
GL_X86_INLINE void x86_q4k_r16_scale_min(const __m128i s[12], int j, __m128i *sc, __m128i *m)
{
    const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(0x0f), m30 = _mm_set1_epi8(0x30);
    if (j < 4) {
        *sc = _mm_and_si128(s[j], m6);
        *m = _mm_and_si128(s[j + 4], m6);
    } else {
        *sc = _mm_or_si128(_mm_and_si128(s[j + 4], m4),
                           _mm_and_si128(_mm_srli_epi16(s[j - 4], 2), m30));
        *m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(s[j + 4], 4), m4),
                          _mm_and_si128(_mm_srli_epi16(s[j], 2), m30));
    }
}

// One specialised body per token count: T is a constant inside, so the per-token arrays live in
// registers.
#define GL_X86_R16_ENTRY(name, body, blk)                                                          \
    static void name(int64_t n_in, const void *w, const void *act, size_t act_stride, int n_tok,   \
                     float *out, int64_t out_stride)                                               \
    {                                                                                              \
        GL_ASSERT(n_in % GL_QK_K == 0 && n_tok >= 1 && n_tok <= GL_R16_MAX_TOK);                   \
        const int64_t nb = n_in / GL_QK_K;                                                         \
        const blk *x = w;                                                                          \
        const uint8_t *a = act;                                                                    \
        switch (n_tok) {                                                                           \
        case 1:                                                                                    \
            body(nb, x, a, act_stride, 1, out, out_stride);                                        \
            break;                                                                                 \
        case 2:                                                                                    \
            body(nb, x, a, act_stride, 2, out, out_stride);                                        \
            break;                                                                                 \
        case 3:                                                                                    \
            body(nb, x, a, act_stride, 3, out, out_stride);                                        \
            break;                                                                                 \
        case 4:                                                                                    \
            body(nb, x, a, act_stride, 4, out, out_stride);                                        \
            break;                                                                                 \
        case 5:                                                                                    \
            body(nb, x, a, act_stride, 5, out, out_stride);                                        \
            break;                                                                                 \
        case 6:                                                                                    \
            body(nb, x, a, act_stride, 6, out, out_stride);                                        \
            break;                                                                                 \
        case 7:                                                                                    \
            body(nb, x, a, act_stride, 7, out, out_stride);                                        \
            break;                                                                                 \
        default:                                                                                   \
            body(nb, x, a, act_stride, 8, out, out_stride);                                        \
            break;                                                                                 \
        }                                                                                          \
    }
