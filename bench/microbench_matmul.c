// SPDX-License-Identifier: MIT
// microbench_matmul: timing program (not a test). Measures the thread pool's empty round trip,
// a streaming-read bandwidth probe, and gl_matmul on a 19968 x 6656 weight matrix (the shape of
// ffn_up/ffn_gate) for decode (n_tok = 1: GB/s of weight bytes) and prefill (n_tok tokens:
// effective GOP/s = 2*rows*cols*tokens/s, on a row slice to keep the run short).
// Usage: microbench_matmul [threads=2] [isa=best] [prefill_tokens=512] [prefill_rows=1024]
#include "kernels/kernels.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IN        6656
#define N_ROWS      19968
#define PROBE_BYTES ((size_t)1 << 30)

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void noop(void *ctx, int ith, int nth)
{
    (void)ctx;
    (void)ith;
    (void)nth;
}

struct probe {
    const uint64_t *buf;
    size_t n;
    uint64_t sink[64];
};

static void probe_fn(void *ctx, int ith, int nth)
{
    struct probe *p = ctx;
    size_t i0 = p->n * (size_t)ith / (size_t)nth, i1 = p->n * (size_t)(ith + 1) / (size_t)nth;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = i0 & ~(size_t)7; i + 8 <= i1; i += 8) {
        a0 ^= p->buf[i];
        a1 ^= p->buf[i + 1];
        a2 ^= p->buf[i + 2];
        a3 ^= p->buf[i + 3];
        a4 ^= p->buf[i + 4];
        a5 ^= p->buf[i + 5];
        a6 ^= p->buf[i + 6];
        a7 ^= p->buf[i + 7];
    }
    p->sink[ith % 64] = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

static double probe_bandwidth(struct gl_pool *pool, const uint64_t *buf)
{
    struct probe p = {.buf = buf, .n = PROBE_BYTES / 8};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        int64_t t0 = gl_time_us();
        gl_pool_run(pool, probe_fn, &p);
        double gbs = (double)PROBE_BYTES / (double)(gl_time_us() - t0) / 1e3;
        best = gbs > best ? gbs : best;
    }
    return best;
}

// Random block bytes with every fp16 scale field set to a small finite value: speed does not
// depend on the contents, and a NaN/inf scale could take slow paths.
static void fill_weights(enum gl_type t, uint8_t *w, size_t bytes)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t r = rng_next();
        memcpy(w + i, &r, 8);
    }
    const struct gl_type_traits *tt = gl_type_traits_of((uint32_t)t);
    size_t nb = bytes / tt->type_size;
    uint16_t h = gl_f32_to_fp16(0.001f);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * tt->type_size;
        switch (t) {
        case GL_TYPE_Q6_K:
            memcpy(p + 208, &h, 2);
            break;
        case GL_TYPE_Q4_K:
        case GL_TYPE_Q5_K:
            memcpy(p + 2, &h, 2);
            memcpy(p, &h, 2);
            break;
        case GL_TYPE_Q8_0:
        case GL_TYPE_Q4_0:
            memcpy(p, &h, 2);
            break;
        default:
            break;
        }
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void bench_type(struct gl_pool *pool, const struct gl_kernels *k, enum gl_type t,
                       int n_pre_tok, int pre_rows)
{
    enum gl_type vt = gl_type_vec_dot_type(t);
    size_t wrow = gl_type_row_size(t, N_IN), arow = gl_type_row_size(vt, N_IN);
    size_t wbytes = wrow * N_ROWS;
    uint8_t *W = gl_malloc_aligned(wbytes);
    uint8_t *A = gl_malloc_aligned(arow * (size_t)n_pre_tok);
    float *x = gl_malloc(sizeof(float) * N_IN);
    float *out = gl_malloc(sizeof(float) * (size_t)N_ROWS * (size_t)n_pre_tok);
    GL_ASSERT(W && A && x && out);
    fill_weights(t, W, wbytes);
    for (int tok = 0; tok < n_pre_tok; tok++) {
        for (int i = 0; i < N_IN; i++)
            x[i] = (float)((double)(rng_next() >> 11) / 9007199254740992.0 - 0.5);
        k->from_float[vt](x, A + (size_t)tok * arow, N_IN);
    }

    // The r16 layout of the same weights, when this table has a kernel for it: every figure
    // below is then measured for both layouts in alternation (row, r16, row, r16, ...), because
    // this VM's bandwidth drifts within seconds.
    uint8_t *P = NULL;
    if (k->gemm_r16[t] != NULL) {
        P = gl_alloc_huge(wbytes);
        GL_ASSERT(P != NULL);
        int64_t t0 = gl_time_us();
        gl_repack_r16(t, W, N_ROWS, N_IN, P);
        printf("%-5s repack %.1f MB: %.1f ms (one thread)\n", gl_type_traits_of((uint32_t)t)->name,
               (double)wbytes / 1e6, (double)(gl_time_us() - t0) / 1e3);
    }
    const int n_lay = P ? 2 : 1;
    const char *lay_name[2] = {"row", "r16"};
#define MM(lay, rows, ntok)                                                                        \
    ((lay) ? gl_matmul_r16 : gl_matmul)(pool, k, t, (lay) ? (const void *)P : (const void *)W,     \
                                        rows, N_IN, A, arow, ntok, out, rows)
    enum { REPS = 31 };
    int64_t us[2][REPS];
    const char *name = gl_type_traits_of((uint32_t)t)->name;
    static const int dec_tok[] = {1, 8, 16};
    for (int di = 0; di < 3; di++) {
        int nt = dec_tok[di];
        if (nt > n_pre_tok)
            continue;
        for (int lay = 0; lay < n_lay; lay++)
            MM(lay, N_ROWS, nt); // warm-up
        for (int r = 0; r < REPS; r++)
            for (int lay = 0; lay < n_lay; lay++) {
                int64_t t0 = gl_time_us();
                MM(lay, N_ROWS, nt);
                us[lay][r] = gl_time_us() - t0;
            }
        for (int lay = 0; lay < n_lay; lay++) {
            qsort(us[lay], REPS, sizeof us[lay][0], cmp_i64);
            double med = (double)us[lay][REPS / 2];
            printf(
                "%-5s %s decode x%-2d %d x %d (%.1f MB): median %.2f ms = %.1f GB/s, %.1f GOP/s\n",
                name, lay_name[lay], nt, N_ROWS, N_IN, (double)wbytes / 1e6, med / 1e3,
                (double)wbytes / med / 1e3, 2.0 * N_ROWS * N_IN * nt / med / 1e3);
        }
    }

    if (n_pre_tok > 1) {
        int64_t best[2] = {INT64_MAX, INT64_MAX};
        for (int r = 0; r < 3; r++)
            for (int lay = 0; lay < n_lay; lay++) {
                int64_t t0 = gl_time_us();
                MM(lay, pre_rows, n_pre_tok);
                int64_t dt = gl_time_us() - t0;
                best[lay] = dt < best[lay] ? dt : best[lay];
            }
        double ops = 2.0 * pre_rows * N_IN * n_pre_tok;
        for (int lay = 0; lay < n_lay; lay++)
            printf("%-5s %s prefill %d x %d x %d tok: %.1f ms = %.1f GOP/s\n", name, lay_name[lay],
                   pre_rows, N_IN, n_pre_tok, (double)best[lay] / 1e3,
                   ops / (double)best[lay] / 1e3);
    }
#undef MM
    gl_free_huge(P, wbytes);
    gl_free_aligned(W);
    gl_free_aligned(A);
    gl_free(x);
    gl_free(out);
}

int main(int argc, char **argv)
{
    int n_threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *isa = argc > 2 ? argv[2] : NULL;
    int n_pre_tok = argc > 3 ? atoi(argv[3]) : 512;
    int pre_rows = argc > 4 ? atoi(argv[4]) : 1024;
    if (n_threads < 1 || n_pre_tok < 1 || pre_rows < 1 || pre_rows > N_ROWS) {
        fprintf(stderr, "usage: %s [threads] [ref|avx2|avx512] [prefill_tokens] [prefill_rows]\n",
                argv[0]);
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
    printf("threads %d, kernels %s\n", n_threads, k->isa);

    enum { N_EMPTY = 200000 };
    int64_t t0 = gl_time_us();
    for (int i = 0; i < N_EMPTY; i++)
        gl_pool_run(pool, noop, NULL);
    printf("pool: empty run round trip %.3f us\n", (double)(gl_time_us() - t0) / N_EMPTY);

    uint64_t *buf = gl_malloc_aligned(PROBE_BYTES);
    GL_ASSERT(buf != NULL);
    for (size_t i = 0; i < PROBE_BYTES / 8; i++)
        buf[i] = i * 0x9e3779b97f4a7c15ull;
    printf("bandwidth probe (read, %d threads): %.1f GB/s\n", n_threads,
           probe_bandwidth(pool, buf));

    const enum gl_type types[] = {GL_TYPE_Q4_K, GL_TYPE_Q6_K, GL_TYPE_Q8_0};
    for (int i = 0; i < 3; i++)
        bench_type(pool, k, types[i], n_pre_tok, pre_rows);

    printf("bandwidth probe (read, %d threads): %.1f GB/s\n", n_threads,
           probe_bandwidth(pool, buf));
    gl_free_aligned(buf);
    gl_pool_delete(pool);
    return 0;
}
