// SPDX-License-Identifier: MIT
// dflash_hf: the DFlash drafter's description in its two containers (dflash.h; docs/dflash.md):
// the HF assistant folder's config.json (transformers' MuseGlimmerAssistantConfig, arch doc §7)
// and tensor names (MuseGlimmerAssistantModel's state dict: `encoder.*`, `layers.N.*`, `norm`;
// the names llama.cpp's tensor_mapping.py maps for the dflash arch), the GGUF tensor order and
// shapes, and the GGUF keys llama.cpp's converter writes. Called by dflash.c (loading a folder),
// make_model.c and convert/ (writing either container); calls neither.
#include "model/dflash.h"
#include "model/model_int.h"

#include "gguf/gguf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define K_PREFIX GL_DFLASH_ARCH "."

// HF-ASST's MuseGlimmerAssistantConfig defaults (the release drafter, arch doc §7).
#define DEF_N_EMBD    6656
#define DEF_N_FF      19968
#define DEF_N_LAYER   5
#define DEF_N_HEAD    32
#define DEF_N_HEAD_KV 8
#define DEF_HEAD_DIM  128
#define DEF_RMS_EPS   1e-5
#define DEF_ROPE_BASE 500000.0
#define DEF_N_CTX     131072
#define DEF_WINDOW    2048
#define DEF_BLOCK     16
#define DEF_MASK      201818

// Per block: GGUF role, HF module path under layers.N., and the shape kind (0: [E] norm, 1: [D]
// q/k norm, 2: E -> H*D, 3: E -> Hkv*D, 4: H*D -> E, 5: E -> F, 6: F -> E). The order is
// llama.cpp's / make-model's tensor order.
static const struct {
    const char *gguf, *hf;
    int kind;
} k_roles[] = {
    {"attn_norm", "input_layernorm", 0},    {"attn_q", "self_attn.q_proj", 2},
    {"attn_k", "self_attn.k_proj", 3},      {"attn_v", "self_attn.v_proj", 3},
    {"attn_output", "self_attn.o_proj", 4}, {"attn_q_norm", "self_attn.q_norm", 1},
    {"attn_k_norm", "self_attn.k_norm", 1}, {"ffn_norm", "post_attention_layernorm", 0},
    {"ffn_gate", "mlp.gate_proj", 5},       {"ffn_up", "mlp.up_proj", 5},
    {"ffn_down", "mlp.down_proj", 6},
};
#define N_ROLES ((int)(sizeof k_roles / sizeof k_roles[0]))

// The three tensors outside the blocks (tensor_mapping.py: `encoder.fc` -> FC,
// `encoder.output_norm_enc` -> ENC_OUTPUT_NORM, `norm` -> OUTPUT_NORM).
static const struct {
    const char *gguf, *hf;
} k_globals[] = {
    {"fc.weight", "encoder.fc.weight"},
    {"enc.output_norm.weight", "encoder.output_norm_enc.weight"},
    {"output_norm.weight", "norm.weight"},
};

int64_t gl_dflash_n_tensors(const struct gl_dflash_config *cfg)
{
    return 3 + (int64_t)N_ROLES * cfg->n_layer;
}

int gl_dflash_tensor_at(const struct gl_dflash_config *cfg, int64_t i, char *name, size_t cap,
                        int64_t *n_in, int64_t *n_out)
{
    const int64_t E = cfg->n_embd, F = cfg->n_ff, D = cfg->head_dim;
    const int64_t QD = (int64_t)cfg->n_head * D, KD = (int64_t)cfg->n_head_kv * D;
    if (i < 0 || i >= gl_dflash_n_tensors(cfg))
        return 0;
    if (i < 3) {
        snprintf(name, cap, "%s", k_globals[i].gguf);
        *n_in = i == 0 ? (int64_t)cfg->n_target * E : E;
        *n_out = i == 0 ? E : 0;
        return 1;
    }
    const int64_t l = (i - 3) / N_ROLES, r = (i - 3) % N_ROLES;
    snprintf(name, cap, "blk.%lld.%s.weight", (long long)l, k_roles[r].gguf);
    static const int in_of[7] = {0, 1, 0, 0, 2, 0, 3}; // 0: E, 1: D, 2: H*D, 3: F
    const int64_t dims[4] = {E, D, QD, F};
    const int64_t outs[7] = {0, 0, QD, KD, E, F, E};
    *n_in = dims[in_of[k_roles[r].kind]];
    *n_out = outs[k_roles[r].kind];
    return 1;
}

int gl_dflash_hf_tensor_name(const char *gguf, char *out, size_t cap)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(gguf, k_globals[i].gguf))
            return snprintf(out, cap, "%s", k_globals[i].hf) > 0;
    int l, n = 0;
    char role[32];
    if (sscanf(gguf, "blk.%d.%31[a-z_].weight%n", &l, role, &n) != 2 || gguf[n] || l < 0)
        return 0;
    for (int r = 0; r < N_ROLES; r++)
        if (!strcmp(role, k_roles[r].gguf))
            return snprintf(out, cap, "layers.%d.%s.weight", l, k_roles[r].hf) > 0;
    return 0;
}

int gl_dflash_hf_gguf_name(const char *hf, char *out, size_t cap)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(hf, k_globals[i].hf))
            return snprintf(out, cap, "%s", k_globals[i].gguf) > 0;
    int l, n = 0;
    if (sscanf(hf, "layers.%d.%n", &l, &n) != 1 || l < 0 || n == 0)
        return 0;
    const char *rest = hf + n;
    const size_t rl = strlen(rest);
    if (rl < 8 || strcmp(rest + rl - 7, ".weight") != 0)
        return 0;
    for (int r = 0; r < N_ROLES; r++)
        if (strlen(k_roles[r].hf) == rl - 7 && !strncmp(rest, k_roles[r].hf, rl - 7))
            return snprintf(out, cap, "blk.%d.%s.weight", l, k_roles[r].gguf) > 0;
    return 0;
}

// ---- config.json ----

struct cx {
    const char *path;
    struct gl_err *err;
};

// An assistant config: model_type "muse_glimmer_assistant", or (without model_type) the
// architectures list naming MuseGlimmerAssistantModel.
static int names_assistant(const json_t *root)
{
    const json_t *mt = json_object_get(root, "model_type");
    if (mt)
        return json_is_string(mt) && !strcmp(json_string_value(mt), GL_DFLASH_HF_MODEL_TYPE);
    const json_t *a = json_object_get(root, "architectures");
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (s && !strcmp(s, GL_DFLASH_HF_ARCH))
            return 1;
    }
    return 0;
}

int gl_dflash_hf_is_assistant(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct gl_err e = {0};
    json_t *root = gl_model__load_json("dflash", path, NULL, &e);
    int yes = root && names_assistant(root);
    json_decref(root);
    return yes;
}

// root[key]: an integer in [lo, hi]; def when absent or null.
static gl_status get_int(const struct cx *c, const json_t *o, const char *key, int64_t lo,
                         int64_t hi, int64_t def, int32_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = (int32_t)def;
        return GL_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return gl_err_set(c->err, GL_E_FORMAT, "dflash: %s: %s is not an integer in %lld..%lld",
                          c->path, key, (long long)lo, (long long)hi);
    *out = (int32_t)json_integer_value(v);
    return GL_OK;
}

// o[key]: a finite number in (lo, hi]; def when absent or null.
static gl_status get_num(const struct cx *c, const json_t *o, const char *key, double lo, double hi,
                         double def, float *out)
{
    const json_t *v = json_object_get(o, key);
    double x = def;
    if (v && !json_is_null(v)) {
        if (!json_is_number(v))
            return gl_err_set(c->err, GL_E_FORMAT, "dflash: %s: %s is not a number", c->path, key);
        x = json_number_value(v);
    }
    if (!isfinite(x) || !(x > lo) || x > hi)
        return gl_err_set(c->err, GL_E_FORMAT, "dflash: %s: %s = %g outside (%g, %g]", c->path, key,
                          x, lo, hi);
    *out = (float)x;
    return GL_OK;
}

static gl_status parse_rope(const struct cx *c, const json_t *root, float *base)
{
    const json_t *rp = json_object_get(root, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        const json_t *ty = json_object_get(rp, "rope_type");
        if (!json_is_object(rp) ||
            (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "default") != 0)))
            return gl_err_set(c->err, GL_E_UNSUPPORTED,
                              "dflash: %s: rope_parameters must be {\"rope_type\": \"default\", "
                              "...} (no RoPE scaling is supported)",
                              c->path);
        return get_num(c, rp, "rope_theta", 1.0, 1e12, DEF_ROPE_BASE, base);
    }
    return get_num(c, root, "rope_theta", 1.0, 1e12, DEF_ROPE_BASE, base);
}

static gl_status parse_lists(const struct cx *c, const json_t *root, struct gl_dflash_config *cfg)
{
    // target_layer_ids: 0-based target layers whose outputs feed fc (HF default: the release's).
    static const int32_t def_ids[5] = {1, 13, 25, 37, 49};
    const json_t *ids = json_object_get(root, "target_layer_ids");
    if (!ids || json_is_null(ids)) {
        cfg->n_target = 5;
        memcpy(cfg->target_layers, def_ids, sizeof def_ids);
    } else {
        if (!json_is_array(ids) || json_array_size(ids) < 1 ||
            json_array_size(ids) > GL_DFLASH_MAX_TARGETS)
            return gl_err_set(c->err, GL_E_FORMAT,
                              "dflash: %s: target_layer_ids must be a list of 1..%d layer ids",
                              c->path, GL_DFLASH_MAX_TARGETS);
        cfg->n_target = (int32_t)json_array_size(ids);
        for (int i = 0; i < cfg->n_target; i++) {
            const json_t *v = json_array_get(ids, (size_t)i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= GL_MODEL_MAX_LAYERS)
                return gl_err_set(c->err, GL_E_FORMAT,
                                  "dflash: %s: target_layer_ids[%d] is not a layer id in 0..%d",
                                  c->path, i, GL_MODEL_MAX_LAYERS - 1);
            cfg->target_layers[i] = (int32_t)json_integer_value(v);
        }
    }
    // layer_types: HF's default is every layer sliding_attention.
    memset(cfg->swa, 1, sizeof cfg->swa);
    const json_t *lt = json_object_get(root, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)cfg->n_layer)
            return gl_err_set(c->err, GL_E_FORMAT,
                              "dflash: %s: layer_types must be a list of num_hidden_layers = %d "
                              "entries",
                              c->path, cfg->n_layer);
        for (int i = 0; i < cfg->n_layer; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (!s || (strcmp(s, "sliding_attention") != 0 && strcmp(s, "full_attention") != 0))
                return gl_err_set(c->err, GL_E_UNSUPPORTED,
                                  "dflash: %s: layer_types[%d] is not \"sliding_attention\" or "
                                  "\"full_attention\"",
                                  c->path, i);
            cfg->swa[i] = !strcmp(s, "sliding_attention");
        }
    }
    return GL_OK;
}

gl_status gl_dflash_hf_config_parse(struct gl_dflash_config *cfg, const char *dir,
                                    struct gl_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = gl_model__load_json("dflash", path, NULL, err);
    if (!root)
        return err ? err->code : GL_E_IO;
    struct cx c = {path, err};
    gl_status st = GL_OK;
    if (!names_assistant(root))
        st = gl_err_set(err, GL_E_UNSUPPORTED,
                        "dflash: %s: not a DFlash assistant config (model_type \"%s\" or "
                        "architectures [\"%s\"] expected)",
                        path, GL_DFLASH_HF_MODEL_TYPE, GL_DFLASH_HF_ARCH);
    int32_t window = 0;
#define INT(k, lo, hi, def, dst)                                                                   \
    if (st == GL_OK)                                                                               \
    st = get_int(&c, root, k, lo, hi, def, dst)
    INT("hidden_size", 1, 1 << 16, DEF_N_EMBD, &cfg->n_embd);
    INT("intermediate_size", 1, 1 << 18, DEF_N_FF, &cfg->n_ff);
    INT("num_hidden_layers", 1, GL_DFLASH_MAX_LAYERS, DEF_N_LAYER, &cfg->n_layer);
    INT("num_attention_heads", 1, 1024, DEF_N_HEAD, &cfg->n_head);
    INT("num_key_value_heads", 1, 1024, DEF_N_HEAD_KV, &cfg->n_head_kv);
    INT("head_dim", 2, 1024, DEF_HEAD_DIM, &cfg->head_dim);
    INT("max_position_embeddings", 1, 1 << 24, DEF_N_CTX, &cfg->n_ctx_train);
    INT("sliding_window", 0, 1 << 24, DEF_WINDOW, &window);
    INT("block_size", 1, GL_DFLASH_MAX_BLOCK, DEF_BLOCK, &cfg->block_size);
    INT("mask_token_id", 0, INT32_MAX, DEF_MASK, &cfg->mask_token_id);
#undef INT
    if (st == GL_OK)
        st = get_num(&c, root, "rms_norm_eps", 0.0, 0.1, DEF_RMS_EPS, &cfg->rms_eps);
    if (st == GL_OK)
        st = parse_rope(&c, root, &cfg->rope_base);
    if (st == GL_OK)
        st = parse_lists(&c, root, cfg);
    const json_t *act = json_object_get(root, "hidden_act");
    if (st == GL_OK && act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        st = gl_err_set(err, GL_E_UNSUPPORTED, "dflash: %s: hidden_act must be \"silu\"", path);
    if (st == GL_OK && (cfg->head_dim % 2 != 0 || cfg->n_head % cfg->n_head_kv != 0))
        st = gl_err_set(err, GL_E_FORMAT,
                        "dflash: %s: head_dim %d must be even and num_attention_heads %d a "
                        "multiple of num_key_value_heads %d",
                        path, cfg->head_dim, cfg->n_head, cfg->n_head_kv);
    // sliding_window null: no window (HF passes sliding_window=None).
    if (st == GL_OK && json_is_null(json_object_get(root, "sliding_window")))
        window = 0;
    cfg->window = window;
    cfg->kq_scale = (float)(1.0 / sqrt((double)(cfg->head_dim ? cfg->head_dim : 1)));
    json_decref(root);
    return st;
}

// ---- GGUF keys ----

gl_status gl_dflash_add_keys(struct gl_gguf_writer *w, const struct gl_dflash_config *cfg,
                             const char *name, uint32_t file_type, struct gl_err *err)
{
    struct gl_gguf_keys kv = {w, GL_OK};
    gl_gguf_keys_str(&kv, "general.architecture", GL_DFLASH_ARCH);
    gl_gguf_keys_str(&kv, "general.name", name);
    gl_gguf_keys_u32(&kv, "general.file_type", file_type);
    gl_gguf_keys_u32(&kv, "general.quantization_version", 2);
    gl_gguf_keys_u32(&kv, "general.alignment", 32);
    gl_gguf_keys_u32(&kv, K_PREFIX "block_count", (uint32_t)cfg->n_layer);
    gl_gguf_keys_u32(&kv, K_PREFIX "context_length", (uint32_t)cfg->n_ctx_train);
    gl_gguf_keys_u32(&kv, K_PREFIX "embedding_length", (uint32_t)cfg->n_embd);
    gl_gguf_keys_u32(&kv, K_PREFIX "feed_forward_length", (uint32_t)cfg->n_ff);
    gl_gguf_keys_u32(&kv, K_PREFIX "attention.head_count", (uint32_t)cfg->n_head);
    gl_gguf_keys_u32(&kv, K_PREFIX "attention.head_count_kv", (uint32_t)cfg->n_head_kv);
    gl_gguf_keys_f32(&kv, K_PREFIX "rope.freq_base", cfg->rope_base);
    gl_gguf_keys_f32(&kv, K_PREFIX "attention.layer_norm_rms_epsilon", cfg->rms_eps);
    gl_gguf_keys_u32(&kv, K_PREFIX "attention.key_length", (uint32_t)cfg->head_dim);
    gl_gguf_keys_u32(&kv, K_PREFIX "attention.value_length", (uint32_t)cfg->head_dim);
    gl_gguf_keys_u32(&kv, K_PREFIX "block_size", (uint32_t)cfg->block_size);
    if (kv.st == GL_OK) {
        // llama.cpp counts the INPUT of layer id + 1 (its converter writes target_layer_ids + 1).
        int32_t ids[GL_DFLASH_MAX_TARGETS];
        for (int i = 0; i < cfg->n_target; i++)
            ids[i] = cfg->target_layers[i] + 1;
        kv.st = gl_gguf_writer_add_arr(w, K_PREFIX "target_layers", GL_GGUF_I32, ids,
                                       (uint64_t)cfg->n_target);
    }
    // As llama.cpp's converter: the window and its per-layer pattern only when there is one.
    if (cfg->window > 0) {
        gl_gguf_keys_u32(&kv, K_PREFIX "attention.sliding_window", (uint32_t)cfg->window);
        if (kv.st == GL_OK)
            kv.st = gl_gguf_writer_add_arr(w, K_PREFIX "attention.sliding_window_pattern",
                                           GL_GGUF_BOOL, cfg->swa, (uint64_t)cfg->n_layer);
    }
    if (kv.st != GL_OK)
        return gl_err_set(err, kv.st, "dflash: adding the drafter's GGUF keys failed (%s)",
                          gl_status_name(kv.st));
    return GL_OK;
}
