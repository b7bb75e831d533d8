// SPDX-License-Identifier: MIT
// backend_vk: the Vulkan implementation of the backend ops (backend.h) over src/vk. Every op of
// a step is recorded into one recorder (a barrier after each dispatch) and the whole step is one
// submission at step_end; then the head's logits and the captures are copied out of host-visible
// buffers. Shaders: src/vk/shaders/fwd_*.comp for the non-matmul ops, matmul_*.comp (through
// gl_vk_rec_matmul) for every weight matrix and the output head.
//
// Device memory: every matrix of the backend's layers (first_layer..n_layer-1: partial offload)
// and of the head when it runs here, uploaded once at create in its GGUF blocks (an r16-repacked
// matrix from the file bytes it was repacked from), the norm vectors in one f32 buffer, one f32
// activation buffer per enum gl_bk_buf (n_batch rows), a step-input buffer (below), the logits of
// the head's rows, and a device mirror of the host KV pool the step's views point into: the same
// pages at the same byte offsets and dtype (f32, f16, bf16, fp8 + row scales), written and read
// only on the device (the host pool's bytes are not updated: every K/V row a step reads was
// written by an earlier step on this backend, which holds as long as one pool's sequences run on
// one backend). The mirror is keyed by the pool's base address, sized by gl_kv_view.n_pages and
// bound whole (a pool wider than one binding is refused with the numbers). Given the bounds
// (gl_backend_params: sequences, positions, logits rows, the pool), every buffer is made at
// create, so what gl_model_dev_mem_plan (below) computes is what the device holds; a step past
// the bounds grows a buffer (test_backend_vk's plan check would show it).
//
// Step inputs (host-visible `in`, copied to the device `in_dev` first thing in the step, so
// what the host writes while recording is in it; uint words): the embedding rows (E floats per
// row: the token_embd rows dequantized on the host by the CPU kernels, bit for bit the CPU
// backend's, or the given soft-token rows; token_embd stays on the host, as llama.cpp keeps its
// input layer), RoPE cos/sin per row (the CPU backend's double formula), per row (position,
// sequence), the head's source rows, then per (sequence, layer) a view record and the page
// tables (src/vk/shaders/fwd_kv.glsl).
//
// Matmul inputs are rounded to the weight's vec_dot type first (fwd_actq.comp), so quantized
// models agree with the CPU path to fp32 summation order, not to activation quantization noise.
//
// Not yet: the partial head's speed (the whole head is computed; the unselected groups are set
// to -INFINITY on the host, as the CPU leaves them), one step mixing sequences of two pools.
#include "model/backend.h"
#include "vk/vk.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N_ROLE_MAT (GL_BK_FFN_DOWN - GL_BK_WQ + 1) // per-layer matrices
#define N_ROLE_VEC (GL_BK_POST_FFW_NORM + 1)       // per-layer vectors
#define NO_WEIGHT  0xFFFFFFFFu
#define MAX_CAPS   (GL_MODEL_MAX_LAYERS + 2) // every layer's rows, the hand-over
#define MAX_MIRROR 4
#define MIB_OF(x)  ((double)(x) / 1048576.0)
#define VIEW_WORDS 10 // one view's record in the step inputs (src/vk/shaders/fwd_kv.glsl)

struct kv_mirror {
    const uint8_t *base; // host pool
    uint64_t bytes;
    struct gl_vk_buffer *buf;
    int64_t last_use; // step counter, for eviction
};

struct vk_backend {
    struct gl_backend base;
    const struct gl_model *m;
    const struct gl_kernels *k;
    int n_batch;
    struct gl_vk_device *dev;
    struct gl_vk_recorder *rec;
    int first_layer, has_head;  // the layers (first_layer..) and whether the head runs here
    struct gl_vk_buffer **wmat; // n_layer * N_ROLE_MAT, then OUTPUT (NULL off the device)
    uint32_t *vec_off;          // n_layer * N_ROLE_VEC, then OUTPUT_NORM: float index in vecs
    struct gl_vk_buffer *vecs;  // every norm vector, f32
    struct gl_vk_buffer *act[GL_BK_BUF_COUNT];
    // Matmul inputs rounded to the weight's vec_dot type (fwd_actq.comp), n_batch x the widest
    // input; holds buffer actq_src rounded to actq_type until any other op runs (-1: nothing).
    struct gl_vk_buffer *actq;
    int actq_src;
    enum gl_type actq_type;
    struct gl_vk_buffer *in, *in_dev; // step inputs (host-visible, device copy)
    uint64_t in_words;                // capacity of both
    uint32_t off_embd, off_cos, off_sin, off_rows, off_hsrc, off_views; // uint indices in `in`
    uint64_t in_used;                                                   // this step's words
    struct gl_vk_buffer *logits, *logits_host;                          // head rows x n_vocab
    int64_t logits_rows;                                                // capacity
    struct gl_vk_buffer *cap_host[MAX_CAPS]; // n_batch x E each, for capture
    float *cap_dst[MAX_CAPS];
    size_t cap_bytes[MAX_CAPS];
    int n_caps;
    struct kv_mirror mirror[MAX_MIRROR];
    struct kv_mirror *kv; // the step's
    uint32_t kv_dtype;    // the step's KV dtype (fwd_kv.glsl: 0 f32, 1 f16, 2 bf16, 3 fp8 e4m3)
    struct gl_vk_buffer *retired; // a mirror replaced during the step: freed at step_end
    double *inv_freq;             // D/2
    const struct gl_bk_step *st;  // borrowed until step_end
    struct gl_bk_head hd;         // the step's head (arrays borrowed), hd.n 0: none
    int64_t step_no;
    gl_status status; // the step's first error (recording stops adding work after it)
    struct gl_err err;
};

static struct vk_backend *vkb(struct gl_backend *b);

static void vk_destroy(struct gl_backend *b)
{
    if (!b)
        return;
    struct vk_backend *c = vkb(b);
    const int L = c->m->cfg.n_layer;
    for (int i = 0; c->wmat && i <= L * N_ROLE_MAT; i++)
        gl_vk_buffer_free(c->wmat[i]);
    gl_free(c->wmat);
    gl_free(c->vec_off);
    gl_vk_buffer_free(c->vecs);
    for (int i = 0; i < GL_BK_BUF_COUNT; i++)
        gl_vk_buffer_free(c->act[i]);
    gl_vk_buffer_free(c->actq);
    gl_vk_buffer_free(c->in);
    gl_vk_buffer_free(c->in_dev);
    gl_vk_buffer_free(c->logits);
    gl_vk_buffer_free(c->logits_host);
    for (int i = 0; i < MAX_CAPS; i++)
        gl_vk_buffer_free(c->cap_host[i]);
    for (int i = 0; i < MAX_MIRROR; i++)
        gl_vk_buffer_free(c->mirror[i].buf);
    gl_vk_buffer_free(c->retired);
    gl_vk_recorder_free(c->rec);
    gl_vk_device_close(c->dev);
    gl_free(c->inv_freq);
    gl_free(c);
}

// The bytes of w as the file has them: an r16-repacked matrix is uploaded from the file tensor it
// was repacked from (the shaders read GGUF blocks).
static const void *file_bytes(const struct gl_model *m, const struct gl_weight *w)
{
    if (!w->r16)
        return w->data;
    for (int i = 0; i < m->n_huge; i++)
        if (m->huge[i].p == w->data)
            return m->huge[i].src;
    GL_ASSERT(!"r16 weight without its source");
    return NULL;
}

// The sizes a backend allocates for at create, in one place: gl_model_dev_mem_plan says the
// same. Step inputs (uint words): embedding rows (B x E), RoPE cos and sin (B x D/2 each),
// (position, sequence) per row, the head's source rows (B), then per (sequence, layer) a view
// record and its page table (at most ceil(max_len / block_size) pages); max_seqs 0: only the
// fixed part (the rest grows per step).
struct vk_sizes {
    uint64_t in_words, head_rows, act_bytes, norm_bytes;
};

static struct vk_sizes vk_sizes_of(const struct gl_model_config *cf, int n_batch, int max_seqs,
                                   int64_t max_len, int32_t block_size, int head_rows)
{
    const uint64_t B = (uint64_t)n_batch, L = (uint64_t)cf->n_layer;
    struct vk_sizes z = {0};
    z.in_words = B * (uint64_t)cf->n_embd + 2 * B * (uint64_t)(cf->head_dim / 2) + 3 * B;
    const uint64_t S = (uint64_t)(max_seqs < n_batch ? max_seqs : n_batch);
    if (S > 0 && max_len > 0 && block_size > 0)
        z.in_words += S * L * (VIEW_WORDS + (uint64_t)((max_len + block_size - 1) / block_size));
    z.head_rows = (uint64_t)(head_rows < n_batch ? head_rows : n_batch);
    int64_t widest = 0;
    for (int i = 0; i < GL_BK_BUF_COUNT; i++) {
        const int64_t w = gl_bk_buf_width(cf, (enum gl_bk_buf)i);
        z.act_bytes += B * (uint64_t)w * 4;
        widest = w > widest ? w : widest;
    }
    z.act_bytes += B * (uint64_t)widest * 4; // actq
    z.norm_bytes = (L * N_ROLE_VEC + 1) * (uint64_t)cf->n_embd * 4;
    return z;
}

// A buffer's size as gl_vk_buffer_create asks for it.
static uint64_t buf_bytes(uint64_t n)
{
    return (n + 3) & ~(uint64_t)3;
}

static gl_status upload_matrix(struct vk_backend *c, const struct gl_weight *w,
                               struct gl_vk_buffer **out, struct gl_err *err)
{
    if (!gl_vk_matmul_supported(w->type)) {
        const struct gl_type_traits *tt = gl_type_traits_of((uint32_t)w->type);
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: no matmul shader for weight type %s: use --device cpu",
                          tt && tt->name ? tt->name : "?");
    }
    const uint64_t bytes = (uint64_t)w->row_bytes * (uint64_t)w->n_out;
    gl_status st = gl_vk_buffer_create(c->dev, bytes, GL_VK_MEM_DEVICE, "weights", out, err);
    return st == GL_OK ? gl_vk_upload(*out, 0, file_bytes(c->m, w), bytes, err) : st;
}

static gl_status vk_create(struct gl_backend **out, const struct gl_backend_params *p,
                           struct gl_err *err)
{
    *out = NULL;
    const struct gl_model *m = p->m;
    const struct gl_model_config *cf = &m->cfg;
    const int L = cf->n_layer;
    if (cf->head_dim > 512 || cf->head_dim % 2 || p->n_batch > 65535)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: head_dim %d (at most 512, even) or batch %d (at most 65535) "
                          "not supported by the device backend",
                          cf->head_dim, p->n_batch);
    struct vk_backend *c = gl_calloc(1, sizeof *c);
    if (!c)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for the Vulkan backend");
    c->base.ops = &gl_backend_vk;
    c->m = m;
    c->k = p->k;
    c->n_batch = p->n_batch;
    c->wmat = gl_calloc((size_t)L * N_ROLE_MAT + 1, sizeof *c->wmat);
    c->vec_off = gl_calloc((size_t)L * N_ROLE_VEC + 1, sizeof *c->vec_off);
    c->inv_freq = gl_malloc((size_t)(cf->head_dim / 2) * sizeof(double));
    if (!c->wmat || !c->vec_off || !c->inv_freq) {
        vk_destroy(&c->base);
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for the Vulkan backend");
    }
    for (int j = 0; j < cf->head_dim / 2; j++)
        c->inv_freq[j] = pow((double)cf->rope_base_swa, -2.0 * (double)j / (double)cf->head_dim);
    gl_status st = gl_vk_device_open(p->device, &c->dev, err);
    if (st == GL_OK)
        st = gl_vk_recorder_create(c->dev, &c->rec, err);
    // Matrices of the device's layers (and head), each in its own buffer.
    GL_ASSERT(p->first_layer >= 0 && p->first_layer <= L);
    c->first_layer = p->first_layer;
    c->has_head = p->head != 0;
    for (int l = p->first_layer; st == GL_OK && l < L; l++)
        for (int t = 0; st == GL_OK && t < N_ROLE_MAT; t++)
            st = upload_matrix(c, gl_bk_matrix(m, l, (enum gl_bk_tensor)(GL_BK_WQ + t)),
                               &c->wmat[l * N_ROLE_MAT + t], err);
    if (st == GL_OK && c->has_head)
        st = upload_matrix(c, &m->output, &c->wmat[L * N_ROLE_MAT], err);
    // Norm vectors, one buffer (Q/K norms D floats, the rest E).
    float *vh = NULL;
    if (st == GL_OK) {
        const uint64_t n_vec = (uint64_t)(L * N_ROLE_VEC + 1) * (uint64_t)cf->n_embd;
        vh = gl_calloc((size_t)n_vec, sizeof(float));
        uint32_t o = 0;
        for (int i = 0; vh && i <= L * N_ROLE_VEC; i++) {
            const int l = i / N_ROLE_VEC;
            const enum gl_bk_tensor t =
                i == L * N_ROLE_VEC ? GL_BK_OUTPUT_NORM : (enum gl_bk_tensor)(i % N_ROLE_VEC);
            const float *v = gl_bk_vector(m, t == GL_BK_OUTPUT_NORM ? 0 : l, t);
            const int64_t n = t == GL_BK_Q_NORM || t == GL_BK_K_NORM ? cf->head_dim : cf->n_embd;
            c->vec_off[i] = o;
            memcpy(vh + o, v, (size_t)n * sizeof(float));
            o += (uint32_t)n;
        }
        st = vh ? gl_vk_buffer_create(c->dev, n_vec * 4, GL_VK_MEM_DEVICE, "norm weights", &c->vecs,
                                      err)
                : gl_err_set(err, GL_E_NOMEM, "model: no memory for the norm vectors");
        if (st == GL_OK)
            st = gl_vk_upload(c->vecs, 0, vh, n_vec * 4, err);
    }
    gl_free(vh);
    for (int i = 0; st == GL_OK && i < GL_BK_BUF_COUNT; i++)
        st = gl_vk_buffer_create(
            c->dev, (uint64_t)p->n_batch * (uint64_t)gl_bk_buf_width(cf, (enum gl_bk_buf)i) * 4,
            GL_VK_MEM_DEVICE, "activations", &c->act[i], err);
    int64_t widest = cf->n_embd;
    for (int i = 0; i < GL_BK_BUF_COUNT; i++)
        if (gl_bk_buf_width(cf, (enum gl_bk_buf)i) > widest)
            widest = gl_bk_buf_width(cf, (enum gl_bk_buf)i);
    if (st == GL_OK)
        st = gl_vk_buffer_create(c->dev, (uint64_t)p->n_batch * (uint64_t)widest * 4,
                                 GL_VK_MEM_DEVICE, "activations", &c->actq, err);
    c->actq_src = -1;
    // The step inputs and the logits at the bounds given (vk_sizes_of; gl_model_dev_mem_plan).
    const struct vk_sizes z =
        vk_sizes_of(cf, p->n_batch, p->max_seqs, p->max_len, p->block_size, p->head_rows);
    if (st == GL_OK && p->max_seqs > 0)
        st =
            gl_vk_buffer_create(c->dev, z.in_words * 4, GL_VK_MEM_HOST, "step inputs", &c->in, err);
    if (st == GL_OK && p->max_seqs > 0)
        st = gl_vk_buffer_create(c->dev, z.in_words * 4, GL_VK_MEM_DEVICE, "step inputs",
                                 &c->in_dev, err);
    if (st == GL_OK && p->max_seqs > 0)
        c->in_words = z.in_words;
    const uint64_t lg_bytes = z.head_rows * (uint64_t)cf->n_vocab * 4;
    if (st == GL_OK && c->has_head && z.head_rows > 0)
        st = gl_vk_buffer_create(c->dev, lg_bytes, GL_VK_MEM_DEVICE, "logits", &c->logits, err);
    if (st == GL_OK && c->has_head && z.head_rows > 0)
        st = gl_vk_buffer_create(c->dev, lg_bytes, GL_VK_MEM_HOST, "logits", &c->logits_host, err);
    if (st == GL_OK && c->has_head)
        c->logits_rows = (int64_t)z.head_rows;
    // The residual stream's read-back when the head runs on the CPU (the step's first capture).
    if (st == GL_OK && !c->has_head)
        st = gl_vk_buffer_create(c->dev, (uint64_t)p->n_batch * (uint64_t)cf->n_embd * 4,
                                 GL_VK_MEM_HOST, "captures", &c->cap_host[0], err);
    // The KV pool's copy (step_begin finds it by base).
    if (st == GL_OK && p->kv_base && p->kv_bytes > 0) {
        st = gl_vk_buffer_create(c->dev, p->kv_bytes, GL_VK_MEM_DEVICE, "KV pool",
                                 &c->mirror[0].buf, err);
        c->mirror[0].base = p->kv_base;
        c->mirror[0].bytes = p->kv_bytes;
    }
    // Fixed part of the step inputs; views and page tables follow (sized per step).
    const uint32_t B = (uint32_t)p->n_batch, D2 = (uint32_t)cf->head_dim / 2;
    c->off_embd = 0;
    c->off_cos = B * (uint32_t)cf->n_embd;
    c->off_sin = c->off_cos + B * D2;
    c->off_rows = c->off_sin + B * D2;
    c->off_hsrc = c->off_rows + 2 * B;
    c->off_views = c->off_hsrc + B;
    if (st != GL_OK) {
        vk_destroy(&c->base);
        return st;
    }
    *out = &c->base;
    return GL_OK;
}

// ---- recording helpers ----

static int ok(const struct vk_backend *c)
{
    return c->status == GL_OK;
}

static void fail(struct vk_backend *c, gl_status st, const struct gl_err *e)
{
    if (c->status == GL_OK && st != GL_OK) {
        c->status = st;
        c->err = *e;
    }
}

static struct gl_vk_range whole(struct gl_vk_buffer *b)
{
    return (struct gl_vk_range){.buf = b, .off = 0, .bytes = 0};
}

// One dispatch of shader `name`, then a barrier (every op reads what the one before wrote).
static void dispatch(struct vk_backend *c, const char *name, int n_buf,
                     const struct gl_vk_range *rg, const void *push, uint32_t push_bytes,
                     uint32_t gx, uint32_t gy)
{
    c->actq_src = -1; // every shader but a matmul may write the buffer actq was made from
    if (!ok(c) || gx == 0 || gy == 0)
        return;
    struct gl_err e;
    struct gl_vk_pipeline *pipe;
    gl_status st = gl_vk_pipeline_get(c->dev, name, n_buf, push_bytes, NULL, 0, &pipe, &e);
    if (st == GL_OK) {
        const uint32_t groups[3] = {gx, gy, 1};
        // A recording failure stays in the recorder; step_end's submit returns it.
        if (gl_vk_rec_dispatch(c->rec, pipe, rg, push, groups) != GL_OK)
            return;
    }
    fail(c, st, &e);
    if (ok(c))
        gl_vk_rec_barrier(c->rec);
}

// Grows a buffer to at least `bytes` (contents dropped). Only between steps or before the
// buffer is referenced by this step's recording.
static void ensure(struct vk_backend *c, struct gl_vk_buffer **b, uint64_t bytes,
                   enum gl_vk_mem mem, const char *what)
{
    if (!ok(c) || (*b && gl_vk_buffer_size(*b) >= bytes))
        return;
    gl_vk_buffer_free(*b);
    *b = NULL;
    struct gl_err e;
    fail(c, gl_vk_buffer_create(c->dev, bytes, mem, what, b, &e), &e);
}

static uint32_t *in_words(struct vk_backend *c)
{
    return gl_vk_buffer_map(c->in);
}

// ---- the ops ----

static void vk_step_begin(struct gl_backend *b, const struct gl_bk_step *st)
{
    struct vk_backend *c = vkb(b);
    const struct gl_model_config *cf = &c->m->cfg;
    const int L = cf->n_layer;
    GL_ASSERT(c->st == NULL && st->n > 0 && st->n <= c->n_batch);
    c->st = st;
    c->status = GL_OK;
    c->hd.n = 0;
    c->n_caps = 0;
    c->kv = NULL;
    c->step_no++;
    // KV: one pool per step; its views must agree on the page geometry the shaders use. The
    // copy is sized by this backend's first layer's view: a split pool's device layers see only
    // its device pages (kv.h gl_kv_pool_dev_bytes), the host layers' views the whole pool.
    const struct gl_kv_view *v0 = &st->seqs[0].views[c->first_layer < L ? c->first_layer : 0];
    uint64_t n_pages_words = 0;
    for (int s = 0; s < st->n_seqs; s++)
        for (int l = 0; l < L; l++) {
            const struct gl_kv_view *v = &st->seqs[s].views[l];
            n_pages_words += (uint64_t)v->n_blocks;
            if (v->base != v0->base || v->page_bytes != v0->page_bytes || v->n_pages <= 0 ||
                v->dtype != v0->dtype || v->page_bytes % 4 || v->row_bytes % 4 || v->k_off % 4 ||
                v->v_off % 4 || v->k_scale_off % 2 || v->v_scale_off % 2) {
                struct gl_err e;
                gl_err_set(&e, GL_E_UNSUPPORTED,
                           "vulkan: KV view of sequence %d, layer %d: the device backend keeps "
                           "the KV of one pool per step, rows of whole 32-bit words (dtype %d; "
                           "use --device cpu)",
                           s, l, (int)v->dtype);
                fail(c, GL_E_UNSUPPORTED, &e);
            }
        }
    const uint64_t used =
        c->off_views + VIEW_WORDS * (uint64_t)st->n_seqs * (uint64_t)L + n_pages_words;
    if (used > c->in_words) {
        const uint64_t cap = used * 2;
        ensure(c, &c->in, cap * 4, GL_VK_MEM_HOST, "step inputs");
        ensure(c, &c->in_dev, cap * 4, GL_VK_MEM_DEVICE, "step inputs");
        if (ok(c))
            c->in_words = cap;
    }
    // The pool's mirror: found by base, else a fresh one (the least recently used replaced).
    // The shaders bind it whole.
    const uint64_t pool_bytes = (uint64_t)v0->n_pages * v0->page_bytes;
    const uint64_t range = gl_vk_device_info(c->dev)->max_storage_range;
    if (ok(c) && pool_bytes > range) {
        struct gl_err e;
        gl_err_set(&e, GL_E_LIMIT,
                   "vulkan: the KV pool (%.0f MiB) is larger than one binding of %s (%.0f MiB): "
                   "use --kv-cache-memory %.0fMiB or less",
                   (double)pool_bytes / 1048576.0, gl_vk_device_info(c->dev)->name,
                   (double)range / 1048576.0, (double)range / 1048576.0);
        fail(c, GL_E_LIMIT, &e);
    }
    struct kv_mirror *mr = NULL;
    for (int i = 0; i < MAX_MIRROR && !mr; i++)
        if (c->mirror[i].buf && c->mirror[i].base == v0->base)
            mr = &c->mirror[i];
    if (!mr) {
        mr = &c->mirror[0];
        for (int i = 1; i < MAX_MIRROR; i++)
            if (c->mirror[i].last_use < mr->last_use)
                mr = &c->mirror[i];
        gl_vk_buffer_free(mr->buf);
        *mr = (struct kv_mirror){.base = v0->base};
    }
    struct gl_err e;
    if (ok(c) && mr->bytes < pool_bytes) { // new, or the pool grew: keep what it held
        struct gl_vk_buffer *nb = NULL;
        fail(c, gl_vk_buffer_create(c->dev, pool_bytes, GL_VK_MEM_DEVICE, "KV pool", &nb, &e), &e);
        if (ok(c)) {
            c->retired = mr->buf;
            mr->buf = nb;
        }
    }
    if (ok(c))
        fail(c, gl_vk_rec_begin(c->rec, &e), &e);
    if (!ok(c)) {
        c->st = st; // step_end reports it
        return;
    }
    if (c->retired) {
        gl_vk_rec_copy(c->rec, c->retired, 0, mr->buf, 0, mr->bytes);
    }
    mr->bytes = pool_bytes > mr->bytes ? pool_bytes : mr->bytes;
    mr->last_use = c->step_no;
    c->kv = mr;
    c->kv_dtype = v0->dtype == GL_KV_F16    ? 1u
                  : v0->dtype == GL_KV_BF16 ? 2u
                  : v0->dtype == GL_KV_F32  ? 0u
                                            : 3u;
    // Inputs: RoPE tables, rows, views, page tables.
    uint32_t *in = in_words(c);
    const int64_t D2 = cf->head_dim / 2;
    for (int64_t t = 0; t < st->n; t++) {
        for (int64_t j = 0; j < D2; j++) {
            const double a = (double)st->row_pos[t] * c->inv_freq[j];
            const float cs = (float)cos(a), sn = (float)sin(a);
            memcpy(&in[c->off_cos + t * D2 + j], &cs, 4);
            memcpy(&in[c->off_sin + t * D2 + j], &sn, 4);
        }
        in[c->off_rows + 2 * t] = (uint32_t)st->row_pos[t];
        in[c->off_rows + 2 * t + 1] = (uint32_t)st->row_seq[t];
    }
    uint64_t pg = c->off_views + VIEW_WORDS * (uint64_t)st->n_seqs * (uint64_t)L;
    for (int s = 0; s < st->n_seqs; s++)
        for (int l = 0; l < L; l++) {
            const struct gl_kv_view *v = &st->seqs[s].views[l];
            uint32_t *r = &in[c->off_views + VIEW_WORDS * ((uint64_t)s * L + l)];
            r[0] = (uint32_t)pg;
            r[1] = (uint32_t)v->n_blocks;
            r[2] = (uint32_t)v->block_size;
            r[3] = (uint32_t)(v->page_bytes / 4);
            r[4] = (uint32_t)(v->row_bytes / 4);
            r[5] = (uint32_t)(v->k_off / 4);
            r[6] = (uint32_t)(v->v_off / 4);
            r[7] = (uint32_t)v->k_scale_off;
            r[8] = (uint32_t)v->v_scale_off;
            r[9] = 0;
            for (int32_t i = 0; i < v->n_blocks; i++)
                in[pg + (uint64_t)i] = (uint32_t)v->pages[i];
            pg += (uint64_t)v->n_blocks;
        }
    c->in_used = used;
    gl_vk_rec_copy(c->rec, c->in, 0, c->in_dev, 0, used * 4);
    gl_vk_rec_barrier(c->rec);
}

// Token rows dequantized on the host with the CPU backend's kernels (bit-identical rows), or the
// given rows, into the step inputs; one copy into dst.
static void vk_embed(struct gl_backend *b, enum gl_bk_buf dst)
{
    struct vk_backend *c = vkb(b);
    const struct gl_weight *te = &c->m->tok_embd;
    const int64_t E = c->m->cfg.n_embd;
    GL_ASSERT(gl_bk_buf_width(&c->m->cfg, dst) == E);
    if (!ok(c))
        return;
    float *rows = (float *)(void *)(in_words(c) + c->off_embd);
    for (int64_t t = 0; t < c->st->n; t++) {
        const struct gl_batch_seq *sq = &c->st->seqs[c->st->row_seq[t]];
        const int64_t i = c->st->row_pos[t] - sq->pos0;
        float *y = rows + t * E;
        if (sq->embd && sq->embd[i]) {
            memcpy(y, sq->embd[i], (size_t)E * sizeof(float));
            continue;
        }
        const uint8_t *row = (const uint8_t *)te->data + (size_t)sq->tokens[i] * te->row_bytes;
        if (te->type == GL_TYPE_F32)
            memcpy(y, row, (size_t)E * sizeof(float));
        else
            c->k->to_float[te->type](row, y, E);
    }
    c->actq_src = -1;
    gl_vk_rec_copy(c->rec, c->in, 4 * (uint64_t)c->off_embd, c->act[dst], 0,
                   4 * (uint64_t)(c->st->n * E));
    gl_vk_rec_barrier(c->rec);
}

// Host rows into the step inputs (the embedding rows' place), one copy into dst.
static void vk_load(struct gl_backend *b, enum gl_bk_buf dst, const float *src)
{
    struct vk_backend *c = vkb(b);
    const int64_t E = c->m->cfg.n_embd;
    GL_ASSERT(gl_bk_buf_width(&c->m->cfg, dst) == E);
    if (!ok(c))
        return;
    memcpy(in_words(c) + c->off_embd, src, (size_t)(c->st->n * E) * sizeof(float));
    c->actq_src = -1;
    gl_vk_rec_copy(c->rec, c->in, 4 * (uint64_t)c->off_embd, c->act[dst], 0,
                   4 * (uint64_t)(c->st->n * E));
    gl_vk_rec_barrier(c->rec);
}

struct rms_push {
    uint32_t width, w_off, mode, idx_off;
    float eps;
};

static uint32_t vec_of(const struct vk_backend *c, int layer, enum gl_bk_tensor w)
{
    if (w == GL_BK_NONE)
        return NO_WEIGHT;
    if (w == GL_BK_OUTPUT_NORM)
        return c->vec_off[c->m->cfg.n_layer * N_ROLE_VEC];
    GL_ASSERT(w < N_ROLE_VEC && layer >= 0 && layer < c->m->cfg.n_layer);
    return c->vec_off[layer * N_ROLE_VEC + w];
}

static void rms(struct vk_backend *c, enum gl_bk_buf a, enum gl_bk_buf bb, int layer,
                enum gl_bk_tensor w, float eps, uint32_t mode, int64_t n_rows)
{
    const struct gl_vk_range rg[4] = {whole(c->act[a]), whole(c->act[bb]), whole(c->vecs),
                                      whole(c->in_dev)};
    const struct rms_push pc = {(uint32_t)gl_bk_buf_width(&c->m->cfg, a), vec_of(c, layer, w), mode,
                                c->off_hsrc, eps};
    dispatch(c, "fwd_rms", 4, rg, &pc, sizeof pc, (uint32_t)n_rows, 1);
}

static void vk_rms_norm(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src, int layer,
                        enum gl_bk_tensor w, float eps)
{
    struct vk_backend *c = vkb(b);
    GL_ASSERT(gl_bk_buf_width(&c->m->cfg, dst) == gl_bk_buf_width(&c->m->cfg, src));
    rms(c, src, dst, layer, w, eps, 0, c->st->n);
}

static void vk_norm_residual(struct gl_backend *b, enum gl_bk_buf h, enum gl_bk_buf y, int layer,
                             enum gl_bk_tensor w, float eps)
{
    struct vk_backend *c = vkb(b);
    rms(c, y, h, layer, w, eps, 1, c->st->n);
}

struct actq_push {
    uint32_t width, mode;
};

// y = W x over n_tok rows of activation buffer src: x first rounded to W's vec_dot type as the
// CPU backend quantizes it (fwd_actq.comp), once while only matmuls read it.
static void mm(struct vk_backend *c, struct gl_vk_buffer *y, enum gl_bk_buf src, int64_t n_tok,
               struct gl_vk_buffer *w, const struct gl_weight *wt)
{
    if (!ok(c))
        return;
    struct gl_vk_buffer *x = c->act[src];
    const enum gl_type vdt = gl_type_vec_dot_type(wt->type);
    if (vdt != GL_TYPE_F32) {
        if (c->actq_src != (int)src || c->actq_type != vdt) {
            const struct gl_vk_range rg[2] = {whole(x), whole(c->actq)};
            const uint32_t mode = vdt == GL_TYPE_Q8_K   ? 0
                                  : vdt == GL_TYPE_Q8_0 ? 1
                                  : vdt == GL_TYPE_F16  ? 2
                                                        : 3;
            GL_ASSERT(mode < 3 || vdt == GL_TYPE_BF16);
            const struct actq_push pc = {(uint32_t)wt->n_in, mode};
            dispatch(c, "fwd_actq", 2, rg, &pc, sizeof pc, (uint32_t)n_tok, 1);
            c->actq_src = (int)src;
            c->actq_type = vdt;
        }
        x = c->actq;
    }
    const struct gl_vk_matmul m = {.type = wt->type,
                                   .rows = wt->n_out,
                                   .cols = wt->n_in,
                                   .n_tok = n_tok,
                                   .w = w,
                                   .x = x,
                                   .x_stride = wt->n_in,
                                   .y = y,
                                   .y_stride = wt->n_out};
    struct gl_err e;
    gl_status st = gl_vk_rec_matmul(c->rec, &m, &e);
    fail(c, st, &e);
    if (ok(c))
        gl_vk_rec_barrier(c->rec);
}

static void vk_matmul(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src, int layer,
                      enum gl_bk_tensor w)
{
    struct vk_backend *c = vkb(b);
    GL_ASSERT(dst != src && w >= GL_BK_WQ && w <= GL_BK_FFN_DOWN && layer >= c->first_layer);
    const struct gl_weight *wt = gl_bk_matrix(c->m, layer, w);
    GL_ASSERT(wt->n_in == gl_bk_buf_width(&c->m->cfg, src) &&
              wt->n_out == gl_bk_buf_width(&c->m->cfg, dst));
    mm(c, c->act[dst], src, c->st->n, c->wmat[layer * N_ROLE_MAT + (w - GL_BK_WQ)], wt);
}

struct heads_push {
    uint32_t width, D, w_off, rope, cos_off, sin_off;
    float eps;
};

static void vk_norm_rope_heads(struct gl_backend *b, enum gl_bk_buf buf, int layer,
                               enum gl_bk_tensor w, int rope, float eps)
{
    struct vk_backend *c = vkb(b);
    const struct gl_vk_range rg[3] = {whole(c->act[buf]), whole(c->vecs), whole(c->in_dev)};
    const struct heads_push pc = {(uint32_t)gl_bk_buf_width(&c->m->cfg, buf),
                                  (uint32_t)c->m->cfg.head_dim,
                                  vec_of(c, layer, w),
                                  rope != 0,
                                  c->off_cos,
                                  c->off_sin,
                                  eps};
    dispatch(c, "fwd_heads", 3, rg, &pc, sizeof pc, (uint32_t)c->st->n, 1);
}

struct kv_push {
    uint32_t KD, rows_off, views_off, layer, n_layer, dtype;
};

static void vk_kv_store(struct gl_backend *b, int layer, enum gl_bk_buf k, enum gl_bk_buf v)
{
    struct vk_backend *c = vkb(b);
    if (!ok(c))
        return;
    const struct gl_vk_range rg[4] = {whole(c->act[k]), whole(c->act[v]), whole(c->kv->buf),
                                      whole(c->in_dev)};
    const struct kv_push pc = {(uint32_t)gl_bk_buf_width(&c->m->cfg, k),
                               c->off_rows,
                               c->off_views,
                               (uint32_t)layer,
                               (uint32_t)c->m->cfg.n_layer,
                               c->kv_dtype};
    dispatch(c, "fwd_kv_store", 4, rg, &pc, sizeof pc, (uint32_t)c->st->n, 1);
}

struct attn_push {
    uint32_t H, Hkv, D, layer, n_layer, window, rows_off, views_off;
    float scale;
    uint32_t dtype;
};

static void vk_attn(struct gl_backend *b, int layer, enum gl_bk_buf dst, enum gl_bk_buf q,
                    int window)
{
    struct vk_backend *c = vkb(b);
    if (!ok(c))
        return;
    const struct gl_model_config *cf = &c->m->cfg;
    const struct gl_vk_range rg[4] = {whole(c->act[q]), whole(c->act[dst]), whole(c->kv->buf),
                                      whole(c->in_dev)};
    const struct attn_push pc = {(uint32_t)cf->n_head,
                                 (uint32_t)cf->n_head_kv,
                                 (uint32_t)cf->head_dim,
                                 (uint32_t)layer,
                                 (uint32_t)cf->n_layer,
                                 (uint32_t)(window > 0 ? window : 0),
                                 c->off_rows,
                                 c->off_views,
                                 1.0f / sqrtf((float)cf->head_dim),
                                 c->kv_dtype};
    dispatch(c, "fwd_attn", 4, rg, &pc, sizeof pc, (uint32_t)c->st->n, (uint32_t)cf->n_head);
}

struct ew_push {
    uint32_t n, mode;
    float scale, cap;
};

// fwd_ew over n floats of d (and s): x * y workgroups of 64.
static void ew(struct vk_backend *c, struct gl_vk_buffer *d, struct gl_vk_buffer *s, int64_t n,
               uint32_t mode, float scale, float cap)
{
    GL_ASSERT(n > 0 && n <= (int64_t)UINT32_MAX);
    const struct gl_vk_range rg[2] = {whole(d), whole(s)};
    const struct ew_push pc = {(uint32_t)n, mode, scale, cap};
    const int64_t groups = (n + 63) / 64;
    const uint32_t gx = groups < 65535 ? (uint32_t)groups : 65535u;
    dispatch(c, "fwd_ew", 2, rg, &pc, sizeof pc, gx, (uint32_t)((groups + gx - 1) / gx));
}

static void vk_gate(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src)
{
    struct vk_backend *c = vkb(b);
    ew(c, c->act[dst], c->act[src], c->st->n * gl_bk_buf_width(&c->m->cfg, dst), 0, 0.0f, 0.0f);
}

static void vk_swiglu(struct gl_backend *b, enum gl_bk_buf gate, enum gl_bk_buf up)
{
    struct vk_backend *c = vkb(b);
    ew(c, c->act[gate], c->act[up], c->st->n * gl_bk_buf_width(&c->m->cfg, gate), 1, 0.0f, 0.0f);
}

// Final norm of the listed rows into X, lm_head into the device logits (hd->n rows), scale and
// soft-cap, one copy to the host buffer; step_end places the rows (and the partial head's
// -INFINITY).
static void vk_head(struct gl_backend *b, enum gl_bk_buf from, const struct gl_bk_head *hd)
{
    struct vk_backend *c = vkb(b);
    const struct gl_model_config *cf = &c->m->cfg;
    const int64_t V = cf->n_vocab;
    GL_ASSERT(c->has_head && from != GL_BK_X && gl_bk_buf_width(cf, from) == cf->n_embd &&
              hd->n > 0 && hd->n <= c->n_batch && c->hd.n == 0);
    if (!ok(c))
        return;
    if (hd->n > c->logits_rows) { // not yet referenced by this step's recording
        ensure(c, &c->logits, (uint64_t)hd->n * (uint64_t)V * 4, GL_VK_MEM_DEVICE, "logits");
        ensure(c, &c->logits_host, (uint64_t)hd->n * (uint64_t)V * 4, GL_VK_MEM_HOST, "logits");
        if (!ok(c))
            return;
        c->logits_rows = hd->n;
    }
    c->hd = *hd;
    // The row list reaches the device with the step inputs (copied when the step runs).
    uint32_t *in = in_words(c);
    for (int64_t i = 0; i < hd->n; i++)
        in[c->off_hsrc + i] = (uint32_t)hd->src[i];
    rms(c, from, GL_BK_X, 0, GL_BK_OUTPUT_NORM, cf->rms_eps, 2, hd->n);
    mm(c, c->logits, GL_BK_X, hd->n, c->wmat[cf->n_layer * N_ROLE_MAT], &c->m->output);
    ew(c, c->logits, c->logits, hd->n * V, 2, cf->logit_scale, cf->softcap);
    if (ok(c))
        gl_vk_rec_copy(c->rec, c->logits, 0, c->logits_host, 0, (uint64_t)hd->n * (uint64_t)V * 4);
}

static void vk_capture(struct gl_backend *b, enum gl_bk_buf src, float *dst)
{
    struct vk_backend *c = vkb(b);
    GL_ASSERT(c->n_caps < MAX_CAPS);
    const uint64_t w = (uint64_t)gl_bk_buf_width(&c->m->cfg, src) * 4,
                   bytes = (uint64_t)c->st->n * w;
    const int i = c->n_caps++;
    // Sized for n_batch rows at once, so the buffers do not grow with the steps (the hand-over
    // of a backend without the head is made at create: gl_model_dev_mem_plan counts it).
    if (!c->cap_host[i] || gl_vk_buffer_size(c->cap_host[i]) < bytes)
        ensure(c, &c->cap_host[i], (uint64_t)c->n_batch * w, GL_VK_MEM_HOST, "captures");
    c->cap_dst[i] = dst;
    c->cap_bytes[i] = (size_t)bytes;
    if (ok(c))
        gl_vk_rec_copy(c->rec, c->act[src], 0, c->cap_host[i], 0, bytes);
}

static gl_status vk_step_end(struct gl_backend *b, struct gl_err *err)
{
    struct vk_backend *c = vkb(b);
    GL_ASSERT(c->st != NULL);
    struct gl_err e;
    if (c->kv) { // recording began
        gl_status st = gl_vk_rec_submit(c->rec, &e);
        if (ok(c))
            fail(c, st, &e);
    }
    gl_vk_buffer_free(c->retired);
    c->retired = NULL;
    if (ok(c)) {
        // A step of prefill chunks alone has no head (hd.n 0): no logits buffer to read, maybe
        // none allocated yet.
        const int64_t V = c->m->cfg.n_vocab;
        const float *lg = c->hd.n > 0 ? gl_vk_buffer_map(c->logits_host) : NULL;
        for (int64_t i = 0; i < c->hd.n; i++) {
            float *out = c->hd.logits + (int64_t)c->hd.dst[i] * V;
            const float *row = lg + i * V;
            if (!c->hd.groups) {
                memcpy(out, row, (size_t)V * sizeof(float));
                continue;
            }
            for (int64_t j = 0; j < V; j++)
                out[j] = -INFINITY;
            for (int64_t g = 0; g < c->hd.n_groups; g++) {
                const int64_t r0 = (int64_t)c->hd.groups[g] * GL_R16_ROWS;
                const int64_t r1 = r0 + GL_R16_ROWS < V ? r0 + GL_R16_ROWS : V;
                memcpy(out + r0, row + r0, (size_t)(r1 - r0) * sizeof(float));
            }
        }
        for (int i = 0; i < c->n_caps; i++)
            memcpy(c->cap_dst[i], gl_vk_buffer_map(c->cap_host[i]), c->cap_bytes[i]);
    }
    c->st = NULL;
    c->hd.n = 0;
    if (!ok(c)) {
        // The mirror is kept: other sequences' K/V live in it, and a failed step wrote at most
        // its own positions, which the caller fails or recomputes (a lost device fails every
        // later call anyway).
        if (err)
            *err = c->err;
        return c->status;
    }
    return GL_OK;
}

const struct gl_backend_ops gl_backend_vk = {
    .name = "vulkan",
    .create = vk_create,
    .destroy = vk_destroy,
    .step_begin = vk_step_begin,
    .embed = vk_embed,
    .rms_norm = vk_rms_norm,
    .matmul = vk_matmul,
    .norm_rope_heads = vk_norm_rope_heads,
    .kv_store = vk_kv_store,
    .attn = vk_attn,
    .gate = vk_gate,
    .swiglu = vk_swiglu,
    .norm_residual = vk_norm_residual,
    .head = vk_head,
    .load = vk_load,
    .capture = vk_capture,
    .step_end = vk_step_end,
};

static struct vk_backend *vkb(struct gl_backend *b)
{
    GL_ASSERT(b && b->ops == &gl_backend_vk);
    return (struct vk_backend *)(void *)b;
}

uint64_t gl_backend_vk_bytes(const struct gl_backend *b, int host)
{
    GL_ASSERT(b && b->ops == &gl_backend_vk);
    const struct vk_backend *c = (const struct vk_backend *)(const void *)b;
    return gl_vk_device_held(c->dev, host ? GL_VK_MEM_HOST : GL_VK_MEM_DEVICE);
}

// ---- the memory plan (model.h) ----

// Adds the upload of rows [r0, r0 + n) of GGUF tensor `name` (one device buffer).
static gl_status plan_matrix(const struct gl_gguf *g, const char *name, int64_t r0, int64_t n,
                             struct gl_model_dev_mem *o, struct gl_err *err)
{
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, name);
    if (!t || t->n_dims != 2 || t->type >= GL_TYPE_COUNT)
        return gl_err_set(err, GL_E_FORMAT, "plan: tensor %s missing or not a matrix", name);
    if (!gl_vk_matmul_supported((enum gl_type)t->type)) {
        const struct gl_type_traits *tt = gl_type_traits_of(t->type);
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "vulkan: no matmul shader for %s's type %s: use --device cpu", name,
                          tt && tt->name ? tt->name : "?");
    }
    GL_ASSERT(r0 >= 0 && r0 + (n < 0 ? 0 : n) <= t->ne[1]);
    const uint64_t b =
        buf_bytes(gl_type_row_size(t->type, t->ne[0]) * (uint64_t)(n < 0 ? t->ne[1] : n));
    o->weights_by_type[t->type] += b;
    o->weights += b;
    return GL_OK;
}

gl_status gl_model_dev_mem_plan(const struct gl_gguf *g, const struct gl_model_config *cf,
                                int n_batch, const struct gl_model_dev *d, uint64_t kv_pool_bytes,
                                struct gl_model_dev_mem *out, struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    const int L = cf->n_layer;
    const int ngl = d->n_gpu_layers < 0 ? L + 1 : d->n_gpu_layers;
    if (ngl > L + 1)
        return gl_err_set(err, GL_E_INVAL,
                          "--n-gpu-layers %d: not in 0..%d (the model's %d layers, + 1 for the "
                          "output head; -1: all)",
                          ngl, L + 1, L);
    out->n_gpu_layers = ngl;
    out->head_on_device = ngl > L;
    if (ngl == 0)
        return GL_OK; // all on the CPU: no device buffer
    const int64_t HD = (int64_t)cf->n_head * cf->head_dim,
                  KD = (int64_t)cf->n_head_kv * cf->head_dim;
    gl_status st = GL_OK;
    char nm[96];
    static const char *const roles[] = {"attn_gate", "attn_output", "ffn_gate", "ffn_up",
                                        "ffn_down"};
    for (int l = L - (ngl < L ? ngl : L); st == GL_OK && l < L; l++) {
        snprintf(nm, sizeof nm, "blk.%d.attn_q.weight", l);
        if (!gl_gguf_find_tensor(g, nm)) { // llama.cpp's fused attn_qkv: three buffers of it
            snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", l);
            st = plan_matrix(g, nm, 0, HD, out, err);
            if (st == GL_OK)
                st = plan_matrix(g, nm, HD, KD, out, err);
            if (st == GL_OK)
                st = plan_matrix(g, nm, HD + KD, KD, out, err);
        } else {
            st = plan_matrix(g, nm, 0, -1, out, err);
            snprintf(nm, sizeof nm, "blk.%d.attn_k.weight", l);
            if (st == GL_OK)
                st = plan_matrix(g, nm, 0, -1, out, err);
            snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", l);
            if (st == GL_OK)
                st = plan_matrix(g, nm, 0, -1, out, err);
        }
        for (size_t r = 0; st == GL_OK && r < sizeof roles / sizeof roles[0]; r++) {
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, roles[r]);
            st = plan_matrix(g, nm, 0, -1, out, err);
        }
    }
    if (st == GL_OK && out->head_on_device)
        st = plan_matrix(g, "output.weight", 0, -1, out, err);
    if (st != GL_OK)
        return st;
    const struct vk_sizes z =
        vk_sizes_of(cf, n_batch, d->max_seqs, d->max_len, d->block_size, d->head_rows);
    out->norms = buf_bytes(z.norm_bytes);
    out->activations = z.act_bytes; // multiples of 4 already
    out->step_inputs = d->max_seqs > 0 ? z.in_words * 4 : 0;
    // n_vocab is token_embd's row count, known once a model is loaded (not from the metadata).
    const struct gl_gguf_tensor *te = gl_gguf_find_tensor(g, "token_embd.weight");
    const uint64_t V = cf->n_vocab > 0         ? (uint64_t)cf->n_vocab
                       : te && te->n_dims == 2 ? (uint64_t)te->ne[1]
                                               : 0;
    out->logits = out->head_on_device ? z.head_rows * V * 4 : 0;
    out->kv = buf_bytes(kv_pool_bytes);
    out->kv_binding = out->kv;
    out->device_total =
        out->weights + out->norms + out->activations + out->step_inputs + out->logits + out->kv;
    out->host_visible = out->step_inputs + out->logits + GL_VK_STAGING_BYTES +
                        (out->head_on_device ? 0 : (uint64_t)n_batch * (uint64_t)cf->n_embd * 4);
    return GL_OK;
}

// The heap device-local buffers go to: the largest device-local one (any, where none is).
static int dev_heap_of(const struct gl_vk_device_info *di)
{
    int h = -1;
    for (int i = 0; i < di->n_heaps; i++)
        if (h < 0 || (di->heaps[i].device_local && !di->heaps[h].device_local) ||
            (di->heaps[i].device_local == di->heaps[h].device_local &&
             di->heaps[i].bytes > di->heaps[h].bytes))
            h = i;
    return h;
}

// The device list (caller frees *inf) if device index exists, else an error naming the count.
static gl_status device_info_at(int index, struct gl_vk_device_info **inf, struct gl_err *err)
{
    int n = 0;
    gl_status st = gl_vk_list_devices(inf, &n, err);
    if (st != GL_OK)
        return st;
    if (index < 0 || index >= n) {
        gl_free(*inf);
        *inf = NULL;
        return gl_err_set(err, GL_E_INVAL,
                          "vulkan: device %d does not exist (%d found: `glint devices` lists them)",
                          index, n);
    }
    return GL_OK;
}

gl_status gl_model_dev_kv_room(const struct gl_model_dev_mem *p, int index, double utilization,
                               int64_t *room, uint64_t *heap_bytes, uint64_t *range_bytes,
                               struct gl_err *err)
{
    *room = -1;
    *heap_bytes = *range_bytes = 0;
    struct gl_vk_device_info *inf = NULL;
    gl_status st = device_info_at(index, &inf, err);
    if (st != GL_OK)
        return st;
    const struct gl_vk_device_info *di = &inf[index];
    const int h = dev_heap_of(di);
    *heap_bytes = h >= 0 ? di->heaps[h].bytes : 0;
    *range_bytes = di->max_storage_range;
    const uint64_t rest = p->device_total - p->kv + (di->n_heaps == 1 ? p->host_visible : 0);
    gl_free(inf);
    double r = (double)*heap_bytes * utilization - (double)rest;
    if (r > (double)*range_bytes)
        r = (double)*range_bytes;
    *room = (int64_t)r;
    return GL_OK;
}

gl_status gl_model_dev_mem_check(const struct gl_model_dev_mem *p, int index, uint64_t *heap_bytes,
                                 char *name, size_t name_len, struct gl_err *err)
{
    *heap_bytes = 0;
    if (name_len)
        name[0] = 0;
    struct gl_vk_device_info *inf = NULL;
    gl_status st = device_info_at(index, &inf, err);
    if (st != GL_OK)
        return st;
    const struct gl_vk_device_info *di = &inf[index];
    snprintf(name, name_len, "%s", di->name);
    const int h = dev_heap_of(di);
    const uint64_t heap = h >= 0 ? di->heaps[h].bytes : 0;
    // One heap (lavapipe, integrated GPUs): host-visible buffers come out of it too.
    const uint64_t need = p->device_total + (di->n_heaps == 1 ? p->host_visible : 0);
    *heap_bytes = heap;
    const uint64_t range = di->max_storage_range;
    char dname[256];
    snprintf(dname, sizeof dname, "%s", di->name);
    gl_free(inf);
    if (need > heap)
        return gl_err_set(
            err, GL_E_NOMEM,
            "vulkan: %s: the device needs %.1f MiB (weights %.1f, KV %.1f, scratch %.1f, "
            "host-visible %.1f) but its memory heap has %.1f MiB: lower --n-gpu-layers, "
            "--kv-cache-memory or --max-num-batched-tokens, or use --device cpu",
            dname, MIB_OF(need), MIB_OF(p->weights + p->norms), MIB_OF(p->kv),
            MIB_OF(p->activations + p->step_inputs + p->logits), MIB_OF(need - p->device_total),
            MIB_OF(heap));
    if (p->kv_binding > range)
        return gl_err_set(err, GL_E_LIMIT,
                          "vulkan: %s: the KV pool's device copy (%.1f MiB) is larger than one "
                          "storage binding (%.1f MiB): use --kv-cache-memory %.0fMiB or less",
                          dname, MIB_OF(p->kv_binding), MIB_OF(range), floor(MIB_OF(range)));
    return GL_OK;
}
