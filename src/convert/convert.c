// SPDX-License-Identifier: MIT
// convert: HF folder -> text GGUF (+ vision GGUF). Contract in convert.h. Two phases: a plan
// (every output tensor with its source, shape, type and transform, all validated against
// config.json before a byte is written), then one streaming write per file in which the gguf
// writer's fill callback converts rows on the thread pool.
#include "convert/convert.h"

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/dflash.h"
#include "model/make_model.h"
#include "model/model.h"
#include "quant/quant.h"
#include "safetensors/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_gguf.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARCH            "muse-glimmer"
#define CV_MAX_THREADS  8
#define CV_TEMPLATE_MAX (1u << 20) // chat template size limit (the release's is 9,992 bytes)
#define CV_CHANNELS     3          // RGB planes of a patch (arch doc §6.2)

// What output row r of a tensor is made from.
enum cv_xform {
    CV_PLAIN,    // source row r as is
    CV_ROPE,     // source row h*D + t*D/2 + j for output row h*D + 2j + t (rotate-half -> pairs)
    CV_CENTERED, // source row + 1 (HF stores the sandwich norms as w - 1)
    CV_CONST,    // every element = value (synthesised QK-norm weights)
    CV_TSUM,     // patch kernel row: the sum of the T temporal slabs' rows (llama.cpp's conv2d)
};

struct cv_tensor {
    char name[96];                           // GGUF name
    const struct gl_safetensors_tensor *src; // NULL for CV_CONST
    uint32_t n_dims;
    int64_t ne[4]; // ggml order; a row is ne[0] elements of the source's linear order
    enum gl_type type;
    enum cv_xform xf;
    float value; // CV_CONST
};

struct cv_plan {
    const struct gl_safetensors *st;
    const char *dir;
    struct cv_tensor *t;
    int64_t n, cap;
    int64_t max_ne0;
    int64_t head_dim;  // rows per head of a CV_ROPE tensor (elements per head of a CV_ROPE vector)
    int64_t frames;    // temporal slabs of a CV_TSUM source
    uint64_t n_params; // elements of every tensor (general.size_label)
};

struct gl_convert_params gl_convert_default_params(void)
{
    struct gl_convert_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static void plan_free(struct cv_plan *pl)
{
    gl_free(pl->t);
    pl->t = NULL;
    pl->n = pl->cap = 0;
}

static const char *type_name(enum gl_type t)
{
    const struct gl_type_traits *tr = gl_type_traits_of((uint32_t)t);
    return tr && tr->name ? tr->name : "?";
}

static void shape_str(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
}

// Appends an output tensor. hf: the source (NULL for CV_CONST); hf_name for messages.
static gl_status plan_push(struct cv_plan *pl, const char *name, const char *hf_name,
                           const struct gl_safetensors_tensor *hf, uint32_t n_dims,
                           const int64_t *ne, enum gl_type type, enum cv_xform xf, float value,
                           struct gl_err *err)
{
    if (pl->n == pl->cap) {
        int64_t cap = pl->cap ? 2 * pl->cap : 256;
        struct cv_tensor *t = gl_realloc(pl->t, (size_t)cap * sizeof *t);
        if (!t)
            return gl_err_set(err, GL_E_NOMEM, "convert: out of memory for the tensor plan");
        pl->t = t;
        pl->cap = cap;
    }
    if (gl_type_row_size(type, ne[0]) == 0) {
        const struct gl_type_traits *tr = gl_type_traits_of((uint32_t)type);
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "convert: tensor %s (%s): rows of %lld elements are not a whole number "
                          "of %s blocks (%lld elements); choose another --type",
                          hf_name, name, (long long)ne[0], type_name(type),
                          tr ? (long long)tr->blck_size : 0LL);
    }
    struct cv_tensor *t = &pl->t[pl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->src = hf;
    t->n_dims = n_dims;
    uint64_t nel = 1;
    for (uint32_t d = 0; d < 4; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        nel *= (uint64_t)t->ne[d];
    }
    t->type = type;
    t->xf = xf;
    t->value = value;
    pl->n_params += nel;
    if (t->ne[0] > pl->max_ne0)
        pl->max_ne0 = t->ne[0];
    return GL_OK;
}

// Looks up hf_name and checks its row-major shape against want[0..ndim). want[i] < 0: any
// (then filled in from the tensor).
static gl_status find_checked(const struct cv_plan *pl, const char *hf_name, const char *gg_name,
                              int ndim, int64_t *want, const struct gl_safetensors_tensor **out,
                              struct gl_err *err)
{
    const struct gl_safetensors_tensor *t = gl_safetensors_find(pl->st, hf_name);
    if (!t)
        return gl_err_set(err, GL_E_FORMAT, "convert: tensor %s (for %s) is missing in %s", hf_name,
                          gg_name, pl->dir);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = want[i] < 0 || t->shape[i] == want[i];
    if (!ok) {
        char have[128], expect[128];
        shape_str(have, sizeof have, t->shape, t->ndim);
        shape_str(expect, sizeof expect, want, ndim);
        return gl_err_set(err, GL_E_FORMAT,
                          "convert: tensor %s in %s has shape [%s], expected [%s] (from "
                          "config.json; -1 = any)",
                          hf_name, gl_safetensors_shard_path(pl->st, t->shard), have, expect);
    }
    for (int i = 0; i < ndim; i++)
        want[i] = t->shape[i];
    *out = t;
    return GL_OK;
}

// A matrix HF [n_out, n_in] -> GGUF ne [n_in, n_out]; a vector (n_out == 0) HF [n_in] -> F32.
static gl_status add_hf(struct cv_plan *pl, const char *name, const char *hf_name, int64_t n_out,
                        int64_t n_in, enum gl_type type, enum cv_xform xf, struct gl_err *err)
{
    int64_t want[2] = {n_out, n_in};
    const struct gl_safetensors_tensor *t;
    gl_status st = n_out ? find_checked(pl, hf_name, name, 2, want, &t, err)
                         : find_checked(pl, hf_name, name, 1, want + 1, &t, err);
    if (st != GL_OK)
        return st;
    const int64_t ne[2] = {want[1], want[0]};
    return plan_push(pl, name, hf_name, t, n_out ? 2 : 1, ne, n_out ? type : GL_TYPE_F32, xf, 0.0f,
                     err);
}

// ---- text plan ----

struct cv_text {
    struct gl_model m; // only the config fields are used (gl_model_hf_config_parse)
    int legacy;
    uint32_t file_type;
    int64_t n_vocab;
};

static gl_status add_text(struct cv_plan *pl, const char *gg, const struct cv_text *tx,
                          const char *recipe, int64_t n_out, int64_t n_in, enum cv_xform xf,
                          struct gl_err *err)
{
    char hn[160];
    if (!gl_model_hf_tensor_name(gg, tx->legacy, hn, sizeof hn))
        return gl_err_set(err, GL_E_INTERNAL, "convert: no HF name for %s", gg);
    int type = gl_make_model_recipe_type(recipe, gg, tx->m.cfg.n_layer, NULL);
    GL_ASSERT(type >= 0); // the recipe was validated by the caller
    return add_hf(pl, gg, hn, n_out, n_in, (enum gl_type)type, xf, err);
}

static gl_status plan_text(struct cv_plan *pl, struct cv_text *tx, const char *recipe,
                           struct gl_err *err)
{
    const struct gl_model_config *c = &tx->m.cfg;
    const int64_t E = c->n_embd, F = c->n_ff, D = c->head_dim;
    const int64_t QD = (int64_t)c->n_head * D, KD = (int64_t)c->n_head_kv * D;
    pl->head_dim = D;
    // The vocabulary size comes from the embedding table (checked against config vocab_size).
    const int64_t V = tx->m.hf_vocab_size > 0 ? tx->m.hf_vocab_size : -1;
    gl_status st = add_text(pl, "token_embd.weight", tx, recipe, V, E, CV_PLAIN, err);
    if (st != GL_OK)
        return st;
    tx->n_vocab = pl->t[pl->n - 1].ne[1];
    if ((st = add_text(pl, "output_norm.weight", tx, recipe, 0, E, CV_PLAIN, err)) ||
        (st = add_text(pl, "output.weight", tx, recipe, tx->n_vocab, E, CV_PLAIN, err)))
        return st;
    for (int l = 0; l < c->n_layer; l++) {
        char nm[14][64];
        static const char *const roles[14] = {"attn_norm",   "attn_q",        "attn_k",
                                              "attn_v",      "attn_gate",     "attn_output",
                                              "attn_q_norm", "attn_k_norm",   "post_attention_norm",
                                              "ffn_norm",    "post_ffw_norm", "ffn_gate",
                                              "ffn_up",      "ffn_down"};
        for (int i = 0; i < 14; i++)
            snprintf(nm[i], sizeof nm[i], "blk.%d.%s.weight", l, roles[i]);
        const int64_t qk_ne[1] = {D};
        if ((st = add_text(pl, nm[0], tx, recipe, 0, E, CV_CENTERED, err)) ||
            (st = add_text(pl, nm[1], tx, recipe, QD, E, CV_ROPE, err)) ||
            (st = add_text(pl, nm[2], tx, recipe, KD, E, CV_ROPE, err)) ||
            (st = add_text(pl, nm[3], tx, recipe, KD, E, CV_PLAIN, err)) ||
            (st = add_text(pl, nm[4], tx, recipe, QD, E, CV_PLAIN, err)) ||
            (st = add_text(pl, nm[5], tx, recipe, E, QD, CV_PLAIN, err)) ||
            // HF has no QK-norm weights: the scale-less norm plus qk_scale_factor (§2.4).
            (st = plan_push(pl, nm[6], nm[6], NULL, 1, qk_ne, GL_TYPE_F32, CV_CONST,
                            tx->m.hf_qk_scale, err)) ||
            (st = plan_push(pl, nm[7], nm[7], NULL, 1, qk_ne, GL_TYPE_F32, CV_CONST, 1.0f, err)) ||
            (st = add_text(pl, nm[8], tx, recipe, 0, E, CV_CENTERED, err)) ||
            (st = add_text(pl, nm[9], tx, recipe, 0, E, CV_CENTERED, err)) ||
            (st = add_text(pl, nm[10], tx, recipe, 0, E, CV_CENTERED, err)) ||
            (st = add_text(pl, nm[11], tx, recipe, F, E, CV_PLAIN, err)) ||
            (st = add_text(pl, nm[12], tx, recipe, F, E, CV_PLAIN, err)) ||
            (st = add_text(pl, nm[13], tx, recipe, E, F, CV_PLAIN, err)))
            return st;
    }
    return GL_OK;
}

// ---- vision plan ----

#define VT "model.vision_tower."

// The patch embedding: HF [hidden, T*3*p*p] (or the 5-D conv3d form [hidden, T, 3, p, p], same
// bytes) -> llama.cpp's conv2d kernel v.patch_embd.weight ne [p, p, 3, hidden] holding the sum of
// the T slabs (what llama.cpp's graph convolves; F32, or F16 for an F16 file: its converter's
// rule for patch kernels), and the full kernel as GL_MMPROJ_PATCH_T ne [p*p, 3, T, hidden] (the
// HF bytes in the matrix type, F32 for a quantized one), which llama.cpp never asks for and glint
// prefers: video works and image rows equal the HF folder's (vision_gguf.h).
static gl_status add_patch(struct cv_plan *pl, const struct gl_vision_config *vc, enum gl_type type,
                           struct gl_err *err)
{
    const char *hn = VT "patch_embedder.patch_embedding.weight";
    const int64_t p = vc->patch_size, T = vc->patch_frames;
    const struct gl_safetensors_tensor *t = gl_safetensors_find(pl->st, hn);
    int64_t want5[5] = {vc->hidden, T, CV_CHANNELS, p, p};
    int64_t want2[2] = {vc->hidden, T * CV_CHANNELS * p * p};
    gl_status st = t && t->ndim == 5 ? find_checked(pl, hn, GL_VGGUF_PATCH, 5, want5, &t, err)
                                     : find_checked(pl, hn, GL_VGGUF_PATCH, 2, want2, &t, err);
    if (st != GL_OK)
        return st;
    if (T != 2)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "convert: patch_temporal %lld: llama.cpp's mmproj layout has 2 slabs",
                          (long long)T);
    pl->frames = T;
    const int flt = type == GL_TYPE_F32 || type == GL_TYPE_F16 || type == GL_TYPE_BF16;
    const int64_t ne[4] = {p, p, CV_CHANNELS, vc->hidden},
                  ne_t[4] = {p * p, CV_CHANNELS, T, vc->hidden};
    if ((st = plan_push(pl, GL_VGGUF_PATCH, hn, t, 4, ne,
                        type == GL_TYPE_F16 ? GL_TYPE_F16 : GL_TYPE_F32, CV_TSUM, 0.0f, err)))
        return st;
    return plan_push(pl, GL_MMPROJ_PATCH_T, hn, t, 4, ne_t, flt ? type : GL_TYPE_F32, CV_PLAIN,
                     0.0f, err);
}

// q/k weights and biases (xf CV_ROPE) go to llama.cpp's pair order, as its converter writes them.
static gl_status add_vis(struct cv_plan *pl, const char *hf, int64_t n_out, int64_t n_in,
                         enum gl_type type, struct gl_err *err)
{
    char gg[128];
    GL_ASSERT_MSG(gl_vgguf_tensor_name(hf, gg, sizeof gg) == 0, "no GGUF name for %s", hf);
    const int qk = strstr(hf, ".attn.q_proj.") || strstr(hf, ".attn.k_proj.");
    return add_hf(pl, gg, hf, n_out, n_in, type, qk ? CV_ROPE : CV_PLAIN, err);
}

static gl_status plan_vision(struct cv_plan *pl, const struct gl_vision_config *vc,
                             enum gl_type type, struct gl_err *err)
{
    const int64_t H = vc->hidden, FF = vc->ffn, A = vc->adapter;
    gl_status st;
    pl->head_dim = vc->head_dim;
    if ((st = add_patch(pl, vc, type, err)) ||
        // A lookup table read as f32 rows by the encoder: always F32.
        (st = add_vis(pl, VT "patch_embedder.position_embedding_table.weight",
                      (int64_t)vc->pos_h * vc->pos_w, H, GL_TYPE_F32, err)) ||
        (st = add_vis(pl, VT "ln_pre.weight", 0, H, type, err)) ||
        (st = add_vis(pl, VT "ln_pre.bias", 0, H, type, err)))
        return st;
    static const struct {
        const char *hf;
        int kind; // 0: LayerNorm [H]; 1: H -> H; 2: fc1 H -> FF; 3: fc2 FF -> H
    } blk[] = {{"norm1", 0},     {"attn.q_proj", 1}, {"attn.k_proj", 1}, {"attn.v_proj", 1},
               {"attn.proj", 1}, {"norm2", 0},       {"mlp.fc1", 2},     {"mlp.fc2", 3}};
    for (int l = 0; l < vc->n_layers; l++) {
        for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
            const int64_t n_out = blk[i].kind == 2 ? FF : H, n_in = blk[i].kind == 3 ? FF : H;
            char hf[160];
            snprintf(hf, sizeof hf, VT "layers.%d.%s.weight", l, blk[i].hf);
            if ((st = add_vis(pl, hf, blk[i].kind ? n_out : 0, blk[i].kind ? n_in : H, type, err)))
                return st;
            snprintf(hf, sizeof hf, VT "layers.%d.%s.bias", l, blk[i].hf);
            if ((st = add_vis(pl, hf, 0, blk[i].kind ? n_out : H, type, err)))
                return st;
        }
    }
    if ((st = add_vis(pl, VT "ln_post.weight", 0, H, type, err)) ||
        (st = add_vis(pl, VT "ln_post.bias", 0, H, type, err)) ||
        (st = add_vis(pl, "model.vision_adapter.fc1.weight", A, (int64_t)vc->merge * vc->merge * H,
                      type, err)) ||
        (st = add_vis(pl, "model.vision_adapter.fc2.weight", A, A, type, err)) ||
        (st = add_vis(pl, "model.vision_projection.weight", vc->out_dim, A, type, err)))
        return st;
    return GL_OK;
}

// ---- row conversion on the pool ----

struct cv_fill {
    const struct cv_plan *pl;
    struct gl_pool *pool;
    int n_threads;
    float **f;     // per thread: 2 * max_ne0 floats (a row and a second source row)
    uint8_t **raw; // per thread: a copy of one source row (max_ne0 * 4 bytes, aligned)
};

struct cv_job {
    const struct cv_fill *c;
    const struct cv_tensor *t;
    int64_t row0, n_rows;
    uint8_t *dst;
    size_t row_bytes;
};

// Source row src (n elements of t->src, any dtype) -> f32 f (raw: an aligned copy).
static void read_row(const struct cv_tensor *t, int64_t src, int64_t n, float *f, uint8_t *raw)
{
    const size_t esz = gl_safetensors_dtype_size(t->src->dtype);
    // A copy: safetensors data carries no alignment promise.
    memcpy(raw, (const uint8_t *)t->src->data + (size_t)src * (size_t)n * esz, (size_t)n * esz);
    const uint16_t *h16 = (const uint16_t *)(const void *)raw;
    switch (t->src->dtype) {
    case GL_SAFETENSORS_DTYPE_F32:
        memcpy(f, raw, (size_t)n * sizeof(float));
        break;
    case GL_SAFETENSORS_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            f[i] = gl_bf16_to_f32(h16[i]);
        break;
    case GL_SAFETENSORS_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            f[i] = gl_fp16_to_f32(h16[i]);
        break;
    }
}

static void convert_row(const struct cv_plan *pl, const struct cv_tensor *t, int64_t r, float *f,
                        uint8_t *raw, uint8_t *dst)
{
    const int64_t n = t->ne[0];
    if (t->xf == CV_CONST) {
        for (int64_t i = 0; i < n; i++)
            f[i] = t->value;
    } else if (t->xf == CV_TSUM) {
        // Output ne [p, p, 3, hidden]: row r = (o * 3 + c) * p + y of p pixels. The source's
        // rows of p pixels run (o, t, c, y) (HF [hidden, T, 3, p, p]), so slab tt of row r is
        // source row (o * T + tt) * 3p + (r mod 3p). The sum is formed in f32, slab 0 first.
        const int64_t per = t->ne[1] * t->ne[2], o = r / per, rem = r % per, T = pl->frames;
        float *g = f + n; // the second half of the row buffer (2 * max_ne0 floats)
        for (int64_t i = 0; i < n; i++)
            f[i] = 0.0f;
        for (int64_t tt = 0; tt < T; tt++) {
            read_row(t, (o * T + tt) * per + rem, n, g, raw);
            for (int64_t i = 0; i < n; i++)
                f[i] += g[i];
        }
    } else if (t->xf == CV_ROPE && t->n_dims == 1) {
        // A q/k bias: element h*D + 2j + s takes element h*D + s*D/2 + j (as the rows below).
        const int64_t D = pl->head_dim;
        float *g = f + n;
        read_row(t, 0, n, g, raw);
        for (int64_t i = 0; i < n; i++)
            f[i] = g[(i / D) * D + (i % D % 2) * (D / 2) + i % D / 2];
    } else {
        int64_t src = r;
        if (t->xf == CV_ROPE) { // output row h*D + 2j + t takes HF row h*D + t*D/2 + j (§2.3)
            const int64_t D = pl->head_dim, h = r / D, i = r % D;
            src = h * D + (i % 2) * (D / 2) + i / 2;
        }
        read_row(t, src, n, f, raw);
        // In f32, as llama.cpp's converter (which widens BF16 before the shift) and glint's HF
        // loader do; for |w| <= 1 stored exactly, (w - 1) + 1 gives w back bit for bit.
        for (int64_t i = 0; t->xf == CV_CENTERED && i < n; i++)
            f[i] += 1.0f;
    }
    gl_quantize_row_ref(t->type, f, dst, n);
}

static void job_part(void *ctx, int ith, int nth)
{
    const struct cv_job *j = ctx;
    const int64_t lo = j->n_rows * ith / nth, hi = j->n_rows * (ith + 1) / nth;
    for (int64_t r = lo; r < hi; r++)
        convert_row(j->c->pl, j->t, j->row0 + r, j->c->f[ith], j->c->raw[ith],
                    j->dst + (size_t)r * j->row_bytes);
}

static gl_status fill_rows(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                           struct gl_err *err)
{
    (void)err;
    const struct cv_fill *c = ctx;
    GL_ASSERT(ti >= 0 && ti < c->pl->n);
    const struct cv_tensor *t = &c->pl->t[ti];
    struct cv_job j = {c, t, row0, n_rows, dst, gl_type_row_size(t->type, t->ne[0])};
    // Below ~64k elements a wake-up costs more than it saves.
    if (c->pool && n_rows >= 2 && n_rows * t->ne[0] >= (1 << 16))
        gl_pool_run(c->pool, job_part, &j);
    else
        job_part(&j, 0, 1);
    // Drop the source pages of the rows already converted (whole pages only, the finished
    // prefix of the tensor, so a page shared with unfinished rows waits for a later chunk): on a
    // private read-only file mapping MADV_DONTNEED only unmaps them (a later read faults them
    // back in unchanged), so the resident size stays near one write chunk (64 MiB of output) plus
    // its source rows while a 60 GB checkpoint streams by. A Q/K chunk releases whole heads only:
    // its output rows read source rows anywhere in their head.
    if (t->src && t->src->nbytes > 0) {
        int64_t done = row0 + n_rows;
        if (t->xf == CV_ROPE && done < t->ne[1])
            done -= done % c->pl->head_dim;
        const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        const uintptr_t base = (uintptr_t)t->src->data;
        const uintptr_t a = (base + pg - 1) & ~(pg - 1);
        const uintptr_t e = (base + (uintptr_t)done * (uintptr_t)t->ne[0] *
                                        gl_safetensors_dtype_size(t->src->dtype)) &
                            ~(pg - 1);
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_DONTNEED); // advisory
    }
    return GL_OK;
}

static void fill_free(struct cv_fill *c)
{
    for (int i = 0; i < c->n_threads; i++) {
        if (c->f)
            gl_free_aligned(c->f[i]);
        if (c->raw)
            gl_free_aligned(c->raw[i]);
    }
    gl_free(c->f);
    gl_free(c->raw);
    gl_pool_delete(c->pool);
    memset(c, 0, sizeof *c);
}

static gl_status fill_init(struct cv_fill *c, const struct cv_plan *pl, int n_threads,
                           struct gl_err *err)
{
    memset(c, 0, sizeof *c);
    c->pl = pl;
    c->pool = n_threads > 1 ? gl_pool_new(n_threads) : NULL;
    c->n_threads = c->pool ? gl_pool_size(c->pool) : 1;
    c->f = gl_calloc((size_t)c->n_threads, sizeof *c->f);
    c->raw = gl_calloc((size_t)c->n_threads, sizeof *c->raw);
    int ok = c->f && c->raw;
    for (int i = 0; ok && i < c->n_threads; i++)
        ok = (c->f[i] = gl_malloc_aligned(2 * (size_t)pl->max_ne0 * sizeof(float))) &&
             (c->raw[i] = gl_malloc_aligned((size_t)pl->max_ne0 * sizeof(float)));
    if (!ok) {
        fill_free(c);
        return gl_err_set(err, GL_E_NOMEM, "convert: out of memory for %d row buffers", n_threads);
    }
    return GL_OK;
}

static gl_status write_plan(struct gl_gguf_writer *w, const struct cv_plan *pl, const char *path,
                            int n_threads, struct gl_err *err)
{
    for (int64_t i = 0; i < pl->n; i++) {
        const struct cv_tensor *t = &pl->t[i];
        int64_t ti = gl_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, (uint32_t)t->type);
        if (ti != i)
            return gl_err_set(err, GL_E_NOMEM, "convert: adding tensor %s failed", t->name);
    }
    struct cv_fill c;
    gl_status st = fill_init(&c, pl, n_threads, err);
    if (st == GL_OK) {
        st = gl_gguf_writer_write(w, path, 0, fill_rows, &c, err);
        fill_free(&c);
    }
    return st;
}

// ---- metadata ----

// llama.cpp's size label (gguf-py model_weight_count_rounded_notation, min 2 digits): 27.85e9
// -> "28B", 1.034e8 -> "103M", 5.5e9 -> "5.5B".
static void size_label(uint64_t n, char *buf, size_t cap)
{
    const double x = (double)n;
    double s = x * 1e-3;
    const char *suf = "K";
    if (x > 1e12) {
        s = x * 1e-12;
        suf = "T";
    } else if (x > 1e9) {
        s = x * 1e-9;
        suf = "B";
    } else if (x > 1e6) {
        s = x * 1e-6;
        suf = "M";
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", s);
    const char *d = digits;
    while (*d == '0') // gguf-py counts digits after lstrip('0')
        d++;
    const int fix = 2 - (int)strlen(d);
    snprintf(buf, cap, "%.*f%s", fix > 0 ? fix : 0, s, suf);
}

static const char *base_name(const char *path, char *buf, size_t cap)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    snprintf(buf, cap, "%.*s", (int)(n - b), path + b);
    return buf;
}

// chat_template.jinja, else tokenizer_config.json's "chat_template" string; NULL when neither
// exists. Owned, NUL-terminated.
static char *read_chat_template(const char *dir, struct gl_err *err, gl_status *st)
{
    char p[4096];
    *st = GL_OK;
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    FILE *f = fopen(p, "rb");
    if (f) {
        char *text = gl_malloc(CV_TEMPLATE_MAX + 1);
        size_t n = text ? fread(text, 1, CV_TEMPLATE_MAX + 1, f) : 0;
        int bad = !text || ferror(f) || n > CV_TEMPLATE_MAX || memchr(text, 0, n) != NULL;
        fclose(f);
        if (bad) {
            gl_free(text);
            *st = gl_err_set(err, GL_E_FORMAT,
                             "convert: %s unreadable, over %u bytes or holds a NUL byte", p,
                             CV_TEMPLATE_MAX);
            return NULL;
        }
        text[n] = '\0';
        return text;
    }
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    json_error_t je;
    json_t *root = access(p, R_OK) == 0 ? json_load_file(p, 0, &je) : NULL;
    const char *s = json_string_value(json_object_get(root, "chat_template"));
    char *text = s ? gl_strdup(s) : NULL;
    json_decref(root);
    return text;
}

static gl_status add_text_keys(struct gl_gguf_writer *w, const struct cv_text *tx, const char *name,
                               const char *label, struct gl_err *err)
{
    const struct gl_model_config *c = &tx->m.cfg;
    struct gl_gguf_keys kv = {w, GL_OK};
    gl_gguf_keys_str(&kv, "general.architecture", ARCH);
    gl_gguf_keys_str(&kv, "general.type", "model");
    gl_gguf_keys_str(&kv, "general.name", name);
    gl_gguf_keys_str(&kv, "general.size_label", label);
    gl_gguf_keys_u32(&kv, "general.quantization_version", 2);
    gl_gguf_keys_u32(&kv, "general.file_type", tx->file_type);
    gl_gguf_keys_u32(&kv, ARCH ".context_length", (uint32_t)c->n_ctx_train);
    gl_gguf_keys_u32(&kv, ARCH ".embedding_length", (uint32_t)c->n_embd);
    gl_gguf_keys_u32(&kv, ARCH ".block_count", (uint32_t)c->n_layer);
    gl_gguf_keys_u32(&kv, ARCH ".feed_forward_length", (uint32_t)c->n_ff);
    gl_gguf_keys_u32(&kv, ARCH ".attention.head_count", (uint32_t)c->n_head);
    gl_gguf_keys_u32(&kv, ARCH ".attention.head_count_kv", (uint32_t)c->n_head_kv);
    gl_gguf_keys_u32(&kv, ARCH ".attention.key_length", (uint32_t)c->head_dim);
    gl_gguf_keys_u32(&kv, ARCH ".attention.value_length", (uint32_t)c->head_dim);
    gl_gguf_keys_f32(&kv, ARCH ".attention.layer_norm_rms_epsilon", c->rms_eps);
    gl_gguf_keys_f32(&kv, ARCH ".rope.freq_base", c->rope_base);
    gl_gguf_keys_f32(&kv, ARCH ".final_logit_softcapping", c->softcap); // 0 = disabled (never 30)
    gl_gguf_keys_f32(&kv, ARCH ".logit_scale", c->logit_scale);
    // sliding_window null (0 here) = no window: a window of the whole context is the same.
    gl_gguf_keys_u32(&kv, ARCH ".attention.sliding_window",
                     (uint32_t)(c->window > 0 ? c->window : c->n_ctx_train));
    if (kv.st == GL_OK) {
        uint8_t pat[GL_MODEL_MAX_LAYERS]; // true = sliding layer (RoPE + window)
        for (int i = 0; i < c->n_layer; i++)
            pat[i] = c->swa[i] != 0;
        kv.st = gl_gguf_writer_add_arr(w, ARCH ".attention.sliding_window_pattern", GL_GGUF_BOOL,
                                       pat, (uint64_t)c->n_layer);
    }
    if (kv.st != GL_OK)
        return gl_err_set(err, kv.st, "convert: adding model metadata failed (%s)",
                          gl_status_name(kv.st));
    return GL_OK;
}

static gl_status add_tokenizer_keys(struct gl_gguf_writer *w, const char *dir, int64_t n_vocab,
                                    struct gl_err *err)
{
    struct gl_tokenizer *tok = NULL;
    gl_status st = gl_tokenizer_load_hf_dir(&tok, dir, err);
    if (st != GL_OK)
        return st;
    if (gl_tokenizer_n_vocab(tok) != n_vocab)
        st = gl_err_set(err, GL_E_FORMAT,
                        "convert: %s/tokenizer.model gives %d tokens but the embedding table has "
                        "%lld rows",
                        dir, gl_tokenizer_n_vocab(tok), (long long)n_vocab);
    if (st == GL_OK)
        st = gl_make_model_add_vocab(w, tok, err);
    gl_tokenizer_free(tok);
    struct gl_gguf_keys kv = {w, st};
    gl_gguf_keys_bool(&kv, "tokenizer.ggml.add_sep_token", 0);
    if (kv.st != GL_OK)
        return st != GL_OK ? st : gl_err_set(err, kv.st, "convert: adding tokenizer keys failed");
    char *tmpl = read_chat_template(dir, err, &st);
    if (st != GL_OK)
        return st;
    if (tmpl) {
        gl_gguf_keys_str(&kv, "tokenizer.chat_template", tmpl);
        gl_free(tmpl);
    } else {
        GL_LOGW("convert: %s has no chat_template.jinja or tokenizer_config.json chat_template; "
                "tokenizer.chat_template omitted",
                dir);
    }
    return kv.st == GL_OK
               ? GL_OK
               : gl_err_set(err, kv.st, "convert: adding tokenizer.chat_template failed");
}

// llama.cpp's mmproj keys for this projector (MmprojModel and the muse-glimmer converter class;
// clip.cpp reads them with typed getters, so the types matter), in the converter's order. What
// clip.cpp hard-codes (RoPE theta, the global-layer interval, 2 frames) is not written; the
// position table's side and the adapter width are read from the tensors' shapes.
static gl_status add_vision_keys(struct gl_gguf_writer *w, const struct gl_vision_config *vc,
                                 const char *name, enum gl_type type, struct gl_err *err)
{
    static const float half3[3] = {0.5f, 0.5f, 0.5f}; // IMAGENET_STANDARD mean and std (§6.2)
    struct gl_gguf_keys kv = {w, GL_OK};
    char nm[256];
    snprintf(nm, sizeof nm, "%.240s vision", name);
#define VK(s) "clip.vision." s
    gl_gguf_keys_str(&kv, "general.architecture", GL_MMPROJ_ARCH);
    gl_gguf_keys_str(&kv, "general.type", "mmproj");
    gl_gguf_keys_str(&kv, "general.name", nm);
    uint32_t ft = 0;
    const int known = gl_make_model_recipe_type(type_name(type), NULL, 1, &ft) >= 0;
    GL_ASSERT(known); // vision_type_of offers only recipe types
    gl_gguf_keys_u32(&kv, "general.file_type", ft);
    gl_gguf_keys_bool(&kv, "clip.has_vision_encoder", 1);
    gl_gguf_keys_u32(&kv, VK("projection_dim"), (uint32_t)vc->out_dim);
    // The nominal size llama.cpp's converter writes: pos_emb side x patch x merge (896).
    gl_gguf_keys_u32(&kv, VK("image_size"), (uint32_t)(vc->pos_h * vc->patch_size * vc->merge));
    gl_gguf_keys_u32(&kv, VK("patch_size"), (uint32_t)vc->patch_size);
    gl_gguf_keys_u32(&kv, VK("embedding_length"), (uint32_t)vc->hidden);
    gl_gguf_keys_u32(&kv, VK("feed_forward_length"), (uint32_t)vc->ffn);
    gl_gguf_keys_u32(&kv, VK("block_count"), (uint32_t)vc->n_layers);
    gl_gguf_keys_u32(&kv, VK("attention.head_count"), (uint32_t)vc->n_heads);
    if (kv.st == GL_OK)
        kv.st = gl_gguf_writer_add_arr(w, VK("image_mean"), GL_GGUF_F32, half3, 3);
    if (kv.st == GL_OK)
        kv.st = gl_gguf_writer_add_arr(w, VK("image_std"), GL_GGUF_F32, half3, 3);
    gl_gguf_keys_str(&kv, "clip.projector_type", GL_MMPROJ_PROJECTOR);
    gl_gguf_keys_f32(&kv, VK("attention.layer_norm_epsilon"), vc->ln_eps);
    gl_gguf_keys_u32(&kv, VK("spatial_merge_size"), (uint32_t)vc->merge);
#undef VK
    return kv.st == GL_OK ? GL_OK
                          : gl_err_set(err, kv.st, "convert: adding vision metadata failed (%s)",
                                       gl_status_name(kv.st));
}

// ---- the DFlash assistant folder ----

// The drafter's tensors in llama.cpp's / make-model's order, each copied from its HF tensor
// (llama.cpp's MuseGlimmerAssistantModel.modify_tensors changes nothing: NeoX RoPE on both sides,
// plain w * RMS norms), 2-D ones typed by the recipe as make-model types its drafters. The folder
// must hold exactly these tensors: an unknown one (an own head, a variant's extra) is refused.
static gl_status plan_dflash(struct cv_plan *pl, const struct gl_dflash_config *cfg,
                             const char *recipe, struct gl_err *err)
{
    const int64_t n = gl_dflash_n_tensors(cfg);
    for (int64_t i = 0; i < n; i++) {
        char gg[64], hn[160];
        int64_t n_in, n_out;
        GL_ASSERT(gl_dflash_tensor_at(cfg, i, gg, sizeof gg, &n_in, &n_out));
        GL_ASSERT(gl_dflash_hf_tensor_name(gg, hn, sizeof hn));
        int type = gl_make_model_recipe_type(recipe, gg, cfg->n_layer, NULL);
        GL_ASSERT(type >= 0); // the recipe was validated by the caller
        gl_status st = add_hf(pl, gg, hn, n_out, n_in, (enum gl_type)type, CV_PLAIN, err);
        if (st != GL_OK)
            return st;
    }
    for (int64_t i = 0;
         gl_safetensors_n_tensors(pl->st) != n && i < gl_safetensors_n_tensors(pl->st); i++) {
        const struct gl_safetensors_tensor *t = gl_safetensors_tensor_at(pl->st, i);
        char gg[128];
        int l = -1;
        if (!gl_dflash_hf_gguf_name(t->name, gg, sizeof gg) ||
            (sscanf(gg, "blk.%d.", &l) == 1 && l >= cfg->n_layer))
            return gl_err_set(err, GL_E_UNSUPPORTED,
                              "convert: tensor %s in %s is not part of a Muse Glimmer DFlash "
                              "drafter (config.json: %d layers)",
                              t->name, gl_safetensors_shard_path(pl->st, t->shard), cfg->n_layer);
    }
    return GL_OK;
}

// The target's vocabulary (llama.cpp's converter reads it from --target-model-dir) and
// tokenizer.ggml.mask_token_id, as make-model writes them into a drafter: the vocabulary keys,
// the chat template when the folder has one, then the mask id.
static gl_status add_dflash_vocab(struct gl_gguf_writer *w, const char *vdir,
                                  const struct gl_dflash_config *cfg, struct gl_err *err)
{
    struct gl_tokenizer *tok = NULL;
    gl_status st = gl_tokenizer_load_hf_dir(&tok, vdir, err);
    if (st != GL_OK)
        return st;
    if (cfg->mask_token_id >= gl_tokenizer_n_vocab(tok))
        st = gl_err_set(err, GL_E_FORMAT,
                        "convert: mask_token_id %d is outside the vocabulary of %s/tokenizer.model "
                        "(%d tokens)",
                        cfg->mask_token_id, vdir, gl_tokenizer_n_vocab(tok));
    if (st == GL_OK)
        st = gl_make_model_add_vocab(w, tok, err);
    gl_tokenizer_free(tok);
    if (st != GL_OK)
        return st;
    struct gl_gguf_keys kv = {w, GL_OK};
    char *tmpl = read_chat_template(vdir, err, &st);
    if (st != GL_OK)
        return st;
    if (tmpl) {
        gl_gguf_keys_str(&kv, "tokenizer.chat_template", tmpl);
        gl_free(tmpl);
    }
    gl_gguf_keys_u32(&kv, "tokenizer.ggml.mask_token_id", (uint32_t)cfg->mask_token_id);
    return kv.st == GL_OK ? GL_OK
                          : gl_err_set(err, kv.st,
                                       "convert: adding the drafter's tokenizer keys "
                                       "failed");
}

static gl_status convert_dflash(const char *hf_dir, const char *out, const char *recipe,
                                uint32_t file_type, const struct gl_convert_params *p,
                                int n_threads, struct gl_err *err)
{
    const int64_t t0 = gl_time_us();
    struct gl_dflash_config cfg;
    struct gl_safetensors *st_file = NULL;
    struct cv_plan pl = {0};
    struct gl_gguf_writer *w = NULL;
    char name[256], vpath[4096];
    gl_status st = GL_OK;
    // The vocabulary: the target folder, else the assistant folder's own tokenizer.model.
    const char *vdir = p->target_dir;
    snprintf(vpath, sizeof vpath, "%s/tokenizer.model", hf_dir);
    if (!vdir && access(vpath, R_OK) == 0)
        vdir = hf_dir;
    if (p->vision_out)
        return gl_err_set(err, GL_E_INVAL,
                          "convert: %s is a DFlash drafter (%s): it has no vision tower for "
                          "--vision-out",
                          hf_dir, GL_DFLASH_HF_MODEL_TYPE);
    if (!vdir)
        return gl_err_set(err, GL_E_INVAL,
                          "convert: %s is a DFlash drafter (%s) without a tokenizer.model: pass "
                          "--target-model-dir (the target's HF folder; the drafter's GGUF "
                          "carries the target's vocabulary, as llama.cpp's converter requires)",
                          hf_dir, GL_DFLASH_HF_MODEL_TYPE);
    if ((st = gl_dflash_hf_config_parse(&cfg, hf_dir, err)) ||
        (st = gl_safetensors_open_dir(&st_file, hf_dir, err)))
        goto done;
    pl.st = st_file;
    pl.dir = hf_dir;
    if ((st = plan_dflash(&pl, &cfg, recipe, err)))
        goto done;
    if (p->name)
        snprintf(name, sizeof name, "%s", p->name);
    else
        base_name(hf_dir, name, sizeof name);
    if (!(w = gl_gguf_writer_new())) {
        st = gl_err_set(err, GL_E_NOMEM, "convert: out of memory for the gguf writer");
        goto done;
    }
    if ((st = gl_dflash_add_keys(w, &cfg, name, file_type, err)) ||
        (st = add_dflash_vocab(w, vdir, &cfg, err)) ||
        (st = write_plan(w, &pl, out, n_threads, err)))
        goto done;
    GL_LOGI("convert: wrote %s (DFlash drafter, arch " GL_DFLASH_ARCH ", %s, %lld tensors, "
            "vocabulary from %s) in %.1f s",
            out, recipe, (long long)pl.n, vdir, (double)(gl_time_us() - t0) * 1e-6);
done:
    gl_gguf_writer_delete(w);
    plan_free(&pl);
    gl_safetensors_close(st_file);
    return st;
}

// ---- driver ----

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > CV_MAX_THREADS ? CV_MAX_THREADS : (int)n;
}

static gl_status vision_type_of(const char *name, enum gl_type *out, struct gl_err *err)
{
    static const struct {
        const char *name;
        enum gl_type type;
    } ok[] = {{"F32", GL_TYPE_F32},   {"F16", GL_TYPE_F16},   {"BF16", GL_TYPE_BF16},
              {"Q8_0", GL_TYPE_Q8_0}, {"Q4_K", GL_TYPE_Q4_K}, {"Q5_K", GL_TYPE_Q5_K},
              {"Q6_K", GL_TYPE_Q6_K}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcasecmp(name, ok[i].name)) {
            *out = ok[i].type;
            return GL_OK;
        }
    return gl_err_set(err, GL_E_INVAL,
                      "convert: vision type '%s' is not F32, F16, BF16, Q8_0, Q4_K, Q5_K or Q6_K",
                      name);
}

gl_status gl_convert(const char *hf_dir, const char *out, const struct gl_convert_params *p,
                     struct gl_err *err)
{
    const int64_t t0 = gl_time_us();
    const char *recipe = p->type ? p->type : "Q4_K_M";
    enum gl_type vtype = GL_TYPE_BF16;
    struct cv_text *tx = gl_calloc(1, sizeof *tx);
    struct gl_safetensors *st_file = NULL;
    struct cv_plan text = {0}, vis = {0};
    struct gl_gguf_writer *w = NULL;
    struct gl_vision_config vc;
    char name[256], label[32];
    const int n_threads = p->n_threads > 0 ? p->n_threads : default_threads();
    gl_status st = GL_OK;
    memset(&vc, 0, sizeof vc);
    if (!tx) {
        st = gl_err_set(err, GL_E_NOMEM, "convert: out of memory");
        goto done;
    }
    if (gl_make_model_recipe_type(recipe, NULL, 1, &tx->file_type) < 0) {
        st = gl_err_set(err, GL_E_INVAL,
                        "convert: unknown type '%s' (F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|"
                        "Q5_K_M)",
                        recipe);
        goto done;
    }
    if (p->vision_type && (st = vision_type_of(p->vision_type, &vtype, err)))
        goto done;
    if (gl_dflash_hf_is_assistant(hf_dir)) {
        st = convert_dflash(hf_dir, out, recipe, tx->file_type, p, n_threads, err);
        goto done;
    }
    if ((st = gl_model_hf_config_parse(&tx->m, hf_dir, err)) ||
        (st = gl_safetensors_open_dir(&st_file, hf_dir, err)))
        goto done;
    if (tx->m.cfg.post_eps != 1e-8f)
        GL_LOGW("convert: post_norm_eps %g: GGUF has no key for it and llama.cpp uses 1e-8",
                (double)tx->m.cfg.post_eps);
    tx->legacy = !gl_safetensors_find(st_file, "model.language_model.embed_tokens.weight") &&
                 gl_safetensors_find(st_file, "model.embed_tokens.weight") != NULL;
    text.st = vis.st = st_file;
    text.dir = vis.dir = hf_dir;
    // Plan (and so validate) both files before writing either.
    if ((st = plan_text(&text, tx, recipe, err)))
        goto done;
    if (p->vision_out) {
        int present = 0;
        if ((st = gl_model_hf_vision_config(hf_dir, &vc, &present, err)))
            goto done;
        if (!present) {
            st = gl_err_set(err, GL_E_FORMAT,
                            "convert: --vision-out given but %s/config.json has no vision_config",
                            hf_dir);
            goto done;
        }
        if ((st = plan_vision(&vis, &vc, vtype, err)))
            goto done;
    }
    if (p->name)
        snprintf(name, sizeof name, "%s", p->name);
    else
        base_name(hf_dir, name, sizeof name);
    size_label(text.n_params, label, sizeof label);

    if (!(w = gl_gguf_writer_new())) {
        st = gl_err_set(err, GL_E_NOMEM, "convert: out of memory for the gguf writer");
        goto done;
    }
    if ((st = add_text_keys(w, tx, name, label, err)) ||
        (st = add_tokenizer_keys(w, hf_dir, tx->n_vocab, err)) ||
        (st = write_plan(w, &text, out, n_threads, err)))
        goto done;
    GL_LOGI("convert: wrote %s (%s, %lld tensors, %s parameters) in %.1f s", out, recipe,
            (long long)text.n, label, (double)(gl_time_us() - t0) * 1e-6);
    if (p->vision_out) {
        gl_gguf_writer_delete(w);
        if (!(w = gl_gguf_writer_new())) {
            st = gl_err_set(err, GL_E_NOMEM, "convert: out of memory for the gguf writer");
            goto done;
        }
        if ((st = add_vision_keys(w, &vc, name, vtype, err)) ||
            (st = write_plan(w, &vis, p->vision_out, n_threads, err)))
            goto done;
        GL_LOGI("convert: wrote %s (llama.cpp mmproj layout, %s matrices, %lld tensors, patch "
                "kernel [%d, %d, 3, %d] summed, and the full temporal kernel)",
                p->vision_out, type_name(vtype), (long long)vis.n, vc.patch_size, vc.patch_size,
                vc.hidden);
    }
done:
    gl_gguf_writer_delete(w);
    plan_free(&text);
    plan_free(&vis);
    gl_safetensors_close(st_file);
    gl_free(tx);
    return st;
}
