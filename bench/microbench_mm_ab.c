// SPDX-License-Identifier: MIT
// microbench_mm_ab: timing program (not a test). Interleaved A/B of gl_matmul on a 6656-wide
// weight matrix: A = the table without its multi-token entries (vec_dot4 = NULL: one vec_dot per
// (row, token), the pre-tiling behaviour), B = the full table. Rounds alternate A, B, A, B... in
// one process so load from other processes hits both alike; the ratio of medians is reported.
// Rows shrink as n_tok grows to keep each call near 10^9-10^10 ops.
// Usage: microbench_mm_ab [threads=2] [isa=best] [rounds=5] [types=q4_K,q6_K] [clock=wall|cpu]
//        [n_in=6656]
#include "kernels/kernels.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Weight row length (elements); 6656 is the model width, other values probe cache effects.
static int64_t N_IN = 6656;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

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

// Weights from the reference quantizer (valid blocks; contents do not change the speed).
static uint8_t *make_weights(enum gl_type t, int64_t rows)
{
    size_t wrow = gl_type_row_size(t, N_IN);
    uint8_t *W = gl_malloc_aligned(wrow * (size_t)rows);
    float *x = gl_malloc(sizeof(float) * (size_t)N_IN);
    GL_ASSERT(W && x);
    for (int64_t r = 0; r < rows; r++) {
        for (int i = 0; i < N_IN; i++)
            x[i] = (float)((double)(rng_next() >> 11) / 9007199254740992.0 - 0.5) * 0.04f;
        gl_quantize_row_ref(t, x, W + (size_t)r * wrow, N_IN);
    }
    gl_free(x);
    return W;
}

// Process CPU time (all threads), in us: on a loaded shared machine it leaves out the time the
// threads were not running, which wall time does not (the pool's spin-waits still count).
static int64_t g_use_cpu;

static int64_t now_us(void)
{
    if (!g_use_cpu)
        return gl_time_us();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t time_mm(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type t,
                       const uint8_t *W, int64_t rows, const uint8_t *A, size_t arow, int64_t nt,
                       float *out)
{
    int64_t t0 = now_us();
    gl_matmul(pool, k, t, W, rows, N_IN, A, arow, nt, out, rows);
    return now_us() - t0;
}

static void bench_type(struct gl_pool *pool, const struct gl_kernels *kb, enum gl_type t,
                       int rounds)
{
    static const int64_t toks[] = {1, 4, 8, 16, 64, 512};
    struct gl_kernels ka = *kb;
    memset(ka.vec_dot4, 0, sizeof ka.vec_dot4);
    enum gl_type vt = gl_type_vec_dot_type(t);
    size_t arow = gl_type_row_size(vt, N_IN);
    const int64_t max_rows = 6656, max_tok = 512;
    uint8_t *W = make_weights(t, max_rows);
    uint8_t *A = gl_malloc_aligned(arow * (size_t)max_tok);
    float *x = gl_malloc(sizeof(float) * (size_t)N_IN);
    float *oa = gl_malloc(sizeof(float) * (size_t)max_rows * 16);
    float *ob = gl_malloc(sizeof(float) * (size_t)max_rows * 16);
    GL_ASSERT(A && x && oa && ob);
    for (int64_t tok = 0; tok < max_tok; tok++) {
        for (int i = 0; i < N_IN; i++)
            x[i] = (float)((double)(rng_next() >> 11) / 9007199254740992.0 - 0.5);
        kb->from_float[vt](x, A + (size_t)tok * arow, N_IN);
    }
    const char *name = gl_type_traits_of((uint32_t)t)->name;
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
        int64_t nt = toks[ti];
        int64_t rows = nt <= 16 ? 6656 : nt <= 64 ? 1024 : 128;
        float *out_a = nt <= 16 ? oa : gl_malloc(sizeof(float) * (size_t)(rows * nt));
        float *out_b = nt <= 16 ? ob : gl_malloc(sizeof(float) * (size_t)(rows * nt));
        GL_ASSERT(out_a && out_b);
        int64_t ua[64], ub[64];
        int n = rounds < 64 ? rounds : 64;
        time_mm(pool, &ka, t, W, rows, A, arow, nt, out_a); // warm-up both
        time_mm(pool, kb, t, W, rows, A, arow, nt, out_b);
        for (int r = 0; r < n; r++) {
            ua[r] = time_mm(pool, &ka, t, W, rows, A, arow, nt, out_a);
            ub[r] = time_mm(pool, kb, t, W, rows, A, arow, nt, out_b);
        }
        int same = memcmp(out_a, out_b, sizeof(float) * (size_t)(rows * nt)) == 0;
        qsort(ua, (size_t)n, sizeof ua[0], cmp_i64);
        qsort(ub, (size_t)n, sizeof ub[0], cmp_i64);
        double ops = 2.0 * (double)rows * N_IN * (double)nt;
        printf("n_in %lld %-5s n_tok %3lld rows %4lld: A %8.2f ms (%6.1f GOP/s)  "
               "B %8.2f ms (%6.1f GOP/s)  B/A speed %.2fx (best-of %.2fx)  bit-identical %s\n",
               (long long)N_IN, name, (long long)nt, (long long)rows, (double)ua[n / 2] / 1e3,
               ops / (double)ua[n / 2] / 1e3, (double)ub[n / 2] / 1e3,
               ops / (double)ub[n / 2] / 1e3, (double)ua[n / 2] / (double)ub[n / 2],
               (double)ua[0] / (double)ub[0], same ? "yes" : "NO");
        fflush(stdout);
        if (nt > 16) {
            gl_free(out_a);
            gl_free(out_b);
        }
    }
    gl_free_aligned(W);
    gl_free_aligned(A);
    gl_free(x);
    gl_free(oa);
    gl_free(ob);
}

int main(int argc, char **argv)
{
    int n_threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *isa = argc > 2 && strcmp(argv[2], "best") != 0 ? argv[2] : NULL;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    const char *types = argc > 4 ? argv[4] : "q4_K,q6_K";
    g_use_cpu = argc > 5 && strcmp(argv[5], "cpu") == 0;
    N_IN = argc > 6 ? atoll(argv[6]) : 6656;
    if (N_IN < 256 || N_IN % 256 != 0) {
        fprintf(stderr, "n_in must be a positive multiple of 256\n");
        return 2;
    }
    if (n_threads < 1 || rounds < 1) {
        fprintf(stderr, "usage: %s [threads] [best|ref|avx2|avx512] [rounds] [types]\n", argv[0]);
        return 2;
    }
    struct gl_kernels kk;
    const struct gl_kernels *k = gl_kernels_get();
    if (isa != NULL) {
        if (!gl_kernels_init_isa(&kk, isa)) {
            fprintf(stderr, "ISA %s not available\n", isa);
            return 2;
        }
        k = &kk;
    }
    struct gl_pool *pool = gl_pool_new(n_threads);
    GL_ASSERT(pool != NULL);
    printf("threads %d, kernels %s, rounds %d, %s time (A = no vec_dot4, B = table)\n", n_threads,
           k->isa, rounds, g_use_cpu ? "process CPU" : "wall");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", types);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        int t = gl_type_from_name(tok);
        if (t < 0 || k->vec_dot[t] == NULL) {
            fprintf(stderr, "unknown type %s\n", tok);
            return 2;
        }
        bench_type(pool, k, (enum gl_type)t, rounds);
    }
    gl_pool_delete(pool);
    return 0;
}
