// SPDX-License-Identifier: MIT
// Unit tests for src/vision's pure pieces on hand-computed cases: the window permutation, the
// bilinear position taps with zero padding, the position embedding, the pixel shuffle order,
// gl_vision_encode's input errors, and q/k rows in llama.cpp's pair order (qk_pairs) giving the
// bits of rotate-half rows. The forward pass itself is checked against torch by
// tests/oracle/check_vision_torch.sh (test_vision_oracle).
#include "test.h"
#include "vision/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int near(float a, float b)
{
    return fabsf(a - b) <= 1e-6f;
}

// 3x5 patches, 2x2 windows: a 2x3 window grid whose right column and bottom row are partial.
TEST(test_window_order)
{
    int32_t order[15];
    int64_t start[16];
    int64_t n = gl_vision_window_order(3, 5, 2, 2, order, start);
    const int32_t want[15] = {0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14};
    const int64_t want_start[7] = {0, 4, 8, 10, 12, 14, 15};
    REQUIRE(n == 6);
    CHECK(memcmp(order, want, sizeof want) == 0);
    CHECK(memcmp(start, want_start, sizeof want_start) == 0);
    // A grid inside one window keeps row-major order.
    n = gl_vision_window_order(2, 3, 4, 4, order, start);
    CHECK(n == 1 && start[0] == 0 && start[1] == 6);
    for (int i = 0; i < 6; i++)
        CHECK(order[i] == i);
}

// 4-entry table resampled to 6: src = (i + 0.5) * 4 / 6 - 0.5.
TEST(test_bilinear_taps)
{
    int64_t idx[2];
    float wt[2];
    gl_vision_bilinear_taps(0, 6, 4, idx, wt); // src -1/6: tap -1 is padding
    CHECK(wt[0] == 0.0f && idx[1] == 0 && near(wt[1], 5.0f / 6));
    gl_vision_bilinear_taps(2, 6, 4, idx, wt); // src 7/6
    CHECK(idx[0] == 1 && idx[1] == 2 && near(wt[0], 5.0f / 6) && near(wt[1], 1.0f / 6));
    gl_vision_bilinear_taps(5, 6, 4, idx, wt); // src 19/6: tap 4 is padding
    CHECK(idx[0] == 3 && near(wt[0], 5.0f / 6) && wt[1] == 0.0f);
    gl_vision_bilinear_taps(1, 4, 4, idx, wt); // same size: exactly the entry
    CHECK(idx[0] == 1 && wt[0] == 1.0f && wt[1] == 0.0f);
}

// Table 2x2 = [[1, 2], [3, 4]], hidden 1, resampled to 4 rows x 1 column. The column source is
// 0.5 (half of each column); the rows' sources are -0.25, 0.25, 0.75, 1.25, so the edge rows lose
// a quarter of their weight to zero padding (clamping would give 1.5 and 3.5 there).
TEST(test_pos_embed_zero_padding)
{
    const float table[4] = {1, 2, 3, 4};
    float out[4];
    gl_vision_pos_embed(table, 2, 2, 1, 4, 1, out);
    CHECK(near(out[0], 0.75f * 1.5f));
    CHECK(near(out[1], 0.75f * 1.5f + 0.25f * 3.5f));
    CHECK(near(out[2], 0.25f * 1.5f + 0.75f * 3.5f));
    CHECK(near(out[3], 0.75f * 3.5f));
    gl_vision_pos_embed(table, 2, 2, 1, 1, 1, out); // one patch: the mean of all four
    CHECK(near(out[0], 2.5f));
}

// 2x4 patches of 2 channels, x[p][ch] = 10 p + ch: merged cell 1 gathers patches 2, 3, 6, 7.
TEST(test_pixel_shuffle_order)
{
    float x[16], out[16];
    for (int p = 0; p < 8; p++)
        for (int ch = 0; ch < 2; ch++)
            x[p * 2 + ch] = (float)(10 * p + ch);
    gl_vision_pixel_shuffle(x, 2, 4, 2, out);
    const float want[16] = {0, 10, 40, 50, 1, 11, 41, 51, 20, 30, 60, 70, 21, 31, 61, 71};
    CHECK(memcmp(out, want, sizeof want) == 0);
}

TEST(test_encode_input_errors)
{
    struct gl_pool *pool = gl_pool_new(1);
    REQUIRE(pool);
    struct gl_vision_config cfg;
    gl_vision_config_default(&cfg);
    struct gl_vision_weights w = {0};
    float in[1], out[1];
    struct gl_err err = {0};
    CHECK(gl_vision_encode(pool, &cfg, &w, in, 3, 4, out, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "3x4") != NULL);
    CHECK(gl_vision_encode(pool, &cfg, &w, in, 0, 4, out, &err) == GL_E_INVAL);
    CHECK(gl_vision_encode(pool, &cfg, &w, NULL, 2, 2, out, &err) == GL_E_INVAL);
    CHECK(gl_vision_encode(pool, &cfg, &w, in, (int64_t)1 << 20, (int64_t)1 << 20, out, &err) ==
          GL_E_LIMIT);
    CHECK(gl_vision_encode(pool, &cfg, &w, in, 2, 2, out, &err) == GL_E_INVAL); // no weights
    cfg.head_dim = 94;
    CHECK(gl_vision_encode(pool, &cfg, &w, in, 2, 2, out, &err) == GL_E_INVAL);
    gl_vision_config_default(&cfg);
    cfg.merge = 3;
    CHECK(gl_vision_encode(pool, &cfg, &w, in, 2, 2, out, &err) == GL_E_UNSUPPORTED);
    gl_pool_delete(pool);
}

// ---- qk_pairs: a tiny random tower (hidden 32 = 2 heads of 16, ffn 64, 2 layers: one windowed,
// one full; 2x2 position table; adapter 32, out 48) on a 4x4 patch grid ----

enum { QH = 32, QD = 16, QF = 64, QA = 32, QO = 48, QL = 2, QPD = 1176, QG = 4 };

static void *g_keep[512];
static int g_n_keep;

static void *keep(void *p)
{
    GL_ASSERT(p && g_n_keep < (int)(sizeof g_keep / sizeof g_keep[0]));
    return g_keep[g_n_keep++] = p;
}

static float *rvec(int64_t n, uint32_t *rng, float scale)
{
    float *v = keep(malloc((size_t)n * sizeof(float)));
    for (int64_t i = 0; i < n; i++) {
        *rng = *rng * 1664525u + 1013904223u;
        v[i] = ((float)(*rng >> 8) / 16777216.0f - 0.5f) * scale;
    }
    return v;
}

// f [n] as a matrix of type t (F32: borrowed; BF16: rounded copy; Q8_0: quantized copy, n_in
// being a multiple of 32 for every matrix but the patch kernel, which stays F32).
static struct gl_vision_mat as_mat(const float *f, int64_t n, enum gl_type t)
{
    if (t == GL_TYPE_F32 || (t == GL_TYPE_Q8_0 && n % QPD == 0))
        return (struct gl_vision_mat){GL_TYPE_F32, f};
    if (t == GL_TYPE_Q8_0) {
        void *q = keep(malloc(gl_type_row_size(GL_TYPE_Q8_0, n)));
        gl_quantize_row_ref(GL_TYPE_Q8_0, f, q, n);
        return (struct gl_vision_mat){GL_TYPE_Q8_0, q};
    }
    uint16_t *b = keep(malloc((size_t)n * sizeof(uint16_t)));
    for (int64_t i = 0; i < n; i++)
        b[i] = gl_f32_to_bf16(f[i]);
    return (struct gl_vision_mat){GL_TYPE_BF16, b};
}

// rows [QH][width] from rotate-half order to ggml's pair order: row h*D + 2j + s holds row
// h*D + s*D/2 + j (what llama.cpp's converter writes for q and k).
static float *to_pairs(const float *rh, int64_t width)
{
    float *p = keep(malloc((size_t)QH * (size_t)width * sizeof(float)));
    for (int64_t r = 0; r < QH; r++) {
        const int64_t h = r / QD, i = r % QD, j = i / 2, s = i % 2;
        memcpy(p + r * width, rh + (h * QD + s * QD / 2 + j) * width,
               (size_t)width * sizeof(float));
    }
    return p;
}

static void encode_tower(struct gl_pool *pool, const struct gl_vision_config *c,
                         const struct gl_vision_weights *w, const float *patches, float *out)
{
    struct gl_err err = {0};
    CHECKF(gl_vision_encode(pool, c, w, patches, QG, QG, out, &err) == GL_OK, "%s", err.msg);
}

// m as F32 (a dequantized copy of a Q8_0 matrix of n elements).
static struct gl_vision_mat as_f32(struct gl_vision_mat m, int64_t n)
{
    if (m.type != GL_TYPE_Q8_0)
        return m;
    float *f = keep(malloc((size_t)n * sizeof(float)));
    gl_dequantize_row_ref(GL_TYPE_Q8_0, m.data, f, n);
    return (struct gl_vision_mat){GL_TYPE_F32, f};
}

// The same tower with its q/k rows and biases in pair order and qk_pairs set encodes to the same
// bits as in rotate-half order (F32, BF16 and Q8_0 weights, 2 threads); read as rotate-half it
// does not. Q8_0 (the token-lane int8 GEMM where the CPU has VNNI, else the row path) is also
// held to the F32 encode of its own dequantized weights: they differ by the activations' Q8_0
// rounding only (rms ~1% at these widths), so a wrong pack, stale weight sums or a mixed-up
// matrix shows as an O(1) difference.
TEST(test_qk_pairs_bit_identical)
{
    struct gl_vision_config c = {.patch_size = 14,
                                 .patch_frames = 2,
                                 .hidden = QH,
                                 .n_layers = QL,
                                 .n_heads = QH / QD,
                                 .head_dim = QD,
                                 .ffn = QF,
                                 .pos_h = 2,
                                 .pos_w = 2,
                                 .merge = 2,
                                 .full_every = 2,
                                 .adapter = QA,
                                 .out_dim = QO,
                                 .ln_eps = 1e-5f,
                                 .rms_eps = 1e-5f,
                                 .rope_theta = 10000.0f};
    struct gl_pool *pool = gl_pool_new(2);
    REQUIRE(pool);
    uint32_t rng = 7;
    const float *patches = rvec((int64_t)QG * QG * QPD, &rng, 2.0f);
    const int64_t n_out = (QG / 2) * (QG / 2) * QO;
    float *out[4];
    for (int i = 0; i < 4; i++)
        out[i] = keep(malloc((size_t)n_out * sizeof(float)));
    const enum gl_type types[3] = {GL_TYPE_F32, GL_TYPE_BF16, GL_TYPE_Q8_0};
    for (int ti = 0; ti < 3; ti++) {
        const enum gl_type t = types[ti];
        struct gl_vision_layer rh[QL], pairs[QL];
        for (int l = 0; l < QL; l++) {
            const float *q = rvec(QH * QH, &rng, 0.4f), *k = rvec(QH * QH, &rng, 0.4f);
            const float *qb = rvec(QH, &rng, 0.2f), *kb = rvec(QH, &rng, 0.2f);
            rh[l] = (struct gl_vision_layer){.ln1_w = rvec(QH, &rng, 1.0f),
                                             .ln1_b = rvec(QH, &rng, 0.2f),
                                             .q = as_mat(q, QH * QH, t),
                                             .k = as_mat(k, QH * QH, t),
                                             .v = as_mat(rvec(QH * QH, &rng, 0.4f), QH * QH, t),
                                             .proj = as_mat(rvec(QH * QH, &rng, 0.4f), QH * QH, t),
                                             .q_b = qb,
                                             .k_b = kb,
                                             .v_b = rvec(QH, &rng, 0.2f),
                                             .proj_b = rvec(QH, &rng, 0.2f),
                                             .ln2_w = rvec(QH, &rng, 1.0f),
                                             .ln2_b = rvec(QH, &rng, 0.2f),
                                             .fc1 = as_mat(rvec(QF * QH, &rng, 0.4f), QF * QH, t),
                                             .fc1_b = rvec(QF, &rng, 0.2f),
                                             .fc2 = as_mat(rvec(QH * QF, &rng, 0.3f), QH * QF, t),
                                             .fc2_b = rvec(QH, &rng, 0.2f)};
            pairs[l] = rh[l];
            pairs[l].q = as_mat(to_pairs(q, QH), QH * QH, t);
            pairs[l].k = as_mat(to_pairs(k, QH), QH * QH, t);
            pairs[l].q_b = to_pairs(qb, 1);
            pairs[l].k_b = to_pairs(kb, 1);
        }
        struct gl_vision_weights w = {
            .patch = as_mat(rvec((int64_t)QH * QPD, &rng, 0.1f), (int64_t)QH * QPD, t),
            .pos = rvec(4 * QH, &rng, 0.5f),
            .ln_pre_w = rvec(QH, &rng, 1.0f),
            .ln_pre_b = rvec(QH, &rng, 0.2f),
            .layers = rh,
            .ln_post_w = rvec(QH, &rng, 1.0f),
            .ln_post_b = rvec(QH, &rng, 0.2f),
            .adapter_fc1 = as_mat(rvec(QA * 4 * QH, &rng, 0.2f), QA * 4 * QH, t),
            .adapter_fc2 = as_mat(rvec(QA * QA, &rng, 0.3f), QA * QA, t),
            .projection = as_mat(rvec(QO * QA, &rng, 0.3f), QO * QA, t)};
        encode_tower(pool, &c, &w, patches, out[0]);
        if (t == GL_TYPE_Q8_0) {
            struct gl_vision_layer deq[QL];
            for (int l = 0; l < QL; l++) {
                deq[l] = rh[l];
                deq[l].q = as_f32(rh[l].q, QH * QH);
                deq[l].k = as_f32(rh[l].k, QH * QH);
                deq[l].v = as_f32(rh[l].v, QH * QH);
                deq[l].proj = as_f32(rh[l].proj, QH * QH);
                deq[l].fc1 = as_f32(rh[l].fc1, QF * QH);
                deq[l].fc2 = as_f32(rh[l].fc2, QH * QF);
            }
            struct gl_vision_weights wd = w;
            wd.layers = deq;
            wd.adapter_fc1 = as_f32(w.adapter_fc1, QA * 4 * QH);
            wd.adapter_fc2 = as_f32(w.adapter_fc2, QA * QA);
            wd.projection = as_f32(w.projection, QO * QA);
            encode_tower(pool, &c, &wd, patches, out[3]);
            double d2 = 0, r2 = 0;
            for (int64_t i = 0; i < n_out; i++) {
                double a = (double)out[0][i], f = (double)out[3][i];
                d2 += (a - f) * (a - f);
                r2 += f * f;
            }
            CHECKF(r2 > 0 && sqrt(d2 / r2) < 0.05,
                   "Q8_0 encode vs its dequantized weights in F32: rms diff / rms %.3g",
                   sqrt(d2 / r2));
        }
        w.layers = pairs;
        w.qk_pairs = 1;
        encode_tower(pool, &c, &w, patches, out[1]);
        w.qk_pairs = 0; // pair-order rows read as rotate-half: another function
        encode_tower(pool, &c, &w, patches, out[2]);
        CHECKF(memcmp(out[0], out[1], (size_t)n_out * sizeof(float)) == 0,
               "%s: pair-order rows with qk_pairs differ from rotate-half rows",
               t == GL_TYPE_F32    ? "F32"
               : t == GL_TYPE_BF16 ? "BF16"
                                   : "Q8_0");
        CHECK(memcmp(out[0], out[2], (size_t)n_out * sizeof(float)) != 0);
    }
    gl_pool_delete(pool);
    while (g_n_keep > 0)
        free(g_keep[--g_n_keep]);
}

int main(void)
{
    RUN_TESTS(test_window_order, test_bilinear_taps, test_pos_embed_zero_padding,
              test_pixel_shuffle_order, test_encode_input_errors, test_qk_pairs_bit_identical);
}
