// SPDX-License-Identifier: MIT
// media: image -> soft-token rows -> expanded prompt + the engine's media list (media.h).
// Per image: decode + grid + resize (image/), digest of the resized pixels, patchify to
// [(2gh)(2gw)][1176] floats, encode with the model's vision tower to [gh * gw][n_embd] rows
// (vision/). The encoder's scratch is per call, so peak memory is one image's patches and
// activations on top of the rows already produced.
#include "media/media.h"
#include "tokenizer/tokenizer.h"

#include <string.h>

struct gl_media_params gl_media_default_params(void)
{
    return (struct gl_media_params){.max_image_tokens = GL_IMAGE_MAX_TOKENS,
                                    .max_images = GL_MEDIA_MAX_IMAGES,
                                    .limits = gl_image_default_limits()};
}

static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Content id of a preprocessed image: its grid, then every RGB byte, 8 bytes per mixing round.
static uint64_t image_digest(const struct gl_image *img, const struct gl_image_grid *g)
{
    uint64_t h = mix64(0x676C696E742D696Dull ^ ((uint64_t)(uint32_t)g->gh << 32) ^
                       (uint64_t)(uint32_t)g->gw);
    const size_t n = (size_t)img->width * (size_t)img->height * 3;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, img->rgb + i, 8);
        h = mix64(h ^ w) + 0x9E3779B97F4A7C15ull;
    }
    uint64_t tail = 0;
    memcpy(&tail, img->rgb + i, n - i);
    return mix64(h ^ tail ^ (uint64_t)n);
}

// The model has a tower whose patch geometry is the image module's (14 px, 2 frames, 2x2
// merge: 1176-float patch vectors) and whose rows are text embeddings (out_dim = n_embd).
static gl_status check_tower(const struct gl_model *m, struct gl_err *err)
{
    const struct gl_vision_config *c = gl_model_vision_config(m);
    if (!c || !gl_model_vision(m))
        return gl_err_set(err, GL_E_UNSUPPORTED, "the model has no vision tower");
    if (c->patch_size != GL_IMAGE_PATCH || c->merge != GL_IMAGE_MERGE ||
        gl_vision_patch_dim(c) != GL_IMAGE_PATCH_DIM || c->out_dim != m->cfg.n_embd)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision tower with %d px patches, %d frames, merge %d, output %d: the "
                          "image path needs %d px, 2 frames, merge %d and output n_embd %d",
                          (int)c->patch_size, (int)c->patch_frames, (int)c->merge, (int)c->out_dim,
                          GL_IMAGE_PATCH, GL_IMAGE_MERGE, (int)m->cfg.n_embd);
    return GL_OK;
}

gl_status gl_media_encode(const struct gl_model *m, struct gl_pool *pool,
                          const struct gl_media_image *img, const struct gl_media_params *p,
                          struct gl_request_media *out, struct gl_image_grid *grid,
                          struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    const struct gl_media_params dp = gl_media_default_params();
    p = p ? p : &dp;
    gl_status st = check_tower(m, err);
    if (st != GL_OK)
        return st;
    if (!img || !img->data || !pool)
        return gl_err_set(err, GL_E_INVAL, "no image data or no thread pool");
    struct gl_image px = {0};
    struct gl_image_grid g = {0};
    if ((st = gl_image_preprocess(img->data, img->n, &p->limits, p->max_image_tokens, &px, &g,
                                  err)) != GL_OK)
        return st;
    float *patches = NULL;
    size_t n_patches = 0;
    st = gl_image_patchify(&px, &patches, &n_patches, err);
    const uint64_t digest = st == GL_OK ? image_digest(&px, &g) : 0;
    gl_image_free(&px);
    const int64_t n_rows = (int64_t)g.gh * g.gw, E = m->cfg.n_embd;
    float *rows = NULL;
    if (st == GL_OK) {
        GL_ASSERT(n_patches == (size_t)(4 * n_rows)); // (2gh) x (2gw) patches
        if (!(rows = gl_malloc((size_t)(n_rows * E) * sizeof(float))))
            st = gl_err_set(err, GL_E_NOMEM, "no memory for %lld x %lld soft-token rows",
                            (long long)n_rows, (long long)E);
    }
    if (st == GL_OK)
        st = gl_vision_encode(pool, gl_model_vision_config(m), gl_model_vision(m), patches,
                              2 * (int64_t)g.gh, 2 * (int64_t)g.gw, rows, err);
    gl_free(patches);
    if (st != GL_OK) {
        gl_free(rows);
        return st;
    }
    out->n_rows = (int32_t)n_rows;
    out->embd = rows;
    out->digest = digest;
    if (grid)
        *grid = g;
    return GL_OK;
}

void gl_media_prompt_moved(struct gl_media_prompt *mp)
{
    for (int32_t i = 0; mp && mp->media && i < mp->n_media; i++)
        mp->media[i].embd = NULL;
}

void gl_media_prompt_free(struct gl_media_prompt *mp)
{
    if (!mp)
        return;
    for (int32_t i = 0; mp->media && i < mp->n_media; i++)
        gl_free(mp->media[i].embd);
    gl_free(mp->media);
    gl_free(mp->ids);
    memset(mp, 0, sizeof *mp);
}

// Checks the arguments and the placeholder count (an image per <|patch|>, in order).
static gl_status check_expand(const struct gl_model *m, const int32_t *ids, int32_t n_ids,
                              const struct gl_media_image *images, int32_t n_images,
                              const struct gl_media_params *p, struct gl_err *err)
{
    if (!m || n_ids < 0 || (n_ids > 0 && !ids) || n_images < 0 || (n_images > 0 && !images))
        return gl_err_set(err, GL_E_INVAL, "media: bad arguments (%d ids, %d images)", n_ids,
                          n_images);
    int32_t n_patch = 0;
    for (int32_t i = 0; i < n_ids; i++)
        n_patch += ids[i] == GL_TOK_PATCH;
    if (n_patch < n_images)
        return gl_err_set(err, GL_E_INVAL,
                          "media: image %d: no <|patch|> placeholder for it (the prompt has %d, "
                          "%d images were given)",
                          n_patch, n_patch, n_images);
    if (n_patch > n_images)
        return gl_err_set(err, GL_E_INVAL,
                          "media: <|patch|> placeholder %d has no image (the prompt has %d, %d "
                          "images were given)",
                          n_images, n_patch, n_images);
    if (n_images > p->max_images)
        return gl_err_set(err, GL_E_LIMIT,
                          "media: image %d: over the limit of %d images per prompt", p->max_images,
                          p->max_images);
    struct gl_err inner = {0};
    gl_status st = n_images > 0 ? check_tower(m, &inner) : GL_OK;
    if (st != GL_OK)
        return gl_err_set(err, st, "media: image 0: %.400s", inner.msg);
    return GL_OK;
}

// out->media is encoded: writes the expanded ids and each image's first soft position.
static gl_status splice(const int32_t *ids, int32_t n_ids, struct gl_media_prompt *out,
                        struct gl_err *err)
{
    int64_t total = n_ids;
    for (int32_t i = 0; i < out->n_media; i++)
        total += out->media[i].n_rows + 1; // <|patch|> -> start + rows + end
    if (total > INT32_MAX)
        return gl_err_set(err, GL_E_LIMIT, "media: the expanded prompt has %lld tokens",
                          (long long)total);
    if (!(out->ids = gl_malloc((size_t)(total > 0 ? total : 1) * sizeof *out->ids)))
        return gl_err_set(err, GL_E_NOMEM, "media: no memory for a %lld-token prompt",
                          (long long)total);
    int32_t j = 0, k = 0;
    for (int32_t i = 0; i < n_ids; i++) {
        if (ids[i] != GL_TOK_PATCH) {
            out->ids[j++] = ids[i];
            continue;
        }
        out->ids[j++] = GL_TOK_IMAGE_START;
        out->media[k].pos = j;
        for (int32_t r = 0; r < out->media[k].n_rows; r++)
            out->ids[j++] = GL_TOK_PATCH;
        out->ids[j++] = GL_TOK_IMAGE_END;
        k++;
    }
    out->n_ids = j;
    return GL_OK;
}

gl_status gl_media_expand(const struct gl_model *m, struct gl_pool *pool, const int32_t *ids,
                          int32_t n_ids, const struct gl_media_image *images, int32_t n_images,
                          const struct gl_media_params *p, struct gl_media_prompt *out,
                          struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    const struct gl_media_params dp = gl_media_default_params();
    p = p ? p : &dp;
    gl_status st = check_expand(m, ids, n_ids, images, n_images, p, err);
    if (st != GL_OK)
        return st;
    if (n_images > 0 && !(out->media = gl_calloc((size_t)n_images, sizeof *out->media)))
        return gl_err_set(err, GL_E_NOMEM, "media: no memory for %d images", n_images);
    for (int32_t i = 0; i < n_images && st == GL_OK; i++) {
        struct gl_err inner = {0};
        st = gl_media_encode(m, pool, &images[i], p, &out->media[i], NULL, &inner);
        if (st != GL_OK)
            gl_err_set(err, st, "media: image %d: %.400s", (int)i, inner.msg);
        else
            out->n_media++;
    }
    if (st == GL_OK)
        st = splice(ids, n_ids, out, err);
    if (st != GL_OK)
        gl_media_prompt_free(out);
    return st;
}
