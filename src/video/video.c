// SPDX-License-Identifier: MIT
// video: frame sampling (§6.5: count and indices), patchify (two frames per temporal patch) and
// the prompt layout (§6.4). Decoding is in decode.c.
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct gl_video_params gl_video_default_params(void)
{
    return (struct gl_video_params){.fps = GL_VIDEO_FPS,
                                    .max_frames = GL_VIDEO_MAX_FRAMES,
                                    .max_frame_tokens = GL_VIDEO_MAX_FRAME_TOKENS};
}

// HF sample_frames, in its order of operations: Python's int() truncates the float64 quotient,
// the fps budget and max_frames are cut to the stream, rounded down to whole temporal patches
// (at least one), and never above the frames there are (a 1-frame clip samples 1 frame).
int gl_video_sample_count(int64_t total, double src_fps, double fps, int max_frames)
{
    if (total < 1)
        return 0;
    double want = (double)total * fps / src_fps;
    int64_t n = !(want < 0x1p62) ? INT64_MAX : want < 0 ? 0 : (int64_t)want;
    if (n > max_frames)
        n = max_frames;
    if (n > total)
        n = total;
    n = n / GL_VIDEO_TEMPORAL * GL_VIDEO_TEMPORAL;
    if (n < GL_VIDEO_TEMPORAL)
        n = GL_VIDEO_TEMPORAL;
    if (n > total)
        n = total;
    return (int)n;
}

// torch.linspace(0, total - 1, n) in float32 on the CPU, then .long() (truncation). torch's
// kernel (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, scalar since torch 2.x) fills the
// first half as start + step * i and the second half as end - step * (n - 1 - i), step =
// (end - start) / (n - 1), all float32. Its x86-64 (AVX2/AVX-512) and aarch64 builds are C++
// compiled with GCC's default -ffp-contract=fast, so end - step * k becomes one fused
// multiply-add (one rounding); start + step * i with start 0 rounds the same either way. The
// rounding matters because .long() truncates: an exact integer computed a hair low drops to the
// integer below (linspace(0, 16, 15)[7] is 7.9999995 with the fused form, 8.0 without). torch
// 1.13 still had a vectorised variant (8-lane arange blocks for n >= 16) that differs in a few
// more cases; tests/oracle/video_ref.py reproduces both against the torch it finds.
void gl_video_sample_indices(int64_t total, int n, int64_t *idx)
{
    GL_ASSERT(total >= 1 && n >= 1);
    const float start = 0.0f, end = (float)(total - 1);
    if (n == 1) {
        idx[0] = 0;
        return;
    }
    const float step = (end - start) / (float)(n - 1);
    const int half = n / 2;
    for (int i = 0; i < n; i++) {
        float v = i < half ? start + step * (float)i : fmaf(-step, (float)(n - 1 - i), end);
        idx[i] = (int64_t)v;
    }
}

void gl_video_free(struct gl_video *v)
{
    if (!v)
        return;
    gl_free(v->indices);
    gl_free(v->timestamps);
    gl_free(v->rgb);
    *v = (struct gl_video){0};
}

gl_status gl_video_patchify(const struct gl_video *v, float **out, size_t *n_patches,
                            struct gl_err *err)
{
    *out = NULL;
    *n_patches = 0;
    GL_ASSERT(v && v->rgb);
    if (v->n_frames < 2 || v->n_frames % GL_VIDEO_TEMPORAL || v->width % GL_IMAGE_UNIT ||
        v->height % GL_IMAGE_UNIT || v->width < 1 || v->height < 1)
        return gl_err_set(err, GL_E_INVAL, "video: patchify: %d frames of %dx%d do not tile",
                          v->n_frames, v->width, v->height);
    // HF's video processor is a "fast" (torch) one: it fuses rescale and normalize into
    // (x - 0.5 * 255) / (0.5 * 255) in float32 (rescale_and_normalize), which can differ in the
    // last bit from the image path's (x / 255 - 0.5) / 0.5, so the arithmetic is that one.
    float lut[256];
    for (int x = 0; x < 256; x++)
        lut[x] = ((float)x - 127.5f) / 127.5f;
    const int P = GL_IMAGE_PATCH, pw = v->width / P, ph = v->height / P;
    const size_t groups = (size_t)v->n_frames / GL_VIDEO_TEMPORAL;
    const size_t per_group = (size_t)pw * (size_t)ph,
                 frame_bytes = 3 * (size_t)v->width * v->height;
    float *buf = gl_malloc(sizeof(float) * GL_IMAGE_PATCH_DIM * groups * per_group);
    if (!buf)
        return gl_err_set(err, GL_E_NOMEM, "video: patchify: out of memory for %zu patches",
                          groups * per_group);
    for (size_t g = 0; g < groups; g++)
        for (int py = 0; py < ph; py++)
            for (int px = 0; px < pw; px++) {
                float *p = buf + GL_IMAGE_PATCH_DIM *
                                     (g * per_group + (size_t)py * (size_t)pw + (size_t)px);
                for (int t = 0; t < GL_VIDEO_TEMPORAL; t++) {
                    const uint8_t *frame =
                        v->rgb + (GL_VIDEO_TEMPORAL * g + (size_t)t) * frame_bytes;
                    for (int c = 0; c < 3; c++)
                        for (int r = 0; r < P; r++) {
                            const uint8_t *row = frame + 3 * ((size_t)(py * P + r) * v->width);
                            for (int k = 0; k < P; k++)
                                p[((t * 3 + c) * P + r) * P + k] = lut[row[3 * (px * P + k) + c]];
                        }
                }
            }
    *out = buf;
    *n_patches = groups * per_group;
    return GL_OK;
}

void gl_video_time_text(double seconds, char buf[32])
{
    // glibc's %.1f rounds the exact binary value half-to-even, as Python's format does.
    snprintf(buf, 32, "Time: %.1fs", seconds);
}

static void put_piece(struct gl_video_piece *out, int cap, int *k, struct gl_video_piece p)
{
    if (*k < cap)
        out[*k] = p;
    (*k)++;
}

int gl_video_prompt_layout(const double *timestamps, int n_groups, int tokens_per_group,
                           struct gl_video_piece *out, int cap)
{
    if (n_groups < 1 || tokens_per_group < 1 || n_groups > (INT32_MAX - 1) / 3 || cap < 0 ||
        !timestamps)
        return -1;
    int k = 0;
    put_piece(out, cap, &k,
              (struct gl_video_piece){
                  .kind = GL_VIDEO_PIECE_TOKEN, .token = GL_VIDEO_TOK_START, .count = 1});
    for (int g = 0; g < n_groups; g++) {
        struct gl_video_piece text = {.kind = GL_VIDEO_PIECE_TEXT};
        gl_video_time_text(timestamps[g], text.text);
        put_piece(out, cap, &k, text);
        put_piece(out, cap, &k,
                  (struct gl_video_piece){.kind = GL_VIDEO_PIECE_TOKEN,
                                          .token = GL_VIDEO_TOK_VIDEO,
                                          .count = tokens_per_group});
        put_piece(
            out, cap, &k,
            (struct gl_video_piece){.kind = GL_VIDEO_PIECE_TOKEN,
                                    .token = g + 1 < n_groups ? GL_VIDEO_TOK_SEP : GL_VIDEO_TOK_END,
                                    .count = 1});
    }
    return k;
}
