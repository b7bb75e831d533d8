// SPDX-License-Identifier: MIT
// vision_gguf: telling glint's temporal vision GGUF from llama.cpp's summed mmproj (contract and
// file layout in vision_gguf.h).
#include "vision/vision_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_PATCH 14
#define CHANNELS      3

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int64_t patch_size_of(const struct gl_gguf *g)
{
    static const char *const keys[] = {"muse-glimmer-vision.patch_size", "clip.vision.patch_size"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint32_t v = 0;
        if (gl_gguf_find_kv(g, keys[i]) && gl_gguf_get_u32(g, keys[i], &v, NULL) == GL_OK && v > 0)
            return v;
    }
    return DEFAULT_PATCH;
}

enum gl_vgguf_kind gl_vgguf_kind(const struct gl_gguf *g, int64_t *frames)
{
    if (frames)
        *frames = 0;
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, GL_VGGUF_PATCH);
    if (!t || t->n_dims < 2)
        return t ? GL_VGGUF_UNKNOWN : GL_VGGUF_NOT_VISION;
    // Inputs per output channel: every dim but the last (the output channels).
    int64_t k = 1;
    for (uint32_t d = 0; d + 1 < t->n_dims; d++)
        k *= t->ne[d];
    const int64_t p = patch_size_of(g), slab = CHANNELS * p * p;
    if (k == slab) {
        if (frames)
            *frames = 1;
        return GL_VGGUF_SUMMED;
    }
    if (k % slab == 0 && k / slab >= 2) {
        if (frames)
            *frames = k / slab;
        return GL_VGGUF_TEMPORAL;
    }
    return GL_VGGUF_UNKNOWN;
}

#define WHAT_INSTEAD                                                                               \
    "use glint convert HF_DIR --out TEXT.gguf --vision-out VISION.gguf instead (it keeps the "     \
    "temporal axis)"

gl_status gl_vgguf_check(const char *path, const struct gl_gguf *g, struct gl_err *err)
{
    const char *name = path ? base_name(path) : "";
    if (!strcasecmp(name, GL_VGGUF_RELEASED_MMPROJ))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: %s refused: the released mmproj's patch embedding is "
                          "[1536, 3, 14, 14], HF's [1536, 2, 3, 14, 14] with the temporal axis "
                          "summed away (right for still images only), so video cannot work "
                          "from it; " WHAT_INSTEAD,
                          name);
    if (!g)
        return GL_OK;
    int64_t frames = 0;
    const enum gl_vgguf_kind kind = gl_vgguf_kind(g, &frames);
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, GL_VGGUF_PATCH);
    char shape[96] = "";
    for (uint32_t d = 0; t && d < t->n_dims; d++) {
        size_t n = strlen(shape);
        snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    }
    if (kind == GL_VGGUF_SUMMED)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: %s refused: its patch embedding " GL_VGGUF_PATCH
                          " (ne [%s]) has no temporal axis (3 x %lld x %lld inputs per output: "
                          "the temporal axis was summed away, as in llama.cpp's mmproj), so "
                          "video cannot work from it; " WHAT_INSTEAD,
                          path ? base_name(path) : "(gguf)", shape, (long long)patch_size_of(g),
                          (long long)patch_size_of(g));
    if (kind == GL_VGGUF_UNKNOWN)
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: %s: patch embedding " GL_VGGUF_PATCH
                          " has ne [%s], neither T x 3 x %lld x %lld (temporal) nor 3 x %lld x "
                          "%lld (summed) inputs per output",
                          path ? path : "(gguf)", shape, (long long)patch_size_of(g),
                          (long long)patch_size_of(g), (long long)patch_size_of(g),
                          (long long)patch_size_of(g));
    return GL_OK;
}

// ---- reading our layout back ----

int gl_vgguf_tensor_name(const char *hf, char *out, size_t cap)
{
    static const struct {
        const char *hf, *gg;
    } fixed[] = {
        {"model.vision_tower.patch_embedder.patch_embedding.weight", GL_VGGUF_PATCH},
        {"model.vision_tower.patch_embedder.position_embedding_table.weight",
         "v.position_embd.weight"},
        {"model.vision_tower.ln_pre.weight", "v.pre_ln.weight"},
        {"model.vision_tower.ln_pre.bias", "v.pre_ln.bias"},
        {"model.vision_tower.ln_post.weight", "v.post_ln.weight"},
        {"model.vision_tower.ln_post.bias", "v.post_ln.bias"},
        {"model.vision_adapter.fc1.weight", "mm.0.weight"},
        {"model.vision_adapter.fc2.weight", "mm.1.weight"},
        {"model.vision_projection.weight", "mm.2.weight"},
    };
    static const struct {
        const char *hf, *gg;
    } blk[] = {{"norm1", "ln1"},          {"norm2", "ln2"},          {"attn.q_proj", "attn_q"},
               {"attn.k_proj", "attn_k"}, {"attn.v_proj", "attn_v"}, {"attn.proj", "attn_out"},
               {"mlp.fc1", "ffn_up"},     {"mlp.fc2", "ffn_down"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (!strcmp(hf, fixed[i].hf))
            return snprintf(out, cap, "%s", fixed[i].gg) < (int)cap ? 0 : -1;
    const char *pre = "model.vision_tower.layers.";
    if (strncmp(hf, pre, strlen(pre)) != 0)
        return -1;
    char *end;
    const long l = strtol(hf + strlen(pre), &end, 10);
    if (end == hf + strlen(pre) || *end != '.' || l < 0 || l > 100000)
        return -1;
    const char *rest = end + 1, *dot = strrchr(rest, '.');
    if (!dot || (strcmp(dot, ".weight") && strcmp(dot, ".bias")))
        return -1;
    for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++)
        if (strlen(blk[i].hf) == (size_t)(dot - rest) &&
            !strncmp(rest, blk[i].hf, (size_t)(dot - rest)))
            return snprintf(out, cap, "v.blk.%ld.%s%s", l, blk[i].gg, dot) < (int)cap ? 0 : -1;
    return -1;
}

#define VK(s) GL_VGGUF_ARCH "." s

// An optional u32 key into *dst (absent: *dst unchanged), then 1 <= value <= 2^20.
static gl_status cfg_u32(const struct gl_gguf *g, const char *key, int32_t *dst, struct gl_err *err)
{
    uint32_t v = (uint32_t)*dst;
    if (gl_gguf_find_kv(g, key) && gl_gguf_get_u32(g, key, &v, err) != GL_OK)
        return GL_E_FORMAT;
    if (v == 0 || v > (1u << 20))
        return gl_err_set(err, GL_E_FORMAT, "vision: %s = %u is implausible", key, v);
    *dst = (int32_t)v;
    return GL_OK;
}

static gl_status cfg_f32(const struct gl_gguf *g, const char *key, float *dst, struct gl_err *err)
{
    if (gl_gguf_find_kv(g, key) && gl_gguf_get_f32(g, key, dst, err) != GL_OK)
        return GL_E_FORMAT;
    if (!(*dst > 0.0f) || !(*dst < 1e30f))
        return gl_err_set(err, GL_E_FORMAT, "vision: %s = %g must be positive and finite", key,
                          (double)*dst);
    return GL_OK;
}

gl_status gl_vgguf_config(const struct gl_gguf *g, struct gl_vision_config *cfg, struct gl_err *err)
{
    gl_vision_config_default(cfg);
    char *s = NULL;
    gl_status st = gl_gguf_get_str(g, "general.architecture", &s, NULL);
    const int ours = st == GL_OK && !strcmp(s, GL_VGGUF_ARCH);
    gl_free(s);
    s = NULL;
    if (!ours)
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: general.architecture is not \"" GL_VGGUF_ARCH
                          "\" (not a vision GGUF written by glint convert --vision-out)");
    st = gl_gguf_get_str(g, GL_VGGUF_KEY_FORMAT, &s, NULL);
    const int fmt = st == GL_OK && !strcmp(s, GL_VGGUF_FORMAT);
    gl_free(s);
    s = NULL;
    if (!fmt)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: " GL_VGGUF_KEY_FORMAT " is absent or not \"" GL_VGGUF_FORMAT
                          "\", the only layout this build reads");
    st = gl_gguf_get_str(g, VK("rope_layout"), &s, NULL);
    const int rh = st != GL_OK || !strcmp(s, "rotate_half"); // absent: ours
    gl_free(s);
    if (!rh)
        return gl_err_set(
            err, GL_E_UNSUPPORTED,
            "vision: " VK("rope_layout") " must be \"rotate_half\" (q/k rows in HF's "
                                         "order), the layout the encoder applies RoPE in");
    const struct {
        const char *key;
        int32_t *dst;
    } dims[] = {{VK("patch_size"), &cfg->patch_size},
                {GL_VGGUF_KEY_TEMPORAL, &cfg->patch_frames},
                {VK("embedding_length"), &cfg->hidden},
                {VK("feed_forward_length"), &cfg->ffn},
                {VK("block_count"), &cfg->n_layers},
                {VK("attention.head_count"), &cfg->n_heads},
                {VK("full_attention_interval"), &cfg->full_every},
                {VK("position_embedding_height"), &cfg->pos_h},
                {VK("position_embedding_width"), &cfg->pos_w},
                {VK("spatial_merge_size"), &cfg->merge},
                {VK("projector.hidden_size"), &cfg->adapter},
                {VK("projection_dim"), &cfg->out_dim}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if ((st = cfg_u32(g, dims[i].key, dims[i].dst, err)) != GL_OK)
            return st;
    if ((st = cfg_f32(g, VK("attention.layer_norm_epsilon"), &cfg->ln_eps, err)) ||
        (st = cfg_f32(g, VK("rms_norm_epsilon"), &cfg->rms_eps, err)) ||
        (st = cfg_f32(g, VK("rope.freq_base"), &cfg->rope_theta, err)))
        return st;
    if (cfg->hidden % cfg->n_heads != 0 || (cfg->hidden / cfg->n_heads) % 16 != 0 ||
        cfg->merge != 2)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: embedding_length %d / head_count %d must be a whole multiple "
                          "of 16 and spatial_merge_size (%d) 2",
                          (int)cfg->hidden, (int)cfg->n_heads, (int)cfg->merge);
    cfg->head_dim = cfg->hidden / cfg->n_heads;
    return GL_OK;
}
#undef VK
