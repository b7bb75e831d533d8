// SPDX-License-Identifier: MIT
// Unit tests for src/vision's pure pieces on hand-computed cases: the window permutation, the
// bilinear position taps with zero padding, the position embedding, the pixel shuffle order,
// and gl_vision_encode's input errors. The forward pass itself is checked against torch by
// tests/oracle/check_vision_torch.sh (test_vision_oracle).
#include "test.h"
#include "vision/vision.h"

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

int main(void)
{
    RUN_TESTS(test_window_order, test_bilinear_taps, test_pos_embed_zero_padding,
              test_pixel_shuffle_order, test_encode_input_errors);
}
