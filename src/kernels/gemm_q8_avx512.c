// SPDX-License-Identifier: MIT
// gemm_q8_avx512: the Q8_0 token-lane tile (kernels.h gl_gemm_q8_0_fn, spec ref_gemm_q8_0 in
// kernels.c), the int8 analogue of gemm_bf16_avx512.c. One zmm holds one k-quad of 16 tokens
// (quants + 128 as u8, packed by gl_pack_q8_0); a dword broadcast of the same quad of one weight
// row (s8) turns vpdpbusd into 64 multiply-adds into 16 per-token int32 lanes. Per 32-element
// block each int32 accumulator starts at the row's correction -128 * sum(w) (a broadcast load,
// no ALU work), takes 8 vpdpbusd, and so ends at the exact block sum (|partial sums| < 2^21, no
// wrap); then one cvtdq2ps, one mul of the two scales (exact) and one fma into the f32
// accumulator: 11 vector ops per 8 vpdpbusd, so at most ~73% of the vpdpbusd peak. A call keeps
// n_groups x n_cols int32 and f32 accumulators (up to 2 x 6, 24 zmm) in registers for the whole
// block range: per quad it loads n_groups activation vectors and broadcasts n_cols weight
// dwords (each used n_groups times), 8 loads per 12 vpdpbusd at the full tile. The integer sums
// are exact and the f32 operations are the reference's, so the tile equals it bit for bit.
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <string.h>

#define Q8_UNROLL _Pragma("GCC unroll 8")

GL_X86_INLINE void q8_tile(int64_t n_blocks, const uint8_t *act, size_t gs, const int ng,
                           const struct gl_block_q8_0 *w, const struct gl_q8_0_wsum *ws, size_t wst,
                           const int nc, float *tile, size_t ts, int accumulate)
{
    __m512 F[GL_Q8_MAX_GROUPS][GL_Q8_MAX_COLS];
    Q8_UNROLL
    for (int c = 0; c < nc; c++)
        Q8_UNROLL
    for (int g = 0; g < ng; g++)
        F[g][c] = accumulate ? _mm512_loadu_ps(tile + (size_t)c * ts + GL_Q8_GROUP * g)
                             : _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *ab = act + (size_t)b * GL_Q8_BLOCK_BYTES;
        __m512i C[GL_Q8_MAX_GROUPS][GL_Q8_MAX_COLS];
        Q8_UNROLL
        for (int c = 0; c < nc; c++) {
            const __m512i corr = _mm512_set1_epi32(ws[(size_t)c * wst + (size_t)b].corr);
            Q8_UNROLL
            for (int g = 0; g < ng; g++)
                C[g][c] = corr;
        }
        Q8_UNROLL
        for (int q = 0; q < 8; q++) {
            __m512i A[GL_Q8_MAX_GROUPS];
            Q8_UNROLL
            for (int g = 0; g < ng; g++)
                A[g] = _mm512_loadu_si512(ab + (size_t)g * gs + 64 * q);
            Q8_UNROLL
            for (int c = 0; c < nc; c++) {
                int32_t d;
                memcpy(&d, w[(size_t)c * wst + (size_t)b].qs + 4 * q, 4);
                const __m512i bw = _mm512_set1_epi32(d);
                Q8_UNROLL
                for (int g = 0; g < ng; g++)
                    C[g][c] = _mm512_dpbusd_epi32(C[g][c], A[g], bw);
            }
        }
        __m512 D[GL_Q8_MAX_GROUPS];
        Q8_UNROLL
        for (int g = 0; g < ng; g++)
            D[g] = _mm512_loadu_ps(ab + (size_t)g * gs + 32 * GL_Q8_GROUP);
        Q8_UNROLL
        for (int c = 0; c < nc; c++) {
            const __m512 dw = _mm512_set1_ps(ws[(size_t)c * wst + (size_t)b].d);
            Q8_UNROLL
            for (int g = 0; g < ng; g++)
                F[g][c] =
                    _mm512_fmadd_ps(_mm512_mul_ps(dw, D[g]), _mm512_cvtepi32_ps(C[g][c]), F[g][c]);
        }
    }
    Q8_UNROLL
    for (int c = 0; c < nc; c++)
        Q8_UNROLL
    for (int g = 0; g < ng; g++)
        _mm512_storeu_ps(tile + (size_t)c * ts + GL_Q8_GROUP * g, F[g][c]);
}

// One specialised body per (groups, columns): both are constants inside, so the accumulators
// live in registers.
#define Q8_CASE(G, N)                                                                              \
    case (G)*16 + (N):                                                                             \
        q8_tile(n_blocks, act, group_stride, G, w, ws, w_stride, N, tile, tile_stride,             \
                accumulate);                                                                       \
        break;
#define Q8_CASES(G)                                                                                \
    Q8_CASE(G, 1)                                                                                  \
    Q8_CASE(G, 2)                                                                                  \
    Q8_CASE(G, 3)                                                                                  \
    Q8_CASE(G, 4)                                                                                  \
    Q8_CASE(G, 5)                                                                                  \
    Q8_CASE(G, 6)

static void gemm_q8_0(int64_t n_blocks, const uint8_t *act, size_t group_stride, int n_groups,
                      const struct gl_block_q8_0 *w, const struct gl_q8_0_wsum *ws, size_t w_stride,
                      int n_cols, float *tile, size_t tile_stride, int accumulate)
{
    _Static_assert(GL_Q8_MAX_GROUPS == 2 && GL_Q8_MAX_COLS == 6, "update the cases");
    GL_ASSERT(n_groups >= 1 && n_groups <= GL_Q8_MAX_GROUPS && n_cols >= 1 &&
              n_cols <= GL_Q8_MAX_COLS && n_blocks >= 0);
    switch (n_groups * 16 + n_cols) {
        Q8_CASES(1)
        Q8_CASES(2)
    default:
        GL_ASSERT(0);
    }
}

void gl_kernels__register_avx512_q8(struct gl_kernels *k)
{
    k->gemm_q8_0 = gemm_q8_0;
}
