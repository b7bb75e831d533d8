// SPDX-License-Identifier: MIT
// Tests for the BF16 token-lane GEMM (kernels.h gemm_bf16, gl_pack_bf16, gl_matmul_bf16):
//  - every ISA's tile is bit-identical to the reference tile (vdpbf16ps's arithmetic written out),
//    for 1-3 threads and shapes with partial column blocks, partial token groups and k blocks;
//  - it agrees with the row-layout BF16 vec_dot path (gl_quantize_rows to BF16 + gl_matmul, what
//    the vision encoder used before) within the f32 accumulation bound below. Both paths round the
//    activations to bf16 the same way (gl_f32_to_bf16) and multiply the same bf16 pairs, whose
//    products are exact in f32; they differ only in the order of the f32 additions. A sum of n
//    terms in any order is within (n - 1) u S of the exact sum, u = 2^-24, S = sum |w_i a_i|
//    (first order; n <= 1176 here keeps n u < 1e-4), so the two are within 2 n u S of each
//    other. Each is also checked against the exact (double) sum of the same bf16 products.
#include "kernels/kernels.h"

#include "base/base.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rng_sym(void) // [-1, 1), normal floats (no bf16 denormals: DAZ is not exercised)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

// One shape on one table: returns the number of failures (first few printed).
static int check_shape(const struct gl_kernels *k, const struct gl_kernels *ref, int threads,
                       int64_t n_rows, int64_t n_in, int64_t n_tok)
{
    int failures = 0;
    struct gl_pool *pool = gl_pool_new(threads);
    uint16_t *W = malloc((size_t)(n_rows * n_in) * 2);
    float *x = malloc((size_t)(n_tok * n_in) * 4);
    void *packed = malloc(gl_bf16_packed_bytes(n_tok, n_in));
    uint16_t *xb = malloc((size_t)(n_tok * n_in) * 2);
    float *out = malloc((size_t)(n_tok * n_rows) * 4),
          *out_ref = malloc((size_t)(n_tok * n_rows) * 4),
          *out_vd = malloc((size_t)(n_tok * n_rows) * 4);
    if (!pool || !W || !x || !packed || !xb || !out || !out_ref || !out_vd)
        abort();
    // Rows of different magnitudes, so the bound is checked at several scales.
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t e = 0; e < n_in; e++)
            W[r * n_in + e] = gl_f32_to_bf16(rng_sym() * (float)(1 + r % 5));
    for (int64_t i = 0; i < n_tok * n_in; i++)
        x[i] = rng_sym() * 3.0f;
    gl_pack_bf16(pool, x, n_tok, n_in, n_in, packed);
    memset(out, 0xff, (size_t)(n_tok * n_rows) * 4); // NaN: an element not written shows
    gl_matmul_bf16(pool, k, W, n_rows, n_in, packed, n_tok, out, n_rows);
    gl_matmul_bf16(pool, ref, W, n_rows, n_in, packed, n_tok, out_ref, n_rows);
    // The row-layout path: BF16 activation rows and the table's vec_dot.
    gl_quantize_rows(pool, k, GL_TYPE_BF16, x, n_tok, n_in, xb, (size_t)n_in * 2);
    gl_matmul(pool, k, GL_TYPE_BF16, W, n_rows, n_in, xb, (size_t)n_in * 2, n_tok, out_vd, n_rows);
    const double u = 1.0 / 16777216.0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_rows; r++) {
            double exact = 0, S = 0;
            for (int64_t e = 0; e < n_in; e++) {
                double p = (double)gl_bf16_to_f32(W[r * n_in + e]) *
                           (double)gl_bf16_to_f32(xb[t * n_in + e]);
                exact += p;
                S += fabs(p);
            }
            float a = out[t * n_rows + r], b = out_ref[t * n_rows + r], c = out_vd[t * n_rows + r];
            double tol = (double)n_in * u * S;
            int bad = memcmp(&a, &b, 4) != 0 || !(fabs((double)a - exact) <= tol) ||
                      !(fabs((double)a - (double)c) <= 2 * tol);
            if (bad && failures++ < 5)
                fprintf(stderr,
                        "  %s %d thr %lldx%lld x %lld tok: t %lld r %lld: %.9g ref %.9g vec_dot "
                        "%.9g exact %.9g (tol %.3g)\n",
                        k->isa, threads, (long long)n_rows, (long long)n_in, (long long)n_tok,
                        (long long)t, (long long)r, (double)a, (double)b, (double)c, exact, tol);
        }
    free(W);
    free(x);
    free(packed);
    free(xb);
    free(out);
    free(out_ref);
    free(out_vd);
    gl_pool_delete(pool);
    return failures;
}

TEST(test_gemm_bf16_shapes)
{
    struct gl_kernels ref;
    REQUIRE(gl_kernels_init_isa(&ref, "ref") && ref.gemm_bf16 != NULL);
    const char *isas[] = {"ref", "avx2", "avx512"};
    // Rows: under one column block, partial blocks, several chunks of 96. n_in: one pair, a
    // partial k block, exactly one, two and a bit (block = 512), the patch width 1176. Tokens:
    // one, a partial group, whole groups, partial tiles of 64.
    const int64_t shapes[][3] = {{1, 2, 1},       {12, 30, 16},    {13, 512, 17}, {97, 514, 33},
                                 {200, 1176, 70}, {25, 1100, 129}, {192, 64, 200}};
    for (int i = 0; i < 3; i++) {
        struct gl_kernels k;
        if (!gl_kernels_init_isa(&k, isas[i]))
            continue;
        CHECK((k.gemm_bf16 == NULL) == (i == 1)); // AVX2 has none: BF16 keeps vec_dot there
        if (k.gemm_bf16 == NULL)
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int threads = 1; threads <= 3; threads++)
                CHECKF(check_shape(&k, &ref, threads, shapes[s][0], shapes[s][1], shapes[s][2]) ==
                           0,
                       "%s shape %zu threads %d", isas[i], s, threads);
    }
}

// The pack: token t, element e at group t / 16, pair e / 2, lane t % 16, half e % 2; missing
// tokens of the last group zero.
TEST(test_pack_bf16_layout)
{
    struct gl_pool *pool = gl_pool_new(2);
    REQUIRE(pool != NULL);
    const int64_t n_tok = 21, n_in = 6, x_stride = 9;
    float x[21 * 9];
    for (int i = 0; i < 21 * 9; i++)
        x[i] = rng_sym();
    size_t bytes = gl_bf16_packed_bytes(n_tok, n_in);
    CHECK(bytes == 32 * 6 * 2);
    uint16_t *p = malloc(bytes);
    REQUIRE(p != NULL);
    memset(p, 0xab, bytes);
    gl_pack_bf16(pool, x, n_tok, n_in, x_stride, p);
    int bad = 0;
    for (int64_t t = 0; t < 32; t++)
        for (int64_t e = 0; e < n_in; e++) {
            uint16_t want = t < n_tok ? gl_f32_to_bf16(x[t * x_stride + e]) : 0;
            uint16_t got = p[(t / 16) * 16 * n_in + (e / 2) * 32 + (t % 16) * 2 + e % 2];
            bad += got != want;
        }
    CHECK(bad == 0);
    free(p);
    gl_pool_delete(pool);
}

int main(void)
{
    RUN_TESTS(test_gemm_bf16_shapes, test_pack_bf16_layout);
}
