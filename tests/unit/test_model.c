// SPDX-License-Identifier: MIT
// model tests on small models written here with the gguf writer (vocab 64, E 64, H 4, Hkv 2,
// D 16, F 96): config parsing rules and refusals, determinism, chunked == one-shot prefill,
// prefill + decode == teacher-forced, keep-quant vs f32 expansion, the sliding window really
// masking, and a naive O(n^2) scalar forward pass written straight from arch doc §2 that must
// agree with forward.c to 1e-4.
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_V = 64, T_E = 64, T_H = 4, T_HKV = 2, T_D = 16, T_F = 96 };

struct spec {
    const char *arch;
    int n_layer;
    int window;       // written as attention.sliding_window
    int pattern_mode; // 0 bool array, 1 scalar period, 2 absent
    int period;
    int bool_len; // length of the bool array (0: n_layer)
    int omit_softcap;
    float softcap;
    uint32_t wtype;               // type of the 2-D weights
    const char *odd_type_tensor;  // this tensor gets type Q4_1 (unsupported)
    const char *bad_shape_tensor; // this tensor gets one extra output row
    int extra_key;                // add an unrecognised muse-glimmer.* key
    int fused_qkv;                // write blk.N.attn_qkv instead of attn_q/k/v
};

static struct spec spec_default(void)
{
    struct spec s = {
        .arch = "muse-glimmer", .n_layer = 4, .window = 4, .softcap = 20.0f, .wtype = GL_TYPE_F32};
    return s;
}

struct tdesc {
    char name[64];
    int64_t ne[2];
    uint32_t n_dims, type;
    float base, scale;
};

struct tset {
    struct tdesc t[256];
    int n;
};

static void add_t(struct tset *ts, const struct spec *s, const char *name, int64_t n_in,
                  int64_t n_out, float base, float scale)
{
    struct tdesc *d = &ts->t[ts->n++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ne[0] = n_in;
    d->ne[1] = n_out;
    d->n_dims = n_out ? 2 : 1;
    d->type = n_out ? s->wtype : GL_TYPE_F32;
    d->base = base;
    d->scale = scale;
    if (s->odd_type_tensor && !strcmp(name, s->odd_type_tensor))
        d->type = GL_TYPE_Q4_1;
    if (s->bad_shape_tensor && !strcmp(name, s->bad_shape_tensor))
        d->ne[1] += 1;
}

static void build_tensors(struct tset *ts, const struct spec *s)
{
    ts->n = 0;
    const int HD = T_H * T_D, KD = T_HKV * T_D;
    add_t(ts, s, "token_embd.weight", T_E, T_V, 0.0f, 1.0f);
    add_t(ts, s, "output_norm.weight", T_E, 0, 1.0f, 0.2f);
    add_t(ts, s, "output.weight", T_E, T_V, 0.0f, 0.25f);
    for (int l = 0; l < s->n_layer; l++) {
        char nm[64];
#define A(suf, nin, nout, b, sc)                                                                   \
    snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l);                                           \
    add_t(ts, s, nm, nin, nout, b, sc)
        A("attn_norm", T_E, 0, 1.0f, 0.2f);
        if (s->fused_qkv) {
            A("attn_qkv", T_E, HD + 2 * KD, 0.0f, 0.2f);
        } else {
            A("attn_q", T_E, HD, 0.0f, 0.2f);
            A("attn_k", T_E, KD, 0.0f, 0.2f);
            A("attn_v", T_E, KD, 0.0f, 0.2f);
        }
        A("attn_gate", T_E, HD, 0.0f, 0.2f);
        A("attn_output", HD, T_E, 0.0f, 0.2f);
        A("attn_q_norm", T_D, 0, 2.0f, 0.5f);
        A("attn_k_norm", T_D, 0, 1.0f, 0.2f);
        A("post_attention_norm", T_E, 0, 1.0f, 0.2f);
        A("ffn_norm", T_E, 0, 1.0f, 0.2f);
        A("ffn_gate", T_E, T_F, 0.0f, 0.2f);
        A("ffn_up", T_E, T_F, 0.0f, 0.2f);
        A("ffn_down", T_F, T_E, 0.0f, 0.15f);
        A("post_ffw_norm", T_E, 0, 1.0f, 0.2f);
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
    float row[512];
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < d->ne[0]; i++)
            row[i] = d->base + d->scale * hval((int)ti, row0 + r, i);
        uint8_t *o = (uint8_t *)dst + (size_t)r * rb;
        if (d->type == GL_TYPE_Q4_1)
            memset(o, 0, rb);
        else
            gl_quantize_row_ref((enum gl_type)d->type, row, o, d->ne[0]);
    }
    return GL_OK;
}

static char tmp_dir[256];

static const char *write_model(const struct spec *s, const char *fname)
{
    static char path[512];
    static struct tset ts;
    snprintf(path, sizeof path, "%s/%s", tmp_dir, fname);
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", s->arch) == GL_OK);
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", s->arch, suffix), key)
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("block_count"), (uint32_t)s->n_layer) == GL_OK);
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
    GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.sliding_window"), (uint32_t)s->window) ==
              GL_OK);
    if (!s->omit_softcap)
        GL_ASSERT(gl_gguf_writer_add_f32(w, K("final_logit_softcapping"), s->softcap) == GL_OK);
    if (s->pattern_mode == 0) {
        uint8_t b[64];
        int n = s->bool_len ? s->bool_len : s->n_layer;
        for (int i = 0; i < n; i++)
            b[i] = (i % 4) != 3; // explicit: layers 3, 7, ... full
        GL_ASSERT(gl_gguf_writer_add_arr(w, K("attention.sliding_window_pattern"), GL_GGUF_BOOL, b,
                                         (uint64_t)n) == GL_OK);
    } else if (s->pattern_mode == 1) {
        GL_ASSERT(gl_gguf_writer_add_u32(w, K("attention.sliding_window_pattern"),
                                         (uint32_t)s->period) == GL_OK);
    }
    if (s->extra_key)
        GL_ASSERT(gl_gguf_writer_add_u32(w, K("mystery_knob"), 7) == GL_OK);
#undef K
    build_tensors(&ts, s);
    for (int i = 0; i < ts.n; i++)
        GL_ASSERT(gl_gguf_writer_add_tensor(w, ts.t[i].name, ts.t[i].n_dims, ts.t[i].ne,
                                            ts.t[i].type) == i);
    struct gl_err err = {0};
    gl_status st = gl_gguf_writer_write(w, path, 0, fill, &ts, &err);
    GL_ASSERT_MSG(st == GL_OK, "write %s: %s", path, err.msg);
    gl_gguf_writer_delete(w);
    return path;
}

// Loads path; returns the status and leaves the message in err.
static gl_status try_load(const char *path, struct gl_model **m, int keep_quant, struct gl_err *err)
{
    struct gl_model_params p = {.keep_quant = keep_quant};
    memset(err, 0, sizeof *err);
    return gl_model_open(m, path, &p, err);
}

// Teacher-forced logits of ids (n) with the given batch size; caller frees.
static float *run_logits(struct gl_model *m, const int32_t *ids, int n, int batch)
{
    struct gl_model_ctx *c = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_err err;
    GL_ASSERT(gl_model_ctx_new(&c, m, batch, 2, 64, &err) == GL_OK);
    GL_ASSERT(gl_kv_cache_new(&kv, &m->cfg, 64, &err) == GL_OK);
    float *lg = malloc((size_t)n * T_V * sizeof(float));
    GL_ASSERT(lg);
    GL_ASSERT(gl_model_forward(c, kv, ids, n, 0, lg, 1, NULL, &err) == GL_OK);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(c);
    return lg;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        d = x > d ? x : d;
    }
    return d;
}

static const int32_t prompt[16] = {3, 17, 42, 5, 63, 0, 8, 21, 33, 9, 50, 12, 7, 61, 2, 40};

// ---- config ----

TEST(test_config_defaults_and_softcap)
{
    struct spec s = spec_default();
    s.omit_softcap = 1;
    struct gl_model *m = NULL;
    struct gl_err err;
    REQUIRE(try_load(write_model(&s, "nosoftcap.gguf"), &m, 1, &err) == GL_OK);
    CHECK(m->cfg.softcap == 20.0f); // the architecture's value, not llama.cpp's 30
    CHECK(m->cfg.post_eps == 1e-8f);
    CHECK(m->cfg.n_vocab == T_V && m->cfg.n_layer == 4 && m->cfg.head_dim == T_D);
    CHECK(m->cfg.rope_base_swa == 10000.0f); // freq_base_swa defaults to freq_base
    CHECK(m->cfg.window == 4);
    gl_model_delete(m);

    s = spec_default();
    s.softcap = 0.0f;
    REQUIRE(try_load(write_model(&s, "softcap0.gguf"), &m, 1, &err) == GL_OK);
    CHECK(m->cfg.softcap == 0.0f);
    // Disabled cap: logits may exceed any cap (scale 0.5 on random weights); just check that
    // a capped copy of the same model clamps below 20 while the uncapped one is not tanh-shaped.
    float *a = run_logits(m, prompt, 8, 8);
    gl_model_delete(m);
    s.softcap = 1.0f;
    REQUIRE(try_load(write_model(&s, "softcap1.gguf"), &m, 1, &err) == GL_OK);
    float *b = run_logits(m, prompt, 8, 8);
    int ok = 1;
    for (int i = 0; i < 8 * T_V; i++)
        if (fabsf(b[i] - tanhf(a[i])) > 1e-5f)
            ok = 0;
    CHECK(ok); // cap 1: z' = tanh(z)
    free(a);
    free(b);
    gl_model_delete(m);

    s = spec_default();
    s.window = 0;
    REQUIRE(try_load(write_model(&s, "window0.gguf"), &m, 1, &err) == GL_OK);
    CHECK(m->cfg.window == 0);
    gl_model_delete(m);
}

TEST(test_config_pattern_forms)
{
    struct spec s = spec_default();
    struct gl_model *m = NULL;
    struct gl_err err;
    s.n_layer = 6;
    s.pattern_mode = 0; // bool array: (i % 4) != 3 sliding
    REQUIRE(try_load(write_model(&s, "pat_bool.gguf"), &m, 1, &err) == GL_OK);
    const uint8_t want_bool[6] = {1, 1, 1, 0, 1, 1};
    CHECK(memcmp(m->cfg.swa, want_bool, 6) == 0);
    gl_model_delete(m);

    s.pattern_mode = 1;
    s.period = 3; // full iff i % 3 == 2
    REQUIRE(try_load(write_model(&s, "pat_period.gguf"), &m, 1, &err) == GL_OK);
    const uint8_t want_period[6] = {1, 1, 0, 1, 1, 0};
    CHECK(memcmp(m->cfg.swa, want_period, 6) == 0);
    gl_model_delete(m);

    s.pattern_mode = 2; // absent: HF rule from the last layer, full iff (5 - i) % 4 == 0
    REQUIRE(try_load(write_model(&s, "pat_absent.gguf"), &m, 1, &err) == GL_OK);
    const uint8_t want_absent[6] = {1, 0, 1, 1, 1, 0};
    CHECK(memcmp(m->cfg.swa, want_absent, 6) == 0);
    gl_model_delete(m);

    s.pattern_mode = 0;
    s.bool_len = 5; // wrong length
    CHECK(try_load(write_model(&s, "pat_short.gguf"), &m, 1, &err) == GL_E_FORMAT);
    CHECK(strstr(err.msg, "sliding_window_pattern") != NULL);
    CHECK(m == NULL);
}

TEST(test_config_refusals)
{
    struct spec s = spec_default();
    struct gl_model *m = NULL;
    struct gl_err err;
    s.arch = "llama";
    CHECK(try_load(write_model(&s, "llama.gguf"), &m, 1, &err) == GL_E_UNSUPPORTED);
    CHECKF(strstr(err.msg, "\"llama\"") != NULL, "%s", err.msg);

    s = spec_default();
    s.odd_type_tensor = "blk.1.ffn_up.weight";
    CHECK(try_load(write_model(&s, "q4_1.gguf"), &m, 1, &err) == GL_E_UNSUPPORTED);
    CHECKF(strstr(err.msg, "blk.1.ffn_up.weight") && strstr(err.msg, "Q4_1"), "%s", err.msg);

    s = spec_default();
    s.bad_shape_tensor = "blk.2.attn_k.weight";
    CHECK(try_load(write_model(&s, "shape.gguf"), &m, 1, &err) == GL_E_FORMAT);
    CHECKF(strstr(err.msg, "blk.2.attn_k.weight") && strstr(err.msg, "[64, 33") &&
               strstr(err.msg, "expected [64, 32]"),
           "%s", err.msg);

    s = spec_default();
    s.n_layer = 3; // file says 3 layers ...
    const char *p = write_model(&s, "three.gguf");
    // ... which loads; an extra unknown key only warns.
    CHECK(try_load(p, &m, 1, &err) == GL_OK);
    gl_model_delete(m);
    s.extra_key = 1;
    CHECK(try_load(write_model(&s, "extra.gguf"), &m, 1, &err) == GL_OK);
    gl_model_delete(m);
}

// ---- forward properties ----

static struct gl_model *load_default(const char *fname, int window)
{
    struct spec s = spec_default();
    s.window = window;
    struct gl_model *m = NULL;
    struct gl_err err;
    GL_ASSERT_MSG(try_load(write_model(&s, fname), &m, 1, &err) == GL_OK, "%s", err.msg);
    return m;
}

TEST(test_determinism_and_chunking)
{
    struct gl_model *m = load_default("base.gguf", 4);
    float *a = run_logits(m, prompt, 16, 16);
    float *b = run_logits(m, prompt, 16, 16);
    CHECK(memcmp(a, b, 16 * T_V * sizeof(float)) == 0);
    for (int batch = 1; batch <= 7; batch += 3) {
        float *c = run_logits(m, prompt, 16, batch);
        double d = max_abs_diff(a, c, 16 * T_V);
        CHECKF(d <= 1e-5, "batch %d: max diff %g", batch, d);
        free(c);
    }
    free(a);
    free(b);
    gl_model_delete(m);
}

TEST(test_prefill_then_decode)
{
    struct gl_model *m = load_default("base.gguf", 4);
    float *full = run_logits(m, prompt, 16, 16);
    struct gl_model_ctx *c = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, m, 8, 2, 32, &err) == GL_OK);
    REQUIRE(gl_kv_cache_new(&kv, &m->cfg, 32, &err) == GL_OK);
    float lg[T_V];
    REQUIRE(gl_model_forward(c, kv, prompt, 5, 0, lg, 0, NULL, &err) == GL_OK);
    double worst = max_abs_diff(lg, full + 4 * T_V, T_V);
    for (int p = 5; p < 16; p++) {
        REQUIRE(gl_model_forward(c, kv, &prompt[p], 1, p, lg, 0, NULL, &err) == GL_OK);
        double d = max_abs_diff(lg, full + p * T_V, T_V);
        worst = d > worst ? d : worst;
    }
    CHECKF(worst <= 1e-5, "decode vs teacher-forced: %g", worst);
    // Misuse is refused, not crashed on.
    int32_t bad = T_V;
    CHECK(gl_model_forward(c, kv, &bad, 1, 16, lg, 0, NULL, &err) == GL_E_INVAL);
    CHECK(gl_model_forward(c, kv, prompt, 1, 3, lg, 0, NULL, &err) == GL_E_INVAL);
    int32_t many[20] = {0};
    CHECK(gl_model_forward(c, kv, many, 20, 16, lg, 0, NULL, &err) == GL_E_LIMIT);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(c);
    free(full);
    gl_model_delete(m);
}

TEST(test_sliding_window_masks)
{
    struct gl_model *mw = load_default("win4.gguf", 4);
    struct gl_model *m0 = load_default("win0.gguf", 0);
    float *a = run_logits(mw, prompt, 12, 12);
    float *b = run_logits(m0, prompt, 12, 12);
    // Positions 0..3 see at most 4 keys: identical. From position 4 on the window drops keys.
    double early = max_abs_diff(a, b, 4 * T_V);
    double late = max_abs_diff(a + 4 * T_V, b + 4 * T_V, 8 * T_V);
    CHECKF(early <= 1e-6, "positions < window differ: %g", early);
    CHECKF(late > 1e-3, "window did not mask: %g", late);
    free(a);
    free(b);
    gl_model_delete(mw);
    gl_model_delete(m0);
}

TEST(test_keep_quant_vs_f32)
{
    struct spec s = spec_default();
    s.wtype = GL_TYPE_Q8_0;
    const char *p = write_model(&s, "q8.gguf");
    struct gl_model *mq = NULL, *mf = NULL;
    struct gl_err err;
    REQUIRE(try_load(p, &mq, 1, &err) == GL_OK);
    REQUIRE(try_load(p, &mf, 0, &err) == GL_OK);
    CHECK(mq->layers[0].ffn_up.type == GL_TYPE_Q8_0 && mq->output.type == GL_TYPE_Q8_0);
    CHECK(mf->layers[0].ffn_up.type == GL_TYPE_F32 && mf->tok_embd.type == GL_TYPE_F32);
    float *a = run_logits(mq, prompt, 16, 16);
    float *b = run_logits(mf, prompt, 16, 16);
    double d = max_abs_diff(a, b, 16 * T_V), mag = 0.0;
    for (int i = 0; i < 16 * T_V; i++)
        mag = fabs((double)b[i]) > mag ? fabs((double)b[i]) : mag;
    // Q8_0 activations cost ~0.4% per matmul; through 4 layers a few % of the logit range.
    CHECKF(d < 0.05 * mag && d > 0.0, "quantized vs f32: max diff %g (max |logit| %g)", d, mag);
    free(a);
    free(b);
    gl_model_delete(mq);
    gl_model_delete(mf);
}

// gl_model_params.progress: once per layer, in order, ending at n_layer.
struct progress_log {
    int calls, last, total, in_order;
};
static void log_progress(void *user, int done, int total)
{
    struct progress_log *l = user;
    l->in_order &= done == l->last + 1;
    l->calls++;
    l->last = done;
    l->total = total;
}

TEST(test_load_progress)
{
    struct spec s = spec_default();
    const char *p = write_model(&s, "progress.gguf");
    struct progress_log log = {.in_order = 1};
    struct gl_model_params mp = gl_model_default_params();
    mp.progress = log_progress;
    mp.progress_user = &log;
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_model_open(&m, p, &mp, &err) == GL_OK);
    CHECKF(log.calls == m->cfg.n_layer && log.in_order && log.last == log.total &&
               log.total == m->cfg.n_layer,
           "progress: %d calls, last %d of %d, in order %d", log.calls, log.last, log.total,
           log.in_order);
    gl_model_delete(m);
}

// ---- naive reference: straight from arch doc §2, doubles, no caches, no batching ----

static const float *tdata(const struct gl_model *m, const char *name)
{
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(m->gguf, name);
    GL_ASSERT(t && t->type == GL_TYPE_F32);
    return t->data;
}

static void ref_rms(double *x, int n, const float *w, double eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        x[i] = x[i] * s * (w ? (double)w[i] : 1.0);
}

// y[o] = sum_i W[o][i] x[i], W stored row per output (ne = [n_in, n_out]).
static void ref_mv(double *y, const float *W, const double *x, int n_in, int n_out)
{
    for (int o = 0; o < n_out; o++) {
        double s = 0.0;
        for (int i = 0; i < n_in; i++)
            s += (double)W[(size_t)o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void ref_forward(const struct gl_model *m, const int32_t *ids, int n, double *logits)
{
    const struct gl_model_config *c = &m->cfg;
    enum { N = 16, HD = T_H * T_D, KD = T_HKV * T_D };
    static double h[N][T_E], q[N][HD], k[N][KD], v[N][KD], g[N][HD];
    GL_ASSERT(n <= N);
    const float *emb = tdata(m, "token_embd.weight");
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < T_E; i++)
            h[t][i] = emb[(size_t)ids[t] * T_E + i];
        ref_rms(h[t], T_E, NULL, 1e-5);
    }
    char nm[64];
#define TW(suf) (snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l), tdata(m, nm))
    for (int l = 0; l < c->n_layer; l++) {
        const int swa = c->swa[l];
        for (int t = 0; t < n; t++) {
            double x[T_E];
            memcpy(x, h[t], sizeof x);
            ref_rms(x, T_E, TW("attn_norm"), 1e-5);
            snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", l);
            if (gl_gguf_find_tensor(m->gguf, nm)) { // fused rows [q | k | v]
                const float *f = tdata(m, nm);
                ref_mv(q[t], f, x, T_E, HD);
                ref_mv(k[t], f + (size_t)HD * T_E, x, T_E, KD);
                ref_mv(v[t], f + (size_t)(HD + KD) * T_E, x, T_E, KD);
            } else {
                ref_mv(q[t], TW("attn_q"), x, T_E, HD);
                ref_mv(k[t], TW("attn_k"), x, T_E, KD);
                ref_mv(v[t], TW("attn_v"), x, T_E, KD);
            }
            ref_mv(g[t], TW("attn_gate"), x, T_E, HD);
            for (int hh = 0; hh < T_H; hh++)
                ref_rms(q[t] + hh * T_D, T_D, TW("attn_q_norm"), 1e-5);
            for (int hh = 0; hh < T_HKV; hh++)
                ref_rms(k[t] + hh * T_D, T_D, TW("attn_k_norm"), 1e-5);
            if (swa) { // interleaved pairs, theta^(-2j/D), position t
                for (int hh = 0; hh < T_H + T_HKV; hh++) {
                    double *vec = hh < T_H ? q[t] + hh * T_D : k[t] + (hh - T_H) * T_D;
                    for (int j = 0; j < T_D / 2; j++) {
                        double a = t * pow(10000.0, -2.0 * j / T_D);
                        double x0 = vec[2 * j], x1 = vec[2 * j + 1];
                        vec[2 * j] = x0 * cos(a) - x1 * sin(a);
                        vec[2 * j + 1] = x0 * sin(a) + x1 * cos(a);
                    }
                }
            }
        }
        for (int t = 0; t < n; t++) {
            double o[HD], a[T_E];
            for (int hh = 0; hh < T_H; hh++) {
                int kh = hh / (T_H / T_HKV);
                double sc[N], mx = -1e300, sum = 0.0;
                for (int s2 = 0; s2 < n; s2++) {
                    int visible = s2 <= t && !(swa && c->window > 0 && t - s2 >= c->window);
                    sc[s2] = -HUGE_VAL;
                    if (!visible)
                        continue;
                    double d = 0.0;
                    for (int i = 0; i < T_D; i++)
                        d += q[t][hh * T_D + i] * k[s2][kh * T_D + i];
                    sc[s2] = d / sqrt((double)T_D);
                    mx = sc[s2] > mx ? sc[s2] : mx;
                }
                for (int s2 = 0; s2 < n; s2++)
                    sum += sc[s2] == -HUGE_VAL ? 0.0 : exp(sc[s2] - mx);
                for (int i = 0; i < T_D; i++) {
                    double acc = 0.0;
                    for (int s2 = 0; s2 < n; s2++)
                        if (sc[s2] != -HUGE_VAL)
                            acc += exp(sc[s2] - mx) / sum * v[s2][kh * T_D + i];
                    o[hh * T_D + i] = acc * (1.0 / (1.0 + exp(-g[t][hh * T_D + i])));
                }
            }
            ref_mv(a, TW("attn_output"), o, HD, T_E);
            ref_rms(a, T_E, TW("post_attention_norm"), 1e-8);
            double x[T_E], gt[T_F], up[T_F], mm[T_E];
            for (int i = 0; i < T_E; i++)
                h[t][i] += a[i];
            memcpy(x, h[t], sizeof x);
            ref_rms(x, T_E, TW("ffn_norm"), 1e-5);
            ref_mv(gt, TW("ffn_gate"), x, T_E, T_F);
            ref_mv(up, TW("ffn_up"), x, T_E, T_F);
            for (int i = 0; i < T_F; i++)
                gt[i] = gt[i] / (1.0 + exp(-gt[i])) * up[i];
            ref_mv(mm, TW("ffn_down"), gt, T_F, T_E);
            ref_rms(mm, T_E, TW("post_ffw_norm"), 1e-8);
            for (int i = 0; i < T_E; i++)
                h[t][i] += mm[i];
        }
    }
#undef TW
    for (int t = 0; t < n; t++) {
        double x[T_E];
        memcpy(x, h[t], sizeof x);
        ref_rms(x, T_E, tdata(m, "output_norm.weight"), 1e-5);
        ref_mv(logits + (size_t)t * T_V, tdata(m, "output.weight"), x, T_E, T_V);
        for (int i = 0; i < T_V; i++) {
            double z = logits[(size_t)t * T_V + i] * (double)c->logit_scale;
            double cap = (double)c->softcap;
            logits[(size_t)t * T_V + i] = cap != 0.0 ? cap * tanh(z / cap) : z;
        }
    }
}

// forward.c vs the naive reference on the first n prompt tokens.
static void check_vs_naive(struct gl_model *m, int n, const char *what)
{
    static double ref[16 * T_V];
    ref_forward(m, prompt, n, ref);
    float *got = run_logits(m, prompt, n, n);
    double d = 0.0, mag = 0.0;
    for (int i = 0; i < n * T_V; i++) {
        double x = fabs(ref[i] - (double)got[i]);
        d = x > d ? x : d;
        mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
    }
    CHECKF(d <= 1e-4, "%s n=%d: max diff %g vs naive reference", what, n, d);
    CHECKF(mag > 0.5, "%s: logits all near 0", what); // the model computes something
    free(got);
}

TEST(test_naive_reference)
{
    struct gl_model *m = load_default("base.gguf", 4);
    check_vs_naive(m, 7, "separate q/k/v");
    check_vs_naive(m, 16, "separate q/k/v");
    gl_model_delete(m);
    struct spec s = spec_default();
    s.fused_qkv = 1;
    struct gl_err err;
    REQUIRE(try_load(write_model(&s, "fused.gguf"), &m, 1, &err) == GL_OK);
    CHECK(m->layers[0].k.data != m->layers[0].q.data);
    check_vs_naive(m, 16, "fused attn_qkv");
    gl_model_delete(m);
}

static int run_all(void)
{
    RUN_TESTS(test_config_defaults_and_softcap, test_config_pattern_forms, test_config_refusals,
              test_determinism_and_chunking, test_prefill_then_decode, test_sliding_window_masks,
              test_keep_quant_vs_f32, test_load_progress, test_naive_reference);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "%s/glint_test_model_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc = run_all();
    DIR *d = opendir(tmp_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[600];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(tmp_dir);
    return rc;
}
