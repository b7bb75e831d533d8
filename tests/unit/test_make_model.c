// SPDX-License-Identifier: MIT
// make_model: writes tiny models to a temp folder and re-reads them with the gguf reader: every
// key (type and value), every tensor (name, shape, type), norms bit-exact, q/k norms 3.87/1.0,
// quantized weights within a per-type error of what the generator intended, vocab strings that
// decode back to the tiktoken bytes, determinism across runs and thread counts, and the
// header-only 52-layer 30B table (731 tensors, aligned offsets, sizes from the types); the HF
// folder form (--format safetensors): the same generator values in HF layout.
#include "test.h"

#include "gguf/gguf.h"
#include "model/make_model.h"
#include "model/model.h"
#include "quant/quant.h"
#include "safetensors/safetensors.h"
#include "tokenizer/tokenizer.h"

#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static char tmp_dir[] = "/tmp/glint-test-make-model-XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

static struct gl_gguf *open_model(const char *path, int allow_no_data)
{
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    op.allow_no_data = allow_no_data;
    struct gl_gguf *g = NULL;
    struct gl_err err = {0};
    if (gl_gguf_open(&g, path, &op, &err) != GL_OK) {
        fprintf(stderr, "  open %s: %s\n", path, err.msg);
        return NULL;
    }
    return g;
}

static int64_t kv_uint(const struct gl_gguf *g, const char *key, enum gl_gguf_vtype want)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    if (!kv || kv->type != want) {
        fprintf(stderr, "  key %s: %s\n", key, kv ? "wrong type" : "missing");
        return -1;
    }
    return (int64_t)kv->v.u64;
}

static double kv_f32(const struct gl_gguf *g, const char *key)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    if (!kv || kv->type != GL_GGUF_F32) {
        fprintf(stderr, "  key %s: %s\n", key, kv ? "wrong type" : "missing");
        return -1.0;
    }
    return kv->v.f64;
}

static int kv_str_is(const struct gl_gguf *g, const char *key, const char *want)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    return kv && kv->type == GL_GGUF_STR && gl_gguf_str_eq(kv->v.str, want);
}

// Relative RMS error of a dequantized row against the intended values.
static double rel_rmse(const float *got, const float *want, int64_t n)
{
    double e = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double g = (double)got[i], w = (double)want[i];
        e += (g - w) * (g - w);
        s += w * w;
    }
    return s > 0.0 ? sqrt(e / s) : sqrt(e);
}

// Error ceiling per stored type for Gaussian rows, ~1.5x what the reference quantizers give
// (measured: Q4_K 0.078, Q6_K 0.018).
static double type_tolerance(uint32_t type)
{
    switch (type) {
    case GL_TYPE_F32:
        return 0.0;
    case GL_TYPE_F16:
        return 1e-3;
    case GL_TYPE_BF16:
        return 8e-3;
    case GL_TYPE_Q8_0:
        return 0.01;
    case GL_TYPE_Q6_K:
        return 0.03;
    case GL_TYPE_Q5_K:
        return 0.07;
    default:
        return 0.12; // Q4_0, Q4_K
    }
}

// Checks rows of tensor t against the generator: exact for F32, within tolerance otherwise.
static void check_rows(const struct gl_make_model_params *p, const struct gl_gguf_tensor *t,
                       const char *name, int64_t row0, int64_t n_rows)
{
    const int64_t ne0 = t->ne[0];
    const size_t row_size = gl_type_row_size(t->type, ne0);
    float *want = malloc((size_t)ne0 * sizeof *want), *got = malloc((size_t)ne0 * sizeof *got);
    REQUIRE(want && got && row_size > 0);
    struct gl_err err = {0};
    double worst = 0.0;
    for (int64_t r = row0; r < row0 + n_rows; r++) {
        CHECK(gl_make_model_gen_rows(p, name, r, 1, want, &err) == GL_OK);
        gl_dequantize_row_ref(t->type, (const uint8_t *)t->data + (size_t)r * row_size, got, ne0);
        double e = t->type == GL_TYPE_F32 ? (memcmp(got, want, (size_t)ne0 * 4) ? 1.0 : 0.0)
                                          : rel_rmse(got, want, ne0);
        worst = e > worst ? e : worst;
    }
    CHECKF(worst <= type_tolerance(t->type), "%s rows %lld..%lld: rel rmse %.4g > %.4g", name,
           (long long)row0, (long long)(row0 + n_rows), worst, type_tolerance(t->type));
    free(want);
    free(got);
}

// GPT-2 byte-to-unicode inverse, written independently of the writer: printable bytes stand
// for themselves, the 68 others are U+0100.. in byte order.
static int gpt2_decode(const char *s, uint64_t len, uint8_t *out, size_t cap, size_t *n_out)
{
    int back[512];
    for (int i = 0; i < 512; i++)
        back[i] = -1;
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        back[keep ? b : next++] = b;
    }
    size_t n = 0;
    for (uint64_t i = 0; i < len; n++) {
        const uint8_t c = (uint8_t)s[i];
        int cp;
        if (c < 0x80) {
            cp = c, i += 1;
        } else if ((c & 0xe0) == 0xc0 && i + 1 < len) {
            cp = ((c & 0x1f) << 6) | ((uint8_t)s[i + 1] & 0x3f), i += 2;
        } else {
            return 0;
        }
        if (cp >= 512 || back[cp] < 0 || n >= cap)
            return 0;
        out[n] = (uint8_t)back[cp];
    }
    *n_out = n;
    return 1;
}

static void check_vocab(const struct gl_gguf *g)
{
    const struct gl_gguf_kv *tokens = gl_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const struct gl_gguf_kv *types = gl_gguf_find_kv(g, "tokenizer.ggml.token_type");
    const struct gl_gguf_kv *merges = gl_gguf_find_kv(g, "tokenizer.ggml.merges");
    REQUIRE(tokens && tokens->type == GL_GGUF_ARR && tokens->v.arr.type == GL_GGUF_STR);
    REQUIRE(types && types->type == GL_GGUF_ARR && types->v.arr.type == GL_GGUF_I32);
    REQUIRE(merges && merges->type == GL_GGUF_ARR && merges->v.arr.type == GL_GGUF_STR);
    CHECK(tokens->v.arr.n == 202048 && types->v.arr.n == 202048);
    CHECK(merges->v.arr.n > 190000 && merges->v.arr.n < 200000);
    REQUIRE(tokens->v.arr.n == 202048 && types->v.arr.n == 202048);
    CHECK(gl_gguf_str_eq(tokens->v.arr.strs[200000], "<|begin_of_text|>"));
    CHECK(gl_gguf_str_eq(tokens->v.arr.strs[200008], "<|eot|>"));
    CHECK(gl_gguf_str_eq(tokens->v.arr.strs[201818], "<|reserved_special_token_1818|>"));
    int bad_types = 0;
    for (uint64_t i = 0; i < 202048; i++)
        bad_types += gl_gguf_arr_get_int(types, i) != (i < 200000 ? 1 : 3);
    CHECK(bad_types == 0);

    // Every base token string decodes back to the tiktoken bytes.
    struct gl_tokenizer *tok = NULL;
    struct gl_err err = {0};
    gl_status st;
    // Same default as the writer: $GLINT_VOCAB, else shared/ beside the repository (found from
    // this file's path, which CMake passes absolute).
    char vocab[4096];
    const char *env = getenv("GLINT_VOCAB");
    const char *slash = strrchr(__FILE__, '/');
    if (env && *env)
        snprintf(vocab, sizeof vocab, "%s", env);
    else
        snprintf(vocab, sizeof vocab, "%.*s/../../../shared/data/tokenizer/llama4-tokenizer.model",
                 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
    st = gl_tokenizer_load_tiktoken(&tok, vocab, &err);
    CHECKF(st == GL_OK, "%s", err.msg);
    REQUIRE(st == GL_OK);
    int mismatches = 0;
    for (gl_token id = 0; id < 200000; id++) {
        uint8_t buf[512];
        size_t n = 0, want_len = 0;
        const char *want = gl_tokenizer_token_bytes(tok, id, &want_len);
        struct gl_gguf_str s = tokens->v.arr.strs[id];
        if (!gpt2_decode(s.ptr, s.len, buf, sizeof buf, &n) || n != want_len ||
            memcmp(buf, want, n) != 0)
            mismatches++;
    }
    CHECKF(mismatches == 0, "%d token strings do not decode to their bytes", mismatches);
    // Merges: same count and order as the tokenizer's list; spot-check the strings.
    CHECK((int64_t)merges->v.arr.n == gl_tokenizer_n_merges(tok));
    for (int64_t i = 0; i < (int64_t)merges->v.arr.n; i += 9973) {
        gl_token l, r;
        gl_tokenizer_merge_at(tok, i, &l, &r);
        struct gl_gguf_str m = merges->v.arr.strs[i], sl = tokens->v.arr.strs[l],
                           sr = tokens->v.arr.strs[r];
        CHECKF(m.len == sl.len + 1 + sr.len && !memcmp(m.ptr, sl.ptr, sl.len) &&
                   m.ptr[sl.len] == ' ' && !memcmp(m.ptr + sl.len + 1, sr.ptr, sr.len),
               "merge %lld", (long long)i);
    }
    gl_tokenizer_free(tok);
}

static const char *const layer_roles[14] = {"attn_norm",   "attn_q",        "attn_k",
                                            "attn_v",      "attn_gate",     "attn_output",
                                            "attn_q_norm", "attn_k_norm",   "post_attention_norm",
                                            "ffn_norm",    "post_ffw_norm", "ffn_gate",
                                            "ffn_up",      "ffn_down"};

struct want_tensor {
    const char *name;
    int64_t ne0, ne1;
    uint32_t type;
};

// Tiny, 2 layers, Q4_K_M: keys, tensors, values.
TEST(test_tiny_q4_k_m)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    p.type = "Q4_K_M";
    p.n_layers = 2;
    p.seed = 7;
    struct gl_err err = {0};
    const char *path = tmp_path("tiny-q4km.gguf");
    gl_status st = gl_make_model_write(&p, path, &err);
    CHECKF(st == GL_OK, "%s", err.msg);
    REQUIRE(st == GL_OK);
    struct gl_gguf *g = open_model(path, 0);
    REQUIRE(g);

    CHECK(kv_str_is(g, "general.architecture", "muse-glimmer"));
    CHECK(kv_str_is(g, "general.name",
                    "Muse-Glimmer tiny (random weights, glint make-model seed 7)"));
    CHECK(kv_uint(g, "general.file_type", GL_GGUF_U32) == 15);
    CHECK(kv_uint(g, "general.quantization_version", GL_GGUF_U32) == 2);
    CHECK(kv_uint(g, "general.alignment", GL_GGUF_U32) == 32);
    CHECK(kv_uint(g, "muse-glimmer.context_length", GL_GGUF_U32) == 4096);
    CHECK(kv_uint(g, "muse-glimmer.embedding_length", GL_GGUF_U32) == 256);
    CHECK(kv_uint(g, "muse-glimmer.block_count", GL_GGUF_U32) == 2);
    CHECK(kv_uint(g, "muse-glimmer.feed_forward_length", GL_GGUF_U32) == 512);
    CHECK(kv_uint(g, "muse-glimmer.attention.head_count", GL_GGUF_U32) == 32);
    CHECK(kv_uint(g, "muse-glimmer.attention.head_count_kv", GL_GGUF_U32) == 2);
    CHECK(kv_uint(g, "muse-glimmer.attention.key_length", GL_GGUF_U32) == 16);
    CHECK(kv_uint(g, "muse-glimmer.attention.value_length", GL_GGUF_U32) == 16);
    CHECK(kv_uint(g, "muse-glimmer.attention.sliding_window", GL_GGUF_U32) == 8);
    CHECK(kv_f32(g, "muse-glimmer.attention.layer_norm_rms_epsilon") == (double)1e-5f);
    CHECK(kv_f32(g, "muse-glimmer.rope.freq_base") == 500000.0);
    CHECK(kv_f32(g, "muse-glimmer.final_logit_softcapping") == 20.0);
    CHECK(kv_f32(g, "muse-glimmer.logit_scale") == (double)0.19611613513818404f);
    const struct gl_gguf_kv *pat =
        gl_gguf_find_kv(g, "muse-glimmer.attention.sliding_window_pattern");
    CHECK(pat && pat->type == GL_GGUF_ARR && pat->v.arr.type == GL_GGUF_BOOL && pat->v.arr.n == 2);
    if (pat && pat->type == GL_GGUF_ARR && pat->v.arr.n == 2) // 2 layers: layer 1 full, 0 sliding
        CHECK(gl_gguf_arr_get_int(pat, 0) == 1 && gl_gguf_arr_get_int(pat, 1) == 0);
    CHECK(kv_str_is(g, "tokenizer.ggml.model", "gpt2"));
    CHECK(kv_str_is(g, "tokenizer.ggml.pre", "llama4"));
    CHECK(kv_uint(g, "tokenizer.ggml.bos_token_id", GL_GGUF_U32) == 200000);
    CHECK(kv_uint(g, "tokenizer.ggml.eos_token_id", GL_GGUF_U32) == 200001);
    CHECK(kv_uint(g, "tokenizer.ggml.eot_token_id", GL_GGUF_U32) == 200008);
    CHECK(kv_uint(g, "tokenizer.ggml.padding_token_id", GL_GGUF_U32) == 200018);
    CHECK(kv_uint(g, "tokenizer.ggml.add_bos_token", GL_GGUF_BOOL) == 1);
    const struct gl_gguf_kv *tmpl = gl_gguf_find_kv(g, "tokenizer.chat_template");
    CHECK(tmpl && tmpl->type == GL_GGUF_STR && tmpl->v.str.len == 9992);
    check_vocab(g);

    CHECK(gl_gguf_n_tensors(g) == 3 + 14 * 2);
    struct want_tensor want[3 + 14 * 2] = {
        {"token_embd.weight", 256, 202048, GL_TYPE_Q4_K},
        {"output_norm.weight", 256, 1, GL_TYPE_F32},
        {"output.weight", 256, 202048, GL_TYPE_Q6_K},
    };
    int n = 3;
    static char names[28][48];
    for (int l = 0; l < 2; l++) {
        // use_more_bits(l, 2): layer 1 (>= 7n/8) gets Q6_K attn_v / ffn_down, layer 0 Q4_K.
        const uint32_t more = l == 1 ? GL_TYPE_Q6_K : GL_TYPE_Q4_K;
        const int64_t ne[14][2] = {{256, 1},   {256, 512}, {256, 32},  {256, 32}, {256, 512},
                                   {512, 256}, {16, 1},    {16, 1},    {256, 1},  {256, 1},
                                   {256, 1},   {256, 512}, {256, 512}, {512, 256}};
        for (int r = 0; r < 14; r++) {
            char *nm = names[l * 14 + r];
            snprintf(nm, 48, "blk.%d.%s.weight", l, layer_roles[r]);
            uint32_t type = ne[r][1] == 1 ? GL_TYPE_F32 : GL_TYPE_Q4_K;
            if (r == 3 || r == 13)
                type = more;
            want[n].name = nm, want[n].ne0 = ne[r][0], want[n].ne1 = ne[r][1];
            want[n++].type = type;
        }
    }
    for (int i = 0; i < n; i++) {
        const struct gl_gguf_tensor *t = gl_gguf_find_tensor(g, want[i].name);
        CHECKF(t, "missing tensor %s", want[i].name);
        if (!t)
            continue;
        CHECKF(t->n_dims == (want[i].ne1 == 1 ? 1u : 2u) && t->ne[0] == want[i].ne0 &&
                   t->ne[1] == want[i].ne1 && t->type == want[i].type,
               "%s: dims %u ne [%lld, %lld] type %u", want[i].name, t->n_dims, (long long)t->ne[0],
               (long long)t->ne[1], t->type);
        CHECK(gl_make_model_tensor_type(&p, want[i].name) == (int)want[i].type);
        int64_t rows = t->ne[1];
        if (rows > 64) { // big tables: first, middle and last rows
            check_rows(&p, t, want[i].name, 0, 8);
            check_rows(&p, t, want[i].name, rows / 2, 8);
            check_rows(&p, t, want[i].name, rows - 8, 8);
        } else {
            check_rows(&p, t, want[i].name, 0, rows);
        }
    }
    // Synthesised QK-norm weights and the "1 + noise" norms.
    const struct gl_gguf_tensor *qn = gl_gguf_find_tensor(g, "blk.1.attn_q_norm.weight");
    const struct gl_gguf_tensor *kn = gl_gguf_find_tensor(g, "blk.1.attn_k_norm.weight");
    const struct gl_gguf_tensor *an = gl_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    REQUIRE(qn && kn && an);
    for (int i = 0; i < 16; i++)
        CHECK(((const float *)qn->data)[i] == 3.87f && ((const float *)kn->data)[i] == 1.0f);
    double mean = 0.0, var = 0.0;
    const float *norm = an->data;
    for (int i = 0; i < 256; i++)
        mean += (double)norm[i] / 256.0;
    for (int i = 0; i < 256; i++)
        var += ((double)norm[i] - mean) * ((double)norm[i] - mean) / 256.0;
    CHECKF(fabs(mean - 1.0) < 0.02 && sqrt(var) > 0.01 && sqrt(var) < 0.2, "norm mean %g sd %g",
           mean, sqrt(var));
    gl_gguf_close(g);
}

static int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    static char ba[1 << 16], bb[1 << 16];
    while (eq) {
        size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
        eq = na == nb && !memcmp(ba, bb, na);
        if (na == 0)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return eq;
}

// Same seed -> same bytes (also with a different thread count); another seed -> other weights.
TEST(test_determinism)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    p.type = "Q8_0";
    p.n_layers = 1;
    p.seed = 3;
    struct gl_err err = {0};
    const char *a = tmp_path("det-a.gguf"), *b = tmp_path("det-b.gguf"),
               *c = tmp_path("det-c.gguf");
    p.n_threads = 1;
    REQUIRE(gl_make_model_write(&p, a, &err) == GL_OK);
    p.n_threads = 2;
    REQUIRE(gl_make_model_write(&p, b, &err) == GL_OK);
    CHECK(files_equal(a, b));
    p.seed = 4;
    REQUIRE(gl_make_model_write(&p, c, &err) == GL_OK);
    CHECK(!files_equal(a, c));
    float r3[256], r4[256];
    p.seed = 3;
    REQUIRE(gl_make_model_gen_rows(&p, "blk.0.ffn_up.weight", 5, 1, r3, &err) == GL_OK);
    p.seed = 4;
    REQUIRE(gl_make_model_gen_rows(&p, "blk.0.ffn_up.weight", 5, 1, r4, &err) == GL_OK);
    int same = 0;
    for (int i = 0; i < 256; i++)
        same += r3[i] == r4[i];
    CHECK(same < 8);
    unlink(a);
    unlink(b);
    unlink(c);
}

// Generator statistics: projection rows ~ N(0, 1/fan_in), embeddings ~ N(0, 1).
TEST(test_weight_statistics)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    struct gl_err err = {0};
    static float rows[64 * 256];
    REQUIRE(gl_make_model_gen_rows(&p, "blk.0.attn_q.weight", 0, 64, rows, &err) == GL_OK);
    double s = 0.0, s2 = 0.0;
    for (int i = 0; i < 64 * 256; i++)
        s += (double)rows[i], s2 += (double)rows[i] * (double)rows[i];
    double mean = s / (64 * 256), sd = sqrt(s2 / (64 * 256) - mean * mean);
    CHECKF(fabs(mean) < 0.005 && fabs(sd - 1.0 / 16.0) < 0.002, "attn_q mean %g sd %g", mean, sd);
    REQUIRE(gl_make_model_gen_rows(&p, "token_embd.weight", 202040, 8, rows, &err) == GL_OK);
    CHECK(gl_make_model_gen_rows(&p, "token_embd.weight", 202041, 8, rows, &err) == GL_E_INVAL);
    CHECK(gl_make_model_gen_rows(&p, "blk.4.attn_q.weight", 0, 1, rows, &err) == GL_E_INVAL);
}

// Options: period pattern, soft-cap 0 and omitted, window, layer count, type errors.
TEST(test_options)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    struct gl_err err = {0};
    struct gl_make_model_hparams hp;
    p.type = "q5_k_m";
    CHECK(gl_make_model_hparams(&p, &hp, &err) == GL_OK && hp.file_type == 17);
    p.type = "Q3_K";
    CHECK(gl_make_model_hparams(&p, &hp, &err) == GL_E_INVAL && strstr(err.msg, "Q3_K"));
    p.type = "BF16";
    p.n_layers = 5;
    p.window = 3;
    p.pattern_period = 1;
    p.softcap = 0.0f;
    p.header_only = 1;
    const char *path = tmp_path("opts.gguf");
    REQUIRE(gl_make_model_write(&p, path, &err) == GL_OK);
    struct gl_gguf *g = open_model(path, 1);
    REQUIRE(g);
    CHECK(kv_uint(g, "general.file_type", GL_GGUF_U32) == 32);
    CHECK(kv_uint(g, "muse-glimmer.block_count", GL_GGUF_U32) == 5);
    CHECK(kv_uint(g, "muse-glimmer.attention.sliding_window", GL_GGUF_U32) == 3);
    CHECK(kv_uint(g, "muse-glimmer.attention.sliding_window_pattern", GL_GGUF_U32) == 4);
    CHECK(kv_f32(g, "muse-glimmer.final_logit_softcapping") == 0.0);
    CHECK(gl_gguf_find_tensor(g, "blk.4.ffn_down.weight")->type == GL_TYPE_BF16);
    gl_gguf_close(g);

    p.softcap_mode = GL_MAKE_MODEL_SOFTCAP_OMIT;
    p.pattern_period = 0;
    REQUIRE(gl_make_model_write(&p, path, &err) == GL_OK);
    g = open_model(path, 1);
    REQUIRE(g);
    CHECK(gl_gguf_find_kv(g, "muse-glimmer.final_logit_softcapping") == NULL);
    const struct gl_gguf_kv *pat =
        gl_gguf_find_kv(g, "muse-glimmer.attention.sliding_window_pattern");
    REQUIRE(pat && pat->type == GL_GGUF_ARR && pat->v.arr.n == 5);
    // 5 layers, counted from the last: full at 4 and 0.
    const int want[5] = {0, 1, 1, 1, 0};
    for (int i = 0; i < 5; i++)
        CHECK(gl_gguf_arr_get_int(pat, (uint64_t)i) == want[i]);
    gl_gguf_close(g);
    unlink(path);

    p.vocab_only = 1;
    REQUIRE(gl_make_model_write(&p, path, &err) == GL_OK);
    g = open_model(path, 0);
    REQUIRE(g);
    CHECK(gl_gguf_n_tensors(g) == 0 && gl_gguf_find_kv(g, "tokenizer.ggml.merges") != NULL);
    gl_gguf_close(g);
    unlink(path);

    p.vocab_path = "/nonexistent/vocab.model";
    CHECK(gl_make_model_write(&p, path, &err) == GL_E_IO && strstr(err.msg, "/nonexistent/vocab"));
}

// The real 30B config, header only: 731 tensors, types of the Q4_K_M mix, aligned offsets.
TEST(test_header_only_30b)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    p.preset = GL_MAKE_MODEL_30B_SHAPE;
    p.type = "Q4_K_M";
    p.header_only = 1;
    struct gl_err err = {0};
    const char *path = tmp_path("30b-header.gguf");
    REQUIRE(gl_make_model_write(&p, path, &err) == GL_OK);
    struct gl_gguf *g = open_model(path, 1);
    REQUIRE(g);
    CHECK(gl_gguf_n_tensors(g) == 731);
    CHECK(kv_uint(g, "muse-glimmer.block_count", GL_GGUF_U32) == 52);
    CHECK(kv_uint(g, "muse-glimmer.context_length", GL_GGUF_U32) == 131072);
    CHECK(kv_uint(g, "muse-glimmer.attention.sliding_window", GL_GGUF_U32) == 2048);
    uint64_t end = 0, q6 = 0;
    for (int64_t i = 0; i < gl_gguf_n_tensors(g); i++) {
        const struct gl_gguf_tensor *t = gl_gguf_tensor_at(g, i);
        CHECK(t->offset % 32 == 0 && t->offset >= end);
        CHECK(t->n_bytes == gl_type_row_size(t->type, t->ne[0]) * (uint64_t)t->ne[1]);
        end = t->offset + t->n_bytes;
        q6 += t->type == GL_TYPE_Q6_K;
    }
    // Q6_K: output + attn_v and ffn_down on the 26 use_more_bits layers of 52.
    CHECK(q6 == 1 + 2 * 26);
    CHECK(gl_gguf_find_tensor(g, "blk.51.ffn_down.weight")->ne[0] == 19968);
    CHECK(gl_gguf_find_tensor(g, "output.weight")->ne[1] == 202048);
    // ~16.9 GB of data declared, a few MB on disk.
    CHECK(end > 16000000000ull && gl_gguf_file_size(g) < 20000000ull);
    gl_gguf_close(g);
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    g = NULL;
    CHECK(gl_gguf_open(&g, path, &op, &err) != GL_OK); // data missing: refused by default
    gl_gguf_close(g);
    unlink(path);

    // 30b-shape rows are drawn from the bank of 256-element units: N(0, 0.02), rows distinct.
    static float rows[4 * 6656];
    REQUIRE(gl_make_model_gen_rows(&p, "blk.0.attn_k.weight", 0, 4, rows, &err) == GL_OK);
    double s = 0.0, s2 = 0.0;
    for (int i = 0; i < 4 * 6656; i++)
        s += (double)rows[i], s2 += (double)rows[i] * (double)rows[i];
    double mean = s / (4 * 6656), sd = sqrt(s2 / (4 * 6656) - mean * mean);
    CHECKF(fabs(mean) < 0.001 && fabs(sd - 0.02) < 0.001, "30b attn_k mean %g sd %g", mean, sd);
    CHECK(memcmp(rows, rows + 6656, 6656 * sizeof(float)) != 0);
}

// --format safetensors, tiny BF16, 2 layers, sharded: every text tensor under its HF name and
// shape, no QK-norm tensors, the scaled vision tower under its §6.6 names; values = the generator's
// in HF layout: Q/K rows in rotate-half order (HF row h*D + t*D/2 + j = generator row h*D + 2j +
// t), centered norms w - 1 exactly (F32), the final norm as generated, and 2-D weights rounded to
// BF16 as the GGUF writer rounds them.
TEST(test_safetensors_folder)
{
    struct gl_make_model_params p = gl_make_model_default_params();
    p.format = GL_MAKE_MODEL_SAFETENSORS;
    p.type = "BF16";
    p.n_layers = 2;
    p.shard_bytes = 32u << 20;
    const char *dir = tmp_path("hf");
    struct gl_err err = {0};
    REQUIRE(gl_make_model_write(&p, dir, &err) == GL_OK);
    struct gl_safetensors *s = NULL;
    REQUIRE(gl_safetensors_open_dir(&s, dir, &err) == GL_OK);
    // Text: 3 + 12 per layer; vision (tiny: 2 layers): 9 + 16 per layer.
    CHECK(gl_safetensors_n_tensors(s) == 3 + 12 * 2 + 9 + 16 * 2 && gl_safetensors_n_shards(s) > 1);
    const struct gl_safetensors_tensor *pe =
        gl_safetensors_find(s, "model.vision_tower.patch_embedder.patch_embedding.weight");
    const struct gl_safetensors_tensor *vp =
        gl_safetensors_find(s, "model.vision_projection.weight");
    CHECK(pe && pe->ndim == 2 && pe->shape[0] == 64 && pe->shape[1] == 1176);
    CHECK(vp && vp->ndim == 2 && vp->shape[0] == 256 && vp->shape[1] == 128);
    const int64_t D = 16, E = 256;
    const struct gl_safetensors_tensor *q =
        gl_safetensors_find(s, "model.language_model.layers.1.self_attn.q_proj.weight");
    REQUIRE(q && q->dtype == GL_SAFETENSORS_DTYPE_BF16 && q->ndim == 2 && q->shape[0] == 32 * D &&
            q->shape[1] == E);
    float *row = malloc((size_t)E * sizeof(float));
    REQUIRE(row);
    for (int64_t r = 0; r < q->shape[0]; r += 37) {
        const int64_t h = r / D, i = r % D, src = h * D + 2 * (i % (D / 2)) + i / (D / 2);
        REQUIRE(gl_make_model_gen_rows(&p, "blk.1.attn_q.weight", src, 1, row, &err) == GL_OK);
        uint16_t b[256];
        memcpy(b, (const uint8_t *)q->data + (size_t)r * E * 2, sizeof b);
        int same = 1;
        for (int64_t k = 0; k < E; k++)
            same &= b[k] == gl_f32_to_bf16(row[k]);
        CHECKF(same, "q_proj row %lld", (long long)r);
    }
    const struct gl_safetensors_tensor *n =
        gl_safetensors_find(s, "model.language_model.layers.0.pre_feedforward_layernorm.weight");
    const struct gl_safetensors_tensor *fn =
        gl_safetensors_find(s, "model.language_model.norm.weight");
    REQUIRE(n && fn && n->dtype == GL_SAFETENSORS_DTYPE_F32 && n->ndim == 1 && n->shape[0] == E);
    REQUIRE(gl_make_model_gen_rows(&p, "blk.0.ffn_norm.weight", 0, 1, row, &err) == GL_OK);
    float v[256];
    memcpy(v, n->data, sizeof v);
    for (int k = 0; k < E; k++)
        CHECK(v[k] == row[k] - 1.0f && v[k] + 1.0f == row[k]);
    REQUIRE(gl_make_model_gen_rows(&p, "output_norm.weight", 0, 1, row, &err) == GL_OK);
    CHECK(memcmp(fn->data, row, (size_t)E * sizeof(float)) == 0);
    CHECK(!gl_safetensors_find(s, "model.language_model.layers.0.self_attn.q_norm.weight"));
    gl_safetensors_close(s);
    // gl_model_open binds the tower of this sharded BF16 folder (config and every shape) and it
    // encodes a 2 x 2 patch grid into one row of n_embd.
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    REQUIRE(gl_model_open(&m, dir, &mp, &err) == GL_OK);
    const struct gl_vision_config *vc = gl_model_vision_config(m);
    CHECK(vc && vc->hidden == 64 && vc->n_layers == 2 && vc->n_heads == 4 && vc->pos_h == 4 &&
          vc->adapter == 128 && vc->out_dim == E && gl_model_vision(m) &&
          gl_model_vision(m)->patch.type == GL_TYPE_BF16);
    float *patches = malloc(4 * 1176 * sizeof(float)), out[256] = {0};
    struct gl_pool *pool = gl_pool_new(1);
    REQUIRE(patches && pool);
    for (int i = 0; i < 4 * 1176; i++)
        patches[i] = (float)(i % 7) * 0.1f - 0.3f;
    if (vc)
        CHECK(gl_vision_encode(pool, vc, gl_model_vision(m), patches, 2, 2, out, &err) == GL_OK);
    int finite = 1;
    for (int k = 0; k < E; k++)
        finite &= out[k] == out[k] && fabsf(out[k]) < 100.0f;
    CHECK(finite);
    gl_pool_delete(pool);
    free(patches);
    gl_model_delete(m);
    free(row);
    // Quantized types have no safetensors form.
    p.type = "Q4_K";
    CHECK(gl_make_model_write(&p, tmp_path("hf-q4"), &err) == GL_E_INVAL);
    DIR *d = opendir(dir);
    char path[600];
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static void remove_tmp_dir(void)
{
    DIR *d = opendir(tmp_dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            unlink(tmp_path(e->d_name));
    if (d)
        closedir(d);
    rmdir(tmp_dir);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    atexit(remove_tmp_dir);
    RUN_TESTS(test_weight_statistics, test_options, test_tiny_q4_k_m, test_determinism,
              test_header_only_30b, test_safetensors_folder);
}
