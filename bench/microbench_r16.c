// SPDX-License-Identifier: MIT
// microbench_r16: timing program (not a test). The small-M decode/verify cost of the r16 Q4_K
// (or Q6_K: the Q4_K_M files' ffn_down / attn_v in about half the layers and the output head) GEMM
// from DRAM: time for one pass over ~1 GB of repacked 19968 x 6656 matrices (distinct copies,
// so nothing is served from cache) at n_tok = 1..8, rounds interleaved (1, 2, ..., 8, 1, 2, ...)
// so the bandwidth drift hits every n_tok alike; prints the median per n_tok and its ratio to
// n_tok = 1 (the c(k) of speculative verification, PERFORMANCE.md). With "row", the same
// matrices in the row layout (gl_matmul: vec_dot / vec_dot4) run interleaved with the r16 passes,
// and each n_tok also prints r16's time over the row layout's.
// Usage: microbench_r16 [threads=2] [rounds=5] [copies=13] [q4_k|q6_k] [row]
#include "kernels/kernels.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IN   6656
#define N_ROWS 19968

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int copies = argc > 3 ? atoi(argv[3]) : 13;
    const char *tname = argc > 4 ? argv[4] : "q4_k";
    const int row = argc > 5 && !strcmp(argv[5], "row");
    const enum gl_type wt = !strcmp(tname, "q4_k")   ? GL_TYPE_Q4_K
                            : !strcmp(tname, "q6_k") ? GL_TYPE_Q6_K
                                                     : GL_TYPE_COUNT;
    if (threads < 1 || rounds < 1 || rounds > 64 || copies < 1 || wt == GL_TYPE_COUNT) {
        fprintf(
            stderr,
            "usage: microbench_r16 [threads>=1] [rounds 1..64] [copies>=1] [q4_k|q6_k] [row]\n");
        return 2;
    }
    const struct gl_kernels *k = gl_kernels_get();
    if (!k->gemm_r16[wt]) {
        fprintf(stderr, "microbench_r16: no r16 %s kernel on this CPU (%s)\n", tname, k->isa);
        return 1;
    }
    struct gl_pool *pool = gl_pool_new(threads);
    size_t wrow = gl_type_row_size(wt, N_IN), mbytes = wrow * N_ROWS;
    uint8_t *src = gl_malloc_aligned(mbytes), *W = gl_malloc_aligned(mbytes * (size_t)copies);
    uint8_t *R = row ? gl_malloc_aligned(mbytes * (size_t)copies) : NULL;
    float *x = gl_malloc(sizeof(float) * N_IN);
    size_t arow = gl_type_row_size(GL_TYPE_Q8_K, N_IN);
    uint8_t *A = gl_malloc_aligned(arow * GL_R16_MAX_TOK);
    float *out = gl_malloc(sizeof(float) * N_ROWS * GL_R16_MAX_TOK);
    GL_ASSERT(pool && src && W && x && A && out);
    for (int64_t r = 0; r < N_ROWS; r++) {
        for (int i = 0; i < N_IN; i++)
            x[i] = (float)((double)(rng_next() >> 11) / 9007199254740992.0 - 0.5) * 0.04f;
        gl_quantize_row_ref(wt, x, src + (size_t)r * wrow, N_IN);
    }
    gl_repack_r16(wt, src, N_ROWS, N_IN, W);
    for (int c = 1; c < copies; c++)
        memcpy(W + (size_t)c * mbytes, W, mbytes);
    for (int c = 0; row && c < copies; c++)
        memcpy(R + (size_t)c * mbytes, src, mbytes);
    for (int t = 0; t < GL_R16_MAX_TOK; t++) {
        for (int i = 0; i < N_IN; i++)
            x[i] = (float)((double)(rng_next() >> 11) / 9007199254740992.0 - 0.5);
        k->from_float[GL_TYPE_Q8_K](x, A + (size_t)t * arow, N_IN);
    }
    int64_t us[GL_R16_MAX_TOK][64], us_row[GL_R16_MAX_TOK][64];
    for (int r = -1; r < rounds; r++) { // round -1 warms up
        for (int nt = 1; nt <= GL_R16_MAX_TOK; nt++) {
            int64_t t0 = gl_time_us();
            for (int c = 0; c < copies; c++)
                gl_matmul_r16(pool, k, wt, W + (size_t)c * mbytes, N_ROWS, N_IN, A, arow, nt, out,
                              N_ROWS);
            if (r >= 0)
                us[nt - 1][r] = gl_time_us() - t0;
            if (!row)
                continue;
            t0 = gl_time_us();
            for (int c = 0; c < copies; c++)
                gl_matmul(pool, k, wt, R + (size_t)c * mbytes, N_ROWS, N_IN, A, arow, nt, out,
                          N_ROWS);
            if (r >= 0)
                us_row[nt - 1][r] = gl_time_us() - t0;
        }
    }
    double gb = (double)mbytes * copies / 1e9;
    qsort(us[0], (size_t)rounds, sizeof(int64_t), cmp_i64);
    double base = (double)us[0][rounds / 2];
    for (int nt = 1; nt <= GL_R16_MAX_TOK; nt++) {
        if (nt > 1)
            qsort(us[nt - 1], (size_t)rounds, sizeof(int64_t), cmp_i64);
        double m = (double)us[nt - 1][rounds / 2];
        printf("n_tok %d: %8.1f ms per %.2f GB pass (%5.1f GB/s, %6.1f GOP/s)  c = %.3f", nt,
               m / 1e3, gb, gb / (m / 1e6), 2.0 * N_ROWS * N_IN * copies * nt / m / 1e3, m / base);
        if (row) {
            qsort(us_row[nt - 1], (size_t)rounds, sizeof(int64_t), cmp_i64);
            double mr = (double)us_row[nt - 1][rounds / 2];
            printf("  row layout %8.1f ms (c = %.3f), r16 / row %.3f", mr / 1e3,
                   mr / (double)us_row[0][rounds / 2], m / mr);
        }
        printf("\n");
    }
    gl_free(out);
    gl_free_aligned(A);
    gl_free(x);
    gl_free_aligned(W);
    gl_free_aligned(R);
    gl_free_aligned(src);
    gl_pool_delete(pool);
    return 0;
}
