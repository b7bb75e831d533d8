// SPDX-License-Identifier: MIT
// glint convert's refusals on micro HF folders written here (vocab 64, E 32, H 4, Hkv 2, D 16,
// F 48, 2 layers): a missing tensor, a wrong shape, an unsupported dtype, a row length that is
// not a whole number of the chosen type's blocks, an unknown type, --vision-out without a
// vision_config, a tokenizer that does not match the embedding table; each error names the
// tensor (or key) and no output file is left behind. Also the vision GGUF check
// (src/vision/vision_gguf.h) on glint's older "muse-glimmer-vision" layout: a patch embedding
// without the temporal axis refused by shape, the temporal layout accepted, a llama.cpp mmproj
// left to gl_vgguf_mmproj_read (tests/unit/test_mmproj.c), no refusal by file name. The
// successful conversions and their parity with glint and llama.cpp are in
// tests/oracle/check_convert.sh.
#include "convert/convert.h"
#include "gguf/gguf.h"
#include "hf_fixture.h"
#include "safetensors/safetensors.h"
#include "test.h"
#include "vision/vision_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_V = 64, T_E = 32, T_H = 4, T_HKV = 2, T_D = 16, T_F = 48, T_L = 2 };

static char g_dir[128], g_out[192];

static void path_of(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", g_dir, name);
}

static void write_text(const char *name, const char *text)
{
    char p[256];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void write_config(void)
{
    write_text("config.json",
               "{\"model_type\": \"muse_glimmer\", \"text_config\": {\"vocab_size\": 64, "
               "\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
               "\"max_position_embeddings\": 256, \"sliding_window\": 4}}");
}

// Writes model.safetensors with the HF names and zero values (they do not matter for these
// refusals). skip: a name left out; bad: a name written with one extra output row (a wrong shape).
static void write_weights(const char *skip, const char *bad)
{
    static const struct t_hf_shape shape = {T_V, T_E, T_H, T_HKV, T_D, T_F, T_L};
    t_hf_write_weights(g_dir, &shape, 0, skip, bad, NULL, NULL, 0);
}

// Runs gl_convert on the folder; checks the status, that the message names `needle` and that
// no output was left behind.
static void expect_refusal(const struct gl_convert_params *p, gl_status want, const char *needle)
{
    struct gl_err err = {0};
    remove(g_out);
    gl_status st = gl_convert(g_dir, g_out, p, &err);
    CHECKF(st == want, "status %s, want %s: %s", gl_status_name(st), gl_status_name(want), err.msg);
    CHECKF(strstr(err.msg, needle) != NULL, "'%s' not in: %s", needle, err.msg);
    CHECKF(access(g_out, F_OK) != 0, "%s was left behind", g_out);
}

TEST(test_missing_tensor)
{
    write_config();
    write_weights("model.language_model.layers.1.mlp.up_proj.weight", NULL);
    struct gl_convert_params p = gl_convert_default_params();
    p.type = "F32";
    expect_refusal(&p, GL_E_FORMAT, "model.language_model.layers.1.mlp.up_proj.weight");
    expect_refusal(&p, GL_E_FORMAT, "missing");
}

TEST(test_wrong_shape)
{
    write_config();
    write_weights(NULL, "model.language_model.layers.0.self_attn.k_proj.weight");
    struct gl_convert_params p = gl_convert_default_params();
    p.type = "F32";
    expect_refusal(&p, GL_E_FORMAT, "layers.0.self_attn.k_proj.weight in ");
    expect_refusal(&p, GL_E_FORMAT, "has shape [33, 32], expected [32, 32]");
}

// A safetensors file by hand: one I32 tensor (valid per the spec, not computable here).
TEST(test_unsupported_dtype)
{
    write_config();
    const char *hdr = "{\"model.language_model.embed_tokens.weight\": {\"dtype\": \"I32\", "
                      "\"shape\": [2, 2], \"data_offsets\": [0, 16]}}";
    char p[256];
    path_of(p, sizeof p, "model.safetensors");
    FILE *f = fopen(p, "wb");
    REQUIRE(f);
    uint64_t n = strlen(hdr);
    uint8_t le[8], zero[16] = {0};
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(n >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, n, f);
    fwrite(zero, 1, sizeof zero, f);
    fclose(f);
    struct gl_convert_params cp = gl_convert_default_params();
    cp.type = "F32";
    expect_refusal(&cp, GL_E_UNSUPPORTED, "model.language_model.embed_tokens.weight");
    expect_refusal(&cp, GL_E_UNSUPPORTED, "dtype I32 is not supported");
}

TEST(test_block_size_and_type)
{
    write_config();
    write_weights(NULL, NULL);
    struct gl_convert_params p = gl_convert_default_params();
    p.type = "Q4_K"; // E = 32 is not a whole 256-element super-block
    expect_refusal(&p, GL_E_UNSUPPORTED, "embed_tokens.weight (token_embd.weight): rows of 32");
    expect_refusal(&p, GL_E_UNSUPPORTED, "Q4_K blocks (256 elements)");
    p.type = "Q3_K";
    expect_refusal(&p, GL_E_INVAL, "unknown type 'Q3_K'");
    p.type = "F32";
    p.vision_type = "Q4_0";
    expect_refusal(&p, GL_E_INVAL, "vision type 'Q4_0'");
    p.vision_type = NULL;
    p.vision_out = g_out; // the check happens before any write, so the same path is fine
    expect_refusal(&p, GL_E_FORMAT, "has no vision_config");
}

TEST(test_tokenizer_mismatch)
{
    write_config();
    write_weights(NULL, NULL);
    struct gl_convert_params p = gl_convert_default_params();
    p.type = "F32";
    char tm[256];
    path_of(tm, sizeof tm, "tokenizer.model");
    remove(tm);
    expect_refusal(&p, GL_E_IO, "tokenizer.model");
    char abs[4096]; // the link's target must not be relative to the test's working directory
    REQUIRE(realpath(t_vocab_path(), abs) != NULL);
    REQUIRE(symlink(abs, tm) == 0);
    expect_refusal(&p, GL_E_FORMAT, "gives 202048 tokens but the embedding table has 64 rows");
    remove(tm);
}

// A vision-like GGUF: v.patch_embd.weight of ne (n_dims dims) plus optional format keys.
static void write_vision(const char *path, uint32_t n_dims, const int64_t *ne, int ours)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", ours ? GL_VGGUF_ARCH : "clip") ==
              GL_OK);
    if (ours) {
        GL_ASSERT(gl_gguf_writer_add_str(w, GL_VGGUF_KEY_FORMAT, GL_VGGUF_FORMAT) == GL_OK);
        GL_ASSERT(gl_gguf_writer_add_u32(w, GL_VGGUF_KEY_TEMPORAL, 2) == GL_OK);
    } else {
        GL_ASSERT(gl_gguf_writer_add_u32(w, "clip.vision.patch_size", 14) == GL_OK);
    }
    GL_ASSERT(gl_gguf_writer_add_tensor(w, GL_VGGUF_PATCH, n_dims, ne, 0) == 0);
    struct gl_err err = {0};
    GL_ASSERT(gl_gguf_writer_write(w, path, 0, NULL, NULL, &err) == GL_OK);
    gl_gguf_writer_delete(w);
}

static gl_status check_file(const char *path, enum gl_vgguf_kind *kind, int64_t *frames,
                            struct gl_err *err)
{
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    gl_status st = gl_gguf_open(&g, path, &op, err);
    if (st != GL_OK)
        return st;
    *kind = gl_vgguf_kind(g, frames);
    st = gl_vgguf_check(path, g, err);
    gl_gguf_close(g);
    return st;
}

TEST(test_vision_gguf_check)
{
    char p[256];
    struct gl_err err = {0};
    enum gl_vgguf_kind kind;
    int64_t frames = -1;
    // llama.cpp's mmproj form: conv2d kernel ne [14, 14, 3, 8] (temporal slabs summed): under
    // "clip" it is an mmproj, checked by gl_vgguf_mmproj_read instead.
    const int64_t summed[4] = {14, 14, 3, 8};
    path_of(p, sizeof p, "mmproj-summed.gguf");
    write_vision(p, 4, summed, 0);
    CHECK(check_file(p, &kind, &frames, &err) == GL_OK);
    CHECK(kind == GL_VGGUF_SUMMED && frames == 1);
    // The same kernel in glint's older layout: refused, video could not work.
    write_vision(p, 4, summed, 1);
    CHECK(check_file(p, &kind, &frames, &err) == GL_E_UNSUPPORTED);
    CHECKF(strstr(err.msg, "no temporal axis") && strstr(err.msg, "video cannot work") &&
               strstr(err.msg, "glint convert HF_DIR --out TEXT.gguf --vision-out"),
           "%s", err.msg);
    // Ours: ne [196, 3, 2, 8].
    const int64_t temporal[4] = {196, 3, 2, 8};
    path_of(p, sizeof p, "vision-temporal.gguf");
    write_vision(p, 4, temporal, 1);
    CHECK(check_file(p, &kind, &frames, &err) == GL_OK);
    CHECK(kind == GL_VGGUF_TEMPORAL && frames == 2);
    // The same bytes as a 2-D [1176, 8] weight also count as temporal.
    const int64_t flat[2] = {1176, 8};
    write_vision(p, 2, flat, 1);
    CHECK(check_file(p, &kind, &frames, &err) == GL_OK && kind == GL_VGGUF_TEMPORAL);
    // Another size: refused as malformed.
    const int64_t odd[2] = {100, 8};
    write_vision(p, 2, odd, 1);
    CHECK(check_file(p, &kind, &frames, &err) == GL_E_FORMAT && kind == GL_VGGUF_UNKNOWN);
    // No refusal by file name any more (the released mmproj-kquant.gguf loads).
    path_of(p, sizeof p, "mmproj-kquant.gguf");
    write_vision(p, 4, temporal, 1);
    CHECK(check_file(p, &kind, &frames, &err) == GL_OK);
    CHECK(gl_vgguf_check("/nowhere/MMPROJ-KQUANT.gguf", NULL, &err) == GL_OK);
    // Not a vision GGUF at all: no opinion.
    CHECK(gl_vgguf_check("/nowhere/model.gguf", NULL, &err) == GL_OK);
}

// The HF -> GGUF vision name map (the one convert writes and the loader reads back) and the
// config reader's refusals.
TEST(test_vision_gguf_names_and_config)
{
    char gg[128];
    static const char *const pairs[][2] = {
        {"model.vision_tower.patch_embedder.patch_embedding.weight", "v.patch_embd.weight"},
        {"model.vision_tower.patch_embedder.position_embedding_table.weight",
         "v.position_embd.weight"},
        {"model.vision_tower.ln_post.bias", "v.post_ln.bias"},
        {"model.vision_tower.layers.0.norm1.weight", "v.blk.0.ln1.weight"},
        {"model.vision_tower.layers.12.attn.q_proj.bias", "v.blk.12.attn_q.bias"},
        {"model.vision_tower.layers.49.attn.proj.weight", "v.blk.49.attn_out.weight"},
        {"model.vision_tower.layers.7.mlp.fc2.weight", "v.blk.7.ffn_down.weight"},
        {"model.vision_adapter.fc1.weight", "mm.0.weight"},
        {"model.vision_projection.weight", "mm.2.weight"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        CHECKF(gl_vgguf_tensor_name(pairs[i][0], gg, sizeof gg) == 0 && !strcmp(gg, pairs[i][1]),
               "%s -> %s", pairs[i][0], gg);
    static const char *const bad[] = {
        "model.vision_tower.layers.x.norm1.weight", "model.vision_tower.layers.3.norm3.weight",
        "model.vision_tower.layers.3.norm1.scale",  "model.vision_tower.layers.3",
        "model.language_model.embed_tokens.weight", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(gl_vgguf_tensor_name(bad[i], gg, sizeof gg) == -1, "'%s' mapped to %s", bad[i], gg);
    CHECK(gl_vgguf_tensor_name(pairs[3][0], gg, 8) == -1); // does not fit
    // config: ours with defaults for absent keys; a clip mmproj is not ours
    char p[256];
    struct gl_err err = {0};
    const int64_t temporal[4] = {196, 3, 2, 8};
    struct gl_vision_config cfg;
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    path_of(p, sizeof p, "vision-temporal.gguf");
    write_vision(p, 4, temporal, 1);
    REQUIRE(gl_gguf_open(&g, p, &op, &err) == GL_OK);
    CHECKF(gl_vgguf_config(g, &cfg, &err) == GL_OK && cfg.hidden == 1536 && cfg.n_layers == 50 &&
               cfg.head_dim == 96 && cfg.patch_frames == 2,
           "%s", err.msg);
    gl_gguf_close(g);
    path_of(p, sizeof p, "mmproj-summed.gguf");
    write_vision(p, 4, temporal, 0);
    REQUIRE(gl_gguf_open(&g, p, &op, &err) == GL_OK);
    CHECK(gl_vgguf_config(g, &cfg, &err) == GL_E_FORMAT);
    CHECKF(strstr(err.msg, "not a vision GGUF written by glint convert"), "%s", err.msg);
    gl_gguf_close(g);
}

static void cleanup(void)
{
    static const char *const files[] = {"config.json",          "model.safetensors",
                                        "tokenizer.model",      "mmproj-summed.gguf",
                                        "vision-temporal.gguf", "mmproj-kquant.gguf"};
    char p[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        path_of(p, sizeof p, files[i]);
        remove(p);
    }
    remove(g_out);
    rmdir(g_dir);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/glint_test_convert_%d", (int)getpid());
    snprintf(g_out, sizeof g_out, "%s.out.gguf", g_dir);
    mkdir(g_dir, 0755);
    atexit(cleanup);
    RUN_TESTS(test_missing_tensor, test_wrong_shape, test_unsupported_dtype,
              test_block_size_and_type, test_tokenizer_mismatch, test_vision_gguf_check,
              test_vision_gguf_names_and_config);
}
