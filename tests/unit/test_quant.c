// SPDX-License-Identifier: MIT
// Tests for src/quant: type traits, fp16/bf16 conversion edge cases, quantize->dequantize error
// ceilings per type, hand-built known-answer blocks that pin the ggml bit layouts, ggml's exact
// activation quantizers (Q8_0, Q8_K), and gl_vec_dot_ref against a dot of the dequantized rows.
#include "quant/quant.h"

#include "base/base.h"
#include "test.h"

#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double rng_uniform(void) // [0, 1)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static float rng_gauss(void)
{
    double a = rng_uniform(), b = rng_uniform();
    return (float)(sqrt(-2.0 * log(a + 1e-300)) * cos(6.283185307179586 * b));
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Relative RMS error of y against x.
static double rel_rmse(const float *x, const float *y, int n)
{
    double e = 0, s = 0;
    for (int i = 0; i < n; i++) {
        e += (double)(x[i] - y[i]) * (double)(x[i] - y[i]);
        s += (double)x[i] * (double)x[i];
    }
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

#define N_ROW 4096

struct type_case {
    enum gl_type t;
    double max_rel_rmse; // ceiling on random Gaussian and log-uniform rows
};

// Measured (20 rows each): F16 2.1e-4, BF16 1.7e-3, Q8_0 6.5e-3, Q4_0 8.9e-2, Q4_K 7.3e-2,
// Q5_K 4.3e-2, Q6_K 1.8e-2, Q8_K 8.5e-3. Ceilings leave ~25% headroom.
static const struct type_case cases[] = {
    {GL_TYPE_F32, 0.0},     {GL_TYPE_F16, 3e-4},   {GL_TYPE_BF16, 2.5e-3},
    {GL_TYPE_Q8_0, 8.5e-3}, {GL_TYPE_Q4_0, 0.11},  {GL_TYPE_Q4_K, 0.09},
    {GL_TYPE_Q5_K, 0.054},  {GL_TYPE_Q6_K, 0.023}, {GL_TYPE_Q8_K, 0.011},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static float xs[N_ROW], ys[N_ROW], acts[N_ROW], actd[N_ROW];
static uint8_t qbuf[N_ROW * 4 + 64], abuf[N_ROW * 4 + 64];

TEST(test_traits)
{
    CHECK(gl_type_row_size(GL_TYPE_Q4_K, 6656) == 26 * 144);
    CHECK(gl_type_row_size(GL_TYPE_Q6_K, 512) == 2 * 210);
    CHECK(gl_type_row_size(GL_TYPE_Q8_0, 64) == 2 * 34);
    CHECK(gl_type_row_size(GL_TYPE_Q4_0, 32) == 18);
    CHECK(gl_type_row_size(GL_TYPE_Q5_K, 256) == 176);
    CHECK(gl_type_row_size(GL_TYPE_Q8_K, 256) == 292);
    CHECK(gl_type_row_size(GL_TYPE_F16, 7) == 14);
    CHECK(gl_type_row_size(GL_TYPE_BF16, 3) == 6);
    CHECK(gl_type_row_size(GL_TYPE_F32, 5) == 20);
    CHECK(gl_type_row_size(GL_TYPE_Q4_K, 255) == 0);      // not whole blocks
    CHECK(gl_type_row_size(GL_TYPE_Q8_0, -32) == 0);      // negative
    CHECK(gl_type_row_size(4, 32) == 0);                  // hole in ggml's enum
    CHECK(gl_type_row_size(GL_TYPE_COUNT, 32) == 0);      // out of table
    CHECK(gl_type_row_size(GL_TYPE_F32, INT64_MAX) == 0); // overflows
    CHECK(gl_type_traits_of(4) == NULL && gl_type_traits_of(5) == NULL);
    CHECK(gl_type_traits_of(31) == NULL && gl_type_traits_of(0xffffffffu) == NULL);
    const struct gl_type_traits *tt = gl_type_traits_of(GL_TYPE_Q3_K);
    CHECK(tt != NULL && tt->blck_size == 256 && tt->type_size == 110 && !tt->supported);
    tt = gl_type_traits_of(GL_TYPE_Q6_K);
    CHECK(tt != NULL && strcmp(tt->name, "Q6_K") == 0 && tt->supported);
    CHECK(gl_type_from_name("q4_k") == GL_TYPE_Q4_K);
    CHECK(gl_type_from_name("Q8_0") == GL_TYPE_Q8_0);
    CHECK(gl_type_from_name("f16") == GL_TYPE_F16);
    CHECK(gl_type_from_name("bf16") == GL_TYPE_BF16);
    CHECK(gl_type_from_name("Q4_K_M") == -1);
    CHECK(gl_type_from_name("Q4") == -1);
    CHECK(gl_type_from_name("") == -1);
    CHECK(gl_type_vec_dot_type(GL_TYPE_Q4_K) == GL_TYPE_Q8_K);
    CHECK(gl_type_vec_dot_type(GL_TYPE_Q5_K) == GL_TYPE_Q8_K);
    CHECK(gl_type_vec_dot_type(GL_TYPE_Q6_K) == GL_TYPE_Q8_K);
    CHECK(gl_type_vec_dot_type(GL_TYPE_Q4_0) == GL_TYPE_Q8_0);
    CHECK(gl_type_vec_dot_type(GL_TYPE_Q8_0) == GL_TYPE_Q8_0);
    CHECK(gl_type_vec_dot_type(GL_TYPE_F16) == GL_TYPE_F16);
    CHECK(gl_type_vec_dot_type(GL_TYPE_BF16) == GL_TYPE_BF16);
    CHECK(gl_type_vec_dot_type(GL_TYPE_F32) == GL_TYPE_F32);
}

TEST(test_fp16)
{
    CHECK(gl_f32_to_fp16(1.0f) == 0x3c00);
    CHECK(gl_f32_to_fp16(-2.0f) == 0xc000);
    CHECK(gl_f32_to_fp16(65504.0f) == 0x7bff);
    CHECK(gl_f32_to_fp16(65519.0f) == 0x7bff);                   // below the halfway point to 2^16
    CHECK(gl_f32_to_fp16(65520.0f) == 0x7c00);                   // tie: rounds to even = infinity
    CHECK(gl_f32_to_fp16(1.0f + 0x1p-11f) == 0x3c00);            // tie to even (down)
    CHECK(gl_f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02);        // tie to even (up)
    CHECK(gl_f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01); // just above the tie
    CHECK(gl_f32_to_fp16(0x1p-24f) == 0x0001);                   // smallest subnormal
    CHECK(gl_f32_to_fp16(0x1p-25f) == 0x0000);                   // tie with zero: even
    CHECK(gl_f32_to_fp16(3 * 0x1p-26f) == 0x0001);
    CHECK(gl_f32_to_fp16(3 * 0x1p-25f) == 0x0002);        // 1.5 ulp subnormal: tie to even
    CHECK(gl_f32_to_fp16(0x1p-14f) == 0x0400);            // smallest normal
    CHECK(gl_f32_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400); // rounds up across the boundary
    CHECK(gl_f32_to_fp16(-0.0f) == 0x8000);
    CHECK(gl_f32_to_fp16(bits_f32(0x7f800000)) == 0x7c00);
    CHECK(gl_f32_to_fp16(bits_f32(0xff800000)) == 0xfc00);
    uint16_t hn = gl_f32_to_fp16(bits_f32(0x7fc00000));
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
    CHECK(gl_fp16_to_f32(0x0001) == 0x1p-24f);
    CHECK(gl_fp16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(gl_fp16_to_f32(0x7bff) == 65504.0f);
    CHECK(isinf(gl_fp16_to_f32(0x7c00)) && isnan(gl_fp16_to_f32(0x7e00)));
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { // every non-NaN half survives f16 -> f32 -> f16
        float f = gl_fp16_to_f32((uint16_t)h);
        if (isnan(f))
            bad += !isnan(gl_fp16_to_f32(gl_f32_to_fp16(f)));
        else
            bad += gl_f32_to_fp16(f) != h;
    }
    CHECKF(bad == 0, "%d halves do not round-trip", bad);
}

TEST(test_bf16)
{
    CHECK(gl_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(gl_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);     // tie to even (down)
    CHECK(gl_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82); // tie to even (up)
    CHECK(gl_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
    CHECK(gl_f32_to_bf16(bits_f32(0x00000001)) == 0x0000); // f32 subnormal rounds to zero
    CHECK(gl_f32_to_bf16(bits_f32(0x00010000)) == 0x0001); // bf16 subnormal kept
    CHECK(gl_f32_to_bf16(bits_f32(0x7f7fffff)) == 0x7f80); // FLT_MAX rounds to infinity
    CHECK(gl_f32_to_bf16(bits_f32(0xff800000)) == 0xff80);
    uint16_t bn = gl_f32_to_bf16(bits_f32(0x7f800001)); // signalling NaN must not become inf
    CHECK((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0);
    CHECK(f32_bits(gl_bf16_to_f32(0x3f80)) == 0x3f800000);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gl_bf16_to_f32((uint16_t)h);
        if (isnan(f))
            bad += !isnan(gl_bf16_to_f32(gl_f32_to_bf16(f)));
        else
            bad += gl_f32_to_bf16(f) != h;
    }
    CHECKF(bad == 0, "%d bf16 values do not round-trip", bad);
}

static void fill_gauss(float *x, int n, float scale)
{
    for (int i = 0; i < n; i++)
        x[i] = scale * rng_gauss();
}

// Magnitudes log-uniform over 1e-3..1e3 with random signs: six decades inside every block.
static void fill_wide(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)(exp(rng_uniform() * 13.8 - 6.9) * (rng_uniform() < 0.5 ? -1 : 1));
}

TEST(test_roundtrip_random)
{
    for (int c = 0; c < N_CASES; c++) {
        const char *name = gl_type_traits_of(cases[c].t)->name;
        for (int rep = 0; rep < 6; rep++) {
            if (rep % 2 == 0)
                fill_gauss(xs, N_ROW, rep == 4 ? 0.02f : 1.0f);
            else
                fill_wide(xs, N_ROW);
            gl_quantize_row_ref(cases[c].t, xs, qbuf, N_ROW);
            gl_dequantize_row_ref(cases[c].t, qbuf, ys, N_ROW);
            double e = rel_rmse(xs, ys, N_ROW);
            CHECKF(e <= cases[c].max_rel_rmse, "%s rep %d: rel rmse %.5f > %.5f", name, rep, e,
                   cases[c].max_rel_rmse);
        }
    }
}

TEST(test_roundtrip_special_rows)
{
    for (int c = 0; c < N_CASES; c++) {
        enum gl_type t = cases[c].t;
        const char *name = gl_type_traits_of(t)->name;
        memset(xs, 0, sizeof xs);
        gl_quantize_row_ref(t, xs, qbuf, N_ROW);
        gl_dequantize_row_ref(t, qbuf, ys, N_ROW);
        int nz = 0;
        for (int i = 0; i < N_ROW; i++)
            nz += ys[i] != 0.0f;
        CHECKF(nz == 0, "%s: zero row dequantizes to %d non-zeros", name, nz);

        const float consts[] = {0.37f, -5.5f, 1000.0f};
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < N_ROW; i++)
                xs[i] = consts[k];
            gl_quantize_row_ref(t, xs, qbuf, N_ROW);
            gl_dequantize_row_ref(t, qbuf, ys, N_ROW);
            double e = rel_rmse(xs, ys, N_ROW);
            // A constant is representable up to fp16/bf16 rounding (2^-9 relative for bf16).
            CHECKF(e <= 4e-3 && isfinite(ys[0]), "%s: constant %g: rel rmse %.5f", name,
                   (double)consts[k], e);
        }

        // One large outlier per block next to small values: the outlier survives.
        fill_gauss(xs, N_ROW, 0.01f);
        for (int i = 0; i < N_ROW; i += 256)
            xs[i + 7] = 40.0f;
        gl_quantize_row_ref(t, xs, qbuf, N_ROW);
        gl_dequantize_row_ref(t, qbuf, ys, N_ROW);
        int off = 0;
        for (int i = 0; i < N_ROW; i += 256)
            off += !(fabsf(ys[i + 7] - 40.0f) <= 0.6f);
        CHECKF(off == 0, "%s: %d outliers lost", name, off);
    }
}

static void put_fp16(uint8_t *p, float f)
{
    uint16_t h = gl_f32_to_fp16(f);
    memcpy(p, &h, 2);
}

TEST(test_known_q4_0_q8_0)
{
    struct gl_block_q4_0 b4;
    memset(&b4, 0x88, sizeof b4); // every nibble 8 -> value 0
    put_fp16((uint8_t *)&b4.d, 2.0f);
    b4.qs[0] = 0x9f;  // element 0 = (15-8)*2, element 16 = (9-8)*2
    b4.qs[15] = 0x03; // element 15 = (3-8)*2, element 31 = (0-8)*2
    float y[32];
    gl_dequantize_row_ref(GL_TYPE_Q4_0, &b4, y, 32);
    CHECK(y[0] == 14.0f && y[16] == 2.0f && y[15] == -10.0f && y[31] == -16.0f);
    CHECK(y[1] == 0.0f && y[17] == 0.0f);

    struct gl_block_q8_0 b8;
    memset(&b8, 0, sizeof b8);
    put_fp16((uint8_t *)&b8.d, 0.5f);
    b8.qs[3] = -128;
    b8.qs[31] = 127;
    gl_dequantize_row_ref(GL_TYPE_Q8_0, &b8, y, 32);
    CHECK(y[3] == -64.0f && y[31] == 63.5f && y[0] == 0.0f);
}

// Q4_K/Q5_K scales: sub-block 0 has sc=1, m=2 (bytes 0 and 4, low 6 bits); sub-block 5 has
// sc=37=0b10_0101, m=58=0b11_1010: low nibbles in byte 9 (sc | m<<4), high 2 bits in the top
// bits of byte 1 (sc) and byte 5 (m). Sub-blocks 1 and 4 must then read as sc = m = 0.
static void put_test_scales(uint8_t *s)
{
    memset(s, 0, GL_K_SCALE_SIZE);
    s[0] = 1;
    s[4] = 2;
    s[9] = 0x05 | (0x0a << 4);
    s[1] |= 2 << 6;
    s[5] |= 3 << 6;
}

TEST(test_known_q4_K)
{
    struct gl_block_q4_K b;
    memset(&b, 0, sizeof b);
    put_fp16((uint8_t *)&b.d, 1.0f);
    put_fp16((uint8_t *)&b.dmin, 0.5f);
    put_test_scales(b.scales);
    b.qs[0] = 0x03;      // element 0 (sub-block 0, low nibble) = 3; element 32 (sub-block 1) = 0
    b.qs[64 + 3] = 0x70; // element 128+32+3 = 163 (sub-block 5, high nibble) = 7; 131 = 0
    float y[256];
    gl_dequantize_row_ref(GL_TYPE_Q4_K, &b, y, 256);
    CHECK(y[0] == 1.0f * 1 * 3 - 0.5f * 2);
    CHECK(y[1] == -1.0f);  // q = 0 in sub-block 0: -dmin*m
    CHECK(y[32] == 0.0f);  // sub-block 1: sc = m = 0 despite the packed high bits
    CHECK(y[131] == 0.0f); // sub-block 4: sc = m = 0
    CHECK(y[163] == 37.0f * 7 - 0.5f * 58);
    CHECK(y[160] == -29.0f);
}

TEST(test_known_q5_K)
{
    struct gl_block_q5_K b;
    memset(&b, 0, sizeof b);
    put_fp16((uint8_t *)&b.d, 1.0f);
    put_fp16((uint8_t *)&b.dmin, 0.5f);
    put_test_scales(b.scales);
    b.qs[0] = 0x03;
    b.qs[64 + 3] = 0x70;
    b.qh[0] = 0x01;    // bit 0 of qh[0]: 5th bit of element 0
    b.qh[3] = 1 << 5;  // bit 2g+1 (g=2) of qh[3]: 5th bit of element 64*2+32+3 = 163
    b.qh[31] = 1 << 1; // bit 1 of qh[31]: element 32+31 = 63 (sub-block 1: scale 0)
    float y[256];
    gl_dequantize_row_ref(GL_TYPE_Q5_K, &b, y, 256);
    CHECK(y[0] == 1.0f * (3 + 16) - 1.0f);
    CHECK(y[1] == -1.0f);
    CHECK(y[63] == 0.0f);
    CHECK(y[163] == 37.0f * (7 + 16) - 29.0f);
    CHECK(y[160] == -29.0f);
    CHECK(y[131] == 0.0f);
}

TEST(test_known_q6_K)
{
    struct gl_block_q6_K b;
    memset(&b, 0, sizeof b);
    put_fp16((uint8_t *)&b.d, 0.25f);
    b.scales[0] = 2;
    b.scales[13] = -3;
    // Element 0: low nibble of ql[0] and bits 0-1 of qh[0] -> q = 5 | 2<<4 = 37.
    b.ql[0] = 0x05;
    b.qh[0] = 0x02;
    // Element 215 = 128 + 64 + 23 (second half, quarter 2): high nibble of ql[64+23], bits 4-5
    // of qh[32+23] -> q = 9 | 1<<4 = 25.
    b.ql[64 + 23] = 0x90;
    b.qh[32 + 23] = 1 << 4;
    // Element 128+32+5 = 165 (second half, quarter 1): low nibble of ql[64+32+5], bits 2-3.
    b.ql[64 + 32 + 5] = 0x0f;
    b.qh[32 + 5] = 3 << 2;
    b.scales[165 / 16] = 1;
    float y[256];
    gl_dequantize_row_ref(GL_TYPE_Q6_K, &b, y, 256);
    CHECK(y[0] == 0.25f * 2 * (37 - 32));
    CHECK(y[1] == 0.25f * 2 * -32);
    CHECK(y[215] == 0.25f * -3 * (25 - 32));
    CHECK(y[208] == 0.25f * -3 * -32);
    CHECK(y[151] == 0.0f); // low nibble of ql[87] belongs to element 151, scale 9 = 0
    CHECK(y[165] == 0.25f * 1 * (63 - 32));
    CHECK(y[16] == 0.0f); // scale 1 = 0
}

// ggml's activation quantizers, re-derived here: Q8_K iscale = -127/max (signed max), q =
// round-half-even(iscale*x) capped at 127, d = 1/iscale; Q8_0 d = amax/127, q = rne(x*127/amax).
TEST(test_activation_quant_exact)
{
    for (int rep = 0; rep < 4; rep++) {
        fill_gauss(xs, 512, rep == 3 ? 100.0f : 1.0f);
        if (rep == 1)
            xs[77] = -9.0f; // negative extreme
        if (rep == 2)
            xs[300] = 9.0f;
        struct gl_block_q8_K k[2];
        gl_quantize_row_ref(GL_TYPE_Q8_K, xs, k, 512);
        int bad = 0;
        for (int b = 0; b < 2; b++) {
            const float *x = xs + 256 * b;
            float max = 0;
            for (int j = 0; j < 256; j++)
                if (fabsf(x[j]) > fabsf(max))
                    max = x[j];
            float iscale = -127.f / max;
            for (int j = 0; j < 256; j++) {
                float r = rintf(iscale * x[j]);
                bad += k[b].qs[j] != (int8_t)(r > 127 ? 127 : r);
            }
            bad += k[b].d != 1 / iscale;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++)
                    s += k[b].qs[16 * g + j];
                bad += k[b].bsums[g] != s;
            }
        }
        CHECKF(bad == 0, "q8_K rep %d: %d mismatches", rep, bad);

        struct gl_block_q8_0 q[16];
        gl_quantize_row_ref(GL_TYPE_Q8_0, xs, q, 512);
        bad = 0;
        for (int b = 0; b < 16; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(xs[32 * b + j]));
            bad += q[b].d != gl_f32_to_fp16(amax / 127.f);
            for (int j = 0; j < 32; j++)
                bad += q[b].qs[j] != (int8_t)rintf(xs[32 * b + j] * (127.f / amax));
        }
        CHECKF(bad == 0, "q8_0 rep %d: %d mismatches", rep, bad);
    }
    // Ties go to even: max -2 gives iscale 63.5 exactly; 1 -> 63.5 -> 64, -1 -> -64, 3/127 ...
    memset(xs, 0, 256 * sizeof(float));
    xs[0] = -2.0f;
    xs[1] = 1.0f;
    xs[2] = -1.0f;
    xs[3] = 1.0f / 127.0f * 3.0f; // 63.5*3/127 = 1.5 -> 2
    struct gl_block_q8_K k1;
    gl_quantize_row_ref(GL_TYPE_Q8_K, xs, &k1, 256);
    CHECK(k1.qs[0] == -127 && k1.qs[1] == 64 && k1.qs[2] == -64 && k1.qs[3] == 2);
    CHECK(k1.d == 1.0f / 63.5f && k1.bsums[0] == -127 + 64 - 64 + 2);
}

TEST(test_vec_dot_vs_dequant)
{
    for (int c = 0; c < N_CASES; c++) {
        enum gl_type t = cases[c].t, vt = gl_type_vec_dot_type(t);
        const char *name = gl_type_traits_of(t)->name;
        for (int rep = 0; rep < 3; rep++) {
            fill_gauss(xs, N_ROW, 1.0f);
            fill_gauss(acts, N_ROW, rep == 2 ? 30.0f : 1.0f);
            if (rep == 1)
                for (int i = 0; i < N_ROW; i++)
                    xs[i] = fabsf(xs[i]) + 0.5f; // all-positive weights: exercises the mins term
            gl_quantize_row_ref(t, xs, qbuf, N_ROW);
            gl_quantize_row_ref(vt, acts, abuf, N_ROW);
            gl_dequantize_row_ref(t, qbuf, ys, N_ROW);
            gl_dequantize_row_ref(vt, abuf, actd, N_ROW);
            double ref = 0, mag = 0;
            for (int i = 0; i < N_ROW; i++) {
                ref += (double)ys[i] * (double)actd[i];
                mag += fabs((double)ys[i] * (double)actd[i]);
            }
            float s = 0;
            gl_vec_dot_ref(t, N_ROW, &s, qbuf, abuf);
            // Only float rounding of the per-block scales separates the two: ~1e-6 of the
            // magnitude; a wrong group/scale pairing is off by percent.
            CHECKF(fabs((double)s - ref) <= 2e-5 * mag, "%s rep %d: dot %.7g vs %.7g (mag %.4g)",
                   name, rep, (double)s, ref, mag);
        }
    }
}

int main(void)
{
    RUN_TESTS(test_traits, test_fp16, test_bf16, test_roundtrip_random, test_roundtrip_special_rows,
              test_known_q4_0_q8_0, test_known_q4_K, test_known_q5_K, test_known_q6_K,
              test_activation_quant_exact, test_vec_dot_vs_dequant);
}
