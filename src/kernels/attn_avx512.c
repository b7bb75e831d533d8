// SPDX-License-Identifier: MIT
// attn_avx512: the attention tile (kernels.h, spec ref_attn_tile in kernels.c) with the 16 keys
// of a tile in the 16 lanes of a zmm: a query row's scores are D broadcast-FMAs against the
// transposed keys (no horizontal sums), and the output row takes one FMA per key and 16 values.
// The per-lane arithmetic is the reference's, in the same order: fmaf over d ascending, one
// multiply by the scale, expf per visible key (the scalar libm expf, as the reference calls),
// the sum of the weights in key order, then the output FMAs in key order.
// Below it, attn_rows (kernels.h): the vision encoder's long runs, with 64-key chunks of scores
// in registers and a vector exp, within a few ulps of the reference instead of bit-equal.
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

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

// ---- attn_rows (kernels.h; spec ref_attn_rows) ----

// e^x for x <= 0 (softmax arguments): Cephes' expf (kernels_x86.h), then scalef by 2^n.
// x below -87.3 (and -inf) is clamped there: e^-87.3 = 1.2e-38, below every other weight's
// rounding; masked keys are zeroed by the caller.
GL_X86_INLINE __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(X86_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(X86_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(X86_EXP_LN2_LO), r);
    static const float c[6] = X86_EXP_POLY;
    __m512 p = _mm512_set1_ps(c[0]);
    for (int k = 1; k < 6; k++)
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c[k]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

enum { CH_V = GL_ATTN_CHUNK / 16 }; // zmm per chunk row of scores (4)
// The loops over rows and registers below have constant bounds once inlined; fully unrolled, their
// arrays of __m512 become registers (rolled, GCC -O2 keeps them in memory: 38 GFLOPS, not ~100).
#define GL_UNROLL _Pragma("GCC unroll 8")

// R query rows (1..4) against one chunk of nc keys (transposed in KT [D][64], zero beyond nc):
// the R x 64 scores in 4R accumulators (one broadcast of q per row and d, 4 key loads per d),
// then per row the online-softmax update; the weights go to P [R][64] (0 beyond nc) and the
// factor on the row's earlier output to corr[r].
GL_X86_INLINE void chunk_scores(int R, int D, const float *q, int64_t q_stride, const float *KT,
                                int nc, float scale, float *m, float *l, float *P, float *corr)
{
    __m512 acc[4][CH_V];
    GL_UNROLL
    for (int r = 0; r < R; r++)
        GL_UNROLL
    for (int c = 0; c < CH_V; c++)
        acc[r][c] = _mm512_setzero_ps();
    for (int d = 0; d < D; d++) {
        __m512 kt[CH_V];
        GL_UNROLL
        for (int c = 0; c < CH_V; c++)
            kt[c] = _mm512_load_ps(KT + d * GL_ATTN_CHUNK + 16 * c);
        GL_UNROLL
        for (int r = 0; r < R; r++) {
            const __m512 b = _mm512_set1_ps(q[r * q_stride + d]);
            GL_UNROLL
            for (int c = 0; c < CH_V; c++)
                acc[r][c] = _mm512_fmadd_ps(b, kt[c], acc[r][c]);
        }
    }
    __mmask16 vis[CH_V];
    GL_UNROLL
    for (int c = 0; c < CH_V; c++) {
        int n = nc - 16 * c;
        vis[c] = n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    GL_UNROLL
    for (int r = 0; r < R; r++) {
        __m512 s[CH_V], mxv = ninf;
        GL_UNROLL
        for (int c = 0; c < CH_V; c++) {
            s[c] = _mm512_mask_mul_ps(ninf, vis[c], acc[r][c], _mm512_set1_ps(scale));
            mxv = _mm512_max_ps(mxv, s[c]);
        }
        const float mt = _mm512_reduce_max_ps(mxv), mx = mt > m[r] ? mt : m[r];
        corr[r] = expf(m[r] - mx); // 0 on the first chunk (m = -inf)
        const __m512 mb = _mm512_set1_ps(mx);
        __m512 sum = _mm512_setzero_ps();
        GL_UNROLL
        for (int c = 0; c < CH_V; c++) {
            __m512 p = _mm512_maskz_mov_ps(vis[c], exp_ps(_mm512_sub_ps(s[c], mb)));
            sum = _mm512_add_ps(sum, p);
            _mm512_store_ps(P + r * GL_ATTN_CHUNK + 16 * c, p);
        }
        l[r] = l[r] * corr[r] + _mm512_reduce_add_ps(sum);
        m[r] = mx;
    }
}

// O[r] = O[r] corr[r] + sum_j P[r][j] v_j over the chunk, for R rows and C zmm (16 C floats of
// the head) from d0: 4 x 6 accumulators and 6 value registers at most; each key's values are
// loaded once for the R rows.
GL_X86_INLINE void chunk_pv(int R, int C, int D, const float *P, const float *corr, const float *v,
                            int64_t v_stride, int nc, int d0, float *O)
{
    __m512 o[4][6];
    GL_UNROLL
    for (int r = 0; r < R; r++)
        GL_UNROLL
    for (int c = 0; c < C; c++)
        o[r][c] = _mm512_mul_ps(_mm512_load_ps(O + r * D + d0 + 16 * c), _mm512_set1_ps(corr[r]));
    for (int j = 0; j < nc; j++) {
        const float *vj = v + j * v_stride + d0;
        __m512 vv[6];
        GL_UNROLL
        for (int c = 0; c < C; c++)
            vv[c] = _mm512_loadu_ps(vj + 16 * c);
        GL_UNROLL
        for (int r = 0; r < R; r++) {
            const __m512 b = _mm512_set1_ps(P[r * GL_ATTN_CHUNK + j]);
            GL_UNROLL
            for (int c = 0; c < C; c++)
                o[r][c] = _mm512_fmadd_ps(b, vv[c], o[r][c]);
        }
    }
    GL_UNROLL
    for (int r = 0; r < R; r++)
        GL_UNROLL
    for (int c = 0; c < C; c++)
        _mm512_store_ps(O + r * D + d0 + 16 * c, o[r][c]);
}

// One row group (R constant after inlining) against one chunk.
GL_X86_INLINE void chunk_rows(int R, int D, const float *q, int64_t q_stride, const float *KT,
                              const float *v, int64_t v_stride, int nc, float scale, float *m,
                              float *l, float *P, float *O)
{
    float corr[4];
    chunk_scores(R, D, q, q_stride, KT, nc, scale, m, l, P, corr);
    for (int d0 = 0; d0 < D; d0 += 96) {
        switch ((D - d0) / 16 < 6 ? (D - d0) / 16 : 6) {
        case 1:
            chunk_pv(R, 1, D, P, corr, v, v_stride, nc, d0, O);
            break;
        case 2:
            chunk_pv(R, 2, D, P, corr, v, v_stride, nc, d0, O);
            break;
        case 3:
            chunk_pv(R, 3, D, P, corr, v, v_stride, nc, d0, O);
            break;
        case 4:
            chunk_pv(R, 4, D, P, corr, v, v_stride, nc, d0, O);
            break;
        case 5:
            chunk_pv(R, 5, D, P, corr, v, v_stride, nc, d0, O);
            break;
        default:
            chunk_pv(R, 6, D, P, corr, v, v_stride, nc, d0, O);
            break;
        }
    }
}

static void attn_rows_avx512(int D, int n_q, const float *q, int64_t q_stride, int n_k,
                             const float *k, int64_t k_stride, const float *v, int64_t v_stride,
                             float scale, float *out, int64_t out_stride, float *scratch)
{
    GL_ASSERT(D >= 16 && D <= 256 && D % 16 == 0 && n_q >= 1 && n_k >= 1);
    GL_ASSERT(((uintptr_t)scratch & 63) == 0);
    const int64_t n16 = ((int64_t)n_q + 15) / 16 * 16; // gl_attn_rows_scratch's layout
    float *O = scratch, *m = O + n16 * D, *l = m + n16, *KT = l + n16, *P = KT + D * GL_ATTN_CHUNK;
    memset(O, 0, (size_t)n_q * (size_t)D * sizeof *O);
    for (int r = 0; r < n_q; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (int c0 = 0; c0 < n_k; c0 += GL_ATTN_CHUNK) {
        const int nc = n_k - c0 < GL_ATTN_CHUNK ? n_k - c0 : GL_ATTN_CHUNK;
        // The chunk's keys transposed once for all n_q rows; columns past nc stay 0.
        if (nc < GL_ATTN_CHUNK)
            memset(KT, 0, (size_t)D * GL_ATTN_CHUNK * sizeof *KT);
        for (int j = 0; j < nc; j++) {
            const float *kj = k + (int64_t)(c0 + j) * k_stride;
            for (int d = 0; d < D; d++)
                KT[d * GL_ATTN_CHUNK + j] = kj[d];
        }
        const float *vc = v + (int64_t)c0 * v_stride;
        int r = 0;
        for (; r + 4 <= n_q; r += 4)
            chunk_rows(4, D, q + r * q_stride, q_stride, KT, vc, v_stride, nc, scale, m + r, l + r,
                       P, O + (int64_t)r * D);
        switch (n_q - r) {
        case 1:
            chunk_rows(1, D, q + r * q_stride, q_stride, KT, vc, v_stride, nc, scale, m + r, l + r,
                       P, O + (int64_t)r * D);
            break;
        case 2:
            chunk_rows(2, D, q + r * q_stride, q_stride, KT, vc, v_stride, nc, scale, m + r, l + r,
                       P, O + (int64_t)r * D);
            break;
        case 3:
            chunk_rows(3, D, q + r * q_stride, q_stride, KT, vc, v_stride, nc, scale, m + r, l + r,
                       P, O + (int64_t)r * D);
            break;
        default:
            break;
        }
    }
    for (int r = 0; r < n_q; r++) {
        const __m512 inv = _mm512_set1_ps(l[r]);
        for (int d = 0; d < D; d += 16)
            _mm512_storeu_ps(out + r * out_stride + d,
                             _mm512_div_ps(_mm512_load_ps(O + (int64_t)r * D + d), inv));
    }
}

void gl_kernels__register_avx512_attn(struct gl_kernels *k)
{
    k->attn_tile = attn_tile_avx512;
    k->attn_rows = attn_rows_avx512;
}
