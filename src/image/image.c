// SPDX-License-Identifier: MIT
// image: the patch grid (§6.2 step 2), preprocessing from bytes to resized pixels, and
// normalisation + patchify (§6.2 steps 4-5).
#include "image/image.h"

#include <math.h>

// Candidates are {floor, ceil}(h) x {floor, ceil}(w) of the ideal grid (scaled down to the cap
// when over it), each side >= 1 and the product within the cap; the one whose aspect gh/gw is
// closest to height/width wins, the first in (floor, ceil) order on a tie. When none qualifies
// (an extreme aspect ratio whose rounded-up short side already breaks the cap, or a side below
// one unit), the rounded ideal is used, with the short side at least 1 and the long side cut to
// fit the cap.
static struct gl_image_grid grid_fallback(double h, double w, int max_tokens)
{
    long gh = lround(h), gw = lround(w);
    gh = gh < 1 ? 1 : gh > max_tokens ? max_tokens : gh;
    gw = gw < 1 ? 1 : gw > max_tokens ? max_tokens : gw;
    if (gh * gw > max_tokens) {
        if (gh >= gw)
            gh = max_tokens / gw;
        else
            gw = max_tokens / gh;
    }
    return (struct gl_image_grid){.gh = (int)gh, .gw = (int)gw};
}

gl_status gl_image_grid(int width, int height, int max_tokens, struct gl_image_grid *out,
                        struct gl_err *err)
{
    if (width < 1 || height < 1)
        return gl_err_set(err, GL_E_INVAL, "image: grid: size %dx%d must be at least 1x1", width,
                          height);
    if (max_tokens < 1 || max_tokens > GL_IMAGE_MAX_TOKENS_LIMIT)
        return gl_err_set(err, GL_E_INVAL, "image: grid: max_image_tokens %d outside 1..%d",
                          max_tokens, GL_IMAGE_MAX_TOKENS_LIMIT);
    double h = (double)height / GL_IMAGE_UNIT, w = (double)width / GL_IMAGE_UNIT;
    if (h * w > max_tokens) {
        double s = sqrt(max_tokens / (h * w));
        h *= s, w *= s;
    }
    double aspect = (double)height / width, best = HUGE_VAL;
    double hs[2] = {floor(h), ceil(h)}, ws[2] = {floor(w), ceil(w)};
    *out = (struct gl_image_grid){0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double gh = hs[i], gw = ws[j];
            if (gh < 1 || gw < 1 || gh * gw > max_tokens)
                continue;
            double d = fabs(gh / gw - aspect);
            if (d < best)
                best = d, *out = (struct gl_image_grid){.gh = (int)gh, .gw = (int)gw};
        }
    if (out->gh == 0)
        *out = grid_fallback(h, w, max_tokens);
    return GL_OK;
}

gl_status gl_image_preprocess(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                              int max_tokens, struct gl_image *out, struct gl_image_grid *grid,
                              struct gl_err *err)
{
    struct gl_image src;
    *out = (struct gl_image){0};
    gl_status st = gl_image_decode(data, n, lim, &src, err);
    if (st != GL_OK)
        return st;
    st = gl_image_grid(src.width, src.height, max_tokens, grid, err);
    if (st == GL_OK)
        st = gl_image_resize(&src, grid->gw * GL_IMAGE_UNIT, grid->gh * GL_IMAGE_UNIT, out, err);
    gl_image_free(&src);
    return st;
}

gl_status gl_image_patchify(const struct gl_image *img, float **out, size_t *n_patches,
                            struct gl_err *err)
{
    *out = NULL;
    *n_patches = 0;
    GL_ASSERT(img && img->rgb);
    if (img->width < 1 || img->height < 1 || img->width % GL_IMAGE_UNIT ||
        img->height % GL_IMAGE_UNIT)
        return gl_err_set(err, GL_E_INVAL, "image: patchify: %dx%d is not a multiple of %d px",
                          img->width, img->height, GL_IMAGE_UNIT);
    // The same arithmetic as transformers' rescale (float64 multiply, stored as float32) and
    // normalize (float32), so the values match its slow processor exactly.
    float lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = ((float)(v * (1.0 / 255.0)) - 0.5f) / 0.5f;
    const int P = GL_IMAGE_PATCH, pw = img->width / P, ph = img->height / P;
    size_t n = (size_t)pw * (size_t)ph;
    float *buf = gl_malloc(sizeof(float) * GL_IMAGE_PATCH_DIM * n);
    if (!buf)
        return gl_err_set(err, GL_E_NOMEM, "image: patchify: out of memory for %zu patches", n);
    for (int py = 0; py < ph; py++)
        for (int px = 0; px < pw; px++) {
            float *v = buf + GL_IMAGE_PATCH_DIM * ((size_t)py * (size_t)pw + (size_t)px);
            for (int c = 0; c < 3; c++)
                for (int r = 0; r < P; r++) {
                    const uint8_t *row = img->rgb + 3 * ((size_t)(py * P + r) * img->width);
                    for (int k = 0; k < P; k++) {
                        float f = lut[row[3 * (px * P + k) + c]];
                        v[(c * P + r) * P + k] = f;       // temporal slab 0
                        v[((3 + c) * P + r) * P + k] = f; // slab 1: the still image again
                    }
                }
        }
    *out = buf;
    *n_patches = n;
    return GL_OK;
}
