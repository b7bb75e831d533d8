// SPDX-License-Identifier: MIT
// media: images and videos in a prompt (arch doc §6.4). The chat renderer writes one <|patch|> per
// image and one <|video|> per video; this module preprocesses each part, runs the model's vision
// tower on it and expands its placeholder:
//  - image (image/: decode, §6.2 grid under max_image_tokens, Pillow Lanczos resize, patchify):
//    N = gh * gw soft-token rows; <|patch|> -> <|image_start|> + <|patch|> x N + <|image_end|>.
//  - video (video/: §6.5 decode, 2 fps sampling, per-frame grid under max_frame_tokens, pairs of
//    frames): each temporal group g (frames 2g, 2g+1) is encoded like an image of its own (the
//    full-attention layers see one group, as vLLM and HF's cu_seqlens do), gh * gw rows each;
//    <|video|> -> <|vid_start|> "Time: X.Xs" <|video|> x N <|vid_frame_separator|> ... <|vid_end|>
//    (gl_video_prompt_layout), the text pieces tokenized plainly (no specials, no BOS).
// The result is the expanded ids and the engine's media list: one entry per image and one per
// temporal group (the rows and where they go). Layering: above image/, video/, vision/, model/,
// tokenizer/ and engine/ (whose request it fills), below api/.
//
// Digest: each entry's 64-bit content id hashes a kind tag, the grid and the resized RGB pixels
// the encoder sees (a group: both of its frames), so the same picture at the same cap gets the
// same id (and shares prefix-cache KV in the engine) whatever its file bytes, while different
// pixels, grids or kinds never share.
//
// Errors (gl_status + message "media: part I (image|video): ..." naming the part index where
// there is one): GL_E_INVAL for placeholders that do not match the parts in count or kind, or bad
// arguments; GL_E_UNSUPPORTED for a model without a vision tower, or one whose patch geometry is
// not the image module's (14 px patches, 2 frames, 2x2 merge); GL_E_LIMIT over max_parts or the
// image / video limits; GL_E_FORMAT (and the image and video modules' other codes) for an
// undecodable part; GL_E_NOMEM. Nothing is left allocated on failure. Threads: one call at a time
// per pool (the encoder runs on it); otherwise no shared state.
#pragma once

#include "base/base.h"
#include "engine/engine.h"
#include "image/image.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "video/video.h"

#include <stddef.h>
#include <stdint.h>

#define GL_MEDIA_MAX_PARTS 16 // default cap on images + videos per prompt

// An LRU cache of encoded rows keyed by digest (vLLM's multimodal processor cache): the same image
// or temporal group again skips the encoder (minutes per image at the released size). Holds at
// most budget bytes of rows; thread-safe. Lookups hand out copies, so the rows a request takes
// stay its own.
struct gl_media_cache;
GL_MUST_USE gl_status gl_media_cache_new(size_t budget_bytes, struct gl_media_cache **out,
                                         struct gl_err *err);
void gl_media_cache_free(struct gl_media_cache *c); // NULL-safe
struct gl_media_cache_stats {
    uint64_t hits, misses; // lookups that skipped / ran the encoder
    int entries;
    size_t bytes;
};
void gl_media_cache_get_stats(struct gl_media_cache *c, struct gl_media_cache_stats *st);

struct gl_media_params {
    int32_t max_image_tokens;            // merged tokens per image (§6.2 cap); GL_IMAGE_MAX_TOKENS
    int32_t max_parts;                   // images + videos per prompt; GL_MEDIA_MAX_PARTS
    struct gl_image_limits limits;       // image decode limits; gl_image_default_limits()
    struct gl_video_params video;        // fps, frame and per-frame token caps (HF defaults)
    struct gl_video_limits video_limits; // gl_video_default_limits()
    struct gl_media_cache *cache;        // encoded rows to reuse, or NULL (borrowed)
    // 1: do not encode. Each entry gets its patch vectors (gl_request_media patches, gh, gw;
    // embd NULL) for the engine's encoder worker (engine.h "Deferred encoding"); no pool needed.
    int defer;
};
struct gl_media_params gl_media_default_params(void);

enum gl_media_kind { GL_MEDIA_IMAGE = 0, GL_MEDIA_VIDEO = 1 };

// One image or video, borrowed for the call: its encoded bytes (PNG or JPEG; a video container),
// or for a video the caller already preprocessed with gl_video_preprocess (the same params), clip,
// or for an image the caller already preprocessed with gl_image_preprocess (the same limits and
// max_image_tokens), pixels (then data and n are not read: the image is decoded once). A zero
// kind is an image.
struct gl_media_part {
    const uint8_t *data;
    size_t n;
    enum gl_media_kind kind;
    const struct gl_video *clip;
    const struct gl_image *pixels;
};

// An expanded prompt. ids and media are owned (gl_media_prompt_free). The rows inside media pass
// to the engine with the request: after gl_engine_submit (whatever it returns) call
// gl_media_prompt_moved, so gl_media_prompt_free leaves them to the engine.
struct gl_media_prompt {
    int32_t *ids; // [n_ids]: the prompt with every part's placeholder expanded
    int32_t n_ids;
    struct gl_request_media *media; // [n_media] in prompt order, an image or a temporal group
    int32_t n_media;                // each: pos = the first soft token of its run, n_rows = its
                                    // length, rows [n_rows][n_embd]
};

// Encodes one image (img->kind GL_MEDIA_IMAGE) into out (pos 0): out->embd is a gl_malloc'd
// [n_rows][n_embd] array the caller owns, out->digest its content id; *grid (may be NULL) the
// merged-token grid (n_rows = gh * gw). With p->defer: out->patches instead (pool unused).
// Errors as above, without a part index (the caller adds it).
GL_MUST_USE gl_status gl_media_encode(const struct gl_model *m, struct gl_pool *pool,
                                      const struct gl_media_part *img,
                                      const struct gl_media_params *p, struct gl_request_media *out,
                                      struct gl_image_grid *grid, struct gl_err *err);

// ids[0..n_ids) with exactly n_parts placeholders, <|patch|> for an image and <|video|> for a
// video, the k-th (of either kind) belonging to parts[k] -> *out. n_parts == 0 with no
// placeholder just copies the ids (any model). tok tokenizes the videos' timestamp text (may be
// NULL when there is no video). p NULL: defaults.
GL_MUST_USE gl_status gl_media_expand(const struct gl_model *m, const struct gl_tokenizer *tok,
                                      struct gl_pool *pool, const int32_t *ids, int32_t n_ids,
                                      const struct gl_media_part *parts, int32_t n_parts,
                                      const struct gl_media_params *p, struct gl_media_prompt *out,
                                      struct gl_err *err);

// The rows now belong to the engine: forget them (the ids and the array stay).
void gl_media_prompt_moved(struct gl_media_prompt *mp);
// Frees ids, the media array and any rows still held; zeroes *mp. NULL-safe.
void gl_media_prompt_free(struct gl_media_prompt *mp);
