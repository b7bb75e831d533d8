// SPDX-License-Identifier: MIT
// kv tests: the fp8 E4M3 codec against the format's defining formula (all 256 codes, rounding
// ties, saturation), fp8 rows with their bf16 scale against a plain reference (alone and as the
// forward pass stores them in pool pages), the plan for the release shape, pool accounting under a
// pseudo-random mix of operations (audit after every one), reserve failures that change nothing,
// sliding-layer pages bounded by the window, prefix-cache hits (logits identical to a cold run, the
// sliding rule shortening or refusing a hit), and gl_model_forward_batch over three sequences equal
// to running each alone, for every KV dtype (tolerances measured, see kv_dtype_tol); hidden-state
// capture in a batch equal to the single-sequence dump. Model: written
// here with the gguf writer, 8 layers (6 sliding + 2 global: groups of 2), vocab 64, E 64, H 4, Hkv
// 2, D 16, F 96, window 8.
#include "gguf/gguf.h"
#include "kv/kv.h"
#include "model/model.h"
#include "quant/fp8.h"
#include "quant/quant.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_V = 64, T_E = 64, T_H = 4, T_HKV = 2, T_D = 16, T_F = 96, T_L = 8, T_WIN = 8 };

// ---- fp8 ----

static double e4m3_value(int c)
{
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

TEST(test_fp8_codes)
{
    int bad_dec = 0, bad_rt = 0;
    for (int c = 0; c < 256; c++) {
        float d = gl_fp8_e4m3_decode((uint8_t)c);
        if ((c & 0x7F) == 0x7F) {
            bad_dec += !isnan(d);
            bad_rt += (gl_fp8_e4m3_encode(d) & 0x7F) != 0x7F;
            continue;
        }
        bad_dec += (double)d != e4m3_value(c) || (signbit(d) != 0) != (c >> 7);
        bad_rt += gl_fp8_e4m3_encode(d) != c;
    }
    CHECKF(bad_dec == 0, "%d codes decode wrongly", bad_dec);
    CHECKF(bad_rt == 0, "%d codes do not round-trip", bad_rt);
    CHECK(gl_fp8_e4m3_decode(0x7E) == 448.0f && gl_fp8_e4m3_decode(0x38) == 1.0f);
    CHECK(gl_fp8_e4m3_decode(0x01) == 0x1p-9f && gl_fp8_e4m3_decode(0x08) == 0x1p-6f);
    // Between neighbouring codes: below the midpoint -> lower, above -> upper, exactly on it ->
    // the even code (mantissa bit 0 clear).
    int bad_round = 0;
    for (int c = 0; c < 0x7E; c++) {
        double lo = e4m3_value(c), hi = e4m3_value(c + 1), mid = (lo + hi) / 2;
        float below = nextafterf((float)mid, 0.0f), above = nextafterf((float)mid, 1e9f);
        int even = (c & 1) ? c + 1 : c;
        bad_round += gl_fp8_e4m3_encode(below) != c;
        bad_round += gl_fp8_e4m3_encode(above) != c + 1;
        bad_round += gl_fp8_e4m3_encode((float)mid) != even;
        bad_round += gl_fp8_e4m3_encode(-(float)mid) != (even | 0x80);
    }
    CHECKF(bad_round == 0, "%d rounding cases wrong", bad_round);
    // Saturation, never NaN from a finite or infinite input; tiny values flush to +-0.
    CHECK(gl_fp8_e4m3_encode(449.0f) == 0x7E && gl_fp8_e4m3_encode(464.0f) == 0x7E);
    CHECK(gl_fp8_e4m3_encode(1e30f) == 0x7E && gl_fp8_e4m3_encode(-INFINITY) == 0xFE);
    CHECK(gl_fp8_e4m3_encode(0x1p-11f) == 0x00 && gl_fp8_e4m3_encode(-0x1p-11f) == 0x80);
    CHECK(gl_fp8_e4m3_encode(0x1.8p-10f) == 0x01); // 0.75 * 2^-9 rounds up to the subnormal
    CHECK((gl_fp8_e4m3_encode(NAN) & 0x7F) == 0x7F);
}

// bf16 nearest to the f32 v (ties to even), by comparing the two bf16 neighbours in double.
static double ref_bf16(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    const uint32_t lo = b & 0xFFFF0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, sizeof flo);
    memcpy(&fhi, &hi, sizeof fhi);
    const double dlo = fabs((double)v - (double)flo), dhi = fabs((double)fhi - (double)v);
    return dlo < dhi || (dlo == dhi && !(lo & 0x10000u)) ? (double)flo : (double)fhi;
}

// The e4m3 code nearest to y by scanning every finite code; on a tie the code with mantissa bit
// 0 clear (even); beyond 448 the largest code (saturation); the sign is y's, also for results
// that round to zero.
static int ref_e4m3_code(double y)
{
    const double a = fabs(y);
    int best = 0;
    for (int c = 1; c <= 0x7E; c++) {
        const double dc = fabs(e4m3_value(c) - a), db = fabs(e4m3_value(best) - a);
        if (dc < db || (dc == db && (c & 1) == 0))
            best = c;
    }
    return signbit(y) ? best | 0x80 : best;
}

static uint64_t t_rng = 12345;
static double t_unif(void) // [0, 1)
{
    t_rng = t_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(t_rng >> 11) * 0x1.0p-53;
}

// Mismatches between an encoded row (codes, bf16 scale bits sc) of x[0..n) and the definition:
// s = bf16(amax / 448) (the division in f32), code i = nearest e4m3 to x[i] / s (the division in
// f32), and gl_fp8_e4m3_decode_row = code value * s exactly. amax 0 -> scale 0, zero codes.
static int fp8_row_mismatches(const float *x, int n, const uint8_t *codes, uint16_t sc)
{
    float back[256];
    GL_ASSERT(n <= 256);
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float s = (float)ref_bf16(amax / 448.0f);
    float got_s;
    const uint32_t sbits = (uint32_t)sc << 16;
    memcpy(&got_s, &sbits, sizeof got_s);
    int bad = got_s != s;
    gl_fp8_e4m3_decode_row(codes, sc, n, back);
    for (int i = 0; i < n; i++) {
        const int want = s == 0.0f ? 0 : ref_e4m3_code((double)(x[i] / s));
        bad += codes[i] != want;
        bad += (double)back[i] != e4m3_value(want) * (double)s;
    }
    return bad;
}

TEST(test_fp8_row_scale)
{
    // Rows of 256 (the release's Hkv * D) with magnitudes from 2^-140 to 2^100: uniform rows,
    // rows spread over 30 binades (many elements below the row's e4m3 subnormal cut-off),
    // one-hot rows, rows whose amax / 448 is a bf16 tie or sits next to one, all-zero rows.
    int bad_rows = 0, n_rows = 0, n_sat = 0;
    float x[256];
    uint8_t codes[256];
    for (int r = 0; r < 500; r++) {
        const int mag = -140 + (int)(t_unif() * 241.0);
        const int kind = r % 5;
        for (int i = 0; i < 256; i++) {
            double v = 2.0 * t_unif() - 1.0;
            if (kind == 1)
                v = ldexp(v, -(int)(t_unif() * 30.0));
            else if (kind == 2)
                v = i == r % 256 ? 1.0 : 0.0;
            x[i] = (float)ldexp(v, mag);
        }
        if (kind == 3) { // amax = 448 * (1 + k/256) * 2^e: halfway between bf16 neighbours
            const float b = ldexpf(448.0f * (1.0f + (float)(2 * (r % 64) + 1) / 256.0f), mag - 8);
            x[r % 256] = r & 1 ? b : nextafterf(b, INFINITY);
        }
        if (kind == 4 && r % 3 == 0)
            memset(x, 0, sizeof x);
        const uint16_t sc = gl_fp8_e4m3_encode_row(x, 256, codes);
        bad_rows += fp8_row_mismatches(x, 256, codes, sc) != 0;
        // The row's largest element lands on 448 (code 0x7E) whenever the scale is a normal
        // bf16: bf16 rounding moves amax / s by at most 2^-8, and 448's neighbours are 416 and
        // saturation.
        float amax = 0.0f;
        for (int i = 0; i < 256; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        if (amax / 448.0f >= 0x1p-126f) {
            int top = 0;
            for (int i = 0; i < 256; i++)
                top = (codes[i] & 0x7F) > top ? codes[i] & 0x7F : top;
            n_sat += top != 0x7E;
        }
        n_rows++;
    }
    CHECKF(bad_rows == 0, "%d of %d rows differ from the definition", bad_rows, n_rows);
    CHECKF(n_sat == 0, "%d rows do not reach code 448", n_sat);
    // Non-finite rows decode to NaN (an f32 cache would carry inf/NaN on, too).
    float back[4];
    const float inf_in[4] = {1.0f, INFINITY, -2.0f, 0.5f};
    uint16_t sc = gl_fp8_e4m3_encode_row(inf_in, 4, codes);
    gl_fp8_e4m3_decode_row(codes, sc, 4, back);
    CHECK(isnan(back[0]) && isnan(back[2]) && isnan(back[3]));
    const float nan_in[4] = {1.0f, NAN, -2.0f, 0.5f};
    sc = gl_fp8_e4m3_encode_row(nan_in, 4, codes);
    gl_fp8_e4m3_decode_row(codes, sc, 4, back);
    CHECK(isnan(back[0]) && isnan(back[2]));
    // A row of exactly representable values (amax 448: scale 1) round-trips exactly.
    const float exact[4] = {448.0f, -0.5f, 0x1p-9f, 3.5f};
    sc = gl_fp8_e4m3_encode_row(exact, 4, codes);
    gl_fp8_e4m3_decode_row(codes, sc, 4, back);
    CHECK(sc == 0x3F80 && memcmp(back, exact, sizeof exact) == 0);
}

// ---- plan ----

static struct gl_model_config release_config(void)
{
    struct gl_model_config c;
    memset(&c, 0, sizeof c);
    c.n_layer = 52;
    c.n_head = 32;
    c.n_head_kv = 2;
    c.head_dim = 128;
    c.window = 2048;
    for (int l = 0; l < 52; l++)
        c.swa[l] = (l % 4) != 3;
    return c;
}

TEST(test_plan_release_shape)
{
    struct gl_model_config cfg = release_config();
    struct gl_kv_params p = {5905580032, 16, GL_KV_FP8_E4M3, 1, 0, 0};
    struct gl_kv_plan pl;
    struct gl_err err;
    REQUIRE(gl_kv_plan_compute(&cfg, &p, 131072, &pl, &err) == GL_OK);
    CHECK(pl.n_groups == 4 && pl.group_size == 13 && pl.n_sliding_groups == 3);
    // 13 layers x (K,V) x 16 positions x 256 B + 13 x 2 x 16 bf16 row scales (2 B), already a
    // multiple of 64 B (an f32 scale per row made it 108,160 B and 6.36 sequences).
    CHECK(pl.page_bytes == 106496 + 832);
    CHECK(pl.n_pages == 5905580032 / 107328);
    CHECK(pl.pages_per_seq == 8192 + 3 * 129); // window 2048 touches at most 129 blocks
    // 55,023 / 8,579 = 6.414 (issue 11 asks for >= 6.4; no scales at all would give 6.464).
    CHECKF(pl.max_concurrency >= 6.4 && pl.max_concurrency < 6.464, "%g", pl.max_concurrency);
    CHECK(pl.kv_capacity_tokens == (pl.n_pages - 3 * 129) * 16);
    CHECK(pl.bytes_per_token_global == 13 * 2 * 258 && pl.bytes_per_token_all == 52 * 2 * 258);
    // Split at -ngl 13: layers 39..51 (9 sliding, 4 global) on the device; the group size
    // falls to gcd(39, 13, 9, 4) = 1 so no group mixes sides; the device side is 13/52 of the
    // pages and a sequence of 131,072 needs 4 x 8192 + 9 x 129 of them there.
    p.n_dev_layers = 13;
    REQUIRE(gl_kv_plan_compute(&cfg, &p, 131072, &pl, &err) == GL_OK);
    CHECK(pl.group_size == 1 && pl.page_bytes == 8192 + 64);
    CHECK(pl.n_dev_pages == pl.n_pages * 13 / 52);
    CHECKF(pl.dev_pages_per_seq == 4 * 8192 + 9 * 129, "%lld", (long long)pl.dev_pages_per_seq);
    p.n_dev_layers = 0;
    p.dtype = GL_KV_BF16;
    REQUIRE(gl_kv_plan_compute(&cfg, &p, 131072, &pl, &err) == GL_OK);
    CHECK(pl.page_bytes == 13 * 2 * 16 * 512);
    p.block_size = 0;
    CHECK(gl_kv_plan_compute(&cfg, &p, 131072, &pl, &err) == GL_E_INVAL);
    enum gl_kv_dtype t;
    CHECK(gl_kv_dtype_parse("fp8", &t, &err) == GL_OK && t == GL_KV_FP8_E4M3);
    CHECK(gl_kv_dtype_parse("fp8_e4m3", &t, &err) == GL_OK && t == GL_KV_FP8_E4M3);
    CHECK(gl_kv_dtype_parse("bf16", &t, &err) == GL_OK && t == GL_KV_BF16);
    CHECK(gl_kv_dtype_parse("int4", &t, &err) == GL_E_INVAL && strstr(err.msg, "int4"));
}

// ---- the test model ----

static char tmp_dir[256];
static char model_path[512];

static float hval(int64_t ti, int64_t r, int64_t i)
{
    uint64_t x = (uint64_t)ti * 0x9E3779B97F4A7C15ull ^ (uint64_t)r * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)i * 0x94D049BB133111EBull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

struct tdesc {
    char name[64];
    int64_t ne[2];
    float base, scale;
};
static struct tdesc tds[3 + 14 * T_L];
static int n_tds;

static gl_status fill(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                      struct gl_err *err)
{
    (void)ctx;
    (void)err;
    const struct tdesc *d = &tds[ti];
    float *o = dst;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < d->ne[0]; i++)
            o[r * d->ne[0] + i] = d->base + d->scale * hval(ti, row0 + r, i);
    return GL_OK;
}

static void add_t(const char *name, int64_t n_in, int64_t n_out, float base, float scale)
{
    struct tdesc *d = &tds[n_tds++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ne[0] = n_in;
    d->ne[1] = n_out;
    d->base = base;
    d->scale = scale;
}

static void write_model(void)
{
    snprintf(model_path, sizeof model_path, "%s/kv.gguf", tmp_dir);
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
#define U(k, v) GL_ASSERT(gl_gguf_writer_add_u32(w, "muse-glimmer." k, v) == GL_OK)
#define F(k, v) GL_ASSERT(gl_gguf_writer_add_f32(w, "muse-glimmer." k, v) == GL_OK)
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", "muse-glimmer") == GL_OK);
    U("block_count", T_L);
    U("embedding_length", T_E);
    U("feed_forward_length", T_F);
    U("attention.head_count", T_H);
    U("attention.head_count_kv", T_HKV);
    U("attention.key_length", T_D);
    U("attention.value_length", T_D);
    U("context_length", 256);
    U("attention.sliding_window", T_WIN);
    F("attention.layer_norm_rms_epsilon", 1e-5f);
    F("rope.freq_base", 10000.0f);
    F("logit_scale", 0.5f);
    F("final_logit_softcapping", 20.0f);
    uint8_t b[T_L];
    for (int i = 0; i < T_L; i++)
        b[i] = (i % 4) != 3;
    GL_ASSERT(gl_gguf_writer_add_arr(w, "muse-glimmer.attention.sliding_window_pattern",
                                     GL_GGUF_BOOL, b, T_L) == GL_OK);
#undef U
#undef F
    const int HD = T_H * T_D, KD = T_HKV * T_D;
    n_tds = 0;
    add_t("token_embd.weight", T_E, T_V, 0.0f, 1.0f);
    add_t("output_norm.weight", T_E, 0, 1.0f, 0.2f);
    add_t("output.weight", T_E, T_V, 0.0f, 0.25f);
    for (int l = 0; l < T_L; l++) {
        char nm[64];
#define A(suf, nin, nout, bs, sc)                                                                  \
    snprintf(nm, sizeof nm, "blk.%d." suf ".weight", l);                                           \
    add_t(nm, nin, nout, bs, sc)
        A("attn_norm", T_E, 0, 1.0f, 0.2f);
        A("attn_q", T_E, HD, 0.0f, 0.2f);
        A("attn_k", T_E, KD, 0.0f, 0.2f);
        A("attn_v", T_E, KD, 0.0f, 0.2f);
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
    for (int i = 0; i < n_tds; i++)
        GL_ASSERT(gl_gguf_writer_add_tensor(w, tds[i].name, tds[i].ne[1] ? 2 : 1, tds[i].ne,
                                            GL_TYPE_F32) == i);
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_gguf_writer_write(w, model_path, 0, fill, NULL, &err) == GL_OK, "%s", err.msg);
    gl_gguf_writer_delete(w);
}

static struct gl_model *model;

static void tokens_for(int32_t *out, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = (int32_t)((seed >> 33) % T_V);
    }
}

static struct gl_kv_pool *pool_make(int64_t n_pages, int32_t bs, enum gl_kv_dtype dt, int prefix)
{
    struct gl_kv_params p = {1, bs, dt, prefix, 0, 0};
    struct gl_kv_plan pl;
    struct gl_err err;
    GL_ASSERT(gl_kv_plan_compute(&model->cfg, &p, 64, &pl, &err) == GL_OK);
    p.budget_bytes = n_pages * (int64_t)pl.page_bytes;
    struct gl_kv_pool *pool = NULL;
    GL_ASSERT_MSG(gl_kv_pool_new(&pool, &model->cfg, &p, &err) == GL_OK, "%s", err.msg);
    GL_ASSERT(gl_kv_pool_total_pages(pool) == n_pages);
    return pool;
}

// ---- pool accounting (no forward pass: pages are metadata until written) ----

enum { RND_S = 6, RND_P = 48 };

// One step of the random mix over sequences seq[0..RND_S) sharing prompts (prompt 1 shares 5
// blocks with prompt 0): a new sequence takes a prefix hit where it can, an old one is freed or
// grows by 1-9 positions. A refused reserve changes nothing and agrees with can_reserve; whole:
// the pool is not split, so a refusal means the free pages were short.
static void random_op(struct gl_kv_pool *pool, struct gl_kv_seq **seq, int *which,
                      int32_t (*prompts)[RND_P], uint64_t *r, int whole, int *n_limit, int *n_reuse)
{
    struct gl_err err;
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    const int i = (int)((*r >> 33) % RND_S), kind = (int)((*r >> 40) % 8);
    if (!seq[i]) {
        REQUIRE(gl_kv_seq_new(pool, &seq[i], &err) == GL_OK);
        which[i] = (int)((*r >> 50) % 3);
        *n_reuse += gl_kv_seq_reuse_prefix(seq[i], prompts[which[i]], RND_P) > 0;
        return;
    }
    const int64_t len = gl_kv_seq_len(seq[i]);
    if (kind == 0 || len >= RND_P) {
        gl_kv_seq_free(seq[i]);
        seq[i] = NULL;
        return;
    }
    int64_t n = 1 + (int64_t)((*r >> 20) % 9);
    n = len + n > RND_P ? RND_P - len : n;
    const int64_t fr = gl_kv_pool_free_pages(pool), need = gl_kv_seq_pages_needed(seq[i], n);
    const int can = gl_kv_seq_can_reserve(seq[i], n, 0);
    const gl_status st = gl_kv_seq_reserve(seq[i], n, &err);
    CHECK(can == (st == GL_OK));
    if (st == GL_E_LIMIT) {
        (*n_limit)++;
        CHECK((!whole || need > fr) && gl_kv_pool_free_pages(pool) == fr);
    } else {
        REQUIRE(st == GL_OK);
        CHECK(gl_kv_pool_free_pages(pool) == fr - need);
        gl_kv_seq_commit(seq[i], prompts[which[i]] + len, n);
    }
}

TEST(test_pool_accounting_random)
{
    struct gl_kv_pool *pool = pool_make(60, 4, GL_KV_F32, 1);
    enum { S = RND_S, P = RND_P };
    struct gl_kv_seq *seq[S] = {0};
    int32_t prompts[3][P];
    for (int i = 0; i < 3; i++)
        tokens_for(prompts[i], P, 100 + (uint64_t)i);
    memcpy(prompts[1], prompts[0], 20 * sizeof(int32_t)); // 1 shares 5 blocks with 0
    int which[S] = {0};
    uint64_t r = 7;
    int n_limit = 0, n_reuse = 0;
    for (int op = 0; op < 400; op++) {
        random_op(pool, seq, which, prompts, &r, 1, &n_limit, &n_reuse);
        int64_t used = gl_kv_pool_audit(pool);
        CHECK(used + gl_kv_pool_free_pages(pool) == 60);
    }
    // The mix must have exercised exhaustion and hits, or the test proves little.
    CHECKF(n_limit > 0 && n_reuse > 0, "limit %d reuse %d", n_limit, n_reuse);
    for (int i = 0; i < S; i++)
        gl_kv_seq_free(seq[i]);
    CHECK(gl_kv_pool_audit(pool) == 0 && gl_kv_pool_free_pages(pool) == 60);
    gl_kv_pool_free(pool);
}

// Partial offload's split pool (gl_kv_params.n_dev_layers = N, the last N layers on the device):
// for every N in 0..n_layer+1, the random mix of test_pool_accounting_random with the audit
// after every operation (which checks each table entry is on its group's side), every device
// layer's view naming only pages below n_dev_pages (what the device copy holds) and every host
// layer's only pages at or above it; the device copy is n_dev_pages = floor(60 x N / 8) pages
// (groups of one layer here; the whole pool for N = 0 or N >= 8).
TEST(test_split_pool_sides)
{
    struct gl_err err;
    enum { S = RND_S, P = RND_P, NP = 60 };
    const int L = model->cfg.n_layer;
    int32_t prompts[3][P];
    for (int i = 0; i < 3; i++)
        tokens_for(prompts[i], P, 200 + (uint64_t)i);
    memcpy(prompts[1], prompts[0], 20 * sizeof(int32_t));
    for (int N = 0; N <= L + 1; N++) {
        struct gl_kv_params p = {1, 4, GL_KV_F32, 1, N, 0};
        struct gl_kv_plan pl;
        REQUIRE(gl_kv_plan_compute(&model->cfg, &p, 64, &pl, &err) == GL_OK);
        p.budget_bytes = NP * (int64_t)pl.page_bytes;
        REQUIRE(gl_kv_plan_compute(&model->cfg, &p, 64, &pl, &err) == GL_OK);
        struct gl_kv_pool *pool = NULL;
        REQUIRE(gl_kv_pool_new(&pool, &model->cfg, &p, &err) == GL_OK);
        const int split = N > 0 && N < L;
        const int64_t n_dev = split ? (int64_t)NP * N / L : 0;
        CHECKF(pl.n_dev_pages == n_dev && gl_kv_pool_total_pages(pool) == NP, "N %d: %lld", N,
               (long long)pl.n_dev_pages);
        CHECKF(gl_kv_pool_dev_bytes(pool) == (uint64_t)(split ? n_dev : NP) * pl.page_bytes,
               "N %d: %llu", N, (unsigned long long)gl_kv_pool_dev_bytes(pool));
        struct gl_kv_seq *seq[S] = {0};
        int which[S] = {0};
        uint64_t r = 11;
        int n_limit = 0, n_reuse = 0;
        for (int op = 0; op < 300; op++) {
            random_op(pool, seq, which, prompts, &r, !split, &n_limit, &n_reuse);
            CHECK(gl_kv_pool_audit(pool) + gl_kv_pool_free_pages(pool) == NP);
            for (int j = 0; j < S; j++)
                for (int l = 0; seq[j] && l < L; l++) {
                    const struct gl_kv_view v = gl_kv_seq_view(seq[j], l);
                    const int dev = split && l >= L - N;
                    CHECK(v.n_pages == (dev ? n_dev : NP));
                    for (int32_t b = 0; b < v.n_blocks; b++)
                        if (v.pages[b] >= 0)
                            CHECKF(v.pages[b] < v.n_pages &&
                                       (!split || (v.pages[b] < n_dev) == dev),
                                   "N %d layer %d page %d", N, l, v.pages[b]);
                }
        }
        CHECKF(n_limit > 0 && n_reuse > 0, "N %d: limit %d reuse %d", N, n_limit, n_reuse);
        for (int i = 0; i < S; i++)
            gl_kv_seq_free(seq[i]);
        CHECK(gl_kv_pool_audit(pool) == 0 && gl_kv_pool_free_pages(pool) == NP);
        gl_kv_pool_free(pool);
    }
}

TEST(test_reserve_failure_changes_nothing)
{
    // 4 groups: every block of a fresh sequence takes 4 pages.
    struct gl_kv_pool *pool = pool_make(10, 4, GL_KV_F32, 1);
    struct gl_kv_seq *s = NULL;
    struct gl_err err;
    REQUIRE(gl_kv_seq_new(pool, &s, &err) == GL_OK);
    CHECK(gl_kv_seq_pages_needed(s, 16) == 16);
    CHECK(gl_kv_seq_reserve(s, 16, &err) == GL_E_LIMIT);
    CHECK(strstr(err.msg, "16 pages") != NULL);
    CHECK(gl_kv_pool_audit(pool) == 0 && gl_kv_pool_free_pages(pool) == 10);
    CHECK(gl_kv_seq_pages_held(s, 0) == 0 && gl_kv_seq_pages_held(s, 1) == 0);
    REQUIRE(gl_kv_seq_reserve(s, 8, &err) == GL_OK);
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    gl_kv_seq_commit(s, toks, 8);
    struct gl_kv_view v0 = gl_kv_seq_view(s, 0);
    CHECK(gl_kv_seq_reserve(s, 4, &err) == GL_E_LIMIT); // 4 more pages, 2 free
    CHECK(gl_kv_pool_audit(pool) == 8 && gl_kv_pool_free_pages(pool) == 2);
    struct gl_kv_view v1 = gl_kv_seq_view(s, 0);
    CHECK(v1.n_blocks == v0.n_blocks && gl_kv_seq_len(s) == 8);
    CHECK(gl_kv_seq_pages_held(s, 0) == 2 && gl_kv_seq_pages_held(s, 1) == 6);
    gl_kv_seq_free(s);
    CHECK(gl_kv_pool_audit(pool) == 0 && gl_kv_pool_free_pages(pool) == 10);
    gl_kv_pool_free(pool);
}

// Decode-style growth of one sequence to n positions; returns the most sliding pages held.
static int64_t grow(struct gl_kv_pool *pool, struct gl_kv_seq *s, int n)
{
    struct gl_err err;
    int64_t most = 0;
    for (int i = 0; i < n; i++) {
        int32_t t = i % T_V;
        GL_ASSERT(gl_kv_seq_reserve(s, 1, &err) == GL_OK);
        int64_t h = gl_kv_seq_pages_held(s, 1);
        most = h > most ? h : most;
        gl_kv_seq_commit(s, &t, 1);
        GL_ASSERT(gl_kv_pool_audit(pool) >= 0);
    }
    return most;
}

TEST(test_sliding_pages_follow_window)
{
    struct gl_kv_pool *pool = pool_make(200, 4, GL_KV_F32, 0);
    struct gl_kv_seq *a = NULL, *b = NULL;
    struct gl_err err;
    REQUIRE(gl_kv_seq_new(pool, &a, &err) == GL_OK && gl_kv_seq_new(pool, &b, &err) == GL_OK);
    int64_t most1 = grow(pool, a, T_WIN), most10 = grow(pool, b, 10 * T_WIN);
    // 3 sliding groups; a window of 8 positions touches at most 3 blocks of 4.
    CHECKF(gl_kv_seq_pages_held(b, 1) <= gl_kv_seq_pages_held(a, 1), "10x %lld vs 1x %lld",
           (long long)gl_kv_seq_pages_held(b, 1), (long long)gl_kv_seq_pages_held(a, 1));
    CHECKF(most10 <= 3 * 3 && most1 <= 3 * 3, "peaks %lld %lld", (long long)most10,
           (long long)most1);
    CHECK(gl_kv_seq_pages_held(b, 0) == 20 && gl_kv_seq_pages_held(a, 0) == 2); // global: all
    gl_kv_seq_free(a);
    gl_kv_seq_free(b);
    CHECK(gl_kv_pool_audit(pool) == 0);
    gl_kv_pool_free(pool);
}

// Speculative steps (gl_kv_seq_trim): reserve 1 + 4 positions, commit only the accepted ones,
// trim; the sequence then holds exactly the pages (sliding and global) of one grown token by
// token to the same length, and the pool audit agrees.
TEST(test_trim_after_rejected_drafts)
{
    struct gl_kv_pool *pool = pool_make(200, 4, GL_KV_F32, 0);
    struct gl_kv_seq *a = NULL, *b = NULL;
    struct gl_err err;
    REQUIRE(gl_kv_seq_new(pool, &a, &err) == GL_OK && gl_kv_seq_new(pool, &b, &err) == GL_OK);
    (void)grow(pool, a, 10);
    const int accepted[6] = {2, 1, 5, 1, 3, 4}; // committed of each 5 reserved (1..5)
    int64_t len = 10;
    for (int i = 0; i < 6; i++) {
        int32_t t[5] = {1, 2, 3, 4, 5};
        REQUIRE(gl_kv_seq_reserve(a, 5, &err) == GL_OK);
        gl_kv_seq_commit(a, t, accepted[i]);
        gl_kv_seq_trim(a);
        len += accepted[i];
        struct gl_kv_seq *ref = NULL;
        REQUIRE(gl_kv_seq_new(pool, &ref, &err) == GL_OK);
        (void)grow(pool, ref, (int)len);
        CHECKF(gl_kv_seq_pages_held(a, 0) == gl_kv_seq_pages_held(ref, 0) &&
                   gl_kv_seq_pages_held(a, 1) == gl_kv_seq_pages_held(ref, 1),
               "len %lld: global %lld vs %lld, sliding %lld vs %lld", (long long)len,
               (long long)gl_kv_seq_pages_held(a, 0), (long long)gl_kv_seq_pages_held(ref, 0),
               (long long)gl_kv_seq_pages_held(a, 1), (long long)gl_kv_seq_pages_held(ref, 1));
        CHECK(gl_kv_seq_len(a) == len && gl_kv_seq_view(a, 0).n_blocks == (len + 3) / 4);
        gl_kv_seq_free(ref);
        CHECK(gl_kv_pool_audit(pool) >= 0);
    }
    gl_kv_seq_free(a);
    gl_kv_seq_free(b);
    CHECK(gl_kv_pool_audit(pool) == 0 && gl_kv_pool_free_pages(pool) == 200);
    gl_kv_pool_free(pool);
}

// ---- forward through the pool ----

struct runseq {
    struct gl_kv_seq *s;
    struct gl_kv_view views[T_L];
};

// One batched step: seq i feeds toks[i][0..n[i]) at its current length; logits row i gets its
// last token's logits.
static void pool_step(struct gl_model_ctx *c, struct runseq *rs, const int32_t *const *toks,
                      const int32_t *n, int k, float *logits)
{
    struct gl_batch_seq bs[8];
    memset(bs, 0, sizeof bs); // gcc -O1 cannot see k >= 1 and warns bs may be unset
    struct gl_err err;
    GL_ASSERT(k <= 8);
    for (int i = 0; i < k; i++) {
        GL_ASSERT_MSG(gl_kv_seq_reserve(rs[i].s, n[i], &err) == GL_OK, "%s", err.msg);
        for (int l = 0; l < T_L; l++)
            rs[i].views[l] = gl_kv_seq_view(rs[i].s, l);
        struct gl_batch_seq q = {toks[i], n[i], gl_kv_seq_len(rs[i].s), rs[i].views, i, 0,
                                 NULL,    NULL};
        bs[i] = q;
    }
    GL_ASSERT_MSG(gl_model_forward_batch(c, bs, k, logits, &err) == GL_OK, "%s", err.msg);
    for (int i = 0; i < k; i++)
        gl_kv_seq_commit(rs[i].s, toks[i], n[i]);
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

static double max_abs(const float *a, size_t n)
{
    double d = 0.0;
    for (size_t i = 0; i < n; i++)
        d = fabs((double)a[i]) > d ? fabs((double)a[i]) : d;
    return d;
}

// Logits of the last token of each chunk of one sequence run alone through gl_kv_cache.
static void alone(struct gl_model_ctx *c, const int32_t *toks, const int *chunks, int n_chunks,
                  float *out)
{
    struct gl_kv_cache *kv = NULL;
    struct gl_err err;
    GL_ASSERT(gl_kv_cache_new(&kv, &model->cfg, 256, &err) == GL_OK);
    int64_t pos = 0;
    for (int i = 0; i < n_chunks; i++) {
        GL_ASSERT(gl_model_forward(c, kv, toks + pos, chunks[i], pos, out + i * T_V, 0, NULL,
                                   &err) == GL_OK);
        pos += chunks[i];
    }
    gl_kv_cache_delete(kv);
}

// Prefix reuse: a warm sequence maps the cached blocks and its logits equal those of a cold
// sequence fed in the same chunks (36 + 4), bit for bit.
TEST(test_prefix_cache_hit_logits)
{
    struct gl_model_ctx *c = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, model, 64, 2, 256, &err) == GL_OK);
    int32_t p[40];
    tokens_for(p, 40, 5);
    float cold[2 * T_V], warm[T_V], lg[T_V];
    struct gl_kv_pool *pool = pool_make(100, 4, GL_KV_F32, 1);
    struct runseq a = {0};
    REQUIRE(gl_kv_seq_new(pool, &a.s, &err) == GL_OK);
    const int32_t *t0[1] = {p};
    int32_t n0[1] = {36};
    pool_step(c, &a, t0, n0, 1, cold);
    const int32_t *t1[1] = {p + 36};
    int32_t n1[1] = {4};
    pool_step(c, &a, t1, n1, 1, cold + T_V);
    gl_kv_seq_free(a.s);
    CHECK(gl_kv_pool_audit(pool) == 0);

    struct runseq b = {0};
    REQUIRE(gl_kv_seq_new(pool, &b.s, &err) == GL_OK);
    CHECK(gl_kv_seq_reuse_prefix(b.s, p, 40) == 36); // 9 whole blocks, never the last token
    CHECK(gl_kv_pool_audit(pool) == gl_kv_seq_pages_held(b.s, 0) + gl_kv_seq_pages_held(b.s, 1));
    // Sliding groups map only the blocks the next query (position 36) can see: 29..35.
    CHECK(gl_kv_seq_pages_held(b.s, 1) == 3 * 2 && gl_kv_seq_pages_held(b.s, 0) == 9);
    pool_step(c, &b, t1, n1, 1, warm);
    CHECK(memcmp(warm, cold + T_V, sizeof warm) == 0);
    gl_kv_seq_free(b.s);

    // A prompt sharing only 24 tokens hits 6 blocks; its logits match a cold 24 + rest run.
    int32_t q[30];
    memcpy(q, p, 24 * sizeof(int32_t));
    tokens_for(q + 24, 6, 99);
    struct runseq d = {0};
    REQUIRE(gl_kv_seq_new(pool, &d.s, &err) == GL_OK);
    CHECK(gl_kv_seq_reuse_prefix(d.s, q, 30) == 24);
    const int32_t *t2[1] = {q + 24};
    int32_t n2[1] = {6};
    pool_step(c, &d, t2, n2, 1, warm);
    gl_kv_seq_free(d.s);
    const int ch[2] = {24, 6};
    float ref[2 * T_V];
    alone(c, q, ch, 2, ref);
    double dd = max_abs_diff(warm, ref + T_V, T_V);
    CHECKF(dd <= 1e-5, "partial hit vs alone: %g", dd);
    CHECK(gl_kv_pool_audit(pool) == 0);
    gl_kv_pool_free(pool);

    // Cold through the pool == alone through gl_kv_cache with the same chunks.
    const int ch2[2] = {36, 4};
    alone(c, p, ch2, 2, ref);
    dd = max_abs_diff(cold, ref, 2 * T_V);
    CHECKF(dd <= 1e-5, "pool vs kv_cache: %g", dd);
    (void)lg;
    gl_model_ctx_delete(c);
}

// The sliding rule: after A (40 tokens, 10 keyed blocks x 4 groups) is freed, its released
// out-of-window sliding pages are first in the LRU (blocks 0..7 of the 3 sliding groups, in
// release order), then blocks 9, 8 of all groups, then 7..0 of the global group. Evicting the 21
// pages of blocks 0..6 keeps a 36-position hit (the query at 36 needs blocks 7, 8); evicting one
// more (block 7 of group 0) leaves every global block cached but no usable hit at all.
TEST(test_prefix_sliding_rule)
{
    struct gl_err err;
    int32_t p[40];
    tokens_for(p, 40, 11);
    for (int extra = 21; extra <= 22; extra++) {
        const int64_t total = 40 + (extra == 21 ? 3 : 2); // clean + extra = a multiple of 4
        struct gl_kv_pool *pool = pool_make(total, 4, GL_KV_F32, 1);
        struct gl_kv_seq *a = NULL, *f = NULL, *b = NULL;
        REQUIRE(gl_kv_seq_new(pool, &a, &err) == GL_OK);
        REQUIRE(gl_kv_seq_reserve(a, 40, &err) == GL_OK);
        gl_kv_seq_commit(a, p, 40);
        gl_kv_seq_free(a);
        CHECK(gl_kv_pool_free_pages(pool) == total);
        REQUIRE(gl_kv_seq_new(pool, &f, &err) == GL_OK);
        int64_t take = (total - 40 + extra) / 4 * 4;
        REQUIRE(gl_kv_seq_reserve(f, take, &err) == GL_OK); // take/4 blocks x 4 groups
        CHECK(gl_kv_pool_free_pages(pool) == 40 - extra);
        REQUIRE(gl_kv_seq_new(pool, &b, &err) == GL_OK);
        int64_t hit = gl_kv_seq_reuse_prefix(b, p, 40);
        CHECKF(hit == (extra == 21 ? 36 : 0), "evicted %d: hit %lld", extra, (long long)hit);
        gl_kv_pool_audit(pool);
        gl_kv_seq_free(b);
        gl_kv_seq_free(f);
        CHECK(gl_kv_pool_audit(pool) == 0);
        gl_kv_pool_free(pool);
    }
}

// The fp8 rows the forward pass stores, read back from pool memory through the views. Layer 0's
// K and V rows do not depend on the cache dtype (they come from the embedding alone), so an f32
// pool run of the same tokens in the same chunks holds the exact input of each fp8 row: every
// code and scale must equal the reference encoding of it. In every layer each row's largest code
// must be 448 and its scale must decode the row to within e4m3 rounding of a finite, nonzero
// row, which fails if a scale sits at a wrong offset or one layer's rows overwrite another's
// (layers share a page in groups of 2).
TEST(test_fp8_rows_in_pool)
{
    struct gl_model_ctx *c = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, model, 16, 2, 64, &err) == GL_OK);
    enum { NT = 8, KD = T_HKV * T_D }; // 8 positions = the window: no sliding page is released
    int32_t toks[NT];
    tokens_for(toks, NT, 31);
    const enum gl_kv_dtype dts[2] = {GL_KV_F32, GL_KV_FP8_E4M3};
    struct gl_kv_pool *pool[2];
    struct runseq rs[2] = {{0}};
    float lg[T_V];
    for (int k = 0; k < 2; k++) {
        pool[k] = pool_make(40, 4, dts[k], 0);
        REQUIRE(gl_kv_seq_new(pool[k], &rs[k].s, &err) == GL_OK);
        const int32_t *t0[1] = {toks}, *t1[1] = {toks + 5};
        const int32_t n0[1] = {5}, n1[1] = {3}; // a partial block, then across a block edge
        pool_step(c, &rs[k], t0, n0, 1, lg);
        pool_step(c, &rs[k], t1, n1, 1, lg);
    }
    int bad_l0 = 0, bad_range = 0, n_rows = 0;
    for (int l = 0; l < T_L; l++) {
        const struct gl_kv_view vf = gl_kv_seq_view(rs[0].s, l), v8 = gl_kv_seq_view(rs[1].s, l);
        for (int p = 0; p < NT; p++)
            for (int is_v = 0; is_v < 2; is_v++) {
                const size_t r = (size_t)(p % v8.block_size);
                const uint8_t *pg = v8.base + (size_t)v8.pages[p / v8.block_size] * v8.page_bytes;
                const uint8_t *codes = pg + (is_v ? v8.v_off : v8.k_off) + r * v8.row_bytes;
                uint16_t sc;
                memcpy(&sc, pg + (is_v ? v8.v_scale_off : v8.k_scale_off) + r * sizeof sc,
                       sizeof sc);
                if (l == 0) {
                    const uint8_t *pf =
                        vf.base + (size_t)vf.pages[p / vf.block_size] * vf.page_bytes;
                    float x[KD];
                    memcpy(x, pf + (is_v ? vf.v_off : vf.k_off) + r * vf.row_bytes, sizeof x);
                    bad_l0 += fp8_row_mismatches(x, KD, codes, sc) != 0;
                }
                int top = 0;
                for (int i = 0; i < KD; i++)
                    top = (codes[i] & 0x7F) > top ? codes[i] & 0x7F : top;
                float back[KD];
                gl_fp8_e4m3_decode_row(codes, sc, KD, back);
                bad_range += top != 0x7E || !(fabsf(back[0]) < 1e6f) || sc == 0;
                n_rows++;
            }
    }
    CHECKF(bad_l0 == 0, "%d of %d layer-0 rows differ from the reference encoding", bad_l0, 2 * NT);
    CHECKF(bad_range == 0, "%d of %d rows: largest code not 448, or a zero / non-finite scale",
           bad_range, n_rows);
    for (int k = 0; k < 2; k++) {
        gl_kv_seq_free(rs[k].s);
        CHECK(gl_kv_pool_audit(pool[k]) == 0);
        gl_kv_pool_free(pool[k]);
    }
    gl_model_ctx_delete(c);
}

// Three sequences of 5, 13 and 21 prompt tokens (two cross the window of 8), prefilled in mixed
// chunks and then decoded together, against each run alone with the same chunks. For f32 the
// results agree to float rounding; the other dtypes are compared with f32 alone.
static void batch_vs_alone(enum gl_kv_dtype dt, double tol_rel, double *worst_out)
{
    struct gl_model_ctx *c = NULL;
    struct gl_err err;
    GL_ASSERT(gl_model_ctx_new(&c, model, 32, 2, 256, &err) == GL_OK);
    enum { ND = 4 };
    const int plen[3] = {5, 13, 21};
    int32_t toks[3][21 + ND];
    for (int i = 0; i < 3; i++)
        tokens_for(toks[i], plen[i] + ND, 40 + (uint64_t)i);
    // Steps: 1) A[0,5) B[0,8) C[0,10)  2) B[8,13) C[10,21)  3..6) one token each.
    const int chunks[3][2] = {{5, 0}, {8, 5}, {10, 11}};
    struct gl_kv_pool *pool = pool_make(64, 4, dt, 1);
    struct runseq rs[3] = {{0}};
    for (int i = 0; i < 3; i++)
        GL_ASSERT(gl_kv_seq_new(pool, &rs[i].s, &err) == GL_OK);
    float got[3][1 + 1 + ND][T_V], want[3][1 + 1 + ND][T_V];
    float lg[3 * T_V];
    {
        const int32_t *t[3] = {toks[0], toks[1], toks[2]};
        int32_t n[3] = {5, 8, 10};
        pool_step(c, rs, t, n, 3, lg);
        for (int i = 0; i < 3; i++)
            memcpy(got[i][0], lg + i * T_V, sizeof got[i][0]);
        const int32_t *t2[2] = {toks[1] + 8, toks[2] + 10};
        int32_t n2[2] = {5, 11};
        pool_step(c, rs + 1, t2, n2, 2, lg);
        for (int i = 1; i < 3; i++)
            memcpy(got[i][1], lg + (i - 1) * T_V, sizeof got[i][1]);
        gl_kv_pool_audit(pool);
    }
    for (int d = 0; d < ND; d++) {
        const int32_t *t[3];
        int32_t n[3] = {1, 1, 1};
        for (int i = 0; i < 3; i++)
            t[i] = toks[i] + plen[i] + d;
        pool_step(c, rs, t, n, 3, lg);
        for (int i = 0; i < 3; i++)
            memcpy(got[i][2 + d], lg + i * T_V, sizeof got[i][2 + d]);
        gl_kv_pool_audit(pool);
    }
    double worst = 0.0;
    for (int i = 0; i < 3; i++) {
        int ch[2 + ND], nch = 0;
        for (int k = 0; k < 2; k++)
            if (chunks[i][k])
                ch[nch++] = chunks[i][k];
        for (int d = 0; d < ND; d++)
            ch[nch++] = 1;
        float out[2 + ND][T_V];
        alone(c, toks[i], ch, nch, &out[0][0]);
        int gi = 0;
        for (int k = 0; k < nch; k++, gi++) {
            if (i == 0 && k == 1)
                gi++; // A had no second prefill chunk
            memcpy(want[i][gi], out[k], sizeof out[k]);
            double rel = max_abs_diff(got[i][gi], want[i][gi], T_V) / max_abs(want[i][gi], T_V);
            worst = rel > worst ? rel : worst;
        }
    }
    *worst_out = worst;
    CHECKF(worst <= tol_rel, "dtype %s: batch vs alone worst relative diff %g > %g",
           gl_kv_dtype_name(dt), worst, tol_rel);
    for (int i = 0; i < 3; i++)
        gl_kv_seq_free(rs[i].s);
    CHECK(gl_kv_pool_audit(pool) == 0);
    gl_kv_pool_free(pool);
    gl_model_ctx_delete(c);
}

TEST(test_forward_batch_equals_alone)
{
    double w[4];
    batch_vs_alone(GL_KV_F32, 1e-5, &w[0]);
    // Rounding of K/V rows has unit roundoff u = 2^-11 (f16), 2^-8 (bf16), 2^-4 (fp8 e4m3 with
    // a per-row bf16 scale). Measured worst logit error relative to max |logit| on this model (8
    // layers, sharp attention from q_norm ~2): 3.2u, 4.1u, 2.4u (1.6e-3, 1.6e-2, 0.15; an f32
    // row scale gave 0.17, a power-of-two scale 0.23). The bounds are about twice that, so a
    // real regression (a wrong scale, a wrong row) fails.
    batch_vs_alone(GL_KV_F16, 4e-3, &w[1]);
    batch_vs_alone(GL_KV_BF16, 4e-2, &w[2]);
    batch_vs_alone(GL_KV_FP8_E4M3, 0.35, &w[3]);
    printf("# batch vs alone, worst |diff| / max|logit|: f32 %.3g f16 %.3g bf16 %.3g fp8 %.3g\n",
           w[0], w[1], w[2], w[3]);
    // The lossy dtypes really are stored lossy (a test that cannot fail proves nothing).
    CHECK(w[1] > 0.0 && w[2] > w[1] && w[3] > w[2]);
}

TEST(test_forward_batch_refusals)
{
    struct gl_model_ctx *c = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, model, 8, 1, 64, &err) == GL_OK);
    struct gl_kv_pool *pool = pool_make(40, 4, GL_KV_F32, 0);
    struct runseq r = {0};
    REQUIRE(gl_kv_seq_new(pool, &r.s, &err) == GL_OK);
    REQUIRE(gl_kv_seq_reserve(r.s, 4, &err) == GL_OK);
    for (int l = 0; l < T_L; l++)
        r.views[l] = gl_kv_seq_view(r.s, l);
    int32_t t[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    float lg[T_V];
    struct gl_batch_seq q = {t, 5, 0, r.views, 0, 0, NULL, NULL}; // 5 positions, views cover 4
    CHECK(gl_model_forward_batch(c, &q, 1, lg, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "layer 0") != NULL);
    q.n = 12; // more than n_batch 8
    CHECK(gl_model_forward_batch(c, &q, 1, lg, &err) != GL_OK);
    q.n = 4;
    t[2] = T_V;
    CHECK(gl_model_forward_batch(c, &q, 1, lg, &err) == GL_E_INVAL && strstr(err.msg, "id 64"));
    t[2] = 3;
    q.pos0 = 62; // past the context of 64
    CHECK(gl_model_forward_batch(c, &q, 1, lg, &err) == GL_E_LIMIT);
    q.pos0 = 0;
    CHECK(gl_model_forward_batch(c, &q, 1, NULL, &err) == GL_E_INVAL); // logits row, no buffer
    CHECK(gl_model_forward_batch(c, &q, 1, lg, &err) == GL_OK);
    gl_kv_seq_free(r.s);
    gl_kv_pool_free(pool);
    gl_model_ctx_delete(c);
}

// Logit rows: several per sequence (n_logits) and destination rows out of sequence order (the
// head then runs once per run of consecutive rows) give the same numbers as the plain order.
TEST(test_forward_batch_logit_rows)
{
    struct gl_model_ctx *c = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, model, 16, 2, 64, &err) == GL_OK);
    int32_t ta[6], tb[3];
    tokens_for(ta, 6, 71);
    tokens_for(tb, 3, 72);
    float out[2][3 * T_V];
    for (int order = 0; order < 2; order++) {
        struct gl_kv_pool *pool = pool_make(40, 4, GL_KV_F32, 0);
        struct runseq r[2] = {{0}};
        struct gl_batch_seq q[2];
        const int32_t *tt[2] = {ta, tb};
        const int32_t nn[2] = {6, 3};
        for (int i = 0; i < 2; i++) {
            REQUIRE(gl_kv_seq_new(pool, &r[i].s, &err) == GL_OK);
            REQUIRE(gl_kv_seq_reserve(r[i].s, nn[i], &err) == GL_OK);
            for (int l = 0; l < T_L; l++)
                r[i].views[l] = gl_kv_seq_view(r[i].s, l);
            struct gl_batch_seq x = {tt[i], nn[i], 0, r[i].views, 0, 0, NULL, NULL};
            q[i] = x;
        }
        q[0].n_logits = 2; // A: its last two tokens
        q[0].logits_row = order ? 1 : 0;
        q[1].logits_row = order ? 0 : 2;
        REQUIRE(gl_model_forward_batch(c, q, 2, out[order], &err) == GL_OK);
        for (int i = 0; i < 2; i++)
            gl_kv_seq_free(r[i].s);
        gl_kv_pool_free(pool);
    }
    // order 0: rows A4 A5 B2; order 1: rows B2 A4 A5.
    double d = max_abs_diff(out[0], out[1] + T_V, 2 * T_V);
    d += max_abs_diff(out[0] + 2 * T_V, out[1], T_V);
    CHECKF(d <= 1e-6, "reordered logit rows differ by %g", d);
    CHECK(max_abs_diff(out[0], out[0] + T_V, T_V) > 1e-3); // distinct rows really were compared
    gl_model_ctx_delete(c);
}

// Hidden-state capture (gl_model_forward_capture, speculative decoding's drafter): a batch of two
// sequences (6 + 3 tokens) captures layers -1, 2 and 7; each sequence's rows equal, bit for bit,
// the dump of that sequence run alone (the Numerics guarantee: a token's values do not depend on
// the batch), and layer -1 is the scale-less RMS of the token_embd rows recomputed here in
// double. Bad captures are refused.
struct dump_rows {
    float rows[T_L + 1][6 * T_E]; // layer -1 .. T_L - 1
};

static void dump_keep(void *user, int layer, int64_t pos0, const float *x, int64_t n_tok,
                      int64_t width)
{
    struct dump_rows *d = user;
    if (layer < T_L) // the logits (layer T_L) are not kept
        memcpy(d->rows[layer + 1] + pos0 * width, x, (size_t)(n_tok * width) * sizeof(float));
}

TEST(test_forward_capture)
{
    struct gl_model_ctx *c = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, model, 16, 2, 64, &err) == GL_OK);
    int32_t ta[6], tb[3];
    tokens_for(ta, 6, 81);
    tokens_for(tb, 3, 82);
    const int32_t *tt[2] = {ta, tb};
    const int32_t nn[2] = {6, 3};
    static struct dump_rows alone_rows[2];
    for (int i = 0; i < 2; i++) {
        struct gl_kv_cache *kv = NULL;
        REQUIRE(gl_kv_cache_new(&kv, &model->cfg, 64, &err) == GL_OK);
        struct gl_model_dump d = {dump_keep, &alone_rows[i]};
        float lg[T_V];
        REQUIRE(gl_model_forward(c, kv, tt[i], nn[i], 0, lg, 0, &d, &err) == GL_OK);
        gl_kv_cache_delete(kv);
    }
    struct gl_kv_pool *pool = pool_make(40, 4, GL_KV_F32, 0);
    struct runseq r[2] = {{0}};
    struct gl_batch_seq q[2];
    for (int i = 0; i < 2; i++) {
        REQUIRE(gl_kv_seq_new(pool, &r[i].s, &err) == GL_OK);
        REQUIRE(gl_kv_seq_reserve(r[i].s, nn[i], &err) == GL_OK);
        for (int l = 0; l < T_L; l++)
            r[i].views[l] = gl_kv_seq_view(r[i].s, l);
        q[i] = (struct gl_batch_seq){tt[i], nn[i], 0, r[i].views, i, 0, NULL, NULL};
    }
    static float got[3][9 * T_E];
    const int32_t layers[3] = {-1, 2, T_L - 1};
    float *const out[3] = {got[0], got[1], got[2]};
    struct gl_model_capture cap = {3, layers, out};
    float lg[2 * T_V];
    REQUIRE(gl_model_forward_capture(c, q, 2, lg, &cap, &err) == GL_OK);
    for (int k = 0; k < 3; k++) {
        const int li = layers[k] + 1;
        CHECKF(memcmp(got[k], alone_rows[0].rows[li], 6 * T_E * sizeof(float)) == 0,
               "layer %d: sequence A's captured rows differ from A alone", layers[k]);
        CHECKF(memcmp(got[k] + 6 * T_E, alone_rows[1].rows[li], 3 * T_E * sizeof(float)) == 0,
               "layer %d: sequence B's captured rows differ from B alone", layers[k]);
    }
    CHECK(max_abs_diff(got[1], got[2], 9 * T_E) > 1e-3); // distinct layers really were captured
    double worst = 0.0;
    for (int t = 0; t < 9; t++) {
        const int32_t tok = t < 6 ? ta[t] : tb[t - 6];
        GL_ASSERT(model->tok_embd.type == GL_TYPE_F32);
        const float *e = (const float *)model->tok_embd.data + (size_t)tok * T_E;
        double ss = 0.0;
        for (int i = 0; i < T_E; i++)
            ss += (double)e[i] * (double)e[i];
        const double s = 1.0 / sqrt(ss / T_E + (double)model->cfg.rms_eps);
        for (int i = 0; i < T_E; i++) {
            const double d = fabs((double)got[0][t * T_E + i] - (double)e[i] * s);
            worst = d > worst ? d : worst;
        }
    }
    CHECKF(worst <= 1e-5, "layer -1 vs the RMS of token_embd rows: %g", worst);
    // Refusals: a layer out of range either side, a missing buffer; nothing runs.
    const int32_t bad_hi[1] = {T_L}, bad_lo[1] = {-2};
    float *const none[1] = {NULL};
    struct gl_model_capture b1 = {1, bad_hi, out}, b2 = {1, bad_lo, out}, b3 = {1, layers, none};
    CHECK(gl_model_forward_capture(c, q, 2, lg, &b1, &err) == GL_E_INVAL &&
          strstr(err.msg, "layer 8"));
    CHECK(gl_model_forward_capture(c, q, 2, lg, &b2, &err) == GL_E_INVAL);
    CHECK(gl_model_forward_capture(c, q, 2, lg, &b3, &err) == GL_E_INVAL);
    for (int i = 0; i < 2; i++)
        gl_kv_seq_free(r[i].s);
    gl_kv_pool_free(pool);
    gl_model_ctx_delete(c);
}

// Default pool sizing (gl_kv_fit_compute) on the release shape, f16: 212,992-byte pages, 8,579
// pages for one 131,072-token sequence; 1 GiB holds 5,041 (the issue-19 start-up).
TEST(test_fit_release_shape)
{
    struct gl_model_config cfg = release_config();
    struct gl_kv_params p = {0, 16, GL_KV_F16, 1, 0, 0};
    struct gl_kv_fit_in in = {.mem_free = (int64_t)1 << 30,
                              .utilization = 1.0,
                              .max_model_len = 131072,
                              .max_num_seqs = 16};
    struct gl_kv_fit f;
    struct gl_err err;
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECK(f.budget_bytes == (int64_t)5041 * 212992 && !f.capped);
    // The longest sequence 5,041 pages hold: 4,654 global blocks + 3 x 129 sliding ones.
    CHECKF(f.lowered && f.max_model_len == 4654 * 16, "%lld", (long long)f.max_model_len);
    struct gl_kv_plan pl;
    p.budget_bytes = f.budget_bytes;
    REQUIRE(gl_kv_plan_compute(&cfg, &p, f.max_model_len, &pl, &err) == GL_OK);
    CHECK(pl.pages_per_seq == pl.n_pages);
    REQUIRE(gl_kv_plan_compute(&cfg, &p, f.max_model_len + 1, &pl, &err) == GL_OK);
    CHECK(pl.pages_per_seq == pl.n_pages + 1); // one position more no longer fits
    // Utilization scales the free memory; the user's length is never lowered.
    in.utilization = 0.5;
    in.max_len_fixed = 1;
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECK(f.budget_bytes == (int64_t)2520 * 212992 && !f.lowered && f.max_model_len == 131072);
    // Plenty of memory: the pool stops at max_num_seqs full sequences.
    in = (struct gl_kv_fit_in){.mem_free = (int64_t)1 << 40,
                               .utilization = 0.9,
                               .max_model_len = 131072,
                               .max_num_seqs = 16};
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECK(f.capped && !f.lowered && f.budget_bytes == (int64_t)16 * 8579 * 212992);
    // A fixed pool (--kv-cache-memory) fits the length only, whatever memory is free.
    in.budget_fixed = (int64_t)1 << 30;
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECK(f.budget_bytes == (int64_t)5041 * 212992 && f.lowered && f.max_model_len == 74464);
    // Refusals: not one block per group (4 pages), bad utilization.
    in = (struct gl_kv_fit_in){
        .mem_free = 3 * 212992, .utilization = 1.0, .max_model_len = 131072, .max_num_seqs = 1};
    CHECK(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_E_LIMIT);
    CHECKF(strstr(err.msg, "4 pages") != NULL, "%s", err.msg);
    in.mem_free = 4 * 212992;
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECK(f.max_model_len == 16 && f.lowered);
    in.utilization = 1.5;
    CHECK(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_E_INVAL);
}

// Device sizing (--device vulkan: gl_kv_fit_in.dev_sized): the pool's device side from
// dev_mem_free alone (heap x utilization minus the rest, not scaled again), the host side of a
// split from mem_free, neither from the other's memory; --kv-cache-memory still overrides.
TEST(test_fit_device_sides)
{
    struct gl_model_config cfg = release_config();
    struct gl_kv_params p = {0, 16, GL_KV_F16, 1, 0, 0};
    struct gl_kv_fit_in in = {.mem_free = (int64_t)1 << 40,
                              .utilization = 0.9,
                              .max_model_len = 131072,
                              .max_num_seqs = 16,
                              .dev_sized = 1,
                              .dev_mem_free = (int64_t)1 << 30};
    struct gl_kv_fit f;
    struct gl_err err;
    // All layers on the device: 1 GiB of room is 5,041 pages (test_fit_release_shape), whatever
    // the 1 TiB of host memory would allow (16 x 8,579 pages).
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECKF(f.budget_bytes == (int64_t)5041 * 212992 && f.n_dev_pages == 0 && f.lowered &&
               f.max_model_len == 4654 * 16,
           "%lld %lld", (long long)f.budget_bytes, (long long)f.max_model_len);
    // -ngl 13 (4 global + 9 sliding layers on the device, groups of one layer, 16,384-byte
    // pages): 1,000.5 pages of device room give 1,000 device pages; the host side is one
    // sequence of its pages at 131,072 (capped: max_num_seqs 1), whatever the host memory.
    p.n_dev_layers = 13;
    in.max_num_seqs = 1;
    struct gl_kv_plan pl;
    struct gl_kv_params q = p;
    q.budget_bytes = 1;
    REQUIRE(gl_kv_plan_compute(&cfg, &q, 131072, &pl, &err) == GL_OK);
    const int64_t page = (int64_t)pl.page_bytes, hpps = pl.pages_per_seq - pl.dev_pages_per_seq;
    CHECK(page == 16384 && pl.n_dev_groups == 13);
    in.dev_mem_free = 1000 * page + page / 2;
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECKF(f.n_dev_pages == 1000 && f.budget_bytes == (1000 + hpps) * page, "%lld %lld",
           (long long)f.n_dev_pages, (long long)f.budget_bytes);
    // The length lowered to what the device side holds: 13 layers x 76 blocks = 988 pages at
    // 1,216 positions (77 blocks, 1,001 pages, at 1,217).
    CHECKF(f.lowered && f.max_model_len == 1216, "%lld", (long long)f.max_model_len);
    q.budget_bytes = f.budget_bytes;
    q.dev_pages = f.n_dev_pages; // the pool takes the device side as fitted
    REQUIRE(gl_kv_plan_compute(&cfg, &q, f.max_model_len, &pl, &err) == GL_OK);
    CHECK(pl.n_dev_pages == 1000 && pl.n_pages == 1000 + hpps && pl.dev_pages_per_seq == 988);
    // Too little device room for one page of each of its 13 groups: refused, naming the side.
    in.dev_mem_free = 12 * page;
    CHECK(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_E_LIMIT);
    CHECKF(strstr(err.msg, "device side") != NULL, "%s", err.msg);
    // --kv-cache-memory: the total as given, split by the groups' shares.
    in.budget_fixed = (int64_t)1 << 30;
    REQUIRE(gl_kv_fit_compute(&cfg, &p, &in, &f, &err) == GL_OK);
    CHECK(f.n_dev_pages == 0 && f.budget_bytes == ((int64_t)1 << 30) / page * page);
}

static int run_all(void)
{
    RUN_TESTS(test_fp8_codes, test_fp8_row_scale, test_plan_release_shape,
              test_pool_accounting_random, test_split_pool_sides, test_fit_device_sides,
              test_reserve_failure_changes_nothing, test_sliding_pages_follow_window,
              test_trim_after_rejected_drafts, test_prefix_cache_hit_logits,
              test_prefix_sliding_rule, test_fp8_rows_in_pool, test_forward_batch_equals_alone,
              test_forward_batch_refusals, test_forward_batch_logit_rows, test_forward_capture,
              test_fit_release_shape);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "%s/glint_test_kv_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    write_model();
    struct gl_err err = {0};
    struct gl_model_params mp = {.keep_quant = 1};
    GL_ASSERT_MSG(gl_model_open(&model, model_path, &mp, &err) == GL_OK, "%s", err.msg);
    int rc = run_all();
    gl_model_delete(model);
    unlink(model_path);
    rmdir(tmp_dir);
    return rc;
}
