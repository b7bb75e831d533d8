// SPDX-License-Identifier: MIT
// kernels_int: private to src/kernels/. Per-ISA registration functions that overwrite entries
// of a dispatch table already filled with the reference functions (and, at the end, the pieces
// of rms_norm that every ISA shares). Each registration function is defined in the file
// compiled with that ISA's flags and must only be called after the CPU has been checked.
#pragma once

#include "kernels/kernels.h"

#include <math.h>

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

// rms_norm's r (kernels.h) from its 16 lane sums s, which hold the squares of x[0..i): adds those
// of x[i..n) to the same lanes, reduces the lanes pairwise (16 -> 8 -> 4 -> 2 -> 1) and rounds
// 1 / sqrt(ss / n + eps) to float. Every ISA ends here, so the order of the adds is one code.
static inline float gl_kernels__rms_r(double s[16], const float *x, int64_t i, int64_t n, float eps)
{
    for (; i < n; i++)
        s[i % 16] += (double)x[i] * (double)x[i];
    double t[8];
    for (int l = 0; l < 8; l++)
        t[l] = s[l] + s[l + 8];
    for (int w = 4; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            t[l] += t[l + w];
    return (float)(1.0 / sqrt(t[0] / (double)n + (double)eps));
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
