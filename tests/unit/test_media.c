// SPDX-License-Identifier: MIT
// media + vision loading + soft tokens through the forward pass and the engine, on a micro HF
// folder written here: text vocab 200096 (so the real <|image_start|> / <|patch|> /
// <|image_end|> ids exist), E 64, H 4, Hkv 2, D 16, F 96, 4 layers, window 8; vision hidden 32,
// 2 heads of 16, FFN 64, 2 layers, 4x4 positions, adapter 64, projection to E; random weights
// (F32, embedding table and head BF16). Checks: vision_config parsing and binding (a text-only
// folder has no tower, a misshapen tensor is named, an activation the encoder lacks refuses only
// a folder that has the tower); the <|patch|> expansion for 1 and 3 images and its errors by
// image index; injected rows equal to token rows give the token's logits bit for bit, different
// images give different logits, the same image twice the same; the engine's greedy output for
// an image request is identical alone, batched with others, under a 4-token step budget
// (chunks cut through the image) and under preemption; the prefix cache reuses an image's
// blocks for the same image and never for a different image with the same ids; n = 2 choices
// share the image's blocks; cancel mid-prefill and engine teardown free rows and pages; bad
// media are refused by index (the engine frees their rows).
#include "engine/engine.h"
#include "media/media.h"
#include "png_fixture.h"
#include "safetensors/safetensors.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_V = 200096, T_E = 64, T_H = 4, T_HKV = 2, T_D = 16, T_F = 96, T_L = 4, T_CTX = 512 };
enum { V_H = 32, V_HEADS = 2, V_F = 64, V_L = 2, V_POS = 4, V_AD = 64, PATCH_DIM = 1176 };
enum { MAX_OUT = 16 };

static char g_dir[128], g_dir_text[128];
static const char *g_act = "gelu"; // vision_config.hidden_act of the next write_folder
static struct gl_model *g_model;
static struct gl_pool *g_pool;

// ---- the micro folder ----

struct tdesc {
    char name[112];
    enum gl_safetensors_dtype dtype;
    int64_t shape[2]; // HF order; shape[0] == 0: 1-D [shape[1]]
    float base, scale;
};
static struct tdesc g_t[128];
static int g_nt;

static void add_t(enum gl_safetensors_dtype dt, int64_t rows, int64_t cols, float base, float scale,
                  const char *name)
{
    struct tdesc *d = &g_t[g_nt++];
    GL_ASSERT(g_nt <= (int)(sizeof g_t / sizeof g_t[0]));
    snprintf(d->name, sizeof d->name, "%s", name);
    d->dtype = dt;
    d->shape[0] = rows;
    d->shape[1] = cols;
    d->base = base;
    d->scale = scale;
}

// Uniform in [-1, 1) from (tensor, element).
static float hval(int64_t ti, int64_t i)
{
    uint64_t x = (uint64_t)(ti + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static gl_status fill(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                      struct gl_err *err)
{
    (void)ctx;
    (void)err;
    const struct tdesc *d = &g_t[ti];
    const int64_t cols = d->shape[1];
    for (int64_t i = 0; i < n_rows * cols; i++) {
        float v = d->base + d->scale * hval(ti, row0 * cols + i);
        if (d->dtype == GL_SAFETENSORS_DTYPE_F32)
            ((float *)dst)[i] = v;
        else
            ((uint16_t *)dst)[i] = gl_f32_to_bf16(v);
    }
    return GL_OK;
}

static void text_tensors(int64_t vocab)
{
    const enum gl_safetensors_dtype F = GL_SAFETENSORS_DTYPE_F32, B = GL_SAFETENSORS_DTYPE_BF16;
    const char *lm = "model.language_model.";
    char f[112];
    add_t(B, vocab, T_E, 0.0f, 1.0f, "model.language_model.embed_tokens.weight");
    add_t(F, 0, T_E, 1.0f, 0.1f, "model.language_model.norm.weight");
    add_t(B, vocab, T_E, 0.0f, 0.5f, "lm_head.weight");
    static const char *const norms[4] = {"input_layernorm", "post_attention_layernorm",
                                         "pre_feedforward_layernorm", "post_feedforward_layernorm"};
    static const struct {
        const char *name;
        int rows, cols;
    } mats[8] = {{"self_attn.q_proj", T_H * T_D, T_E},
                 {"self_attn.k_proj", T_HKV * T_D, T_E},
                 {"self_attn.v_proj", T_HKV * T_D, T_E},
                 {"self_attn.gate_proj", T_H * T_D, T_E},
                 {"self_attn.o_proj", T_E, T_H * T_D},
                 {"mlp.gate_proj", T_F, T_E},
                 {"mlp.up_proj", T_F, T_E},
                 {"mlp.down_proj", T_E, T_F}};
    for (int l = 0; l < T_L; l++) {
        for (int i = 0; i < 4; i++) { // centered: the loader adds 1
            snprintf(f, sizeof f, "%slayers.%d.%s.weight", lm, l, norms[i]);
            add_t(F, 0, T_E, 0.0f, 0.1f, f);
        }
        for (int i = 0; i < 8; i++) {
            snprintf(f, sizeof f, "%slayers.%d.%s.weight", lm, l, mats[i].name);
            add_t(F, mats[i].rows, mats[i].cols, 0.0f, 0.3f, f);
        }
    }
}

// The §6.6 tensors at the micro vision dims; bad_name: that tensor gets a wrong shape.
static void vision_tensors(const char *bad_name)
{
    const enum gl_safetensors_dtype F = GL_SAFETENSORS_DTYPE_F32;
    char f[112];
#define VG(rows, cols, base, scale, name)                                                          \
    add_t(F, rows, cols, base, scale, "model.vision_tower." name)
#define VL(rows, cols, base, scale, name)                                                          \
    do {                                                                                           \
        snprintf(f, sizeof f, "model.vision_tower.layers.%d.%s", l, name);                         \
        add_t(F, rows, cols, base, scale, f);                                                      \
    } while (0)
    VG(V_H, PATCH_DIM, 0.0f, 0.05f, "patch_embedder.patch_embedding.weight");
    VG(V_POS * V_POS, V_H, 0.0f, 0.5f, "patch_embedder.position_embedding_table.weight");
    VG(0, V_H, 1.0f, 0.1f, "ln_pre.weight");
    VG(0, V_H, 0.0f, 0.1f, "ln_pre.bias");
    for (int l = 0; l < V_L; l++) {
        VL(0, V_H, 1.0f, 0.1f, "norm1.weight");
        VL(0, V_H, 0.0f, 0.1f, "norm1.bias");
        VL(0, V_H, 1.0f, 0.1f, "norm2.weight");
        VL(0, V_H, 0.0f, 0.1f, "norm2.bias");
        VL(V_H, V_H, 0.0f, 0.3f, "attn.q_proj.weight");
        VL(0, V_H, 0.0f, 0.1f, "attn.q_proj.bias");
        VL(V_H, V_H, 0.0f, 0.3f, "attn.k_proj.weight");
        VL(0, V_H, 0.0f, 0.1f, "attn.k_proj.bias");
        VL(V_H, V_H, 0.0f, 0.3f, "attn.v_proj.weight");
        VL(0, V_H, 0.0f, 0.1f, "attn.v_proj.bias");
        VL(V_H, V_H, 0.0f, 0.3f, "attn.proj.weight");
        VL(0, V_H, 0.0f, 0.1f, "attn.proj.bias");
        VL(V_F, V_H, 0.0f, 0.3f, "mlp.fc1.weight");
        VL(0, V_F, 0.0f, 0.1f, "mlp.fc1.bias");
        VL(V_H, V_F, 0.0f, 0.2f, "mlp.fc2.weight");
        VL(0, V_H, 0.0f, 0.1f, "mlp.fc2.bias");
    }
    VG(0, V_H, 1.0f, 0.1f, "ln_post.weight");
    VG(0, V_H, 0.0f, 0.1f, "ln_post.bias");
#undef VG
#undef VL
    add_t(F, V_AD, 4 * V_H, 0.0f, 0.15f, "model.vision_adapter.fc1.weight");
    add_t(F, V_AD, V_AD, 0.0f, 0.2f, "model.vision_adapter.fc2.weight");
    add_t(F, T_E, V_AD, 0.0f, 0.2f, "model.vision_projection.weight");
    for (int i = 0; bad_name && i < g_nt; i++)
        if (!strcmp(g_t[i].name, bad_name))
            g_t[i].shape[1] += 1;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    GL_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

// A folder: text (vocab entries) + optionally the vision tower (bad: a misshapen tensor).
static void write_folder(const char *dir, int64_t vocab, int vision, const char *bad)
{
    mkdir(dir, 0700);
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"muse_glimmer\", \"projector_hidden_size\": %d,\n"
             " \"text_config\": {\"vocab_size\": %lld, \"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"num_key_value_heads\": %d, \"head_dim\": %d, \"max_position_embeddings\": %d, "
             "\"sliding_window\": 8},\n"
             " \"vision_config\": {\"hidden_size\": %d, \"num_hidden_layers\": %d, "
             "\"num_attention_heads\": %d, \"intermediate_size\": %d, \"patch_size\": 14, "
             "\"merge_size\": 2, \"patch_temporal\": 2, \"pos_emb_height\": %d, "
             "\"pos_emb_width\": %d, \"hidden_act\": \"%s\", \"layer_norm_eps\": 1e-5, "
             "\"layer_types\": [\"window_attention\", \"full_attention\"]}}\n",
             V_AD, (long long)vocab, T_E, T_F, T_L, T_H, T_HKV, T_D, T_CTX, V_H, V_L, V_HEADS, V_F,
             V_POS, V_POS, g_act);
    write_file(dir, "config.json", cfg);
    g_nt = 0;
    text_tensors(vocab);
    if (vision)
        vision_tensors(bad);
    struct gl_safetensors_writer *w = gl_safetensors_writer_new();
    struct gl_err err = {0};
    GL_ASSERT(w);
    for (int i = 0; i < g_nt; i++) {
        const struct tdesc *d = &g_t[i];
        const int nd = d->shape[0] ? 2 : 1;
        GL_ASSERT_MSG(gl_safetensors_writer_add_tensor(
                          w, d->name, d->dtype, nd, nd == 2 ? d->shape : &d->shape[1], &err) == i,
                      "%s", err.msg);
    }
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    GL_ASSERT_MSG(gl_safetensors_writer_write(w, p, fill, NULL, &err) == GL_OK, "%s", err.msg);
    gl_safetensors_writer_delete(w);
}

static void remove_folder(const char *dir)
{
    const char *files[3] = {"config.json", "model.safetensors", "generation_config.json"};
    char p[256];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        remove(p);
    }
    rmdir(dir);
}

// ---- images (PNG in memory) ----

// A w x h RGB PNG whose pixels follow pattern `kind` (different kinds: different pixels).
static struct mem pattern_png(int w, int h, int kind)
{
    uint8_t *px = malloc((size_t)w * (size_t)h * 3);
    GL_ASSERT(px);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                px[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] =
                    (uint8_t)(kind == 0   ? x * 2 + c * 60
                              : kind == 1 ? (x ^ y) * 3 + c * 40
                                          : 255 - y * 2 - c * 30);
    struct mem m = make_png(w, h, PNG_COLOR_TYPE_RGB, px);
    free(px);
    return m;
}

// Image fixtures: A and C are 112x84 (grid 3 x 4 = 12 rows) with different pixels; B is 56x56
// (2 x 2 = 4 rows).
static struct mem g_png_a, g_png_b, g_png_c;

static struct gl_media_part img_of(const struct mem *m)
{
    return (struct gl_media_part){.data = m->p, .n = m->n};
}

// Expands ids with the given images (asserting success).
static void expand(const int32_t *ids, int32_t n, const struct mem *const *imgs, int32_t n_img,
                   struct gl_media_prompt *out)
{
    struct gl_media_part im[4];
    for (int32_t i = 0; i < n_img; i++)
        im[i] = img_of(imgs[i]);
    struct gl_err err = {0};
    gl_status st = gl_media_expand(g_model, NULL, g_pool, ids, n, im, n_img, NULL, out, &err);
    GL_ASSERT_MSG(st == GL_OK, "expand: %s", err.msg);
}

// The same with deferred encoding: each run carries its patches for the engine's encoder.
static void expand_deferred(const int32_t *ids, int32_t n, const struct mem *const *imgs,
                            int32_t n_img, struct gl_media_prompt *out)
{
    struct gl_media_part im[4];
    for (int32_t i = 0; i < n_img; i++)
        im[i] = img_of(imgs[i]);
    struct gl_media_params p = gl_media_default_params();
    p.defer = 1;
    struct gl_err err = {0};
    gl_status st = gl_media_expand(g_model, NULL, NULL, ids, n, im, n_img, &p, out, &err);
    GL_ASSERT_MSG(st == GL_OK, "expand: %s", err.msg);
    for (int32_t i = 0; i < out->n_media; i++)
        GL_ASSERT(!out->media[i].embd && out->media[i].patches &&
                  out->media[i].gh * out->media[i].gw == out->media[i].n_rows);
}

// ---- tests ----

TEST(test_vision_load)
{
    const struct gl_vision_config *c = gl_model_vision_config(g_model);
    REQUIRE(c && gl_model_vision(g_model));
    CHECK(c->hidden == V_H && c->n_heads == V_HEADS && c->head_dim == V_H / V_HEADS);
    CHECK(c->n_layers == V_L && c->ffn == V_F && c->pos_h == V_POS && c->pos_w == V_POS);
    CHECK(c->adapter == V_AD && c->out_dim == T_E && c->merge == 2 && c->patch_size == 14);
    CHECK(c->full_every == 4 && c->rope_theta == 10000.0f && c->ln_eps == 1e-5f);
    const struct gl_vision_weights *w = gl_model_vision(g_model);
    CHECK(w->patch.type == GL_TYPE_F32 && w->layers && w->layers[1].fc2_b && w->projection.data);
    // Text-only folder (vision_config present, no tensors): no tower; media refuses by index.
    write_folder(g_dir_text, 64, 0, NULL);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, g_dir_text, &mp, &err) == GL_OK);
    CHECK(!gl_model_vision(m) && !gl_model_vision_config(m));
    const int32_t ids[3] = {1, GL_TOK_PATCH, 2};
    struct gl_media_part im = img_of(&g_png_b);
    struct gl_media_prompt mpr;
    CHECK(gl_media_expand(m, NULL, g_pool, ids, 3, &im, 1, NULL, &mpr, &err) == GL_E_UNSUPPORTED);
    CHECKF(strstr(err.msg, "part 0 (image)") && strstr(err.msg, "no vision tower"), "%s", err.msg);
    CHECK(mpr.ids == NULL && mpr.media == NULL);
    gl_model_delete(m);
    // A misshapen vision tensor is named.
    write_folder(g_dir_text, 64, 1, "model.vision_tower.layers.1.mlp.fc1.weight");
    CHECK(gl_model_open(&m, g_dir_text, &mp, &err) == GL_E_FORMAT && m == NULL);
    CHECKF(strstr(err.msg, "layers.1.mlp.fc1.weight"), "%s", err.msg);
    // An activation the encoder lacks: a text-only folder still loads, one with the tower's
    // tensors is refused naming the key.
    g_act = "gelu_pytorch_tanh";
    write_folder(g_dir_text, 64, 0, NULL);
    REQUIRE(gl_model_open(&m, g_dir_text, &mp, &err) == GL_OK);
    CHECK(!gl_model_vision(m));
    gl_model_delete(m);
    write_folder(g_dir_text, 64, 1, NULL);
    CHECK(gl_model_open(&m, g_dir_text, &mp, &err) == GL_E_UNSUPPORTED && m == NULL);
    CHECKF(strstr(err.msg, "hidden_act"), "%s", err.msg);
    g_act = "gelu";
    remove_folder(g_dir_text);
}

TEST(test_expand_one_and_two)
{
    // One image (B: 2 x 2 = 4 rows).
    const int32_t ids1[4] = {GL_TOK_BOS, 11, GL_TOK_PATCH, 12};
    const struct mem *b[1] = {&g_png_b};
    struct gl_media_prompt mp;
    expand(ids1, 4, b, 1, &mp);
    const int32_t want1[9] = {GL_TOK_BOS,
                              11,
                              GL_TOK_IMAGE_START,
                              GL_TOK_PATCH,
                              GL_TOK_PATCH,
                              GL_TOK_PATCH,
                              GL_TOK_PATCH,
                              GL_TOK_IMAGE_END,
                              12};
    REQUIRE(mp.n_ids == 9 && mp.n_media == 1);
    CHECK(memcmp(mp.ids, want1, sizeof want1) == 0);
    CHECK(mp.media[0].pos == 3 && mp.media[0].n_rows == 4 && mp.media[0].embd);
    uint64_t digest_b = mp.media[0].digest;
    gl_media_prompt_free(&mp);
    CHECK(mp.ids == NULL && mp.n_media == 0);
    // Two images (A: 3 x 4 = 12 rows, then B), adjacent placeholders included.
    const int32_t ids2[5] = {GL_TOK_BOS, GL_TOK_PATCH, 7, GL_TOK_PATCH, GL_TOK_PATCH};
    const struct mem *abb[3] = {&g_png_a, &g_png_b, &g_png_b};
    expand(ids2, 5, abb, 3, &mp);
    REQUIRE(mp.n_media == 3 && mp.n_ids == 5 + 13 + 5 + 5);
    CHECK(mp.media[0].pos == 2 && mp.media[0].n_rows == 12);
    // Layout: 0 BOS, 1 start, 2..13 A, 14 end, 15 "7", 16 start, 17..20 B, 21 end, 22
    // start, 23..26.
    CHECK(mp.media[1].pos == 17 && mp.media[1].n_rows == 4);
    CHECK(mp.media[2].pos == 23 && mp.media[2].n_rows == 4);
    CHECK(mp.ids[1] == GL_TOK_IMAGE_START && mp.ids[14] == GL_TOK_IMAGE_END && mp.ids[15] == 7);
    CHECK(mp.ids[mp.n_ids - 1] == GL_TOK_IMAGE_END);
    int n_patch = 0;
    for (int32_t i = 0; i < mp.n_ids; i++)
        n_patch += mp.ids[i] == GL_TOK_PATCH;
    CHECK(n_patch == 20);
    // Digest: same pixels, same id; different pixels, different id. Rows: same image, same rows.
    CHECK(mp.media[1].digest == digest_b && mp.media[2].digest == digest_b);
    CHECK(mp.media[0].digest != digest_b);
    CHECK(memcmp(mp.media[1].embd, mp.media[2].embd, 4 * T_E * sizeof(float)) == 0);
    gl_media_prompt_free(&mp);
}

TEST(test_expand_errors)
{
    struct gl_media_prompt mp;
    struct gl_err err = {0};
    const int32_t ids[4] = {GL_TOK_BOS, GL_TOK_PATCH, 5, GL_TOK_PATCH};
    struct gl_media_part im[3] = {img_of(&g_png_a), img_of(&g_png_b), img_of(&g_png_c)};
    CHECK(gl_media_expand(g_model, NULL, g_pool, ids, 4, im, 3, NULL, &mp, &err) == GL_E_INVAL);
    CHECKF(strstr(err.msg, "part 2 (image)"), "%s", err.msg);
    CHECK(gl_media_expand(g_model, NULL, g_pool, ids, 4, im, 1, NULL, &mp, &err) == GL_E_INVAL);
    CHECKF(strstr(err.msg, "placeholder 1"), "%s", err.msg);
    // A corrupt second image is named by its index; nothing stays allocated.
    const uint8_t junk[16] = {0x89, 'P', 'N', 'G', 1, 2, 3};
    im[1] = (struct gl_media_part){.data = junk, .n = sizeof junk};
    CHECK(gl_media_expand(g_model, NULL, g_pool, ids, 4, im, 2, NULL, &mp, &err) != GL_OK);
    CHECKF(strstr(err.msg, "media: part 1 (image):"), "%s", err.msg);
    CHECK(mp.ids == NULL && mp.media == NULL && mp.n_media == 0);
    // Over the image count limit.
    struct gl_media_params p = gl_media_default_params();
    p.max_parts = 1;
    im[1] = img_of(&g_png_b);
    CHECK(gl_media_expand(g_model, NULL, g_pool, ids, 4, im, 2, &p, &mp, &err) == GL_E_LIMIT);
    CHECKF(strstr(err.msg, "part 1"), "%s", err.msg);
    // max_image_tokens caps the grid: A (3 x 4) at most 6 tokens.
    p = gl_media_default_params();
    p.max_image_tokens = 6;
    const int32_t one[1] = {GL_TOK_PATCH};
    REQUIRE(gl_media_expand(g_model, NULL, g_pool, one, 1, im, 1, &p, &mp, &err) == GL_OK);
    CHECKF(mp.media[0].n_rows <= 6 && mp.n_ids == mp.media[0].n_rows + 2, "%d rows",
           mp.media[0].n_rows);
    gl_media_prompt_free(&mp);
    // No images, no placeholders: a plain copy.
    const int32_t txt[3] = {1, 2, 3};
    REQUIRE(gl_media_expand(g_model, NULL, g_pool, txt, 3, NULL, 0, NULL, &mp, &err) == GL_OK);
    CHECK(mp.n_ids == 3 && mp.n_media == 0 && memcmp(mp.ids, txt, sizeof txt) == 0);
    gl_media_prompt_free(&mp);
}

// Logits of the last position of ids with the media rows injected (one gl_batch_seq through a
// fresh f32 cache). embd_override: per-position rows instead (NULL entries: token lookup).
static void forward_last(const int32_t *ids, int32_t n, const struct gl_request_media *md,
                         int32_t n_md, const float *const *embd_override, float *logits)
{
    struct gl_model_ctx *c = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_err err = {0};
    GL_ASSERT(gl_model_ctx_new(&c, g_model, n, 1, T_CTX, &err) == GL_OK);
    GL_ASSERT(gl_kv_cache_new(&kv, &g_model->cfg, T_CTX, &err) == GL_OK);
    struct gl_kv_view views[T_L];
    for (int l = 0; l < T_L; l++)
        views[l] = gl_kv_cache_view(kv, l);
    const float **embd = calloc((size_t)n, sizeof *embd);
    GL_ASSERT(embd);
    for (int32_t i = 0; i < n_md; i++)
        for (int32_t r = 0; r < md[i].n_rows; r++)
            embd[md[i].pos + r] = md[i].embd + (size_t)r * T_E;
    for (int32_t t = 0; embd_override && t < n; t++)
        embd[t] = embd_override[t];
    struct gl_batch_seq sq = {
        .tokens = ids, .n = n, .pos0 = 0, .views = views, .logits_row = 0, .embd = embd};
    GL_ASSERT_MSG(gl_model_forward_batch(c, &sq, 1, logits, &err) == GL_OK, "%s", err.msg);
    free(embd);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(c);
}

TEST(test_soft_rows_reach_forward)
{
    float *la = malloc(sizeof(float) * T_V * 4), *lc = la + T_V, *la2 = la + 2 * T_V,
          *lt = la + 3 * T_V;
    REQUIRE(la);
    const int32_t ids[5] = {GL_TOK_BOS, 21, GL_TOK_PATCH, 22, 23};
    const struct mem *a[1] = {&g_png_a}, *c[1] = {&g_png_c};
    struct gl_media_prompt pa, pc, pa2;
    expand(ids, 5, a, 1, &pa);
    expand(ids, 5, c, 1, &pc);
    expand(ids, 5, a, 1, &pa2);
    REQUIRE(pa.n_ids == pc.n_ids && memcmp(pa.ids, pc.ids, (size_t)pa.n_ids * 4) == 0);
    forward_last(pa.ids, pa.n_ids, pa.media, 1, NULL, la);
    forward_last(pc.ids, pc.n_ids, pc.media, 1, NULL, lc);
    forward_last(pa2.ids, pa2.n_ids, pa2.media, 1, NULL, la2);
    CHECK(memcmp(la, la2, sizeof(float) * T_V) == 0); // same image: same logits, bit for bit
    double diff = 0.0;
    for (int i = 0; i < T_V; i++)
        diff += fabs((double)la[i] - (double)lc[i]);
    CHECKF(diff > 1e-3, "image A vs C: summed |logit difference| %g", diff);
    // Rows equal to token rows (the BF16 table expanded to f32) reproduce the token lookup.
    const int32_t txt[6] = {GL_TOK_BOS, 5, 900, 77777, 200080, 42};
    float rows[6][T_E];
    const float *ov[6] = {NULL};
    const struct gl_weight *te = &g_model->tok_embd;
    for (int t = 1; t < 5; t++) { // BF16 as written (F32 when GLINT_GGUF_KEEP_QUANT=0 expands it)
        const uint8_t *src = (const uint8_t *)te->data + (size_t)txt[t] * te->row_bytes;
        if (te->type == GL_TYPE_F32)
            memcpy(rows[t], src, sizeof rows[t]);
        else
            gl_kernels_get()->to_float[te->type](src, rows[t], T_E);
        ov[t] = rows[t];
    }
    forward_last(txt, 6, NULL, 0, NULL, lt);
    forward_last(txt, 6, NULL, 0, ov, la2);
    CHECK(memcmp(lt, la2, sizeof(float) * T_V) == 0);
    gl_media_prompt_free(&pa);
    gl_media_prompt_free(&pc);
    gl_media_prompt_free(&pa2);
    free(la);
}

// ---- video ----

// A clip (96x64, 25 fps, 3 s: 6 frames sampled, 3 temporal groups of 2 x 3 merged tokens) through
// the expansion: the §6.4 layout with each "Time: X.Xs" tokenized on its own, one media entry per
// group at its <|video|> run, each group's rows the encoder's output for that group's patch
// vectors (the right slice: group g, not group 0), different groups different digests, the same
// clip preprocessed by the caller the same result; and the errors.
TEST(test_expand_video)
{
    struct gl_err err = {0};
    struct gl_tokenizer *tok = NULL;
    REQUIRE(gl_tokenizer_load_tiktoken(&tok, t_vocab_path(), &err) == GL_OK);
    size_t n = 0;
    uint8_t *clip_bytes = t_read_file("tests/fuzz/corpus/video/testsrc2_96x64_25fps_3s.mp4", &n);
    REQUIRE(clip_bytes);
    struct gl_video v = {0};
    REQUIRE(gl_video_preprocess(clip_bytes, n, NULL, NULL, &v, &err) == GL_OK);
    const int groups = v.n_frames / 2, rows = v.grid.gh * v.grid.gw;
    REQUIRE(groups == 3 && v.grid.gh == 2 && v.grid.gw == 3);

    const int32_t ids[4] = {GL_TOK_BOS, 11, GL_VIDEO_TOK_VIDEO, 12};
    struct gl_media_part part = {.data = clip_bytes, .n = n, .kind = GL_MEDIA_VIDEO};
    struct gl_media_prompt mp, mp2;
    REQUIRE(gl_media_expand(g_model, tok, g_pool, ids, 4, &part, 1, NULL, &mp, &err) == GL_OK);
    // expected ids: BOS 11 <|vid_start|> (Time, <|video|> x rows, sep)... <|vid_end|> 12
    int32_t want[128];
    int nw = 0;
    want[nw++] = GL_TOK_BOS;
    want[nw++] = 11;
    want[nw++] = GL_VIDEO_TOK_START;
    for (int g = 0; g < groups; g++) {
        char text[32];
        gl_video_time_text(v.timestamps[g], text);
        gl_token *t = NULL;
        size_t nt = 0;
        REQUIRE(gl_tokenizer_encode(tok, text, strlen(text), 0, 0, &t, &nt, &err) == GL_OK);
        REQUIRE(nt >= 3 && nw + (int)nt + rows + 3 < 128);
        for (size_t i = 0; i < nt; i++)
            want[nw++] = t[i];
        gl_free(t);
        CHECK(mp.media[g].pos == nw && mp.media[g].n_rows == rows);
        for (int r = 0; r < rows; r++)
            want[nw++] = GL_VIDEO_TOK_VIDEO;
        want[nw++] = g + 1 < groups ? GL_VIDEO_TOK_SEP : GL_VIDEO_TOK_END;
    }
    want[nw++] = 12;
    REQUIRE(mp.n_media == groups);
    CHECKF(mp.n_ids == nw && memcmp(mp.ids, want, sizeof(int32_t) * (size_t)nw) == 0,
           "%d ids, want %d", mp.n_ids, nw);
    // rows: the encoder on each group's own patch vectors
    float *patches = NULL;
    size_t n_patches = 0;
    REQUIRE(gl_video_patchify(&v, &patches, &n_patches, &err) == GL_OK);
    REQUIRE(n_patches == (size_t)(groups * 4 * rows));
    float *want_rows = malloc(sizeof(float) * (size_t)rows * T_E);
    REQUIRE(want_rows);
    for (int g = 0; g < groups; g++) {
        REQUIRE(gl_vision_encode(g_pool, gl_model_vision_config(g_model), gl_model_vision(g_model),
                                 patches + (size_t)g * 4 * rows * GL_IMAGE_PATCH_DIM, 2 * v.grid.gh,
                                 2 * v.grid.gw, want_rows, &err) == GL_OK);
        CHECKF(memcmp(mp.media[g].embd, want_rows, sizeof(float) * (size_t)rows * T_E) == 0,
               "group %d rows", g);
        for (int h = 0; h < g; h++)
            CHECKF(mp.media[g].digest != mp.media[h].digest, "groups %d and %d share a digest", h,
                   g);
    }
    CHECK(memcmp(mp.media[0].embd, mp.media[2].embd, sizeof(float) * (size_t)rows * T_E) != 0);
    // the caller's preprocessed clip: the same prompt
    part = (struct gl_media_part){.kind = GL_MEDIA_VIDEO, .clip = &v};
    REQUIRE(gl_media_expand(g_model, tok, g_pool, ids, 4, &part, 1, NULL, &mp2, &err) == GL_OK);
    CHECK(mp2.n_ids == mp.n_ids && memcmp(mp2.ids, mp.ids, sizeof(int32_t) * (size_t)nw) == 0);
    for (int g = 0; g < groups; g++)
        CHECK(mp2.media[g].digest == mp.media[g].digest &&
              memcmp(mp2.media[g].embd, mp.media[g].embd, sizeof(float) * (size_t)rows * T_E) == 0);
    gl_media_prompt_free(&mp2);
    // an image then a video: both kinds in order
    const int32_t mixed[3] = {GL_TOK_PATCH, 5, GL_VIDEO_TOK_VIDEO};
    struct gl_media_part two[2] = {img_of(&g_png_b), part};
    REQUIRE(gl_media_expand(g_model, tok, g_pool, mixed, 3, two, 2, NULL, &mp2, &err) == GL_OK);
    CHECK(mp2.n_media == 1 + groups && mp2.media[0].pos == 1 && mp2.media[0].n_rows == 4 &&
          mp2.ids[6] == 5 && mp2.ids[7] == GL_VIDEO_TOK_START);
    CHECK(mp2.media[1].digest == mp.media[0].digest); // position does not enter the digest
    gl_media_prompt_free(&mp2);
    // errors: a kind that does not match its placeholder, no tokenizer, an undecodable clip
    const int32_t patch_only[1] = {GL_TOK_PATCH};
    CHECK(gl_media_expand(g_model, tok, g_pool, patch_only, 1, &part, 1, NULL, &mp2, &err) ==
          GL_E_INVAL);
    CHECKF(strstr(err.msg, "part 0 (video)") && strstr(err.msg, "<|patch|>"), "%s", err.msg);
    CHECK(gl_media_expand(g_model, NULL, g_pool, ids, 4, &part, 1, NULL, &mp2, &err) == GL_E_INVAL);
    CHECKF(strstr(err.msg, "tokenizer"), "%s", err.msg);
    uint8_t junk[64] = {0};
    part = (struct gl_media_part){.data = junk, .n = sizeof junk, .kind = GL_MEDIA_VIDEO};
    CHECK(gl_media_expand(g_model, tok, g_pool, ids, 4, &part, 1, NULL, &mp2, &err) != GL_OK);
    CHECKF(strstr(err.msg, "media: part 0 (video): video: "), "%s", err.msg);
    CHECK(mp2.ids == NULL && mp2.media == NULL);
    struct gl_media_params p = gl_media_default_params();
    p.video.max_frames = 2; // one group
    part = (struct gl_media_part){.data = clip_bytes, .n = n, .kind = GL_MEDIA_VIDEO};
    REQUIRE(gl_media_expand(g_model, tok, g_pool, ids, 4, &part, 1, &p, &mp2, &err) == GL_OK);
    CHECK(mp2.n_media == 1 && mp2.media[0].n_rows == rows);
    gl_media_prompt_free(&mp2);
    gl_media_prompt_free(&mp);
    free(want_rows);
    gl_free(patches);
    gl_video_free(&v);
    free(clip_bytes);
    gl_tokenizer_free(tok);
}

// The encode cache: a repeated image or temporal group is a hit whose rows equal the encoder's;
// LRU eviction within the byte budget; rows larger than the budget are never kept.
TEST(test_encode_cache)
{
    struct gl_err err = {0};
    struct gl_media_cache *c = NULL;
    REQUIRE(gl_media_cache_new(1 << 20, &c, &err) == GL_OK);
    struct gl_media_params p = gl_media_default_params();
    p.cache = c;
    const int32_t ids[2] = {GL_TOK_PATCH, GL_TOK_PATCH};
    struct gl_media_part two[2] = {img_of(&g_png_a), img_of(&g_png_a)};
    struct gl_media_prompt ref, mp;
    expand(ids, 1, (const struct mem *[]){&g_png_a}, 1, &ref); // no cache
    REQUIRE(gl_media_expand(g_model, NULL, g_pool, ids, 2, two, 2, &p, &mp, &err) == GL_OK);
    struct gl_media_cache_stats st;
    gl_media_cache_get_stats(c, &st);
    CHECKF(st.misses == 1 && st.hits == 1 && st.entries == 1 && st.bytes == 12 * T_E * 4,
           "misses %llu hits %llu entries %d bytes %zu", (unsigned long long)st.misses,
           (unsigned long long)st.hits, st.entries, st.bytes);
    const size_t nb = sizeof(float) * 12 * T_E;
    CHECK(memcmp(mp.media[0].embd, ref.media[0].embd, nb) == 0);
    CHECK(memcmp(mp.media[1].embd, ref.media[0].embd, nb) == 0);
    CHECK(mp.media[0].embd != mp.media[1].embd); // each run owns its copy
    gl_media_prompt_free(&mp);
    gl_media_cache_free(c);
    // a budget of one A (12 rows): B (4 rows) evicts A, so A misses again
    REQUIRE(gl_media_cache_new(nb, &c, &err) == GL_OK);
    p.cache = c;
    const struct mem *seq[3] = {&g_png_a, &g_png_b, &g_png_a};
    for (int i = 0; i < 3; i++) {
        struct gl_media_part one = img_of(seq[i]);
        REQUIRE(gl_media_expand(g_model, NULL, g_pool, ids, 1, &one, 1, &p, &mp, &err) == GL_OK);
        gl_media_prompt_free(&mp);
    }
    gl_media_cache_get_stats(c, &st);
    CHECKF(st.misses == 3 && st.hits == 0 && st.entries == 1, "misses %llu hits %llu entries %d",
           (unsigned long long)st.misses, (unsigned long long)st.hits, st.entries);
    gl_media_cache_free(c);
    // a budget smaller than one image: nothing is kept
    REQUIRE(gl_media_cache_new(nb - 1, &c, &err) == GL_OK);
    p.cache = c;
    REQUIRE(gl_media_expand(g_model, NULL, g_pool, ids, 2, two, 2, &p, &mp, &err) == GL_OK);
    gl_media_cache_get_stats(c, &st);
    CHECK(st.hits == 0 && st.entries == 0 && st.bytes == 0);
    gl_media_prompt_free(&mp);
    gl_media_prompt_free(&ref);
    gl_media_cache_free(c);
}

// ---- engine ----

struct result {
    int32_t tok[MAX_OUT];
    int32_t n_tok;
    enum gl_finish finish;
    int n_final;
};

static void on_event(void *user, const struct gl_event *ev)
{
    struct result *r = (struct result *)user + ev->index; // n > 1: one result per choice
    for (int32_t i = 0; i < ev->n_tokens && r->n_tok < MAX_OUT; i++)
        r->tok[r->n_tok++] = ev->tokens[i];
    if (ev->finish != GL_FINISH_NONE) {
        r->finish = ev->finish;
        r->n_final++;
    }
}

static struct gl_engine_params eparams(int64_t budget, int seqs, int tokens, int block)
{
    struct gl_engine_params p = gl_engine_default_params(g_model);
    p.kv.dtype = GL_KV_F32;
    p.kv.budget_bytes = budget;
    p.kv.block_size = block;
    p.max_num_seqs = seqs;
    p.max_num_batched_tokens = tokens;
    p.max_model_len = T_CTX;
    p.n_threads = 1;
    p.n_eos = 0; // random weights: let every request run to max_tokens
    return p;
}

// Submits the expanded prompt with a copy of its rows (the engine takes the copy); n choices
// report into r[0..n). Returns the request id.
static uint64_t submit_n(struct gl_engine *e, const struct gl_media_prompt *mp, int32_t max_tok,
                         int32_t n, struct result *r)
{
    struct gl_request_media md[4];
    GL_ASSERT(mp->n_media <= 4);
    for (int32_t i = 0; i < mp->n_media; i++) { // rows, or (deferred) patches
        md[i] = mp->media[i];
        float *src = md[i].patches ? md[i].patches : md[i].embd;
        size_t bytes =
            (size_t)md[i].n_rows * sizeof(float) * (md[i].patches ? 4 * GL_IMAGE_PATCH_DIM : T_E);
        float *copy = gl_malloc(bytes);
        GL_ASSERT(copy);
        memcpy(copy, src, bytes);
        *(md[i].patches ? &md[i].patches : &md[i].embd) = copy;
    }
    struct gl_sample_params sp = gl_sample_default_params();
    sp.temperature = 0.0f;
    sp.max_tokens = max_tok;
    sp.n = n;
    struct gl_request rq = {.prompt = mp->ids,
                            .n_prompt = mp->n_ids,
                            .media = md,
                            .n_media = mp->n_media,
                            .sp = sp,
                            .on_event = on_event,
                            .user = r};
    struct gl_err err = {0};
    uint64_t id = 0;
    GL_ASSERT_MSG(gl_engine_submit(e, &rq, &id, &err) == GL_OK, "submit: %s", err.msg);
    return id;
}

static void submit_media(struct gl_engine *e, const struct gl_media_prompt *mp, int32_t max_tok,
                         struct result *r)
{
    (void)submit_n(e, mp, max_tok, 1, r);
}

static void run_to_end(struct gl_engine *e, struct gl_engine_stats *st)
{
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_engine_run(e, &err) == GL_OK, "run: %s", err.msg);
    gl_engine_stats(e, st);
    GL_ASSERT(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
}

// The workload of the exactness test: 6 prompts, 4 with images (A, C, B+A, A), 2 text only.
enum { N_REQ = 6 };
static void workload(struct gl_media_prompt *mp)
{
    const int32_t p0[6] = {GL_TOK_BOS, 31, 32, GL_TOK_PATCH, 33, 34};
    const int32_t p2[7] = {GL_TOK_BOS, GL_TOK_PATCH, 51, 52, GL_TOK_PATCH, 53, 54};
    const int32_t p4[3] = {GL_TOK_BOS, GL_TOK_PATCH, 70};
    int32_t t1[40], t3[23];
    for (int i = 0; i < 40; i++)
        t1[i] = 1000 + i * 37;
    for (int i = 0; i < 23; i++)
        t3[i] = 5000 + i * 11;
    const struct mem *a[1] = {&g_png_a}, *c[1] = {&g_png_c}, *ba[2] = {&g_png_b, &g_png_a};
    expand(p0, 6, a, 1, &mp[0]);
    expand(t1, 40, NULL, 0, &mp[1]);
    expand(p2, 7, ba, 2, &mp[2]);
    expand(t3, 23, NULL, 0, &mp[3]);
    expand(p4, 3, c, 1, &mp[4]);
    expand(p0, 6, a, 1, &mp[5]);
}

// Runs every request of the workload in one engine (or each alone: alone = 1); res[i].
static void run_workload(const struct gl_media_prompt *mp, int alone, struct gl_engine_params p,
                         struct result *res, struct gl_engine_stats *st)
{
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    for (int i = 0; i < N_REQ; i++) {
        if (!e)
            GL_ASSERT_MSG(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK, "%s", err.msg);
        submit_media(e, &mp[i], 6 + i, &res[i]);
        if (alone) {
            run_to_end(e, st);
            gl_engine_free(e);
            e = NULL;
        }
    }
    if (e) {
        run_to_end(e, st);
        gl_engine_free(e);
    }
}

TEST(test_engine_exact)
{
    struct gl_media_prompt mp[N_REQ];
    workload(mp);
    struct result ref[N_REQ], got[N_REQ];
    struct gl_engine_stats st;
    memset(ref, 0, sizeof ref);
    run_workload(mp, 1, eparams(64 << 20, 8, 256, 16), ref, &st);
    // The engine's first token equals the plain forward pass's greedy choice.
    float *lg = malloc(sizeof(float) * T_V);
    REQUIRE(lg);
    forward_last(mp[0].ids, mp[0].n_ids, mp[0].media, mp[0].n_media, NULL, lg);
    CHECK(ref[0].n_tok == 6 && ref[0].tok[0] == gl_sample_argmax(lg, T_V));
    free(lg);
    for (int i = 0; i < N_REQ; i++)
        CHECK(ref[i].n_tok == 6 + i && ref[i].finish == GL_FINISH_LENGTH && ref[i].n_final == 1);
    // Requests 0 and 5 are the same: same output (5 runs longer).
    CHECK(memcmp(ref[0].tok, ref[5].tok, 6 * sizeof(int32_t)) == 0);
    const struct {
        const char *what;
        int small_pool, seqs, tokens;
    } cases[3] = {{"batched", 0, 8, 256}, {"4-token steps", 0, 4, 4}, {"small KV pool", 1, 6, 12}};
    for (int c = 0; c < 3; c++) {
        struct gl_engine_params p = eparams(64 << 20, cases[c].seqs, cases[c].tokens, 16);
        if (cases[c].small_pool) { // room for about 1.5 of the longest sequences
            struct gl_kv_plan plan;
            struct gl_err err = {0};
            REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 48, &plan, &err) == GL_OK);
            p.kv.budget_bytes = (int64_t)plan.page_bytes * plan.pages_per_seq * 3 / 2;
        }
        memset(got, 0, sizeof got);
        run_workload(mp, 0, p, got, &st);
        int same = 0;
        for (int i = 0; i < N_REQ; i++) {
            int ok = got[i].n_tok == ref[i].n_tok && got[i].n_final == 1 &&
                     memcmp(got[i].tok, ref[i].tok, (size_t)ref[i].n_tok * 4) == 0;
            CHECKF(ok, "%s: request %d differs from running alone", cases[c].what, i);
            same += ok;
        }
        if (cases[c].small_pool)
            CHECKF(st.n_preempted_total > 0, "no preemption (%lld pages)",
                   (long long)st.kv_pages_total);
        printf("  %s: %d/%d identical to alone, %lld steps, %d preemptions, %lld prefix-hit "
               "tokens\n",
               cases[c].what, same, N_REQ, (long long)st.steps, st.n_preempted_total,
               (long long)st.prefix_hit_tokens);
    }
    for (int i = 0; i < N_REQ; i++)
        gl_media_prompt_free(&mp[i]);
}

TEST(test_prefix_cache)
{
    // [BOS 61 62 <start>] [12 soft rows: positions 4..15] [<end> 63..69]: 24 tokens, block 4.
    int32_t ids[11] = {GL_TOK_BOS, 61, 62, GL_TOK_PATCH, 63, 64, 65, 66, 67, 68, 69};
    const struct mem *a[1] = {&g_png_a}, *c[1] = {&g_png_c};
    struct gl_media_prompt pa, pc;
    expand(ids, 11, a, 1, &pa);
    expand(ids, 11, c, 1, &pc);
    REQUIRE(pa.n_ids == 24 && pa.media[0].pos == 4 && pa.media[0].n_rows == 12);
    REQUIRE(memcmp(pa.ids, pc.ids, sizeof(int32_t) * 24) == 0); // same ids, other pixels
    struct gl_engine_params p = eparams(64 << 20, 4, 64, 4);
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    struct result r1 = {0}, r2 = {0}, r3 = {0};
    struct gl_engine_stats s0, s1, s2;
    submit_media(e, &pa, 5, &r1);
    run_to_end(e, &s0);
    submit_media(e, &pa, 5, &r2);
    run_to_end(e, &s1);
    submit_media(e, &pc, 5, &r3);
    run_to_end(e, &s2);
    gl_engine_free(e);
    const int64_t hit_same = s1.prefix_hit_tokens - s0.prefix_hit_tokens;
    const int64_t hit_other = s2.prefix_hit_tokens - s1.prefix_hit_tokens;
    // Same image: whole blocks up to the last prompt token (20 of 24), past the image (16).
    CHECKF(hit_same == 20, "same image reused %lld positions", (long long)hit_same);
    // Other image: only the block before the first soft position (4).
    CHECKF(hit_other == 4, "other image reused %lld positions", (long long)hit_other);
    CHECK(r1.n_tok == 5 && memcmp(r1.tok, r2.tok, sizeof r1.tok) == 0);
    // The other image's output equals it run in a fresh engine (no foreign KV leaked in).
    struct result r4 = {0};
    struct gl_engine_stats s3;
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    submit_media(e, &pc, 5, &r4);
    run_to_end(e, &s3);
    gl_engine_free(e);
    CHECK(r3.n_tok == 5 && memcmp(r3.tok, r4.tok, sizeof r3.tok) == 0);
    printf("  prefix cache: same image reused %lld positions, other image %lld\n",
           (long long)hit_same, (long long)hit_other);
    gl_media_prompt_free(&pa);
    gl_media_prompt_free(&pc);
}

// Rows handed to the engine are freed by it also when it refuses the request (no leak under
// ASan), and bad media are refused by index.
// n = 2 choices of an image request: the second waits for the first's prefill and reuses its
// blocks (media keys included); both equal the request alone. A cancel in the middle of the
// image's prefill frees the rows and every page.
TEST(test_engine_choices_and_cancel)
{
    const int32_t ids[11] = {GL_TOK_BOS, 61, 62, GL_TOK_PATCH, 63, 64, 65, 66, 67, 68, 69};
    const struct mem *a[1] = {&g_png_a};
    struct gl_media_prompt pa;
    expand(ids, 11, a, 1, &pa);
    struct gl_engine_params p = eparams(64 << 20, 4, 8, 4); // 8-token steps: 3 prefill chunks
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    struct result alone = {0}, two[2], cut = {0};
    memset(two, 0, sizeof two);
    struct gl_engine_stats s0, s1, s2;
    submit_media(e, &pa, 5, &alone);
    run_to_end(e, &s0);
    gl_engine_free(e);
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    (void)submit_n(e, &pa, 5, 2, two);
    run_to_end(e, &s1);
    CHECK(two[0].n_tok == 5 && memcmp(two[0].tok, alone.tok, sizeof alone.tok) == 0);
    CHECK(two[1].n_tok == 5 && memcmp(two[1].tok, alone.tok, sizeof alone.tok) == 0);
    CHECKF(s1.prefix_hit_tokens == 20, "choice 1 reused %lld positions",
           (long long)s1.prefix_hit_tokens);
    uint64_t id = submit_n(e, &pa, 5, 1, &cut);
    int n_active = 0;
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK); // 20 positions from the cache
    gl_engine_free(e); // aborts it mid-request: its rows are freed with it
    CHECK(id > 0 && cut.finish == GL_FINISH_ABORT);
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    memset(&cut, 0, sizeof cut);
    id = submit_n(e, &pa, 5, 1, &cut);
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK); // first 8 of 24 positions
    CHECK(gl_engine_cancel(e, id) == 1);
    run_to_end(e, &s2);
    CHECK(cut.finish == GL_FINISH_ABORT && cut.n_final == 1 && cut.n_tok == 0);
    CHECK(s2.kv_pages_used == 0 && s2.n_running == 0);
    gl_engine_free(e);
    gl_media_prompt_free(&pa);
}

// Deferred encoding (engine.h): the workload with patches instead of rows gives the same greedy
// tokens as with the rows media/ computed, batched and in 4-token steps; image A, in flight three
// times (requests 0, 2 and 5), is encoded once.
TEST(test_engine_deferred_exact)
{
    struct gl_media_prompt mp[N_REQ], md[N_REQ];
    workload(mp);
    const int32_t p0[6] = {GL_TOK_BOS, 31, 32, GL_TOK_PATCH, 33, 34};
    const int32_t p2[7] = {GL_TOK_BOS, GL_TOK_PATCH, 51, 52, GL_TOK_PATCH, 53, 54};
    const int32_t p4[3] = {GL_TOK_BOS, GL_TOK_PATCH, 70};
    const struct mem *a[1] = {&g_png_a}, *c[1] = {&g_png_c}, *ba[2] = {&g_png_b, &g_png_a};
    expand_deferred(p0, 6, a, 1, &md[0]);
    expand_deferred(mp[1].ids, mp[1].n_ids, NULL, 0, &md[1]);
    expand_deferred(p2, 7, ba, 2, &md[2]);
    expand_deferred(mp[3].ids, mp[3].n_ids, NULL, 0, &md[3]);
    expand_deferred(p4, 3, c, 1, &md[4]);
    expand_deferred(p0, 6, a, 1, &md[5]);
    for (int i = 0; i < N_REQ; i++) // same ids and digests, no rows
        REQUIRE(md[i].n_ids == mp[i].n_ids && md[i].n_media == mp[i].n_media &&
                memcmp(md[i].ids, mp[i].ids, sizeof(int32_t) * (size_t)mp[i].n_ids) == 0 &&
                (md[i].n_media == 0 || md[i].media[0].digest == mp[i].media[0].digest));
    struct result ref[N_REQ], got[N_REQ];
    struct gl_engine_stats st;
    const int tokens[2] = {256, 4};
    for (int c2 = 0; c2 < 2; c2++) {
        memset(ref, 0, sizeof ref);
        memset(got, 0, sizeof got);
        struct gl_engine_params p = eparams(64 << 20, tokens[c2] < 8 ? 4 : 8, tokens[c2], 16);
        run_workload(mp, 0, p, ref, &st);
        run_workload(md, 0, p, got, &st);
        int same = 0;
        for (int i = 0; i < N_REQ; i++) {
            int ok = got[i].n_tok == ref[i].n_tok && got[i].n_final == 1 && ref[i].n_tok == 6 + i &&
                     memcmp(got[i].tok, ref[i].tok, (size_t)ref[i].n_tok * 4) == 0;
            CHECKF(ok, "%d-token steps: request %d differs from the rows computed by media/",
                   tokens[c2], i);
            same += ok;
        }
        // A (3 times), B, C: 5 lookups, 3 encodes, 2 shared; nothing kept (cache bytes 0)
        CHECKF(st.enc_queries == 5 && st.enc_runs == 3 && st.enc_hits == 2,
               "queries %lld runs %lld hits %lld", (long long)st.enc_queries,
               (long long)st.enc_runs, (long long)st.enc_hits);
        CHECK(st.enc_entries == 0 && st.enc_bytes == 0 && st.enc_pending == 0);
        printf("  deferred, %d-token steps: %d/%d identical, %lld encodes for %lld parts\n",
               tokens[c2], same, N_REQ, (long long)st.enc_runs, (long long)st.enc_queries);
    }
    for (int i = 0; i < N_REQ; i++) {
        gl_media_prompt_free(&mp[i]);
        gl_media_prompt_free(&md[i]);
    }
}

// A video's temporal groups take the same path: deferred, each group carries its own patch
// vectors (and the digest of the rows path); the engine's greedy tokens equal those from the rows
// media/ computed, and the 3 groups are 3 encodes.
TEST(test_engine_deferred_video)
{
    struct gl_err err = {0};
    struct gl_tokenizer *tok = NULL;
    REQUIRE(gl_tokenizer_load_tiktoken(&tok, t_vocab_path(), &err) == GL_OK);
    size_t n = 0;
    uint8_t *clip_bytes = t_read_file("tests/fuzz/corpus/video/testsrc2_96x64_25fps_3s.mp4", &n);
    REQUIRE(clip_bytes);
    struct gl_video v = {0};
    REQUIRE(gl_video_preprocess(clip_bytes, n, NULL, NULL, &v, &err) == GL_OK);
    float *patches = NULL;
    size_t n_patches = 0;
    REQUIRE(gl_video_patchify(&v, &patches, &n_patches, &err) == GL_OK);
    const int32_t ids[4] = {GL_TOK_BOS, 11, GL_VIDEO_TOK_VIDEO, 12};
    struct gl_media_part part = {.kind = GL_MEDIA_VIDEO, .clip = &v};
    struct gl_media_prompt mr, md;
    REQUIRE(gl_media_expand(g_model, tok, g_pool, ids, 4, &part, 1, NULL, &mr, &err) == GL_OK);
    struct gl_media_params dp = gl_media_default_params();
    dp.defer = 1;
    REQUIRE(gl_media_expand(g_model, tok, NULL, ids, 4, &part, 1, &dp, &md, &err) == GL_OK);
    REQUIRE(md.n_media == 3 && md.n_ids == mr.n_ids);
    const size_t gp = (size_t)md.media[0].n_rows * 4 * GL_IMAGE_PATCH_DIM;
    for (int g = 0; g < 3; g++)
        CHECK(!md.media[g].embd && md.media[g].digest == mr.media[g].digest &&
              md.media[g].pos == mr.media[g].pos &&
              memcmp(md.media[g].patches, patches + (size_t)g * gp, gp * sizeof(float)) == 0);
    struct gl_engine_params p = eparams(64 << 20, 4, 16, 16); // chunks cut through the groups
    struct gl_engine *e = NULL;
    struct result ra = {0}, rb = {0};
    struct gl_engine_stats st;
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    submit_media(e, &mr, 6, &ra);
    run_to_end(e, &st);
    gl_engine_free(e);
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    submit_media(e, &md, 6, &rb);
    run_to_end(e, &st);
    gl_engine_free(e);
    CHECK(ra.n_tok == 6 && rb.n_tok == 6 && memcmp(ra.tok, rb.tok, sizeof ra.tok) == 0);
    CHECKF(st.enc_runs == 3 && st.enc_queries == 3, "%lld encodes", (long long)st.enc_runs);
    gl_media_prompt_free(&mr);
    gl_media_prompt_free(&md);
    gl_free(patches);
    gl_video_free(&v);
    free(clip_bytes);
    gl_tokenizer_free(tok);
}

// A gate the encoder worker waits at (engine params encoder_hook): the test holds it mid-encode.
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open;
} g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void gate_hook(void *user)
{
    (void)user;
    pthread_mutex_lock(&g_gate.mu);
    g_gate.entered++;
    pthread_cond_broadcast(&g_gate.cv);
    while (!g_gate.open)
        pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    pthread_mutex_unlock(&g_gate.mu);
}

static void gate_wait_entered(int n)
{
    pthread_mutex_lock(&g_gate.mu);
    while (g_gate.entered < n)
        pthread_cond_wait(&g_gate.cv, &g_gate.mu);
    pthread_mutex_unlock(&g_gate.mu);
}

static void gate_set(int open)
{
    pthread_mutex_lock(&g_gate.mu);
    g_gate.open = open;
    if (!open)
        g_gate.entered = 0;
    pthread_cond_broadcast(&g_gate.cv);
    pthread_mutex_unlock(&g_gate.mu);
}

// While image A is held in the encoder: a text request decodes to its end, the image request is
// not prefilled past its placeholder, a second request with A shares the job (one encode) and
// C waits for the budget (12 rows: A alone). Then: released, both A requests give the tokens of
// the precomputed rows. Second round: all three cancelled mid-encode return every KV page and
// every encoder entry (the running job's when the worker finishes it).
TEST(test_engine_encoder_sched_cancel)
{
    const int32_t ids[11] = {GL_TOK_BOS, 61, 62, GL_TOK_PATCH, 63, 64, 65, 66, 67, 68, 69};
    const struct mem *a[1] = {&g_png_a}, *c[1] = {&g_png_c};
    struct gl_media_prompt pa, pad, pcd, txt;
    expand(ids, 11, a, 1, &pa);
    expand_deferred(ids, 11, a, 1, &pad);
    expand_deferred(ids, 11, c, 1, &pcd);
    int32_t t[30];
    for (int i = 0; i < 30; i++)
        t[i] = 700 + i * 13;
    expand(t, 30, NULL, 0, &txt);
    REQUIRE(pad.media[0].n_rows == 12 && pad.media[0].pos == 4);
    struct gl_engine_params p = eparams(64 << 20, 4, 64, 4);
    p.max_num_encoder_input_tokens = 12;
    p.encoder_hook = gate_hook;
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    struct result ref = {0}, txt_ref = {0};
    struct gl_engine_stats s;
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    submit_media(e, &pa, 5, &ref);
    submit_media(e, &txt, 8, &txt_ref);
    run_to_end(e, &s);
    gl_engine_free(e);

    for (int round = 0; round < 2; round++) {
        gate_set(0);
        REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
        struct gl_kv_pool *pool = gl_engine_kv_pool(e);
        const int64_t free0 = gl_kv_pool_free_pages(pool);
        struct result r1 = {0}, r2 = {0}, r3 = {0}, rt = {0};
        const uint64_t id1 = submit_n(e, &pad, 5, 1, &r1);
        int n_active = 0;
        REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK); // BOS..<|image_start|>; A goes
        gate_wait_entered(1);                                 // A is in the encoder now
        const uint64_t id2 = submit_n(e, &pad, 5, 1, &r2);
        const uint64_t id3 = submit_n(e, &pcd, 5, 1, &r3);
        if (round == 0)
            submit_media(e, &txt, 8, &rt);
        for (int i = 0; i < 50 && rt.n_final == 0 && round == 0; i++)
            REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
        if (round == 0) { // text ran to its end beside the held encode
            CHECK(rt.n_final == 1 && rt.n_tok == 8 &&
                  memcmp(rt.tok, txt_ref.tok, sizeof rt.tok) == 0);
        } else {
            REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
        }
        gl_engine_stats(e, &s);
        CHECK(r1.n_tok == 0 && r2.n_tok == 0 && r3.n_tok == 0);
        CHECKF(s.enc_queries == 3 && s.enc_hits == 1 && s.enc_entries == 2 && s.enc_pending == 2,
               "queries %lld hits %lld entries %lld pending %lld", (long long)s.enc_queries,
               (long long)s.enc_hits, (long long)s.enc_entries, (long long)s.enc_pending);
        if (round == 0) {
            gate_set(1);
            run_to_end(e, &s);
            CHECK(r1.n_final == 1 && r1.n_tok == 5 && memcmp(r1.tok, ref.tok, sizeof ref.tok) == 0);
            CHECK(r2.n_final == 1 && r2.n_tok == 5 && memcmp(r2.tok, ref.tok, sizeof ref.tok) == 0);
            CHECK(r3.n_final == 1 && r3.n_tok == 5);
            CHECKF(s.enc_runs == 2, "%lld encodes for A, A, C", (long long)s.enc_runs);
        } else {
            CHECK(gl_engine_cancel(e, id1) && gl_engine_cancel(e, id2) && gl_engine_cancel(e, id3));
            REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
            gl_engine_stats(e, &s);
            // C (queued) is gone; A (running, nobody holds it) goes when the worker is done
            CHECKF(s.enc_entries == 1 && n_active == 0, "entries %lld active %d",
                   (long long)s.enc_entries, n_active);
            CHECK(gl_kv_pool_free_pages(pool) == free0 && s.kv_pages_used == 0);
            gate_set(1);
            for (int i = 0; i < 200 && s.enc_entries > 0; i++) {
                struct timespec ts = {0, 5000000};
                nanosleep(&ts, NULL);
                REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
                gl_engine_stats(e, &s);
            }
            CHECK(s.enc_entries == 0 && s.enc_bytes == 0 && s.enc_runs == 1);
            CHECK(gl_kv_pool_free_pages(pool) == free0 && gl_kv_pool_audit(pool) == 0);
            CHECK(r1.finish == GL_FINISH_ABORT && r2.finish == GL_FINISH_ABORT &&
                  r3.finish == GL_FINISH_ABORT && r1.n_final == 1 && r3.n_final == 1);
        }
        gl_engine_free(e);
    }
    gate_set(1);
    gl_media_prompt_free(&pa);
    gl_media_prompt_free(&pad);
    gl_media_prompt_free(&pcd);
    gl_media_prompt_free(&txt);
}

TEST(test_engine_refuses_bad_media)
{
    struct gl_engine_params p = eparams(16 << 20, 4, 64, 16);
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, NULL, &p, &err) == GL_OK);
    const int32_t ids[6] = {GL_TOK_BOS, 1, 2, 3, 4, 5};
    struct gl_request_media md[2] = {{.pos = 3, .n_rows = 2, .embd = gl_malloc(2 * T_E * 4)},
                                     {.pos = 4, .n_rows = 1, .embd = gl_malloc(T_E * 4)}};
    struct gl_request rq = {
        .prompt = ids, .n_prompt = 6, .media = md, .n_media = 2, .sp = gl_sample_default_params()};
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_INVAL); // overlapping
    CHECKF(strstr(err.msg, "media 1"), "%s", err.msg);
    gl_engine_free(e);
}

static void cleanup(void)
{
    free(g_png_a.p);
    free(g_png_b.p);
    free(g_png_c.p);
    gl_pool_delete(g_pool);
    gl_model_delete(g_model);
    remove_folder(g_dir);
    remove_folder(g_dir_text);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/glint_test_media_%d", (int)getpid());
    snprintf(g_dir_text, sizeof g_dir_text, "/tmp/glint_test_media_text_%d", (int)getpid());
    write_folder(g_dir, T_V, 1, NULL);
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    GL_ASSERT_MSG(gl_model_open(&g_model, g_dir, &mp, &err) == GL_OK, "%s", err.msg);
    g_pool = gl_pool_new(2);
    GL_ASSERT(g_pool);
    g_png_a = pattern_png(112, 84, 0);
    g_png_b = pattern_png(56, 56, 1);
    g_png_c = pattern_png(112, 84, 2);
    atexit(cleanup);
    RUN_TESTS(test_vision_load, test_expand_one_and_two, test_expand_errors, test_expand_video,
              test_encode_cache, test_soft_rows_reach_forward, test_engine_exact, test_prefix_cache,
              test_engine_choices_and_cancel, test_engine_deferred_exact,
              test_engine_deferred_video, test_engine_encoder_sched_cancel,
              test_engine_refuses_bad_media);
}
