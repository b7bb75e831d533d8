// SPDX-License-Identifier: MIT
// model: HF model folders: the GGUF -> HF tensor name map (arch doc §3.3, legacy names too) and the
// config (§1, §4, §6.1): config.json `text_config` (or a legacy flat config), `vision_config`
// (into the model's gl_vision_config), generation_config.json for the stop ids. Absent
// keys take the release values, the same GL_MODEL_DEF_* constants the GGUF parser falls back to;
// the structure dims go through the GGUF parser's checker (gl_model__set_dims).
#include "model/model.h"
#include "model/model_int.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CFG_MAX_BYTES (4u << 20)

// ---- HF tensor names (arch doc §3.3) ----

// The legacy export names the norms differently: post_attn_norm = post-attention,
// post_attention_layernorm = pre-FFN, post_ffn_norm = post-FFN (arch doc §3.3).
int gl_model_hf_tensor_name(const char *gg, int legacy, char *out, size_t cap)
{
    static const struct {
        const char *gguf, *hf, *legacy;
    } map[] = {
        {"attn_norm", "input_layernorm", "input_layernorm"},
        {"attn_q", "self_attn.q_proj", "self_attn.q_proj"},
        {"attn_k", "self_attn.k_proj", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj", "self_attn.v_proj"},
        {"attn_gate", "self_attn.gate_proj", "self_attn.output_gate_proj"},
        {"attn_output", "self_attn.o_proj", "self_attn.o_proj"},
        {"post_attention_norm", "post_attention_layernorm", "post_attn_norm"},
        {"ffn_norm", "pre_feedforward_layernorm", "post_attention_layernorm"},
        {"post_ffw_norm", "post_feedforward_layernorm", "post_ffn_norm"},
        {"ffn_gate", "mlp.gate_proj", "mlp.gate_proj"},
        {"ffn_up", "mlp.up_proj", "mlp.up_proj"},
        {"ffn_down", "mlp.down_proj", "mlp.down_proj"},
    };
    const char *pre = legacy ? "model." : "model.language_model.";
    if (!strcmp(gg, "token_embd.weight"))
        return snprintf(out, cap, "%sembed_tokens.weight", pre) > 0;
    if (!strcmp(gg, "output_norm.weight"))
        return snprintf(out, cap, "%snorm.weight", pre) > 0;
    if (!strcmp(gg, "output.weight"))
        return snprintf(out, cap, "lm_head.weight") > 0;
    int layer, n = 0;
    char role[64];
    if (sscanf(gg, "blk.%d.%63[a-z_].weight%n", &layer, role, &n) != 2 || gg[n] != '\0')
        return 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(role, map[i].gguf))
            return snprintf(out, cap, "%slayers.%d.%s.weight", pre, layer,
                            legacy ? map[i].legacy : map[i].hf) > 0;
    return 0;
}

// ---- config.json / generation_config.json ----

json_t *gl_model__load_json(const char *who, const char *path, int *missing, struct gl_err *err)
{
    FILE *f = fopen(path, "rb");
    if (missing)
        *missing = f == NULL;
    if (!f) {
        gl_err_set(err, GL_E_IO, "%s: %s: cannot open", who, path);
        return NULL;
    }
    char *b = gl_malloc(CFG_MAX_BYTES + 1);
    size_t n = b ? fread(b, 1, CFG_MAX_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    json_t *j = NULL;
    json_error_t je;
    if (!b || bad || n > CFG_MAX_BYTES)
        gl_err_set(err, GL_E_IO, "%s: %s: unreadable or over %u bytes", who, path, CFG_MAX_BYTES);
    else if (!(j = json_loadb(b, n, JSON_REJECT_DUPLICATES, &je)))
        gl_err_set(err, GL_E_FORMAT, "%s: %s: invalid JSON at line %d: %s", who, path, je.line,
                   je.text);
    else if (!json_is_object(j)) {
        gl_err_set(err, GL_E_FORMAT, "%s: %s: not a JSON object", who, path);
        json_decref(j);
        j = NULL;
    }
    gl_free(b);
    return j;
}

// Parsing context: which file and object keys come from, for messages.
struct hf_cx {
    const char *path, *obj;
    struct gl_err *err;
};

// obj[key] as u32 (a JSON integer in 0..UINT32_MAX), or def when absent or null.
static gl_status get_u32(const struct hf_cx *c, const json_t *o, const char *key, uint32_t def,
                         uint32_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return GL_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return gl_err_set(c->err, GL_E_FORMAT,
                          "model: %s: %s.%s is not an integer in 0..4294967295", c->path, c->obj,
                          key);
    *out = (uint32_t)json_integer_value(v);
    return GL_OK;
}

// obj[key] as a finite float; def when absent; null_val when null.
static gl_status get_f32(const struct hf_cx *c, const json_t *o, const char *key, float def,
                         float null_val, float *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v) {
        *out = def;
        return GL_OK;
    }
    if (json_is_null(v)) {
        *out = null_val;
        return GL_OK;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return gl_err_set(c->err, GL_E_FORMAT, "model: %s: %s.%s is not a finite number", c->path,
                          c->obj, key);
    *out = (float)json_number_value(v);
    return GL_OK;
}

// A feature flag that only an explicit false turns off (arch doc §1: use_qk_norm & co.).
static gl_status require_not_false(const struct hf_cx *c, const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (v && json_is_false(v))
        return gl_err_set(c->err, GL_E_UNSUPPORTED, "model: %s: %s.%s = false is not supported",
                          c->path, c->obj, key);
    return GL_OK;
}

// layer_types / layer_rope_theta -> cfg->swa and the RoPE base of the sliding layers. The forward
// pass ties RoPE to sliding layers with one base, so anything else is refused by name.
static gl_status parse_layers(const struct hf_cx *c, const json_t *tc, struct gl_model_config *cfg)
{
    const int L = cfg->n_layer;
    const json_t *lt = json_object_get(tc, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)L)
            return gl_err_set(c->err, GL_E_FORMAT,
                              "model: %s: %s.layer_types must be a list of num_hidden_layers = %d "
                              "strings",
                              c->path, c->obj, L);
        for (int i = 0; i < L; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && !strcmp(s, "sliding_attention"))
                cfg->swa[i] = 1;
            else if (s && !strcmp(s, "full_attention"))
                cfg->swa[i] = 0;
            else
                return gl_err_set(c->err, GL_E_FORMAT,
                                  "model: %s: %s.layer_types[%d] is not \"sliding_attention\" or "
                                  "\"full_attention\"",
                                  c->path, c->obj, i);
        }
    } else {
        for (int i = 0; i < L; i++) // HF rule, counted from the last layer (arch doc §1)
            cfg->swa[i] = (L - 1 - i) % 4 != 0;
    }
    const json_t *rt = json_object_get(tc, "layer_rope_theta");
    if (!rt || json_is_null(rt))
        return GL_OK;
    if (!json_is_array(rt) || json_array_size(rt) != (size_t)L)
        return gl_err_set(c->err, GL_E_FORMAT,
                          "model: %s: %s.layer_rope_theta must be a list of %d numbers", c->path,
                          c->obj, L);
    for (int i = 0; i < L; i++) {
        const json_t *v = json_array_get(rt, (size_t)i);
        double th = json_is_null(v) ? 0.0 : json_is_number(v) ? json_number_value(v) : -1.0;
        if (!(th >= 0.0) || !isfinite(th))
            return gl_err_set(c->err, GL_E_FORMAT,
                              "model: %s: %s.layer_rope_theta[%d] is not a number >= 0 or null",
                              c->path, c->obj, i);
        if ((th != 0.0) != (cfg->swa[i] != 0))
            return gl_err_set(c->err, GL_E_UNSUPPORTED,
                              "model: %s: %s.layer_rope_theta[%d] = %g on a %s layer: RoPE only on "
                              "sliding layers is supported",
                              c->path, c->obj, i, th, cfg->swa[i] ? "sliding" : "full");
        if (th != 0.0 && (float)th != cfg->rope_base_swa)
            return gl_err_set(c->err, GL_E_UNSUPPORTED,
                              "model: %s: %s.layer_rope_theta[%d] = %g differs from rope_theta "
                              "%g: one RoPE base is supported",
                              c->path, c->obj, i, th, (double)cfg->rope_base_swa);
    }
    return GL_OK;
}

// Records why the encoder cannot run this vision_config (the first reason only). Not an error
// here: a folder without vision tensors still loads as text; gl_model__bind_vision refuses the
// tower with this message when its tensors are present.
static void vision_unsupported(struct gl_model *m, const char *fmt, ...) GL_PRINTF(2, 3);
static void vision_unsupported(struct gl_model *m, const char *fmt, ...)
{
    if (m->vision_unsupported[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->vision_unsupported, sizeof m->vision_unsupported, fmt, ap);
    va_end(ap);
}

// vision_config.layer_types, when present: the encoder hard-wires the §6.1 rule (full attention
// iff (i + 1) % full_every == 0 or i is the last layer); another pattern is unsupported.
static gl_status check_vision_layers(struct gl_model *m, const struct hf_cx *c, const json_t *vc)
{
    const struct gl_vision_config *v = &m->vision_cfg;
    const json_t *lt = json_object_get(vc, "layer_types");
    if (!lt || json_is_null(lt))
        return GL_OK;
    if (!json_is_array(lt) || json_array_size(lt) != (size_t)v->n_layers)
        return gl_err_set(c->err, GL_E_FORMAT,
                          "model: %s: vision_config.layer_types must be a list of "
                          "num_hidden_layers = %d strings",
                          c->path, (int)v->n_layers);
    for (int32_t i = 0; i < v->n_layers; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        const int full = (i + 1) % v->full_every == 0 || i == v->n_layers - 1;
        if (!s || strcmp(s, full ? "full_attention" : "window_attention") != 0)
            vision_unsupported(m,
                               "vision_config.layer_types[%d] must be \"%s\" (full attention every "
                               "%d layers and at the last)",
                               (int)i, full ? "full_attention" : "window_attention",
                               (int)v->full_every);
    }
    return GL_OK;
}

// vision_config -> m->vision_cfg (arch doc §6.1; absent keys take the release values). The
// projection width follows the text tower (out_dim = n_embd) and the final RMS its eps (§6.3
// step 11). The adapter width is the top-level projector_hidden_size (HF), else the older
// vision_config.adapter_dim. A malformed vision_config is an error; one the encoder cannot run is
// recorded (vision_unsupported). Whether the folder has the tower at all is decided by its
// tensors (model_vision.c); the shapes are checked there against this config.
static gl_status parse_vision(struct gl_model *m, const char *path, const json_t *root,
                              struct gl_err *err)
{
    struct gl_vision_config *v = &m->vision_cfg;
    gl_vision_config_default(v);
    v->out_dim = m->cfg.n_embd;
    v->rms_eps = m->cfg.rms_eps;
    m->vision_unsupported[0] = '\0';
    const json_t *vc = json_object_get(root, "vision_config");
    if (!vc || json_is_null(vc))
        return GL_OK;
    struct hf_cx c = {path, "vision_config", err};
    if (!json_is_object(vc))
        return gl_err_set(err, GL_E_FORMAT, "model: %s: vision_config is not an object", path);
    struct {
        const char *key;
        int32_t *dst;
    } dims[] = {{"hidden_size", &v->hidden},          {"num_hidden_layers", &v->n_layers},
                {"num_attention_heads", &v->n_heads}, {"intermediate_size", &v->ffn},
                {"patch_size", &v->patch_size},       {"merge_size", &v->merge},
                {"patch_temporal", &v->patch_frames}, {"pos_emb_height", &v->pos_h},
                {"pos_emb_width", &v->pos_w}};
    gl_status st;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        uint32_t u;
        if ((st = get_u32(&c, vc, dims[i].key, (uint32_t)*dims[i].dst, &u)))
            return st;
        if (u == 0 || u > (1u << 20))
            return gl_err_set(err, GL_E_FORMAT, "model: %s: vision_config.%s = %u is implausible",
                              path, dims[i].key, u);
        *dims[i].dst = (int32_t)u;
    }
    uint32_t adapter;
    const struct hf_cx top = {path, "config", err};
    if ((st = get_u32(&c, vc, "adapter_dim", (uint32_t)v->adapter, &adapter)) ||
        (st = get_u32(&top, root, "projector_hidden_size", adapter, &adapter)))
        return st;
    if (adapter == 0 || adapter > (1u << 20))
        return gl_err_set(err, GL_E_FORMAT, "model: %s: projector_hidden_size %u is implausible",
                          path, adapter);
    v->adapter = (int32_t)adapter;
    if (v->hidden % v->n_heads != 0)
        return gl_err_set(err, GL_E_FORMAT,
                          "model: %s: vision_config.hidden_size %d is not a multiple of "
                          "num_attention_heads %d",
                          path, (int)v->hidden, (int)v->n_heads);
    v->head_dim = v->hidden / v->n_heads;
    if (v->head_dim % 16 != 0 || v->merge != 2)
        vision_unsupported(m,
                           "vision head_dim %d (hidden_size / num_attention_heads) must be a "
                           "multiple of 16 and merge_size (%d) 2",
                           (int)v->head_dim, (int)v->merge);
    const json_t *act = json_object_get(vc, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "gelu") != 0))
        vision_unsupported(m, "vision_config.hidden_act must be \"gelu\" (exact erf)");
    float theta = v->rope_theta;
    const json_t *rp = json_object_get(vc, "rope_parameters");
    struct hf_cx rc = {path, "vision_config.rope_parameters", err};
    if ((st = get_f32(&c, vc, "layer_norm_eps", v->ln_eps, v->ln_eps, &v->ln_eps)) ||
        (st = get_f32(&c, vc, "rope_theta", theta, theta, &theta)) ||
        (json_is_object(rp) && (st = get_f32(&rc, rp, "rope_theta", theta, theta, &theta))))
        return st;
    v->rope_theta = theta;
    if (!(v->ln_eps > 0.0f) || !(v->rope_theta > 1.0f))
        return gl_err_set(err, GL_E_FORMAT,
                          "model: %s: vision_config.layer_norm_eps must be > 0 and rope_theta > 1",
                          path);
    return check_vision_layers(m, &c, vc);
}

gl_status gl_model_hf_vision_config(const char *dir, struct gl_vision_config *cfg, int *present,
                                    struct gl_err *err)
{
    // The whole config as the loader reads it (vision_config over the release values, its
    // output width and RMS eps from the text tower), without loading any tensor.
    struct gl_model *m = gl_calloc(1, sizeof *m);
    if (!m)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory");
    gl_status st = gl_model_hf_config_parse(m, dir, err);
    if (st == GL_OK) {
        *cfg = m->vision_cfg;
        char path[4096];
        snprintf(path, sizeof path, "%s/config.json", dir);
        int missing = 0;
        json_t *root = gl_model__load_json("model", path, &missing, err);
        *present = root && json_is_object(json_object_get(root, "vision_config"));
        json_decref(root);
    }
    gl_free(m);
    return st;
}

// eos_token_id: an int or a list of ints -> m->stop_ids (repeats dropped). 0: absent.
static int stop_ids_from(struct gl_model *m, const json_t *v, const char *path, struct gl_err *err,
                         gl_status *st)
{
    *st = GL_OK;
    if (!v || json_is_null(v))
        return 0;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    m->n_stop = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX) {
            *st = gl_err_set(err, GL_E_FORMAT,
                             "model: %s: eos_token_id must be a token id or a list of them", path);
            return 1;
        }
        int32_t id = (int32_t)json_integer_value(e);
        int dup = 0;
        for (int j = 0; j < m->n_stop; j++)
            dup |= m->stop_ids[j] == id;
        if (!dup && m->n_stop < GL_MODEL_MAX_STOP)
            m->stop_ids[m->n_stop++] = id;
    }
    return 1;
}

// Structure dims and vocab_size (checked against the embedding table at bind time).
static gl_status parse_dims(struct gl_model *m, const struct hf_cx *c, const json_t *tc)
{
    uint32_t v[8], vocab;
    gl_status st;
    if ((st = get_u32(c, tc, "hidden_size", GL_MODEL_DEF_N_EMBD, &v[0])) ||
        (st = get_u32(c, tc, "intermediate_size", GL_MODEL_DEF_N_FF, &v[1])) ||
        (st = get_u32(c, tc, "num_hidden_layers", GL_MODEL_DEF_N_LAYER, &v[2])) ||
        (st = get_u32(c, tc, "num_attention_heads", GL_MODEL_DEF_N_HEAD, &v[3])) ||
        (st = get_u32(c, tc, "max_position_embeddings", GL_MODEL_DEF_N_CTX, &v[7])) ||
        (st = get_u32(c, tc, "vocab_size", 0, &vocab)))
        return st;
    if ((st = get_u32(c, tc, "num_key_value_heads",
                      v[3] < GL_MODEL_DEF_N_HEAD_KV ? v[3] : GL_MODEL_DEF_N_HEAD_KV, &v[4])) ||
        (st = get_u32(c, tc, "head_dim", GL_MODEL_DEF_HEAD_DIM, &v[5])))
        return st;
    v[6] = v[5]; // HF has one head_dim for keys and values
    if ((st = gl_model__set_dims(&m->cfg, v, c->err)))
        return st;
    if (vocab > INT32_MAX)
        return gl_err_set(c->err, GL_E_FORMAT, "model: %s: vocab_size %u too large", c->path,
                          vocab);
    m->hf_vocab_size = (int32_t)vocab;
    return GL_OK;
}

// RoPE base: rope_parameters.rope_theta (current HF) or rope_theta (legacy); no scaling types.
static gl_status parse_rope(struct gl_model_config *cfg, const struct hf_cx *c, const json_t *tc)
{
    float theta = GL_MODEL_DEF_ROPE_BASE;
    gl_status st;
    const json_t *rp = json_object_get(tc, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        struct hf_cx rc = {c->path, "rope_parameters", c->err};
        const json_t *ty = json_object_get(rp, "rope_type");
        if (!json_is_object(rp) ||
            (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "default") != 0)))
            return gl_err_set(c->err, GL_E_UNSUPPORTED,
                              "model: %s: rope_parameters must be {\"rope_type\": \"default\", "
                              "...} (no RoPE scaling is supported)",
                              c->path);
        if ((st = get_f32(&rc, rp, "rope_theta", theta, theta, &theta)))
            return st;
    } else if ((st = get_f32(c, tc, "rope_theta", theta, theta, &theta))) {
        return st;
    }
    cfg->rope_base = cfg->rope_base_swa = theta;
    return GL_OK;
}

// Norm epsilons, output multiplier and soft-cap, qk scale, sliding window.
static gl_status parse_scalars(struct gl_model *m, const struct hf_cx *c, const json_t *tc)
{
    struct gl_model_config *cfg = &m->cfg;
    float softcap_legacy;
    uint32_t window;
    gl_status st;
    if ((st = get_f32(c, tc, "rms_norm_eps", GL_MODEL_DEF_RMS_EPS, GL_MODEL_DEF_RMS_EPS,
                      &cfg->rms_eps)) ||
        (st = get_f32(c, tc, "post_norm_eps", GL_MODEL_DEF_POST_EPS, GL_MODEL_DEF_POST_EPS,
                      &cfg->post_eps)) ||
        (st = get_f32(c, tc, "output_multiplier", GL_MODEL_DEF_LOGIT_SCALE,
                      GL_MODEL_DEF_LOGIT_SCALE, &cfg->logit_scale)) ||
        (st =
             get_f32(c, tc, "output_soft_cap_temp", GL_MODEL_DEF_SOFTCAP, 0.0f, &softcap_legacy)) ||
        // null or 0 disables the cap; never llama.cpp's 30 (arch doc §1).
        (st = get_f32(c, tc, "final_logit_softcapping", softcap_legacy, 0.0f, &cfg->softcap)) ||
        (st = get_f32(c, tc, "qk_scale_factor", GL_MODEL_DEF_QK_SCALE, GL_MODEL_DEF_QK_SCALE,
                      &m->hf_qk_scale)) ||
        (st = get_u32(c, tc, "sliding_window", GL_MODEL_DEF_WINDOW, &window)))
        return st;
    if (json_is_null(json_object_get(tc, "sliding_window")))
        window = 0; // null: sliding layers see everything (HF passes sliding_window=None)
    if (window > INT32_MAX)
        return gl_err_set(c->err, GL_E_FORMAT, "model: %s: sliding_window %u too large", c->path,
                          window);
    cfg->window = (int32_t)window;
    // Native/legacy form 43.78 = 3.87 * sqrt(head_dim): fold it like VLLM (arch doc §1, §2.4).
    if (m->hf_qk_scale >= sqrtf((float)cfg->head_dim))
        m->hf_qk_scale /= sqrtf((float)cfg->head_dim);
    if (!(cfg->rms_eps > 0.0f) || !(cfg->post_eps > 0.0f) || !(cfg->rope_base > 1.0f) ||
        !(cfg->softcap >= 0.0f) || !(m->hf_qk_scale > 0.0f))
        return gl_err_set(c->err, GL_E_FORMAT,
                          "model: %s: rms_norm_eps %g / post_norm_eps %g must be > 0, rope_theta "
                          "%g > 1, final_logit_softcapping %g >= 0, qk_scale_factor %g > 0",
                          c->path, (double)cfg->rms_eps, (double)cfg->post_eps,
                          (double)cfg->rope_base, (double)cfg->softcap, (double)m->hf_qk_scale);
    return GL_OK;
}

// Features the forward pass hard-wires (SiLU, no biases, untied head, QK-norm, output gate,
// embedding norm): a config that turns one off is refused by key.
static gl_status check_features(const struct hf_cx *c, const json_t *root, const json_t *tc)
{
    const char *act_keys[2] = {"hidden_activation", "hidden_act"};
    for (int i = 0; i < 2; i++) {
        const json_t *a = json_object_get(tc, act_keys[i]);
        if (a && (!json_is_string(a) || strcmp(json_string_value(a), "silu") != 0))
            return gl_err_set(c->err, GL_E_UNSUPPORTED, "model: %s: %s.%s must be \"silu\"",
                              c->path, c->obj, act_keys[i]);
    }
    if (json_is_true(json_object_get(tc, "attention_bias")) ||
        json_is_true(json_object_get(root, "tie_word_embeddings")) ||
        json_is_true(json_object_get(tc, "tie_word_embeddings")))
        return gl_err_set(c->err, GL_E_UNSUPPORTED,
                          "model: %s: attention_bias / tie_word_embeddings = true is not supported",
                          c->path);
    gl_status st;
    if ((st = require_not_false(c, tc, "use_qk_norm")) ||
        (st = require_not_false(c, tc, "use_attn_output_gate")) ||
        (st = require_not_false(c, tc, "normalize_tok_embeddings")))
        return st;
    return GL_OK;
}

// Stop ids: generation_config.json, else config.json's eos_token_id (top level, then
// text_config), else the release pair <|end_of_text|>, <|eot|> (arch doc §4).
static gl_status parse_stop_ids(struct gl_model *m, const char *dir, const struct hf_cx *c,
                                const json_t *root, const json_t *tc)
{
    gl_status st = GL_OK;
    m->n_stop = 0;
    m->stop_ids[m->n_stop++] = GL_MODEL_DEF_EOS;
    m->stop_ids[m->n_stop++] = GL_MODEL_DEF_EOT;
    if (!stop_ids_from(m, json_object_get(root, "eos_token_id"), c->path, c->err, &st) &&
        tc != root)
        stop_ids_from(m, json_object_get(tc, "eos_token_id"), c->path, c->err, &st);
    if (st != GL_OK)
        return st;
    char gpath[4096];
    snprintf(gpath, sizeof gpath, "%s/generation_config.json", dir);
    int missing = 0;
    struct gl_err gerr = {0}; // a missing file is not an error: keep err clean of it
    json_t *gen = gl_model__load_json("model", gpath, &missing, &gerr);
    if (!gen)
        return missing ? GL_OK : gl_err_set(c->err, gerr.code, "%s", gerr.msg);
    stop_ids_from(m, json_object_get(gen, "eos_token_id"), gpath, c->err, &st);
    json_decref(gen);
    return st;
}

gl_status gl_model_hf_config_parse(struct gl_model *m, const char *dir, struct gl_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int missing = 0;
    json_t *root = gl_model__load_json("model", path, &missing, err);
    if (!root)
        return err ? err->code : GL_E_IO;
    memset(&m->cfg, 0, sizeof m->cfg);
    gl_status st = GL_OK;
    const json_t *mt = json_object_get(root, "model_type");
    const json_t *tc = json_object_get(root, "text_config");
    struct hf_cx c = {path, "text_config", err};
    if (mt && (!json_is_string(mt) || (strcmp(json_string_value(mt), "muse_glimmer") != 0 &&
                                       strcmp(json_string_value(mt), "muse_glimmer_text") != 0)))
        st = gl_err_set(err, GL_E_UNSUPPORTED,
                        "model: %s: model_type \"%.64s\" is not supported (only muse_glimmer)",
                        path, json_is_string(mt) ? json_string_value(mt) : "?");
    else if (tc && !json_is_null(tc) && !json_is_object(tc))
        st = gl_err_set(err, GL_E_FORMAT, "model: %s: text_config is not an object", path);
    if (st == GL_OK && (!tc || json_is_null(tc))) { // a legacy flat or bare text config
        tc = root;
        c.obj = "config";
    }
    if (st == GL_OK && !(st = parse_dims(m, &c, tc)) && !(st = parse_rope(&m->cfg, &c, tc)) &&
        !(st = parse_scalars(m, &c, tc)) && !(st = parse_layers(&c, tc, &m->cfg)) &&
        !(st = check_features(&c, root, tc)) && !(st = parse_vision(m, path, root, err)))
        st = parse_stop_ids(m, dir, &c, root, tc);
    json_decref(root);
    return st;
}
