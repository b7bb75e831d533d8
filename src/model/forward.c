// SPDX-License-Identifier: MIT
// forward: one batched pass of the Muse Glimmer text tower over a chunk of tokens (arch doc §2):
// embedding row -> scale-less RMS -> L sandwich blocks (QK-norm, RoPE on sliding layers only,
// windowed/causal GQA attention, sigmoid output gate, SwiGLU) -> final norm -> lm_head ->
// x logit_scale -> soft-cap. This file says what a step computes, once, as calls to the backend
// ops (backend.h); backend_cpu.c runs them on the host. A step may carry several sequences (each
// a chunk of tokens at its own positions): every matmul takes all rows of the step together, and
// attention runs per sequence. K/V are read and written only through struct gl_kv_view page
// tables. Here too: input validation, the step's row map, the partial head's group selection and
// the hidden-state captures (gl_model_capture, and the dump hook built on it).
#include "model/backend.h"
#include "model/model.h"
#include "model/model_int.h"

#include <stdlib.h>
#include <string.h>

struct gl_model_ctx {
    const struct gl_model *m;
    const struct gl_kernels *k;
    struct gl_pool *pool;
    // The backends of a step: cpu runs layers 0..dev_first-1 (and the head unless dev_head),
    // dev the layers dev_first.. (and the head when dev_head); either may be NULL (all on the
    // other). hand: n_batch x E, the residual stream handed between them.
    struct gl_backend *cpu, *dev;
    int dev_first, dev_head;
    float *hand;
    int n_batch;
    int64_t n_ctx;
    int32_t *row_seq;             // B: sequence of each row of the step
    int64_t *row_pos;             // B: position of each row
    int32_t *head_src, *head_dst; // B: rows with logits: row of the step, row of the output
    struct gl_kv_view *views;     // n_layer, for gl_model_forward's single sequence
    // partial output head (gl_batch_seq.head_mask): the step's selected 16-row groups of the
    // head, ascending ([ceil(n_vocab / 16)]); off when GLINT_PARTIAL_HEAD=0
    int32_t *head_groups;
    int partial_head;
    float *dump_rows; // gl_model_forward_embd with a dump: (n_layer + 1) x n_batch x E, lazily
};

struct gl_pool *gl_model_ctx_pool(struct gl_model_ctx *c)
{
    return c->pool;
}

const struct gl_kernels *gl_model_ctx_kernels(const struct gl_model_ctx *c)
{
    return c->k;
}

void gl_model_ctx_delete(struct gl_model_ctx *c)
{
    if (!c)
        return;
    if (c->cpu)
        c->cpu->ops->destroy(c->cpu);
    if (c->dev)
        c->dev->ops->destroy(c->dev);
    gl_free_aligned(c->hand);
    gl_free(c->row_seq);
    gl_free(c->row_pos);
    gl_free(c->head_src);
    gl_free(c->head_dst);
    gl_free(c->views);
    gl_free(c->head_groups);
    gl_free_aligned(c->dump_rows);
    gl_pool_delete(c->pool);
    gl_free(c);
}

gl_status gl_model_ctx_new(struct gl_model_ctx **out, const struct gl_model *m, int n_batch,
                           int n_threads, int64_t n_ctx, struct gl_err *err)
{
    return gl_model_ctx_new_dev(out, m, n_batch, n_threads, n_ctx, -1, err);
}

gl_status gl_model_ctx_new_dev(struct gl_model_ctx **out, const struct gl_model *m, int n_batch,
                               int n_threads, int64_t n_ctx, int device, struct gl_err *err)
{
    const struct gl_model_dev d = {.device = device, .n_gpu_layers = -1};
    return gl_model_ctx_new_ex(out, m, n_batch, n_threads, n_ctx, &d, err);
}

uint64_t gl_model_ctx_device_bytes(const struct gl_model_ctx *c, int host)
{
    return c->dev ? gl_backend_vk_bytes(c->dev, host) : 0;
}

gl_status gl_model_ctx_new_ex(struct gl_model_ctx **out, const struct gl_model *m, int n_batch,
                              int n_threads, int64_t n_ctx, const struct gl_model_dev *d,
                              struct gl_err *err)
{
    *out = NULL;
    const struct gl_model_dev cpu_only = {.device = -1, .n_gpu_layers = 0};
    if (!d)
        d = &cpu_only;
    const int L = m->cfg.n_layer;
    if (d->device >= 0 && (d->n_gpu_layers < -1 || d->n_gpu_layers > L + 1))
        return gl_err_set(err, GL_E_INVAL,
                          "--n-gpu-layers %d: not in 0..%d (the model's %d layers, + 1 for the "
                          "output head; -1 or leaving it out: all)",
                          d->n_gpu_layers, L + 1, L);
    const int ngl = d->device < 0 ? 0 : d->n_gpu_layers < 0 ? L + 1 : d->n_gpu_layers;
    if (n_batch <= 0 || n_batch > 65536)
        return gl_err_set(err, GL_E_INVAL, "model: batch size %d not in 1..65536", n_batch);
    if (n_threads <= 0 || n_threads > 256)
        return gl_err_set(err, GL_E_INVAL, "model: thread count %d not in 1..256", n_threads);
    if (n_ctx <= 0 || n_ctx > (int64_t)1 << 30)
        return gl_err_set(err, GL_E_INVAL, "model: context %lld not supported", (long long)n_ctx);
    const struct gl_model_config *cf = &m->cfg;
    struct gl_model_ctx *c = gl_calloc(1, sizeof *c);
    if (!c)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for the context");
    c->m = m;
    c->k = gl_kernels_get();
    c->n_batch = n_batch;
    c->n_ctx = n_ctx;
    c->pool = gl_pool_new(n_threads);
    if (!c->pool) {
        gl_free(c);
        return gl_err_set(err, GL_E_NOMEM, "model: cannot start %d threads", n_threads);
    }
    const size_t B = (size_t)n_batch;
    c->row_seq = gl_malloc(B * sizeof *c->row_seq);
    c->row_pos = gl_malloc(B * sizeof *c->row_pos);
    c->head_src = gl_malloc(B * sizeof *c->head_src);
    c->head_dst = gl_malloc(B * sizeof *c->head_dst);
    c->views = gl_malloc((size_t)cf->n_layer * sizeof *c->views);
    c->head_groups =
        gl_malloc((size_t)(cf->n_vocab + GL_R16_ROWS - 1) / GL_R16_ROWS * sizeof *c->head_groups);
    const char *ph = getenv("GLINT_PARTIAL_HEAD");
    c->partial_head = !(ph && strcmp(ph, "0") == 0);
    if (!c->row_seq || !c->row_pos || !c->head_src || !c->head_dst || !c->views ||
        !c->head_groups) {
        gl_model_ctx_delete(c);
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for step scratch (batch %d, ctx %lld)",
                          n_batch, (long long)n_ctx);
    }
    c->dev_first = L - (ngl < L ? ngl : L);
    c->dev_head = ngl > L;
    struct gl_backend_params bp = {.m = m,
                                   .n_batch = n_batch,
                                   .pool = c->pool,
                                   .k = c->k,
                                   .device = d->device,
                                   .first_layer = c->dev_first,
                                   .head = c->dev_head,
                                   .max_seqs = d->max_seqs,
                                   .head_rows = d->head_rows,
                                   .max_len = d->max_len,
                                   .block_size = d->block_size,
                                   .kv_base = d->kv_base,
                                   .kv_bytes = d->kv_bytes};
    gl_status st = GL_OK;
    // The CPU backend where some layer or the head stays on the host; the device's where some
    // runs there.
    if (c->dev_first > 0 || !c->dev_head)
        st = gl_backend_cpu.create(&c->cpu, &bp, err);
    if (st == GL_OK && ngl > 0)
        st = gl_backend_vk.create(&c->dev, &bp, err);
    if (st == GL_OK && c->cpu && c->dev &&
        !(c->hand = gl_malloc_aligned(B * (size_t)cf->n_embd * sizeof(float))))
        st = gl_err_set(err, GL_E_NOMEM, "model: no memory for the hand-over rows");
    if (st != GL_OK) {
        gl_model_ctx_delete(c);
        return st;
    }
    *out = c;
    return GL_OK;
}

// The partial head's selection for a step (gl_batch_seq.head_mask): the 16-row groups of the
// head holding a token some row with logits may read. Returns how many (into c->head_groups),
// or -1 for the full head: some row has no mask, or the union covers more than 3/4 of the groups
// (scattered group reads then cost about as much as streaming the whole matrix).
static int64_t head_select(struct gl_model_ctx *c, const struct gl_batch_seq *seqs, int n_seqs)
{
    if (!c->partial_head)
        return -1;
    const int64_t V = c->m->cfg.n_vocab, n_groups = (V + GL_R16_ROWS - 1) / GL_R16_ROWS;
    int any = 0;
    for (int i = 0; i < n_seqs; i++) {
        if (seqs[i].logits_row < 0)
            continue;
        if (!seqs[i].head_mask)
            return -1;
        any = 1;
    }
    if (!any)
        return -1;
    int64_t n_sel = 0;
    for (int64_t g = 0; g < n_groups; g++) { // 16 tokens = half of a 32-bit mask word
        uint32_t bits = 0;
        for (int i = 0; i < n_seqs && !bits; i++)
            if (seqs[i].logits_row >= 0)
                bits = seqs[i].head_mask[g / 2] >> (g % 2 * 16) & 0xffffu;
        if (bits)
            c->head_groups[n_sel++] = (int32_t)g;
    }
    return n_sel * 4 <= n_groups * 3 ? n_sel : -1;
}

// The layers listed in cap (NULL: none) whose rows are layer l's output: each gets a capture
// on backend b.
static void capture_layer(struct gl_backend *b, const struct gl_model_capture *cap, int l)
{
    for (int i = 0; cap && i < cap->n_layers; i++)
        if (cap->layers[i] == l)
            b->ops->capture(b, GL_BK_H, cap->out[i]);
}

// The rows with logits (last max(1, n_logits) of each sequence with logits_row >= 0) into
// c->head_src / head_dst; returns how many.
static int64_t head_rows_of(struct gl_model_ctx *c, const struct gl_batch_seq *seqs, int n_seqs)
{
    int64_t n_out = 0, row0 = 0;
    for (int i = 0; i < n_seqs; row0 += seqs[i].n, i++) {
        const struct gl_batch_seq *sq = &seqs[i];
        if (sq->logits_row < 0)
            continue;
        const int32_t nl = sq->n_logits > 0 ? sq->n_logits : 1;
        for (int32_t j = 0; j < nl; j++, n_out++) {
            c->head_src[n_out] = (int32_t)(row0 + sq->n - nl + j);
            c->head_dst[n_out] = sq->logits_row + j;
        }
    }
    return n_out;
}

// Layers l0..l1-1 of a step on backend b (its step begun): from the embedding when l0 is 0,
// else from the residual stream in c->hand.
static void run_layers(struct gl_model_ctx *c, struct gl_backend *b, int l0, int l1,
                       const struct gl_model_capture *cap)
{
    const struct gl_model_config *cf = &c->m->cfg;
    const struct gl_backend_ops *o = b->ops;
    if (l0 == 0) {
        o->embed(b, GL_BK_Y);
        o->rms_norm(b, GL_BK_H, GL_BK_Y, 0, GL_BK_NONE, cf->rms_eps); // the scale-less input norm
        capture_layer(b, cap, -1);
    } else {
        o->load(b, GL_BK_H, c->hand);
    }
    for (int l = l0; l < l1; l++) {
        const int swa = cf->swa[l];
        o->rms_norm(b, GL_BK_X, GL_BK_H, l, GL_BK_ATTN_NORM, cf->rms_eps);
        o->matmul(b, GL_BK_Q, GL_BK_X, l, GL_BK_WQ);
        o->matmul(b, GL_BK_K, GL_BK_X, l, GL_BK_WK);
        o->matmul(b, GL_BK_V, GL_BK_X, l, GL_BK_WV);
        o->matmul(b, GL_BK_G, GL_BK_X, l, GL_BK_WGATE);
        // QK-norm per head (stored weights carry the 3.87 query scale), RoPE, store K/V.
        o->norm_rope_heads(b, GL_BK_Q, l, GL_BK_Q_NORM, swa, cf->rms_eps);
        o->norm_rope_heads(b, GL_BK_K, l, GL_BK_K_NORM, swa, cf->rms_eps);
        o->kv_store(b, l, GL_BK_K, GL_BK_V);
        o->attn(b, l, GL_BK_ATT, GL_BK_Q, swa ? cf->window : 0);
        o->gate(b, GL_BK_ATT, GL_BK_G);
        o->matmul(b, GL_BK_Y, GL_BK_ATT, l, GL_BK_WO);
        o->norm_residual(b, GL_BK_H, GL_BK_Y, l, GL_BK_POST_ATTN_NORM, cf->post_eps);

        o->rms_norm(b, GL_BK_X, GL_BK_H, l, GL_BK_FFN_NORM, cf->rms_eps);
        o->matmul(b, GL_BK_FA, GL_BK_X, l, GL_BK_FFN_GATE);
        o->matmul(b, GL_BK_FB, GL_BK_X, l, GL_BK_FFN_UP);
        o->swiglu(b, GL_BK_FA, GL_BK_FB);
        o->matmul(b, GL_BK_Y, GL_BK_FA, l, GL_BK_FFN_DOWN);
        o->norm_residual(b, GL_BK_H, GL_BK_Y, l, GL_BK_POST_FFW_NORM, cf->post_eps);
        capture_layer(b, cap, l);
    }
}

// The whole step, as backend ops; inputs validated by the callers. Partial offload: the CPU's
// layers (one step of the CPU backend), then the device's (one submission), then the head where
// it runs; the residual stream is handed over through c->hand (exact f32 rows).
static gl_status forward_step(struct gl_model_ctx *c, const struct gl_batch_seq *seqs, int n_seqs,
                              float *logits, const struct gl_model_capture *cap, struct gl_err *err)
{
    const int L = c->m->cfg.n_layer;
    int64_t n = 0;
    for (int i = 0; i < n_seqs; i++)
        for (int32_t t = 0; t < seqs[i].n; t++, n++) {
            c->row_seq[n] = i;
            c->row_pos[n] = seqs[i].pos0 + t;
        }
    GL_ASSERT(n > 0 && n <= c->n_batch);
    const struct gl_bk_step st = {seqs, n_seqs, n, c->row_seq, c->row_pos};
    // Output head on the requested rows only (decode/prefill need just the last one per
    // sequence).
    const int64_t n_out = logits ? head_rows_of(c, seqs, n_seqs) : 0;
    const int64_t n_sel = n_out > 0 ? head_select(c, seqs, n_seqs) : -1;
    const struct gl_bk_head hd = {
        n_out, c->head_src, c->head_dst, logits, n_sel >= 0 ? c->head_groups : NULL, n_sel};
    gl_status s = GL_OK;
    if (c->dev_first > 0) { // the CPU's layers
        struct gl_backend *b = c->cpu;
        b->ops->step_begin(b, &st);
        run_layers(c, b, 0, c->dev_first, cap);
        if (c->dev) // hand over to the device
            b->ops->capture(b, GL_BK_H, c->hand);
        else if (n_out > 0)
            b->ops->head(b, GL_BK_H, &hd);
        s = b->ops->step_end(b, err);
    }
    if (s == GL_OK && c->dev) { // the device's layers
        struct gl_backend *b = c->dev;
        b->ops->step_begin(b, &st);
        run_layers(c, b, c->dev_first, L, cap);
        if (c->dev_head && n_out > 0)
            b->ops->head(b, GL_BK_H, &hd);
        else if (!c->dev_head && n_out > 0)
            b->ops->capture(b, GL_BK_H, c->hand);
        s = b->ops->step_end(b, err);
        if (s == GL_OK && !c->dev_head && n_out > 0) { // the head on the CPU
            b = c->cpu;
            b->ops->step_begin(b, &st);
            b->ops->load(b, GL_BK_H, c->hand);
            b->ops->head(b, GL_BK_H, &hd);
            s = b->ops->step_end(b, err);
        }
    }
    return s;
}

gl_status gl_model_forward_batch(struct gl_model_ctx *c, const struct gl_batch_seq *seqs,
                                 int n_seqs, float *logits, struct gl_err *err)
{
    return gl_model_forward_capture(c, seqs, n_seqs, logits, NULL, err);
}

gl_status gl_model_forward_capture(struct gl_model_ctx *c, const struct gl_batch_seq *seqs,
                                   int n_seqs, float *logits, const struct gl_model_capture *cap,
                                   struct gl_err *err)
{
    const struct gl_model_config *cf = &c->m->cfg;
    if (cap && (cap->n_layers < 0 || (cap->n_layers > 0 && (!cap->layers || !cap->out))))
        return gl_err_set(err, GL_E_INVAL, "forward: capture of %d layers without its lists",
                          cap->n_layers);
    for (int i = 0; cap && i < cap->n_layers; i++)
        if (cap->layers[i] < -1 || cap->layers[i] >= cf->n_layer || !cap->out[i])
            return gl_err_set(err, GL_E_INVAL,
                              "forward: capture %d: layer %d not in -1..%d (or no buffer)", i,
                              cap->layers[i], cf->n_layer - 1);
    if (n_seqs <= 0 || !seqs)
        return gl_err_set(err, GL_E_INVAL, "forward: empty batch (%d sequences)", n_seqs);
    int64_t total = 0;
    for (int i = 0; i < n_seqs; i++) {
        const struct gl_batch_seq *sq = &seqs[i];
        if (sq->n <= 0 || !sq->tokens || !sq->views || sq->pos0 < 0)
            return gl_err_set(err, GL_E_INVAL,
                              "forward: sequence %d of the batch: %d tokens at position %lld "
                              "(tokens and views must be given, n >= 1, pos0 >= 0)",
                              i, sq->n, (long long)sq->pos0);
        total += sq->n;
        if (sq->pos0 + sq->n > c->n_ctx)
            return gl_err_set(err, GL_E_LIMIT,
                              "forward: sequence %d reaches position %lld, the context is %lld", i,
                              (long long)(sq->pos0 + sq->n), (long long)c->n_ctx);
        if (sq->logits_row < -1 || (sq->logits_row >= 0 && !logits) || sq->n_logits < 0 ||
            sq->n_logits > sq->n)
            return gl_err_set(err, GL_E_INVAL,
                              "forward: sequence %d: logits row %d / %d rows (of %d tokens) "
                              "invalid%s",
                              i, sq->logits_row, sq->n_logits, sq->n,
                              logits ? "" : " with no logits buffer");
        for (int l = 0; l < cf->n_layer; l++) {
            const struct gl_kv_view *v = &sq->views[l];
            if (v->block_size <= 0 || !v->pages || !v->base ||
                (int64_t)v->n_blocks * v->block_size < sq->pos0 + sq->n ||
                (unsigned)v->dtype > GL_KV_FP8_E4M3 ||
                v->row_bytes <
                    (size_t)cf->n_head_kv * (size_t)cf->head_dim * gl_kv_dtype_size(v->dtype))
                return gl_err_set(err, GL_E_INVAL,
                                  "forward: sequence %d, layer %d: view of %d blocks x %d does "
                                  "not cover positions up to %lld (or is malformed)",
                                  i, l, v->n_blocks, v->block_size, (long long)(sq->pos0 + sq->n));
        }
        for (int32_t t = 0; t < sq->n; t++)
            if ((!sq->embd || !sq->embd[t]) && (sq->tokens[t] < 0 || sq->tokens[t] >= cf->n_vocab))
                return gl_err_set(err, GL_E_INVAL,
                                  "forward: sequence %d, token %d has id %d, vocab is %d", i, t,
                                  sq->tokens[t], cf->n_vocab);
    }
    if (total > c->n_batch)
        return gl_err_set(err, GL_E_INVAL, "forward: %lld tokens in the step, batch limit is %d",
                          (long long)total, c->n_batch);
    return forward_step(c, seqs, n_seqs, logits, cap, err);
}

gl_status gl_model_forward(struct gl_model_ctx *c, struct gl_kv_cache *kv, const int32_t *tokens,
                           int64_t n, int64_t pos0, float *logits, int all_logits,
                           const struct gl_model_dump *dump, struct gl_err *err)
{
    return gl_model_forward_embd(c, kv, tokens, NULL, n, pos0, logits, all_logits, dump, err);
}

gl_status gl_model_forward_embd(struct gl_model_ctx *c, struct gl_kv_cache *kv,
                                const int32_t *tokens, const float *const *embd, int64_t n,
                                int64_t pos0, float *logits, int all_logits,
                                const struct gl_model_dump *dump, struct gl_err *err)
{
    const struct gl_model_config *cf = &c->m->cfg;
    if (n <= 0)
        return gl_err_set(err, GL_E_INVAL, "forward: empty token batch");
    if (pos0 != gl_kv_cache_len(kv))
        return gl_err_set(err, GL_E_INVAL, "forward: pos0 %lld but the cache holds %lld positions",
                          (long long)pos0, (long long)gl_kv_cache_len(kv));
    if (pos0 + n > gl_kv_cache_capacity(kv) || pos0 + n > c->n_ctx)
        return gl_err_set(err, GL_E_LIMIT,
                          "forward: positions up to %lld exceed the context (cache %lld, ctx %lld)",
                          (long long)(pos0 + n), (long long)gl_kv_cache_capacity(kv),
                          (long long)c->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if ((!embd || !embd[i]) && (tokens[i] < 0 || tokens[i] >= cf->n_vocab))
            return gl_err_set(err, GL_E_INVAL, "forward: token %lld has id %d, vocab is %d",
                              (long long)i, tokens[i], cf->n_vocab);
    const int64_t E = cf->n_embd, L = cf->n_layer, V = cf->n_vocab;
    // A dump captures every layer's rows of each chunk, then hands them over in order.
    int32_t dump_layers[GL_MODEL_MAX_LAYERS + 1];
    float *dump_out[GL_MODEL_MAX_LAYERS + 1];
    const int64_t chunk_floats = (n < c->n_batch ? n : c->n_batch) * E;
    struct gl_model_capture cap = {(int)L + 1, dump_layers, dump_out};
    if (dump && dump->fn) {
        if (!c->dump_rows &&
            !(c->dump_rows = gl_malloc_aligned((size_t)(L + 1) * (size_t)c->n_batch * (size_t)E *
                                               sizeof(float))))
            return gl_err_set(err, GL_E_NOMEM, "forward: no memory for the layer dump");
        for (int64_t l = -1; l < L; l++) {
            dump_layers[l + 1] = (int32_t)l;
            dump_out[l + 1] = c->dump_rows + (l + 1) * chunk_floats;
        }
    }
    for (int l = 0; l < cf->n_layer; l++)
        c->views[l] = gl_kv_cache_view(kv, l);
    for (int64_t done = 0; done < n;) {
        int64_t cn = n - done < c->n_batch ? n - done : c->n_batch;
        struct gl_batch_seq sq = {tokens + done,
                                  (int32_t)cn,
                                  pos0 + done,
                                  c->views,
                                  -1,
                                  0,
                                  NULL,
                                  embd ? embd + done : NULL};
        if (logits && all_logits) {
            sq.logits_row = 0;
            sq.n_logits = (int32_t)cn;
        } else if (logits && done + cn == n) {
            sq.logits_row = 0;
        }
        float *lg = logits && all_logits ? logits + done * V : logits;
        gl_status st = forward_step(c, &sq, 1, sq.logits_row >= 0 ? lg : NULL,
                                    dump && dump->fn ? &cap : NULL, err);
        if (st != GL_OK)
            return st;
        gl_kv_cache__set_len(kv, pos0 + done + cn);
        if (dump && dump->fn) {
            for (int64_t l = -1; l < L; l++)
                dump->fn(dump->user, (int)l, pos0 + done, dump_out[l + 1], cn, E);
            const int32_t nl = sq.n_logits > 0 ? sq.n_logits : 1;
            if (sq.logits_row >= 0)
                dump->fn(dump->user, (int)L, pos0 + done + cn - nl, lg, nl, V);
        }
        done += cn;
    }
    return GL_OK;
}
