// SPDX-License-Identifier: MIT
// Fuzz target for image preprocessing: decode (PNG/JPEG) under small limits, then, when it
// decodes, grid + Lanczos resize + patchify with a small token cap, reading every output byte
// so a sanitizer sees anything uninitialised or out of bounds. A refusal must leave nothing
// allocated and come with an "image: " message; the first input byte picks the token cap.
#include "image/image.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void run_pipeline(const struct gl_image *img, int max_tokens)
{
    struct gl_image_grid g;
    struct gl_image out;
    struct gl_err err = {0};
    if (gl_image_grid(img->width, img->height, max_tokens, &g, &err) != GL_OK)
        abort();
    if (g.gh < 1 || g.gw < 1 || g.gh * g.gw > max_tokens)
        abort();
    if (gl_image_resize(img, g.gw * GL_IMAGE_UNIT, g.gh * GL_IMAGE_UNIT, &out, &err) != GL_OK)
        abort();
    uint64_t acc = 0;
    for (size_t i = 0; i < 3 * (size_t)out.width * (size_t)out.height; i++)
        acc += out.rgb[i];
    float *p;
    size_t n;
    if (gl_image_patchify(&out, &p, &n, &err) != GL_OK || n != (size_t)(4 * g.gh * g.gw))
        abort();
    for (size_t i = 0; i < n * GL_IMAGE_PATCH_DIM; i += 97)
        if (!(p[i] >= -1.0f && p[i] <= 1.0f))
            abort();
    gl_free(p);
    gl_image_free(&out);
    sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    // Small enough that one input costs milliseconds: 1 Mpx decoded, 16 tokens (448x448) out.
    struct gl_image_limits lim = {.max_bytes = 1 << 20, .max_pixels = 1 << 20, .max_side = 4096};
    int max_tokens = size ? 1 + data[0] % 16 : 1;
    struct gl_image img;
    struct gl_err err = {0};
    if (gl_image_decode(data, size, &lim, &img, &err) != GL_OK) {
        if (img.rgb || img.width || strncmp(err.msg, "image: ", 7) != 0)
            abort();
        return 0;
    }
    if (img.width < 1 || img.height < 1 || (uint64_t)img.width * img.height > lim.max_pixels)
        abort();
    uint64_t acc = 0;
    for (size_t i = 0; i < 3 * (size_t)img.width * (size_t)img.height; i++)
        acc += img.rgb[i];
    sink += acc;
    run_pipeline(&img, max_tokens);
    gl_image_free(&img);
    return 0;
}
