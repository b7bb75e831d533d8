// SPDX-License-Identifier: MIT
// HF-folder model loading on micro folders written here (vocab 64, E 32, H 4, Hkv 2, D 16, F 48,
// 4 layers, D 16): config.json text_config parsing and its release defaults, generation_config.json
// stop ids (an int or a list), the legacy model.layers.N.* names, HF layout transforms (Q/K row
// permutation, centered norms +1, synthesised QK-norm weights), and refusals naming the key or
// tensor. Cross-format logit parity is tests/oracle/check_safetensors_parity.sh.
#include "hf_fixture.h"
#include "model/model.h"
#include "safetensors/safetensors.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_V = 64, T_E = 32, T_H = 4, T_HKV = 2, T_D = 16, T_F = 48, T_L = 4 };

static char g_dir[128];

static void write_text(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void remove_file(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    remove(p);
}

#define TEXT_CFG_BASE                                                                              \
    "\"vocab_size\": 64, \"hidden_size\": 32, \"intermediate_size\": 48, "                         \
    "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "           \
    "\"head_dim\": 16, \"max_position_embeddings\": 256, \"sliding_window\": 4"

static void write_config(const char *extra_text, const char *extra_top)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"muse_glimmer\"%s%s, \"text_config\": {" TEXT_CFG_BASE "%s%s}}",
             extra_top[0] ? ", " : "", extra_top, extra_text[0] ? ", " : "", extra_text);
    write_text("config.json", buf);
}

// Row length (elements) of each tensor of the current write, by writer index.
static int64_t g_row_len[256];

// Tensor value: a fixed hash of (tensor index, element), uniform in [-0.3, 0.3).
static gl_status fill(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                      struct gl_err *err)
{
    (void)ctx;
    (void)err;
    float *f = dst;
    for (int64_t i = 0; i < n_rows * g_row_len[ti]; i++) {
        uint32_t h = (uint32_t)(ti * 7919 + (row0 * g_row_len[ti] + i) * 2654435761u);
        h ^= h >> 15;
        f[i] = ((float)(h % 1000) / 1000.0f - 0.5f) * 0.6f;
    }
    return GL_OK;
}

// Writes model.safetensors with the HF (legacy = 0) or legacy names; skip: a name left out.
static void write_weights(int legacy, const char *skip)
{
    static const struct t_hf_shape shape = {T_V, T_E, T_H, T_HKV, T_D, T_F, T_L};
    t_hf_write_weights(g_dir, &shape, legacy, skip, NULL, fill, g_row_len,
                       (int)(sizeof g_row_len / sizeof g_row_len[0]));
}

static gl_status open_model(struct gl_model **m, struct gl_err *err)
{
    struct gl_model_params mp = gl_model_default_params();
    return gl_model_open(m, g_dir, &mp, err);
}

static const float *hf_tensor(const struct gl_model *m, const char *name)
{
    const struct gl_safetensors_tensor *t = gl_safetensors_find(m->st, name);
    return t ? (const float *)t->data : NULL;
}

TEST(test_load_defaults_and_layout)
{
    write_weights(0, NULL);
    write_config("", "");
    remove_file("generation_config.json");
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    REQUIRE(open_model(&m, &err) == GL_OK);
    const struct gl_model_config *c = &m->cfg;
    CHECK(c->n_vocab == T_V && c->n_embd == T_E && c->n_layer == T_L && c->head_dim == T_D);
    CHECK(c->window == 4 && c->rope_base == GL_MODEL_DEF_ROPE_BASE);
    CHECK(c->softcap == GL_MODEL_DEF_SOFTCAP && c->logit_scale == GL_MODEL_DEF_LOGIT_SCALE);
    CHECK(c->rms_eps == GL_MODEL_DEF_RMS_EPS && c->post_eps == GL_MODEL_DEF_POST_EPS);
    // layer_types absent: full iff (L - 1 - i) % 4 == 0.
    CHECK(c->swa[0] && c->swa[1] && c->swa[2] && !c->swa[3]);
    CHECK(m->n_stop == 2 && m->stop_ids[0] == 200001 && m->stop_ids[1] == 200008);
    CHECK(!m->hf_legacy);
    // Centered norm: +1; final norm: as stored; QK-norm: 3.87 / 1.
    const float *in = hf_tensor(m, "model.language_model.layers.1.input_layernorm.weight");
    const float *fin = hf_tensor(m, "model.language_model.norm.weight");
    REQUIRE(in && fin);
    CHECK(m->layers[1].attn_norm[5] == in[5] + 1.0f);
    CHECK(m->output_norm[7] == fin[7]);
    CHECK(m->layers[0].q_norm[3] == GL_MODEL_DEF_QK_SCALE && m->layers[0].k_norm[3] == 1.0f);
    // Q rows: interleaved row 2j + t of a head = HF row t * D/2 + j.
    const float *q = hf_tensor(m, "model.language_model.layers.2.self_attn.q_proj.weight");
    REQUIRE(q && m->layers[2].q.type == GL_TYPE_F32);
    const float *qb = m->layers[2].q.data;
    const int h = 1, j = 2, t = 1;
    CHECK(qb[(h * T_D + 2 * j + t) * T_E + 3] == q[(h * T_D + t * T_D / 2 + j) * T_E + 3]);
    // V is not permuted (borrowed from the mapping).
    CHECK(m->layers[2].v.data ==
          (const void *)hf_tensor(m, "model.language_model.layers.2.self_attn.v_proj.weight"));
    // The forward pass runs.
    struct gl_model_ctx *cx = NULL;
    struct gl_kv_cache *kv = NULL;
    REQUIRE(gl_model_ctx_new(&cx, m, 8, 1, 16, &err) == GL_OK);
    REQUIRE(gl_kv_cache_new(&kv, c, 16, &err) == GL_OK);
    const int32_t ids[6] = {1, 5, 9, 13, 2, 60};
    float lg[T_V];
    CHECK(gl_model_forward(cx, kv, ids, 6, 0, lg, 0, NULL, &err) == GL_OK);
    int finite = 1;
    for (int i = 0; i < T_V; i++)
        finite &= lg[i] == lg[i] && lg[i] <= 20.0f && lg[i] >= -20.0f;
    CHECK(finite);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(cx);
    gl_model_delete(m);
}

TEST(test_config_keys)
{
    write_weights(0, NULL);
    write_config("\"final_logit_softcapping\": null, \"qk_scale_factor\": 15.48, "
                 "\"layer_types\": [\"full_attention\", \"sliding_attention\", "
                 "\"sliding_attention\", \"full_attention\"], "
                 "\"layer_rope_theta\": [0, 10000.0, 10000.0, null], "
                 "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}, "
                 "\"post_norm_eps\": 1e-6",
                 "\"vision_config\": {\"hidden_size\": 64, \"num_attention_heads\": 4}");
    write_text("generation_config.json", "{\"eos_token_id\": 7}");
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    REQUIRE(open_model(&m, &err) == GL_OK);
    CHECK(m->cfg.softcap == 0.0f);
    // The native form 3.87 * sqrt(head_dim) is folded back to 3.87.
    CHECK(m->hf_qk_scale > 3.869f && m->hf_qk_scale < 3.871f);
    CHECK(!m->cfg.swa[0] && m->cfg.swa[1] && m->cfg.swa[2] && !m->cfg.swa[3]);
    CHECK(m->cfg.rope_base_swa == 10000.0f && m->cfg.post_eps == 1e-6f);
    CHECK(m->n_stop == 1 && m->stop_ids[0] == 7);
    gl_model_delete(m);
    write_text("generation_config.json", "{\"eos_token_id\": [5, 6, 5]}");
    REQUIRE(open_model(&m, &err) == GL_OK);
    CHECK(m->n_stop == 2 && m->stop_ids[0] == 5 && m->stop_ids[1] == 6);
    gl_model_delete(m);
    remove_file("generation_config.json");
}

TEST(test_legacy_names)
{
    write_weights(1, NULL);
    write_config("", "");
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    REQUIRE(open_model(&m, &err) == GL_OK);
    CHECK(m->hf_legacy);
    // Legacy post_attention_layernorm is the pre-FFN norm.
    const float *pre = hf_tensor(m, "model.layers.0.post_attention_layernorm.weight");
    const float *post = hf_tensor(m, "model.layers.0.post_attn_norm.weight");
    REQUIRE(pre && post);
    CHECK(m->layers[0].ffn_norm[2] == pre[2] + 1.0f);
    CHECK(m->layers[0].post_attn_norm[2] == post[2] + 1.0f);
    gl_model_delete(m);
}

static void expect_fail(const char *text_extra, const char *top_extra, gl_status want,
                        const char *needle)
{
    write_config(text_extra, top_extra);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    gl_status st = open_model(&m, &err);
    CHECKF(st == want && m == NULL && strstr(err.msg, needle) != NULL, "%s -> %s: %s", text_extra,
           gl_status_name(st), err.msg);
    gl_model_delete(m);
}

TEST(test_refusals)
{
    write_weights(0, NULL);
    expect_fail("", "\"model_type\": \"llama\"", GL_E_FORMAT, "config.json"); // duplicate key
    expect_fail("\"rope_parameters\": {\"rope_type\": \"yarn\"}", "", GL_E_UNSUPPORTED,
                "rope_parameters");
    expect_fail("\"layer_rope_theta\": [5e5, 5e5, 5e5, 5e5]", "", GL_E_UNSUPPORTED,
                "layer_rope_theta[3] = 500000 on a full layer");
    expect_fail("\"layer_rope_theta\": [1, 1, 1, 0]", "", GL_E_UNSUPPORTED, "one RoPE base");
    expect_fail("\"hidden_activation\": \"gelu\"", "", GL_E_UNSUPPORTED, "hidden_activation");
    expect_fail("\"use_qk_norm\": false", "", GL_E_UNSUPPORTED, "use_qk_norm");
    expect_fail("\"rms_norm_eps\": \"x\"", "", GL_E_FORMAT, "rms_norm_eps");
    expect_fail("\"layer_types\": [\"full_attention\"]", "", GL_E_FORMAT, "layer_types");
    expect_fail("", "\"vision_config\": {\"hidden_size\": 10, \"num_attention_heads\": 3}",
                GL_E_FORMAT, "vision_config");
    expect_fail("", "\"tie_word_embeddings\": true", GL_E_UNSUPPORTED, "tie_word_embeddings");
    write_text("config.json", "{\"model_type\": \"llama\"}");
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    CHECK(open_model(&m, &err) == GL_E_UNSUPPORTED && strstr(err.msg, "llama"));
    // vocab_size disagreeing with the table, and a missing tensor named by its HF name.
    char buf[1024];
    snprintf(buf, sizeof buf, "{\"text_config\": {" TEXT_CFG_BASE "}}");
    char *v = strstr(buf, "\"vocab_size\": 64");
    REQUIRE(v);
    memcpy(v, "\"vocab_size\": 65", 16);
    write_text("config.json", buf);
    CHECK(open_model(&m, &err) == GL_E_FORMAT && strstr(err.msg, "vocab_size 65"));
    write_config("", "");
    write_weights(0, "model.language_model.layers.3.mlp.up_proj.weight");
    CHECK(open_model(&m, &err) == GL_E_FORMAT &&
          strstr(err.msg, "model.language_model.layers.3.mlp.up_proj.weight"));
    remove_file("config.json");
    CHECK(open_model(&m, &err) == GL_E_IO && strstr(err.msg, "config.json"));
}

static void cleanup(void)
{
    remove_file("model.safetensors");
    remove_file("config.json");
    remove_file("generation_config.json");
    rmdir(g_dir);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/glint_test_model_hf_%d", (int)getpid());
    mkdir(g_dir, 0755);
    atexit(cleanup);
    RUN_TESTS(test_load_defaults_and_layout, test_config_keys, test_legacy_names, test_refusals);
}
