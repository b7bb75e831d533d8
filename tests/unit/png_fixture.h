// SPDX-License-Identifier: MIT
// Encoded images in memory for the image and media tests: make_png writes a w x h 8-bit PNG of
// libpng colour type `color` from px (1, 2, 3 or 4 channels per pixel, rows packed) into a
// malloc'd buffer (free m.p). A libpng error aborts: a fixture that cannot be written is a broken
// test, not a test failure.
#pragma once

#include "base/base.h"

#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mem {
    uint8_t *p;
    size_t n, cap;
};

static inline void mem_write(png_structp png, png_bytep d, size_t n)
{
    struct mem *m = png_get_io_ptr(png);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->p = realloc(m->p, m->cap);
        GL_ASSERT(m->p);
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
}

static inline void mem_flush(png_structp png)
{
    (void)png;
}

static inline struct mem make_png(int w, int h, int color, const uint8_t *px)
{
    struct mem m = {0};
    const int ch = color == PNG_COLOR_TYPE_GRAY         ? 1
                   : color == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                   : color == PNG_COLOR_TYPE_RGB        ? 3
                                                        : 4;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png)))
        abort();
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, color, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, px + (size_t)y * (size_t)w * (size_t)ch);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return m;
}
