// SPDX-License-Identifier: MIT
// model: the helpers that the GGUF binder (model.c), the HF folder binder (model_hf.c) and the
// vision binder (model_vision.c) all call. They live below those three so that calls between
// the model's files run one way: model.c -> model_hf.c / model_vision.c -> model_base.c.
#include "model/model_int.h"

gl_status gl_model__set_dims(struct gl_model_config *cfg, const uint32_t v[8], struct gl_err *err)
{
    const uint32_t lim = 1u << 20;
    if (v[0] == 0 || v[0] > lim || v[1] == 0 || v[1] > lim || v[3] == 0 || v[3] > 4096 ||
        v[4] == 0 || v[5] == 0 || v[5] > 4096 || v[5] % 2 != 0 || v[7] == 0 || v[7] > (1u << 30))
        return gl_err_set(err, GL_E_FORMAT,
                          "model: implausible dims: embedding_length %u, feed_forward_length %u, "
                          "head_count %u, head_count_kv %u, key_length %u (must be even), "
                          "context_length %u",
                          v[0], v[1], v[3], v[4], v[5], v[7]);
    if (v[2] == 0 || v[2] > GL_MODEL_MAX_LAYERS)
        return gl_err_set(err, GL_E_LIMIT, "model: block_count %u not in 1..%d", v[2],
                          GL_MODEL_MAX_LAYERS);
    if (v[3] % v[4] != 0)
        return gl_err_set(err, GL_E_FORMAT,
                          "model: head_count %u is not a multiple of head_count_kv %u", v[3], v[4]);
    if (v[6] != v[5])
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "model: value_length %u != key_length %u is not supported", v[6], v[5]);
    cfg->n_embd = (int32_t)v[0];
    cfg->n_ff = (int32_t)v[1];
    cfg->n_layer = (int32_t)v[2];
    cfg->n_head = (int32_t)v[3];
    cfg->n_head_kv = (int32_t)v[4];
    cfg->head_dim = (int32_t)v[5];
    cfg->n_ctx_train = (int32_t)v[7];
    return GL_OK;
}

void *gl_model__own(struct gl_model *m, size_t n)
{
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 64;
        void **p = gl_realloc(m->owned, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        m->owned = p;
        m->cap_owned = cap;
    }
    void *b = gl_malloc_aligned(n ? n : 1);
    if (b)
        m->owned[m->n_owned++] = b;
    return b;
}
