// SPDX-License-Identifier: MIT
// forward: one batched pass of the Muse Glimmer text tower over a chunk of tokens (arch doc §2):
// embedding row -> scale-less RMS -> L sandwich blocks (QK-norm, RoPE on sliding layers only,
// windowed/causal GQA attention, sigmoid output gate, SwiGLU) -> final norm -> lm_head ->
// x logit_scale -> soft-cap. Activations are f32; matmuls quantize the activation rows to the
// weight's vec_dot type and call gl_matmul. All scratch is sized at ctx creation (n_batch rows),
// so a steady-state decode step allocates nothing. A step may carry several sequences (each a
// chunk of tokens at its own positions): every matmul takes all rows of the step together, and
// attention runs per sequence. K/V are read and written only through struct gl_kv_view page
// tables, stored as f32/f16/bf16/fp8 rows (fp8: one bf16 scale per row, see src/kv/kv.c) and
// converted back to f32 one head row at a time while attending.
#include "kv/fp8.h"
#include "model/model.h"
#include "model/model_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Tokens per attention block: 8 tokens x 16 query heads share each converted key tile, and the
// block's outputs (8 x 16 x 128 f32 = 64 KiB) stay in L2.
#define ATTN_QB 8

struct gl_model_ctx {
    const struct gl_model *m;
    const struct gl_kernels *k;
    struct gl_pool *pool;
    int n_threads;
    int n_batch;
    int64_t n_ctx;
    // B x width f32 scratch (row-major, dense): h residual, x normed input, q/g (B x H*D),
    // kc/vc (B x Hkv*D), att (B x H*D), fa/fb (B x F), y (B x E)
    float *h, *x, *q, *g, *kc, *vc, *att, *fa, *fb, *y;
    float *rope_cos, *rope_sin; // B x D/2 for the current chunk (sliding-layer base)
    double *inv_freq;           // D/2: base_swa^(-2j/D)
    // attention scratch per thread (att_stride floats): one key tile transposed (D x 16), its
    // values (16 x D), a D-float conversion row, then for ATTN_QB tokens x grp query heads the
    // running max, sum and unnormalised output (D each); independent of n_ctx
    float *scores;
    size_t att_stride;
    int32_t *blk_t0, *blk_n; // attention blocks of the step: first row, rows (same sequence)
    int64_t n_blk;
    int32_t *row_seq;         // B: sequence of each row of the step
    int64_t *row_pos;         // B: position of each row
    struct gl_kv_view *views; // n_layer, for gl_model_forward's single sequence
    void *act;                // quantized activation rows
    size_t act_cap;
    // the activation buffer currently holds src quantized to act_type (n_tok x n_in)
    const float *act_src;
    enum gl_type act_type;
    int64_t act_n_tok, act_n_in;
    // partial output head (gl_batch_seq.head_mask): the step's selected 16-row groups of the
    // head, ascending ([ceil(n_vocab / 16)]); off when GLINT_PARTIAL_HEAD=0
    int32_t *head_groups;
    int partial_head;
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
    float *bufs[] = {c->h,  c->x,  c->q, c->g,        c->kc,       c->vc,    c->att,
                     c->fa, c->fb, c->y, c->rope_cos, c->rope_sin, c->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        gl_free_aligned(bufs[i]);
    gl_free(c->inv_freq);
    gl_free(c->blk_t0);
    gl_free(c->blk_n);
    gl_free(c->row_seq);
    gl_free(c->row_pos);
    gl_free(c->views);
    gl_free(c->head_groups);
    gl_free_aligned(c->act);
    gl_pool_delete(c->pool);
    gl_free(c);
}

// Largest quantized activation row over every weight (f32 weights read x in place).
static size_t max_act_row(const struct gl_model *m)
{
    size_t best = gl_type_row_size(gl_type_vec_dot_type(m->output.type), m->output.n_in);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const struct gl_layer *ly = &m->layers[l];
        const struct gl_weight *lw[] = {&ly->q, &ly->k,        &ly->v,      &ly->gate,
                                        &ly->o, &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down};
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) {
            size_t r = gl_type_row_size(gl_type_vec_dot_type(lw[i]->type), lw[i]->n_in);
            best = r > best ? r : best;
        }
    }
    return best;
}

gl_status gl_model_ctx_new(struct gl_model_ctx **out, const struct gl_model *m, int n_batch,
                           int n_threads, int64_t n_ctx, struct gl_err *err)
{
    *out = NULL;
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
    GL_ASSERT(c->k->attn_tile != NULL);
    GL_ASSERT(c->k->to_float[GL_TYPE_F16] && c->k->to_float[GL_TYPE_BF16]); // f16/bf16 KV rows
    c->n_batch = n_batch;
    c->n_ctx = n_ctx;
    c->pool = gl_pool_new(n_threads);
    if (!c->pool) {
        gl_free(c);
        return gl_err_set(err, GL_E_NOMEM, "model: cannot start %d threads", n_threads);
    }
    c->n_threads = gl_pool_size(c->pool);
    const size_t B = (size_t)n_batch, E = (size_t)cf->n_embd, F = (size_t)cf->n_ff;
    const size_t HD = (size_t)cf->n_head * (size_t)cf->head_dim;
    const size_t KD = (size_t)cf->n_head_kv * (size_t)cf->head_dim;
    const size_t D2 = (size_t)cf->head_dim / 2;
    c->act_cap = max_act_row(m) * B;
    c->h = gl_malloc_aligned(B * E * sizeof(float));
    c->x = gl_malloc_aligned(B * E * sizeof(float));
    c->y = gl_malloc_aligned(B * E * sizeof(float));
    c->q = gl_malloc_aligned(B * HD * sizeof(float));
    c->g = gl_malloc_aligned(B * HD * sizeof(float));
    c->att = gl_malloc_aligned(B * HD * sizeof(float));
    c->kc = gl_malloc_aligned(B * KD * sizeof(float));
    c->vc = gl_malloc_aligned(B * KD * sizeof(float));
    c->fa = gl_malloc_aligned(B * F * sizeof(float));
    c->fb = gl_malloc_aligned(B * F * sizeof(float));
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
    c->act = gl_malloc_aligned(c->act_cap ? c->act_cap : 64);
    c->row_seq = gl_malloc(B * sizeof *c->row_seq);
    c->row_pos = gl_malloc(B * sizeof *c->row_pos);
    c->views = gl_malloc((size_t)cf->n_layer * sizeof *c->views);
    c->head_groups =
        gl_malloc((size_t)(cf->n_vocab + GL_R16_ROWS - 1) / GL_R16_ROWS * sizeof *c->head_groups);
    const char *ph = getenv("GLINT_PARTIAL_HEAD");
    c->partial_head = !(ph && strcmp(ph, "0") == 0);
    if (!c->h || !c->x || !c->y || !c->q || !c->g || !c->att || !c->kc || !c->vc || !c->fa ||
        !c->fb || !c->rope_cos || !c->rope_sin || !c->scores || !c->inv_freq || !c->act ||
        !c->row_seq || !c->row_pos || !c->views || !c->blk_t0 || !c->blk_n || !c->head_groups) {
        gl_model_ctx_delete(c);
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for step scratch (batch %d, ctx %lld)",
                          n_batch, (long long)n_ctx);
    }
    for (size_t j = 0; j < D2; j++)
        c->inv_freq[j] = pow((double)cf->rope_base_swa, -2.0 * (double)j / (double)cf->head_dim);
    *out = c;
    return GL_OK;
}

// ---- elementwise pieces (plain C: cheap next to the matmuls) ----

// y[i] = x[i] / sqrt(mean(x^2) + eps) * (w ? w[i] : 1), n elements. Accumulates in double so
// 6656-wide rows lose nothing to summation order.
static void rms_norm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * (double)x[i];
    float s = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    if (w)
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * s * w[i];
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * s;
}

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
static void matmul_sel(struct gl_model_ctx *c, const struct gl_weight *w, const float *x,
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

static void matmul(struct gl_model_ctx *c, const struct gl_weight *w, const float *x, int64_t n_tok,
                   float *out)
{
    matmul_sel(c, w, x, n_tok, out, NULL, 0);
}

// Call whenever a buffer that may be cached as quantized activations is overwritten.
static void act_invalidate(struct gl_model_ctx *c)
{
    c->act_src = NULL;
}

// ---- KV rows ----

static uint8_t *kv_page(const struct gl_kv_view *v, int64_t p)
{
    GL_ASSERT(p >= 0 && p / v->block_size < v->n_blocks);
    int32_t pg = v->pages[p / v->block_size];
    GL_ASSERT_MSG(pg >= 0, "kv: position %lld read or written through an unmapped block",
                  (long long)p);
    return v->base + (size_t)pg * v->page_bytes;
}

// Stores one position's K or V row (KD f32 values) in the view's dtype. fp8 rows get their own
// scale bf16(amax / 448) (src/kv/fp8.h), so the largest element lands on e4m3's largest, 448.
static void kv_store(const struct gl_kv_view *v, int64_t p, int is_v, const float *src, int64_t KD)
{
    uint8_t *pg = kv_page(v, p);
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
    const uint8_t *pg = kv_page(v, p);
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
    struct gl_model_ctx *c;
    const struct gl_batch_seq *seqs;
    int layer;
    int64_t n_tok;
    int window; // 0 = causal only
};

// One work item = one block of up to ATTN_QB consecutive tokens of one sequence x one kv head:
// the block's keys are walked in tiles of GL_ATTN_TILE positions aligned to multiples of 16, each
// tile converted to f32 once and used by every token of the block and its grp query heads
// (kernels.h attn_tile: online softmax). A token sees exactly the tiles that intersect its own
// key range, in order, with exact zero weight outside it, so its result does not depend on the
// block it shares, the chunking of the prompt, or the batch.
static void attn_rows(void *ctx, int ith, int nth)
{
    struct attn_job *j = ctx;
    struct gl_model_ctx *c = j->c;
    const struct gl_model_config *cf = &c->m->cfg;
    const int H = cf->n_head, Hkv = cf->n_head_kv, D = cf->head_dim, grp = H / Hkv;
    const float scale = 1.0f / sqrtf((float)D);
    float *KT = c->scores + (size_t)ith * c->att_stride, *V = KT + GL_ATTN_TILE * D;
    float *row = V + GL_ATTN_TILE * D; // one K or V head converted from the cache dtype
    float *mx = row + D, *sum = mx + ATTN_QB * grp, *O = sum + ATTN_QB * grp;
    for (int64_t item = ith; item < c->n_blk * Hkv; item += nth) {
        const int64_t b = item / Hkv, t0 = c->blk_t0[b];
        const int kh = (int)(item % Hkv), nq = c->blk_n[b];
        const struct gl_kv_view *view = &j->seqs[c->row_seq[t0]].views[j->layer];
        int64_t lo[ATTN_QB], hi[ATTN_QB]; // visible keys of token i: lo[i] .. hi[i] - 1
        for (int i = 0; i < nq; i++) {
            const int64_t p = c->row_pos[t0 + i];
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
                const float *q = c->q + (t0 + i) * (int64_t)H * D + (int64_t)kh * grp * D;
                c->k->attn_tile(D, grp, q, KT, V, (int)(kl - s0), (int)(kr - s0), scale,
                                mx + i * grp, sum + i * grp, O + (size_t)i * grp * D);
            }
        }
        for (int i = 0; i < nq; i++)
            for (int g = 0; g < grp; g++) {
                const float inv = 1.0f / sum[i * grp + g];
                const float *o = O + ((size_t)i * grp + g) * D;
                float *dst = c->att + (t0 + i) * (int64_t)H * D + ((int64_t)kh * grp + g) * D;
                for (int d = 0; d < D; d++)
                    dst[d] = o[d] * inv;
            }
    }
}

// Splits the step's rows into attention blocks: runs of consecutive positions of one sequence,
// at most ATTN_QB long.
static void attn_blocks(struct gl_model_ctx *c, int64_t n)
{
    c->n_blk = 0;
    for (int64_t t = 0; t < n; t++) {
        int64_t b = c->n_blk - 1;
        if (b >= 0 && c->blk_n[b] < ATTN_QB && c->row_seq[t] == c->row_seq[t - 1] &&
            c->row_pos[t] == c->row_pos[t - 1] + 1) {
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
            rms_norm(d, s, j->w, W, j->eps);
            break;
        case ROWS_POST_RESID:
            rms_norm(s, s, j->w, W, j->eps);
            for (int64_t i = 0; i < W; i++)
                d[i] += s[i];
            break;
        case ROWS_GATE:
            for (int64_t i = 0; i < W; i++)
                d[i] *= 1.0f / (1.0f + expf(-s[i]));
            break;
        case ROWS_SWIGLU:
            for (int64_t i = 0; i < W; i++)
                d[i] = d[i] / (1.0f + expf(-d[i])) * s[i];
            break;
        }
    }
}

static void rows(struct gl_model_ctx *c, enum rows_op op, float *dst, float *src, const float *w,
                 int64_t n_tok, int64_t width, float eps)
{
    struct rows_job j = {op, dst, src, w, n_tok, width, eps};
    if (c->act_src == dst || c->act_src == src) // both may be written: drop a stale quantized copy
        act_invalidate(c);
    if (n_tok > 1)
        gl_pool_run(c->pool, rows_run, &j);
    else
        rows_run(&j, 0, 1);
}

// z <- scale * z, then cap * tanh(z / cap) unless cap == 0; contiguous element ranges per thread.
// Logit scale and soft-cap over n_rows x V logits: every entry, or (groups) the entries of the
// listed 16-row groups of each row.
struct cap_job {
    float *z;
    int64_t n_rows, V;
    float scale, cap;
    const int32_t *groups; // NULL: all
    int64_t n_groups;
};

static void cap_span(const struct cap_job *j, float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = z[i] * j->scale;
        z[i] = j->cap != 0.0f ? j->cap * tanhf(v / j->cap) : v;
    }
}

static void cap_run(void *ctx, int ith, int nth)
{
    const struct cap_job *j = ctx;
    if (!j->groups) {
        int64_t n = j->n_rows * j->V, i0 = n * ith / nth, i1 = n * (ith + 1) / nth;
        cap_span(j, j->z + i0, i1 - i0);
        return;
    }
    int64_t n = j->n_rows * j->n_groups, u0 = n * ith / nth, u1 = n * (ith + 1) / nth;
    for (int64_t u = u0; u < u1; u++) {
        int64_t r0 = (int64_t)j->groups[u % j->n_groups] * GL_R16_ROWS;
        int64_t r1 = r0 + GL_R16_ROWS < j->V ? r0 + GL_R16_ROWS : j->V;
        cap_span(j, j->z + u / j->n_groups * j->V + r0, r1 - r0);
    }
}

// ---- one step ----

static void emit(const struct gl_model_dump *dump, int layer, int64_t pos0, const float *x,
                 int64_t n, int64_t width)
{
    if (dump && dump->fn)
        dump->fn(dump->user, layer, pos0, x, n, width);
}

// Output head for rows x[0..n) (already final-normed) into out (n x n_vocab): lm_head, logit
// scale, soft-cap. groups (n_groups of them, NULL: all): only those 16-row groups of the head
// are computed, every other logit is -INFINITY.
static void head_rows(struct gl_model_ctx *c, const float *x, int64_t n, float *out,
                      const int32_t *groups, int64_t n_groups)
{
    const struct gl_model_config *cf = &c->m->cfg;
    if (groups)
        for (int64_t i = 0; i < n * (int64_t)cf->n_vocab; i++)
            out[i] = -INFINITY;
    matmul_sel(c, &c->m->output, x, n, out, groups, n_groups);
    struct cap_job cj = {out, n, cf->n_vocab, cf->logit_scale, cf->softcap, groups, n_groups};
    gl_pool_run(c->pool, cap_run, &cj); // 200k tanhf per row: worth both threads in decode
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

// The whole step; inputs validated by the callers. dump (single sequence only) sees pos0 of
// seqs[0].
static void forward_step(struct gl_model_ctx *c, const struct gl_batch_seq *seqs, int n_seqs,
                         float *logits, const struct gl_model_dump *dump)
{
    const struct gl_model *m = c->m;
    const struct gl_model_config *cf = &m->cfg;
    const int64_t E = cf->n_embd, F = cf->n_ff, H = cf->n_head, Hkv = cf->n_head_kv,
                  D = cf->head_dim, D2 = D / 2, HD = H * D, KD = Hkv * D;

    int64_t n = 0;
    for (int i = 0; i < n_seqs; i++)
        for (int32_t t = 0; t < seqs[i].n; t++, n++) {
            c->row_seq[n] = i;
            c->row_pos[n] = seqs[i].pos0 + t;
        }
    GL_ASSERT(n > 0 && n <= c->n_batch);
    attn_blocks(c, n);
    const int64_t pos0 = seqs[0].pos0;

    // Embedding: dequantize one row of the table per token (or take the given row), then the
    // scale-less RMS.
    for (int64_t t = 0; t < n; t++) {
        const struct gl_batch_seq *sq = &seqs[c->row_seq[t]];
        const float *given = sq->embd ? sq->embd[c->row_pos[t] - sq->pos0] : NULL;
        if (given) {
            rms_norm(c->h + t * E, given, NULL, E, cf->rms_eps);
            continue;
        }
        const int32_t tok = sq->tokens[c->row_pos[t] - sq->pos0];
        const uint8_t *row =
            (const uint8_t *)m->tok_embd.data + (size_t)tok * m->tok_embd.row_bytes;
        if (m->tok_embd.type == GL_TYPE_F32)
            memcpy(c->y + t * E, row, (size_t)E * sizeof(float));
        else
            c->k->to_float[m->tok_embd.type](row, c->y + t * E, E);
        rms_norm(c->h + t * E, c->y + t * E, NULL, E, cf->rms_eps);
    }
    emit(dump, -1, pos0, c->h, n, E);

    // RoPE angles per row (only sliding layers rotate; they share one base).
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < D2; j++) {
            double a = (double)c->row_pos[t] * c->inv_freq[j];
            c->rope_cos[t * D2 + j] = (float)cos(a);
            c->rope_sin[t * D2 + j] = (float)sin(a);
        }

    for (int l = 0; l < cf->n_layer; l++) {
        const struct gl_layer *ly = &m->layers[l];
        const int swa = cf->swa[l];

        act_invalidate(c);
        rows(c, ROWS_NORM, c->x, c->h, ly->attn_norm, n, E, cf->rms_eps);
        matmul(c, &ly->q, c->x, n, c->q);
        matmul(c, &ly->k, c->x, n, c->kc);
        matmul(c, &ly->v, c->x, n, c->vc);
        matmul(c, &ly->gate, c->x, n, c->g);

        // QK-norm per head (stored weights carry the 3.87 query scale), RoPE, store K/V.
        for (int64_t t = 0; t < n; t++) {
            const float *cs = c->rope_cos + t * D2, *sn = c->rope_sin + t * D2;
            for (int64_t hh = 0; hh < H; hh++) {
                float *qh = c->q + t * HD + hh * D;
                rms_norm(qh, qh, ly->q_norm, D, cf->rms_eps);
                if (swa)
                    rope_head(qh, cs, sn, (int)D2);
            }
            for (int64_t hh = 0; hh < Hkv; hh++) {
                float *kh = c->kc + t * KD + hh * D;
                rms_norm(kh, kh, ly->k_norm, D, cf->rms_eps);
                if (swa)
                    rope_head(kh, cs, sn, (int)D2);
            }
            const struct gl_kv_view *view = &seqs[c->row_seq[t]].views[l];
            kv_store(view, c->row_pos[t], 0, c->kc + t * KD, KD);
            kv_store(view, c->row_pos[t], 1, c->vc + t * KD, KD);
        }

        struct attn_job aj = {c, seqs, l, n, swa ? cf->window : 0};
        if (c->n_blk * Hkv > 1)
            gl_pool_run(c->pool, attn_rows, &aj);
        else
            attn_rows(&aj, 0, 1);

        // Output gate: elementwise over all H*D channels.
        rows(c, ROWS_GATE, c->att, c->g, NULL, n, HD, 0.0f);
        matmul(c, &ly->o, c->att, n, c->y);
        rows(c, ROWS_POST_RESID, c->h, c->y, ly->post_attn_norm, n, E, cf->post_eps);

        act_invalidate(c);
        rows(c, ROWS_NORM, c->x, c->h, ly->ffn_norm, n, E, cf->rms_eps);
        matmul(c, &ly->ffn_gate, c->x, n, c->fa);
        matmul(c, &ly->ffn_up, c->x, n, c->fb);
        rows(c, ROWS_SWIGLU, c->fa, c->fb, NULL, n, F, 0.0f);
        matmul(c, &ly->ffn_down, c->fa, n, c->y);
        rows(c, ROWS_POST_RESID, c->h, c->y, ly->post_ffw_norm, n, E, cf->post_eps);
        emit(dump, l, pos0, c->h, n, E);
    }

    if (!logits)
        return;
    // Output head on the requested rows only (decode/prefill need just the last one per
    // sequence): gather their final-normed rows into x, then one matmul per run of consecutive
    // destination rows (one run when rows follow the sequence order).
    act_invalidate(c);
    const int64_t V = cf->n_vocab;
    const int64_t n_sel = head_select(c, seqs, n_seqs);
    const int32_t *sel = n_sel >= 0 ? c->head_groups : NULL;
    int64_t n_out = 0, row0 = 0, first_src = -1;
    int32_t dest[2] = {-1, 0}; // current run: first destination row, rows in it
    for (int i = 0; i < n_seqs; row0 += seqs[i].n, i++) {
        const struct gl_batch_seq *sq = &seqs[i];
        if (sq->logits_row < 0)
            continue;
        const int32_t nl = sq->n_logits > 0 ? sq->n_logits : 1;
        for (int32_t j = 0; j < nl; j++) {
            const int64_t src = row0 + sq->n - nl + j;
            const int32_t d = sq->logits_row + j;
            if (dest[1] > 0 && d != dest[0] + dest[1]) { // run breaks: flush it
                head_rows(c, c->x + (n_out - dest[1]) * E, dest[1], logits + dest[0] * V, sel,
                          n_sel);
                dest[1] = 0;
            }
            if (dest[1] == 0)
                dest[0] = d;
            dest[1]++;
            if (first_src < 0)
                first_src = src;
            rms_norm(c->x + n_out * E, c->h + src * E, m->output_norm, E, cf->rms_eps);
            n_out++;
        }
    }
    if (dest[1] > 0)
        head_rows(c, c->x + (n_out - dest[1]) * E, dest[1], logits + dest[0] * V, sel, n_sel);
    if (n_out > 0 && n_seqs == 1)
        emit(dump, cf->n_layer, pos0 + first_src, logits + (int64_t)seqs[0].logits_row * V, n_out,
             V);
}

gl_status gl_model_forward_batch(struct gl_model_ctx *c, const struct gl_batch_seq *seqs,
                                 int n_seqs, float *logits, struct gl_err *err)
{
    const struct gl_model_config *cf = &c->m->cfg;
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
    forward_step(c, seqs, n_seqs, logits, NULL);
    return GL_OK;
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
        float *lg = logits && all_logits ? logits + done * (int64_t)cf->n_vocab : logits;
        forward_step(c, &sq, 1, sq.logits_row >= 0 ? lg : NULL, dump);
        gl_kv_cache__set_len(kv, pos0 + done + cn);
        done += cn;
    }
    return GL_OK;
}
