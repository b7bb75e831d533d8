// SPDX-License-Identifier: MIT
// test_kernels: every SIMD table entry (avx2, avx512; skipped with a note when the CPU lacks the
// ISA) against the scalar reference in src/quant: vec_dot for each weight type within a named
// relative tolerance of the reference (relative to sum |x_i * y_i|), from_float byte-identical,
// to_float bit-identical. Sizes run from one block to 19968 elements (odd sizes for the float
// types), rows sit 1..63 bytes past a 64-byte boundary (keeping only the element type's own
// alignment), weights come from the reference quantizer and from random block bytes.
// Deterministic: one fixed seed, printed with every failure.
#include "kernels/kernels.h"

#include "base/base.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define SEED 0x5eed2026u

// Tolerances on |simd - ref| / sum|x_i*y_i|. Integer parts are exact; what remains is float
// summation order (lanes then a tree, vs the reference's per-block float or double sum) and
// one rounding of each block's scale product.
#define TOL_F32  2e-6
#define TOL_F16  2e-6
#define TOL_BF16 4e-6 // vdpbf16ps rounds each pair sum to f32 before accumulating
#define TOL_Q8_0 2e-6
#define TOL_Q4_0 2e-6
#define TOL_K    2e-6

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static float rng_unit(void) // [-1, 1)
{
    return (float)(rng_next() >> 40) / (float)(1u << 23) - 1.0f;
}

// Roughly normal values with occasional outliers (quant scale search and amax paths).
static void fill_floats(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++) {
        float v = (rng_unit() + rng_unit() + rng_unit()) * scale;
        if ((rng_next() & 63) == 0)
            v *= 8.0f;
        x[i] = v;
    }
}

static double tol_of(enum gl_type t)
{
    switch (t) {
    case GL_TYPE_F32:
        return TOL_F32;
    case GL_TYPE_F16:
        return TOL_F16;
    case GL_TYPE_BF16:
        return TOL_BF16;
    case GL_TYPE_Q8_0:
        return TOL_Q8_0;
    case GL_TYPE_Q4_0:
        return TOL_Q4_0;
    default:
        return TOL_K;
    }
}

// A buffer holding `bytes` at a chosen misalignment (1..63 bytes past a 64-byte boundary).
struct buf {
    unsigned char *base;
    void *p;
};

static void buf_init(struct buf *b, size_t bytes, int offset)
{
    b->base = gl_malloc_aligned(bytes + 128);
    GL_ASSERT(b->base != NULL);
    b->p = b->base + offset;
}

static void buf_free(struct buf *b)
{
    gl_free_aligned(b->base);
}

// Rows at every offset 1..63 that keeps the element type's own alignment (a row of floats, or of
// blocks holding an fp16/f32 scale, is never less aligned than that in a real tensor; anything
// less would be undefined behaviour in the reference too).
static int rand_offset(enum gl_type t)
{
    int align;
    switch (t) {
    case GL_TYPE_F32:
        align = (int)_Alignof(float);
        break;
    case GL_TYPE_Q8_K:
        align = (int)_Alignof(struct gl_block_q8_K);
        break;
    default: // F16, BF16 and the blocks whose first field is a uint16_t scale
        align = (int)_Alignof(uint16_t);
        break;
    }
    return align * (1 + (int)(rng_next() % (uint64_t)(63 / align)));
}

// Overwrites the fp16 scale fields of random-byte blocks with sane values (random bits would
// give NaN/inf scales, which say nothing about the kernels).
static void sanitize_scales(enum gl_type t, void *row, int64_t nb)
{
    const struct gl_type_traits *tt = gl_type_traits_of(t);
    unsigned char *b = row;
    for (int64_t i = 0; i < nb; i++, b += tt->type_size) {
        uint16_t d = gl_f32_to_fp16(0.001f + 0.01f * fabsf(rng_unit()));
        uint16_t dmin = gl_f32_to_fp16(0.001f + 0.01f * fabsf(rng_unit()));
        if (t == GL_TYPE_Q6_K) {
            memcpy(b + offsetof(struct gl_block_q6_K, d), &d, 2);
        } else {
            memcpy(b, &d, 2);
            if (t == GL_TYPE_Q4_K || t == GL_TYPE_Q5_K)
                memcpy(b + 2, &dmin, 2);
        }
    }
}

// sum |x_i * y_i| over the dequantized rows: the scale the dot's rounding error is measured in.
static double abs_dot(enum gl_type wt, const void *w, enum gl_type at, const void *a, int64_t n)
{
    float *xf = gl_malloc((size_t)n * sizeof(float)), *yf = gl_malloc((size_t)n * sizeof(float));
    GL_ASSERT(xf && yf);
    gl_dequantize_row_ref(wt, w, xf, n);
    gl_dequantize_row_ref(at, a, yf, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += fabs((double)xf[i] * (double)yf[i]);
    gl_free(xf);
    gl_free(yf);
    return s;
}

// vec_dot4 on the same weight row against four activation rows (stride not a multiple of 64,
// the checked row in slot 2, the others fresh) must give, for each, the same bits as vec_dot:
// gl_matmul mixes the two, and batching-is-exact tests rely on it. s1 = vec_dot(w, a).
static int check_dot4(const struct gl_kernels *k, enum gl_type wt, int64_t n, const void *w,
                      const void *a, float s1)
{
    enum gl_type at = gl_type_vec_dot_type(wt);
    size_t abytes = gl_type_row_size(at, n), stride = abytes + 20;
    struct buf y;
    buf_init(&y, 4 * stride, rand_offset(at));
    float *af = gl_malloc((size_t)n * sizeof(float));
    GL_ASSERT(af != NULL);
    for (int t = 0; t < 4; t++) {
        unsigned char *row = (unsigned char *)y.p + (size_t)t * stride;
        if (t == 2) {
            memcpy(row, a, abytes);
        } else {
            fill_floats(af, n, 1.0f);
            gl_quantize_row_ref(at, af, row, n);
        }
    }
    float s4[4 * 3 + 1];
    for (int i = 0; i < 13; i++)
        s4[i] = -1234.5f;
    k->vec_dot4[wt](n, s4, 3, w, y.p, stride);
    int ok = 1;
    for (int t = 0; t < 4; t++) {
        float want = s1;
        if (t != 2)
            k->vec_dot[wt](n, &want, w, (unsigned char *)y.p + (size_t)t * stride);
        int same = memcmp(&want, &s4[3 * t], sizeof want) == 0;
        CHECKF(same, "seed %#x isa %s vec_dot4 %s n=%lld token %d: %.9g, vec_dot %.9g", SEED,
               k->isa, gl_type_traits_of(wt)->name, (long long)n, t, (double)s4[3 * t],
               (double)want);
        ok &= same;
    }
    for (int i = 0; i < 13; i++)
        if (i % 3 != 0)
            CHECKF(s4[i] == -1234.5f, "isa %s vec_dot4 %s wrote s[%d] outside its stride", k->isa,
                   gl_type_traits_of(wt)->name, i);
    buf_free(&y);
    gl_free(af);
    return ok;
}

// One vec_dot case: weight row from `src` (0 = reference quantizer, 1 = random bytes).
static int check_dot(const struct gl_kernels *k, enum gl_type wt, int64_t n, int src)
{
    enum gl_type at = gl_type_vec_dot_type(wt);
    const struct gl_type_traits *tw = gl_type_traits_of(wt);
    size_t wbytes = gl_type_row_size(wt, n), abytes = gl_type_row_size(at, n);
    float *wf = gl_malloc((size_t)n * sizeof(float)), *af = gl_malloc((size_t)n * sizeof(float));
    GL_ASSERT(wf && af);
    fill_floats(wf, n, 0.05f);
    fill_floats(af, n, 1.0f);
    struct buf w, a;
    buf_init(&w, wbytes, rand_offset(wt));
    buf_init(&a, abytes, rand_offset(at));
    if (src == 0 || tw->blck_size == 1) {
        gl_quantize_row_ref(wt, wf, w.p, n);
    } else {
        for (size_t i = 0; i < wbytes; i++)
            ((unsigned char *)w.p)[i] = (unsigned char)rng_next();
        sanitize_scales(wt, w.p, n / tw->blck_size);
    }
    gl_quantize_row_ref(at, af, a.p, n);

    float s_ref = 0, s = 0;
    gl_vec_dot_ref(wt, n, &s_ref, w.p, a.p);
    k->vec_dot[wt](n, &s, w.p, a.p);
    double scale = abs_dot(wt, w.p, at, a.p, n);
    double err = fabs((double)s - (double)s_ref), lim = tol_of(wt) * scale + 1e-30;
    int ok = err <= lim;
    CHECKF(ok, "seed %#x isa %s vec_dot %s n=%lld src=%d: got %.9g ref %.9g (err %.3g > %.3g)",
           SEED, k->isa, tw->name, (long long)n, src, (double)s, (double)s_ref, err, lim);
    if (k->vec_dot4[wt] != NULL)
        ok &= check_dot4(k, wt, n, w.p, a.p, s);
    buf_free(&w);
    buf_free(&a);
    gl_free(wf);
    gl_free(af);
    return ok;
}

static const enum gl_type weight_types[] = {GL_TYPE_F32,  GL_TYPE_F16,  GL_TYPE_BF16, GL_TYPE_Q8_0,
                                            GL_TYPE_Q4_0, GL_TYPE_Q4_K, GL_TYPE_Q5_K, GL_TYPE_Q6_K};
#define N_WEIGHT_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

static const int64_t float_sizes[] = {1,  3,  15, 16,  17,  31,   33,   47,
                                      63, 64, 65, 100, 129, 6656, 6661, 19973};
static const int64_t block_counts[] = {1, 2, 3, 5, 26, 78}; // 78 * 256 = 19968

// Returns 0 and prints a note when the CPU lacks the ISA.
static int load_isa(struct gl_kernels *k, const char *isa)
{
    if (gl_kernels_init_isa(k, isa))
        return 1;
    printf("# skip %s: not supported by this CPU/build\n", isa);
    return 0;
}

static void dots_for(const char *isa)
{
    struct gl_kernels k;
    if (!load_isa(&k, isa))
        return;
    rng_state = SEED;
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        enum gl_type wt = weight_types[t];
        const struct gl_type_traits *tw = gl_type_traits_of(wt);
        int n_sizes = tw->blck_size == 1 ? (int)(sizeof float_sizes / sizeof float_sizes[0])
                                         : (int)(sizeof block_counts / sizeof block_counts[0]);
        for (int i = 0; i < n_sizes; i++) {
            int64_t n = tw->blck_size == 1 ? float_sizes[i] : block_counts[i] * GL_QK_K;
            for (int src = 0; src < 2; src++)
                check_dot(&k, wt, n, src);
            if (tw->blck_size == 32) // also sizes that are not multiples of 256
                check_dot(&k, wt, block_counts[i] * 32 + 32, 1);
        }
    }
}

TEST(test_vec_dot_avx2)
{
    dots_for("avx2");
}

TEST(test_vec_dot_avx512)
{
    dots_for("avx512");
}

// Activation rows with the edge cases the quantizers must round like the reference: exact .5
// ties (amax = 127 makes the scale 1), +/-amax both present (the first one sets Q8_K's sign),
// all-zero blocks, fp16 overflow/subnormals and NaN for the float formats.
static void fill_activation(float *x, int64_t n, int variant)
{
    fill_floats(x, n, 1.0f);
    if (variant == 1) {
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)((int)(rng_next() % 255) - 127) + ((rng_next() & 1) ? 0.5f : 0.0f);
        for (int64_t b = 0; b + 32 <= n; b += 32)
            x[b + (int64_t)(rng_next() % 32)] = (rng_next() & 1) ? 127.0f : -127.0f;
    } else if (variant == 2) {
        for (int64_t b = 0; b + 256 <= n; b += 512)
            memset(x + b, 0, 256 * sizeof(float));
        for (int64_t b = 256; b + 256 <= n; b += 512) {
            x[b + 3] = -9.0f;
            x[b + 200] = 9.0f;
        }
    } else if (variant == 3) {
        const float special[] = {65504.f,       65520.f,  1e9f,        -70000.f,    6e-8f,   3e-8f,
                                 2.9802322e-8f, 1e-40f,   -1e-45f,     0.0f,        -0.0f,   NAN,
                                 -NAN,          INFINITY, 1.00390625f, 1.01171875f, -3.0e38f};
        // NaNs with payloads, quiet and signalling: both formats define one canonical result.
        const uint32_t nan_bits[] = {0x7fc12345u, 0xffd00001u, 0x7f800001u, 0xff812345u,
                                     0x7fbfffffu};
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = rng_next();
            if ((r & 3) == 0)
                x[i] = special[(r >> 8) % (sizeof special / sizeof special[0])];
            else if ((r & 15) == 1)
                memcpy(&x[i], &nan_bits[(r >> 8) % 5], sizeof(float));
        }
    }
}

static void from_float_for(const char *isa)
{
    struct gl_kernels k;
    if (!load_isa(&k, isa))
        return;
    rng_state = SEED ^ 1;
    const enum gl_type act_types[] = {GL_TYPE_Q8_0, GL_TYPE_Q8_K, GL_TYPE_F16, GL_TYPE_BF16};
    for (int t = 0; t < 4; t++) {
        enum gl_type at = act_types[t];
        const struct gl_type_traits *tt = gl_type_traits_of(at);
        for (int v = 0; v < 4; v++) {
            if (v == 3 && tt->blck_size != 1)
                continue; // NaN/inf give unspecified quants; only the float formats define them
            for (int s = 0; s < 6; s++) {
                int64_t n = tt->blck_size == 1 ? float_sizes[s + 10] : block_counts[s] * GL_QK_K;
                size_t bytes = gl_type_row_size(at, n);
                float *x = gl_malloc((size_t)n * sizeof(float));
                unsigned char *want = gl_malloc(bytes);
                struct buf got;
                buf_init(&got, bytes, rand_offset(at));
                GL_ASSERT(x && want);
                fill_activation(x, n, v);
                gl_quantize_row_ref(at, x, want, n);
                memset(got.p, 0xa5, bytes);
                k.from_float[at](x, got.p, n);
                size_t first = bytes;
                for (size_t i = 0; i < bytes && first == bytes; i++)
                    if (((unsigned char *)got.p)[i] != want[i])
                        first = i;
                CHECKF(first == bytes,
                       "seed %#x isa %s from_float %s n=%lld variant %d: byte %zu differs "
                       "(got %02x want %02x)",
                       SEED, isa, tt->name, (long long)n, v, first,
                       first < bytes ? ((unsigned char *)got.p)[first] : 0,
                       first < bytes ? want[first] : 0);
                buf_free(&got);
                gl_free(want);
                gl_free(x);
            }
        }
    }
}

TEST(test_from_float_avx2)
{
    from_float_for("avx2");
}

TEST(test_from_float_avx512)
{
    from_float_for("avx512");
}

static void to_float_for(const char *isa)
{
    struct gl_kernels k;
    if (!load_isa(&k, isa))
        return;
    rng_state = SEED ^ 2;
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        enum gl_type wt = weight_types[t];
        const struct gl_type_traits *tw = gl_type_traits_of(wt);
        for (int s = 0; s < 6; s++) {
            int64_t n = tw->blck_size == 1 ? float_sizes[s + 10] : block_counts[s] * GL_QK_K;
            size_t bytes = gl_type_row_size(wt, n);
            struct buf w;
            buf_init(&w, bytes, rand_offset(wt));
            // Random bits: every nibble/scale pattern; for F16/BF16 also NaN, inf, subnormals.
            for (size_t i = 0; i < bytes; i++)
                ((unsigned char *)w.p)[i] = (unsigned char)rng_next();
            if (tw->blck_size > 1)
                sanitize_scales(wt, w.p, n / tw->blck_size);
            float *want = gl_malloc((size_t)n * sizeof(float));
            float *got = gl_malloc((size_t)n * sizeof(float));
            GL_ASSERT(want && got);
            gl_dequantize_row_ref(wt, w.p, want, n);
            k.to_float[wt](w.p, got, n);
            int64_t first = n;
            for (int64_t i = 0; i < n && first == n; i++)
                if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                    first = i;
            CHECKF(first == n,
                   "seed %#x isa %s to_float %s n=%lld: element %lld got %.9g want %.9g", SEED, isa,
                   tw->name, (long long)n, (long long)first, first < n ? (double)got[first] : 0.0,
                   first < n ? (double)want[first] : 0.0);
            buf_free(&w);
            gl_free(want);
            gl_free(got);
        }
    }
}

TEST(test_to_float_avx2)
{
    to_float_for("avx2");
}

TEST(test_to_float_avx512)
{
    to_float_for("avx512");
}

// The table the process actually uses must be complete for every type the model may carry.
TEST(test_table_complete)
{
    const struct gl_kernels *k = gl_kernels_get();
    REQUIRE(k != NULL);
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        enum gl_type wt = weight_types[t];
        CHECK(k->vec_dot[wt] != NULL);
        CHECK(k->to_float[wt] != NULL);
        CHECK(k->from_float[gl_type_vec_dot_type(wt)] != NULL);
    }
}

// attn_rows (kernels.h): every ISA's entry against attention in float64, on odd shapes (rows not
// a multiple of 4, keys not a multiple of the 64-key chunk, head widths over the 6-register
// output block) and padded strides; the scores spread over ~60 nats in the peaky cases, so the
// exp's range and the running-max rescaling both matter. Bound: 1e-5 of max |v| (a few f32 ulps
// per term; a wrong chunk edge or rescale is off by 1e-2 or more).
static double attn_rows_case(const struct gl_kernels *k, int D, int n_q, int n_k, float spread)
{
    const int64_t qs = D + 16, ks = 3 * D, vs = D + 32, os = D + 16;
    float *q = gl_malloc(sizeof(float) * (size_t)(n_q * qs)),
          *kk = gl_malloc(sizeof(float) * (size_t)(n_k * ks)),
          *v = gl_malloc(sizeof(float) * (size_t)(n_k * vs)),
          *out = gl_malloc(sizeof(float) * (size_t)(n_q * os)),
          *scratch = gl_malloc_aligned(sizeof(float) * (size_t)gl_attn_rows_scratch(D, n_q));
    double *w = gl_malloc(sizeof(double) * (size_t)n_k);
    GL_ASSERT(q && kk && v && out && scratch && w);
    fill_floats(q, n_q * qs, spread);
    fill_floats(kk, n_k * ks, 1.0f);
    fill_floats(v, n_k * vs, 1.0f);
    const float scale = 1.0f / sqrtf((float)D);
    k->attn_rows(D, n_q, q, qs, n_k, kk, ks, v, vs, scale, out, os, scratch);
    double worst = 0, vmax = 0;
    for (int64_t i = 0; i < n_k * vs; i++)
        vmax = fmax(vmax, fabs(v[i]));
    for (int r = 0; r < n_q; r++) {
        double mx = -1e300, sum = 0;
        for (int j = 0; j < n_k; j++) {
            double dot = 0;
            for (int d = 0; d < D; d++)
                dot += (double)q[r * qs + d] * (double)kk[j * ks + d];
            w[j] = dot * (double)scale;
            mx = fmax(mx, w[j]);
        }
        for (int j = 0; j < n_k; j++)
            sum += (w[j] = exp(w[j] - mx));
        for (int d = 0; d < D; d++) {
            double want = 0;
            for (int j = 0; j < n_k; j++)
                want += w[j] / sum * (double)v[j * vs + d];
            worst = fmax(worst, fabs((double)out[r * os + d] - want) / vmax);
        }
    }
    gl_free(q);
    gl_free(kk);
    gl_free(v);
    gl_free(out);
    gl_free_aligned(scratch);
    gl_free(w);
    return worst;
}

TEST(test_attn_rows)
{
    static const char *const isas[] = {"ref", "avx2", "avx512"};
    static const int shapes[][3] = {{16, 1, 1},   {16, 5, 63},    {96, 4, 64},  {96, 3, 65},
                                    {96, 7, 200}, {96, 257, 300}, {64, 9, 129}, {128, 6, 130},
                                    {144, 2, 70}, {256, 3, 33},   {96, 2, 1030}};
    for (int i = 0; i < 3; i++) {
        struct gl_kernels k;
        if (!load_isa(&k, isas[i]))
            continue;
        CHECK((k.attn_rows == NULL) == (i == 1)); // AVX2 keeps attn_tile in the vision encoder
        if (!k.attn_rows)
            continue;
        double worst = 0;
        rng_state = 99;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int peaky = 0; peaky < 2; peaky++) {
                double e = attn_rows_case(&k, shapes[s][0], shapes[s][1], shapes[s][2],
                                          peaky ? 12.0f : 1.0f);
                CHECKF(e <= 1e-5, "%s D %d rows %d keys %d spread %d: err %.3g of max|v|", isas[i],
                       shapes[s][0], shapes[s][1], shapes[s][2], peaky ? 12 : 1, e);
                worst = fmax(worst, e);
            }
        printf("# attn_rows %s: worst error %.3g of max|v|\n", isas[i], worst);
    }
}

// swiglu / gate / softcap (kernels.h): every ISA's entry, the libm reference included, against
// float64 on a dense sweep of [-100, 100] and the edges (0, denormals, the tanh branch point
// 0.625, exp's clamps near +-88, huge, +-inf), n odd so the SIMD tails run. Bound: 1e-6 relative
// (a few ulps; a wrong polynomial term or branch is off by 1e-4 or more) above 1e-30 absolute.
// And an element's bits must not depend on its position or on n (a row alone or in a batch).
static double rel_err(double got, double want)
{
    if (isinf(want) || isnan(want))
        return got == want || (isnan(got) && isnan(want)) ? 0 : 1;
    double d = fabs(got - want);
    return d <= 1e-30 ? 0 : d / fabs(want);
}

// op 0: swiglu(d, s = up); 1: gate(d, s = the gate's input); 2: softcap(d) (s unused).
static void run_activation(const struct gl_kernels *k, int op, float *d, const float *s, int64_t n,
                           float scale, float cap)
{
    if (op == 0)
        k->swiglu(d, s, n);
    else if (op == 1)
        k->gate(d, s, n);
    else
        k->softcap(d, n, scale, cap);
}

TEST(test_activations)
{
    static const char *const isas[] = {"ref", "avx2", "avx512"};
    static const float edges[] = {
        0.0f,    -0.0f,    1e-30f, -1e-30f, 1e-8f, -1e-8f, 0.6249f,  -0.6249f, 0.625f, -0.625f,
        0.6251f, -0.6251f, 44.0f,  -44.0f,  87.9f, -87.9f, 88.1f,    -88.1f,   88.8f,  -88.8f,
        89.0f,   -89.0f,   100.0f, -100.0f, 1e30f, -1e30f, INFINITY, -INFINITY};
    const int64_t n_sweep = 40001, n_edge = sizeof edges / sizeof edges[0], n = n_sweep + n_edge;
    const size_t bytes = sizeof(float) * (size_t)(n + 3);
    float *x = gl_malloc(bytes), *u = gl_malloc(bytes), *a = gl_malloc(bytes),
          *b = gl_malloc(bytes), *s3 = gl_malloc(bytes);
    GL_ASSERT(x && u && a && b && s3);
    for (int64_t i = 0; i < n_sweep; i++)
        x[i] = -100.0f + 200.0f * (float)i / (float)(n_sweep - 1);
    memcpy(x + n_sweep, edges, sizeof edges);
    for (int64_t i = 0; i < n; i++)
        u[i] = 0.5f + (float)(i % 7) * 0.25f;
    const float scale = 0.196116135f, cap = 20.0f;
    for (int v = 0; v < 3; v++) {
        struct gl_kernels k;
        if (!load_isa(&k, isas[v]))
            continue;
        double worst[3] = {0, 0, 0};
        for (int op = 0; op < 3; op++) {
            const float *d0 = op == 1 ? u : x, *s = op == 1 ? x : u;
            memcpy(a, d0, sizeof(float) * (size_t)n);
            run_activation(&k, op, a, s, n, scale, cap);
            for (int64_t i = 0; i < n; i++) {
                double xi = x[i], want;
                if (op == 0)
                    want = xi / (1.0 + exp(-xi)) * (double)u[i];
                else if (op == 1)
                    want = (double)u[i] / (1.0 + exp(-xi));
                else
                    want = (double)cap * tanh((double)(x[i] * scale) / (double)cap);
                double e = rel_err((double)a[i], want);
                CHECKF(e <= 1e-6, "%s op %d x %.9g: got %.9g want %.9g", isas[v], op, xi,
                       (double)a[i], want);
                worst[op] = fmax(worst[op], e);
            }
            // The same inputs 3 elements later and one short: the same bits where both have them.
            memcpy(b + 3, d0, sizeof(float) * (size_t)n);
            memcpy(s3 + 3, s, sizeof(float) * (size_t)n);
            run_activation(&k, op, b + 3, s3 + 3, n - 1, scale, cap);
            CHECKF(memcmp(a, b + 3, sizeof(float) * (size_t)(n - 1)) == 0,
                   "%s op %d: bits depend on the position", isas[v], op);
        }
        // cap 0: the scale alone, exactly.
        memcpy(a, x, sizeof(float) * (size_t)n_sweep);
        k.softcap(a, n_sweep, scale, 0.0f);
        for (int64_t i = 0; i < n_sweep; i++)
            CHECK(a[i] == x[i] * scale);
        printf("# activations %s: worst relative error swiglu %.3g gate %.3g softcap %.3g\n",
               isas[v], worst[0], worst[1], worst[2]);
    }
    gl_free(x);
    gl_free(u);
    gl_free(a);
    gl_free(b);
    gl_free(s3);
}

// rms_norm (kernels.h): every ISA's entry against float64 and, bit for bit, against the
// reference's, over widths that leave every tail length of the 16 lanes (and the 6,656 of the
// model), with and without a weight, in place and not. Each row has an outlier at a moving
// position (the last element in one case): a lane or tail element dropped or counted twice moves
// the norm by far more than the bound, 1e-6 relative (the float rounding of r and two products).
TEST(test_rms_norm)
{
    static const char *const isas[] = {"ref", "avx2", "avx512"};
    static const int64_t widths[] = {1, 2, 7, 15, 16, 17, 31, 33, 128, 129, 6656, 6659};
    const int64_t n_max = 6659;
    float *x = gl_malloc(sizeof(float) * (size_t)n_max),
          *w = gl_malloc(sizeof(float) * (size_t)n_max),
          *want = gl_malloc(sizeof(float) * (size_t)n_max),
          *got = gl_malloc(sizeof(float) * (size_t)n_max);
    GL_ASSERT(x && w && want && got);
    struct gl_kernels ref;
    REQUIRE(load_isa(&ref, "ref"));
    rng_state = SEED ^ 9;
    for (size_t iw = 0; iw < sizeof widths / sizeof widths[0]; iw++) {
        const int64_t n = widths[iw];
        for (int c = 0; c < 4; c++) { // c: outlier at element c * n / 3 (c 3: the last), scale
            const float scale = c == 1 ? 1e18f : c == 2 ? 1e-18f : 1.0f;
            fill_floats(x, n, scale);
            x[c == 3 ? n - 1 : c * n / 3] = 40.0f * scale;
            fill_floats(w, n, 1.0f);
            const float eps = 1e-5f;
            double ss = 0.0; // the float64 norm, from x alone: one per case
            for (int64_t i = 0; i < n; i++)
                ss += (double)x[i] * (double)x[i];
            const double r = 1.0 / sqrt(ss / (double)n + (double)eps);
            for (int v = 0; v < 3; v++) {
                struct gl_kernels k;
                if (!load_isa(&k, isas[v]))
                    continue;
                for (int variant = 0; variant < 3; variant++) { // w, no w, in place
                    const float *wv = variant == 1 ? NULL : w;
                    ref.rms_norm(want, x, wv, n, eps);
                    if (variant == 2) {
                        memcpy(got, x, sizeof(float) * (size_t)n);
                        k.rms_norm(got, got, wv, n, eps);
                    } else {
                        k.rms_norm(got, x, wv, n, eps);
                    }
                    CHECKF(memcmp(got, want, sizeof(float) * (size_t)n) == 0,
                           "%s n %lld case %d variant %d: not the reference's bits", isas[v],
                           (long long)n, c, variant);
                    for (int64_t i = 0; i < n; i++) {
                        const double y = (double)x[i] * r * (wv ? (double)wv[i] : 1.0);
                        CHECKF(rel_err((double)got[i], y) <= 1e-6,
                               "%s n %lld case %d variant %d i %lld: got %.9g want %.9g", isas[v],
                               (long long)n, c, variant, (long long)i, (double)got[i], y);
                    }
                }
            }
        }
    }
    gl_free(x);
    gl_free(w);
    gl_free(want);
    gl_free(got);
}

int main(void)
{
    RUN_TESTS(test_vec_dot_avx2, test_vec_dot_avx512, test_from_float_avx2, test_from_float_avx512,
              test_to_float_avx2, test_to_float_avx512, test_table_complete, test_attn_rows,
              test_activations, test_rms_norm);
}
