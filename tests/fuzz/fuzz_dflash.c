// SPDX-License-Identifier: MIT
// Fuzz target for the DFlash drafter loader (src/model/dflash.h): the input is opened as a GGUF
// from memory and, when it opens, handed to gl_dflash_load. A refusal must come with a "dflash: "
// message and no drafter; an accepted drafter must hold a config within the loader's stated
// limits, and every bound weight's first and last row bytes are read so a sanitizer sees a
// weight the checks let through past its tensor.
#include "gguf/gguf.h"
#include "model/dflash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void touch(const struct gl_weight *w)
{
    const uint8_t *p = w->data;
    if (w->n_out < 1 || w->row_bytes == 0)
        abort();
    sink += p[0] + p[(size_t)w->n_out * w->row_bytes - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    op.use_mmap = 0;
    struct gl_err err = {0};
    if (gl_gguf_open_memory(&g, data, size, &op, &err) != GL_OK)
        return 0;
    struct gl_dflash *d = NULL;
    memset(&err, 0, sizeof err);
    if (gl_dflash_load(&d, g, &err) != GL_OK) {
        if (d || strncmp(err.msg, "dflash: ", 8) != 0)
            abort();
        gl_gguf_close(g);
        return 0;
    }
    const struct gl_dflash_config *c = &d->cfg;
    if (c->n_layer < 1 || c->n_layer > GL_DFLASH_MAX_LAYERS || c->n_head % c->n_head_kv != 0 ||
        c->head_dim % 2 != 0 || c->n_target < 1 || c->n_target > GL_DFLASH_MAX_TARGETS ||
        c->block_size < 1 || c->block_size > GL_DFLASH_MAX_BLOCK || c->mask_token_id < 0 ||
        !(c->rms_eps > 0.0f) || !(c->kq_scale > 0.0f))
        abort();
    for (int i = 0; i < c->n_target; i++)
        if (c->target_layers[i] < 0 || c->target_layers[i] >= GL_MODEL_MAX_LAYERS)
            abort();
    touch(&d->fc);
    sink += (uint64_t)(d->enc_norm[c->n_embd - 1] > 0) + (uint64_t)(d->output_norm[0] > 0);
    for (int l = 0; l < c->n_layer; l++) {
        const struct gl_dflash_layer *L = &d->layers[l];
        touch(&L->q), touch(&L->k), touch(&L->v), touch(&L->o);
        touch(&L->ffn_gate), touch(&L->ffn_up), touch(&L->ffn_down);
        sink += (uint64_t)(L->q_norm[c->head_dim - 1] > 0) + (uint64_t)(L->ffn_norm[0] > 0);
    }
    gl_dflash_delete(d);
    gl_gguf_close(g);
    return 0;
}
