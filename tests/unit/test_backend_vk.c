// SPDX-License-Identifier: MIT
// The Vulkan backend (src/model/backend_vk.c) against the CPU backend, on whole steps: two small
// models written here (vocab 512, E 256, H 4, Hkv 2, D 64, F 512, 3 layers: sliding, global,
// sliding, window 5), one all F32 and one with Q4_K_M's recipe (Q4_K matrices, Q6_K attn_v,
// ffn_down and output; Q8_0 attn_gate for that shader too), and one with the other weight types;
// f32 KV pools, and f16 / bf16 / fp8 ones with the F32 model. Two sequences share every step (13
// and 9 prompt tokens in chunked prefill of 8 rows per step, so prompts span the window and the
// 4-position KV pages), then 4 decode steps: logits of every step with logits (two of them
// through the partial head), two captured layers' hidden states, and the greedy tokens must
// agree. Then 6 greedy requests through the engine (prefix cache, preemption) on each side must
// give the same tokens; 32 concurrent requests on the device must each give its tokens alone;
// cancel while queued, prefilling and decoding must return every page. Runs on lavapipe in CI;
// prints SKIP and passes where there is no device (GLINT_VK_REQUIRE=1 makes that a failure).
//
// Tolerance: max |vk - cpu| <= tol * max |cpu logit| per step, the form of the llama.cpp parity
// gates (tests/oracle/parity_run.py): F32 1e-4, their value: both sides are fp32 with different
// summation orders (norms: double vs a fp32 tree; attention: another online-softmax order and
// the device's exp), each op then within a few ulps relative to the sum of |terms| of its
// dots, and 3 layers of sandwich norms keep that near 1e-6 relative (measured, printed); a
// wrong mask, position or norm moves logits by O(1e-1). Quantized 1e-3: the device rounds
// activations to the weight's vec_dot type like the CPU and dequantizes them back (fp32 dots of
// the same products), but a 1-ulp difference upstream can move an activation by one quantum,
// which the random model amplifies (parity_run.py: up to 2.5e-2 at 20 positions of the tiny
// preset). Measured here: 1.6e-6 (no flip in these 5 steps); 1e-3 is 600x that and fails the
// device multiplying unrounded fp32 activations (4e-2 on the Q4_K_M model: what fwd_actq is
// for). A CPU ISA whose sums flip a quantum here would need the gate's 5e-2. The
// control at the end: another sequence's logits must be more than 10 x tol away. Validation
// layer on where installed; any validation error fails.
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/kv.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test.h"
#include "vk/vk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_V = 512, T_E = 256, T_H = 4, T_HKV = 2, T_D = 64, T_F = 512, T_L = 3, T_WIN = 5 };

struct tdesc {
    char name[64];
    int64_t ne[2];
    uint32_t n_dims, type;
    float base, scale;
};

struct tset {
    struct tdesc t[64];
    int n;
};

static void add_t(struct tset *ts, const char *name, int64_t n_in, int64_t n_out, uint32_t type,
                  float base, float scale)
{
    struct tdesc *d = &ts->t[ts->n++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ne[0] = n_in;
    d->ne[1] = n_out;
    d->n_dims = n_out ? 2 : 1;
    d->type = n_out ? type : GL_TYPE_F32;
    d->base = base;
    d->scale = scale;
}

static const char *const model_name[3] = {"F32", "Q4_K_M", "mixed"};

// quant: 0 all F32; 1 the Q4_K_M recipe (+ a Q8_0 attn_gate); 2 the other types: Q5_K, Q4_0,
// F16 and BF16 (each activation rounding of fwd_actq.comp is then used).
static void build_tensors(struct tset *ts, int quant)
{
    static const uint32_t types[3][4] = {{GL_TYPE_F32, GL_TYPE_F32, GL_TYPE_F32, GL_TYPE_F32},
                                         {GL_TYPE_Q4_K, GL_TYPE_Q6_K, GL_TYPE_Q8_0, GL_TYPE_Q4_K},
                                         {GL_TYPE_Q5_K, GL_TYPE_Q4_0, GL_TYPE_F16, GL_TYPE_BF16}};
    uint32_t t[4] = {types[quant][0], types[quant][1], types[quant][2], types[quant][3]};
    // GLINT_TEST_MIXED_SLOTS (diagnosis on a real GPU, e.g. "0100"): the mixed model keeps its
    // type only in the slots marked 1 and takes Q4_K_M's in the others.
    const char *slots = getenv("GLINT_TEST_MIXED_SLOTS");
    for (int i = 0; quant == 2 && slots && i < 4 && slots[i]; i++)
        if (slots[i] == '0')
            t[i] = types[1][i];
    const uint32_t f = GL_TYPE_F32, q4 = t[0], q6 = t[1], q8 = t[2], te = t[3];
    const int HD = T_H * T_D, KD = T_HKV * T_D;
    // Unit-variance pre-activations: projections scale about 1/sqrt(fan_in) (x 1.7 for uniform).
    const float sE = 1.7f / sqrtf((float)T_E), sH = 1.7f / sqrtf((float)HD),
                sF = 1.7f / sqrtf((float)T_F);
    ts->n = 0;
    add_t(ts, "token_embd.weight", T_E, T_V, te, 0.0f, 1.0f);
    add_t(ts, "output_norm.weight", T_E, 0, f, 1.0f, 0.2f);
    add_t(ts, "output.weight", T_E, T_V, q6, 0.0f, sE);
    for (int l = 0; l < T_L; l++) {
        char nm[64];
#define A(suf, nin, nout, ty, b, sc)                                                               \
    snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l);                                           \
    add_t(ts, nm, nin, nout, ty, b, sc)
        A("attn_norm", T_E, 0, f, 1.0f, 0.2f);
        A("attn_q", T_E, HD, q4, 0.0f, sE);
        A("attn_k", T_E, KD, q4, 0.0f, sE);
        A("attn_v", T_E, KD, q6, 0.0f, sE);
        A("attn_gate", T_E, HD, q8, 0.0f, sE);
        A("attn_output", HD, T_E, q4, 0.0f, sH);
        A("attn_q_norm", T_D, 0, f, 2.0f, 0.5f);
        A("attn_k_norm", T_D, 0, f, 1.0f, 0.2f);
        A("post_attention_norm", T_E, 0, f, 1.0f, 0.2f);
        A("ffn_norm", T_E, 0, f, 1.0f, 0.2f);
        A("ffn_gate", T_E, T_F, q4, 0.0f, sE);
        A("ffn_up", T_E, T_F, q4, 0.0f, sE);
        A("ffn_down", T_F, T_E, q6, 0.0f, sF);
        A("post_ffw_norm", T_E, 0, f, 1.0f, 0.2f);
#undef A
    }
}

static float hval(int ti, int64_t r, int64_t i)
{
    uint64_t x = (uint64_t)ti * 0x9E3779B97F4A7C15ull ^ (uint64_t)r * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)i * 0x94D049BB133111EBull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static gl_status fill(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                      struct gl_err *err)
{
    (void)err;
    const struct tdesc *d = &((const struct tset *)ctx)->t[ti];
    size_t rb = gl_type_row_size(d->type, d->ne[0]);
    float row[T_F];
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < d->ne[0]; i++)
            row[i] = d->base + d->scale * hval((int)ti, row0 + r, i);
        gl_quantize_row_ref((enum gl_type)d->type, row, (uint8_t *)dst + (size_t)r * rb, d->ne[0]);
    }
    return GL_OK;
}

static char tmp_dir[256];

static const char *write_model(int quant)
{
    static char path[512];
    static struct tset ts;
    snprintf(path, sizeof path, "%s/%s.gguf", tmp_dir, model_name[quant]);
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
    const char *a = "muse-glimmer";
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", a) == GL_OK);
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("block_count"), T_L) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("embedding_length"), T_E) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("feed_forward_length"), T_F) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.head_count"), T_H) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.head_count_kv"), T_HKV) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.key_length"), T_D) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.value_length"), T_D) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("context_length"), 256) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("rope.freq_base"), 10000.0f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("logit_scale"), 0.5f) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.sliding_window"), T_WIN) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_f32(w, K("final_logit_softcapping"), 20.0f) == GL_OK);
    const uint8_t pat[T_L] = {1, 0, 1}; // sliding, global, sliding
    GL_ASSERT(gl_gguf_writer_add_arr(w, K("attention.sliding_window_pattern"), GL_GGUF_BOOL, pat,
                                     T_L) == GL_OK);
#undef K
    build_tensors(&ts, quant);
    for (int i = 0; i < ts.n; i++)
        GL_ASSERT(gl_gguf_writer_add_tensor(w, ts.t[i].name, ts.t[i].n_dims, ts.t[i].ne,
                                            ts.t[i].type) == i);
    struct gl_err err = {0};
    gl_status st = gl_gguf_writer_write(w, path, 0, fill, &ts, &err);
    GL_ASSERT_MSG(st == GL_OK, "write %s: %s", path, err.msg);
    gl_gguf_writer_delete(w);
    return path;
}

// One backend's run: its context and its own KV pool with the two sequences.
struct side {
    struct gl_model_ctx *ctx;
    struct gl_kv_pool *pool;
    struct gl_kv_seq *seq[2];
    struct gl_kv_view views[2][T_L];
};

// --n-gpu-layers of the device side of every run (-1: all; partial offload tests set it).
static int g_ngl = -1;

static int side_open(struct side *s, const struct gl_model *m, int device, enum gl_kv_dtype kvt)
{
    memset(s, 0, sizeof *s);
    struct gl_err err = {0};
    // Partial offload: the engine's split pool (gl_engine_kv_params), so the device layers'
    // views cover only the device side and the device copy is that side alone.
    struct gl_kv_params kp = {.budget_bytes = 1 << 20,
                              .block_size = 4,
                              .dtype = kvt,
                              .prefix_cache = 0,
                              .n_dev_layers = device >= 0 && g_ngl >= 0 ? g_ngl : 0};
    const struct gl_model_dev d = {.device = device, .n_gpu_layers = g_ngl};
    gl_status st = gl_model_ctx_new_ex(&s->ctx, m, 8, 2, 256, &d, &err);
    if (st == GL_OK)
        st = gl_kv_pool_new(&s->pool, &m->cfg, &kp, &err);
    for (int i = 0; st == GL_OK && i < 2; i++)
        st = gl_kv_seq_new(s->pool, &s->seq[i], &err);
    if (st != GL_OK)
        fprintf(stderr, "  side (device %d): %s\n", device, err.msg);
    return st == GL_OK;
}

static void side_close(struct side *s)
{
    for (int i = 0; i < 2; i++)
        gl_kv_seq_free(s->seq[i]);
    gl_kv_pool_free(s->pool);
    gl_model_ctx_delete(s->ctx);
}

// One step: n[i] tokens of sequence i (0 skips it); logits of the last row of each into
// logits[i * V]. Returns the status.
// mask: NULL, or a head mask for both sequences (the partial head); cap: NULL or captures.
static gl_status side_step(struct side *s, const int32_t *const tok[2], const int n[2],
                           float *logits, const uint32_t *mask, const struct gl_model_capture *cap)
{
    struct gl_batch_seq bs[2];
    int nb = 0;
    struct gl_err err = {0};
    for (int i = 0; i < 2; i++) {
        if (!n[i])
            continue;
        const int64_t pos0 = gl_kv_seq_len(s->seq[i]);
        gl_status st = gl_kv_seq_reserve(s->seq[i], n[i], &err);
        if (st != GL_OK)
            return st;
        for (int l = 0; l < T_L; l++)
            s->views[i][l] = gl_kv_seq_view(s->seq[i], l);
        bs[nb++] = (struct gl_batch_seq){.tokens = tok[i],
                                         .n = n[i],
                                         .pos0 = pos0,
                                         .views = s->views[i],
                                         .logits_row = i,
                                         .n_logits = 0,
                                         .head_mask = mask};
    }
    gl_status st = gl_model_forward_capture(s->ctx, bs, nb, logits, cap, &err);
    if (st != GL_OK) {
        fprintf(stderr, "  step: %s\n", err.msg);
        return st;
    }
    for (int i = 0; i < 2; i++)
        if (n[i])
            gl_kv_seq_commit(s->seq[i], tok[i], n[i]);
    return GL_OK;
}

static int argmax(const float *x)
{
    int b = 0;
    for (int i = 1; i < T_V; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

// max |a - b| / max |a| over n values (NaN anywhere, or -INFINITY on one side only: infinity).
static double rel_diff_n(const float *a, const float *b, int n)
{
    double d = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        if (isinf(a[i]) && a[i] < 0 && isinf(b[i]) && b[i] < 0)
            continue; // outside the partial head on both sides
        if (isnan(b[i]) || isnan(a[i]) || isinf(a[i]) || isinf(b[i]))
            return INFINITY;
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        mag = fmax(mag, fabs((double)a[i]));
    }
    return d / mag;
}

static double rel_diff(const float *a, const float *b)
{
    return rel_diff_n(a, b, T_V);
}

static void check_model(int quant, enum gl_kv_dtype kvt, double tol)
{
    const char *path = write_model(quant);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, path, &mp, &err) == GL_OK);
    struct side cpu, vk;
    int ok_c = side_open(&cpu, m, -1, kvt), ok_v = ok_c && side_open(&vk, m, 0, kvt);
    if (!ok_c || !ok_v) {
        if (ok_c)
            side_close(&cpu);
        gl_model_delete(m);
        CHECK(ok_c && ok_v);
        return;
    }
    int32_t a[32], b[32];
    for (int i = 0; i < 32; i++) {
        a[i] = (int32_t)((i * 37 + 11) % T_V);
        b[i] = (int32_t)((i * 101 + 5) % T_V);
    }
    float lc[2 * T_V], lv[2 * T_V];
    // A head mask allowing 3 of the 32 16-row groups (the partial head), for decode steps 4, 6.
    uint32_t mask[T_V / 32] = {0};
    mask[0] = 0x0000FFFFu;  // group 0
    mask[5] = 0x00F00000u;  // group 11
    mask[12] = 0xFFFF0000u; // group 25
    // Captures of the normed embedding and the last layer in the second prefill step.
    static float cap_c[2][8 * T_E], cap_v[2][8 * T_E];
    const int32_t cap_layers[2] = {-1, T_L - 1};
    float *const out_c[2] = {cap_c[0], cap_c[1]}, *const out_v[2] = {cap_v[0], cap_v[1]};
    const struct gl_model_capture cc = {2, cap_layers, out_c}, cv = {2, cap_layers, out_v};
    double worst = 0;
    int n_steps = 0, tok_same = 1;
    // Chunked prefill (13 and 9 tokens): 5+3, 5+3, 3+3 rows; then 4 decode steps of 1+1.
    const int pa[3] = {5, 5, 3}, pb[3] = {3, 3, 3};
    int at_a = 0, at_b = 0;
    for (int step = 0; step < 7; step++) {
        int n[2] = {step < 3 ? pa[step] : 1, step < 3 ? pb[step] : 1};
        const int32_t *tok[2] = {a + at_a, b + at_b};
        for (int i = 0; i < 2 * T_V; i++)
            lc[i] = lv[i] = NAN;
        const uint32_t *mk = step == 4 || step == 6 ? mask : NULL;
        REQUIRE(side_step(&cpu, tok, n, lc, mk, step == 1 ? &cc : NULL) == GL_OK);
        REQUIRE(side_step(&vk, tok, n, lv, mk, step == 1 ? &cv : NULL) == GL_OK);
        if (step == 1)
            for (int c = 0; c < 2; c++) {
                const double r = rel_diff_n(cap_c[c], cap_v[c], 8 * T_E);
                worst = fmax(worst, r);
                CHECKF(r <= tol, "capture of layer %d: rel %.3e", cap_layers[c], r);
            }
        if (mk) // the partial head: -INFINITY outside the 3 groups on both sides (rel_diff)
            for (int i = 0; i < 2; i++)
                CHECK(isinf(lc[i * T_V + 100]) && isinf(lv[i * T_V + 100]) &&
                      !isinf(lv[i * T_V + 401]));
        at_a += n[0];
        at_b += n[1];
        if (step < 2)
            continue; // logits of the last prompt chunk and of every decode step
        for (int i = 0; i < 2; i++) {
            const double r = rel_diff(lc + i * T_V, lv + i * T_V);
            worst = fmax(worst, r);
            CHECKF(r <= tol, "%s step %d seq %d: rel %.3e > %.0e", model_name[quant], step, i, r,
                   tol);
            const int tc = argmax(lc + i * T_V), tv = argmax(lv + i * T_V);
            tok_same &= tc == tv;
            // Greedy: the next input is the CPU's token (both sides see the same).
            (i ? b : a)[i ? at_b : at_a] = tc;
        }
        n_steps++;
    }
    CHECK(tok_same);
    // Control: sequence b's logits are nowhere near a's, so the tolerance discriminates.
    const double ctl = rel_diff(lc, lv + T_V);
    CHECKF(ctl > 10 * tol, "control %.3e", ctl);
    static const char *const kv_name[4] = {"f32", "f16", "bf16", "fp8"};
    printf("  %s, %s KV, --n-gpu-layers %d: %d steps with logits, worst rel %.2e (tol %.0e), "
           "greedy tokens %s, control %.2e\n",
           model_name[quant], kv_name[kvt], g_ngl, n_steps, worst, tol,
           tok_same ? "equal" : "DIFFER", ctl);
    side_close(&vk);
    side_close(&cpu);
    gl_model_delete(m);
}

TEST(test_f32_steps)
{
    check_model(0, GL_KV_F32, 1e-4);
}

TEST(test_q4km_steps)
{
    check_model(1, GL_KV_F32, 1e-3);
}

// The mixed types' tolerance is wider than Q4_K_M's. Q8_K / Q8_0 dots are integer sums, exact in
// any order, so on Q4_K_M the device reproduces the CPU's every activation rounding (2e-6). F16
// and the AVX2 / AVX-512 Q5_K dots sum floats in an order of their own: a 1-ulp difference in one
// matmul's output moves an element of the next layer's Q8 activation by a quantum, and on this
// 3-layer model that reaches 1e-2 of the logits. Measured: on lavapipe against the CPU's avx512
// kernels 1.9e-6, against its ref and avx2 kernels (GLINT_ISA) 7.0e-3; only Q5_K or only the F16
// gate mixed into Q4_K_M (GLINT_TEST_MIXED_SLOTS 1000, 0010) 2.5e-2; on an NVIDIA H200 3.0e-2
// (the greedy tokens equal in every case). The CPU's own kernels differ from each other by as
// much, so 5e-2 is what agreement means here; the controls above are O(1).
TEST(test_mixed_types_steps)
{
    check_model(2, GL_KV_F32, 5e-2);
}

// 16-bit and fp8 KV: both sides round K/V rows the same way (gl_f32_to_fp16 / _bf16, nearest
// even; fp8: the same bf16 row scale and e4m3 rounding, fp8.c), but an element whose two
// fp32 values straddle a rounding boundary stores one ulp apart (2^-11, 2^-8, 2^-4 relative).
// Measured on the F32 model: f16 1.6e-4, bf16 9e-5, fp8 7e-6 (flips are rarer on the coarser
// grid); 1e-2 still fails a wrong half order, byte offset or row scale (O(1)). With quantized
// activations such a flip can move a quantum too (measured 1e-2 on Q4_K_M with f16 KV): those
// models run with f32 KV above.
TEST(test_kv16_steps)
{
    check_model(0, GL_KV_F16, 1e-2);
    check_model(0, GL_KV_BF16, 1e-2);
    check_model(0, GL_KV_FP8_E4M3, 1e-2);
}

// Partial offload (--n-gpu-layers N): the last N layers on the device, the rest (and the head
// unless N = n_layer + 1) on the CPU, each layer's K/V where it runs: the same steps (chunked
// prefill, decode, partial head, captures of layers -1 and 2) within the same tolerances, for
// N = 0..n_layer + 1 on the F32 and Q4_K_M models (N = 1, 2: the pool split, the device layers'
// pages alone on the device). N = 0 is the CPU alone (no device backend): bit-equal.
TEST(test_partial_offload_steps)
{
    static const int ngl[5] = {0, 1, 2, T_L, T_L + 1};
    for (int i = 0; i < 5; i++) {
        g_ngl = ngl[i];
        check_model(0, GL_KV_F32, 1e-4);
        check_model(1, GL_KV_F32, 1e-3);
    }
    g_ngl = -1;
}

// ---- the engine on the device ----

enum { E_MAX = 32, E_GEN = 6, E_MAX_GEN = 12 };

struct e_out {
    int32_t tokens[E_MAX][E_MAX_GEN + 8];
    int n[E_MAX];
    int finish[E_MAX];
};

struct e_slot {
    struct e_out *o;
    int i;
};

static void on_slot_event(void *user, const struct gl_event *ev)
{
    const struct e_slot *sl = user;
    for (int32_t t = 0; t < ev->n_tokens && sl->o->n[sl->i] < E_MAX_GEN + 8; t++)
        sl->o->tokens[sl->i][sl->o->n[sl->i]++] = ev->tokens[t];
    if (ev->finish != GL_FINISH_NONE)
        sl->o->finish[sl->i] = (int)ev->finish;
}

// The engine's shape for a run: requests, sequences at once, tokens per step, positions of every
// layer the pool holds (blocks of 4), prefix cache, tokens per request, max_model_len.
struct e_shape {
    int n_req, max_seqs, step_tokens, positions, prefix_cache, n_gen, max_len;
    const int *lens; // prompt lengths (<= 40), or NULL: e_prompt's
};

// Prompt r of a run: 9..(9 + 3 * 8) tokens (r-dependent), the first 8 shared by every request
// (with 4-position blocks the prefix cache serves them to the later ones).
static int e_prompt(const struct e_shape *sh, int r, int32_t *prompt)
{
    const int n = sh->lens ? sh->lens[r] : 9 + (r * 5) % (sh->n_req > 6 ? 24 : 9);
    for (int i = 0; i < n; i++)
        prompt[i] = i < 8 ? (int32_t)(i * 7 + 3) : (int32_t)((r * 31 + i * 13) % T_V);
    return n;
}

static struct gl_engine *e_new(const struct gl_model *m, int device, const struct e_shape *sh)
{
    struct gl_engine_params ep = gl_engine_default_params(m);
    ep.device = device;
    ep.n_gpu_layers = g_ngl;
    ep.max_num_seqs = sh->max_seqs;
    ep.max_num_batched_tokens = sh->step_tokens;
    ep.max_model_len = sh->max_len;
    ep.n_threads = 2;
    ep.cpus = NULL;
    ep.n_cpus = 0;
    ep.kv.block_size = 4;
    ep.kv.dtype = GL_KV_F32;
    ep.kv.prefix_cache = sh->prefix_cache;
    ep.kv.budget_bytes = (int64_t)T_L * sh->positions * T_HKV * T_D * 4 * 2;
    struct gl_engine *e = NULL;
    struct gl_err err = {0};
    if (gl_engine_new(&e, m, NULL, &ep, &err) != GL_OK)
        fprintf(stderr, "  engine (device %d): %s\n", device, err.msg);
    return e;
}

static int e_submit(struct gl_engine *e, const struct e_shape *sh, struct e_slot *slot, int r,
                    uint64_t *id)
{
    int32_t prompt[40];
    const int n = e_prompt(sh, r, prompt);
    struct gl_request rq = {.prompt = prompt, .n_prompt = n};
    rq.sp = gl_sample_default_params();
    rq.sp.temperature = 0.0f;
    rq.sp.ignore_eos = 1;
    rq.sp.max_tokens = sh->n_gen;
    rq.on_event = on_slot_event;
    rq.user = slot;
    struct gl_err err = {0};
    if (gl_engine_submit(e, &rq, id, &err) != GL_OK) {
        fprintf(stderr, "  submit: %s\n", err.msg);
        return 0;
    }
    return 1;
}

// Steps until idle; 1 when every step succeeded and the pool audit is clean after.
static int e_drain(struct gl_engine *e)
{
    struct gl_err err = {0};
    int n_active = 1;
    gl_status st = GL_OK;
    while (n_active > 0 && st == GL_OK)
        st = gl_engine_step(e, &n_active, &err);
    if (st != GL_OK)
        fprintf(stderr, "  engine step: %s\n", err.msg);
    return st == GL_OK && gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0;
}

// sh->n_req greedy requests through gl_engine on `device`, all submitted at once; alone = 1
// runs them one after another instead (a request alone in the engine, no prefix cache).
static int engine_run(const struct gl_model *m, int device, const struct e_shape *sh, int alone,
                      struct e_out *o, struct gl_engine_stats *es)
{
    memset(o, 0, sizeof *o);
    static struct e_slot slots[E_MAX];
    GL_ASSERT(sh->n_req <= E_MAX && sh->n_gen <= E_MAX_GEN);
    // Alone: a prompt in one step, the pool big enough, no prefix cache; and on lavapipe without
    // the validation layer, which triples a step's time (these are the batched run's shaders,
    // validated there).
    struct e_shape one = *sh;
    one.prefix_cache = 0;
    one.step_tokens = 64;
    one.positions = 64;
    const char *val = getenv("GLINT_VK_VALIDATION");
    char val_keep[8] = "";
    if (alone && val) {
        snprintf(val_keep, sizeof val_keep, "%s", val);
        setenv("GLINT_VK_VALIDATION", "0", 1);
    }
    struct gl_engine *e = e_new(m, device, alone ? &one : sh);
    if (alone && val_keep[0])
        setenv("GLINT_VK_VALIDATION", val_keep, 1);
    int ok = e != NULL;
    for (int r = 0; ok && r < sh->n_req; r++) {
        slots[r] = (struct e_slot){o, r};
        ok = e_submit(e, sh, &slots[r], r, NULL) && (!alone || e_drain(e));
    }
    ok = ok && e_drain(e);
    if (e)
        gl_engine_stats(e, es);
    gl_engine_free(e);
    return ok;
}

// Request r of a and b: same length, finished by length, same tokens.
static int same_tokens(const struct e_out *a, const struct e_out *b, int n_req, int n_gen)
{
    int same = 1;
    for (int r = 0; r < n_req; r++) {
        CHECKF(a->n[r] == n_gen && b->n[r] == n_gen && a->finish[r] == GL_FINISH_LENGTH &&
                   b->finish[r] == GL_FINISH_LENGTH,
               "request %d: %d / %d tokens, finish %d / %d", r, a->n[r], b->n[r], a->finish[r],
               b->finish[r]);
        for (int t = 0; t < a->n[r] && t < b->n[r]; t++)
            same &= a->tokens[r][t] == b->tokens[r][t];
    }
    return same;
}

// The engine's tokens on the device equal its tokens on the CPU, request by request, with the
// prefix cache and preemption at work (f32 KV, F32 model: the logits agree to ~1e-6, far inside
// these random logits' gaps). 6 requests of 9-17 tokens, 4 at once, 12 tokens per step (chunked
// prefill mixed with decodes) and 18 pages, too few for all of them at once (preemption).
TEST(test_engine_tokens)
{
    const char *path = write_model(0);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, path, &mp, &err) == GL_OK);
    static struct e_out oc, ov;
    struct gl_engine_stats sc, sv;
    const struct e_shape sh = {6, 4, 12, 24, 1, E_GEN, 24, NULL};
    const int okc = engine_run(m, -1, &sh, 0, &oc, &sc);
    const int okv = okc && engine_run(m, 0, &sh, 0, &ov, &sv);
    CHECK(okc && okv);
    const int same = okc && okv && same_tokens(&oc, &ov, sh.n_req, sh.n_gen);
    CHECK(same);
    if (okc && okv) {
        CHECK(sv.n_preempted_total > 0 && sv.prefix_hit_tokens > 0);
        printf("  engine: %d requests x %d tokens %s; device: %lld steps, %d preemptions, %lld "
               "prefix-hit tokens (cpu: %lld, %d, %lld)\n",
               sh.n_req, sh.n_gen, same ? "token-identical" : "DIFFER", (long long)sv.steps,
               sv.n_preempted_total, (long long)sv.prefix_hit_tokens, (long long)sc.steps,
               sc.n_preempted_total, (long long)sc.prefix_hit_tokens);
    }
    gl_model_delete(m);
}

// The engine with 1 and 2 of the 3 layers on the device (--n-gpu-layers 1, 2, the head on the
// CPU; the pool split, its device side alone on the device): token-identical to the CPU with the
// prefix cache and preemption at work, as above.
TEST(test_engine_partial_offload)
{
    const char *path = write_model(0);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, path, &mp, &err) == GL_OK);
    static struct e_out oc, ov;
    struct gl_engine_stats sc, sv;
    const struct e_shape sh = {6, 4, 12, 24, 1, E_GEN, 24, NULL};
    const int okc = engine_run(m, -1, &sh, 0, &oc, &sc);
    for (g_ngl = 1; g_ngl <= 2; g_ngl++) { // both split the pool (the device side 6 / 12 pages)
        const int okv = okc && engine_run(m, 0, &sh, 0, &ov, &sv);
        CHECK(okc && okv);
        const int same = okc && okv && same_tokens(&oc, &ov, sh.n_req, sh.n_gen);
        CHECK(same);
        if (okc && okv) {
            CHECK(sv.n_preempted_total > 0 && sv.prefix_hit_tokens > 0);
            printf("  engine, --n-gpu-layers %d: %d requests x %d tokens %s; %lld steps, %d "
                   "preemptions, %lld prefix-hit tokens\n",
                   g_ngl, sh.n_req, sh.n_gen, same ? "token-identical" : "DIFFER",
                   (long long)sv.steps, sv.n_preempted_total, (long long)sv.prefix_hit_tokens);
        }
    }
    // A request that fits the 18 pages but not one side: at -ngl 1 the host side (layers 0, 1:
    // sliding, global) has 12 pages and 48 positions need 12 + 2 there (2 on the device side,
    // 16 in all): refused at submit, not left to wait for pages that never come.
    g_ngl = 1;
    const struct e_shape big = {1, 4, 12, 24, 1, 39, 48, NULL};
    struct gl_engine *e = e_new(m, 0, &big);
    REQUIRE(e);
    struct e_slot slot = {&ov, 0};
    int32_t prompt[40];
    struct gl_request rq = {.prompt = prompt, .n_prompt = e_prompt(&big, 0, prompt)};
    rq.sp = gl_sample_default_params();
    rq.sp.max_tokens = big.n_gen;
    rq.on_event = on_slot_event;
    rq.user = &slot;
    const gl_status st = gl_engine_submit(e, &rq, NULL, &err);
    CHECKF(st == GL_E_LIMIT && strstr(err.msg, "on the host"), "status %d: %s", (int)st, err.msg);
    gl_engine_free(e);
    g_ngl = -1;
    gl_model_delete(m);
}

// `glint plan --device vulkan`'s figures (gl_model_dev_mem_plan, at the engine's bounds from
// gl_engine_model_dev) equal the bytes the engine's device buffers hold after it ran requests
// (every buffer allocated at create; a step that had to grow one would show here), for the F32
// and Q4_K_M models, with every layer, 2 layers and the 3 layers without the head on the device;
// the device KV copy at -ngl N < n_layer is floor(n_pages x N / n_layer) pages of the pool.
TEST(test_plan_matches_alloc)
{
    static const int ngl[3] = {-1, 2, T_L};
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < 3; i++) {
            const char *path = write_model(q);
            struct gl_model *m = NULL;
            struct gl_err err = {0};
            struct gl_model_params mp = gl_model_default_params();
            REQUIRE(gl_model_open(&m, path, &mp, &err) == GL_OK);
            struct gl_gguf *g = NULL;
            struct gl_gguf_open_params op = gl_gguf_default_open_params();
            REQUIRE(gl_gguf_open(&g, path, &op, &err) == GL_OK);
            // Six requests of one token each (four at a time, prefills chunked by the 12-token
            // step): the buffers are sized by the engine's limits, not by how long requests run,
            // so the generated tokens the other tests need add nothing here (6 x 6 tokens took
            // 42.5 s under ASan and the validation layer).
            const struct e_shape sh = {6, 4, 12, 24, 1, 1, 24, NULL};
            g_ngl = ngl[i];
            struct gl_engine *e = e_new(m, 0, &sh);
            REQUIRE(e);
            static struct e_out o;
            static struct e_slot slots[E_MAX];
            memset(&o, 0, sizeof o);
            for (int r = 0; r < sh.n_req; r++) {
                slots[r] = (struct e_slot){&o, r};
                REQUIRE(e_submit(e, &sh, &slots[r], r, NULL));
            }
            REQUIRE(e_drain(e));
            // The engine's parameters as e_new set them (the plan sees what serve would pass).
            struct gl_engine_params ep = gl_engine_default_params(m);
            ep.device = 0;
            ep.n_gpu_layers = g_ngl;
            ep.max_num_seqs = sh.max_seqs;
            ep.max_model_len = sh.max_len;
            ep.kv.block_size = 4;
            struct gl_model_dev md;
            gl_engine_model_dev(&ep, &md);
            struct gl_model_dev_mem pl;
            const struct gl_kv_pool *kp = gl_engine_kv_pool(e);
            REQUIRE(gl_model_dev_mem_plan(g, &m->cfg, sh.step_tokens, &md, gl_kv_pool_dev_bytes(kp),
                                          &pl, &err) == GL_OK);
            // The device KV copy holds only the device layers' pages: with -ngl N < n_layer,
            // floor(n_pages x N / n_layer) pages (groups of one layer here), else the whole pool.
            const int64_t np = gl_kv_pool_total_pages(kp);
            const uint64_t page = gl_kv_pool_bytes(kp) / (uint64_t)np;
            const int64_t n_dev = g_ngl >= 0 && g_ngl < T_L ? np * g_ngl / T_L : np;
            CHECKF(gl_kv_pool_dev_bytes(kp) == (uint64_t)n_dev * page && pl.kv >= n_dev * page &&
                       pl.kv < n_dev * page + 256,
                   "-ngl %d: device KV %llu bytes, plan %llu, want %lld pages of %llu", g_ngl,
                   (unsigned long long)gl_kv_pool_dev_bytes(kp), (unsigned long long)pl.kv,
                   (long long)n_dev, (unsigned long long)page);
            const uint64_t dev = gl_engine_device_bytes(e, 0), host = gl_engine_device_bytes(e, 1);
            CHECKF(dev == pl.device_total && host == pl.host_visible,
                   "%s, -ngl %d: device-local %llu vs plan %llu, host-visible %llu vs plan %llu",
                   model_name[q], g_ngl, (unsigned long long)dev,
                   (unsigned long long)pl.device_total, (unsigned long long)host,
                   (unsigned long long)pl.host_visible);
            printf(
                "  plan %s, -ngl %d: device-local %llu bytes (weights %llu, norms %llu, KV %llu, "
                "activations %llu, step inputs %llu, logits %llu), host-visible %llu: %s\n",
                model_name[q], g_ngl, (unsigned long long)pl.device_total,
                (unsigned long long)pl.weights, (unsigned long long)pl.norms,
                (unsigned long long)pl.kv, (unsigned long long)pl.activations,
                (unsigned long long)pl.step_inputs, (unsigned long long)pl.logits,
                (unsigned long long)pl.host_visible,
                dev == pl.device_total && host == pl.host_visible ? "equal to the allocator"
                                                                  : "DIFFERS");
            gl_engine_free(e);
            gl_gguf_close(g);
            gl_model_delete(m);
            g_ngl = -1;
        }
}

// 32 concurrent sequences on the device, each token-identical to itself running alone on the
// device (issue 20): prompts of 9-32 tokens sharing 8, 32 sequences at once, 40 tokens per step
// (chunked prefill beside decodes), a pool of 128 positions a layer for up to 32 x 38
// (preemption), the prefix cache on; alone: one request at a time, no prefix cache.
TEST(test_engine_battery32)
{
    const char *path = write_model(0);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, path, &mp, &err) == GL_OK);
    static struct e_out ob, oa;
    struct gl_engine_stats sb, sa;
    const struct e_shape sh = {32, 32, 40, 128, 1, E_GEN, 48, NULL};
    const int okb = engine_run(m, 0, &sh, 0, &ob, &sb);
    const int oka = okb && engine_run(m, 0, &sh, 1, &oa, &sa);
    CHECK(okb && oka);
    const int same = okb && oka && same_tokens(&ob, &oa, sh.n_req, sh.n_gen);
    CHECK(same);
    if (okb && oka) {
        CHECKF(sb.n_preempted_total > 0 && sb.prefix_hit_tokens > 0,
               "%d preemptions, %lld prefix-hit tokens", sb.n_preempted_total,
               (long long)sb.prefix_hit_tokens);
        printf("  battery: %d requests x %d tokens %s running alone; batched: %lld steps, %d "
               "preemptions, %lld prefix-hit tokens; alone: %lld steps\n",
               sh.n_req, sh.n_gen, same ? "token-identical to" : "DIFFER from", (long long)sb.steps,
               sb.n_preempted_total, (long long)sb.prefix_hit_tokens, (long long)sa.steps);
    }
    gl_model_delete(m);
}

// Cancel on the device while queued, while prefilling (chunked) and while decoding: an abort
// each, pages back in the pool at once, the audit clean; the survivor's tokens unchanged.
TEST(test_engine_cancel_phases)
{
    const char *path = write_model(0);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, path, &mp, &err) == GL_OK);
    // 3 at once, 8 tokens per step, prompts of 9, 9, 30, 9: after 3 steps requests 0 and 1
    // decode, request 2 is part way through its 30 prompt tokens and request 3 waits.
    static const int lens[4] = {9, 9, 30, 9};
    const struct e_shape sh = {4, 3, 8, 256, 1, E_MAX_GEN, 48, lens};
    static struct e_out o, ref;
    struct gl_engine_stats st;
    REQUIRE(engine_run(m, 0, &sh, 1, &ref, &st));
    memset(&o, 0, sizeof o);
    static struct e_slot slots[4];
    struct gl_engine *e = e_new(m, 0, &sh);
    REQUIRE(e);
    uint64_t id[4];
    for (int r = 0; r < 4; r++) {
        slots[r] = (struct e_slot){&o, r};
        REQUIRE(e_submit(e, &sh, &slots[r], r, &id[r]));
    }
    int n_active;
    for (int k = 0; k < 3; k++)
        REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    gl_engine_stats(e, &st);
    CHECKF(st.n_running == 3 && st.n_waiting == 1, "running %d waiting %d", st.n_running,
           st.n_waiting);
    CHECKF(o.n[0] > 0 && o.n[1] > 0 && o.n[2] == 0 && o.n[3] == 0, "tokens so far %d %d %d %d",
           o.n[0], o.n[1], o.n[2], o.n[3]);
    const int64_t used0 = gl_kv_pool_audit(gl_engine_kv_pool(e));
    CHECK(gl_engine_cancel(e, id[3]) == 1); // queued
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    CHECK(o.finish[3] == GL_FINISH_ABORT && o.n[3] == 0);
    CHECK(gl_engine_cancel(e, id[2]) == 1); // prefilling
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    CHECK(o.finish[2] == GL_FINISH_ABORT && o.n[2] == 0);
    const int64_t used1 = gl_kv_pool_audit(gl_engine_kv_pool(e));
    CHECKF(used1 < used0, "pages in use %lld -> %lld", (long long)used0, (long long)used1);
    CHECK(gl_engine_cancel(e, id[0]) == 1); // decoding
    REQUIRE(e_drain(e));
    CHECK(o.finish[0] == GL_FINISH_ABORT && o.n[0] < sh.n_gen);
    CHECKF(o.finish[1] == GL_FINISH_LENGTH && o.n[1] == sh.n_gen &&
               !memcmp(o.tokens[1], ref.tokens[1], sizeof(int32_t) * (size_t)sh.n_gen),
           "survivor: %d tokens, finish %d", o.n[1], o.finish[1]);
    for (int t = 0; t < o.n[0]; t++)
        CHECK(o.tokens[0][t] == ref.tokens[0][t]);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    gl_engine_free(e);
    gl_model_delete(m);
}

int main(void)
{
    const char *req = getenv("GLINT_VK_REQUIRE");
    const int required = req && !strcmp(req, "1");
    // Under the Khronos validation layer where it is installed (GLINT_VK_VALIDATION=0: off).
    if (!getenv("GLINT_VK_VALIDATION"))
        setenv("GLINT_VK_VALIDATION", "1", 1);
    struct gl_vk_device_info *infos = NULL;
    int n = 0;
    struct gl_err err = {0};
    struct gl_vk_device *probe = NULL;
    if (gl_vk_device_open(0, &probe, &err) == GL_E_UNSUPPORTED &&
        strstr(err.msg, "validation layer")) {
        printf("# the Khronos validation layer is not installed: running without it\n");
        setenv("GLINT_VK_VALIDATION", "0", 1);
    }
    gl_vk_device_close(probe);
    err = (struct gl_err){0};
    if (gl_vk_list_devices(&infos, &n, &err) != GL_OK || n < 1) {
        printf("SKIP test_backend_vk: %s\n", n < 1 && !err.msg[0] ? "no Vulkan device" : err.msg);
        return required ? 1 : 0;
    }
    gl_free(infos);
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/glint_test_bkvk_XXXXXX");
    if (!mkdtemp(tmp_dir))
        return 1;
    const int64_t t0 = gl_time_us();
    t_test_fn fns[] = {test_f32_steps,
                       test_q4km_steps,
                       test_mixed_types_steps,
                       test_kv16_steps,
                       test_partial_offload_steps,
                       test_engine_tokens,
                       test_engine_partial_offload,
                       test_plan_matches_alloc,
                       test_engine_battery32,
                       test_engine_cancel_phases};
    const int rc = t_run("test_f32_steps, test_q4km_steps, test_mixed_types_steps, "
                         "test_kv16_steps, test_partial_offload_steps, test_engine_tokens, "
                         "test_engine_partial_offload, test_plan_matches_alloc, "
                         "test_engine_battery32, test_engine_cancel_phases",
                         fns, 10);
    for (int q = 0; q < 3; q++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s.gguf", tmp_dir, model_name[q]);
        unlink(p);
    }
    rmdir(tmp_dir);
    const long verr = gl_vk_validation_errors();
    printf("# %.1f s; validation %s, errors: %ld\n", (double)(gl_time_us() - t0) / 1e6,
           getenv("GLINT_VK_VALIDATION"), verr);
    return rc != 0 || verr != 0;
}
