// SPDX-License-Identifier: MIT
// gl_vgguf_mmproj_read (src/vision/vision_gguf.h) on micro mmproj files in llama.cpp's layout
// written here (hidden 32, 2 heads of 16, ffn 64, 1 block, a 2 x 2 position table, adapter 32,
// projection 48): the good file (with and without glint's full temporal kernel) and one refusal
// per way a hostile file can be wrong: a missing key, a key of the wrong type, an implausible or
// unsupported value, another projector, a missing tensor, a wrong shape, a vector of a quantized
// type, a matrix type without kernels, a non-square position table. Every error names the key or
// tensor. With GLINT_MMPROJ_SEED=PATH the good file is also written there header-only (the
// fuzz_mmproj corpus seed).
#include "gguf/gguf.h"
#include "test.h"
#include "vision/vision_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { H = 32, NH = 2, F = 64, A = 32, OUT = 48, P = 14 };

// One mutation of the good file.
struct mut {
    const char *skip_key;  // not written
    const char *str_key;   // written as the string "x" instead of its type
    const char *u32_key;   // written with u32_val instead of its value
    uint32_t u32_val;      //
    const char *projector; // clip.projector_type (default muse-glimmer)
    const char *skip_t;    // tensor not written
    const char *shape_t;   // tensor written with one more in its outermost dim
    const char *type_t;    // tensor written with type_val
    enum gl_type type_val; //
    int temporal;          // 1: add GL_MMPROJ_PATCH_T
    int64_t n_pos;         // position table rows (default 4)
    float mean;            // image_mean values (default 0.5)
};

static char g_path[128];

static void key_u32(struct gl_gguf_writer *w, const struct mut *m, const char *k, uint32_t v)
{
    if (m->skip_key && !strcmp(m->skip_key, k))
        return;
    if (m->str_key && !strcmp(m->str_key, k))
        GL_ASSERT(gl_gguf_writer_add_str(w, k, "x") == GL_OK);
    else
        GL_ASSERT(gl_gguf_writer_add_u32(
                      w, k, m->u32_key && !strcmp(m->u32_key, k) ? m->u32_val : v) == GL_OK);
}

static void tensor(struct gl_gguf_writer *w, const struct mut *m, const char *name, uint32_t nd,
                   int64_t n0, int64_t n1, int64_t n2, int64_t n3, enum gl_type type)
{
    if (m->skip_t && !strcmp(m->skip_t, name))
        return;
    int64_t ne[4] = {n0, n1, n2, n3};
    if (m->shape_t && !strcmp(m->shape_t, name))
        ne[nd - 1]++; // the outermost dim: any type can have one more row
    if (m->type_t && !strcmp(m->type_t, name))
        type = m->type_val;
    GL_ASSERT(gl_gguf_writer_add_tensor(w, name, nd, ne, (uint32_t)type) >= 0);
}

static void write_mmproj(const char *path, const struct mut *m, int header_only)
{
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    GL_ASSERT(w);
    const float mean[3] = {m->mean ? m->mean : 0.5f, 0.5f, 0.5f}, half[3] = {0.5f, 0.5f, 0.5f};
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.architecture", "clip") == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_str(w, "general.type", "mmproj") == GL_OK);
    if (!m->skip_key || strcmp(m->skip_key, "clip.has_vision_encoder"))
        GL_ASSERT(gl_gguf_writer_add_bool(w, "clip.has_vision_encoder", 1) == GL_OK);
    if (!m->skip_key || strcmp(m->skip_key, "clip.projector_type"))
        GL_ASSERT(gl_gguf_writer_add_str(w, "clip.projector_type",
                                         m->projector ? m->projector : "muse-glimmer") == GL_OK);
    key_u32(w, m, "clip.vision.projection_dim", OUT);
    key_u32(w, m, "clip.vision.image_size", 2 * P * 2);
    key_u32(w, m, "clip.vision.patch_size", P);
    key_u32(w, m, "clip.vision.embedding_length", H);
    key_u32(w, m, "clip.vision.feed_forward_length", F);
    key_u32(w, m, "clip.vision.block_count", 1);
    key_u32(w, m, "clip.vision.attention.head_count", NH);
    key_u32(w, m, "clip.vision.spatial_merge_size", 2);
    if (!m->skip_key || strcmp(m->skip_key, "clip.vision.attention.layer_norm_epsilon")) {
        if (m->str_key && !strcmp(m->str_key, "clip.vision.attention.layer_norm_epsilon"))
            GL_ASSERT(gl_gguf_writer_add_u32(w, "clip.vision.attention.layer_norm_epsilon", 1) ==
                      GL_OK);
        else
            GL_ASSERT(gl_gguf_writer_add_f32(w, "clip.vision.attention.layer_norm_epsilon",
                                             1e-5f) == GL_OK);
    }
    GL_ASSERT(gl_gguf_writer_add_arr(w, "clip.vision.image_mean", GL_GGUF_F32, mean, 3) == GL_OK);
    GL_ASSERT(gl_gguf_writer_add_arr(w, "clip.vision.image_std", GL_GGUF_F32, half, 3) == GL_OK);
    tensor(w, m, "v.patch_embd.weight", 4, P, P, 3, H, GL_TYPE_F32);
    if (m->temporal)
        tensor(w, m, GL_MMPROJ_PATCH_T, 4, P * P, 3, 2, H, GL_TYPE_F32);
    tensor(w, m, "v.position_embd.weight", 2, H, m->n_pos ? m->n_pos : 4, 1, 1, GL_TYPE_F32);
    static const char *const vec[] = {"v.pre_ln.weight", "v.pre_ln.bias", "v.post_ln.weight",
                                      "v.post_ln.bias"};
    for (size_t i = 0; i < 4; i++)
        tensor(w, m, vec[i], 1, H, 1, 1, 1, GL_TYPE_F32);
    static const char *const roles[] = {"ln1",    "ln2",      "attn_q", "attn_k",
                                        "attn_v", "attn_out", "ffn_up", "ffn_down"};
    for (int i = 0; i < 8; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "v.blk.0.%s.weight", roles[i]);
        if (i < 2)
            tensor(w, m, nm, 1, H, 1, 1, 1, GL_TYPE_F32);
        else
            tensor(w, m, nm, 2, i == 7 ? F : H, i == 6 ? F : H, 1, 1, GL_TYPE_Q8_0);
        snprintf(nm, sizeof nm, "v.blk.0.%s.bias", roles[i]);
        tensor(w, m, nm, 1, i == 6 ? F : H, 1, 1, 1, GL_TYPE_F32);
    }
    tensor(w, m, "mm.0.weight", 2, 4 * H, A, 1, 1, GL_TYPE_BF16);
    tensor(w, m, "mm.1.weight", 2, A, A, 1, 1, GL_TYPE_F16);
    tensor(w, m, "mm.2.weight", 2, A, OUT, 1, 1, GL_TYPE_F32);
    struct gl_err err = {0};
    GL_ASSERT(gl_gguf_writer_write(w, path, header_only, NULL, NULL, &err) == GL_OK);
    gl_gguf_writer_delete(w);
}

// Opens the file written with m and reads it; *cfg / *info / err as gl_vgguf_mmproj_read left them.
static gl_status read_with(const struct mut *m, struct gl_vision_config *cfg,
                           struct gl_vgguf_info *info, struct gl_err *err)
{
    write_mmproj(g_path, m, 0);
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    gl_status st = gl_gguf_open(&g, g_path, &op, err);
    if (st == GL_OK)
        st = gl_vgguf_mmproj_read(g, cfg, info, err);
    gl_gguf_close(g);
    return st;
}

TEST(test_good)
{
    struct gl_vision_config c;
    struct gl_vgguf_info info;
    struct gl_err err = {0};
    struct mut m = {0};
    CHECKF(read_with(&m, &c, &info, &err) == GL_OK, "%s", err.msg);
    CHECK(info.mmproj == 1 && info.video == 0);
    CHECK(c.hidden == H && c.n_heads == NH && c.head_dim == H / NH && c.ffn == F &&
          c.n_layers == 1 && c.adapter == A && c.out_dim == OUT && c.pos_h == 2 && c.pos_w == 2 &&
          c.merge == 2 && c.patch_size == P && c.patch_frames == 2 && c.full_every == 4);
    CHECK(c.ln_eps == 1e-5f && c.rope_theta == 10000.0f);
    m.temporal = 1;
    CHECKF(read_with(&m, &c, &info, &err) == GL_OK && info.video == 1, "%s", err.msg);
    const char *seed = getenv("GLINT_MMPROJ_SEED");
    if (seed)
        write_mmproj(seed, &m, 1);
}

// m must be refused with want, and the message must hold each of the needles.
static void refused(const struct mut *m, gl_status want, const char *n1, const char *n2)
{
    struct gl_vision_config c;
    struct gl_vgguf_info info;
    struct gl_err err = {0};
    const gl_status st = read_with(m, &c, &info, &err);
    CHECKF(st == want, "status %d, want %d: %s", (int)st, (int)want, err.msg);
    CHECKF(strstr(err.msg, n1) && (!n2 || strstr(err.msg, n2)), "'%s' / '%s' not in: %s", n1,
           n2 ? n2 : "", err.msg);
}

TEST(test_key_refusals)
{
    refused(&(struct mut){.skip_key = "clip.vision.block_count"}, GL_E_FORMAT,
            "clip.vision.block_count", "missing");
    refused(&(struct mut){.skip_key = "clip.projector_type"}, GL_E_FORMAT, "clip.projector_type",
            "missing");
    refused(&(struct mut){.skip_key = "clip.has_vision_encoder"}, GL_E_FORMAT,
            "clip.has_vision_encoder", "missing");
    refused(&(struct mut){.skip_key = "clip.vision.attention.layer_norm_epsilon"}, GL_E_FORMAT,
            "layer_norm_epsilon", "missing");
    refused(&(struct mut){.str_key = "clip.vision.embedding_length"}, GL_E_FORMAT,
            "clip.vision.embedding_length", "expected u32");
    refused(&(struct mut){.str_key = "clip.vision.attention.layer_norm_epsilon"}, GL_E_FORMAT,
            "layer_norm_epsilon", "expected f32");
    refused(&(struct mut){.u32_key = "clip.vision.feed_forward_length", .u32_val = 0}, GL_E_FORMAT,
            "clip.vision.feed_forward_length", "implausible");
    refused(&(struct mut){.u32_key = "clip.vision.block_count", .u32_val = 1u << 30}, GL_E_FORMAT,
            "clip.vision.block_count", "implausible");
    refused(&(struct mut){.u32_key = "clip.vision.spatial_merge_size", .u32_val = 3},
            GL_E_UNSUPPORTED, "spatial_merge_size", NULL);
    refused(&(struct mut){.u32_key = "clip.vision.attention.head_count", .u32_val = 4},
            GL_E_UNSUPPORTED, "multiple of 16", NULL); // head size 8
    refused(&(struct mut){.projector = "qwen2vl_merger"}, GL_E_UNSUPPORTED, "qwen2vl_merger",
            "another model");
    refused(&(struct mut){.mean = 0.48f}, GL_E_UNSUPPORTED, "clip.vision.image_mean", "0.5");
}

TEST(test_tensor_refusals)
{
    refused(&(struct mut){.skip_t = "v.blk.0.attn_k.bias"}, GL_E_FORMAT, "v.blk.0.attn_k.bias",
            "missing");
    refused(&(struct mut){.skip_t = "mm.2.weight"}, GL_E_FORMAT, "mm.2.weight", "missing");
    refused(&(struct mut){.skip_t = "v.patch_embd.weight"}, GL_E_FORMAT, "v.patch_embd.weight",
            "missing");
    refused(&(struct mut){.shape_t = "v.blk.0.ffn_down.weight"}, GL_E_FORMAT,
            "v.blk.0.ffn_down.weight", "has ne [64, 33], expected [64, 32]");
    refused(&(struct mut){.shape_t = "v.patch_embd.weight"}, GL_E_FORMAT, "v.patch_embd.weight",
            "expected [14, 14, 3, 32]");
    refused(&(struct mut){.temporal = 1, .shape_t = GL_MMPROJ_PATCH_T}, GL_E_FORMAT,
            GL_MMPROJ_PATCH_T, "expected [196, 3, 2, 32]");
    refused(&(struct mut){.shape_t = "mm.1.weight"}, GL_E_FORMAT, "mm.1.weight", "expected");
    refused(&(struct mut){.type_t = "v.pre_ln.bias", .type_val = GL_TYPE_Q8_0}, GL_E_UNSUPPORTED,
            "v.pre_ln.bias is Q8_0", "F32, F16 or BF16");
    refused(&(struct mut){.type_t = "v.blk.0.attn_v.weight", .type_val = GL_TYPE_I8},
            GL_E_UNSUPPORTED, "v.blk.0.attn_v.weight", "no matmul kernel");
    refused(&(struct mut){.n_pos = 5}, GL_E_FORMAT, "v.position_embd.weight", "not a square");
}

int main(void)
{
    snprintf(g_path, sizeof g_path, "/tmp/glint_test_mmproj_%d.gguf", (int)getpid());
    RUN_TESTS(test_good, test_key_refusals, test_tensor_refusals);
    remove(g_path);
}
