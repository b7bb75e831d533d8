// SPDX-License-Identifier: MIT
// vision: the perception encoder forward pass (arch doc §6.3), f32 activations throughout.
// Tokens live in window order from ln_pre to ln_post (§6.3 step 4), so a window is a contiguous
// run [win_start[w], win_start[w + 1]) and a full-attention layer is the single run [0, P).
// Matmuls are gl_matmul_bf16 for BF16 weights (token-lane vdpbf16ps tiles), gl_matmul_q8_0 for
// Q8_0 weights where the table has that tile (token-lane vpdpbusd) and gl_matmul otherwise (rows
// split over the pool); the per-token phases (LayerNorm, bias, GELU,
// RoPE) and attention (one task per window x head x block of queries) are split over the same
// pool. Attention takes a block of 256 queries of one head per task: through kernels.h attn_rows
// where the ISA has it (AVX-512: 64-key chunks of scores in registers, a vector exp), else the
// text tower's attention tile kernel (attn_tile, online softmax over tiles of 16 keys, key tiles
// transposed per block).
#include "vision/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gl_vision_config_default(struct gl_vision_config *cfg)
{
    *cfg = (struct gl_vision_config){
        .patch_size = 14,
        .patch_frames = 2,
        .hidden = 1536,
        .n_layers = 50,
        .n_heads = 16,
        .head_dim = 96,
        .ffn = 8960,
        .pos_h = 32,
        .pos_w = 32,
        .merge = 2,
        .full_every = 4,
        .adapter = 4096,
        .out_dim = 6656,
        .ln_eps = 1e-5f,
        .rms_eps = 1e-5f,
        .rope_theta = 10000.0f,
    };
}

int64_t gl_vision_patch_dim(const struct gl_vision_config *cfg)
{
    return (int64_t)cfg->patch_frames * 3 * cfg->patch_size * cfg->patch_size;
}

// ---- pure pieces (window order, position embedding, pixel shuffle) ----

int64_t gl_vision_window_order(int64_t gh, int64_t gw, int64_t win_h, int64_t win_w, int32_t *order,
                               int64_t *win_start)
{
    int64_t n_wh = (gh + win_h - 1) / win_h, n_ww = (gw + win_w - 1) / win_w;
    int64_t j = 0, n_win = 0;
    for (int64_t wr = 0; wr < n_wh; wr++)
        for (int64_t wc = 0; wc < n_ww; wc++) {
            win_start[n_win++] = j;
            int64_t r_end = wr * win_h + win_h < gh ? wr * win_h + win_h : gh;
            int64_t c_end = wc * win_w + win_w < gw ? wc * win_w + win_w : gw;
            for (int64_t r = wr * win_h; r < r_end; r++)
                for (int64_t c = wc * win_w; c < c_end; c++)
                    order[j++] = (int32_t)(r * gw + c);
        }
    win_start[n_win] = j;
    return n_win;
}

void gl_vision_bilinear_taps(int64_t i, int64_t n_out, int64_t n_tab, int64_t idx[2], float wt[2])
{
    double src = ((double)i + 0.5) * (double)n_tab / (double)n_out - 0.5;
    double lo = floor(src);
    double frac = src - lo;
    for (int t = 0; t < 2; t++) {
        int64_t k = (int64_t)lo + t;
        int inside = k >= 0 && k < n_tab;
        wt[t] = inside ? (float)(t ? frac : 1.0 - frac) : 0.0f; // zero padding, not clamping
        idx[t] = k < 0 ? 0 : k >= n_tab ? n_tab - 1 : k;
    }
}

void gl_vision_pos_embed(const float *table, int64_t pos_h, int64_t pos_w, int64_t hidden,
                         int64_t gh, int64_t gw, float *out)
{
    for (int64_t r = 0; r < gh; r++) {
        int64_t ri[2];
        float rw[2];
        gl_vision_bilinear_taps(r, gh, pos_h, ri, rw);
        for (int64_t c = 0; c < gw; c++) {
            int64_t ci[2];
            float cw[2];
            gl_vision_bilinear_taps(c, gw, pos_w, ci, cw);
            float *o = out + (r * gw + c) * hidden;
            memset(o, 0, (size_t)hidden * sizeof(float));
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++) {
                    float wgt = rw[a] * cw[b];
                    const float *e = table + (ri[a] * pos_w + ci[b]) * hidden;
                    for (int64_t d = 0; d < hidden; d++)
                        o[d] += wgt * e[d];
                }
        }
    }
}

void gl_vision_pixel_shuffle(const float *x, int64_t gh, int64_t gw, int64_t dim, float *out)
{
    for (int64_t R = 0; R < gh / 2; R++)
        for (int64_t C = 0; C < gw / 2; C++) {
            float *o = out + (R * (gw / 2) + C) * 4 * dim;
            const int64_t src[4] = {2 * R * gw + 2 * C, 2 * R * gw + 2 * C + 1,
                                    (2 * R + 1) * gw + 2 * C, (2 * R + 1) * gw + 2 * C + 1};
            for (int s = 0; s < 4; s++)
                for (int64_t ch = 0; ch < dim; ch++)
                    o[ch * 4 + s] = x[src[s] * dim + ch];
        }
}

// ---- one encode's state ----

// Scratch, all [rows][width] f32 unless noted. P = patches, M = P / 4 merged tokens.
struct vis_run {
    struct gl_pool *pool;
    const struct gl_kernels *k;
    const struct gl_vision_config *cfg;
    int64_t P, M, gw;
    float *x;            // [P][hidden] residual stream, window order
    float *t;            // [P][hidden] normed input / projection output
    float *q, *kk, *v;   // [P][hidden] each
    float *a;            // [P][hidden] attention output
    float *f;            // [P][ffn]
    float *cs, *sn;      // [P][head_dim / 2] RoPE cos, sin per window-ordered token
    float *attn_scratch; // [n_threads][attn_scratch_floats(head_dim)]
    float *ms;           // [M][4 hidden] pixel-shuffled
    float *m1, *m2;      // [M][adapter]
    uint8_t *act;        // activations converted to a weight's vec_dot type, or packed bf16 / q8_0
    const float *act_x;  // the rows act holds packed (gl_pack_bf16 / gl_pack_q8_0), or NULL
    int64_t act_n_in;
    enum gl_type act_type;   // GL_TYPE_BF16 or GL_TYPE_Q8_0: the pack act holds (act_x != NULL)
    struct gl_q8_0_wsum *wq; // gl_prep_q8_0 sums of the current Q8_0 matrix; NULL: no such GEMM
    int qk_pairs;       // gl_vision_weights.qk_pairs: q/k come out of their matmuls in pair order
    int32_t *order;     // [P]
    int64_t *win_start; // [n_windows + 1]
    int64_t n_windows;
};

// A per-row phase over n rows of width floats (src and dst may be the same buffer where noted).
struct vis_rows {
    struct vis_run *r;
    int64_t n;
    const float *src;
    float *dst;
    const float *w, *b; // LayerNorm weight/bias, or bias (w unused)
    int64_t width;
    float eps;
    int gelu;
};

static float gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

// dst row = LayerNorm(src row) * w + b; mean and variance accumulated in double.
static void rows_layernorm(void *ctx, int ith, int nth)
{
    const struct vis_rows *j = ctx;
    for (int64_t i = ith; i < j->n; i += nth) {
        const float *s = j->src + i * j->width;
        float *d = j->dst + i * j->width;
        double sum = 0, sq = 0;
        for (int64_t e = 0; e < j->width; e++)
            sum += (double)s[e];
        double mean = sum / (double)j->width;
        for (int64_t e = 0; e < j->width; e++)
            sq += ((double)s[e] - mean) * ((double)s[e] - mean);
        float inv = (float)(1.0 / sqrt(sq / (double)j->width + (double)j->eps));
        for (int64_t e = 0; e < j->width; e++)
            d[e] = ((s[e] - (float)mean) * inv) * j->w[e] + j->b[e];
    }
}

// dst row (in place allowed) = act(src row + b); b may be NULL, act = GELU(erf) or identity.
static void rows_bias_act(void *ctx, int ith, int nth)
{
    const struct vis_rows *j = ctx;
    for (int64_t i = ith; i < j->n; i += nth) {
        const float *s = j->src + i * j->width;
        float *d = j->dst + i * j->width;
        for (int64_t e = 0; e < j->width; e++) {
            float y = s[e] + (j->b ? j->b[e] : 0.0f);
            d[e] = j->gelu ? gelu_erf(y) : y;
        }
    }
}

// dst row += src row + b (the residual add after proj and fc2).
static void rows_residual(void *ctx, int ith, int nth)
{
    const struct vis_rows *j = ctx;
    for (int64_t i = ith; i < j->n; i += nth) {
        const float *s = j->src + i * j->width;
        float *d = j->dst + i * j->width;
        for (int64_t e = 0; e < j->width; e++)
            d[e] += s[e] + j->b[e];
    }
}

// Weight-less RMS norm in place: d = s / sqrt(mean(s^2) + eps).
static void rows_rms(void *ctx, int ith, int nth)
{
    const struct vis_rows *j = ctx;
    for (int64_t i = ith; i < j->n; i += nth) {
        float *d = j->dst + i * j->width;
        double sq = 0;
        for (int64_t e = 0; e < j->width; e++)
            sq += (double)d[e] * (double)d[e];
        float inv = (float)(1.0 / sqrt(sq / (double)j->width + (double)j->eps));
        for (int64_t e = 0; e < j->width; e++)
            d[e] *= inv;
    }
}

static void run_rows(struct vis_run *r, gl_pool_fn fn, struct vis_rows j)
{
    j.r = r;
    gl_pool_run(r->pool, fn, &j);
}

// ---- matmul ----

// out [n_tok][n_out] = x [n_tok][n_in] times W^T (no bias). BF16 weights (n_in even, a table
// with gemm_bf16: not AVX2) take the token-lane GEMM (kernels.h gl_matmul_bf16): x is packed to
// bf16 in r->act. Q8_0 weights (n_in a multiple of 32, a table with gemm_q8_0: not AVX2) take the
// int8 token-lane GEMM (gl_matmul_q8_0): x is quantized to Q8_0 and packed in r->act, and the
// matrix's block sums are computed into r->wq (one pass over the weights, ~1% of the GEMM at
// 1,024 tokens). same_x says x is unchanged since the previous call (q, k and v of one LayerNorm
// output): a pack of the same rows of the same type is then reused. Other types convert x to W's
// vec_dot type first when that is not f32 (F16) and take the row-layout gl_matmul, as the text
// tower's matmul does. The token-lane and row paths multiply the same rounded (bf16) or quantized
// (Q8_0: the same integer block sums and scales) activations; they differ in the order of the
// f32 sums only.
static void vis_pack(struct vis_run *r, enum gl_type type, const float *x, int64_t n_in,
                     int64_t n_tok, int same_x)
{
    if (same_x && r->act_x == x && r->act_type == type && r->act_n_in == n_in)
        return;
    if (type == GL_TYPE_BF16)
        gl_pack_bf16(r->pool, x, n_tok, n_in, n_in, r->act);
    else
        gl_pack_q8_0(r->pool, r->k, x, n_tok, n_in, n_in, r->act);
    r->act_x = x;
    r->act_type = type;
    r->act_n_in = n_in;
}

static void vis_matmul_x(struct vis_run *r, struct gl_vision_mat m, int64_t n_out, int64_t n_in,
                         const float *x, int64_t n_tok, float *out, int same_x)
{
    if (m.type == GL_TYPE_BF16 && n_in % 2 == 0 && r->k->gemm_bf16 != NULL) {
        vis_pack(r, GL_TYPE_BF16, x, n_in, n_tok, same_x);
        gl_matmul_bf16(r->pool, r->k, m.data, n_out, n_in, r->act, n_tok, out, n_out);
        return;
    }
    if (m.type == GL_TYPE_Q8_0 && n_in % GL_QK8_0 == 0 && r->wq != NULL) {
        vis_pack(r, GL_TYPE_Q8_0, x, n_in, n_tok, same_x);
        gl_prep_q8_0(r->pool, m.data, n_out, n_in, r->wq);
        gl_matmul_q8_0(r->pool, r->k, m.data, r->wq, n_out, n_in, r->act, n_tok, out, n_out);
        return;
    }
    r->act_x = NULL;
    enum gl_type vdt = gl_type_vec_dot_type(m.type);
    const void *act = x;
    size_t stride = (size_t)n_in * sizeof(float);
    if (vdt != GL_TYPE_F32) {
        stride = gl_type_row_size(vdt, n_in);
        gl_quantize_rows(r->pool, r->k, vdt, x, n_tok, n_in, r->act, stride);
        act = r->act;
    }
    gl_matmul(r->pool, r->k, m.type, m.data, n_out, n_in, act, stride, n_tok, out, n_out);
}

static void vis_matmul(struct vis_run *r, struct gl_vision_mat m, int64_t n_out, int64_t n_in,
                       const float *x, int64_t n_tok, float *out)
{
    vis_matmul_x(r, m, n_out, n_in, x, n_tok, out, 0);
}

// ---- attention ----

#define VIS_Q_BLOCK 256 // queries per attention task

// Per-thread attention scratch, in floats, a multiple of 16 (each thread's part 64-byte aligned):
// for attn_tile, the query block, its output, running max and sum, and one transposed key tile
// and value tile; for attn_rows, its gl_attn_rows_scratch of a query block.
static int64_t attn_scratch_floats(int64_t hd)
{
    int64_t tile = hd * (2 * VIS_Q_BLOCK + 2 * GL_ATTN_TILE) + 2 * VIS_Q_BLOCK;
    int64_t rows = gl_attn_rows_scratch((int)hd, VIS_Q_BLOCK);
    return ((tile > rows ? tile : rows) + 15) / 16 * 16;
}

// Thread ith's attention scratch (r->attn_scratch is allocated 64 bytes over, for this alignment).
static float *attn_scratch(const struct vis_run *r, int ith)
{
    uintptr_t base = ((uintptr_t)r->attn_scratch + 63) & ~(uintptr_t)63;
    return (float *)base + (int64_t)ith * attn_scratch_floats(r->cfg->head_dim);
}

// RoPE tables: token j (window order) at patch (row, col); pair m < hd/4 turns by
// (col + 1) * inv_freq[m], pair m >= hd/4 by (row + 1) * inv_freq[m - hd/4], with
// inv_freq[i] = theta^(-2 i / (hd / 2)) (§6.3 step 5; 1-based positions).
static void rope_tables(struct vis_run *r)
{
    int64_t half = r->cfg->head_dim / 2, quarter = half / 2;
    for (int64_t j = 0; j < r->P; j++) {
        int64_t row = r->order[j] / r->gw, col = r->order[j] % r->gw;
        for (int64_t m = 0; m < half; m++) {
            int64_t i = m < quarter ? m : m - quarter;
            double inv_freq = pow((double)r->cfg->rope_theta, -2.0 * (double)i / (double)half);
            double ang = (double)(m < quarter ? col + 1 : row + 1) * inv_freq;
            r->cs[j * half + m] = (float)cos(ang);
            r->sn[j * half + m] = (float)sin(ang);
        }
    }
}

// q, k (bias already added) rotated in place, rotate_half layout: pair (m, m + hd/2) per head.
// With qk_pairs (llama.cpp's mmproj rows, not reordered at load: gl_vision_weights) pair m sits at
// (2m, 2m + 1) of the head; it is read there (from a copy of the head in this thread's attention
// scratch, free until the attention phase) and written in rotate_half layout, so the values, the
// products and everything after are those of reordered weights (each matmul output is one dot
// product of its own row, whatever the row's place: kernels.h).
static void rows_rope(void *ctx, int ith, int nth)
{
    const struct vis_rows *j = ctx;
    const struct vis_run *r = j->r;
    int64_t hd = r->cfg->head_dim, half = hd / 2, H = r->cfg->hidden;
    float *head = attn_scratch(r, ith); // [hd] with qk_pairs
    // pair m is (in[m], in[m + half]) in rotate_half layout, (in[2m], in[2m + 1]) in pair order
    const int64_t i1 = r->qk_pairs ? 2 : 1, i2 = r->qk_pairs ? 1 : half;
    for (int64_t t = ith; t < r->P; t += nth) {
        const float *cs = r->cs + t * half, *sn = r->sn + t * half;
        float *vecs[2] = {r->q + t * H, r->kk + t * H};
        for (int which = 0; which < 2; which++)
            for (int64_t h = 0; h < r->cfg->n_heads; h++) {
                float *x = vecs[which] + h * hd;
                const float *in = x;
                if (r->qk_pairs) {
                    memcpy(head, x, (size_t)hd * sizeof(float));
                    in = head;
                }
                for (int64_t m = 0; m < half; m++) {
                    float x1 = in[i1 * m], x2 = in[i1 * m + i2];
                    x[m] = x1 * cs[m] - x2 * sn[m];
                    x[m + half] = x2 * cs[m] + x1 * sn[m];
                }
            }
    }
}

struct vis_attn {
    struct vis_run *r;
    const int64_t *seg; // segment boundaries, n_seg + 1
    int64_t n_seg;
};

// Queries [b0, b1) of head h over keys [s0, s1): a = softmax(q k^T * scale) v, flash-style with
// the text tower's attention tile kernel (online softmax over tiles of 16 keys).
static void attn_block(const struct vis_run *r, int64_t h, int64_t b0, int64_t b1, int64_t s0,
                       int64_t s1, float *scratch)
{
    int64_t H = r->cfg->hidden, hd = r->cfg->head_dim, n = b1 - b0;
    float scale = 1.0f / sqrtf((float)hd);
    if (r->k->attn_rows && hd <= 256) { // the long-run kernel (kernels.h); rows read in place
        r->k->attn_rows((int)hd, (int)n, r->q + b0 * H + h * hd, H, (int)(s1 - s0),
                        r->kk + s0 * H + h * hd, H, r->v + s0 * H + h * hd, H, scale,
                        r->a + b0 * H + h * hd, H, scratch);
        return;
    }
    float *qb = scratch, *O = qb + VIS_Q_BLOCK * hd, *KT = O + VIS_Q_BLOCK * hd;
    float *V = KT + GL_ATTN_TILE * hd, *m = V + GL_ATTN_TILE * hd, *l = m + VIS_Q_BLOCK;
    for (int64_t i = 0; i < n; i++) {
        memcpy(qb + i * hd, r->q + (b0 + i) * H + h * hd, (size_t)hd * sizeof(float));
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(O, 0, (size_t)(n * hd) * sizeof(float));
    for (int64_t j0 = s0; j0 < s1; j0 += GL_ATTN_TILE) {
        int64_t nk = s1 - j0 < GL_ATTN_TILE ? s1 - j0 : GL_ATTN_TILE;
        memset(KT, 0, (size_t)(2 * GL_ATTN_TILE * hd) * sizeof(float)); // KT and V: unused keys 0
        for (int64_t kx = 0; kx < nk; kx++) {
            const float *kj = r->kk + (j0 + kx) * H + h * hd;
            for (int64_t d = 0; d < hd; d++)
                KT[d * GL_ATTN_TILE + kx] = kj[d];
            memcpy(V + kx * hd, r->v + (j0 + kx) * H + h * hd, (size_t)hd * sizeof(float));
        }
        r->k->attn_tile((int)hd, (int)n, qb, KT, V, 0, (int)nk, scale, m, l, O);
    }
    for (int64_t i = 0; i < n; i++) {
        float *o = r->a + (b0 + i) * H + h * hd;
        for (int64_t d = 0; d < hd; d++)
            o[d] = O[i * hd + d] / l[i];
    }
}

// Tasks enumerated as (segment, head, block of VIS_Q_BLOCK queries), dealt round-robin.
static void attn_tasks(void *ctx, int ith, int nth)
{
    const struct vis_attn *j = ctx;
    const struct vis_run *r = j->r;
    float *scratch = attn_scratch(r, ith);
    int64_t task = 0;
    for (int64_t s = 0; s < j->n_seg; s++) {
        int64_t s0 = j->seg[s], s1 = j->seg[s + 1];
        for (int64_t h = 0; h < r->cfg->n_heads; h++)
            for (int64_t b = s0; b < s1; b += VIS_Q_BLOCK, task++)
                if (task % nth == ith)
                    attn_block(r, h, b, b + VIS_Q_BLOCK < s1 ? b + VIS_Q_BLOCK : s1, s0, s1,
                               scratch);
    }
}

// ---- the forward pass ----

// x += proj(Attn(LN1 x)); window layers attend within their window, full layers over all.
static void block_attention(struct vis_run *r, const struct gl_vision_layer *L, int full)
{
    int64_t P = r->P, H = r->cfg->hidden;
    float eps = r->cfg->ln_eps;
    run_rows(r, rows_layernorm,
             (struct vis_rows){.n = P,
                               .src = r->x,
                               .dst = r->t,
                               .w = L->ln1_w,
                               .b = L->ln1_b,
                               .width = H,
                               .eps = eps});
    vis_matmul(r, L->q, H, H, r->t, P, r->q);
    vis_matmul_x(r, L->k, H, H, r->t, P, r->kk, 1); // r->t unchanged: reuse q's pack if any
    vis_matmul_x(r, L->v, H, H, r->t, P, r->v, 1);
    run_rows(r, rows_bias_act,
             (struct vis_rows){.n = P, .src = r->q, .dst = r->q, .b = L->q_b, .width = H});
    run_rows(r, rows_bias_act,
             (struct vis_rows){.n = P, .src = r->kk, .dst = r->kk, .b = L->k_b, .width = H});
    run_rows(r, rows_bias_act,
             (struct vis_rows){.n = P, .src = r->v, .dst = r->v, .b = L->v_b, .width = H});
    run_rows(r, rows_rope, (struct vis_rows){0});
    const int64_t all[2] = {0, P};
    struct vis_attn aj = {r, full ? all : r->win_start, full ? 1 : r->n_windows};
    gl_pool_run(r->pool, attn_tasks, &aj);
    vis_matmul(r, L->proj, H, H, r->a, P, r->t);
    run_rows(r, rows_residual,
             (struct vis_rows){.n = P, .src = r->t, .dst = r->x, .b = L->proj_b, .width = H});
}

// x += fc2(gelu(fc1(LN2 x))).
static void block_mlp(struct vis_run *r, const struct gl_vision_layer *L)
{
    int64_t P = r->P, H = r->cfg->hidden, F = r->cfg->ffn;
    run_rows(r, rows_layernorm,
             (struct vis_rows){.n = P,
                               .src = r->x,
                               .dst = r->t,
                               .w = L->ln2_w,
                               .b = L->ln2_b,
                               .width = H,
                               .eps = r->cfg->ln_eps});
    vis_matmul(r, L->fc1, F, H, r->t, P, r->f);
    run_rows(
        r, rows_bias_act,
        (struct vis_rows){.n = P, .src = r->f, .dst = r->f, .b = L->fc1_b, .width = F, .gelu = 1});
    vis_matmul(r, L->fc2, H, F, r->f, P, r->t);
    run_rows(r, rows_residual,
             (struct vis_rows){.n = P, .src = r->t, .dst = r->x, .b = L->fc2_b, .width = H});
}

// Steps 1-4: x (window order) = ln_pre(W_patch . patch + pos). t holds the row-major embedding,
// q the position embedding and a their sum in window order (all free until the first block).
static void embed(struct vis_run *r, const struct gl_vision_weights *w, const float *patches,
                  int64_t gh)
{
    int64_t P = r->P, H = r->cfg->hidden;
    vis_matmul(r, w->patch, H, gl_vision_patch_dim(r->cfg), patches, P, r->t);
    gl_vision_pos_embed(w->pos, r->cfg->pos_h, r->cfg->pos_w, H, gh, r->gw, r->q);
    for (int64_t j = 0; j < P; j++) { // gather into window order
        const float *e = r->t + (int64_t)r->order[j] * H, *p = r->q + (int64_t)r->order[j] * H;
        for (int64_t d = 0; d < H; d++)
            r->a[j * H + d] = e[d] + p[d];
    }
    run_rows(r, rows_layernorm,
             (struct vis_rows){.n = P,
                               .src = r->a,
                               .dst = r->x,
                               .w = w->ln_pre_w,
                               .b = w->ln_pre_b,
                               .width = H,
                               .eps = r->cfg->ln_eps});
}

// Steps 7-11: ln_post, back to row-major, pixel shuffle, adapter, projection, RMS norm.
static void head(struct vis_run *r, const struct gl_vision_weights *w, int64_t gh, float *out)
{
    const struct gl_vision_config *cfg = r->cfg;
    int64_t P = r->P, M = r->M, H = cfg->hidden, A = cfg->adapter;
    run_rows(r, rows_layernorm,
             (struct vis_rows){.n = P,
                               .src = r->x,
                               .dst = r->t,
                               .w = w->ln_post_w,
                               .b = w->ln_post_b,
                               .width = H,
                               .eps = cfg->ln_eps});
    for (int64_t j = 0; j < P; j++) // scatter back to row-major
        memcpy(r->q + (int64_t)r->order[j] * H, r->t + j * H, (size_t)H * sizeof(float));
    gl_vision_pixel_shuffle(r->q, gh, r->gw, H, r->ms);
    vis_matmul(r, w->adapter_fc1, A, 4 * H, r->ms, M, r->m1);
    run_rows(r, rows_bias_act,
             (struct vis_rows){.n = M, .src = r->m1, .dst = r->m1, .width = A, .gelu = 1});
    vis_matmul(r, w->adapter_fc2, A, A, r->m1, M, r->m2);
    run_rows(r, rows_bias_act,
             (struct vis_rows){.n = M, .src = r->m2, .dst = r->m2, .width = A, .gelu = 1});
    vis_matmul(r, w->projection, cfg->out_dim, A, r->m2, M, out);
    run_rows(r, rows_rms,
             (struct vis_rows){.n = M, .dst = out, .width = cfg->out_dim, .eps = cfg->rms_eps});
}

// ---- validation and allocation ----

static gl_status check_config(const struct gl_vision_config *c, struct gl_err *err)
{
    const int32_t dims[] = {c->patch_size, c->patch_frames, c->hidden,  c->n_layers,
                            c->n_heads,    c->head_dim,     c->ffn,     c->pos_h,
                            c->pos_w,      c->full_every,   c->adapter, c->out_dim};
    static const char *const names[] = {"patch_size", "patch_frames", "hidden",  "n_layers",
                                        "n_heads",    "head_dim",     "ffn",     "pos_h",
                                        "pos_w",      "full_every",   "adapter", "out_dim"};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] <= 0 || dims[i] > (1 << 20))
            return gl_err_set(err, GL_E_INVAL, "vision: config %s is %d, not in 1..2^20", names[i],
                              (int)dims[i]);
    if (c->head_dim % 16 || (int64_t)c->n_heads * c->head_dim != c->hidden)
        return gl_err_set(err, GL_E_INVAL,
                          "vision: %d heads of %d (a multiple of 16) must make hidden %d",
                          (int)c->n_heads, (int)c->head_dim, (int)c->hidden);
    if (c->merge != 2)
        return gl_err_set(err, GL_E_UNSUPPORTED, "vision: merge %d, only 2 is supported",
                          (int)c->merge);
    if (!(c->ln_eps > 0.0f) || !(c->rms_eps > 0.0f) || !(c->rope_theta > 1.0f))
        return gl_err_set(err, GL_E_INVAL, "vision: eps and rope theta must be positive");
    return GL_OK;
}

static gl_status check_mat(const struct gl_kernels *k, struct gl_vision_mat m, const char *name,
                           struct gl_err *err)
{
    if (!m.data)
        return gl_err_set(err, GL_E_INVAL, "vision: weight %s missing", name);
    // Any type with a vec_dot kernel (F32, F16, BF16, Q8_0, the k-quants: an mmproj's types).
    if ((unsigned)m.type >= GL_TYPE_COUNT)
        return gl_err_set(err, GL_E_UNSUPPORTED, "vision: weight %s has type %d", name,
                          (int)m.type);
    enum gl_type vdt = gl_type_vec_dot_type(m.type);
    if (!k->vec_dot[m.type] || (vdt != GL_TYPE_F32 && !k->from_float[vdt]))
        return gl_err_set(err, GL_E_UNSUPPORTED, "vision: no kernel for weight %s type %d", name,
                          (int)m.type);
    return GL_OK;
}

static gl_status check_weights(const struct gl_kernels *k, const struct gl_vision_config *c,
                               const struct gl_vision_weights *w, struct gl_err *err)
{
    gl_status st = GL_OK;
    if (!w->pos || !w->ln_pre_w || !w->ln_pre_b || !w->ln_post_w || !w->ln_post_b || !w->layers)
        return gl_err_set(err, GL_E_INVAL, "vision: a global weight vector is missing");
    const struct {
        struct gl_vision_mat m;
        const char *name;
    } g[] = {{w->patch, "patch"},
             {w->adapter_fc1, "adapter_fc1"},
             {w->adapter_fc2, "adapter_fc2"},
             {w->projection, "projection"}};
    for (size_t i = 0; i < sizeof g / sizeof g[0] && st == GL_OK; i++)
        st = check_mat(k, g[i].m, g[i].name, err);
    for (int32_t l = 0; l < c->n_layers && st == GL_OK; l++) {
        const struct gl_vision_layer *L = &w->layers[l];
        const struct gl_vision_mat ms[6] = {L->q, L->k, L->v, L->proj, L->fc1, L->fc2};
        for (int i = 0; i < 6 && st == GL_OK; i++)
            st = check_mat(k, ms[i], "layer matrix", err);
        if (st == GL_OK && (!L->ln1_w || !L->ln1_b || !L->ln2_w || !L->ln2_b || !L->q_b ||
                            !L->k_b || !L->v_b || !L->proj_b || !L->fc1_b || !L->fc2_b))
            st = gl_err_set(err, GL_E_INVAL, "vision: layer %d lacks a vector", (int)l);
    }
    return st;
}

// Bytes of count floats, or 0 on overflow (the limit keeps every int64 index product safe).
static size_t f32_bytes(int64_t a, int64_t b)
{
    const int64_t limit = (int64_t)1 << 40;
    if (a <= 0 || b <= 0 || a > limit / b)
        return 0;
    return (size_t)(a * b) * sizeof(float);
}

static void run_free(struct vis_run *r)
{
    void *bufs[] = {r->x,  r->t,   r->q,     r->kk,           r->v,  r->a,
                    r->f,  r->cs,  r->sn,    r->attn_scratch, r->ms, r->m1,
                    r->m2, r->act, r->order, r->win_start,    r->wq};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

// The larger of best and the bytes of gl_prep_q8_0 sums for m (n_out x n_in) if m takes
// gl_matmul_q8_0 (8 B per 32-element block).
static size_t q8_sums_max(size_t best, struct gl_vision_mat m, int64_t n_out, int64_t n_in)
{
    if (m.type != GL_TYPE_Q8_0 || n_in % GL_QK8_0 != 0)
        return best;
    size_t b = f32_bytes(n_out, n_in / GL_QK8_0) * 2;
    return b > best ? b : best;
}

// Bytes of the sums for the largest such matrix (0: none, or the table has no gemm_q8_0).
static size_t q8_sums_bytes(const struct vis_run *r, const struct gl_vision_weights *w)
{
    const struct gl_vision_config *c = r->cfg;
    const int64_t H = c->hidden, F = c->ffn, A = c->adapter;
    if (r->k->gemm_q8_0 == NULL)
        return 0;
    size_t best = q8_sums_max(0, w->patch, H, gl_vision_patch_dim(c));
    best = q8_sums_max(best, w->adapter_fc1, A, 4 * H);
    best = q8_sums_max(best, w->adapter_fc2, A, A);
    best = q8_sums_max(best, w->projection, c->out_dim, A);
    for (int32_t l = 0; l < c->n_layers; l++) {
        const struct gl_vision_layer *L = &w->layers[l];
        best = q8_sums_max(best, L->q, H, H);
        best = q8_sums_max(best, L->k, H, H);
        best = q8_sums_max(best, L->v, H, H);
        best = q8_sums_max(best, L->proj, H, H);
        best = q8_sums_max(best, L->fc1, F, H);
        best = q8_sums_max(best, L->fc2, H, F);
    }
    return best;
}

static gl_status run_alloc(struct vis_run *r, const struct gl_vision_weights *w, struct gl_err *err)
{
    const struct gl_vision_config *c = r->cfg;
    int64_t P = r->P, H = c->hidden, n_in_max = gl_vision_patch_dim(c);
    const int64_t widths[] = {H, c->ffn, 4 * (int64_t)H, c->adapter};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        n_in_max = widths[i] > n_in_max ? widths[i] : n_in_max;
    size_t ph = f32_bytes(P, H), pf = f32_bytes(P, c->ffn), pr = f32_bytes(P, c->head_dim / 2);
    size_t sc = f32_bytes(gl_pool_size(r->pool) + 1, attn_scratch_floats(c->head_dim)),
           ms = f32_bytes(r->M, 4 * (int64_t)H);
    size_t ma = f32_bytes(r->M, c->adapter), act = f32_bytes(P, n_in_max); // f32 >= F16/BF16 rows
    if (act) { // the packed bf16 rows round P up to a group of 16 (M = P / 4 <= P rows too)
        size_t packed = gl_bf16_packed_bytes(P, n_in_max + n_in_max % 2);
        size_t packed_q8 = gl_q8_0_packed_bytes(P, (n_in_max + 31) / 32 * 32);
        act = packed > act ? packed : act;
        act = packed_q8 > act ? packed_q8 : act;
    }
    size_t ord = f32_bytes(P, 1); // also bounds order (int32) and win_start (int64) below
    if (!ph || !pf || !pr || !sc || !ms || !ma || !act || !ord)
        return gl_err_set(err, GL_E_LIMIT, "vision: %lld patches overflow the scratch sizes",
                          (long long)P);
    float **fl[] = {&r->x, &r->t, &r->q, &r->kk, &r->v, &r->a};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        *fl[i] = malloc(ph);
    r->f = malloc(pf);
    r->cs = malloc(pr);
    r->sn = malloc(pr);
    r->attn_scratch = malloc(sc);
    r->ms = malloc(ms);
    r->m1 = malloc(ma);
    r->m2 = malloc(ma);
    r->act = malloc(act);
    size_t wq = q8_sums_bytes(r, w);
    r->wq = wq ? malloc(wq) : NULL;
    r->order = malloc((size_t)P * sizeof(int32_t));
    r->win_start = malloc((size_t)(P + 1) * sizeof(int64_t)); // at most P windows
    if (!r->x || !r->t || !r->q || !r->kk || !r->v || !r->a || !r->f || !r->cs || !r->sn ||
        !r->attn_scratch || !r->ms || !r->m1 || !r->m2 || !r->act || !r->order || !r->win_start ||
        (wq && !r->wq))
        return gl_err_set(err, GL_E_NOMEM, "vision: no memory for %lld patches", (long long)P);
    return GL_OK;
}

gl_status gl_vision_encode(struct gl_pool *pool, const struct gl_vision_config *cfg,
                           const struct gl_vision_weights *w, const float *patches, int64_t gh2,
                           int64_t gw2, float *out, struct gl_err *err)
{
    if (!pool || !cfg || !w || !patches || !out)
        return gl_err_set(err, GL_E_INVAL, "vision: NULL argument");
    gl_status st = check_config(cfg, err);
    if (st != GL_OK)
        return st;
    if (gh2 <= 0 || gw2 <= 0 || gh2 % 2 || gw2 % 2)
        return gl_err_set(err, GL_E_INVAL, "vision: patch grid %lldx%lld is not even and non-empty",
                          (long long)gh2, (long long)gw2);
    if (gh2 > INT32_MAX / gw2)
        return gl_err_set(err, GL_E_LIMIT, "vision: patch grid %lldx%lld too large", (long long)gh2,
                          (long long)gw2);
    struct vis_run r = {.pool = pool,
                        .k = gl_kernels_get(),
                        .cfg = cfg,
                        .P = gh2 * gw2,
                        .M = gh2 * gw2 / 4,
                        .gw = gw2,
                        .qk_pairs = w->qk_pairs};
    if ((st = check_weights(r.k, cfg, w, err)) != GL_OK)
        return st;
    if ((st = run_alloc(&r, w, err)) != GL_OK) {
        run_free(&r);
        return st;
    }
    r.n_windows = gl_vision_window_order(gh2, gw2, cfg->pos_h, cfg->pos_w, r.order, r.win_start);
    rope_tables(&r);
    embed(&r, w, patches, gh2);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        int full = (l + 1) % cfg->full_every == 0 || l == cfg->n_layers - 1;
        block_attention(&r, &w->layers[l], full);
        block_mlp(&r, &w->layers[l]);
    }
    head(&r, w, gh2, out);
    run_free(&r);
    return GL_OK;
}
