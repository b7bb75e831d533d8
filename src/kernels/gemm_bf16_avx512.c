// SPDX-License-Identifier: MIT
// gemm_bf16_avx512: the BF16 token-lane tile (kernels.h gl_gemm_bf16_fn, spec ref_gemm_bf16 in
// kernels.c). One zmm holds one k-pair of 16 tokens (packed by gl_pack_bf16); a dword broadcast
// of the same k-pair of one weight row turns vdpbf16ps into 32 multiply-adds into 16 per-token
// f32 lanes. A call keeps n_groups x n_cols accumulators (up to 2 x 12 = 24 zmm) in registers
// for the whole k range: per pair it loads n_groups activation vectors and broadcasts n_cols
// weight dwords (each used n_groups times), 14 loads per 24 vdpbf16ps at the full tile, under
// the two loads and two vdpbf16ps per cycle this core issues. vdpbf16ps is exactly the spec's
// two fmas per lane (odd element first, DAZ inputs, FTZ results), so the tile equals the
// reference bit for bit.
#include "kernels/kernels_int.h"
#include "kernels/kernels_x86.h"

#include "base/base.h"

#include <immintrin.h>
#include <string.h>

#define BF16_UNROLL _Pragma("GCC unroll 12")

GL_X86_INLINE void bf16_tile(int64_t n_pairs, const uint16_t *act, size_t gs, const int ng,
                             const uint16_t *w, size_t ws, const int nc, float *tile, size_t ts,
                             int accumulate)
{
    __m512 C[GL_BF16_MAX_GROUPS][GL_BF16_MAX_COLS];
    BF16_UNROLL
    for (int c = 0; c < nc; c++)
        BF16_UNROLL
    for (int g = 0; g < ng; g++)
        C[g][c] = accumulate ? _mm512_loadu_ps(tile + (size_t)c * ts + GL_BF16_GROUP * g)
                             : _mm512_setzero_ps();
    for (int64_t p = 0; p < n_pairs; p++) {
        __m512bh A[GL_BF16_MAX_GROUPS];
        BF16_UNROLL
        for (int g = 0; g < ng; g++)
            A[g] = (__m512bh)_mm512_loadu_si512(act + (size_t)g * gs + (size_t)p * 32);
        BF16_UNROLL
        for (int c = 0; c < nc; c++) {
            int32_t d;
            memcpy(&d, w + (size_t)c * ws + 2 * (size_t)p, 4);
            const __m512bh b = (__m512bh)_mm512_set1_epi32(d);
            BF16_UNROLL
            for (int g = 0; g < ng; g++)
                C[g][c] = _mm512_dpbf16_ps(C[g][c], A[g], b);
        }
    }
    BF16_UNROLL
    for (int c = 0; c < nc; c++)
        BF16_UNROLL
    for (int g = 0; g < ng; g++)
        _mm512_storeu_ps(tile + (size_t)c * ts + GL_BF16_GROUP * g, C[g][c]);
}

// One specialised body per (groups, columns): both are constants inside, so the accumulators
// live in registers.
#define BF16_CASE(G, N)                                                                            \
    case (G)*16 + (N):                                                                             \
        bf16_tile(n_pairs, act, group_stride, G, w, w_stride, N, tile, tile_stride, accumulate);   \
        break;
#define BF16_CASES(G)                                                                              \
    BF16_CASE(G, 1)                                                                                \
    BF16_CASE(G, 2)                                                                                \
    BF16_CASE(G, 3)                                                                                \
    BF16_CASE(G, 4)                                                                                \
    BF16_CASE(G, 5)                                                                                \
    BF16_CASE(G, 6)                                                                                \
    BF16_CASE(G, 7)                                                                                \
    BF16_CASE(G, 8)                                                                                \
    BF16_CASE(G, 9)                                                                                \
    BF16_CASE(G, 10)                                                                               \
    BF16_CASE(G, 11)                                                                               \
    BF16_CASE(G, 12)

static void gemm_bf16(int64_t n_pairs, const uint16_t *act, size_t group_stride, int n_groups,
                      const uint16_t *w, size_t w_stride, int n_cols, float *tile,
                      size_t tile_stride, int accumulate)
{
    _Static_assert(GL_BF16_MAX_GROUPS == 2 && GL_BF16_MAX_COLS == 12, "update the cases");
    GL_ASSERT(n_groups >= 1 && n_groups <= GL_BF16_MAX_GROUPS && n_cols >= 1 &&
              n_cols <= GL_BF16_MAX_COLS && n_pairs >= 0);
    switch (n_groups * 16 + n_cols) {
        BF16_CASES(1)
        BF16_CASES(2)
    default:
        GL_ASSERT(0);
    }
}

void gl_kernels__register_avx512_bf16(struct gl_kernels *k)
{
    k->gemm_bf16 = gemm_bf16;
}
