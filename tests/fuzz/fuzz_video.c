// SPDX-License-Identifier: MIT
// Fuzz target for video preprocessing: the whole pipeline (demux, count, decode, sample, RGB,
// resize) from memory under small limits, then patchify, reading every output byte so a
// sanitizer sees anything uninitialised or out of bounds. A refusal must leave nothing allocated
// and come with a "video: " message. The last input byte picks the sampling parameters (the first
// bytes are the container's magic, which mutations should keep).
#include "video/video.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void check_clip(const struct gl_video *v, const struct gl_video_params *par)
{
    // HF samples at least one temporal patch (2 frames) even when max_frames is 1.
    int most = par->max_frames > GL_VIDEO_TEMPORAL ? par->max_frames : GL_VIDEO_TEMPORAL;
    if (v->n_sampled < 1 || v->n_sampled > most || v->n_frames % 2 || v->n_frames < v->n_sampled ||
        v->n_frames > v->n_sampled + 1)
        abort();
    if (v->grid.gh < 1 || v->grid.gw < 1 || v->grid.gh * v->grid.gw > par->max_frame_tokens)
        abort();
    for (int i = 0; i < v->n_sampled; i++)
        if (v->indices[i] < 0 || v->indices[i] >= v->total_frames ||
            (i && v->indices[i] <= v->indices[i - 1]))
            abort();
    uint64_t acc = 0;
    for (size_t i = 0; i < 3 * (size_t)v->width * (size_t)v->height * (size_t)v->n_frames; i++)
        acc += v->rgb[i];
    for (int g = 0; g < v->n_frames / 2; g++)
        if (!(v->timestamps[g] >= 0.0))
            abort();
    float *p;
    size_t n;
    struct gl_err err = {0};
    if (gl_video_patchify(v, &p, &n, &err) != GL_OK ||
        n != (size_t)(v->n_frames / 2) * (size_t)(4 * v->grid.gh * v->grid.gw))
        abort();
    for (size_t i = 0; i < n * GL_IMAGE_PATCH_DIM; i += 97)
        if (!(p[i] >= -1.0f && p[i] <= 1.0f))
            abort();
    gl_free(p);
    sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    // Small enough that one input costs milliseconds: 64 Kpx frames, 2000 frames, 20 Mpx decoded.
    struct gl_video_limits lim = {.max_bytes = 1 << 20,
                                  .max_side = 1024,
                                  .max_pixels = 1 << 16,
                                  .max_frames = 2000,
                                  .max_duration_s = 600.0,
                                  .max_decode_pixels = 20u << 20};
    uint8_t sel = size ? data[size - 1] : 0;
    struct gl_video_params par = {.fps = 0.5 + (sel & 7),
                                  .max_frames = 1 + (sel >> 3) % 16,
                                  .max_frame_tokens = 1 + sel % 24};
    struct gl_video v;
    struct gl_err err = {0};
    if (gl_video_preprocess(data, size, &lim, &par, &v, &err) != GL_OK) {
        if (v.rgb || v.indices || v.timestamps || v.n_frames || strncmp(err.msg, "video: ", 7))
            abort();
        return 0;
    }
    check_clip(&v, &par);
    gl_video_free(&v);
    return 0;
}
