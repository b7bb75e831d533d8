// SPDX-License-Identifier: MIT
// image: Pillow's antialiased Lanczos-3 resize for 8-bit images (libImaging/Resample.c, as of
// Pillow 9.4), reproduced arithmetic for arithmetic so the output is bit-identical:
//  - per output pixel, the filter is centred on (i + 0.5) * scale and widened by scale when
//    downscaling (support 3 * max(scale, 1)); taps are clipped to the image and the weights are
//    normalised in double, then rounded half away from zero to 22-bit fixed point;
//  - a sum starts at 0.5 (1 << 21), and the result is (sum >> 22) clamped to 0..255;
//  - the horizontal pass runs first, over the source rows the vertical pass will read, then the
//    vertical pass; a pass whose size does not change is skipped.
#include "image/image.h"

#include <math.h>
#include <string.h>

#define PRECISION_BITS  22 // 32 - 8 (result) - 2 (headroom for negative lobes and overshoot)
#define LANCZOS_SUPPORT 3.0

static double sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double lanczos(double x)
{
    if (-3.0 <= x && x < 3.0)
        return sinc(x) * sinc(x / 3);
    return 0.0;
}

// Filter taps for one axis: output i reads in[first[i] .. first[i] + count[i]) with weights
// k[i * ksize ..].
struct taps {
    int ksize;
    int *first, *count;
    int32_t *k;
};

static void taps_free(struct taps *t)
{
    gl_free(t->first);
    gl_free(t->count);
    gl_free(t->k);
}

static gl_status taps_init(struct taps *t, int in_size, int out_size, struct gl_err *err)
{
    double scale = (double)(float)in_size / out_size; // Pillow's box edges are floats
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = LANCZOS_SUPPORT * filterscale;
    t->ksize = (int)ceil(support) * 2 + 1;
    t->first = gl_malloc(sizeof(int) * (size_t)out_size);
    t->count = gl_malloc(sizeof(int) * (size_t)out_size);
    t->k = gl_malloc(sizeof(int32_t) * (size_t)out_size * (size_t)t->ksize);
    double *w = gl_malloc(sizeof(double) * (size_t)t->ksize);
    if (!t->first || !t->count || !t->k || !w) {
        gl_free(w);
        taps_free(t);
        return gl_err_set(err, GL_E_NOMEM, "image: resize: out of memory for %d taps", out_size);
    }
    for (int i = 0; i < out_size; i++) {
        double center = (i + 0.5) * scale;
        double ss = 1.0 / filterscale, ww = 0.0;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        xmin = xmin < 0 ? 0 : xmin;
        xmax = (xmax > in_size ? in_size : xmax) - xmin;
        GL_ASSERT(xmax <= t->ksize);
        for (int x = 0; x < xmax; x++) {
            w[x] = lanczos((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = &t->k[(size_t)i * (size_t)t->ksize];
        for (int x = 0; x < t->ksize; x++) {
            double v = x < xmax ? (ww != 0.0 ? w[x] / ww : w[x]) : 0.0;
            k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS)
                                   : 0.5 + v * (1 << PRECISION_BITS));
        }
        t->first[i] = xmin;
        t->count[i] = xmax;
    }
    gl_free(w);
    return GL_OK;
}

static uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS; // arithmetic shift: Pillow's lookup table is indexed the same way
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

// out: out_w x n_rows, from in rows [row0, row0 + n_rows).
static void pass_horizontal(const uint8_t *in, int in_w, int row0, int n_rows, const struct taps *t,
                            uint8_t *out, int out_w)
{
    for (int y = 0; y < n_rows; y++) {
        const uint8_t *src = in + 3 * (size_t)in_w * (size_t)(row0 + y);
        uint8_t *dst = out + 3 * (size_t)out_w * (size_t)y;
        for (int x = 0; x < out_w; x++) {
            const int32_t *k = &t->k[(size_t)x * (size_t)t->ksize];
            const uint8_t *p = src + 3 * (size_t)t->first[x];
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int i = 0; i < t->count[x]; i++, p += 3) {
                s0 += p[0] * k[i];
                s1 += p[1] * k[i];
                s2 += p[2] * k[i];
            }
            dst[3 * x] = clip8(s0), dst[3 * x + 1] = clip8(s1), dst[3 * x + 2] = clip8(s2);
        }
    }
}

// out: w x out_h; tap row r reads in row r - row0.
static void pass_vertical(const uint8_t *in, int w, int row0, const struct taps *t, uint8_t *out,
                          int out_h)
{
    size_t stride = 3 * (size_t)w;
    for (int y = 0; y < out_h; y++) {
        const int32_t *k = &t->k[(size_t)y * (size_t)t->ksize];
        const uint8_t *src = in + stride * (size_t)(t->first[y] - row0);
        uint8_t *dst = out + stride * (size_t)y;
        for (size_t c = 0; c < stride; c++) {
            int32_t s = 1 << (PRECISION_BITS - 1);
            for (int i = 0; i < t->count[y]; i++)
                s += src[stride * (size_t)i + c] * k[i];
            dst[c] = clip8(s);
        }
    }
}

static gl_status resize_run(const struct gl_image *in, int w, int h, const struct taps *th,
                            const struct taps *tv, struct gl_image *out, struct gl_err *err)
{
    int need_h = w != in->width, need_v = h != in->height;
    // Only the source rows the vertical taps touch go through the horizontal pass.
    int row0 = need_v ? tv->first[0] : 0;
    int row1 = need_v ? tv->first[h - 1] + tv->count[h - 1] : in->height;
    uint8_t *tmp = NULL;
    const uint8_t *src = in->rgb;
    out->rgb = gl_malloc(3 * (size_t)w * (size_t)h);
    if (need_h && need_v)
        tmp = gl_malloc(3 * (size_t)w * (size_t)(row1 - row0));
    if (!out->rgb || (need_h && need_v && !tmp)) {
        gl_free(tmp);
        gl_image_free(out);
        return gl_err_set(err, GL_E_NOMEM, "image: resize: out of memory for %dx%d", w, h);
    }
    out->width = w, out->height = h;
    if (need_h && need_v) {
        pass_horizontal(src, in->width, row0, row1 - row0, th, tmp, w);
        pass_vertical(tmp, w, row0, tv, out->rgb, h);
    } else if (need_h) {
        pass_horizontal(src, in->width, 0, h, th, out->rgb, w);
    } else if (need_v) {
        pass_vertical(src, w, 0, tv, out->rgb, h);
    } else {
        memcpy(out->rgb, src, 3 * (size_t)w * (size_t)h);
    }
    gl_free(tmp);
    return GL_OK;
}

gl_status gl_image_resize(const struct gl_image *in, int width, int height, struct gl_image *out,
                          struct gl_err *err)
{
    *out = (struct gl_image){0};
    GL_ASSERT(in && in->rgb && in->width > 0 && in->height > 0);
    if (width < 1 || height < 1 || width > 65535 || height > 65535)
        return gl_err_set(err, GL_E_INVAL, "image: resize: target %dx%d outside 1..65535", width,
                          height);
    struct taps th = {0}, tv = {0};
    gl_status st = taps_init(&th, in->width, width, err);
    if (st == GL_OK)
        st = taps_init(&tv, in->height, height, err);
    if (st == GL_OK)
        st = resize_run(in, width, height, &th, &tv, out, err);
    taps_free(&th);
    taps_free(&tv);
    return st;
}
