// SPDX-License-Identifier: MIT
// microbench_gemm_bf16: timing program (not a test). The vision encoder's BF16 matmul shapes at
// the released widths, two ways, interleaved A B A B in one process: A = the row-layout path
// (gl_quantize_rows to BF16 + gl_matmul, one-row vec_dot), B = the token-lane GEMM (gl_pack_bf16
// + gl_matmul_bf16). Each time includes the activation conversion. Prints one JSON line per shape
// and path: best and median wall seconds of `reps` runs, GFLOPS (2 M N K / best wall), and
// gflops_cpu = 2 M N K x threads / (process CPU seconds of the best run): what the threads did
// while they ran, the number to hold against vnni_peak's best-of-short-passes BF16 peak on a
// shared machine, where wall time also counts the time other processes held the cores.
// With "q8" as the fourth argument, a third path C: the same shapes with Q8_0 weights (the
// row-layout int8 path any quantized vision weight would take today: gl_quantize_rows to Q8_0 +
// gl_matmul, vec_dot4 = vpdpbusd over 4 tokens per weight-row unpack), its "gflops" being int8
// GOPS to hold against vnni_peak's gops, and a fourth path D: the Q8_0 token-lane GEMM
// (gl_pack_q8_0 + gl_prep_q8_0 + gl_matmul_q8_0, vpdpbusd over 16 tokens per weight-quad
// broadcast; same weights, same quantized activations). "q8only" times C and D alone,
// interleaved C D C D.
// Usage: microbench_gemm_bf16 [threads=2] [reps=3] [M=4096] [q8|q8only]
#include "kernels/kernels.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 3;
    int64_t M = argc > 3 ? atoll(argv[3]) : 4096;
    // Paths run in this order each rep: A B (bf16), then C D (q8_0) with "q8", or C D alone.
    int q8 = argc > 4 && strncmp(argv[4], "q8", 2) == 0,
        q8only = q8 && strcmp(argv[4], "q8only") == 0;
    int first = q8only ? 2 : 0, n_paths = q8 ? 4 : 2;
    if (threads < 1 || reps < 1 || reps > 64 || M < 1)
        return 2;
    // (n_out, n_in): qkv/proj, fc1, fc2, merger fc1 (4H -> adapter, at M / 4 in the encoder).
    const int64_t shapes[][2] = {{1536, 1536}, {8960, 1536}, {1536, 8960}, {4096, 6144}};
    const struct gl_kernels *k = gl_kernels_get();
    struct gl_pool *pool = gl_pool_new(threads);
    int64_t max_in = 8960, max_out = 8960;
    uint16_t *W = malloc((size_t)(max_out * max_in) * 2);
    float *x = malloc((size_t)(M * max_in) * 4), *out = malloc((size_t)(M * max_out) * 4);
    size_t act_bytes = gl_bf16_packed_bytes(M, max_in);
    size_t q8_bytes = gl_type_row_size(GL_TYPE_Q8_0, max_in) * (size_t)M;
    size_t q8p_bytes = gl_q8_0_packed_bytes(M, max_in);
    q8_bytes = q8p_bytes > q8_bytes ? q8p_bytes : q8_bytes;
    void *act = malloc(act_bytes > q8_bytes ? act_bytes : q8_bytes);
    void *Wq = malloc(gl_type_row_size(GL_TYPE_Q8_0, max_in) * (size_t)max_out);
    float *row = malloc((size_t)max_in * 4);
    struct gl_q8_0_wsum *ws = malloc((size_t)(max_out * max_in / 32) * sizeof *ws);
    if (!pool || !W || !x || !out || !act || !Wq || !row || !ws)
        return 1;
    if (q8 && k->gemm_q8_0 == NULL) {
        fprintf(stderr, "microbench_gemm_bf16: the %s table has no gemm_q8_0\n", k->isa);
        return 1;
    }
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < max_out * max_in; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        W[i] = gl_f32_to_bf16((float)(s >> 40) / (float)(1 << 23) - 1.0f);
    }
    for (int64_t i = 0; i < M * max_in; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)(s >> 40) / (float)(1 << 23) - 1.0f;
    }
    printf("{\"isa\": \"%s\", \"threads\": %d, \"M\": %lld}\n", k->isa, threads, (long long)M);
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        int64_t N = shapes[sh][0], K = shapes[sh][1];
        double t[4][64], best_cpu[4] = {1e30, 1e30, 1e30, 1e30},
                         best_wall[4] = {1e30, 1e30, 1e30, 1e30};
        size_t wq_row = gl_type_row_size(GL_TYPE_Q8_0, K), aq_row = wq_row;
        for (int64_t r = 0; q8 && r < N; r++) {
            for (int64_t e = 0; e < K; e++)
                row[e] = gl_bf16_to_f32(W[r * K + e]);
            k->from_float[GL_TYPE_Q8_0](row, (uint8_t *)Wq + (size_t)r * wq_row, K);
        }
        for (int r = 0; r < reps + 1; r++) // rep 0: warm-up
            for (int path = first; path < n_paths; path++) {
                double t0 = now_s(), c0 = cpu_s();
                if (path == 0) {
                    gl_quantize_rows(pool, k, GL_TYPE_BF16, x, M, K, act, (size_t)K * 2);
                    gl_matmul(pool, k, GL_TYPE_BF16, W, N, K, act, (size_t)K * 2, M, out, N);
                } else if (path == 1) {
                    gl_pack_bf16(pool, x, M, K, K, act);
                    gl_matmul_bf16(pool, k, W, N, K, act, M, out, N);
                } else if (path == 2) {
                    gl_quantize_rows(pool, k, GL_TYPE_Q8_0, x, M, K, act, aq_row);
                    gl_matmul(pool, k, GL_TYPE_Q8_0, Wq, N, K, act, aq_row, M, out, N);
                } else { // the weight sums included: the vision encoder recomputes them per call
                    gl_pack_q8_0(pool, k, x, M, K, K, act);
                    gl_prep_q8_0(pool, Wq, N, K, ws);
                    gl_matmul_q8_0(pool, k, Wq, ws, N, K, act, M, out, N);
                }
                double wall = now_s() - t0, cpu = cpu_s() - c0;
                if (r > 0) {
                    t[path][r - 1] = wall;
                    if (wall < best_wall[path]) {
                        best_wall[path] = wall;
                        best_cpu[path] = cpu;
                    }
                }
            }
        for (int path = first; path < n_paths; path++) {
            qsort(t[path], (size_t)reps, sizeof(double), cmp_d);
            printf("{\"path\": \"%s\", \"N\": %lld, \"K\": %lld, \"best_s\": %.4f, \"median_s\": "
                   "%.4f, \"gflops\": %.1f, \"cpu_s\": %.4f, \"gflops_cpu\": %.1f}\n",
                   path == 3   ? "gemm_q8_0"
                   : path == 2 ? "q8_0"
                   : path      ? "gemm_bf16"
                               : "vec_dot",
                   (long long)N, (long long)K, t[path][0], t[path][reps / 2],
                   2.0 * (double)M * (double)N * (double)K / t[path][0] / 1e9, best_cpu[path],
                   2.0 * (double)M * (double)N * (double)K * threads / best_cpu[path] / 1e9);
        }
        fflush(stdout);
    }
    free(W);
    free(x);
    free(out);
    free(act);
    free(Wq);
    free(row);
    free(ws);
    gl_pool_delete(pool);
    return 0;
}
