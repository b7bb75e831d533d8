// SPDX-License-Identifier: MIT
// backend: what every backend shares: activation widths and the (layer, role) -> tensor map.
#include "model/backend.h"

int64_t gl_bk_buf_width(const struct gl_model_config *cf, enum gl_bk_buf b)
{
    switch (b) {
    case GL_BK_H:
    case GL_BK_X:
    case GL_BK_Y:
        return cf->n_embd;
    case GL_BK_Q:
    case GL_BK_G:
    case GL_BK_ATT:
        return (int64_t)cf->n_head * cf->head_dim;
    case GL_BK_K:
    case GL_BK_V:
        return (int64_t)cf->n_head_kv * cf->head_dim;
    case GL_BK_FA:
    case GL_BK_FB:
        return cf->n_ff;
    case GL_BK_BUF_COUNT:
        break;
    }
    GL_ASSERT(!"unknown activation buffer");
    return 0;
}

const struct gl_weight *gl_bk_matrix(const struct gl_model *m, int layer, enum gl_bk_tensor t)
{
    if (t == GL_BK_OUTPUT)
        return &m->output;
    if (t == GL_BK_TOK_EMBD)
        return &m->tok_embd;
    GL_ASSERT(layer >= 0 && layer < m->cfg.n_layer);
    const struct gl_layer *ly = &m->layers[layer];
    switch (t) {
    case GL_BK_WQ:
        return &ly->q;
    case GL_BK_WK:
        return &ly->k;
    case GL_BK_WV:
        return &ly->v;
    case GL_BK_WGATE:
        return &ly->gate;
    case GL_BK_WO:
        return &ly->o;
    case GL_BK_FFN_GATE:
        return &ly->ffn_gate;
    case GL_BK_FFN_UP:
        return &ly->ffn_up;
    case GL_BK_FFN_DOWN:
        return &ly->ffn_down;
    default:
        break;
    }
    GL_ASSERT(!"not a matrix role");
    return NULL;
}

const float *gl_bk_vector(const struct gl_model *m, int layer, enum gl_bk_tensor t)
{
    if (t == GL_BK_NONE)
        return NULL;
    if (t == GL_BK_OUTPUT_NORM)
        return m->output_norm;
    GL_ASSERT(layer >= 0 && layer < m->cfg.n_layer);
    const struct gl_layer *ly = &m->layers[layer];
    switch (t) {
    case GL_BK_ATTN_NORM:
        return ly->attn_norm;
    case GL_BK_Q_NORM:
        return ly->q_norm;
    case GL_BK_K_NORM:
        return ly->k_norm;
    case GL_BK_POST_ATTN_NORM:
        return ly->post_attn_norm;
    case GL_BK_FFN_NORM:
        return ly->ffn_norm;
    case GL_BK_POST_FFW_NORM:
        return ly->post_ffw_norm;
    default:
        break;
    }
    GL_ASSERT(!"not a vector role");
    return NULL;
}
