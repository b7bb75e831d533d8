// SPDX-License-Identifier: MIT
// media: images and videos -> soft-token rows -> expanded prompt + the engine's media list
// (media.h). Per image: decode + grid + resize (image/), digest of the resized pixels, patchify to
// [(2gh)(2gw)][1176] floats, encode with the model's vision tower to [gh * gw][n_embd] rows
// (vision/). Per video: the same per temporal group from video/'s clip. The encoder's scratch is
// per call, so peak memory is one part's patches and one encode's activations on top of the rows
// already produced.
#include "media/media.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <string.h>

struct gl_media_params gl_media_default_params(void)
{
    return (struct gl_media_params){.max_image_tokens = GL_IMAGE_MAX_TOKENS,
                                    .max_parts = GL_MEDIA_MAX_PARTS,
                                    .limits = gl_image_default_limits(),
                                    .video = gl_video_default_params(),
                                    .video_limits = gl_video_default_limits()};
}

// Content id of preprocessed pixels: a kind tag, the grid and the pixel size, then every RGB byte,
// under the keyed SipHash of base.h. The prefix cache shares KV between requests whose digests
// agree, so the digest must not be computable by clients: with a public mixing function, one could
// craft different pixels with the digest of someone else's image (docs/SECURITY.md).
#define DIGEST_IMAGE 1u
#define DIGEST_VIDEO 2u // a temporal group: its two frames
static uint64_t pixels_digest(uint32_t tag, const struct gl_image_grid *g, int width, int height,
                              const uint8_t *rgb, size_t n)
{
    struct gl_siphash h;
    gl_siphash_init(&h, gl_hash_key());
    const uint32_t head[5] = {tag, (uint32_t)g->gh, (uint32_t)g->gw, (uint32_t)width,
                              (uint32_t)height};
    gl_siphash_update(&h, head, sizeof head);
    gl_siphash_update(&h, rgb, n);
    return gl_siphash_final(&h);
}

// ---- encode cache ----

// One image's or temporal group's rows under its digest. Linear lookup: entries number in the
// tens to hundreds (a released-size image's rows are 109 MB), far below where it would matter.
struct cache_entry {
    uint64_t digest;
    int32_t n_rows;
    int64_t n_embd;
    float *rows; // [n_rows][n_embd]
    uint64_t last_use;
};

struct gl_media_cache {
    pthread_mutex_t mu;
    size_t budget, bytes;
    struct cache_entry *e;
    int n, cap;
    uint64_t tick, hits, misses;
};

gl_status gl_media_cache_new(size_t budget_bytes, struct gl_media_cache **out, struct gl_err *err)
{
    *out = gl_calloc(1, sizeof **out);
    if (!*out)
        return gl_err_set(err, GL_E_NOMEM, "media: no memory for the encode cache");
    pthread_mutex_init(&(*out)->mu, NULL);
    (*out)->budget = budget_bytes;
    return GL_OK;
}

void gl_media_cache_free(struct gl_media_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        gl_free(c->e[i].rows);
    gl_free(c->e);
    pthread_mutex_destroy(&c->mu);
    gl_free(c);
}

void gl_media_cache_get_stats(struct gl_media_cache *c, struct gl_media_cache_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = (struct gl_media_cache_stats){c->hits, c->misses, c->n, c->bytes};
    pthread_mutex_unlock(&c->mu);
}

// A copy of the cached rows into out (caller-allocated [n_rows][n_embd]); 0 on a miss.
static int cache_get(struct gl_media_cache *c, uint64_t digest, int32_t n_rows, int64_t n_embd,
                     float *out)
{
    pthread_mutex_lock(&c->mu);
    int hit = 0;
    for (int i = 0; i < c->n && !hit; i++) {
        struct cache_entry *e = &c->e[i];
        if (e->digest == digest && e->n_rows == n_rows && e->n_embd == n_embd) {
            memcpy(out, e->rows, (size_t)n_rows * (size_t)n_embd * sizeof(float));
            e->last_use = ++c->tick;
            hit = 1;
        }
    }
    hit ? c->hits++ : c->misses++;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

// Keeps a copy of rows, evicting the least recently used entries to stay within the budget. Rows
// larger than the whole budget, or no memory for the copy: not kept (the cache is an
// optimisation, never an error).
static void cache_put(struct gl_media_cache *c, uint64_t digest, int32_t n_rows, int64_t n_embd,
                      const float *rows)
{
    const size_t nb = (size_t)n_rows * (size_t)n_embd * sizeof(float);
    if (nb > c->budget)
        return;
    float *copy = gl_malloc(nb);
    if (!copy)
        return;
    memcpy(copy, rows, nb);
    pthread_mutex_lock(&c->mu);
    while (c->n > 0 && c->bytes + nb > c->budget) {
        int lru = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].last_use < c->e[lru].last_use)
                lru = i;
        c->bytes -= (size_t)c->e[lru].n_rows * (size_t)c->e[lru].n_embd * sizeof(float);
        gl_free(c->e[lru].rows);
        c->e[lru] = c->e[--c->n];
    }
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 16;
        struct cache_entry *e = gl_realloc(c->e, (size_t)cap * sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&c->mu);
            gl_free(copy);
            return;
        }
        c->e = e;
        c->cap = cap;
    }
    c->e[c->n++] = (struct cache_entry){digest, n_rows, n_embd, copy, ++c->tick};
    c->bytes += nb;
    pthread_mutex_unlock(&c->mu);
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

// gh * gw soft-token rows of one image or temporal group from its (2gh) x (2gw) patch vectors:
// from the cache when p->cache holds digest, else the encoder (then kept in the cache). *rows is
// gl_malloc'ed; NULL on failure.
static gl_status encode_rows(const struct gl_model *m, struct gl_pool *pool,
                             const struct gl_media_params *p, uint64_t digest,
                             const struct gl_image_grid *g, const float *patches, float **rows,
                             struct gl_err *err)
{
    const int32_t n_rows = g->gh * g->gw;
    const int64_t E = m->cfg.n_embd;
    GL_ASSERT(!p->defer);
    if (!(*rows = gl_malloc((size_t)n_rows * (size_t)E * sizeof(float))))
        return gl_err_set(err, GL_E_NOMEM, "no memory for %d x %lld soft-token rows", (int)n_rows,
                          (long long)E);
    if (p->cache && cache_get(p->cache, digest, n_rows, E, *rows))
        return GL_OK;
    gl_status st = gl_vision_encode(pool, gl_model_vision_config(m), gl_model_vision(m), patches,
                                    2 * (int64_t)g->gh, 2 * (int64_t)g->gw, *rows, err);
    if (st != GL_OK) {
        gl_free(*rows);
        *rows = NULL;
    } else if (p->cache) {
        cache_put(p->cache, digest, n_rows, E, *rows);
    }
    return st;
}

gl_status gl_media_encode(const struct gl_model *m, struct gl_pool *pool,
                          const struct gl_media_part *img, const struct gl_media_params *p,
                          struct gl_request_media *out, struct gl_image_grid *grid,
                          struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    const struct gl_media_params dp = gl_media_default_params();
    p = p ? p : &dp;
    gl_status st = check_tower(m, err);
    if (st != GL_OK)
        return st;
    if (!img || (!img->data && !img->pixels) || img->kind != GL_MEDIA_IMAGE || (!pool && !p->defer))
        return gl_err_set(err, GL_E_INVAL, "no image data or no thread pool");
    struct gl_image own = {0};
    struct gl_image_grid g = {0};
    const struct gl_image *px = img->pixels;
    if (px) { // preprocessed by the caller: its sides are the grid's
        if (px->width % GL_IMAGE_UNIT || px->height % GL_IMAGE_UNIT || !px->rgb)
            return gl_err_set(err, GL_E_INVAL, "preprocessed image %dx%d is not on the %d px grid",
                              px->width, px->height, GL_IMAGE_UNIT);
        g = (struct gl_image_grid){px->height / GL_IMAGE_UNIT, px->width / GL_IMAGE_UNIT};
    } else {
        if ((st = gl_image_preprocess(img->data, img->n, &p->limits, p->max_image_tokens, &own, &g,
                                      err)) != GL_OK)
            return st;
        px = &own;
    }
    float *patches = NULL;
    size_t n_patches = 0;
    st = gl_image_patchify(px, &patches, &n_patches, err);
    const uint64_t digest = st == GL_OK
                                ? pixels_digest(DIGEST_IMAGE, &g, px->width, px->height, px->rgb,
                                                (size_t)px->width * (size_t)px->height * 3)
                                : 0;
    gl_image_free(&own);
    const int64_t n_rows = (int64_t)g.gh * g.gw;
    float *rows = NULL;
    GL_ASSERT(st != GL_OK || n_patches == (size_t)(4 * n_rows)); // (2gh) x (2gw) patches
    if (st == GL_OK && p->defer) { // the engine's encoder worker takes the patches
        out->patches = patches;
        out->gh = g.gh;
        out->gw = g.gw;
        patches = NULL;
    } else if (st == GL_OK) {
        st = encode_rows(m, pool, p, digest, &g, patches, &rows, err);
    }
    gl_free(patches);
    if (st != GL_OK)
        return st;
    out->n_rows = (int32_t)n_rows;
    out->embd = rows;
    out->digest = digest;
    if (grid)
        *grid = g;
    return GL_OK;
}

void gl_media_prompt_moved(struct gl_media_prompt *mp)
{
    for (int32_t i = 0; mp && mp->media && i < mp->n_media; i++) {
        mp->media[i].embd = NULL;
        mp->media[i].patches = NULL;
    }
}

void gl_media_prompt_free(struct gl_media_prompt *mp)
{
    if (!mp)
        return;
    for (int32_t i = 0; mp->media && i < mp->n_media; i++) {
        gl_free(mp->media[i].embd);
        gl_free(mp->media[i].patches);
    }
    gl_free(mp->media);
    gl_free(mp->ids);
    memset(mp, 0, sizeof *mp);
}

static const char *kind_name(enum gl_media_kind k)
{
    return k == GL_MEDIA_VIDEO ? "video" : "image";
}

// <|patch|> stands for an image, <|video|> for a video (the chat template's placeholders).
static int placeholder_kind(int32_t id)
{
    return id == GL_TOK_PATCH ? GL_MEDIA_IMAGE : id == GL_VIDEO_TOK_VIDEO ? GL_MEDIA_VIDEO : -1;
}

// Checks the arguments and the placeholders: one per part, in order, of the part's kind.
static gl_status check_expand(const struct gl_model *m, const struct gl_tokenizer *tok,
                              const int32_t *ids, int32_t n_ids, const struct gl_media_part *parts,
                              int32_t n_parts, const struct gl_media_params *p, struct gl_err *err)
{
    if (!m || n_ids < 0 || (n_ids > 0 && !ids) || n_parts < 0 || (n_parts > 0 && !parts))
        return gl_err_set(err, GL_E_INVAL, "media: bad arguments (%d ids, %d parts)", n_ids,
                          n_parts);
    if (n_parts > p->max_parts)
        return gl_err_set(err, GL_E_LIMIT,
                          "media: part %d: over the limit of %d images and videos per prompt",
                          p->max_parts, p->max_parts);
    int32_t k = 0;
    for (int32_t i = 0; i < n_ids; i++) {
        const int kind = placeholder_kind(ids[i]);
        if (kind < 0)
            continue;
        if (k >= n_parts)
            return gl_err_set(err, GL_E_INVAL,
                              "media: placeholder %d (%s) has no part (the prompt has more "
                              "<|patch|> and <|video|> placeholders than the %d parts given)",
                              k, kind_name((enum gl_media_kind)kind), n_parts);
        if (kind != (int)parts[k].kind)
            return gl_err_set(
                err, GL_E_INVAL, "media: part %d (%s): its placeholder is %s, which stands for %s",
                k, kind_name(parts[k].kind), kind == GL_MEDIA_VIDEO ? "<|video|>" : "<|patch|>",
                kind == GL_MEDIA_VIDEO ? "a video" : "an image");
        if (parts[k].kind == GL_MEDIA_VIDEO && !tok)
            return gl_err_set(err, GL_E_INVAL,
                              "media: part %d (video): no tokenizer for its timestamps", k);
        k++;
    }
    if (k < n_parts)
        return gl_err_set(err, GL_E_INVAL,
                          "media: part %d (%s): no placeholder for it (the prompt has %d, %d "
                          "parts were given)",
                          k, kind_name(parts[k].kind), k, n_parts);
    struct gl_err inner = {0};
    gl_status st = n_parts > 0 ? check_tower(m, &inner) : GL_OK;
    if (st != GL_OK)
        return gl_err_set(err, st, "media: part 0 (%s): %.400s", kind_name(parts[0].kind),
                          inner.msg);
    for (int32_t i = 0; i < n_parts; i++) // an image-only tower (summed patch kernel) and a video
        if (parts[i].kind == GL_MEDIA_VIDEO && gl_model_vision_video(m))
            return gl_err_set(err, GL_E_UNSUPPORTED, "media: part %d (video): %s", i,
                              gl_model_vision_video(m));
    return GL_OK;
}

// The expanded prompt as it grows: out->ids / out->media with their capacities.
struct build {
    struct gl_media_prompt *out;
    int64_t cap_ids;
    int32_t cap_media;
};

// Appends count ids: src[0..count) or, with src NULL, count copies of id.
static gl_status push_ids(struct build *b, const int32_t *src, int32_t id, int64_t count,
                          struct gl_err *err)
{
    struct gl_media_prompt *o = b->out;
    const int64_t need = (int64_t)o->n_ids + count;
    if (need > INT32_MAX)
        return gl_err_set(err, GL_E_LIMIT, "the expanded prompt has over %d tokens", INT32_MAX);
    if (need > b->cap_ids) {
        int64_t cap = b->cap_ids > 0 ? b->cap_ids : 256;
        while (cap < need)
            cap *= 2;
        int32_t *ids = gl_realloc(o->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return gl_err_set(err, GL_E_NOMEM, "no memory for a %lld-token prompt",
                              (long long)need);
        o->ids = ids;
        b->cap_ids = cap;
    }
    for (int64_t i = 0; i < count; i++)
        o->ids[o->n_ids++] = src ? src[i] : id;
    return GL_OK;
}

// Appends e (its rows start at the next id) and count soft tokens tok for it. Takes e->embd: on
// failure it is freed.
static gl_status push_rows(struct build *b, struct gl_request_media e, int32_t tok,
                           struct gl_err *err)
{
    struct gl_media_prompt *o = b->out;
    if (o->n_media == b->cap_media) {
        const int32_t cap = b->cap_media > 0 ? 2 * b->cap_media : 4;
        struct gl_request_media *a = gl_realloc(o->media, (size_t)cap * sizeof *a);
        if (!a) {
            gl_free(e.embd);
            gl_free(e.patches);
            return gl_err_set(err, GL_E_NOMEM, "no memory for %d soft-token runs", (int)cap);
        }
        o->media = a;
        b->cap_media = cap;
    }
    e.pos = o->n_ids;
    o->media[o->n_media++] = e; // gl_media_prompt_free owns the rows from here
    return push_ids(b, NULL, tok, e.n_rows, err);
}

// <|image_start|> <|patch|> x N <|image_end|> with the image's N rows.
static gl_status expand_image(const struct gl_model *m, struct gl_pool *pool,
                              const struct gl_media_part *part, const struct gl_media_params *p,
                              struct build *b, struct gl_err *err)
{
    struct gl_request_media e;
    gl_status st = gl_media_encode(m, pool, part, p, &e, NULL, err);
    if (st == GL_OK)
        st = push_ids(b, NULL, GL_TOK_IMAGE_START, 1, err);
    if (st == GL_OK)
        st = push_rows(b, e, GL_TOK_PATCH, err);
    else {
        gl_free(e.embd);
        gl_free(e.patches);
    }
    if (st == GL_OK)
        st = push_ids(b, NULL, GL_TOK_IMAGE_END, 1, err);
    return st;
}

// The video's layout (gl_video_prompt_layout) with each temporal group's gh * gw rows, each group
// encoded on its own from its patch vectors.
static gl_status expand_video(const struct gl_model *m, const struct gl_tokenizer *tok,
                              struct gl_pool *pool, const struct gl_media_part *part,
                              const struct gl_media_params *p, struct build *b, struct gl_err *err)
{
    struct gl_video own = {0};
    const struct gl_video *v = part->clip;
    gl_status st = GL_OK;
    if (!v) {
        if (!part->data)
            return gl_err_set(err, GL_E_INVAL, "no video data");
        if ((st = gl_video_preprocess(part->data, part->n, &p->video_limits, &p->video, &own,
                                      err)) != GL_OK)
            return st;
        v = &own;
    }
    float *patches = NULL;
    size_t n_patches = 0;
    struct gl_video_piece *pc = NULL;
    const int groups = v->n_frames / GL_VIDEO_TEMPORAL;
    const int64_t rows = (int64_t)v->grid.gh * v->grid.gw;
    const int64_t group_patches = 4 * rows; // (2gh) x (2gw) patch vectors per group
    const size_t frame_bytes = (size_t)v->width * (size_t)v->height * 3;
    if ((st = gl_video_patchify(v, &patches, &n_patches, err)) != GL_OK)
        goto done;
    GL_ASSERT(n_patches == (size_t)(groups * group_patches));
    const int n_pc = gl_video_prompt_layout(v->timestamps, groups, (int)rows, NULL, 0);
    GL_ASSERT(n_pc > 0);
    if (!(pc = gl_malloc((size_t)n_pc * sizeof *pc))) {
        st = gl_err_set(err, GL_E_NOMEM, "no memory for the prompt layout");
        goto done;
    }
    GL_ASSERT(gl_video_prompt_layout(v->timestamps, groups, (int)rows, pc, n_pc) == n_pc);
    int g = 0;
    for (int i = 0; i < n_pc && st == GL_OK; i++) {
        if (pc[i].kind == GL_VIDEO_PIECE_TEXT) {
            gl_token *t = NULL;
            size_t nt = 0;
            st = gl_tokenizer_encode(tok, pc[i].text, strlen(pc[i].text), 0, 0, &t, &nt, err);
            if (st == GL_OK)
                st = push_ids(b, t, 0, (int64_t)nt, err);
            gl_free(t);
        } else if (pc[i].token != GL_VIDEO_TOK_VIDEO) {
            st = push_ids(b, NULL, pc[i].token, pc[i].count, err);
        } else {
            GL_ASSERT(g < groups && pc[i].count == rows);
            struct gl_request_media e = {.n_rows = (int32_t)rows};
            // a group is frames 2g and 2g + 1, adjacent in v->rgb
            e.digest = pixels_digest(DIGEST_VIDEO, &v->grid, v->width, v->height,
                                     v->rgb + (size_t)(GL_VIDEO_TEMPORAL * g) * frame_bytes,
                                     GL_VIDEO_TEMPORAL * frame_bytes);
            const float *gp = patches + (size_t)(g * group_patches) * GL_IMAGE_PATCH_DIM;
            if (p->defer) { // the group's own copy of its patch vectors, for the engine
                const size_t nb = (size_t)group_patches * GL_IMAGE_PATCH_DIM * sizeof(float);
                e.gh = v->grid.gh;
                e.gw = v->grid.gw;
                st = (e.patches = gl_malloc(nb))
                         ? GL_OK
                         : gl_err_set(err, GL_E_NOMEM, "no memory for a group's patches");
                if (st == GL_OK)
                    memcpy(e.patches, gp, nb);
            } else {
                st = encode_rows(m, pool, p, e.digest, &v->grid, gp, &e.embd, err);
            }
            if (st != GL_OK)
                break;
            st = push_rows(b, e, GL_VIDEO_TOK_VIDEO, err);
            g++;
        }
    }
    GL_ASSERT(st != GL_OK || g == groups);
done:
    gl_free(pc);
    gl_free(patches);
    gl_video_free(&own);
    return st;
}

gl_status gl_media_expand(const struct gl_model *m, const struct gl_tokenizer *tok,
                          struct gl_pool *pool, const int32_t *ids, int32_t n_ids,
                          const struct gl_media_part *parts, int32_t n_parts,
                          const struct gl_media_params *p, struct gl_media_prompt *out,
                          struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    const struct gl_media_params dp = gl_media_default_params();
    p = p ? p : &dp;
    gl_status st = check_expand(m, tok, ids, n_ids, parts, n_parts, p, err);
    if (st != GL_OK)
        return st;
    if (n_parts > 0 && !pool && !p->defer)
        return gl_err_set(err, GL_E_INVAL, "media: no thread pool for the encoder");
    struct build b = {.out = out};
    int32_t k = 0;
    for (int32_t i = 0; i < n_ids && st == GL_OK; i++) {
        if (placeholder_kind(ids[i]) < 0) {
            st = push_ids(&b, NULL, ids[i], 1, err);
            continue;
        }
        struct gl_err inner = {0};
        const struct gl_media_part *pt = &parts[k];
        st = pt->kind == GL_MEDIA_VIDEO ? expand_video(m, tok, pool, pt, p, &b, &inner)
                                        : expand_image(m, pool, pt, p, &b, &inner);
        if (st != GL_OK)
            gl_err_set(err, st, "media: part %d (%s): %.400s", (int)k, kind_name(pt->kind),
                       inner.msg);
        k++;
    }
    if (st == GL_OK && !out->ids) // an empty prompt still gets an array
        st = (out->ids = gl_malloc(sizeof *out->ids))
                 ? GL_OK
                 : gl_err_set(err, GL_E_NOMEM, "media: no memory");
    if (st != GL_OK)
        gl_media_prompt_free(out);
    return st;
}
