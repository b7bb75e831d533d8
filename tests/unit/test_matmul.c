// SPDX-License-Identifier: MIT
// Tests for src/kernels dispatch, thread pool and gl_matmul: every output element must equal,
// bit for bit, one call of the same table's vec_dot on that (weight row, activation row) pair,
// for 1-3 threads, several token counts and row counts that are not multiples of the chunk.
#include "kernels/kernels.h"

#include "base/base.h"
#include "test.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float rng_sym(void) // [-1, 1)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

struct pool_probe {
    _Atomic int calls;
    _Atomic int ith_mask;
    _Atomic int bad_nth;
    int want_nth;
};

static void probe_fn(void *ctx, int ith, int nth)
{
    struct pool_probe *p = ctx;
    atomic_fetch_add(&p->calls, 1);
    atomic_fetch_or(&p->ith_mask, 1 << ith);
    if (nth != p->want_nth)
        atomic_fetch_add(&p->bad_nth, 1);
}

TEST(test_pool_runs_each_thread_once)
{
    for (int n = 1; n <= 4; n++) {
        struct gl_pool *pool = gl_pool_new(n);
        REQUIRE(pool != NULL);
        CHECK(gl_pool_size(pool) == n);
        for (int rep = 0; rep < 300; rep++) {
            struct pool_probe p = {.want_nth = n};
            gl_pool_run(pool, probe_fn, &p);
            // run() returns only after every thread finished: the counts are final here.
            CHECKF(atomic_load(&p.calls) == n && atomic_load(&p.ith_mask) == (1 << n) - 1 &&
                       atomic_load(&p.bad_nth) == 0,
                   "n=%d rep %d: calls %d mask %x", n, rep, atomic_load(&p.calls),
                   atomic_load(&p.ith_mask));
            if (rep == 150)
                usleep(20000); // let the workers fall asleep on the futex, then wake them
        }
        gl_pool_delete(pool);
    }
    CHECK(gl_pool_new(0) == NULL);
    CHECK(gl_pool_size(NULL) == 1);
    gl_pool_delete(NULL);
}

TEST(test_kernels_table)
{
    const struct gl_kernels *k = gl_kernels_get();
    REQUIRE(k != NULL && k->isa != NULL);
    CHECK(gl_kernels_get() == k);
    CHECKF(strcmp(k->isa, "ref") == 0, "GLINT_ISA=ref not honoured: %s", k->isa);
    struct gl_kernels ref;
    CHECK(gl_kernels_init_isa(&ref, "ref") == 1 && strcmp(ref.isa, "ref") == 0);
    CHECK(gl_kernels_init_isa(&ref, "sse9") == 0);
    CHECK(gl_kernels_init_isa(&ref, "ref") == 1);
    const enum gl_type wts[] = {GL_TYPE_F32,  GL_TYPE_F16,  GL_TYPE_BF16, GL_TYPE_Q4_0,
                                GL_TYPE_Q8_0, GL_TYPE_Q4_K, GL_TYPE_Q5_K, GL_TYPE_Q6_K};
    for (int i = 0; i < 8; i++) {
        enum gl_type vt = gl_type_vec_dot_type(wts[i]);
        CHECK(ref.vec_dot[wts[i]] != NULL && ref.to_float[wts[i]] != NULL);
        CHECK(ref.from_float[vt] != NULL);
        CHECK(k->vec_dot[wts[i]] != NULL && k->to_float[wts[i]] != NULL &&
              k->from_float[vt] != NULL);
    }
    CHECK(ref.vec_dot[GL_TYPE_Q3_K] == NULL && ref.vec_dot[GL_TYPE_Q4_1] == NULL);
}

#define N_IN     512
#define MAX_ROWS 300
#define MAX_TOK  64
#define OUT_PAD  5  // out_stride = n_rows + OUT_PAD
#define ACT_PAD  64 // act_stride = activation row bytes + ACT_PAD

static float wf[MAX_ROWS * N_IN], af[MAX_TOK * N_IN];
static float out[MAX_TOK * (MAX_ROWS + OUT_PAD)], want[MAX_TOK * (MAX_ROWS + OUT_PAD)];

// gl_matmul_groups on a subset of the 16-row groups (a scattered list ending with the last group,
// partial when n_rows is not a multiple of 16): the listed rows equal want (the full product),
// every other entry of out keeps its sentinel. Returns 1 on a mismatch.
static int check_groups(const struct gl_kernels *k, enum gl_type wt, int r16, struct gl_pool *pool,
                        const void *W, int64_t nr, const void *A, size_t arow, int64_t nt)
{
    const int64_t os = nr + OUT_PAD, last = (nr + GL_R16_ROWS - 1) / GL_R16_ROWS - 1;
    const int32_t groups[] = {0, 2, 3, 7, (int32_t)last};
    const int64_t ng = last > 7 ? 5 : 1; // one group (nr <= 16): just group 0
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        out[i] = -12345.0f;
    gl_matmul_groups(pool, k, wt, r16, W, nr, N_IN, A, arow, nt, out, os, groups, ng);
    int bad = 0;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t r = 0; r < os; r++) {
            int listed = 0;
            for (int64_t i = 0; i < ng; i++)
                listed |= r < nr && r / GL_R16_ROWS == groups[i];
            float got = out[t * os + r];
            bad += listed ? memcmp(&got, &want[t * os + r], sizeof got) != 0 : got != -12345.0f;
        }
    if (bad)
        fprintf(stderr, "  %s %s%s groups: rows %lld tok %lld threads %d: %d entries wrong\n",
                k->isa, gl_type_traits_of(wt)->name, r16 ? " r16" : "", (long long)nr,
                (long long)nt, gl_pool_size(pool), bad);
    return bad != 0;
}

// Checks gl_matmul with table k against per-element calls of k's own vec_dot.
static int check_matmul_exact(const struct gl_kernels *k, enum gl_type wt, struct gl_pool **pools,
                              int n_pools)
{
    enum gl_type vt = gl_type_vec_dot_type(wt);
    size_t wrow = gl_type_row_size(wt, N_IN), arow = gl_type_row_size(vt, N_IN) + ACT_PAD;
    uint8_t *W = gl_malloc(wrow * MAX_ROWS), *A = gl_malloc(arow * MAX_TOK);
    GL_ASSERT(W != NULL && A != NULL);
    for (int r = 0; r < MAX_ROWS; r++)
        gl_quantize_row_ref(wt, wf + r * N_IN, W + r * wrow, N_IN);
    for (int t = 0; t < MAX_TOK; t++)
        k->from_float[vt](af + t * N_IN, A + t * arow, N_IN);

    static const int64_t rows[] = {1, 37, 300};
    static const int64_t toks[] = {1, 3, 6, 17, 64};
    int failures = 0;
    for (int ri = 0; ri < 3; ri++) {
        for (int ti = 0; ti < 5; ti++) {
            int64_t nr = rows[ri], nt = toks[ti], os = nr + OUT_PAD;
            for (int64_t t = 0; t < nt; t++)
                for (int64_t r = 0; r < nr; r++)
                    k->vec_dot[wt](N_IN, &want[t * os + r], W + r * wrow, A + t * arow);
            for (int p = 0; p < n_pools; p++) {
                for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
                    out[i] = -12345.0f; // sentinel: padding must stay untouched
                gl_matmul(pools[p], k, wt, W, nr, N_IN, A, arow, nt, out, os);
                int bad = 0, pad = 0;
                for (int64_t t = 0; t < nt; t++) {
                    bad += memcmp(&out[t * os], &want[t * os], (size_t)nr * sizeof(float)) != 0;
                    for (int64_t r = nr; r < os; r++)
                        pad += out[t * os + r] != -12345.0f;
                }
                if (bad || pad) {
                    fprintf(stderr,
                            "  %s %s rows %lld tok %lld threads %d: %d rows differ, %d "
                            "pad writes\n",
                            k->isa, gl_type_traits_of(wt)->name, (long long)nr, (long long)nt,
                            gl_pool_size(pools[p]), bad, pad);
                    failures++;
                }
                failures += check_groups(k, wt, 0, pools[p], W, nr, A, arow, nt);
            }
        }
    }
    gl_free(W);
    gl_free(A);
    return failures;
}

static const enum gl_type mm_types[] = {GL_TYPE_F32,  GL_TYPE_F16,  GL_TYPE_BF16, GL_TYPE_Q4_0,
                                        GL_TYPE_Q8_0, GL_TYPE_Q4_K, GL_TYPE_Q5_K, GL_TYPE_Q6_K};

static void fill_inputs(void)
{
    for (int i = 0; i < MAX_ROWS * N_IN; i++)
        wf[i] = rng_sym() * 0.1f;
    for (int i = 0; i < MAX_TOK * N_IN; i++)
        af[i] = rng_sym() * 3.0f;
}

// vec_dot4 must equal four calls of the same table's vec_dot, bit for bit.
static int check_dot4_exact(const struct gl_kernels *k, const struct gl_kernels *ref)
{
    int failures = 0;
    for (int i = 0; i < 8; i++) {
        enum gl_type wt = mm_types[i], vt = gl_type_vec_dot_type(wt);
        if (k->vec_dot[wt] != ref->vec_dot[wt] && k->vec_dot4[wt] == ref->vec_dot4[wt]) {
            fprintf(stderr, "  %s %s: stale reference vec_dot4 kept over a new vec_dot\n", k->isa,
                    gl_type_traits_of(wt)->name);
            failures++;
        }
        if (k->vec_dot4[wt] == NULL)
            continue;
        size_t wrow = gl_type_row_size(wt, N_IN), arow = gl_type_row_size(vt, N_IN) + 32;
        uint8_t *W = gl_malloc(wrow), *A = gl_malloc(arow * 4);
        GL_ASSERT(W != NULL && A != NULL);
        gl_quantize_row_ref(wt, wf, W, N_IN);
        for (int t = 0; t < 4; t++)
            k->from_float[vt](af + t * N_IN, A + t * arow, N_IN);
        float s4[4 * 3], s1[4];
        k->vec_dot4[wt](N_IN, s4, 3, W, A, arow);
        for (int t = 0; t < 4; t++) {
            k->vec_dot[wt](N_IN, &s1[t], W, A + t * arow);
            if (memcmp(&s1[t], &s4[3 * t], sizeof(float)) != 0) {
                fprintf(stderr, "  %s %s vec_dot4 token %d: %.9g vs vec_dot %.9g\n", k->isa,
                        gl_type_traits_of(wt)->name, t, (double)s4[3 * t], (double)s1[t]);
                failures++;
            }
        }
        gl_free(W);
        gl_free(A);
    }
    return failures;
}

TEST(test_matmul_ref_exact)
{
    fill_inputs();
    struct gl_kernels ref;
    REQUIRE(gl_kernels_init_isa(&ref, "ref"));
    struct gl_pool *pools[4] = {NULL, gl_pool_new(1), gl_pool_new(2), gl_pool_new(3)};
    REQUIRE(pools[1] && pools[2] && pools[3]);
    CHECK(check_dot4_exact(&ref, &ref) == 0);
    for (int i = 0; i < 8; i++)
        CHECK(check_matmul_exact(&ref, mm_types[i], pools, 4) == 0);
    // And the ref table's vec_dot is gl_vec_dot_ref itself.
    float s1, s2;
    struct gl_block_q4_K w;
    struct gl_block_q8_K a;
    gl_quantize_row_ref(GL_TYPE_Q4_K, wf, &w, 256);
    gl_quantize_row_ref(GL_TYPE_Q8_K, af, &a, 256);
    ref.vec_dot[GL_TYPE_Q4_K](256, &s1, &w, &a);
    gl_vec_dot_ref(GL_TYPE_Q4_K, 256, &s2, &w, &a);
    CHECK(s1 == s2);
    for (int p = 1; p < 4; p++)
        gl_pool_delete(pools[p]);
}

TEST(test_matmul_simd_exact)
{
    fill_inputs();
    struct gl_pool *pools[3] = {gl_pool_new(1), gl_pool_new(2), gl_pool_new(3)};
    REQUIRE(pools[0] && pools[1] && pools[2]);
    const char *isas[] = {"avx2", "avx512"};
    for (int i = 0; i < 2; i++) {
        struct gl_kernels k;
        if (!gl_kernels_init_isa(&k, isas[i])) {
            printf("# %s kernels not available: skipped\n", isas[i]);
            continue;
        }
        struct gl_kernels ref;
        REQUIRE(gl_kernels_init_isa(&ref, "ref"));
        CHECK(check_dot4_exact(&k, &ref) == 0);
        for (int j = 0; j < 8; j++)
            CHECK(check_matmul_exact(&k, mm_types[j], pools, 3) == 0);
    }
    for (int p = 0; p < 3; p++)
        gl_pool_delete(pools[p]);
}

// A wide activation stride shrinks the token tile to 23 (not a multiple of the 4-token groups):
// each tile then ends in vec_dot calls for its last 3 tokens, and the results must not change.
TEST(test_matmul_odd_tile)
{
    fill_inputs();
    struct gl_pool *pool = gl_pool_new(2);
    REQUIRE(pool != NULL);
    const char *isas[] = {"ref", "avx2", "avx512"};
    const enum gl_type wt = GL_TYPE_Q4_K, vt = GL_TYPE_Q8_K;
    const int64_t nr = 70, nt = 50;
    const size_t arow = 22784; // 356 x 64 bytes (aligned rows): tile_tok = 512 KiB / arow = 23
    size_t wrow = gl_type_row_size(wt, N_IN);
    uint8_t *W = gl_malloc(wrow * (size_t)nr), *A = gl_malloc(arow * (size_t)nt);
    float *o = gl_malloc(sizeof(float) * (size_t)(nr * nt)),
          *w = gl_malloc(sizeof(float) * (size_t)(nr * nt));
    REQUIRE(W && A && o && w);
    for (int64_t r = 0; r < nr; r++)
        gl_quantize_row_ref(wt, wf + r * N_IN, W + (size_t)r * wrow, N_IN);
    for (int i = 0; i < 3; i++) {
        struct gl_kernels k;
        if (!gl_kernels_init_isa(&k, isas[i]))
            continue;
        for (int64_t t = 0; t < nt; t++)
            k.from_float[vt](af + (t % MAX_TOK) * N_IN, A + (size_t)t * arow, N_IN);
        for (int64_t t = 0; t < nt; t++)
            for (int64_t r = 0; r < nr; r++)
                k.vec_dot[wt](N_IN, &w[t * nr + r], W + (size_t)r * wrow, A + (size_t)t * arow);
        gl_matmul(pool, &k, wt, W, nr, N_IN, A, arow, nt, o, nr);
        CHECKF(memcmp(o, w, sizeof(float) * (size_t)(nr * nt)) == 0, "%s: odd tile differs", k.isa);
    }
    gl_free(W);
    gl_free(A);
    gl_free(o);
    gl_free(w);
    gl_pool_delete(pool);
}

// r16 layouts: the repacked reference agrees with the row-layout reference dot (the same integer
// sums, accumulated in another float order), every SIMD kernel equals the r16 reference bit for
// bit for each token count 1..8, and gl_matmul_r16 equals per-token reference calls whatever the
// threads, tiling and token count.
static int check_r16(const struct gl_kernels *k, enum gl_type wt, struct gl_pool **pools,
                     int n_pools)
{
    const int64_t nr = 288; // 18 groups: not a multiple of the 4-group chunk; <= MAX_ROWS
    size_t wrow = gl_type_row_size(wt, N_IN), arow = gl_type_row_size(GL_TYPE_Q8_K, N_IN) + 64;
    uint8_t *W = gl_malloc(wrow * (size_t)nr), *P = gl_malloc(wrow * (size_t)nr);
    uint8_t *A = gl_malloc(arow * MAX_TOK);
    GL_ASSERT(W && P && A);
    for (int64_t r = 0; r < nr; r++)
        gl_quantize_row_ref(wt, wf + (r % MAX_ROWS) * N_IN, W + (size_t)r * wrow, N_IN);
    for (int t = 0; t < MAX_TOK; t++)
        gl_quantize_row_ref(GL_TYPE_Q8_K, af + t * N_IN, A + (size_t)t * arow, N_IN);
    gl_repack_r16(wt, W, nr, N_IN, P);
    const size_t gbytes = wrow * GL_R16_ROWS;
    int failures = 0;
    // Reference r16 vs reference row dot, and the SIMD kernel for every token count.
    for (int64_t g = 0; g < nr / GL_R16_ROWS; g++) {
        float o[GL_R16_MAX_TOK * GL_R16_ROWS], f[GL_R16_MAX_TOK * GL_R16_ROWS];
        gl_gemm_r16_ref(wt, N_IN, P + g * gbytes, A, arow, GL_R16_MAX_TOK, o, GL_R16_ROWS);
        for (int t = 0; t < GL_R16_MAX_TOK; t++)
            for (int r = 0; r < GL_R16_ROWS; r++) {
                float want_s;
                gl_vec_dot_ref(wt, N_IN, &want_s, W + (size_t)(16 * g + r) * wrow,
                               A + (size_t)t * arow);
                float got = o[t * GL_R16_ROWS + r];
                if (!(fabsf(got - want_s) <= 1e-4f * (fabsf(want_s) + 1.0f))) {
                    if (failures++ < 5)
                        fprintf(stderr, "  %s r16 ref row %lld tok %d: %.7g vs row dot %.7g\n",
                                gl_type_traits_of(wt)->name, (long long)(16 * g + r), t,
                                (double)got, (double)want_s);
                }
            }
        for (int nt = 1; nt <= GL_R16_MAX_TOK; nt++) {
            const uint8_t *a = A + (size_t)(nt - 1) * arow; // a different first token each time
            gl_gemm_r16_ref(wt, N_IN, P + g * gbytes, a, arow, nt, o, GL_R16_ROWS);
            k->gemm_r16[wt](N_IN, P + g * gbytes, a, arow, nt, f, GL_R16_ROWS);
            if (memcmp(o, f, sizeof(float) * (size_t)(nt * GL_R16_ROWS)) != 0 && failures++ < 5)
                fprintf(stderr, "  %s %s r16 kernel group %lld, %d tokens: differs from ref\n",
                        k->isa, gl_type_traits_of(wt)->name, (long long)g, nt);
        }
    }
    // The threaded driver: every token equals its own one-token reference call.
    static const int64_t toks[] = {1, 3, 8, 17, 64};
    const int64_t os = nr + OUT_PAD;
    for (int ti = 0; ti < 5; ti++) {
        int64_t nt = toks[ti];
        for (int64_t t = 0; t < nt; t++)
            for (int64_t g = 0; g < nr / GL_R16_ROWS; g++)
                gl_gemm_r16_ref(wt, N_IN, P + g * gbytes, A + (size_t)t * arow, arow, 1,
                                &want[t * os + 16 * g], os);
        for (int p = 0; p < n_pools; p++) {
            for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
                out[i] = -12345.0f;
            gl_matmul_r16(pools[p], k, wt, P, nr, N_IN, A, arow, nt, out, os);
            int bad = 0, pad = 0;
            for (int64_t t = 0; t < nt; t++) {
                bad += memcmp(&out[t * os], &want[t * os], (size_t)nr * sizeof(float)) != 0;
                for (int64_t r = nr; r < os; r++)
                    pad += out[t * os + r] != -12345.0f;
            }
            if (bad || pad) {
                fprintf(stderr, "  %s %s r16 matmul tok %lld threads %d: %d rows differ, %d pad\n",
                        k->isa, gl_type_traits_of(wt)->name, (long long)nt, gl_pool_size(pools[p]),
                        bad, pad);
                failures++;
            }
            failures += check_groups(k, wt, 1, pools[p], P, nr, A, arow, nt);
        }
    }
    gl_free(W);
    gl_free(P);
    gl_free(A);
    return failures;
}

// The r16 kernels' integer bounds at their extremes: every weight at its largest quant (15 / 63)
// against activations of all +127, all -127 and alternating signs. A kernel that sums more
// products in an int16 lane than the bound allows wraps there and differs from the reference.
static int check_r16_extremes(const struct gl_kernels *k, enum gl_type wt)
{
    const size_t wrow = gl_type_row_size(wt, N_IN), arow = gl_type_row_size(GL_TYPE_Q8_K, N_IN);
    uint8_t *W = gl_malloc(wrow * GL_R16_ROWS), *P = gl_malloc(wrow * GL_R16_ROWS);
    uint8_t *A = gl_malloc(arow * GL_R16_MAX_TOK);
    GL_ASSERT(W && P && A);
    for (int r = 0; r < GL_R16_ROWS; r++)
        gl_quantize_row_ref(wt, wf + r * N_IN, W + (size_t)r * wrow, N_IN);
    gl_repack_r16(wt, W, GL_R16_ROWS, N_IN, P);
    for (int64_t b = 0; b < N_IN / GL_QK_K; b++) {
        if (wt == GL_TYPE_Q4_K) {
            struct gl_block_q4_K_r16 *x = (struct gl_block_q4_K_r16 *)P + b;
            memset(x->qs, 0xff, sizeof x->qs);
        } else {
            struct gl_block_q6_K_r16 *x = (struct gl_block_q6_K_r16 *)P + b;
            memset(x->sub, 0xff, sizeof x->sub);
        }
    }
    for (int t = 0; t < GL_R16_MAX_TOK; t++)
        for (int64_t b = 0; b < N_IN / GL_QK_K; b++) {
            struct gl_block_q8_K *y = (struct gl_block_q8_K *)(A + (size_t)t * arow) + b;
            y->d = 0.01f;
            for (int i = 0; i < GL_QK_K; i++)
                y->qs[i] = (int8_t)(t % 3 == 0 ? 127 : t % 3 == 1 ? -127 : (i % 2 ? 127 : -127));
            for (int j = 0; j < GL_QK_K / 16; j++) {
                int sum = 0;
                for (int i = 0; i < 16; i++)
                    sum += y->qs[16 * j + i];
                y->bsums[j] = (int16_t)sum;
            }
        }
    int failures = 0;
    for (int nt = 1; nt <= GL_R16_MAX_TOK; nt++) {
        float o[GL_R16_MAX_TOK * GL_R16_ROWS], f[GL_R16_MAX_TOK * GL_R16_ROWS];
        gl_gemm_r16_ref(wt, N_IN, P, A, arow, nt, o, GL_R16_ROWS);
        k->gemm_r16[wt](N_IN, P, A, arow, nt, f, GL_R16_ROWS);
        if (memcmp(o, f, sizeof(float) * (size_t)(nt * GL_R16_ROWS)) != 0 && failures++ < 3)
            fprintf(stderr, "  %s %s r16 kernel at the extremes, %d tokens: differs from ref\n",
                    k->isa, gl_type_traits_of(wt)->name, nt);
    }
    gl_free(W);
    gl_free(P);
    gl_free(A);
    return failures;
}

TEST(test_matmul_r16)
{
    fill_inputs();
    struct gl_pool *pools[3] = {gl_pool_new(1), gl_pool_new(2), gl_pool_new(3)};
    REQUIRE(pools[0] && pools[1] && pools[2]);
    CHECK(gl_r16_supported(GL_TYPE_Q4_K) && gl_r16_supported(GL_TYPE_Q6_K));
    CHECK(!gl_r16_supported(GL_TYPE_Q5_K) && !gl_r16_supported(GL_TYPE_Q8_0));
    const char *isas[] = {"ref", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        struct gl_kernels k;
        if (!gl_kernels_init_isa(&k, isas[i])) {
            printf("# %s kernels not available: skipped\n", isas[i]);
            continue;
        }
        CHECK(check_r16(&k, GL_TYPE_Q4_K, pools, 3) == 0);
        CHECK(check_r16(&k, GL_TYPE_Q6_K, pools, 3) == 0);
        if (i == 0) // the ref table's r16 entry is gl_gemm_r16_ref itself: nothing to compare
            continue;
        CHECK(check_r16_extremes(&k, GL_TYPE_Q4_K) == 0);
        CHECK(check_r16_extremes(&k, GL_TYPE_Q6_K) == 0);
    }
    for (int p = 0; p < 3; p++)
        gl_pool_delete(pools[p]);
}

// The attention tile: every ISA's entry equals the reference bit for bit (same rows, tiles,
// visible ranges), and a run of tiles over a key range equals a plain double-precision softmax
// attention over that range.
static int check_attn(const struct gl_kernels *k, const struct gl_kernels *ref)
{
    enum { D = 64, ROWS = 7, NK = 45 }; // 7 rows: the 4-row path and the remainder
    static float q[ROWS * D], K[NK * D], V[NK * D];
    for (int i = 0; i < ROWS * D; i++)
        q[i] = rng_sym();
    for (int i = 0; i < NK * D; i++) {
        K[i] = rng_sym();
        V[i] = rng_sym();
    }
    const float scale = 0.7f;
    int failures = 0;
    static const int ranges[][2] = {{0, 45}, {3, 17}, {16, 32}, {31, 33}, {44, 45}};
    for (int ri = 0; ri < 5; ri++) {
        const int lo = ranges[ri][0], hi = ranges[ri][1];
        float m[2][ROWS], l[2][ROWS], O[2][ROWS * D];
        for (int v = 0; v < 2; v++) {
            for (int r = 0; r < ROWS; r++) {
                m[v][r] = -INFINITY;
                l[v][r] = 0;
            }
            memset(O[v], 0, sizeof O[v]);
            for (int s0 = lo / GL_ATTN_TILE * GL_ATTN_TILE; s0 < hi; s0 += GL_ATTN_TILE) {
                float KT[D * GL_ATTN_TILE], Vt[GL_ATTN_TILE * D];
                for (int kk = 0; kk < GL_ATTN_TILE; kk++)
                    for (int d = 0; d < D; d++) {
                        int s = s0 + kk < NK ? s0 + kk : 0; // lanes past the keys: finite junk
                        KT[d * GL_ATTN_TILE + kk] = K[s * D + d];
                        Vt[kk * D + d] = V[s * D + d];
                    }
                int a = lo > s0 ? lo : s0, e = hi < s0 + GL_ATTN_TILE ? hi : s0 + GL_ATTN_TILE;
                (v ? k : ref)
                    ->attn_tile(D, ROWS, q, KT, Vt, a - s0, e - s0, scale, m[v], l[v], O[v]);
            }
        }
        if (memcmp(O[0], O[1], sizeof O[0]) != 0 || memcmp(l[0], l[1], sizeof l[0]) != 0) {
            fprintf(stderr, "  %s attn tile, keys %d..%d: differs from ref\n", k->isa, lo, hi);
            failures++;
        }
        for (int r = 0; r < ROWS; r++) {
            double w[NK], mx = -1e300, sum = 0;
            for (int s = lo; s < hi; s++) {
                double dot = 0;
                for (int d = 0; d < D; d++)
                    dot += (double)q[r * D + d] * (double)K[s * D + d];
                w[s] = dot * (double)scale;
                mx = w[s] > mx ? w[s] : mx;
            }
            for (int s = lo; s < hi; s++)
                sum += (w[s] = exp(w[s] - mx));
            for (int d = 0; d < D; d++) {
                double want_o = 0;
                for (int s = lo; s < hi; s++)
                    want_o += w[s] / sum * (double)V[s * D + d];
                double got = (double)O[1][r * D + d] / (double)l[1][r];
                if (fabs(got - want_o) > 1e-5 && failures++ < 5)
                    fprintf(stderr, "  %s attn keys %d..%d row %d d %d: %.8g vs %.8g\n", k->isa, lo,
                            hi, r, d, got, want_o);
            }
        }
    }
    return failures;
}

TEST(test_attn_tile)
{
    struct gl_kernels ref;
    REQUIRE(gl_kernels_init_isa(&ref, "ref") && ref.attn_tile != NULL);
    const char *isas[] = {"ref", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        struct gl_kernels k;
        if (!gl_kernels_init_isa(&k, isas[i]))
            continue;
        REQUIRE(k.attn_tile != NULL);
        CHECK(check_attn(&k, &ref) == 0);
    }
}

int main(void)
{
    setenv("GLINT_ISA", "ref", 1); // read once, by the first gl_kernels_get()
    RUN_TESTS(test_pool_runs_each_thread_once, test_kernels_table, test_matmul_ref_exact,
              test_matmul_simd_exact, test_matmul_odd_tile, test_matmul_r16, test_attn_tile);
}
