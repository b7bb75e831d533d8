// SPDX-License-Identifier: MIT
// Unit tests for src/image: the grid search (§6.2, the 640x480 check case, extremes, the cap),
// decoding of PNG/JPEG files written here with libpng/libjpeg, alpha onto white, Lanczos
// invariants, patch layout, and refusals: every truncation of a valid file, garbage, zero sizes
// and each limit must return an error with an "image: " message, never crash or leak (ASan build).
// Pixel parity with Pillow is the oracle's job (tests/oracle/check_image_pillow.sh).
#include "image/image.h"
#include "png_fixture.h"
#include "test.h"

#include <stdio.h> // before jpeglib.h
#include <string.h>

#include <jpeglib.h>
#include <png.h>

// ---- writing test files in memory --------------------------------------------------------------

static struct mem make_jpeg(int w, int h, int comps, const uint8_t *px, int progressive)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    unsigned char *out = NULL;
    unsigned long n = 0;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &out, &n);
    c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    if (progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * (size_t)w * (size_t)comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    struct mem m = {.p = malloc(n), .n = n, .cap = n};
    memcpy(m.p, out, n);
    free(out);
    return m;
}

static uint8_t *noise(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
    return p;
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

// ---- grid --------------------------------------------------------------------------------------

static struct gl_image_grid grid_of(int w, int h, int cap)
{
    struct gl_image_grid g = {0};
    struct gl_err err;
    if (gl_image_grid(w, h, cap, &g, &err) != GL_OK)
        g = (struct gl_image_grid){-1, -1};
    return g;
}

TEST(test_grid_cases)
{
    struct gl_image_grid g = grid_of(640, 480, 4096); // HF-TEST check case
    CHECKF(g.gh == 17 && g.gw == 23, "640x480 -> %dx%d", g.gh, g.gw);
    CHECK(g.gh * g.gw == 391);
    g = grid_of(1, 1, 4096); // no minimum: upscaled to one token
    CHECK(g.gh == 1 && g.gw == 1);
    g = grid_of(28, 28, 4096);
    CHECK(g.gh == 1 && g.gw == 1);
    g = grid_of(56, 28, 4096);
    CHECK(g.gh == 1 && g.gw == 2);
    g = grid_of(3000, 7, 4096); // h < 1 unit: only ceil(h) = 1 qualifies
    CHECKF(g.gh == 1 && g.gw == 108, "3000x7 -> %dx%d", g.gh, g.gw);
    g = grid_of(7, 3000, 4096);
    CHECKF(g.gh == 108 && g.gw == 1, "7x3000 -> %dx%d", g.gh, g.gw);
    g = grid_of(1792, 1792, 4096); // exactly the cap
    CHECK(g.gh == 64 && g.gw == 64);
    g = grid_of(10000, 10000, 4096); // scaled down to the cap
    CHECK(g.gh == 64 && g.gw == 64);
    g = grid_of(4000, 3000, 4096);
    CHECKF(g.gh * g.gw <= 4096 && g.gh * g.gw > 3900 && g.gw > g.gh, "%dx%d", g.gh, g.gw);
    g = grid_of(200000, 1, 4096); // fallback: the long side is cut to the cap
    CHECKF(g.gh == 1 && g.gw == 4096, "200000x1 -> %dx%d", g.gh, g.gw);
    g = grid_of(1, 200000, 64);
    CHECKF(g.gh == 64 && g.gw == 1, "1x200000 cap 64 -> %dx%d", g.gh, g.gw);
    g = grid_of(640, 480, 1);
    CHECK(g.gh == 1 && g.gw == 1);
    g = grid_of(640, 480, 100);
    CHECKF(g.gh * g.gw <= 100 && g.gh >= 1, "%dx%d", g.gh, g.gw);
}

TEST(test_grid_sweep_within_cap)
{
    int bad = 0;
    for (int w = 1; w < 5000; w += 37)
        for (int h = 1; h < 5000; h += 41)
            for (int cap = 1; cap <= 4096; cap = cap * 3 + 1) {
                struct gl_image_grid g = grid_of(w, h, cap);
                bad += g.gh < 1 || g.gw < 1 || g.gh * g.gw > cap;
            }
    CHECKF(bad == 0, "%d grids outside the cap", bad);
}

TEST(test_grid_invalid)
{
    struct gl_image_grid g;
    struct gl_err err = {0};
    CHECK(gl_image_grid(0, 10, 4096, &g, &err) == GL_E_INVAL);
    CHECK(strncmp(err.msg, "image: ", 7) == 0);
    CHECK(gl_image_grid(10, -1, 4096, &g, &err) == GL_E_INVAL);
    CHECK(gl_image_grid(10, 10, 0, &g, &err) == GL_E_INVAL);
    CHECK(gl_image_grid(10, 10, GL_IMAGE_MAX_TOKENS_LIMIT + 1, &g, &err) == GL_E_INVAL);
}

// ---- decoding ----------------------------------------------------------------------------------

TEST(test_sniff)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const uint8_t jpg[3] = {0xff, 0xd8, 0xff};
    CHECK(gl_image_sniff(png, 8) == GL_IMAGE_FMT_PNG);
    CHECK(gl_image_sniff(png, 7) == GL_IMAGE_FMT_UNKNOWN);
    CHECK(gl_image_sniff(jpg, 3) == GL_IMAGE_FMT_JPEG);
    CHECK(gl_image_sniff(jpg, 2) == GL_IMAGE_FMT_UNKNOWN);
    CHECK(gl_image_sniff((const uint8_t *)"GIF89a", 6) == GL_IMAGE_FMT_UNKNOWN);
}

TEST(test_decode_png_rgb_and_alpha)
{
    uint8_t *px = noise(5 * 3 * 3, 1);
    struct mem m = make_png(5, 3, PNG_COLOR_TYPE_RGB, px);
    struct gl_image img;
    struct gl_err err = {0};
    REQUIRE(gl_image_decode(m.p, m.n, NULL, &img, &err) == GL_OK);
    CHECK(img.width == 5 && img.height == 3 && !memcmp(img.rgb, px, 45));
    gl_image_free(&img);
    CHECK(img.rgb == NULL);
    free(m.p);
    // Gray + alpha: alpha 0 -> white, 255 -> the gray value, 128 over white rounds as Pillow.
    uint8_t ga[4 * 2] = {10, 0, 10, 255, 0, 128, 200, 128};
    m = make_png(4, 1, PNG_COLOR_TYPE_GRAY_ALPHA, ga);
    REQUIRE(gl_image_decode(m.p, m.n, NULL, &img, &err) == GL_OK);
    CHECK(img.rgb[0] == 255 && img.rgb[1] == 255 && img.rgb[2] == 255);
    CHECK(img.rgb[3] == 10 && img.rgb[4] == 10 && img.rgb[5] == 10);
    CHECKF(img.rgb[6] == 127, "0 at alpha 128 over white -> %d", img.rgb[6]);   // Pillow 9.4
    CHECKF(img.rgb[9] == 227, "200 at alpha 128 over white -> %d", img.rgb[9]); // Pillow 9.4
    gl_image_free(&img);
    free(m.p);
    free(px);
}

TEST(test_decode_jpeg)
{
    uint8_t *px = noise(40 * 24 * 3, 2);
    for (int prog = 0; prog <= 1; prog++) {
        struct mem m = make_jpeg(40, 24, 3, px, prog);
        struct gl_image img;
        struct gl_err err = {0};
        REQUIRE(gl_image_decode(m.p, m.n, NULL, &img, &err) == GL_OK);
        CHECK(img.width == 40 && img.height == 24);
        gl_image_free(&img);
        free(m.p);
    }
    struct mem m = make_jpeg(40, 24, 1, px, 0); // gray: replicated to three channels
    struct gl_image img;
    struct gl_err err = {0};
    REQUIRE(gl_image_decode(m.p, m.n, NULL, &img, &err) == GL_OK);
    int bad = 0;
    for (int i = 0; i < 40 * 24; i++)
        bad += img.rgb[3 * i] != img.rgb[3 * i + 1] || img.rgb[3 * i] != img.rgb[3 * i + 2];
    CHECK(bad == 0);
    gl_image_free(&img);
    free(m.p);
    free(px);
}

// Every prefix of a valid file either fails with a message and nothing allocated, or (when only
// bytes after the pixel data are missing) decodes to the same pixels.
static void check_prefixes(const struct mem *m, int *n_err, int *n_same, int *n_bad)
{
    struct gl_image full;
    struct gl_err err = {0};
    if (gl_image_decode(m->p, m->n, NULL, &full, &err) != GL_OK) {
        (*n_bad)++;
        return;
    }
    for (size_t len = 0; len < m->n; len++) {
        uint8_t *cut = malloc(len ? len : 1); // exact size, so ASan sees any over-read
        memcpy(cut, m->p, len);
        struct gl_image img;
        gl_status st = gl_image_decode(cut, len, NULL, &img, &err);
        if (st != GL_OK)
            *n_err += img.rgb == NULL && !strncmp(err.msg, "image: ", 7), *n_bad += !!img.rgb;
        else if (img.width == full.width && img.height == full.height &&
                 !memcmp(img.rgb, full.rgb, 3 * (size_t)img.width * (size_t)img.height))
            (*n_same)++;
        else
            (*n_bad)++;
        gl_image_free(&img);
        free(cut);
    }
    gl_image_free(&full);
}

TEST(test_truncated_files)
{
    uint8_t *px = noise(23 * 17 * 4, 3);
    struct mem files[3] = {make_png(23, 17, PNG_COLOR_TYPE_RGBA, px), make_jpeg(23, 17, 3, px, 0),
                           make_jpeg(23, 17, 3, px, 1)};
    for (int i = 0; i < 3; i++) {
        int n_err = 0, n_same = 0, n_bad = 0;
        check_prefixes(&files[i], &n_err, &n_same, &n_bad);
        CHECKF(n_bad == 0, "file %d: %d bad prefixes", i, n_bad);
        // Only the trailer (PNG: IEND, 12 bytes; JPEG: at most the EOI marker) may be missing.
        CHECKF(n_same <= 12 && n_err >= (int)files[i].n - 12, "file %d: %d same, %d errors of %zu",
               i, n_same, n_err, files[i].n);
        free(files[i].p);
    }
    free(px);
}

TEST(test_garbage_and_zero_sizes)
{
    struct gl_image img;
    struct gl_err err = {0};
    CHECK(gl_image_decode(NULL, 0, NULL, &img, &err) == GL_E_FORMAT);
    uint8_t *junk = noise(1000, 4);
    CHECK(gl_image_decode(junk, 1000, NULL, &img, &err) == GL_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "not a PNG or JPEG") != NULL);
    // Valid signatures followed by noise.
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(junk, sig, 8);
    CHECK(gl_image_decode(junk, 1000, NULL, &img, &err) == GL_E_FORMAT);
    junk[0] = 0xff, junk[1] = 0xd8, junk[2] = 0xff;
    CHECK(gl_image_decode(junk, 1000, NULL, &img, &err) == GL_E_FORMAT);
    CHECK(img.rgb == NULL && img.width == 0);
    free(junk);
    // A PNG whose IHDR says width 0 (CRC fixed up so only the size is wrong).
    uint8_t px[3] = {1, 2, 3};
    struct mem m = make_png(1, 1, PNG_COLOR_TYPE_RGB, px);
    put_be32(m.p + 16, 0);
    put_be32(m.p + 29, crc32_of(m.p + 12, 17));
    CHECK(gl_image_decode(m.p, m.n, NULL, &img, &err) != GL_OK);
    CHECK(strncmp(err.msg, "image: png: ", 12) == 0);
    free(m.p);
    // A JPEG whose SOF says height 0 (libjpeg: DNL not supported).
    uint8_t gray[64] = {0};
    m = make_jpeg(8, 8, 1, gray, 0);
    for (size_t i = 0; i + 9 < m.n; i++)
        if (m.p[i] == 0xff && m.p[i + 1] == 0xc0) {
            m.p[i + 5] = 0, m.p[i + 6] = 0; // height
            break;
        }
    CHECK(gl_image_decode(m.p, m.n, NULL, &img, &err) != GL_OK);
    CHECK(strncmp(err.msg, "image: jpeg: ", 13) == 0);
    free(m.p);
}

TEST(test_limits)
{
    uint8_t *px = noise(300 * 200 * 3, 5);
    struct mem files[2] = {make_png(300, 200, PNG_COLOR_TYPE_RGB, px),
                           make_jpeg(300, 200, 3, px, 1)};
    for (int i = 0; i < 2; i++) {
        struct gl_image img;
        struct gl_err err = {0};
        struct gl_image_limits lim = gl_image_default_limits();
        lim.max_pixels = 300 * 200 - 1;
        CHECK(gl_image_decode(files[i].p, files[i].n, &lim, &img, &err) == GL_E_LIMIT);
        CHECK(strstr(err.msg, "pixel limit") != NULL);
        lim = gl_image_default_limits();
        lim.max_side = 299;
        CHECK(gl_image_decode(files[i].p, files[i].n, &lim, &img, &err) == GL_E_LIMIT);
        lim = gl_image_default_limits();
        lim.max_bytes = files[i].n - 1;
        CHECK(gl_image_decode(files[i].p, files[i].n, &lim, &img, &err) == GL_E_LIMIT);
        CHECK(img.rgb == NULL);
        lim.max_bytes = files[i].n;
        CHECK(gl_image_decode(files[i].p, files[i].n, &lim, &img, &err) == GL_OK);
        gl_image_free(&img);
        free(files[i].p);
    }
    free(px);
}

// ---- resize, patchify, preprocess --------------------------------------------------------------

TEST(test_resize_constant_and_identity)
{
    static const int sizes[][2] = {{1, 1}, {7, 3}, {28, 56}, {300, 17}, {1000, 2}};
    struct gl_err err = {0};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        struct gl_image in = {sizes[s][0], sizes[s][1], NULL}, out;
        size_t n = 3 * (size_t)in.width * (size_t)in.height;
        in.rgb = malloc(n);
        for (size_t i = 0; i < n; i++)
            in.rgb[i] = (uint8_t)(i % 3 == 0 ? 7 : i % 3 == 1 ? 128 : 250);
        int bad = 0;
        for (int tw = 1; tw <= 120; tw += 17)
            for (int th = 1; th <= 90; th += 29) {
                REQUIRE(gl_image_resize(&in, tw, th, &out, &err) == GL_OK);
                for (int i = 0; i < tw * th; i++)
                    bad += out.rgb[3 * i] != 7 || out.rgb[3 * i + 1] != 128 ||
                           out.rgb[3 * i + 2] != 250;
                gl_image_free(&out);
            }
        CHECKF(bad == 0, "%dx%d: %d pixels changed colour", in.width, in.height, bad);
        REQUIRE(gl_image_resize(&in, in.width, in.height, &out, &err) == GL_OK);
        CHECK(!memcmp(out.rgb, in.rgb, n));
        gl_image_free(&out);
        CHECK(gl_image_resize(&in, 0, 5, &out, &err) == GL_E_INVAL);
        free(in.rgb);
    }
}

TEST(test_patchify_layout)
{
    struct gl_image img = {56, 28, noise(56 * 28 * 3, 6)};
    float *p;
    size_t n;
    struct gl_err err = {0};
    REQUIRE(gl_image_patchify(&img, &p, &n, &err) == GL_OK);
    CHECK(n == 8); // 2 rows x 4 columns of 14-px patches
    int bad = 0;
    for (size_t q = 0; q < n; q++)
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < 3; c++)
                for (int r = 0; r < 14; r++)
                    for (int k = 0; k < 14; k++) {
                        int y = (int)(q / 4) * 14 + r, x = (int)(q % 4) * 14 + k;
                        float want =
                            ((float)(img.rgb[3 * (y * 56 + x) + c] * (1.0 / 255.0)) - 0.5f) / 0.5f;
                        bad += p[q * 1176 + (size_t)(((t * 3 + c) * 14 + r) * 14 + k)] != want;
                    }
    CHECK(bad == 0);
    CHECK(p[0] >= -1.0f && p[0] <= 1.0f);
    gl_free(p);
    img.width = 42;
    CHECK(gl_image_patchify(&img, &p, &n, &err) == GL_E_INVAL && p == NULL && n == 0);
    free(img.rgb);
}

TEST(test_preprocess_check_case)
{
    uint8_t *px = noise(640 * 480 * 3, 7);
    struct mem m = make_png(640, 480, PNG_COLOR_TYPE_RGB, px);
    struct gl_image out;
    struct gl_image_grid g;
    struct gl_err err = {0};
    REQUIRE(gl_image_preprocess(m.p, m.n, NULL, 4096, &out, &g, &err) == GL_OK);
    CHECK(g.gh == 17 && g.gw == 23 && out.width == 23 * 28 && out.height == 17 * 28);
    gl_image_free(&out);
    CHECK(gl_image_preprocess(m.p, m.n / 2, NULL, 4096, &out, &g, &err) == GL_E_FORMAT);
    CHECK(out.rgb == NULL);
    free(m.p);
    free(px);
}

int main(void)
{
    RUN_TESTS(test_grid_cases, test_grid_sweep_within_cap, test_grid_invalid, test_sniff,
              test_decode_png_rgb_and_alpha, test_decode_jpeg, test_truncated_files,
              test_garbage_and_zero_sizes, test_limits, test_resize_constant_and_identity,
              test_patchify_layout, test_preprocess_check_case);
}
