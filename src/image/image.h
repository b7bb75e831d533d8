// SPDX-License-Identifier: MIT
// image: the vision input path up to the encoder (muse-glimmer-arch.md §6.2): decode a PNG or
// JPEG held in memory, convert it to 8-bit RGB, pick the patch grid, resize with Pillow's
// Lanczos, then normalise and cut into 14x14 patch vectors.
//
// Reference behaviour is what transformers does with Pillow 9.4 (Debian 12), bit for bit:
//  - convert_to_rgb: an "RGB" image is kept as it is (a PNG tRNS colour key is ignored); any
//    other mode goes through Image.convert("RGBA") and Image.alpha_composite onto opaque white.
//    Pillow modes met here: 1, L (1/2/4/8-bit gray scaled to 0..255), I (16-bit gray, clipped
//    to 0..255, not the high byte), LA, P (palette; tRNS gives per-entry alpha; indices past the
//    PLTE read Pillow's grey ramp entry i -> (i,i,i)), RGB and RGBA (16-bit: high byte of each
//    sample, 16-bit LA included), CMYK JPEG (Adobe-inverted, as Pillow always assumes).
//    A gray tRNS key is compared, as Pillow does, with the converted 8-bit value and the key's
//    low byte.
//  - JPEG is decoded by libjpeg-turbo with its defaults (islow DCT, fancy upsampling), as Pillow
//    does. A JPEG that ends early is an error (Pillow: "image file is truncated"); libjpeg's
//    other warnings (corrupt data it can skip) are ignored, as Pillow ignores them.
//  - EXIF orientation is not applied (convert_to_rgb does not).
//  - vLLM differs: it composites only "RGBA" images (Image.paste with the alpha as mask, whose
//    rounding can differ by one level) and lets convert("RGB") drop the alpha of LA and of
//    transparent palettes. We follow transformers, the model's reference processor.
//
// Errors: input problems return a gl_status (GL_E_FORMAT, GL_E_LIMIT, GL_E_UNSUPPORTED,
// GL_E_INVAL, GL_E_NOMEM) with a message "image: <part>: <what>" in err; nothing is allocated on
// failure. No global state; every function is safe to call from several threads at once.
#pragma once

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#define GL_IMAGE_PATCH      14   // pixels per patch side
#define GL_IMAGE_MERGE      2    // patches per merged token side
#define GL_IMAGE_UNIT       28   // pixels per merged token side (PATCH * MERGE)
#define GL_IMAGE_PATCH_DIM  1176 // values per patch vector: 2 temporal x 3 channels x 14 x 14
#define GL_IMAGE_MAX_TOKENS 4096 // default cap on merged tokens per image (max_image_tokens)
// Hard ceiling for max_image_tokens: 16384 tokens is a 3584x3584 resized image (38 MB as RGB,
// 113 MB of patch floats); anything larger is a configuration error.
#define GL_IMAGE_MAX_TOKENS_LIMIT 16384

// An 8-bit RGB image: width*height pixels, 3 bytes each, rows top to bottom, no padding.
// The struct owns rgb; release it with gl_image_free.
struct gl_image {
    int width, height;
    uint8_t *rgb;
};

// Limits on hostile input, checked before the matching allocation.
struct gl_image_limits {
    size_t max_bytes;    // encoded size
    uint64_t max_pixels; // decoded width * height
    int max_side;        // decoded width and height, each
};
// 20 MiB encoded, 40 Mpx (8000 x 5000), 16384 px per side.
struct gl_image_limits gl_image_default_limits(void);

enum gl_image_format { GL_IMAGE_FMT_UNKNOWN = 0, GL_IMAGE_FMT_PNG, GL_IMAGE_FMT_JPEG };
// From the magic bytes only (PNG signature; JPEG SOI FF D8 FF).
enum gl_image_format gl_image_sniff(const uint8_t *data, size_t n);

// Decodes data[0..n) (PNG or JPEG, sniffed) and converts it to RGB as described above. lim may
// be NULL for the defaults. On success *out owns a new image; on failure *out is zeroed.
gl_status gl_image_decode(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                          struct gl_image *out, struct gl_err *err) GL_MUST_USE;

// Frees img->rgb and zeroes *img. img may be NULL; freeing a zeroed image is a no-op.
void gl_image_free(struct gl_image *img);

// The grid for a width x height image (§6.2 step 2), in merged tokens: the resized image is
// (gw * 28) x (gh * 28) pixels, image_grid_thw is [1, 2*gh, 2*gw] and the image takes gh * gw
// tokens, with gh * gw <= max_tokens. GL_E_INVAL if a side is < 1 or max_tokens is outside
// [1, GL_IMAGE_MAX_TOKENS_LIMIT].
struct gl_image_grid {
    int gh, gw; // merged-token rows and columns
};
gl_status gl_image_grid(int width, int height, int max_tokens, struct gl_image_grid *out,
                        struct gl_err *err) GL_MUST_USE;

// Resizes in to width x height with Pillow's Image.resize(LANCZOS) arithmetic (antialiased
// Lanczos-3, 22-bit fixed point, horizontal pass then vertical), bit-exact. width and height
// must be in [1, 65535]. On success *out owns a new image; on failure *out is zeroed.
gl_status gl_image_resize(const struct gl_image *in, int width, int height, struct gl_image *out,
                          struct gl_err *err) GL_MUST_USE;

// Decode + grid + resize: the pixels the encoder sees, before normalisation. On success *out owns
// a (grid->gw * 28) x (grid->gh * 28) image.
gl_status gl_image_preprocess(const uint8_t *data, size_t n, const struct gl_image_limits *lim,
                              int max_tokens, struct gl_image *out, struct gl_image_grid *grid,
                              struct gl_err *err) GL_MUST_USE;

// Normalises (x/255 - 0.5) / 0.5 in float32 and cuts img, whose sides must be multiples of 28,
// into patch vectors: patches row-major over the (height/14) x (width/14) grid, each 1176 floats
// laid out (temporal 2, channel 3, row 14, col 14) with both temporal slabs equal. On success
// *out is a gl_malloc'd [*n_patches][1176] buffer the caller frees with gl_free.
gl_status gl_image_patchify(const struct gl_image *img, float **out, size_t *n_patches,
                            struct gl_err *err) GL_MUST_USE;
