// SPDX-License-Identifier: MIT
// kernels_int: private to src/kernels/. Per-ISA registration functions that overwrite entries
// of a dispatch table already filled with the reference functions. Each is defined in the file
// compiled with that ISA's flags and must only be called after the CPU has been checked.
#pragma once

#include "kernels/kernels.h"

void gl_kernels__register_avx2(struct gl_kernels *k);
void gl_kernels__register_avx512(struct gl_kernels *k);
// The r16 kernels (gemm_r16_avx2.c, gemm_r16_avx512.c), called by gl_kernels__register_avx2 /
// gl_kernels__register_avx512.
void gl_kernels__register_avx2_r16(struct gl_kernels *k);
void gl_kernels__register_avx512_r16(struct gl_kernels *k);
// The attention tile (attn_avx512.c), called by gl_kernels__register_avx512.
void gl_kernels__register_avx512_attn(struct gl_kernels *k);
// The BF16 token-lane tile (gemm_bf16_avx512.c), called by gl_kernels__register_avx512.
void gl_kernels__register_avx512_bf16(struct gl_kernels *k);
// The Q8_0 token-lane tile (gemm_q8_avx512.c), called by gl_kernels__register_avx512.
void gl_kernels__register_avx512_q8(struct gl_kernels *k);

// rms_norm's reduction of its 16 lane sums (kernels.h): halves added pairwise, 16 -> 8 -> 4 ->
// 2 -> 1, the same in every ISA.
static inline double gl_kernels__sumsq16(const double s[16])
{
    double t[8];
    for (int i = 0; i < 8; i++)
        t[i] = s[i] + s[i + 8];
    for (int w = 4; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            t[i] += t[i + w];
    return t[0];
}

// rms_norm's second pass (kernels.h), the scalar form: the SIMD forms multiply in the same order.
static inline void gl_kernels__rms_scale(float *y, const float *x, const float *w, int64_t i0,
                                         int64_t n, float r)
{
    if (w)
        for (int64_t i = i0; i < n; i++)
            y[i] = x[i] * r * w[i];
    else
        for (int64_t i = i0; i < n; i++)
            y[i] = x[i] * r;
}
