// SPDX-License-Identifier: MIT
// The engine tests' micro model (test_engine.c, test_spec.c): a Muse Glimmer GGUF written here,
// vocab 512, E 64, H 4, Hkv 2, D 16, F 96, 4 layers, window 8, 3 sliding : 1 global, F32
// weights from a keyed hash (every value a function of tensor, row and column), so two test
// programs that write it get the same bytes. Static functions: include once per test program.
// micro_model_setup writes it to $TMPDIR, opens it as g_model with the real tokenizer as g_tok,
// and removes both (and the file) at exit.
#pragma once

#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { T_V = 512, T_E = 64, T_H = 4, T_HKV = 2, T_D = 16, T_F = 96, T_L = 4, T_CTX = 512 };

struct tdesc {
    char name[64];
    int64_t ne[2];
    float base, scale;
};
static struct tdesc g_t[64];
static int g_nt;

static void add_t(const char *name, int64_t n_in, int64_t n_out, float base, float scale)
{
    struct tdesc *d = &g_t[g_nt++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ne[0] = n_in;
    d->ne[1] = n_out;
    d->base = base;
    d->scale = scale;
}

static float hval(int ti, int64_t r, int64_t i)
{
    uint64_t x = (uint64_t)(ti + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)r * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)i * 0x94D049BB133111EBull;
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
    float *o = dst;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < d->ne[0]; i++)
            o[r * d->ne[0] + i] = d->base + d->scale * hval((int)ti, row0 + r, i);
    return GL_OK;
}

static void write_model(const char *path)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
    const char *a = "muse-glimmer";
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", a) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("block_count"), T_L) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("embedding_length"), T_E) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("feed_forward_length"), T_F) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.head_count"), T_H) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.head_count_kv"), T_HKV) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.key_length"), T_D) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.value_length"), T_D) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("context_length"), T_CTX) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("rope.freq_base"), 10000.0f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("logit_scale"), 2.0f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.sliding_window"), 8) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("final_logit_softcapping"), 20.0f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.sliding_window_pattern"), 4) == GL_OK);
#undef K
    const int HD = T_H * T_D, KD = T_HKV * T_D;
    g_nt = 0;
    add_t("token_embd.weight", T_E, T_V, 0.0f, 1.0f);
    add_t("output_norm.weight", T_E, 0, 1.0f, 0.2f);
    add_t("output.weight", T_E, T_V, 0.0f, 0.5f);
    for (int l = 0; l < T_L; l++) {
        char nm[64];
#define A(suf, nin, nout, b, sc)                                                                   \
    snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l);                                           \
    add_t(nm, nin, nout, b, sc)
        A("attn_norm", T_E, 0, 1.0f, 0.2f);
        A("attn_q", T_E, HD, 0.0f, 0.3f);
        A("attn_k", T_E, KD, 0.0f, 0.3f);
        A("attn_v", T_E, KD, 0.0f, 0.3f);
        A("attn_gate", T_E, HD, 0.0f, 0.2f);
        A("attn_output", HD, T_E, 0.0f, 0.2f);
        A("attn_q_norm", T_D, 0, 2.0f, 0.5f);
        A("attn_k_norm", T_D, 0, 1.0f, 0.2f);
        A("post_attention_norm", T_E, 0, 1.0f, 0.2f);
        A("ffn_norm", T_E, 0, 1.0f, 0.2f);
        A("ffn_gate", T_E, T_F, 0.0f, 0.2f);
        A("ffn_up", T_E, T_F, 0.0f, 0.2f);
        A("ffn_down", T_F, T_E, 0.0f, 0.15f);
        A("post_ffw_norm", T_E, 0, 1.0f, 0.2f);
#undef A
    }
    for (int i = 0; i < g_nt; i++) {
        int64_t ne[2] = {g_t[i].ne[0], g_t[i].ne[1]};
        GL_ASSERT(gl_gguf_writer_add_tensor(w, g_t[i].name, ne[1] ? 2 : 1, ne, GL_TYPE_F32) == i);
    }
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_gguf_writer_write(w, path, 0, fill, NULL, &err) == GL_OK, "%s", err.msg);
    gl_gguf_writer_delete(w);
}

static struct gl_model *g_model;
static struct gl_tokenizer *g_tok;
static char g_path[256];

static void micro_model_cleanup(void)
{
    gl_model_delete(g_model);
    gl_tokenizer_free(g_tok);
    unlink(g_path);
}

// Writes the model as $TMPDIR/glint_<tag>_<pid>.gguf and opens it and the tokenizer.
static void micro_model_setup(const char *tag)
{
    snprintf(g_path, sizeof g_path, "%s/glint_%s_%d.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag, (int)getpid());
    write_model(g_path);
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    GL_ASSERT_MSG(gl_model_open(&g_model, g_path, &mp, &err) == GL_OK, "%s", err.msg);
    GL_ASSERT_MSG(gl_tokenizer_load_tiktoken(&g_tok, t_vocab_path(), &err) == GL_OK, "%s", err.msg);
    atexit(micro_model_cleanup);
}
