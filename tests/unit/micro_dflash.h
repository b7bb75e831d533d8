// SPDX-License-Identifier: MIT
// The DFlash tests' micro drafter (test_dflash.c, test_spec.c) for the micro target of
// micro_model.h: arch dflash, H 4, Hkv 2, D 16, F 96, 2 blocks, window 8, block 16, target layers
// {0, 1, 2} stored as 1, 2, 3, mask id 500, F32 weights from micro_model.h's keyed hash.
// write_drafter's knobs break one thing at a time for the loader's refusal tests. Static
// functions: include once per test program, after micro_model.h.
#pragma once

#include "micro_model.h"

#include <string.h>

enum { D_H = 4, D_HKV = 2, D_D = 16, D_F = 96, D_L = 2, D_MASK = 500, D_BLOCK = 16 };

// What to break in the written drafter.
struct dknobs {
    const char *arch;
    int n_targets; // -1: omit the key
    int32_t targets[4];
    int targets_f32;       // write the array as F32
    const char *bad_shape; // this tensor gets ne[0] + 1
    const char *omit;      // this tensor is left out
    const char *extra;     // an extra 1-D tensor of this name
    int32_t mask;
};

static struct dknobs good_knobs(void)
{
    struct dknobs k = {"dflash", 3, {1, 2, 3, 0}, 0, NULL, NULL, NULL, D_MASK};
    return k;
}

static void write_drafter(const char *path, const struct dknobs *kn)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "dflash.%s", suffix), key)
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", kn->arch) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("block_count"), D_L) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("context_length"), T_CTX) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("embedding_length"), T_E) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("feed_forward_length"), D_F) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.head_count"), D_H) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.head_count_kv"), D_HKV) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.key_length"), D_D) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.value_length"), D_D) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("rope.freq_base"), 10000.0f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("block_size"), D_BLOCK) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.sliding_window"), 8) == GL_OK);
    uint8_t pat[D_L] = {1, 1};
    GL_ASSERT(gl_gguf_writer_add_arr(w, K("attention.sliding_window_pattern"), GL_GGUF_BOOL, pat,
                                     D_L) == GL_OK);
    if (kn->n_targets >= 0) {
        if (kn->targets_f32) {
            float f[4];
            for (int i = 0; i < kn->n_targets; i++)
                f[i] = (float)kn->targets[i];
            GL_ASSERT(gl_gguf_writer_add_arr(w, K("target_layers"), GL_GGUF_F32, f,
                                             (uint64_t)kn->n_targets) == GL_OK);
        } else {
            GL_ASSERT(gl_gguf_writer_add_arr(w, K("target_layers"), GL_GGUF_I32, kn->targets,
                                             (uint64_t)kn->n_targets) == GL_OK);
        }
    }
    GL_ASSERT(gl_gguf_writer_add_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)kn->mask) ==
              GL_OK);
#undef K
    const int HD = D_H * D_D, KD = D_HKV * D_D, NT = kn->n_targets > 0 ? kn->n_targets : 3;
    g_nt = 0;
    add_t("fc.weight", NT * T_E, T_E, 0.0f, 0.25f);
    add_t("enc.output_norm.weight", T_E, 0, 1.0f, 0.2f);
    add_t("output_norm.weight", T_E, 0, 1.0f, 0.2f);
    for (int l = 0; l < D_L; l++) {
        char nm[64];
#define A(suf, nin, nout, b, sc)                                                                   \
    snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l);                                           \
    add_t(nm, nin, nout, b, sc)
        A("attn_norm", T_E, 0, 1.0f, 0.2f);
        A("attn_q", T_E, HD, 0.0f, 0.3f);
        A("attn_k", T_E, KD, 0.0f, 0.3f);
        A("attn_v", T_E, KD, 0.0f, 0.3f);
        A("attn_output", HD, T_E, 0.0f, 0.2f);
        A("attn_q_norm", D_D, 0, 1.0f, 0.3f);
        A("attn_k_norm", D_D, 0, 1.0f, 0.3f);
        A("ffn_norm", T_E, 0, 1.0f, 0.2f);
        A("ffn_gate", T_E, D_F, 0.0f, 0.2f);
        A("ffn_up", T_E, D_F, 0.0f, 0.2f);
        A("ffn_down", D_F, T_E, 0.0f, 0.15f);
#undef A
    }
    if (kn->extra)
        add_t(kn->extra, 4, 0, 0.0f, 1.0f);
    int64_t ti = 0;
    for (int i = 0; i < g_nt; i++) {
        if (kn->omit && !strcmp(g_t[i].name, kn->omit)) {
            memmove(&g_t[i], &g_t[i + 1], (size_t)(g_nt - i - 1) * sizeof g_t[0]);
            g_nt--;
            i--;
            continue;
        }
        int64_t ne[2] = {g_t[i].ne[0], g_t[i].ne[1]};
        if (kn->bad_shape && !strcmp(g_t[i].name, kn->bad_shape)) {
            ne[0] += 1;
            g_t[i].ne[0] = ne[0];
        }
        GL_ASSERT(gl_gguf_writer_add_tensor(w, g_t[i].name, ne[1] ? 2 : 1, ne, GL_TYPE_F32) ==
                  ti++);
    }
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_gguf_writer_write(w, path, 0, fill, NULL, &err) == GL_OK, "%s", err.msg);
    gl_gguf_writer_delete(w);
}
