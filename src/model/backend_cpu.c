// SPDX-License-Identifier: MIT
// backend_cpu: the CPU implementation of the backend ops (backend.h): every op runs when it is
// called, on the host thread pool, with the kernels of src/kernels (gl_matmul / gl_matmul_r16 /
// gl_matmul_groups, attn_tile). Activations are host arrays of n_batch rows sized at create, so a
// steady-state decode step allocates nothing. Matmuls quantize their input rows to the weight's
// vec_dot type; the quantized copy is kept while only matmuls follow (q/k/v/gate share one, as do
// ffn_gate/ffn_up) and dropped by any other op. K/V rows are converted back to f32 one head row at
// a time while attending (fp8: one bf16 scale per row, see src/kv/kv.c).
#include "model/backend.h"
#include "model/model_int.h"
#include "quant/fp8.h"

#include <math.h>
#include <string.h>

// Tokens per attention block: 8 tokens x 16 query heads share each converted key tile, and the
// block's outputs (8 x 16 x 128 f32 = 64 KiB) stay in L2.
#define ATTN_QB 8

struct cpu_backend {
    struct gl_backend base;
    const struct gl_model *m;
    const struct gl_kernels *k;
    struct gl_pool *pool;
    int n_threads;
    float *buf[GL_BK_BUF_COUNT]; // n_batch x gl_bk_buf_width, dense
    float *rope_cos, *rope_sin;  // B x D/2 for the current step (sliding-layer base)
    double *inv_freq;            // D/2: base_swa^(-2j/D)
    // attention scratch per thread (att_stride floats): one key tile transposed (D x 16), its
    // values (16 x D), a D-float conversion row, then for ATTN_QB tokens x grp query heads the
    // running max, sum and unnormalised output (D each); independent of n_ctx
    float *scores;
    size_t att_stride;
    int32_t *blk_t0, *blk_n; // attention blocks of the step: first row, rows (same sequence)
    int64_t n_blk;
    void *act; // quantized activation rows
    size_t act_cap;
    // the activation buffer currently holds src quantized to act_type (n_tok x n_in)
    const float *act_src;
    enum gl_type act_type;
    int64_t act_n_tok, act_n_in;
    const struct gl_bk_step *st; // the step in progress (borrowed until step_end)
};

static struct cpu_backend *cpu(struct gl_backend *b)
{
    GL_ASSERT(b && b->ops == &gl_backend_cpu);
    return (struct cpu_backend *)(void *)b;
}

static void cpu_destroy(struct gl_backend *b)
{
    if (!b)
        return;
    struct cpu_backend *c = cpu(b);
    for (int i = 0; i < GL_BK_BUF_COUNT; i++)
        gl_free_aligned(c->buf[i]);
    gl_free_aligned(c->rope_cos);
    gl_free_aligned(c->rope_sin);
    gl_free_aligned(c->scores);
    gl_free_aligned(c->act);
    gl_free(c->inv_freq);
    gl_free(c->blk_t0);
    gl_free(c->blk_n);
    gl_free(c);
}

// Largest quantized activation row over every weight (f32 weights read x in place).
static size_t max_act_row(const struct gl_model *m)
{
    size_t best = gl_type_row_size(gl_type_vec_dot_type(m->output.type), m->output.n_in);
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int t = GL_BK_WQ; t <= GL_BK_FFN_DOWN; t++) {
            const struct gl_weight *w = gl_bk_matrix(m, l, (enum gl_bk_tensor)t);
            size_t r = gl_type_row_size(gl_type_vec_dot_type(w->type), w->n_in);
            best = r > best ? r : best;
        }
    return best;
}

static gl_status cpu_create(struct gl_backend **out, const struct gl_backend_params *p,
                            struct gl_err *err)
{
    *out = NULL;
    const struct gl_model_config *cf = &p->m->cfg;
    struct cpu_backend *c = gl_calloc(1, sizeof *c);
    if (!c)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for the CPU backend");
    c->base.ops = &gl_backend_cpu;
    c->m = p->m;
    c->k = p->k;
    c->pool = p->pool;
    c->n_threads = gl_pool_size(p->pool);
    GL_ASSERT(c->k->attn_tile != NULL);
    GL_ASSERT(c->k->to_float[GL_TYPE_F16] && c->k->to_float[GL_TYPE_BF16]); // f16/bf16 KV rows
    const size_t B = (size_t)p->n_batch, D2 = (size_t)cf->head_dim / 2;
    int ok = 1;
    for (int i = 0; i < GL_BK_BUF_COUNT; i++) {
        c->buf[i] =
            gl_malloc_aligned(B * (size_t)gl_bk_buf_width(cf, (enum gl_bk_buf)i) * sizeof(float));
        ok = ok && c->buf[i];
    }
    c->act_cap = max_act_row(p->m) * B;
    c->act = gl_malloc_aligned(c->act_cap ? c->act_cap : 64);
    c->rope_cos = gl_malloc_aligned(B * D2 * sizeof(float));
    c->rope_sin = gl_malloc_aligned(B * D2 * sizeof(float));
    const size_t grp = (size_t)(cf->n_head / cf->n_head_kv), D = (size_t)cf->head_dim;
    c->att_stride = (2 * GL_ATTN_TILE * D + D + ATTN_QB * grp * (2 + D) + 15) / 16 * 16;
    c->scores = gl_malloc_aligned((size_t)c->n_threads * c->att_stride * sizeof(float));
    if (c->scores) // key lanes a tile does not fill are computed on (then masked): keep them finite
        memset(c->scores, 0, (size_t)c->n_threads * c->att_stride * sizeof(float));
    c->blk_t0 = gl_malloc(B * sizeof *c->blk_t0);
    c->blk_n = gl_malloc(B * sizeof *c->blk_n);
    c->inv_freq = gl_malloc(D2 * sizeof(double));
    if (!ok || !c->act || !c->rope_cos || !c->rope_sin || !c->scores || !c->blk_t0 || !c->blk_n ||
        !c->inv_freq) {
        cpu_destroy(&c->base);
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for step scratch (batch %d)",
                          p->n_batch);
    }
    for (size_t j = 0; j < D2; j++)
        c->inv_freq[j] = pow((double)cf->rope_base_swa, -2.0 * (double)j / (double)cf->head_dim);
    *out = &c->base;
    return GL_OK;
}

// Drops the quantized copy of a matmul input: every op but matmul may overwrite buffers.
static void act_invalidate(struct cpu_backend *c)
{
    c->act_src = NULL;
}

// ---- elementwise pieces (plain C: cheap next to the matmuls) ----

// Interleaved-pair RoPE on one head of D dims: pair (2j, 2j+1) rotated by angle pos * inv_freq[j].
static void rope_head(float *v, const float *cs, const float *sn, int d2)
{
    for (int j = 0; j < d2; j++) {
        float x0 = v[2 * j], x1 = v[2 * j + 1];
        v[2 * j] = x0 * cs[j] - x1 * sn[j];
        v[2 * j + 1] = x0 * sn[j] + x1 * cs[j];
    }
}

// ---- matmul with activation quantization ----

// out (n_tok x w->n_out) = x (n_tok x n_in) times w's rows: all of them (groups NULL), or those
// of the listed 16-row groups (gl_matmul_groups; the other entries of out are left alone).
static void matmul_sel(struct cpu_backend *c, const struct gl_weight *w, const float *x,
                       int64_t n_tok, float *out, const int32_t *groups, int64_t n_groups)
{
    enum gl_type vdt = gl_type_vec_dot_type(w->type);
    const void *act = x;
    size_t stride = (size_t)w->n_in * sizeof(float);
    if (vdt != GL_TYPE_F32) {
        stride = gl_type_row_size(vdt, w->n_in);
        GL_ASSERT(stride > 0 && stride * (size_t)n_tok <= c->act_cap);
        if (!(c->act_src == x && c->act_type == vdt && c->act_n_tok == n_tok &&
              c->act_n_in == w->n_in)) {
            gl_quantize_rows(c->pool, c->k, vdt, x, n_tok, w->n_in, c->act, stride);
            c->act_src = x;
            c->act_type = vdt;
            c->act_n_tok = n_tok;
            c->act_n_in = w->n_in;
        }
        act = c->act;
    }
    if (groups)
        gl_matmul_groups(c->pool, c->k, w->type, w->r16, w->data, w->n_out, w->n_in, act, stride,
                         n_tok, out, w->n_out, groups, n_groups);
    else
        (w->r16 ? gl_matmul_r16 : gl_matmul)(c->pool, c->k, w->type, w->data, w->n_out, w->n_in,
                                             act, stride, n_tok, out, w->n_out);
}

static void cpu_matmul(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src, int layer,
                       enum gl_bk_tensor w)
{
    struct cpu_backend *c = cpu(b);
    GL_ASSERT(dst != src);
    matmul_sel(c, gl_bk_matrix(c->m, layer, w), c->buf[src], c->st->n, c->buf[dst], NULL, 0);
}

// ---- KV rows ----

// Stores one position's K or V row (KD f32 values) in the view's dtype. fp8 rows get their own
// scale bf16(amax / 448) (src/quant/fp8.h), so the largest element lands on e4m3's largest, 448.
static void kv_store(const struct gl_kv_view *v, int64_t p, int is_v, const float *src, int64_t KD)
{
    uint8_t *pg = gl_kv_view__page(v, p);
    const int64_t r = p % v->block_size;
    uint8_t *dst = pg + (is_v ? v->v_off : v->k_off) + (size_t)r * v->row_bytes;
    switch (v->dtype) {
    case GL_KV_F32:
        memcpy(dst, src, (size_t)KD * sizeof(float));
        break;
    case GL_KV_F16:
        for (int64_t i = 0; i < KD; i++) {
            uint16_t h = gl_f32_to_fp16(src[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case GL_KV_BF16:
        for (int64_t i = 0; i < KD; i++) {
            uint16_t h = gl_f32_to_bf16(src[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case GL_KV_FP8_E4M3: {
        const uint16_t sc = gl_fp8_e4m3_encode_row(src, KD, dst);
        memcpy(pg + (is_v ? v->v_scale_off : v->k_scale_off) + (size_t)r * sizeof sc, &sc,
               sizeof sc);
        break;
    }
    }
}

// Head kh of the K or V row at position p as D f32 values: in place for f32, else converted
// into buf.
static const float *kv_head(const struct gl_kernels *k, const struct gl_kv_view *v, int64_t p,
                            int is_v, int kh, int D, float *buf)
{
    const uint8_t *pg = gl_kv_view__page(v, p);
    const int64_t r = p % v->block_size;
    const uint8_t *row = pg + (is_v ? v->v_off : v->k_off) + (size_t)r * v->row_bytes;
    const size_t esz = gl_kv_dtype_size(v->dtype);
    const uint8_t *src = row + (size_t)kh * (size_t)D * esz;
    switch (v->dtype) {
    case GL_KV_F32:
        return (const float *)(const void *)src;
    case GL_KV_F16:
        k->to_float[GL_TYPE_F16](src, buf, D);
        return buf;
    case GL_KV_BF16:
        k->to_float[GL_TYPE_BF16](src, buf, D);
        return buf;
    case GL_KV_FP8_E4M3: { // one scale covers all heads of the row
        uint16_t sc;
        memcpy(&sc, pg + (is_v ? v->v_scale_off : v->k_scale_off) + (size_t)r * sizeof sc,
               sizeof sc);
        gl_fp8_e4m3_decode_row(src, sc, D, buf);
        return buf;
    }
    }
    GL_ASSERT(!"unknown kv dtype");
    return NULL;
}

// ---- attention ----

struct attn_job {
    struct cpu_backend *c;
    int layer;
    int window; // 0 = causal only
    const float *q;
    float *out;
};

// One work item = one block of up to ATTN_QB consecutive tokens of one sequence x one kv head:
// the block's keys are walked in tiles of GL_ATTN_TILE positions aligned to multiples of 16, each
// tile converted to f32 once and used by every token of the block and its grp query heads
// (kernels.h attn_tile: online softmax). A token sees exactly the tiles that intersect its own
// key range, in order, with exact zero weight outside it, so its result does not depend on the
// block it shares, the chunking of the prompt, or the batch.
static void attn_rows(void *ctx, int ith, int nth)
{
    const struct attn_job *j = ctx;
    struct cpu_backend *c = j->c;
    const int32_t *row_seq = c->st->row_seq;
    const int64_t *row_pos = c->st->row_pos;
    const struct gl_model_config *cf = &c->m->cfg;
    const int H = cf->n_head, Hkv = cf->n_head_kv, D = cf->head_dim, grp = H / Hkv;
    const float scale = 1.0f / sqrtf((float)D);
    float *KT = c->scores + (size_t)ith * c->att_stride, *V = KT + GL_ATTN_TILE * D;
    float *row = V + GL_ATTN_TILE * D; // one K or V head converted from the cache dtype
    float *mx = row + D, *sum = mx + ATTN_QB * grp, *O = sum + ATTN_QB * grp;
    for (int64_t item = ith; item < c->n_blk * Hkv; item += nth) {
        const int64_t b = item / Hkv, t0 = c->blk_t0[b];
        const int kh = (int)(item % Hkv), nq = c->blk_n[b];
        const struct gl_kv_view *view = &c->st->seqs[row_seq[t0]].views[j->layer];
        int64_t lo[ATTN_QB], hi[ATTN_QB]; // visible keys of token i: lo[i] .. hi[i] - 1
        for (int i = 0; i < nq; i++) {
            const int64_t p = row_pos[t0 + i];
            lo[i] = j->window > 0 && p - j->window + 1 > 0 ? p - j->window + 1 : 0;
            hi[i] = p + 1;
        }
        for (int r = 0; r < nq * grp; r++) {
            mx[r] = -INFINITY;
            sum[r] = 0.0f;
        }
        memset(O, 0, (size_t)nq * (size_t)grp * (size_t)D * sizeof(float));
        for (int64_t s0 = lo[0] / GL_ATTN_TILE * GL_ATTN_TILE; s0 < hi[nq - 1];
             s0 += GL_ATTN_TILE) {
            const int64_t a = s0 > lo[0] ? s0 : lo[0];
            const int64_t e = s0 + GL_ATTN_TILE < hi[nq - 1] ? s0 + GL_ATTN_TILE : hi[nq - 1];
            for (int64_t s = a; s < e; s++) {
                const int k = (int)(s - s0);
                const float *kr = kv_head(c->k, view, s, 0, kh, D, row);
                for (int d = 0; d < D; d++)
                    KT[d * GL_ATTN_TILE + k] = kr[d];
                const float *vr = kv_head(c->k, view, s, 1, kh, D, row);
                memcpy(V + (size_t)k * (size_t)D, vr, (size_t)D * sizeof(float));
            }
            for (int i = 0; i < nq; i++) {
                const int64_t kl = lo[i] > s0 ? lo[i] : s0;
                const int64_t kr = hi[i] < s0 + GL_ATTN_TILE ? hi[i] : s0 + GL_ATTN_TILE;
                if (kl >= kr)
                    continue;
                const float *q = j->q + (t0 + i) * (int64_t)H * D + (int64_t)kh * grp * D;
                c->k->attn_tile(D, grp, q, KT, V, (int)(kl - s0), (int)(kr - s0), scale,
                                mx + i * grp, sum + i * grp, O + (size_t)i * grp * D);
            }
        }
        for (int i = 0; i < nq; i++)
            for (int g = 0; g < grp; g++) {
                const float inv = 1.0f / sum[i * grp + g];
                const float *o = O + ((size_t)i * grp + g) * D;
                float *dst = j->out + (t0 + i) * (int64_t)H * D + ((int64_t)kh * grp + g) * D;
                for (int d = 0; d < D; d++)
                    dst[d] = o[d] * inv;
            }
    }
}

// Splits the step's rows into attention blocks: runs of consecutive positions of one sequence,
// at most ATTN_QB long.
static void attn_blocks(struct cpu_backend *c, const struct gl_bk_step *st)
{
    const int32_t *row_seq = st->row_seq;
    const int64_t *row_pos = st->row_pos;
    c->n_blk = 0;
    for (int64_t t = 0; t < st->n; t++) {
        int64_t b = c->n_blk - 1;
        if (b >= 0 && c->blk_n[b] < ATTN_QB && row_seq[t] == row_seq[t - 1] &&
            row_pos[t] == row_pos[t - 1] + 1) {
            c->blk_n[b]++;
        } else {
            c->blk_t0[c->n_blk] = (int32_t)t;
            c->blk_n[c->n_blk++] = 1;
        }
    }
}

// ---- per-token elementwise steps, split over the pool by token for prefill ----

enum rows_op {
    ROWS_NORM,       // dst[t] = RMS(src[t]) * w
    ROWS_POST_RESID, // src[t] = RMS(src[t]) * w ; dst[t] += src[t]  (post-norm + residual)
    ROWS_GATE,       // dst[t] *= sigmoid(src[t])                      (attention output gate)
    ROWS_SWIGLU,     // dst[t] = silu(dst[t]) * src[t]                 (dst = gate, src = up)
};

struct rows_job {
    enum rows_op op;
    const struct gl_kernels *k;
    float *dst, *src;
    const float *w;
    int64_t n_tok, width;
    float eps;
};

static void rows_run(void *ctx, int ith, int nth)
{
    const struct rows_job *j = ctx;
    const int64_t W = j->width;
    for (int64_t t = ith; t < j->n_tok; t += nth) {
        float *d = j->dst + t * W, *s = j->src + t * W;
        switch (j->op) {
        case ROWS_NORM:
            j->k->rms_norm(d, s, j->w, W, j->eps);
            break;
        case ROWS_POST_RESID:
            j->k->rms_norm(s, s, j->w, W, j->eps);
            for (int64_t i = 0; i < W; i++)
                d[i] += s[i];
            break;
        case ROWS_GATE:
            j->k->gate(d, s, W);
            break;
        case ROWS_SWIGLU:
            j->k->swiglu(d, s, W);
            break;
        }
    }
}

// One rows op over the step's rows of dst and src (same width), weight w of layer.
static void rows(struct gl_backend *b, enum rows_op op, enum gl_bk_buf dst, enum gl_bk_buf src,
                 int layer, enum gl_bk_tensor w, float eps)
{
    struct cpu_backend *c = cpu(b);
    const int64_t width = gl_bk_buf_width(&c->m->cfg, dst);
    GL_ASSERT(width == gl_bk_buf_width(&c->m->cfg, src));
    struct rows_job j = {op,       c->k,  c->buf[dst], c->buf[src], gl_bk_vector(c->m, layer, w),
                         c->st->n, width, eps};
    act_invalidate(c);
    if (j.n_tok > 1)
        gl_pool_run(c->pool, rows_run, &j);
    else
        rows_run(&j, 0, 1);
}

static void cpu_rms_norm(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src, int layer,
                         enum gl_bk_tensor w, float eps)
{
    rows(b, ROWS_NORM, dst, src, layer, w, eps);
}

static void cpu_norm_residual(struct gl_backend *b, enum gl_bk_buf h, enum gl_bk_buf y, int layer,
                              enum gl_bk_tensor w, float eps)
{
    rows(b, ROWS_POST_RESID, h, y, layer, w, eps);
}

static void cpu_gate(struct gl_backend *b, enum gl_bk_buf dst, enum gl_bk_buf src)
{
    rows(b, ROWS_GATE, dst, src, 0, GL_BK_NONE, 0.0f);
}

static void cpu_swiglu(struct gl_backend *b, enum gl_bk_buf gate, enum gl_bk_buf up)
{
    rows(b, ROWS_SWIGLU, gate, up, 0, GL_BK_NONE, 0.0f);
}

// Logit scale and soft-cap (the table's softcap: z <- cap * tanh(scale * z / cap)) over n_rows x V
// logits, contiguous element ranges per thread: every entry, or (groups) the entries of the listed
// 16-row groups of each row.
struct cap_job {
    gl_softcap_fn fn;
    float *z;
    int64_t n_rows, V;
    float scale, cap;
    const int32_t *groups; // NULL: all
    int64_t n_groups;
};

static void cap_run(void *ctx, int ith, int nth)
{
    const struct cap_job *j = ctx;
    if (!j->groups) {
        int64_t n = j->n_rows * j->V, i0 = n * ith / nth, i1 = n * (ith + 1) / nth;
        j->fn(j->z + i0, i1 - i0, j->scale, j->cap);
        return;
    }
    int64_t n = j->n_rows * j->n_groups, u0 = n * ith / nth, u1 = n * (ith + 1) / nth;
    for (int64_t u = u0; u < u1; u++) {
        int64_t r0 = (int64_t)j->groups[u % j->n_groups] * GL_R16_ROWS;
        int64_t r1 = r0 + GL_R16_ROWS < j->V ? r0 + GL_R16_ROWS : j->V;
        j->fn(j->z + u / j->n_groups * j->V + r0, r1 - r0, j->scale, j->cap);
    }
}

// ---- the step ----

static void cpu_step_begin(struct gl_backend *b, const struct gl_bk_step *st)
{
    struct cpu_backend *c = cpu(b);
    GL_ASSERT(c->st == NULL && st->n > 0);
    c->st = st;
    act_invalidate(c);
    attn_blocks(c, st);
    // RoPE angles per row (only sliding layers rotate; they share one base).
    const int64_t D2 = c->m->cfg.head_dim / 2;
    for (int64_t t = 0; t < st->n; t++)
        for (int64_t j = 0; j < D2; j++) {
            double a = (double)st->row_pos[t] * c->inv_freq[j];
            c->rope_cos[t * D2 + j] = (float)cos(a);
            c->rope_sin[t * D2 + j] = (float)sin(a);
        }
}

// One row of the table per token, dequantized (or the given row, copied).
static void cpu_embed(struct gl_backend *b, enum gl_bk_buf dst)
{
    struct cpu_backend *c = cpu(b);
    const struct gl_weight *te = &c->m->tok_embd;
    const int64_t E = c->m->cfg.n_embd;
    GL_ASSERT(gl_bk_buf_width(&c->m->cfg, dst) == E);
    act_invalidate(c);
    for (int64_t t = 0; t < c->st->n; t++) {
        const struct gl_batch_seq *sq = &c->st->seqs[c->st->row_seq[t]];
        const int64_t i = c->st->row_pos[t] - sq->pos0;
        float *y = c->buf[dst] + t * E;
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
}

static void cpu_norm_rope_heads(struct gl_backend *b, enum gl_bk_buf buf, int layer,
                                enum gl_bk_tensor w, int rope, float eps)
{
    struct cpu_backend *c = cpu(b);
    const int64_t D = c->m->cfg.head_dim, D2 = D / 2, W = gl_bk_buf_width(&c->m->cfg, buf);
    const float *wv = gl_bk_vector(c->m, layer, w);
    act_invalidate(c);
    for (int64_t t = 0; t < c->st->n; t++)
        for (int64_t hh = 0; hh < W / D; hh++) {
            float *v = c->buf[buf] + t * W + hh * D;
            c->k->rms_norm(v, v, wv, D, eps);
            if (rope)
                rope_head(v, c->rope_cos + t * D2, c->rope_sin + t * D2, (int)D2);
        }
}

static void cpu_kv_store(struct gl_backend *b, int layer, enum gl_bk_buf k, enum gl_bk_buf v)
{
    struct cpu_backend *c = cpu(b);
    const int64_t KD = gl_bk_buf_width(&c->m->cfg, k);
    act_invalidate(c);
    for (int64_t t = 0; t < c->st->n; t++) {
        const struct gl_kv_view *view = &c->st->seqs[c->st->row_seq[t]].views[layer];
        kv_store(view, c->st->row_pos[t], 0, c->buf[k] + t * KD, KD);
        kv_store(view, c->st->row_pos[t], 1, c->buf[v] + t * KD, KD);
    }
}

static void cpu_attn(struct gl_backend *b, int layer, enum gl_bk_buf dst, enum gl_bk_buf q,
                     int window)
{
    struct cpu_backend *c = cpu(b);
    act_invalidate(c);
    struct attn_job aj = {c, layer, window, c->buf[q], c->buf[dst]};
    if (c->n_blk * c->m->cfg.n_head_kv > 1)
        gl_pool_run(c->pool, attn_rows, &aj);
    else
        attn_rows(&aj, 0, 1);
}

// Output head for rows x[0..n) (already final-normed) into out (n x n_vocab): lm_head, logit
// scale, soft-cap. groups (n_groups of them, NULL: all): only those 16-row groups of the head
// are computed, every other logit is -INFINITY.
static void head_rows(struct cpu_backend *c, const float *x, int64_t n, float *out,
                      const int32_t *groups, int64_t n_groups)
{
    const struct gl_model_config *cf = &c->m->cfg;
    if (groups)
        for (int64_t i = 0; i < n * (int64_t)cf->n_vocab; i++)
            out[i] = -INFINITY;
    matmul_sel(c, &c->m->output, x, n, out, groups, n_groups);
    struct cap_job cj = {c->k->softcap,   out,         n,      cf->n_vocab,
                         cf->logit_scale, cf->softcap, groups, n_groups};
    gl_pool_run(c->pool, cap_run, &cj); // 200k tanh per row: worth both threads in decode
}

// Gathers the final-normed rows into X, then one head matmul per run of consecutive destination
// rows (one run when rows follow the sequence order).
static void cpu_head(struct gl_backend *b, enum gl_bk_buf from, const struct gl_bk_head *hd)
{
    struct cpu_backend *c = cpu(b);
    const struct gl_model_config *cf = &c->m->cfg;
    const int64_t E = cf->n_embd, V = cf->n_vocab;
    float *x = c->buf[GL_BK_X];
    GL_ASSERT(from != GL_BK_X && gl_bk_buf_width(cf, from) == E);
    act_invalidate(c);
    for (int64_t i = 0; i < hd->n; i++)
        c->k->rms_norm(x + i * E, c->buf[from] + (int64_t)hd->src[i] * E, c->m->output_norm, E,
                       cf->rms_eps);
    for (int64_t i0 = 0, i1; i0 < hd->n; i0 = i1) {
        for (i1 = i0 + 1; i1 < hd->n && hd->dst[i1] == hd->dst[i1 - 1] + 1; i1++)
            ;
        head_rows(c, x + i0 * E, i1 - i0, hd->logits + (int64_t)hd->dst[i0] * V, hd->groups,
                  hd->n_groups);
    }
}

static void cpu_capture(struct gl_backend *b, enum gl_bk_buf src, float *dst)
{
    struct cpu_backend *c = cpu(b);
    memcpy(dst, c->buf[src],
           (size_t)c->st->n * (size_t)gl_bk_buf_width(&c->m->cfg, src) * sizeof(float));
}

static void cpu_load(struct gl_backend *b, enum gl_bk_buf dst, const float *src)
{
    struct cpu_backend *c = cpu(b);
    act_invalidate(c);
    memcpy(c->buf[dst], src,
           (size_t)c->st->n * (size_t)gl_bk_buf_width(&c->m->cfg, dst) * sizeof(float));
}

static gl_status cpu_step_end(struct gl_backend *b, struct gl_err *err)
{
    (void)err; // every op has already run
    cpu(b)->st = NULL;
    return GL_OK;
}

const struct gl_backend_ops gl_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .step_begin = cpu_step_begin,
    .embed = cpu_embed,
    .rms_norm = cpu_rms_norm,
    .matmul = cpu_matmul,
    .norm_rope_heads = cpu_norm_rope_heads,
    .kv_store = cpu_kv_store,
    .attn = cpu_attn,
    .gate = cpu_gate,
    .swiglu = cpu_swiglu,
    .norm_residual = cpu_norm_residual,
    .head = cpu_head,
    .load = cpu_load,
    .capture = cpu_capture,
    .step_end = cpu_step_end,
};
