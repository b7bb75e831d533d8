// SPDX-License-Identifier: MIT
// image: PNG (libpng) and JPEG (libjpeg-turbo) decoding from memory, and the conversion to RGB
// that transformers' convert_to_rgb performs with Pillow 9.4 (see image.h for the rules).
//
// Both libraries report errors by longjmp. Everything the decoder allocates lives in a struct
// owned by the caller of the function that calls setjmp, so its values are well defined after
// the jump and one cleanup path frees them.
#include "image/image.h"

#include <setjmp.h>
#include <stdio.h> // before jpeglib.h, which uses FILE without including it
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#define MIB (1024u * 1024u)
// Ancillary chunks (iCCP, zTXt, ...) larger than this are refused by libpng instead of being
// inflated: we need none of them.
#define PNG_CHUNK_MAX (8u * MIB)
// Progressive JPEGs with many scans cost a full-image pass each; libjpeg-turbo's own tools stop
// at 500 (TJFLAG_LIMITSCANS).
#define JPEG_MAX_SCANS 500

struct gl_image_limits gl_image_default_limits(void)
{
    return (struct gl_image_limits){
        .max_bytes = 20 * (size_t)MIB, .max_pixels = 40u * 1000u * 1000u, .max_side = 16384};
}

enum gl_image_format gl_image_sniff(const uint8_t *data, size_t n)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && !memcmp(data, png_sig, 8))
        return GL_IMAGE_FMT_PNG;
    if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        return GL_IMAGE_FMT_JPEG;
    return GL_IMAGE_FMT_UNKNOWN;
}

void gl_image_free(struct gl_image *img)
{
    if (!img)
        return;
    gl_free(img->rgb);
    *img = (struct gl_image){0};
}

// ---- conversion to RGB -------------------------------------------------------------------------

// Image.alpha_composite(white, px) then convert("RGB"): Pillow's integer arithmetic
// (AlphaComposite.c, 7 extra bits, rounded divisions by 255) with an opaque white destination.
static void composite_on_white(const uint8_t *rgba, uint8_t *rgb, int w)
{
    const uint32_t prec = 7, dst = 255, dst_a = 255;
    for (int x = 0; x < w; x++, rgba += 4, rgb += 3) {
        uint32_t a = rgba[3];
        if (a == 0) {
            rgb[0] = rgb[1] = rgb[2] = 255;
            continue;
        }
        uint32_t blend = dst_a * (255 - a);
        uint32_t outa255 = a * 255 + blend;
        uint32_t coef1 = a * 255 * 255 * (1u << prec) / outa255;
        uint32_t coef2 = 255 * (1u << prec) - coef1;
        for (int c = 0; c < 3; c++) {
            uint32_t t = rgba[c] * coef1 + dst * coef2 + (0x80u << prec);
            rgb[c] = (uint8_t)((((t >> 8) + t) >> 8) >> prec);
        }
    }
}

// Pillow's rgbT2rgba: a pixel whose converted colour equals the key's low byte on all three
// channels becomes fully transparent.
static void apply_gray_key(uint8_t *rgba, int w, unsigned key)
{
    uint8_t k = (uint8_t)(key & 0xff);
    for (int x = 0; x < w; x++, rgba += 4)
        if (rgba[0] == k && rgba[1] == k && rgba[2] == k)
            rgba[3] = 0;
}

// The decoded size against the limits, before anything of that size is allocated.
static gl_status check_size(const char *part, uint64_t w, uint64_t h,
                            const struct gl_image_limits *lim, struct gl_err *err)
{
    if (w == 0 || h == 0)
        return gl_err_set(err, GL_E_FORMAT, "image: %s: zero-sized image (%llux%llu)", part,
                          (unsigned long long)w, (unsigned long long)h);
    if (w > (uint64_t)lim->max_side || h > (uint64_t)lim->max_side)
        return gl_err_set(err, GL_E_LIMIT, "image: %s: %llux%llu has a side over the %d px limit",
                          part, (unsigned long long)w, (unsigned long long)h, lim->max_side);
    if (w * h > lim->max_pixels)
        return gl_err_set(err, GL_E_LIMIT, "image: %s: %llux%llu is over the %llu-pixel limit",
                          part, (unsigned long long)w, (unsigned long long)h,
                          (unsigned long long)lim->max_pixels);
    return GL_OK;
}

// ---- PNG ---------------------------------------------------------------------------------------

struct png_src {
    const uint8_t *data;
    size_t n, pos;
    char msg[200]; // libpng's error text, copied before the longjmp
};

// What one decode owns: decode_png frees it on every path.
struct png_job {
    png_structp png;
    png_infop info;
    uint8_t *raw;   // whole image as libpng delivers it (packed bits expanded, 16-bit big-endian)
    uint8_t **rows; // pointers into raw
    uint8_t *rgba;  // one converted row
    struct gl_image img;
};

static void png_on_error(png_structp png, png_const_charp msg)
{
    struct png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png, (void)msg; // ancillary-chunk problems do not change the pixels
}

static void png_on_read(png_structp png, png_bytep out, size_t n)
{
    struct png_src *s = png_get_io_ptr(png);
    if (n > s->n - s->pos)
        png_error(png, "truncated (data ends inside a chunk)");
    memcpy(out, s->data + s->pos, n);
    s->pos += n;
}

// The PNG's pixel format after png_set_packing (samples < 8 bits become one byte each).
struct png_fmt {
    int color, depth; // IHDR colour type and bit depth
    int has_key;      // a gray tRNS key (ignored for RGB, as convert_to_rgb keeps RGB images)
    unsigned key;
    uint8_t pal[256 * 4]; // palette as Pillow holds it: grey ramp, PLTE over it, tRNS alphas
};

static uint8_t gray8(const uint8_t *p, int depth)
{
    switch (depth) {
    case 1:
        return p[0] ? 255 : 0; // mode "1"
    case 2:
        return (uint8_t)(p[0] * 85); // rawmode L;2
    case 4:
        return (uint8_t)(p[0] * 17); // rawmode L;4
    case 8:
        return p[0];
    default: // mode "I" from I;16B; convert clips rather than taking the high byte
        return (uint8_t)(((unsigned)p[0] << 8 | p[1]) > 255 ? 255 : p[1]);
    }
}

static void png_row_to_rgba(const struct png_fmt *f, const uint8_t *in, uint8_t *out, int w)
{
    int bps = f->depth == 16 ? 2 : 1; // bytes per sample; 16-bit samples keep their high byte
    for (int x = 0; x < w; x++, out += 4) {
        switch (f->color) {
        case PNG_COLOR_TYPE_GRAY:
            out[0] = out[1] = out[2] = gray8(in, f->depth), out[3] = 255;
            in += bps;
            break;
        case PNG_COLOR_TYPE_GRAY_ALPHA:
            out[0] = out[1] = out[2] = in[0], out[3] = in[bps];
            in += 2 * bps;
            break;
        case PNG_COLOR_TYPE_PALETTE:
            memcpy(out, &f->pal[4 * in[0]], 4);
            in += 1;
            break;
        case PNG_COLOR_TYPE_RGB:
            out[0] = in[0], out[1] = in[bps], out[2] = in[2 * bps], out[3] = 255;
            in += 3 * bps;
            break;
        default: // RGBA
            out[0] = in[0], out[1] = in[bps], out[2] = in[2 * bps], out[3] = in[3 * bps];
            in += 4 * bps;
            break;
        }
    }
    if (f->has_key)
        apply_gray_key(out - 4 * (size_t)w, w, f->key);
}

static void set_rgba(uint8_t *p, uint8_t r, uint8_t g, uint8_t b, uint8_t a)
{
    p[0] = r, p[1] = g, p[2] = b, p[3] = a;
}

static void png_read_palette(png_structp png, png_infop info, struct png_fmt *f)
{
    for (int i = 0; i < 256; i++)
        set_rgba(&f->pal[4 * i], (uint8_t)i, (uint8_t)i, (uint8_t)i, 255);
    png_colorp plte = NULL;
    int n_plte = 0;
    if (png_get_PLTE(png, info, &plte, &n_plte) & PNG_INFO_PLTE)
        for (int i = 0; i < n_plte && i < 256; i++)
            set_rgba(&f->pal[4 * i], plte[i].red, plte[i].green, plte[i].blue, 255);
    png_bytep trns = NULL;
    int n_trns = 0;
    png_color_16p key = NULL;
    if (png_get_tRNS(png, info, &trns, &n_trns, &key) & PNG_INFO_tRNS) {
        if (f->color == PNG_COLOR_TYPE_PALETTE) {
            for (int i = 0; i < n_trns && i < 256; i++)
                f->pal[4 * i + 3] = trns[i];
        } else if (f->color == PNG_COLOR_TYPE_GRAY) {
            f->has_key = 1;
            f->key = key->gray;
        }
    }
}

// Runs under png_jmpbuf: every allocation goes into *j so decode_png can free it after a jump.
static gl_status png_run(struct png_job *j, struct png_fmt *f, const struct gl_image_limits *lim,
                         struct gl_err *err)
{
    png_uint_32 w, h;
    int interlace;
    png_read_info(j->png, j->info);
    png_get_IHDR(j->png, j->info, &w, &h, &f->depth, &f->color, &interlace, NULL, NULL);
    gl_status st = check_size("png", w, h, lim, err);
    if (st != GL_OK)
        return st;
    png_read_palette(j->png, j->info, f);
    png_set_packing(j->png);
    png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);
    size_t stride = png_get_rowbytes(j->png, j->info);
    j->raw = gl_malloc(stride * h);
    j->rows = gl_malloc(sizeof *j->rows * h);
    j->rgba = gl_malloc(4 * (size_t)w);
    j->img.rgb = gl_malloc(3 * (size_t)w * h);
    if (!j->raw || !j->rows || !j->rgba || !j->img.rgb)
        return gl_err_set(err, GL_E_NOMEM, "image: png: out of memory for %ux%u", w, h);
    for (png_uint_32 y = 0; y < h; y++)
        j->rows[y] = j->raw + stride * y;
    png_read_image(j->png, j->rows); // the trailing chunks after IDAT are not read (not needed)
    j->img.width = (int)w, j->img.height = (int)h;
    for (png_uint_32 y = 0; y < h; y++) {
        uint8_t *dst = j->img.rgb + 3 * (size_t)w * y;
        png_row_to_rgba(f, j->rows[y], j->rgba, (int)w);
        if (f->color == PNG_COLOR_TYPE_RGB) // convert_to_rgb keeps "RGB" images unchanged
            for (png_uint_32 x = 0; x < w; x++)
                memcpy(dst + 3 * x, j->rgba + 4 * x, 3);
        else
            composite_on_white(j->rgba, dst, (int)w);
    }
    return GL_OK;
}

static gl_status png_decode(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                            struct png_job *j, struct png_fmt *f, struct png_src *src,
                            struct gl_err *err)
{
    *src = (struct png_src){.data = data, .n = n};
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, src, png_on_error, png_on_warning);
    j->info = j->png ? png_create_info_struct(j->png) : NULL;
    if (!j->info)
        return gl_err_set(err, GL_E_NOMEM, "image: png: out of memory");
    if (setjmp(png_jmpbuf(j->png)))
        return gl_err_set(err, GL_E_FORMAT, "image: png: %s", src->msg);
    png_set_read_fn(j->png, src, png_on_read);
    png_set_chunk_malloc_max(j->png, PNG_CHUNK_MAX);
    // Unknown chunks and the known ones Pillow's convert ignores (text, ICC profile, EXIF) are
    // skipped unread rather than parsed and inflated.
    static const png_byte skip[] = "iCCP\0iTXt\0tEXt\0zTXt\0sPLT\0eXIf";
    png_set_keep_unknown_chunks(j->png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
    png_set_keep_unknown_chunks(j->png, PNG_HANDLE_CHUNK_NEVER, skip, (int)(sizeof skip / 5));
    png_set_benign_errors(j->png, 1);
    return png_run(j, f, lim, err);
}

static gl_status decode_png(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                            struct gl_image *out, struct gl_err *err)
{
    struct png_job j = {0};
    struct png_src src;
    struct png_fmt *f = gl_calloc(1, sizeof *f);
    gl_status st = f ? png_decode(data, n, lim, &j, f, &src, err)
                     : gl_err_set(err, GL_E_NOMEM, "image: png: out of memory");
    if (j.png)
        png_destroy_read_struct(&j.png, j.info ? &j.info : NULL, NULL);
    gl_free(f);
    gl_free(j.raw);
    gl_free(j.rows);
    gl_free(j.rgba);
    if (st == GL_OK)
        *out = j.img;
    else
        gl_image_free(&j.img);
    return st;
}

// ---- JPEG --------------------------------------------------------------------------------------

struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    struct jpeg_progress_mgr progress;
    jmp_buf jmp;
    char msg[JMSG_LENGTH_MAX + 16]; // libjpeg text plus our "truncated: " prefix
    int created;
    int finishing; // all scanlines are out; reading on to EOI
    uint8_t *row;  // one decoded scanline (1, 3 or 4 samples per pixel)
    uint8_t *rgba;
    struct gl_image img;
};

static void jpeg_on_error(j_common_ptr c)
{
    struct jpeg_job *j = (struct jpeg_job *)c->client_data;
    char text[JMSG_LENGTH_MAX];
    c->err->format_message(c, text);
    snprintf(j->msg, sizeof j->msg, "%s%s", c->err->msg_code == JWRN_JPEG_EOF ? "truncated: " : "",
             text);
    longjmp(j->jmp, 1);
}

// Warnings are ignored, as Pillow ignores them, except running out of data: libjpeg would pad
// the rest with grey, while Pillow reports the file as truncated. Once all scanlines are out,
// Pillow reads on to EOI and accepts a file that ends there (jump code 2: done).
static void jpeg_on_message(j_common_ptr c, int level)
{
    struct jpeg_job *j = (struct jpeg_job *)c->client_data;
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
        if (j->finishing)
            longjmp(j->jmp, 2);
        jpeg_on_error(c);
    }
}

static void jpeg_on_progress(j_common_ptr c)
{
    struct jpeg_job *j = (struct jpeg_job *)c->client_data;
    if (j->cinfo.is_decompressor && j->cinfo.input_scan_number > JPEG_MAX_SCANS) {
        snprintf(j->msg, sizeof j->msg, "more than %d scans", JPEG_MAX_SCANS);
        longjmp(j->jmp, 1);
    }
}

// Pillow's CMYK;I unpacker then cmyk2rgb: Adobe-style inverted samples, K folded in with a
// rounded division by 255.
static void cmyk_inv_to_rgba(const uint8_t *in, uint8_t *out, int w)
{
    for (int x = 0; x < w; x++, in += 4, out += 4) {
        int nk = in[3]; // 255 - (255 - k)
        for (int c = 0; c < 3; c++) {
            int t = (255 - in[c]) * nk + 128;
            int v = nk - (((t >> 8) + t) >> 8);
            out[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        out[3] = 255;
    }
}

static gl_status jpeg_run(struct jpeg_job *j, const uint8_t *data, size_t n,
                          const struct gl_image_limits *lim, struct gl_err *err)
{
    struct jpeg_decompress_struct *ci = &j->cinfo;
    jpeg_mem_src(ci, data, (unsigned long)n);
    jpeg_read_header(ci, TRUE);
    unsigned w = ci->image_width, h = ci->image_height;
    gl_status st = check_size("jpeg", w, h, lim, err);
    if (st != GL_OK)
        return st;
    int comps = ci->num_components;
    if (comps != 1 && comps != 3 && comps != 4) // Pillow: "cannot handle N-layer images"
        return gl_err_set(err, GL_E_UNSUPPORTED, "image: jpeg: %d components (want 1, 3 or 4)",
                          comps);
    ci->out_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_start_decompress(ci);
    j->row = gl_malloc((size_t)w * (size_t)comps);
    j->rgba = gl_malloc(4 * (size_t)w);
    j->img.rgb = gl_malloc(3 * (size_t)w * h);
    if (!j->row || !j->rgba || !j->img.rgb)
        return gl_err_set(err, GL_E_NOMEM, "image: jpeg: out of memory for %ux%u", w, h);
    j->img.width = (int)w, j->img.height = (int)h;
    while (ci->output_scanline < h) {
        uint8_t *dst = j->img.rgb + 3 * (size_t)w * ci->output_scanline;
        JSAMPROW rows[1] = {comps == 3 ? dst : j->row}; // "RGB" is kept as it is
        jpeg_read_scanlines(ci, rows, 1);
        if (comps == 1) {
            for (unsigned x = 0; x < w; x++)
                dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = j->row[x];
        } else if (comps == 4) {
            cmyk_inv_to_rgba(j->row, j->rgba, (int)w);
            composite_on_white(j->rgba, dst, (int)w);
        }
    }
    // Pillow calls jpeg_finish_decompress and fails on an error there (a bad marker between
    // the image data and EOI), so the file is read to its end here too.
    j->finishing = 1;
    jpeg_finish_decompress(ci);
    return GL_OK;
}

static gl_status jpeg_decode(struct jpeg_job *j, const uint8_t *data, size_t n,
                             const struct gl_image_limits *lim, struct gl_err *err)
{
    j->cinfo.err = jpeg_std_error(&j->jerr);
    j->jerr.error_exit = jpeg_on_error;
    j->jerr.emit_message = jpeg_on_message;
    j->cinfo.client_data = j;
    switch (setjmp(j->jmp)) {
    case 0:
        break;
    case 2: // the data ended after the last scanline: the image is complete
        return GL_OK;
    default:
        return gl_err_set(err, GL_E_FORMAT, "image: jpeg: %s", j->msg);
    }
    jpeg_create_decompress(&j->cinfo);
    j->created = 1;
    j->progress.progress_monitor = jpeg_on_progress;
    j->cinfo.progress = &j->progress;
    return jpeg_run(j, data, n, lim, err);
}

static gl_status decode_jpeg(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                             struct gl_image *out, struct gl_err *err)
{
    // Heap-allocated so that the job (with its jmp_buf) is not an automatic object of the
    // function that calls setjmp.
    struct jpeg_job *j = gl_calloc(1, sizeof *j);
    if (!j)
        return gl_err_set(err, GL_E_NOMEM, "image: jpeg: out of memory");
    gl_status st = jpeg_decode(j, data, n, lim, err);
    if (j->created)
        jpeg_destroy_decompress(&j->cinfo);
    gl_free(j->row);
    gl_free(j->rgba);
    if (st == GL_OK)
        *out = j->img;
    else
        gl_image_free(&j->img);
    gl_free(j);
    return st;
}

gl_status gl_image_decode(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                          struct gl_image *out, struct gl_err *err)
{
    struct gl_image_limits def = gl_image_default_limits();
    if (!lim)
        lim = &def;
    *out = (struct gl_image){0};
    if (!data || n == 0)
        return gl_err_set(err, GL_E_FORMAT, "image: empty input (0 bytes)");
    if (n > lim->max_bytes)
        return gl_err_set(err, GL_E_LIMIT, "image: %zu bytes is over the %zu-byte limit", n,
                          lim->max_bytes);
    switch (gl_image_sniff(data, n)) {
    case GL_IMAGE_FMT_PNG:
        return decode_png(data, n, lim, out, err);
    case GL_IMAGE_FMT_JPEG:
        return decode_jpeg(data, n, lim, out, err);
    default:
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "image: not a PNG or JPEG (first bytes %02x %02x %02x %02x)", data[0],
                          n > 1 ? data[1] : 0, n > 2 ? data[2] : 0, n > 3 ? data[3] : 0);
    }
}
