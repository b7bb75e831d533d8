// SPDX-License-Identifier: MIT
// DFlash drafter tests (src/model/dflash.h) against the micro target of micro_model.h (vocab 512,
// E 64, 4 layers) and a micro drafter written here (H 4, Hkv 2, D 16, F 96, 2 blocks, window 8,
// target layers {0, 1, 2} stored as 1, 2, 3, mask id 500, block 16):
// - the loader's refusals, each naming what is wrong: wrong arch, missing / mistyped / zero
//   target_layers, a mis-shaped and a missing tensor, an unknown extra tensor (a variant), a
//   truncated file; the target check: a target layer past the target's depth, a mask id outside
//   its vocabulary;
// - incremental context: appending the context in chunks gives bit-identical block logits to one
//   append, a rollback (truncate) equals never having appended, and the block depends on the
//   context and on the bidirectional rule (causal within the block changes the logits);
// - the HF assistant folder (config.json + model.safetensors, the same weights under their HF
//   names): the config equals the GGUF's and the block logits are bit-identical; its refusals,
//   each naming the file and what is wrong: no / invalid / foreign config.json, a mistyped key,
//   layer_types of the wrong length, a negative target layer id, a missing, a mis-shaped and an
//   unknown tensor, a truncated model.safetensors.
// Oracle mode (tests/oracle/check_dflash_torch.sh): test_dflash --oracle TARGET DRAFT OUTDIR
// [--causal] ID... runs the target over the ids capturing the drafter's target layers, appends
// them as the context, drafts one block with the last id as anchor and writes OUTDIR/ctx.f32
// (n-1 x n_target*E: the context is every id but the anchor), hidden.f32 (B x E), logits.f32
// (B x n_vocab).
#include "kv/kv.h"
#include "micro_dflash.h"
#include "micro_model.h"
#include "model/dflash.h"
#include "safetensors/safetensors.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dpath[256];
static char g_hdir[256]; // the HF folder of test_hf_folder

static gl_status try_load(const struct dknobs *kn, struct gl_dflash **out, struct gl_err *err)
{
    write_drafter(g_dpath, kn);
    return gl_dflash_open(out, g_dpath, err);
}

// Loads a broken drafter and expects status st with `needle` in the message.
static void expect_refusal(const struct dknobs *kn, gl_status want, const char *needle)
{
    struct gl_dflash *d = NULL;
    struct gl_err err = {0};
    gl_status st = try_load(kn, &d, &err);
    CHECKF(st == want && strstr(err.msg, needle), "want %s '%s', got %s: %s", gl_status_name(want),
           needle, gl_status_name(st), err.msg);
    CHECK(d == NULL);
    gl_dflash_delete(d);
}

TEST(test_load_ok)
{
    struct dknobs kn = good_knobs();
    struct gl_dflash *d = NULL;
    struct gl_err err = {0};
    gl_status st = try_load(&kn, &d, &err);
    REQUIRE(st == GL_OK);
    CHECK(d->cfg.n_layer == D_L && d->cfg.n_embd == T_E && d->cfg.n_head == D_H);
    CHECK(d->cfg.n_target == 3 && d->cfg.target_layers[0] == 0 && d->cfg.target_layers[2] == 2);
    CHECK(d->cfg.mask_token_id == D_MASK && d->cfg.block_size == D_BLOCK && d->cfg.window == 8);
    CHECK(fabsf(d->cfg.kq_scale - 0.25f) < 1e-7f);
    CHECK(gl_dflash_check_target(d, g_model, &err) == GL_OK);
    gl_dflash_delete(d);
}

TEST(test_refusals)
{
    struct dknobs kn = good_knobs();
    kn.arch = "muse-glimmer";
    expect_refusal(&kn, GL_E_UNSUPPORTED, "general.architecture is 'muse-glimmer'");
    kn = good_knobs();
    kn.n_targets = -1;
    expect_refusal(&kn, GL_E_FORMAT, "dflash.target_layers is missing");
    kn = good_knobs();
    kn.targets[1] = 0; // stored ids are >= 1 (the input of layer id)
    expect_refusal(&kn, GL_E_FORMAT, "target_layers[1] = 0");
    kn = good_knobs();
    kn.targets_f32 = 1;
    expect_refusal(&kn, GL_E_FORMAT, "target_layers holds f32");
    kn = good_knobs();
    kn.bad_shape = "blk.1.attn_k.weight";
    expect_refusal(&kn, GL_E_FORMAT, "blk.1.attn_k.weight has shape [65");
    kn = good_knobs();
    kn.omit = "blk.0.ffn_down.weight";
    expect_refusal(&kn, GL_E_FORMAT, "blk.0.ffn_down.weight is missing");
    kn = good_knobs();
    kn.extra = "d2t";
    expect_refusal(&kn, GL_E_UNSUPPORTED, "tensor d2t is not part");
    kn = good_knobs();
    kn.bad_shape = "fc.weight"; // the fc input must be n_target * E
    expect_refusal(&kn, GL_E_FORMAT, "fc.weight has shape [193");

    // Truncated: every prefix of a sample of lengths must be refused cleanly by open.
    kn = good_knobs();
    write_drafter(g_dpath, &kn);
    size_t n = 0;
    uint8_t *bytes = t_read_file(g_dpath, &n);
    REQUIRE(bytes && n > 64);
    const size_t cuts[] = {0, 7, 24, 100, n / 3, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        FILE *f = fopen(g_dpath, "wb");
        REQUIRE(f);
        CHECK(fwrite(bytes, 1, cuts[i], f) == cuts[i]);
        fclose(f);
        struct gl_dflash *d = NULL;
        struct gl_err err = {0};
        gl_status st = gl_dflash_open(&d, g_dpath, &err);
        CHECKF(st != GL_OK && d == NULL && err.msg[0], "cut at %zu: %s", cuts[i],
               gl_status_name(st));
    }
    free(bytes);

    // Target mismatches: layer 4's output does not exist in a 4-layer target (stored 5); the
    // mask id must be in the target vocabulary.
    struct gl_dflash *d = NULL;
    struct gl_err err = {0};
    kn = good_knobs();
    kn.targets[2] = 5;
    REQUIRE(try_load(&kn, &d, &err) == GL_OK);
    CHECK(gl_dflash_check_target(d, g_model, &err) == GL_E_INVAL &&
          strstr(err.msg, "target has 4 layers"));
    gl_dflash_delete(d);
    kn = good_knobs();
    kn.mask = T_V;
    REQUIRE(try_load(&kn, &d, &err) == GL_OK);
    struct gl_dflash_ctx *c = NULL;
    CHECK(gl_dflash_ctx_new(&c, d, g_model, 32, 1, &err) == GL_E_INVAL &&
          strstr(err.msg, "mask_token_id 512"));
    CHECK(c == NULL);
    gl_dflash_delete(d);
}

// Context rows: deterministic pseudo-random hidden states (n x 3E).
static void ctx_rows(float *h, int64_t n, int seed)
{
    for (int64_t i = 0; i < n * 3 * T_E; i++)
        h[i] = hval(100 + seed, i / (3 * T_E), i % (3 * T_E)) * 2.0f;
}

TEST(test_incremental)
{
    struct dknobs kn = good_knobs();
    struct gl_dflash *d = NULL;
    struct gl_err err = {0};
    REQUIRE(try_load(&kn, &d, &err) == GL_OK);
    struct gl_dflash_ctx *c = NULL;
    REQUIRE(gl_dflash_ctx_new(&c, d, g_model, 32, 2, &err) == GL_OK);
    enum { N = 27 };
    static float h[(N + 5) * 3 * T_E];
    ctx_rows(h, N + 5, 1);
    static float la[D_BLOCK * T_V], lb[D_BLOCK * T_V], lc[D_BLOCK * T_V];
    struct gl_dflash_seq *a = NULL, *b = NULL;
    REQUIRE(gl_dflash_seq_new(&a, d, 256, &err) == GL_OK);
    REQUIRE(gl_dflash_seq_new(&b, d, 256, &err) == GL_OK);
    // a: all at once; b: 1 + 3 + rest, then 5 more rows rolled back.
    REQUIRE(gl_dflash_append(c, a, h, N, &err) == GL_OK);
    REQUIRE(gl_dflash_append(c, b, h, 1, &err) == GL_OK);
    REQUIRE(gl_dflash_append(c, b, h + 1 * 3 * T_E, 3, &err) == GL_OK);
    REQUIRE(gl_dflash_append(c, b, h + 4 * 3 * T_E, N - 4 + 5, &err) == GL_OK);
    CHECK(gl_dflash_seq_len(b) == N + 5);
    REQUIRE(gl_dflash_seq_truncate(b, N, &err) == GL_OK);
    REQUIRE(gl_dflash_block(c, a, 42, D_BLOCK, NULL, la, &err) == GL_OK);
    REQUIRE(gl_dflash_block(c, b, 42, D_BLOCK, NULL, lb, &err) == GL_OK);
    CHECK(memcmp(la, lb, sizeof la) == 0);
    // The anchor, the context and the block rule all move the logits.
    REQUIRE(gl_dflash_block(c, a, 43, D_BLOCK, NULL, lc, &err) == GL_OK);
    CHECK(memcmp(la, lc, sizeof la) != 0);
    gl_dflash__set_block_causal(c, 1);
    REQUIRE(gl_dflash_block(c, a, 42, D_BLOCK, NULL, lc, &err) == GL_OK);
    gl_dflash__set_block_causal(c, 0);
    CHECK(memcmp(la, lc, T_V * 4) != 0); // row 0 loses the mask rows after it
    REQUIRE(gl_dflash_seq_truncate(a, N - 1, &err) == GL_OK);
    REQUIRE(gl_dflash_block(c, a, 42, D_BLOCK, NULL, lc, &err) == GL_OK);
    CHECK(memcmp(la, lc, sizeof la) != 0);
    // Contract errors.
    CHECK(gl_dflash_block(c, a, T_V, 4, NULL, lc, &err) == GL_E_INVAL);
    CHECK(gl_dflash_block(c, a, 1, D_BLOCK + 1, NULL, lc, &err) == GL_E_INVAL);
    CHECK(gl_dflash_append(c, a, h, 33, &err) == GL_E_INVAL);
    CHECK(gl_dflash_seq_truncate(a, N + 3, &err) == GL_E_INVAL);
    gl_dflash_seq_delete(a);
    gl_dflash_seq_delete(b);
    gl_dflash_ctx_delete(c);
    gl_dflash_delete(d);
}

// ---- HF assistant folder ----

// config.json of the micro drafter, as transformers' save_pretrained writes it; `edit` is a
// replacement for the whole text (NULL: the good one).
static const char k_good_config[] =
    "{\"architectures\": [\"MuseGlimmerAssistantModel\"], \"model_type\": "
    "\"muse_glimmer_assistant\", \"hidden_size\": 64, \"intermediate_size\": 96, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
    "\"head_dim\": 16, \"rms_norm_eps\": 1e-05, \"rope_parameters\": {\"rope_type\": "
    "\"default\", \"rope_theta\": 10000.0}, \"max_position_embeddings\": 512, "
    "\"sliding_window\": 8, \"layer_types\": [\"sliding_attention\", \"sliding_attention\"], "
    "\"hidden_act\": \"silu\", \"block_size\": 16, \"mask_token_id\": 500, "
    "\"target_layer_ids\": [0, 1, 2], \"dtype\": \"float32\"}";

// GGUF -> HF names, written out here from HF-ASST's modeling_muse_glimmer_assistant.py
// (MuseGlimmerAssistantModel: encoder.{fc, output_norm_enc}, layers.N.{input_layernorm,
// self_attn.*, post_attention_layernorm, mlp.*}, norm) rather than taken from dflash_hf.c, so a
// wrong map there fails this test. An unmapped name is kept.
static void hf_name(const char *gg, char *out, size_t cap)
{
    static const char *const map[][2] = {
        {"fc", "encoder.fc"},
        {"enc.output_norm", "encoder.output_norm_enc"},
        {"output_norm", "norm"},
        {"attn_norm", "input_layernorm"},
        {"attn_q", "self_attn.q_proj"},
        {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},
        {"attn_output", "self_attn.o_proj"},
        {"attn_q_norm", "self_attn.q_norm"},
        {"attn_k_norm", "self_attn.k_norm"},
        {"ffn_norm", "post_attention_layernorm"},
        {"ffn_gate", "mlp.gate_proj"},
        {"ffn_up", "mlp.up_proj"},
        {"ffn_down", "mlp.down_proj"},
    };
    int l = -1, n = 0;
    char role[32] = "";
    if (sscanf(gg, "blk.%d.%31[a-z_].weight%n", &l, role, &n) != 2 || gg[n]) {
        l = -1;
        snprintf(role, sizeof role, "%.*s", (int)(strlen(gg) > 7 ? strlen(gg) - 7 : 0), gg);
    }
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        if (strcmp(role, map[i][0]) != 0)
            continue;
        if (l >= 0)
            snprintf(out, cap, "layers.%d.%s.weight", l, map[i][1]);
        else
            snprintf(out, cap, "%s.weight", map[i][1]);
        return;
    }
    snprintf(out, cap, "%.63s", gg);
}

// The micro drafter of kn (write_drafter's tensors, values and knobs) as an HF folder in g_hdir:
// every tensor under its HF name (an unmapped extra keeps its own name), HF shapes [out, in].
static void write_folder(const struct dknobs *kn, const char *config)
{
    write_drafter(g_dpath, kn); // fills g_t (the GGUF is a by-product)
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", g_hdir);
    FILE *f = fopen(p, "wb");
    GL_ASSERT(f);
    fputs(config ? config : k_good_config, f);
    fclose(f);
    struct gl_safetensors_writer *w = gl_safetensors_writer_new();
    struct gl_err err = {0};
    GL_ASSERT(w);
    for (int i = 0; i < g_nt; i++) {
        char hn[160];
        hf_name(g_t[i].name, hn, sizeof hn);
        const int64_t shape[2] = {g_t[i].ne[1] ? g_t[i].ne[1] : g_t[i].ne[0], g_t[i].ne[0]};
        GL_ASSERT(gl_safetensors_writer_add_tensor(w, hn, GL_SAFETENSORS_DTYPE_F32,
                                                   g_t[i].ne[1] ? 2 : 1, shape, &err) == i);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", g_hdir);
    GL_ASSERT_MSG(gl_safetensors_writer_write(w, p, fill, NULL, &err) == GL_OK, "%s", err.msg);
    gl_safetensors_writer_delete(w);
}

static void expect_hf_refusal(const struct dknobs *kn, const char *config, gl_status want,
                              const char *needle)
{
    write_folder(kn, config);
    struct gl_dflash *d = NULL;
    struct gl_err err = {0};
    gl_status st = gl_dflash_open(&d, g_hdir, &err);
    CHECKF(st == want && strstr(err.msg, needle), "want %s '%s', got %s: %s", gl_status_name(want),
           needle, gl_status_name(st), err.msg);
    CHECK(d == NULL);
    gl_dflash_delete(d);
}

// Block logits of d after 27 context rows (anchor 42).
static void folder_logits(const struct gl_dflash *d, float *lg)
{
    struct gl_err err = {0};
    struct gl_dflash_ctx *c = NULL;
    struct gl_dflash_seq *s = NULL;
    static float h[27 * 3 * T_E];
    ctx_rows(h, 27, 3);
    REQUIRE(gl_dflash_ctx_new(&c, d, g_model, 32, 1, &err) == GL_OK);
    REQUIRE(gl_dflash_seq_new(&s, d, 256, &err) == GL_OK);
    REQUIRE(gl_dflash_append(c, s, h, 27, &err) == GL_OK);
    REQUIRE(gl_dflash_block(c, s, 42, D_BLOCK, NULL, lg, &err) == GL_OK);
    gl_dflash_seq_delete(s);
    gl_dflash_ctx_delete(c);
}

// The engine's storage of the context (model/dflash.h): a paged gl_kv_pool shaped by
// gl_dflash_kv_config with 4-position pages, rows appended in uneven chunks through
// gl_dflash_append_kv + commit (out-of-window pages released), against the private full store:
// every block bit-identical, the sliding group holding at most the window's pages, and a pool
// without a free page refusing the reservation (the engine then stops that sequence drafting).
TEST(test_paged)
{
    struct dknobs kn = good_knobs();
    struct gl_dflash *d = NULL;
    struct gl_err err = {0};
    REQUIRE(try_load(&kn, &d, &err) == GL_OK);
    struct gl_dflash_ctx *c = NULL;
    REQUIRE(gl_dflash_ctx_new(&c, d, g_model, 32, 2, &err) == GL_OK);
    struct gl_model_config mc;
    gl_dflash_kv_config(d, &mc);
    struct gl_kv_params kp = {.block_size = 4, .dtype = GL_KV_F32};
    struct gl_kv_plan pl;
    kp.budget_bytes = 1;
    REQUIRE(gl_kv_plan_compute(&mc, &kp, 256, &pl, &err) == GL_OK);
    CHECK(pl.n_groups == 1 && pl.n_sliding_groups == 1); // both micro layers slide (window 8)
    // Room for the window's blocks (blocks_touched(8, 4) = 3) plus a 23-row chunk (7 blocks).
    kp.budget_bytes = (int64_t)pl.page_bytes * 10;
    struct gl_kv_pool *pool = NULL;
    struct gl_kv_seq *ks = NULL;
    REQUIRE(gl_kv_pool_new(&pool, &mc, &kp, &err) == GL_OK);
    REQUIRE(gl_kv_seq_new(pool, &ks, &err) == GL_OK);
    struct gl_dflash_seq *ref = NULL;
    REQUIRE(gl_dflash_seq_new(&ref, d, 256, &err) == GL_OK);
    static float h[32 * 3 * T_E], la[D_BLOCK * T_V], lb[D_BLOCK * T_V];
    struct gl_kv_view views[D_L];
    int64_t len = 0, held_max = 0;
    int same = 1, steps = 0;
    while (len < 200) {
        const int64_t n = 1 + (steps * 7) % 23;
        for (int64_t i = 0; i < n * 3 * T_E; i++)
            h[i] = hval(100, len + i / (3 * T_E), i % (3 * T_E)) * 2.0f;
        REQUIRE(gl_kv_seq_reserve(ks, n, &err) == GL_OK);
        for (int l = 0; l < D_L; l++)
            views[l] = gl_kv_seq_view(ks, l);
        struct gl_dflash_kv kv = {views, gl_kv_seq_len(ks)};
        REQUIRE(gl_dflash_append_kv(c, &kv, h, n, &err) == GL_OK);
        gl_kv_seq_commit(ks, NULL, n);
        REQUIRE(gl_dflash_append(c, ref, h, n, &err) == GL_OK);
        len += n;
        steps++;
        const int64_t held = gl_kv_seq_pages_held(ks, 1);
        held_max = held > held_max ? held : held_max;
        for (int l = 0; l < D_L; l++)
            views[l] = gl_kv_seq_view(ks, l);
        kv.len = gl_kv_seq_len(ks);
        REQUIRE(gl_dflash_block_kv(c, &kv, (int32_t)(len % 400), D_BLOCK, NULL, la, &err) == GL_OK);
        REQUIRE(gl_dflash_block(c, ref, (int32_t)(len % 400), D_BLOCK, NULL, lb, &err) == GL_OK);
        same &= memcmp(la, lb, sizeof la) == 0;
    }
    CHECKF(same, "paged blocks differ from the full store's over %d appends", steps);
    CHECKF(held_max <= 3, "the sliding group held %lld pages after a commit (window 8: 3)",
           (long long)held_max);
    // A pool with no page left refuses (GL_E_LIMIT) and changes nothing.
    struct gl_kv_seq *other = NULL;
    REQUIRE(gl_kv_seq_new(pool, &other, &err) == GL_OK);
    CHECK(gl_kv_seq_reserve(other, 4 * (10 - held_max) + 1, &err) == GL_E_LIMIT);
    CHECK(gl_kv_seq_len(other) == 0 && gl_kv_seq_pages_held(other, 1) == 0);
    // Views that are not f32 rows are refused.
    views[0].dtype = GL_KV_F16;
    struct gl_dflash_kv bad = {views, gl_kv_seq_len(ks)};
    CHECK(gl_dflash_block_kv(c, &bad, 1, D_BLOCK, NULL, la, &err) == GL_E_INVAL);
    gl_kv_seq_free(other);
    gl_kv_seq_free(ks);
    CHECK(gl_kv_pool_audit(pool) == 0);
    gl_kv_pool_free(pool);
    gl_dflash_seq_delete(ref);
    gl_dflash_ctx_delete(c);
    gl_dflash_delete(d);
}

TEST(test_hf_folder)
{
    struct dknobs kn = good_knobs();
    struct gl_err err = {0};
    struct gl_dflash *dg = NULL, *dh = NULL;
    write_folder(&kn, NULL);
    REQUIRE(gl_dflash_open(&dg, g_dpath, &err) == GL_OK);
    gl_status st = gl_dflash_open(&dh, g_hdir, &err);
    CHECKF(st == GL_OK, "%s", err.msg);
    REQUIRE(st == GL_OK);
    CHECK(memcmp(&dg->cfg, &dh->cfg, sizeof dg->cfg) == 0);
    static float lg[D_BLOCK * T_V], lh[D_BLOCK * T_V];
    folder_logits(dg, lg);
    folder_logits(dh, lh);
    CHECK(memcmp(lg, lh, sizeof lg) == 0);
    gl_dflash_delete(dg);
    gl_dflash_delete(dh);

    // config.json
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", g_hdir);
    write_folder(&kn, NULL);
    unlink(p);
    dh = NULL;
    CHECK(gl_dflash_open(&dh, g_hdir, &err) == GL_E_IO && strstr(err.msg, "config.json: cannot"));
    expect_hf_refusal(&kn, "{\"model_type\": \"muse_glimmer_assistant\",", GL_E_FORMAT,
                      "config.json: invalid JSON");
    expect_hf_refusal(&kn, "{\"model_type\": \"muse_glimmer\"}", GL_E_UNSUPPORTED,
                      "not a DFlash assistant config");
    char cfg[2048];
    static const struct {
        const char *from, *to, *needle;
        gl_status want;
    } edits[] = {
        {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": \"2\"",
         "num_key_value_heads is not an integer", GL_E_FORMAT},
        {"[\"sliding_attention\", \"sliding_attention\"]", "[\"sliding_attention\"]",
         "layer_types must be a list of num_hidden_layers = 2", GL_E_FORMAT},
        {"[0, 1, 2]", "[0, -1, 2]", "target_layer_ids[1] is not a layer id", GL_E_FORMAT},
        {"\"silu\"", "\"gelu\"", "hidden_act must be \"silu\"", GL_E_UNSUPPORTED},
        {"\"default\"", "\"yarn\"", "rope_parameters must be", GL_E_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        const char *at = strstr(k_good_config, edits[i].from);
        REQUIRE(at);
        snprintf(cfg, sizeof cfg, "%.*s%s%s", (int)(at - k_good_config), k_good_config, edits[i].to,
                 at + strlen(edits[i].from));
        expect_hf_refusal(&kn, cfg, edits[i].want, edits[i].needle);
    }

    // Tensors: named by their HF name and file.
    kn = good_knobs();
    kn.omit = "blk.0.ffn_down.weight";
    expect_hf_refusal(&kn, NULL, GL_E_FORMAT,
                      "layers.0.mlp.down_proj.weight (blk.0.ffn_down.weight) is missing in");
    kn = good_knobs();
    kn.bad_shape = "blk.1.attn_k.weight";
    expect_hf_refusal(&kn, NULL, GL_E_FORMAT, "layers.1.self_attn.k_proj.weight in ");
    expect_hf_refusal(&kn, NULL, GL_E_FORMAT,
                      "model.safetensors has shape [32, 65], expected [32, 64]");
    kn = good_knobs();
    kn.extra = "lm_head.weight";
    expect_hf_refusal(&kn, NULL, GL_E_UNSUPPORTED, "tensor lm_head.weight in ");

    // A truncated model.safetensors: every cut refused with a message, never a crash.
    kn = good_knobs();
    write_folder(&kn, NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", g_hdir);
    size_t n = 0;
    uint8_t *bytes = t_read_file(p, &n);
    REQUIRE(bytes && n > 64);
    const size_t cuts[] = {0, 7, 8, 100, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        FILE *f = fopen(p, "wb");
        REQUIRE(f);
        CHECK(fwrite(bytes, 1, cuts[i], f) == cuts[i]);
        fclose(f);
        dh = NULL;
        st = gl_dflash_open(&dh, g_hdir, &err);
        CHECKF(st != GL_OK && dh == NULL && strstr(err.msg, "model.safetensors"), "cut at %zu: %s",
               cuts[i], err.msg);
    }
    free(bytes);
}

// ---- oracle mode ----

struct cap {
    const struct gl_dflash_config *cf;
    float *ctx; // n x n_target*E
    int64_t n;
};

static void on_dump(void *user, int layer, int64_t pos0, const float *x, int64_t n_tok,
                    int64_t width)
{
    struct cap *c = user;
    const int64_t E = c->cf->n_embd, TE = (int64_t)c->cf->n_target * E;
    for (int t = 0; t < c->cf->n_target; t++) {
        if (c->cf->target_layers[t] != layer)
            continue;
        GL_ASSERT(width == E);
        for (int64_t r = 0; r < n_tok && pos0 + r < c->n; r++)
            memcpy(c->ctx + (pos0 + r) * TE + t * E, x + r * E, (size_t)E * sizeof(float));
    }
}

static int write_f32(const char *dir, const char *name, const float *x, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        return 1;
    int bad = fwrite(x, sizeof(float), n, f) != n;
    return (fclose(f) != 0) | bad;
}

static int oracle_main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr,
                "usage: test_dflash --oracle TARGET DRAFT OUTDIR [--causal] [--block N] ID...\n");
        return 2;
    }
    const char *tpath = argv[2], *dpath = argv[3], *out = argv[4];
    int ai = 5, causal = 0;
    int64_t n_block = 0; // 0: the drafter's block_size (the engine drafts k tokens with k + 1)
    if (!strcmp(argv[ai], "--causal")) {
        causal = 1;
        ai++;
    }
    if (ai + 1 < argc && !strcmp(argv[ai], "--block")) {
        n_block = atoi(argv[ai + 1]);
        ai += 2;
    }
    const int64_t n = argc - ai;
    if (n < 2) {
        fprintf(stderr, "test_dflash --oracle: need at least 2 ids\n");
        return 2;
    }
    int32_t *ids = calloc((size_t)n, sizeof *ids);
    for (int64_t i = 0; i < n; i++)
        ids[i] = atoi(argv[ai + i]);
    struct gl_err err = {0};
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    struct gl_dflash *d = NULL;
    struct gl_model_ctx *mc = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_dflash_ctx *dc = NULL;
    struct gl_dflash_seq *s = NULL;
    gl_status st = gl_model_open(&m, tpath, &mp, &err);
    if (st == GL_OK)
        st = gl_dflash_open(&d, dpath, &err);
    if (st == GL_OK)
        st = gl_model_ctx_new(&mc, m, (int)n, 1, n, &err);
    if (st == GL_OK)
        st = gl_kv_cache_new(&kv, &m->cfg, n, &err);
    if (st == GL_OK)
        st = gl_dflash_ctx_new(&dc, d, m, (int)n, 1, &err);
    if (st == GL_OK)
        st = gl_dflash_seq_new(&s, d, n, &err);
    if (st != GL_OK) {
        fprintf(stderr, "test_dflash --oracle: %s\n", err.msg);
        return 1;
    }
    const struct gl_dflash_config *cf = &d->cfg;
    const int64_t TE = (int64_t)cf->n_target * cf->n_embd, B = n_block ? n_block : cf->block_size;
    // The context is ids[0..n-2] (their target hidden states); ids[n-1] is the anchor, as when
    // llama.cpp drafts after sampling id_last from the target's last logits.
    struct cap cp = {cf, calloc((size_t)(n * TE), sizeof(float)), n - 1};
    struct gl_model_dump dump = {on_dump, &cp};
    float *hidden = calloc((size_t)(B * cf->n_embd), sizeof(float));
    float *logits = calloc((size_t)(B * m->cfg.n_vocab), sizeof(float));
    st = gl_model_forward(mc, kv, ids, n - 1, 0, NULL, 0, &dump, &err);
    if (st == GL_OK)
        st = gl_dflash_append(dc, s, cp.ctx, n - 1, &err);
    gl_dflash__set_block_causal(dc, causal);
    if (st == GL_OK)
        st = gl_dflash_block(dc, s, ids[n - 1], (int32_t)B, hidden, logits, &err);
    int rc = 0;
    if (st != GL_OK) {
        fprintf(stderr, "test_dflash --oracle: %s\n", err.msg);
        rc = 1;
    } else {
        rc |= write_f32(out, "ctx.f32", cp.ctx, (size_t)((n - 1) * TE));
        rc |= write_f32(out, "hidden.f32", hidden, (size_t)(B * cf->n_embd));
        rc |= write_f32(out, "logits.f32", logits, (size_t)(B * m->cfg.n_vocab));
        printf("oracle: %lld context rows, block %lld, anchor %d, %s block attention\n",
               (long long)(n - 1), (long long)B, ids[n - 1], causal ? "CAUSAL" : "bidirectional");
    }
    free(cp.ctx);
    free(hidden);
    free(logits);
    free(ids);
    gl_dflash_seq_delete(s);
    gl_dflash_ctx_delete(dc);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(mc);
    gl_dflash_delete(d);
    gl_model_delete(m);
    return rc;
}

static void cleanup(void)
{
    unlink(g_dpath);
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", g_hdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", g_hdir);
    unlink(p);
    rmdir(g_hdir);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--oracle"))
        return oracle_main(argc, argv);
    micro_model_setup("dflash_t");
    snprintf(g_dpath, sizeof g_dpath, "%s/glint_dflash_d_%d.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    snprintf(g_hdir, sizeof g_hdir, "%s/glint_dflash_hf_%d",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    GL_ASSERT(mkdir(g_hdir, 0755) == 0);
    atexit(cleanup);
    RUN_TESTS(test_load_ok, test_refusals, test_incremental, test_paged, test_hf_folder);
}
