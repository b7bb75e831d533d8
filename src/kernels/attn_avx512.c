// SPDX-License-Identifier: MIT
// attn_avx512: the attention tile (kernels.h, spec ref_attn_tile in kernels.c) with the 16 keys
// of a tile in the 16 lanes of a zmm: a query row's scores are D broadcast-FMAs against the
// transposed keys (no horizontal sums), and the output row takes one FMA per key and 16 values.
// The per-lane arithmetic is the reference's, in the same order: fmaf over d ascending, one
// multiply by the scale, expf per visible key (the scalar libm expf, as the reference calls),
// the sum of the weights in key order, then the output FMAs in key order.
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <math.h>

// Online-softmax update of one row from its 16 raw scores (kernels.h).
GL_X86_INLINE void row_update(int D, __m512 acc, __mmask16 vis, int klo, int khi, float scale,
                              const float *V, float *m, float *l, float *o)
{
    __m512 s = _mm512_mul_ps(acc, _mm512_set1_ps(scale));
    float mt = _mm512_mask_reduce_max_ps(vis, s);
    const float mx = mt > *m ? mt : *m;
    const float corr = expf(*m - mx);
    float w[GL_ATTN_TILE], sum = *l * corr;
    _mm512_storeu_ps(w, s);
    for (int k = klo; k < khi; k++) {
        w[k] = expf(w[k] - mx);
        sum += w[k];
    }
    *m = mx;
    *l = sum;
    const __m512 cv = _mm512_set1_ps(corr);
    for (int d = 0; d < D; d += 16) {
        __m512 ov = _mm512_mul_ps(_mm512_loadu_ps(o + d), cv);
        for (int k = klo; k < khi; k++)
            ov = _mm512_fmadd_ps(_mm512_set1_ps(w[k]), _mm512_loadu_ps(V + k * D + d), ov);
        _mm512_storeu_ps(o + d, ov);
    }
}

static void attn_tile_avx512(int D, int n_rows, const float *q, const float *KT, const float *V,
                             int klo, int khi, float scale, float *m, float *l, float *O)
{
    GL_ASSERT(0 <= klo && klo < khi && khi <= GL_ATTN_TILE && D % 16 == 0);
    const __mmask16 vis = (__mmask16)(((1u << khi) - 1) & ~((1u << klo) - 1));
    int r = 0;
    // Four rows at a time: each row's sum over d stays one FMA chain (the reference's order),
    // and four independent chains hide the FMA latency.
    for (; r + 4 <= n_rows; r += 4) {
        const float *q0 = q + (size_t)r * (size_t)D;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < D; d++) {
            __m512 kt = _mm512_loadu_ps(KT + d * GL_ATTN_TILE);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[d]), kt, a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(q0[D + d]), kt, a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(q0[2 * D + d]), kt, a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(q0[3 * D + d]), kt, a3);
        }
        const __m512 a[4] = {a0, a1, a2, a3};
        for (int i = 0; i < 4; i++)
            row_update(D, a[i], vis, klo, khi, scale, V, &m[r + i], &l[r + i],
                       O + (size_t)(r + i) * (size_t)D);
    }
    for (; r < n_rows; r++) {
        const float *qr = q + (size_t)r * (size_t)D;
        __m512 acc = _mm512_setzero_ps();
        for (int d = 0; d < D; d++)
            acc =
                _mm512_fmadd_ps(_mm512_set1_ps(qr[d]), _mm512_loadu_ps(KT + d * GL_ATTN_TILE), acc);
        row_update(D, acc, vis, klo, khi, scale, V, &m[r], &l[r], O + (size_t)r * (size_t)D);
    }
}

void gl_kernels__register_avx512_attn(struct gl_kernels *k)
{
    k->attn_tile = attn_tile_avx512;
}
