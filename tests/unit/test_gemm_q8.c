// SPDX-License-Identifier: MIT
// Tests for the Q8_0 token-lane GEMM (kernels.h gemm_q8_0, gl_pack_q8_0, gl_prep_q8_0,
// gl_matmul_q8_0):
//  - every ISA's tile is bit-identical to the reference tile (exact int32 block sums, one f32 fma
//    per block in block order), for 1-3 threads and shapes with partial 6-column blocks, partial
//    16-token groups and partial 16-block (512-element) k blocks, weights including -128 quants;
//  - the pack quantizes exactly as the row path (gl_quantize_rows to Q8_0): the exact (double)
//    sum checked below is built from the row path's quants and scales;
//  - it agrees with the row-layout Q8_0 path (gl_quantize_rows + gl_matmul, vec_dot / vec_dot4).
//    Both add the same terms d_w d_a s_b (exact integer block sums s_b, exact scale products);
//    the tile adds them in block order, one rounding each, so it is within nb u S of the exact
//    sum (nb blocks, u = 2^-24, S = sum over blocks of |d_w d_a| sum |q_w q_a|, first order); the
//    AVX-512 row path splits each block into 8 lane partials over 4 accumulators then sums 32
//    lanes (nb / 4 + 5 roundings per lane term), the reference row path adds mul-rounded terms in
//    order, so the two paths are within (2 nb + 8) u S of each other.
#include "kernels/kernels.h"

#include "base/base.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rng_sym(void) // [-1, 1)
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
    const int64_t nb = n_in / 32;
    const size_t row = gl_type_row_size(GL_TYPE_Q8_0, n_in);
    struct gl_pool *pool = gl_pool_new(threads);
    uint8_t *W = malloc(row * (size_t)n_rows), *xq = malloc(row * (size_t)n_tok);
    float *wrow = malloc((size_t)n_in * 4), *x = malloc((size_t)(n_tok * n_in) * 4);
    void *packed = malloc(gl_q8_0_packed_bytes(n_tok, n_in));
    struct gl_q8_0_wsum *ws = malloc((size_t)(n_rows * nb) * sizeof *ws);
    float *out = malloc((size_t)(n_tok * n_rows) * 4),
          *out_ref = malloc((size_t)(n_tok * n_rows) * 4),
          *out_vd = malloc((size_t)(n_tok * n_rows) * 4);
    if (!pool || !W || !xq || !wrow || !x || !packed || !ws || !out || !out_ref || !out_vd)
        abort();
    // Rows of different magnitudes; every 7th block of every 3rd row gets a -128 quant (legal in
    // a Q8_0 file, never produced by the activation quantizer).
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t e = 0; e < n_in; e++)
            wrow[e] = rng_sym() * (float)(1 + r % 5);
        ref->from_float[GL_TYPE_Q8_0](wrow, W + (size_t)r * row, n_in);
        for (int64_t b = 0; r % 3 == 0 && b < nb; b += 7)
            ((struct gl_block_q8_0 *)(W + (size_t)r * row))[b].qs[(r + b) % 32] = -128;
    }
    for (int64_t i = 0; i < n_tok * n_in; i++)
        x[i] = rng_sym() * 3.0f;
    gl_pack_q8_0(pool, k, x, n_tok, n_in, n_in, packed);
    gl_prep_q8_0(pool, W, n_rows, n_in, ws);
    memset(out, 0xff, (size_t)(n_tok * n_rows) * 4); // NaN: an element not written shows
    gl_matmul_q8_0(pool, k, W, ws, n_rows, n_in, packed, n_tok, out, n_rows);
    gl_matmul_q8_0(pool, ref, W, ws, n_rows, n_in, packed, n_tok, out_ref, n_rows);
    // The row-layout path: Q8_0 activation rows and the table's vec_dot / vec_dot4.
    gl_quantize_rows(pool, k, GL_TYPE_Q8_0, x, n_tok, n_in, xq, row);
    gl_matmul(pool, k, GL_TYPE_Q8_0, W, n_rows, n_in, xq, row, n_tok, out_vd, n_rows);
    const double u = 1.0 / 16777216.0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_rows; r++) {
            const struct gl_block_q8_0 *wb = (const void *)(W + (size_t)r * row),
                                       *ab = (const void *)(xq + (size_t)t * row);
            double exact = 0, S = 0;
            for (int64_t b = 0; b < nb; b++) {
                double d = (double)gl_fp16_to_f32(wb[b].d) * (double)gl_fp16_to_f32(ab[b].d);
                long sum = 0, mag = 0;
                for (int e = 0; e < 32; e++) {
                    sum += (long)wb[b].qs[e] * ab[b].qs[e];
                    mag += labs((long)wb[b].qs[e] * ab[b].qs[e]);
                }
                exact += d * (double)sum;
                S += fabs(d) * (double)mag;
            }
            float a = out[t * n_rows + r], b = out_ref[t * n_rows + r], c = out_vd[t * n_rows + r];
            double tol = (double)nb * u * S + 1e-30;
            int bad = memcmp(&a, &b, 4) != 0 || !(fabs((double)a - exact) <= tol) ||
                      !(fabs((double)a - (double)c) <= (2.0 * (double)nb + 8.0) * u * S + 1e-30);
            if (bad && failures++ < 5)
                fprintf(stderr,
                        "  %s %d thr %lldx%lld x %lld tok: t %lld r %lld: %.9g ref %.9g vec_dot "
                        "%.9g exact %.9g (tol %.3g)\n",
                        k->isa, threads, (long long)n_rows, (long long)n_in, (long long)n_tok,
                        (long long)t, (long long)r, (double)a, (double)b, (double)c, exact, tol);
        }
    free(W);
    free(xq);
    free(wrow);
    free(x);
    free(packed);
    free(ws);
    free(out);
    free(out_ref);
    free(out_vd);
    gl_pool_delete(pool);
    return failures;
}

TEST(test_gemm_q8_0_shapes)
{
    struct gl_kernels ref;
    REQUIRE(gl_kernels_init_isa(&ref, "ref") && ref.gemm_q8_0 != NULL);
    const char *isas[] = {"ref", "avx2", "avx512"};
    // Rows: one, a column block of 6, partial blocks, several chunks of 96. n_in: one block, a
    // partial k block (16 blocks = 512), exactly one, one and a bit, three and a bit, the
    // encoder's 1536. Tokens: one, a partial group, whole groups, partial tiles of 64.
    const int64_t shapes[][3] = {{1, 32, 1},      {6, 64, 16},     {7, 512, 17},  {97, 544, 33},
                                 {200, 1536, 70}, {25, 1120, 129}, {192, 96, 200}};
    for (int i = 0; i < 3; i++) {
        struct gl_kernels k;
        if (!gl_kernels_init_isa(&k, isas[i]))
            continue;
        CHECK((k.gemm_q8_0 == NULL) == (i == 1)); // AVX2 has none: Q8_0 keeps vec_dot there
        if (k.gemm_q8_0 == NULL)
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int threads = 1; threads <= 3; threads++)
                CHECKF(check_shape(&k, &ref, threads, shapes[s][0], shapes[s][1], shapes[s][2]) ==
                           0,
                       "%s shape %zu threads %d", isas[i], s, threads);
    }
}

// The pack: token t, element e at group t / 16, block e / 32, quad (e % 32) / 4, lane t % 16,
// byte e % 4, as the reference quant + 128; the scale at float 128 + t % 16 of the block;
// missing tokens of the last group quant 0 (u8 128), scale 0. The prep: -128 * sum, scale.
TEST(test_pack_q8_0_layout)
{
    struct gl_pool *pool = gl_pool_new(2);
    struct gl_kernels ref;
    REQUIRE(pool != NULL && gl_kernels_init_isa(&ref, "ref"));
    const int64_t n_tok = 21, n_in = 64, x_stride = 70;
    float x[21 * 70];
    for (int i = 0; i < 21 * 70; i++)
        x[i] = rng_sym();
    size_t bytes = gl_q8_0_packed_bytes(n_tok, n_in);
    CHECK(bytes == 2 * 2 * GL_Q8_BLOCK_BYTES);
    uint8_t *p = malloc(bytes);
    struct gl_block_q8_0 q[2];
    REQUIRE(p != NULL);
    memset(p, 0xab, bytes);
    gl_pack_q8_0(pool, gl_kernels_get(), x, n_tok, n_in, x_stride, p);
    int bad = 0;
    for (int64_t t = 0; t < 32; t++) {
        memset(q, 0, sizeof q);
        if (t < n_tok)
            ref.from_float[GL_TYPE_Q8_0](x + t * x_stride, q, n_in);
        for (int64_t e = 0; e < n_in; e++) {
            const uint8_t *blk = p + ((t / 16) * 2 + e / 32) * GL_Q8_BLOCK_BYTES;
            bad += blk[(e % 32) / 4 * 64 + (t % 16) * 4 + e % 4] !=
                   (uint8_t)(q[e / 32].qs[e % 32] + 128);
            float s;
            memcpy(&s, blk + 512 + 4 * (t % 16), 4);
            bad += s != gl_fp16_to_f32(q[e / 32].d);
        }
    }
    CHECK(bad == 0);
    struct gl_q8_0_wsum ws[2];
    gl_prep_q8_0(pool, q, 1, 64, ws); // token 31's zero blocks: then one filled by hand
    CHECK(ws[0].corr == 0 && ws[0].d == 0.0f);
    q[1].d = gl_f32_to_fp16(0.5f);
    for (int e = 0; e < 32; e++)
        q[1].qs[e] = (int8_t)(e % 2 ? -128 : e);
    gl_prep_q8_0(pool, q, 1, 64, ws);
    CHECK(ws[1].corr == -128 * (240 - 16 * 128) && ws[1].d == 0.5f);
    free(p);
    gl_pool_delete(pool);
}

int main(void)
{
    RUN_TESTS(test_gemm_q8_0_shapes, test_pack_q8_0_layout);
}
