// SPDX-License-Identifier: MIT
// A tiny HF text-tower checkpoint for the loader and converter tests: DIR/model.safetensors with
// the arch doc §3.3 tensor names (or, legacy, the older model.layers.N.* spelling), all F32, in a
// fixed order (embed_tokens, norm, lm_head, then per layer the 4 sandwich norms, q, k, v, gate,
// o, mlp gate, up, down). The writer asserts every step: a fixture that cannot be written is a
// broken test, not a test failure.
#pragma once

#include "base/base.h"
#include "safetensors/safetensors.h"

#include <stdio.h>
#include <string.h>

struct t_hf_shape {
    int64_t vocab, embd, heads, heads_kv, head_dim, ffn, layers;
};

// skip: a name left out; bad: a name written with one extra output row (a wrong shape); both may
// be NULL. row_len (may be NULL): each written tensor's row length in elements, by writer index,
// for fill (at most cap entries). fill NULL: zeros.
static inline void t_hf_write_weights(const char *dir, const struct t_hf_shape *s, int legacy,
                                      const char *skip, const char *bad,
                                      gl_safetensors_fill_fn fill, int64_t *row_len, int cap)
{
    struct gl_safetensors_writer *w = gl_safetensors_writer_new();
    GL_ASSERT(w);
    struct gl_err err = {0};
    const char *pre = legacy ? "model." : "model.language_model.";
    int n = 0;
    char nm[160];
    const int64_t E = s->embd, Q = s->heads * s->head_dim, KV = s->heads_kv * s->head_dim;
    // rows 0: a vector of cols elements
#define ADD(rows, cols)                                                                            \
    do {                                                                                           \
        if (!skip || strcmp(skip, nm) != 0) {                                                      \
            const int64_t sh[2] = {(rows) + (bad && !strcmp(bad, nm)), cols};                      \
            GL_ASSERT(gl_safetensors_writer_add_tensor(w, nm, GL_SAFETENSORS_DTYPE_F32,            \
                                                       (rows) ? 2 : 1, (rows) ? sh : &sh[1],       \
                                                       &err) == n);                                \
            GL_ASSERT(!row_len || n < cap);                                                        \
            if (row_len)                                                                           \
                row_len[n] = cols;                                                                 \
            n++;                                                                                   \
        }                                                                                          \
    } while (0)
    snprintf(nm, sizeof nm, "%sembed_tokens.weight", pre);
    ADD(s->vocab, E);
    snprintf(nm, sizeof nm, "%snorm.weight", pre);
    ADD(0, E);
    snprintf(nm, sizeof nm, "lm_head.weight");
    ADD(s->vocab, E);
    static const char *const hf[] = {"input_layernorm", "post_attention_layernorm",
                                     "pre_feedforward_layernorm", "post_feedforward_layernorm"};
    static const char *const lg[] = {"input_layernorm", "post_attn_norm",
                                     "post_attention_layernorm", "post_ffn_norm"};
    static const char *const attn[] = {"q_proj", "k_proj", "v_proj", "gate_proj", "o_proj"};
    for (int l = 0; l < s->layers; l++) {
        for (int i = 0; i < 4; i++) {
            snprintf(nm, sizeof nm, "%slayers.%d.%s.weight", pre, l, legacy ? lg[i] : hf[i]);
            ADD(0, E);
        }
        for (int i = 0; i < 5; i++) {
            const char *a = legacy && i == 3 ? "output_gate_proj" : attn[i];
            snprintf(nm, sizeof nm, "%slayers.%d.self_attn.%s.weight", pre, l, a);
            if (i == 4)
                ADD(E, Q);
            else
                ADD(i == 1 || i == 2 ? KV : Q, E);
        }
        snprintf(nm, sizeof nm, "%slayers.%d.mlp.gate_proj.weight", pre, l);
        ADD(s->ffn, E);
        snprintf(nm, sizeof nm, "%slayers.%d.mlp.up_proj.weight", pre, l);
        ADD(s->ffn, E);
        snprintf(nm, sizeof nm, "%slayers.%d.mlp.down_proj.weight", pre, l);
        ADD(E, s->ffn);
    }
#undef ADD
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    GL_ASSERT(gl_safetensors_writer_write(w, p, fill, NULL, &err) == GL_OK);
    gl_safetensors_writer_delete(w);
}
