// SPDX-License-Identifier: MIT
// vision_gguf: telling glint's temporal vision GGUF from llama.cpp's summed mmproj (contract and
// file layout in vision_gguf.h).
#include "vision/vision_gguf.h"

#include "kernels/kernels.h"

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
    if (!g || gl_vgguf_is_mmproj(g))
        return GL_OK; // llama.cpp's layout: gl_vgguf_mmproj_read checks it
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

// ---- llama.cpp's mmproj layout ----

int gl_vgguf_is_mmproj(const struct gl_gguf *g)
{
    const struct gl_gguf_kv *kv = g ? gl_gguf_find_kv(g, "general.architecture") : NULL;
    return kv && kv->type == GL_GGUF_STR && gl_gguf_str_eq(kv->v.str, GL_MMPROJ_ARCH);
}

#define MK(s) "clip.vision." s

// The key's kv when it is present with exactly type t (llama.cpp's getters assert the type);
// *found = 0 and GL_OK when absent and optional; GL_E_FORMAT naming the key otherwise.
static gl_status mm_key(const struct gl_gguf *g, const char *key, enum gl_gguf_vtype t,
                        int required, const struct gl_gguf_kv **out, struct gl_err *err)
{
    *out = gl_gguf_find_kv(g, key);
    if (!*out)
        return required ? gl_err_set(err, GL_E_FORMAT, "vision: mmproj key %s is missing", key)
                        : GL_OK;
    if ((*out)->type != t)
        return gl_err_set(err, GL_E_FORMAT, "vision: mmproj key %s is %s, expected %s", key,
                          gl_gguf_vtype_name((*out)->type), gl_gguf_vtype_name(t));
    return GL_OK;
}

// A U32 key in [1, 2^20] into *dst (absent and optional: *dst unchanged).
static gl_status mm_u32(const struct gl_gguf *g, const char *key, int required, int32_t *dst,
                        struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = mm_key(g, key, GL_GGUF_U32, required, &kv, err);
    if (st != GL_OK || !kv)
        return st;
    if (kv->v.u64 == 0 || kv->v.u64 > (1u << 20))
        return gl_err_set(err, GL_E_FORMAT, "vision: mmproj key %s = %llu is implausible", key,
                          (unsigned long long)kv->v.u64);
    *dst = (int32_t)kv->v.u64;
    return GL_OK;
}

// An optional F32 array of 3 that must hold 0.5 each: the image module normalises with mean =
// std = 0.5 (arch doc §6.2 step 4), so another value would feed the encoder other pixels.
static gl_status mm_norm3(const struct gl_gguf *g, const char *key, struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = mm_key(g, key, GL_GGUF_ARR, 0, &kv, err);
    if (st != GL_OK || !kv)
        return st;
    if (kv->v.arr.type != GL_GGUF_F32 || kv->v.arr.n != 3)
        return gl_err_set(err, GL_E_FORMAT, "vision: mmproj key %s must be 3 F32 values", key);
    for (uint64_t i = 0; i < 3; i++) {
        const double v = gl_gguf_arr_get_float(kv, i);
        if (!(v > 0.4999 && v < 0.5001))
            return gl_err_set(err, GL_E_UNSUPPORTED,
                              "vision: mmproj key %s[%llu] = %g; the image path normalises with "
                              "0.5 (arch doc §6.2)",
                              key, (unsigned long long)i, v);
    }
    return GL_OK;
}

static int is_float_type(uint32_t t)
{
    return t == GL_TYPE_F32 || t == GL_TYPE_F16 || t == GL_TYPE_BF16;
}

// A type the encoder's matmul can use: a vec_dot kernel, and a way to convert the activations.
static int is_matmul_type(uint32_t t)
{
    const struct gl_type_traits *tr = gl_type_traits_of(t);
    if (!tr || !tr->supported || t >= GL_TYPE_COUNT)
        return 0;
    const struct gl_kernels *k = gl_kernels_get();
    const enum gl_type vdt = gl_type_vec_dot_type((enum gl_type)t);
    return k->vec_dot[t] && (vdt == GL_TYPE_F32 || k->from_float[vdt]);
}

// Tensor `name` with exactly n_dims dims ne[0..n_dims), of a float type (mat = 0) or a matmul
// type (mat = 1); the error names the tensor and what is wrong.
static gl_status mm_tensor(const struct gl_gguf *g, const char *name, uint32_t n_dims,
                           const int64_t *ne, int mat, struct gl_err *err)
{
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, name);
    if (!t)
        return gl_err_set(err, GL_E_FORMAT, "vision: mmproj tensor %s is missing", name);
    int ok = t->n_dims == n_dims;
    for (uint32_t d = 0; ok && d < n_dims; d++)
        ok = t->ne[d] == ne[d];
    if (!ok) {
        char have[96] = "", want[96] = "";
        for (uint32_t d = 0; d < t->n_dims && d < GL_GGUF_MAX_DIMS; d++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", d ? ", " : "",
                     (long long)t->ne[d]);
        for (uint32_t d = 0; d < n_dims; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "",
                     (long long)ne[d]);
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: mmproj tensor %s has ne [%s], expected [%s] (from the "
                          "clip.vision.* keys)",
                          name, have, want);
    }
    if (mat ? is_matmul_type(t->type) : is_float_type(t->type))
        return GL_OK;
    const struct gl_type_traits *tr = gl_type_traits_of(t->type);
    return gl_err_set(err, GL_E_UNSUPPORTED, "vision: mmproj tensor %s is %s; %s", name,
                      tr && tr->name ? tr->name : "an unknown type",
                      mat ? "the encoder has no matmul kernel for it"
                          : "vectors, the position table and the patch kernel must be F32, F16 "
                            "or BF16");
}

static gl_status mm_config(const struct gl_gguf *g, struct gl_vision_config *cfg,
                           struct gl_err *err)
{
    const struct gl_gguf_kv *kv;
    gl_status st = mm_key(g, "clip.projector_type", GL_GGUF_STR, 1, &kv, err);
    if (st != GL_OK)
        return st;
    if (!gl_gguf_str_eq(kv->v.str, GL_MMPROJ_PROJECTOR))
        return gl_err_set(
            err, GL_E_UNSUPPORTED,
            "vision: mmproj clip.projector_type is \"%.*s\", not \"" GL_MMPROJ_PROJECTOR
            "\" (an mmproj of another model)",
            (int)(kv->v.str.len > 64 ? 64 : kv->v.str.len), kv->v.str.ptr);
    if ((st = mm_key(g, "clip.has_vision_encoder", GL_GGUF_BOOL, 1, &kv, err)))
        return st;
    if (!kv->v.u64)
        return gl_err_set(err, GL_E_FORMAT, "vision: mmproj clip.has_vision_encoder is false");
    int32_t image_size = 0;
    const struct {
        const char *key;
        int required;
        int32_t *dst;
    } u[] = {{MK("patch_size"), 1, &cfg->patch_size},
             {MK("embedding_length"), 1, &cfg->hidden},
             {MK("feed_forward_length"), 1, &cfg->ffn},
             {MK("block_count"), 1, &cfg->n_layers},
             {MK("attention.head_count"), 1, &cfg->n_heads},
             {MK("projection_dim"), 1, &cfg->out_dim},
             {MK("image_size"), 1, &image_size},
             {MK("spatial_merge_size"), 0, &cfg->merge}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        if ((st = mm_u32(g, u[i].key, u[i].required, u[i].dst, err)))
            return st;
    if ((st = mm_key(g, MK("attention.layer_norm_epsilon"), GL_GGUF_F32, 1, &kv, err)))
        return st;
    if (!(kv->v.f64 > 0.0) || !(kv->v.f64 < 1.0))
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: mmproj key " MK("attention.layer_norm_epsilon") " = %g is not "
                                                                                   "in (0, 1)",
                          kv->v.f64);
    cfg->ln_eps = (float)kv->v.f64;
    if ((st = mm_norm3(g, MK("image_mean"), err)) || (st = mm_norm3(g, MK("image_std"), err)))
        return st;
    if (cfg->hidden % cfg->n_heads != 0 || (cfg->hidden / cfg->n_heads) % 16 != 0 ||
        cfg->merge != 2)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vision: mmproj embedding_length %d / head_count %d must be a whole "
                          "multiple of 16 and spatial_merge_size (%d) 2",
                          (int)cfg->hidden, (int)cfg->n_heads, (int)cfg->merge);
    cfg->head_dim = cfg->hidden / cfg->n_heads;
    // What llama.cpp hard-codes for PROJECTOR_TYPE_MUSE_GLIMMER (clip.cpp).
    cfg->patch_frames = 2;
    cfg->full_every = 4;
    cfg->rope_theta = 10000.0f;
    // The square position table and the adapter width come from the tensors.
    const struct gl_gguf_tensor *pos = gl_gguf_find_tensor(g, "v.position_embd.weight");
    const struct gl_gguf_tensor *m0 = gl_gguf_find_tensor(g, "mm.0.weight");
    if (!pos || pos->n_dims != 2 || pos->ne[0] != cfg->hidden)
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: mmproj tensor v.position_embd.weight is missing or not ne "
                          "[%d, side * side]",
                          (int)cfg->hidden);
    int64_t side = 1;
    while (side * side < pos->ne[1] && side < (1 << 12))
        side++;
    if (side * side != pos->ne[1])
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: mmproj tensor v.position_embd.weight has %lld rows, not a "
                          "square table",
                          (long long)pos->ne[1]);
    cfg->pos_h = cfg->pos_w = (int32_t)side;
    if (!m0 || m0->n_dims != 2 || m0->ne[1] < 1 || m0->ne[1] > (1 << 20))
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: mmproj tensor mm.0.weight is missing or not 2-D with at most "
                          "2^20 outputs");
    cfg->adapter = (int32_t)m0->ne[1];
    return GL_OK;
}

gl_status gl_vgguf_mmproj_read(const struct gl_gguf *g, struct gl_vision_config *cfg,
                               struct gl_vgguf_info *info, struct gl_err *err)
{
    gl_vision_config_default(cfg);
    memset(info, 0, sizeof *info);
    if (!gl_vgguf_is_mmproj(g))
        return gl_err_set(err, GL_E_FORMAT,
                          "vision: general.architecture is not \"" GL_MMPROJ_ARCH
                          "\" (not a llama.cpp mmproj)");
    gl_status st = mm_config(g, cfg, err);
    if (st != GL_OK)
        return st;
    const int64_t H = cfg->hidden, F = cfg->ffn, A = cfg->adapter, p = cfg->patch_size;
    const int64_t patch_ne[4] = {p, p, CHANNELS, H}, patch_t_ne[4] = {p * p, CHANNELS, 2, H};
    const int64_t pos_ne[2] = {H, (int64_t)cfg->pos_h * cfg->pos_w};
    const int64_t vH[1] = {H}, vF[1] = {F};
    const int64_t m0[2] = {4 * H, A}, m1[2] = {A, A}, m2[2] = {A, cfg->out_dim};
    if ((st = mm_tensor(g, GL_VGGUF_PATCH, 4, patch_ne, 0, err)) ||
        (gl_gguf_find_tensor(g, GL_MMPROJ_PATCH_T) &&
         (st = mm_tensor(g, GL_MMPROJ_PATCH_T, 4, patch_t_ne, 0, err))) ||
        (st = mm_tensor(g, "v.position_embd.weight", 2, pos_ne, 0, err)) ||
        (st = mm_tensor(g, "v.pre_ln.weight", 1, vH, 0, err)) ||
        (st = mm_tensor(g, "v.pre_ln.bias", 1, vH, 0, err)) ||
        (st = mm_tensor(g, "v.post_ln.weight", 1, vH, 0, err)) ||
        (st = mm_tensor(g, "v.post_ln.bias", 1, vH, 0, err)) ||
        (st = mm_tensor(g, "mm.0.weight", 2, m0, 1, err)) ||
        (st = mm_tensor(g, "mm.1.weight", 2, m1, 1, err)) ||
        (st = mm_tensor(g, "mm.2.weight", 2, m2, 1, err)))
        return st;
    static const struct {
        const char *role;
        int kind; // 0: [H] vectors; 1: H -> H; 2: ffn_up H -> F; 3: ffn_down F -> H
    } blk[] = {{"ln1", 0},    {"ln2", 0},      {"attn_q", 1}, {"attn_k", 1},
               {"attn_v", 1}, {"attn_out", 1}, {"ffn_up", 2}, {"ffn_down", 3}};
    for (int32_t l = 0; l < cfg->n_layers; l++)
        for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
            const int k = blk[i].kind;
            char nm[64];
            const int64_t w_ne[2] = {k == 3 ? F : H, k == 2 ? F : H};
            snprintf(nm, sizeof nm, "v.blk.%d.%s.weight", (int)l, blk[i].role);
            if ((st = k ? mm_tensor(g, nm, 2, w_ne, 1, err) : mm_tensor(g, nm, 1, vH, 0, err)))
                return st;
            snprintf(nm, sizeof nm, "v.blk.%d.%s.bias", (int)l, blk[i].role);
            if ((st = mm_tensor(g, nm, 1, k == 2 ? vF : vH, 0, err)))
                return st;
        }
    info->mmproj = 1;
    info->video = gl_gguf_find_tensor(g, GL_MMPROJ_PATCH_T) != NULL;
    return GL_OK;
}
#undef MK
