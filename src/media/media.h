// SPDX-License-Identifier: MIT
// media: images in a prompt (arch doc §6.4). The chat renderer writes one <|patch|> per image;
// this module decodes and preprocesses each image (image/: decode, §6.2 grid under
// max_image_tokens, Pillow Lanczos resize, patchify), runs the model's vision tower on it
// (vision/: N = gh * gw soft-token rows of n_embd floats), expands that image's <|patch|> into
// <|image_start|> + <|patch|> x N + <|image_end|>, and produces the engine's media list (the rows
// and where they go). Layering: above image/, vision/, model/ and engine/ (whose request it
// fills), below api/.
//
// Digest: each image's 64-bit content id hashes the grid and the resized RGB pixels the encoder
// sees, so the same picture at the same max_image_tokens gets the same id (and shares prefix-cache
// KV in the engine) whatever its file bytes, while different pixels or grids never share.
//
// Errors (gl_status + message "media: image I: ..." naming the image index where there is one):
// GL_E_INVAL for a count mismatch between <|patch|> tokens and images or bad arguments;
// GL_E_UNSUPPORTED for a model without a vision tower, or one whose patch geometry is not the
// image module's (14 px patches, 2 frames, 2x2 merge); GL_E_LIMIT over max_images or the image
// limits; GL_E_FORMAT (and the image module's other codes) for an undecodable image; GL_E_NOMEM.
// Nothing is left allocated on failure. Threads: one call at a time per pool (the encoder runs
// on it); otherwise no shared state.
#pragma once

#include "base/base.h"
#include "engine/engine.h"
#include "image/image.h"
#include "kernels/kernels.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

#define GL_MEDIA_MAX_IMAGES 16 // default cap on images per prompt

struct gl_media_params {
    int32_t max_image_tokens;      // merged tokens per image (§6.2 cap); GL_IMAGE_MAX_TOKENS
    int32_t max_images;            // images per prompt; GL_MEDIA_MAX_IMAGES
    struct gl_image_limits limits; // decode limits; gl_image_default_limits()
};
struct gl_media_params gl_media_default_params(void);

// One encoded image (PNG or JPEG bytes), borrowed for the call.
struct gl_media_image {
    const uint8_t *data;
    size_t n;
};

// An expanded prompt. ids and media are owned (gl_media_prompt_free). The rows inside media pass
// to the engine with the request: after gl_engine_submit (whatever it returns) call
// gl_media_prompt_moved, so gl_media_prompt_free leaves them to the engine.
struct gl_media_prompt {
    int32_t *ids; // [n_ids]: the prompt with every image's placeholder expanded
    int32_t n_ids;
    struct gl_request_media *media; // [n_media] in prompt order: pos = the first <|patch|> of the
    int32_t n_media;                // image's run, n_rows = its length, rows [n_rows][n_embd]
};

// Encodes one image into out (pos 0): out->embd is a gl_malloc'd [n_rows][n_embd] array the
// caller owns, out->digest its content id; *grid (may be NULL) the merged-token grid (n_rows =
// gh * gw). Errors as above, without an image index (the caller adds it).
GL_MUST_USE gl_status gl_media_encode(const struct gl_model *m, struct gl_pool *pool,
                                      const struct gl_media_image *img,
                                      const struct gl_media_params *p, struct gl_request_media *out,
                                      struct gl_image_grid *grid, struct gl_err *err);

// ids[0..n_ids) with exactly n_images <|patch|> tokens (the i-th belongs to images[i]) ->
// *out. n_images == 0 with no <|patch|> just copies the ids (any model). p NULL: defaults.
GL_MUST_USE gl_status gl_media_expand(const struct gl_model *m, struct gl_pool *pool,
                                      const int32_t *ids, int32_t n_ids,
                                      const struct gl_media_image *images, int32_t n_images,
                                      const struct gl_media_params *p, struct gl_media_prompt *out,
                                      struct gl_err *err);

// The rows now belong to the engine: forget them (the ids and the array stay).
void gl_media_prompt_moved(struct gl_media_prompt *mp);
// Frees ids, the media array and any rows still held; zeroes *mp. NULL-safe.
void gl_media_prompt_free(struct gl_media_prompt *mp);
