// SPDX-License-Identifier: MIT
// model: the vision tower's weights from an HF folder (arch doc §6.6 names), or from glint's vision
// GGUF attached to a model (gl_model_attach_vision; the same tensors under the names of
// vision/vision_gguf.h, matrices [in, out] in ne order = the same bytes), bound into the
// encoder's struct gl_vision_weights. HF stores Linear weights as [out, in] row-major, which is
// the encoder's W[n_out][n_in] row layout, and the vision Q/K rows stay in HF's rotate-half
// order (the encoder applies RoPE in that layout, §6.3 step 5), so matrices are borrowed from
// the mapping as they are (F32/F16/BF16); only data not aligned to its element size is copied.
// LayerNorm weights, biases and the position table are read as f32 (borrowed when stored as
// aligned F32, else converted into owned copies).
#include "model/model.h"
#include "model/model_int.h"
#include "vision/vision_gguf.h"

#include <stdio.h>
#include <string.h>

#define VT "model.vision_tower."

// One vision tensor from either source, shaped as HF stores it: [out, in] for a matrix (a GGUF
// ne list reversed, its trailing dims merged into in: the patch embedding's ne [196, 3, 2, hidden]
// is [hidden, 1176]), [n] for a vector.
struct vis_tensor {
    enum gl_type type;
    const void *data;
    int ndim;
    int64_t shape[2];
    size_t nbytes;
};

// 0 when the folder has no such tensor.
static int vis_from_safetensors(const struct gl_model *m, const char *name, struct vis_tensor *vt)
{
    const struct gl_safetensors_tensor *t = gl_safetensors_find(m->st, name);
    if (!t)
        return 0;
    vt->type = t->dtype == GL_SAFETENSORS_DTYPE_F32   ? GL_TYPE_F32
               : t->dtype == GL_SAFETENSORS_DTYPE_F16 ? GL_TYPE_F16
                                                      : GL_TYPE_BF16;
    vt->data = t->data;
    vt->nbytes = (size_t)t->nbytes;
    vt->ndim = t->ndim > 2 ? 3 : t->ndim; // 3: more dims than any binding wants
    vt->shape[0] = t->ndim > 0 ? t->shape[0] : 1;
    vt->shape[1] = t->ndim > 1 ? t->shape[1] : 0;
    return 1;
}

// *found = 0 when the file has no such tensor; GL_E_UNSUPPORTED for a type the encoder lacks.
static gl_status vis_from_gguf(const struct gl_model *m, const char *name, int want_nd,
                               struct vis_tensor *vt, int *found, struct gl_err *err)
{
    char gg[128];
    int named = gl_vgguf_tensor_name(name, gg, sizeof gg) == 0;
    if (named && m->vision_mmproj && !strcmp(gg, GL_VGGUF_PATCH)) // the full kernel, not the sum
        snprintf(gg, sizeof gg, "%s", GL_MMPROJ_PATCH_T);
    const struct gl_gguf_tensor *t = named ? gl_gguf_find_tensor(m->vision_gguf, gg) : NULL;
    *found = t != NULL;
    if (!t)
        return GL_OK;
    if (!m->vision_mmproj && t->type != GL_TYPE_F32 && t->type != GL_TYPE_F16 &&
        t->type != GL_TYPE_BF16) {
        const struct gl_type_traits *tr = gl_type_traits_of(t->type);
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "model: vision tensor %s in %s is %s; the encoder takes F32, F16 or BF16",
                          gg, m->vision_path, tr && tr->name ? tr->name : "an unknown type");
    }
    vt->type = (enum gl_type)t->type;
    vt->data = t->data;
    vt->nbytes = (size_t)t->n_bytes;
    const uint32_t nd = t->n_dims;
    vt->shape[0] = t->ne[nd - 1];
    vt->shape[1] = 1;
    for (uint32_t d = 0; d + 1 < nd; d++)
        vt->shape[1] *= t->ne[d];
    vt->ndim = nd == 1 ? 1 : want_nd == 2 ? 2 : 3;
    if (nd == 1)
        vt->shape[1] = 0;
    return GL_OK;
}

// The tensor HF calls `name` with shape [d0] (d1 == 0) or [d0, d1] (HF order), from the folder
// or from the attached vision GGUF; else GL_E_FORMAT naming the expected and actual shape.
static gl_status vis_find(const struct gl_model *m, const char *name, int64_t d0, int64_t d1,
                          struct vis_tensor *vt, struct gl_err *err)
{
    const int nd = d1 ? 2 : 1;
    const char *file = m->vision_gguf ? m->vision_path : m->hf_dir;
    int found = 0;
    gl_status st = GL_OK;
    if (m->vision_gguf)
        st = vis_from_gguf(m, name, nd, vt, &found, err);
    else
        found = vis_from_safetensors(m, name, vt);
    if (st != GL_OK)
        return st;
    if (!found)
        return gl_err_set(err, GL_E_FORMAT, "model: vision tensor %s is missing in %s", name, file);
    if (vt->ndim != nd || vt->shape[0] != d0 || (d1 && vt->shape[1] != d1)) {
        char want[64], have[64];
        snprintf(want, sizeof want, "[%lld", (long long)d0);
        if (d1)
            snprintf(want + strlen(want), sizeof want - strlen(want), ", %lld", (long long)d1);
        snprintf(have, sizeof have, "[%lld", (long long)vt->shape[0]);
        if (vt->ndim > 1)
            snprintf(have + strlen(have), sizeof have - strlen(have), ", %lld%s",
                     (long long)vt->shape[1], vt->ndim > 2 ? ", ..." : "");
        strcat(want, "]");
        strcat(have, "]");
        return gl_err_set(err, GL_E_FORMAT,
                          "model: vision tensor %s in %s has shape %s (HF order), expected %s "
                          "(the vision config)",
                          name, file, have, want);
    }
    return GL_OK;
}

// A matrix [n_out][n_in]: borrowed, or copied when its data is not element-aligned.
static gl_status vis_mat(struct gl_model *m, const char *name, int64_t n_out, int64_t n_in,
                         struct gl_vision_mat *out, struct gl_err *err)
{
    struct vis_tensor t;
    gl_status st = vis_find(m, name, n_out, n_in, &t, err);
    if (st != GL_OK)
        return st;
    out->type = t.type;
    out->data = t.data;
    const size_t esz = t.type == GL_TYPE_F32 ? 4 : 2;
    if ((uintptr_t)t.data % esz != 0) {
        void *c = gl_model__own(m, t.nbytes);
        if (!c)
            return gl_err_set(err, GL_E_NOMEM, "model: no memory for a copy of %s", name);
        memcpy(c, t.data, t.nbytes);
        out->data = c;
    }
    return GL_OK;
}

// f32 values of a [d0] or [d0, d1] tensor: borrowed when aligned F32, else an owned f32 copy.
static gl_status vis_f32(struct gl_model *m, const char *name, int64_t d0, int64_t d1,
                         const float **out, struct gl_err *err)
{
    struct vis_tensor t;
    gl_status st = vis_find(m, name, d0, d1, &t, err);
    if (st != GL_OK)
        return st;
    if (t.type == GL_TYPE_F32 && (uintptr_t)t.data % sizeof(float) == 0) {
        *out = t.data;
        return GL_OK;
    }
    const int64_t n = d0 * (d1 ? d1 : 1);
    float *f = gl_model__own(m, (size_t)n * sizeof(float));
    if (!f)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for an f32 copy of %s", name);
    if (t.type == GL_TYPE_F32)
        memcpy(f, t.data, (size_t)n * sizeof(float));
    else // as bind_norm does for HF F16/BF16 norms
        gl_kernels_get()->to_float[t.type](t.data, f, n);
    *out = f;
    return GL_OK;
}

static gl_status bind_layer(struct gl_model *m, int l, struct gl_vision_layer *L,
                            struct gl_err *err)
{
    const struct gl_vision_config *c = &m->vision_cfg;
    const int64_t H = c->hidden, F = c->ffn;
    char nm[160];
    gl_status st = GL_OK;
    const struct {
        const char *suffix;
        const float **dst;
        int64_t n;
    } vecs[] = {{"norm1.weight", &L->ln1_w, H},   {"norm1.bias", &L->ln1_b, H},
                {"norm2.weight", &L->ln2_w, H},   {"norm2.bias", &L->ln2_b, H},
                {"attn.q_proj.bias", &L->q_b, H}, {"attn.k_proj.bias", &L->k_b, H},
                {"attn.v_proj.bias", &L->v_b, H}, {"attn.proj.bias", &L->proj_b, H},
                {"mlp.fc1.bias", &L->fc1_b, F},   {"mlp.fc2.bias", &L->fc2_b, H}};
    const struct {
        const char *suffix;
        struct gl_vision_mat *dst;
        int64_t n_out, n_in;
    } mats[] = {{"attn.q_proj.weight", &L->q, H, H}, {"attn.k_proj.weight", &L->k, H, H},
                {"attn.v_proj.weight", &L->v, H, H}, {"attn.proj.weight", &L->proj, H, H},
                {"mlp.fc1.weight", &L->fc1, F, H},   {"mlp.fc2.weight", &L->fc2, H, F}};
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0] && st == GL_OK; i++) {
        snprintf(nm, sizeof nm, VT "layers.%d.%s", l, vecs[i].suffix);
        st = vis_f32(m, nm, vecs[i].n, 0, vecs[i].dst, err);
    }
    for (size_t i = 0; i < sizeof mats / sizeof mats[0] && st == GL_OK; i++) {
        snprintf(nm, sizeof nm, VT "layers.%d.%s", l, mats[i].suffix);
        st = vis_mat(m, nm, mats[i].n_out, mats[i].n_in, mats[i].dst, err);
    }
    return st;
}

// An mmproj without GL_MMPROJ_PATCH_T: its v.patch_embd.weight (ne [p, p, 3, hidden]) holds
// S = slab 0 + slab 1 only. The encoder's [hidden][2 * 3 * p * p] f32 matrix gets rows [S, 0]
// (owned): a still image has both frames equal, so S * frame + 0 * frame is the full kernel's
// result (the products are llama.cpp's own); video is refused (gl_model_vision_video). Shape and
// type were checked by gl_vgguf_mmproj_read (F32/F16/BF16).
static gl_status bind_summed_patch(struct gl_model *m, struct gl_vision_mat *out,
                                   struct gl_err *err)
{
    const struct gl_vision_config *c = &m->vision_cfg;
    const int64_t H = c->hidden, K = 3 * (int64_t)c->patch_size * c->patch_size;
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(m->vision_gguf, GL_VGGUF_PATCH);
    GL_ASSERT(t && t->data);
    float *w = gl_model__own(m, (size_t)H * 2 * (size_t)K * sizeof(float));
    void *row = gl_malloc((size_t)K * sizeof(float));
    if (!w || !row) {
        gl_free(row);
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for the patch kernel");
    }
    const size_t rb = gl_type_row_size(t->type, K);
    for (int64_t o = 0; o < H; o++) {
        float *a = w + o * 2 * K;
        memcpy(row, (const uint8_t *)t->data + (size_t)o * rb, rb); // no alignment promise
        if (t->type == GL_TYPE_F32)
            memcpy(a, row, (size_t)K * sizeof(float));
        else
            gl_kernels_get()->to_float[t->type](row, a, K);
        memset(a + K, 0, (size_t)K * sizeof(float));
    }
    gl_free(row);
    out->type = GL_TYPE_F32;
    out->data = w;
    return GL_OK;
}

// Binds every tower tensor (from the folder, or from m->vision_gguf when set) against
// m->vision_cfg.
static gl_status bind_tower(struct gl_model *m, struct gl_err *err)
{
    const struct gl_vision_config *c = &m->vision_cfg;
    struct gl_vision_weights *w = &m->vision;
    const int64_t H = c->hidden;
    memset(w, 0, sizeof *w);
    m->vision_layers = gl_calloc((size_t)c->n_layers, sizeof *m->vision_layers);
    if (!m->vision_layers)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for %d vision layers",
                          (int)c->n_layers);
    gl_status st;
    if ((st = m->vision_mmproj && m->vision_no_video
                  ? bind_summed_patch(m, &w->patch, err)
                  : vis_mat(m, VT "patch_embedder.patch_embedding.weight", H,
                            gl_vision_patch_dim(c), &w->patch, err)) ||
        (st = vis_f32(m, VT "patch_embedder.position_embedding_table.weight",
                      (int64_t)c->pos_h * c->pos_w, H, &w->pos, err)) ||
        (st = vis_f32(m, VT "ln_pre.weight", H, 0, &w->ln_pre_w, err)) ||
        (st = vis_f32(m, VT "ln_pre.bias", H, 0, &w->ln_pre_b, err)) ||
        (st = vis_f32(m, VT "ln_post.weight", H, 0, &w->ln_post_w, err)) ||
        (st = vis_f32(m, VT "ln_post.bias", H, 0, &w->ln_post_b, err)) ||
        (st = vis_mat(m, "model.vision_adapter.fc1.weight", c->adapter, 4 * H, &w->adapter_fc1,
                      err)) ||
        (st = vis_mat(m, "model.vision_adapter.fc2.weight", c->adapter, c->adapter, &w->adapter_fc2,
                      err)) ||
        (st = vis_mat(m, "model.vision_projection.weight", c->out_dim, c->adapter, &w->projection,
                      err)))
        return st;
    for (int l = 0; l < c->n_layers; l++) {
        struct gl_vision_layer *L = &m->vision_layers[l];
        if ((st = bind_layer(m, l, L, err)))
            return st;
    }
    w->layers = m->vision_layers;
    // An mmproj's q/k rows (and biases) are in ggml's pair order within each head (llama.cpp's
    // converter un-permutes them); they stay borrowed from the mapping as they are, and the
    // encoder reads each head in that order at RoPE (vision.h qk_pairs). Reordering them here
    // took a copy of every q and k matrix: ~470 MB more at the release's BF16 tower.
    w->qk_pairs = m->vision_mmproj;
    m->has_vision = 1;
    return GL_OK;
}

gl_status gl_model__bind_vision(struct gl_model *m, struct gl_err *err)
{
    m->has_vision = 0;
    if (!gl_safetensors_find(m->st, VT "patch_embedder.patch_embedding.weight"))
        return GL_OK; // a text-only folder (a vision_config alone does not make a tower)
    if (m->vision_unsupported[0])
        return gl_err_set(err, GL_E_UNSUPPORTED, "model: %s: %s", m->hf_dir, m->vision_unsupported);
    return bind_tower(m, err);
}

gl_status gl_model_attach_vision(struct gl_model *m, const char *path, struct gl_err *err)
{
    if (!m || !path)
        return gl_err_set(err, GL_E_INVAL, "model: no model or no vision GGUF path");
    if (m->has_vision || m->vision_gguf)
        return gl_err_set(err, GL_E_INVAL,
                          "model: %s: the model already has a vision tower (an HF folder brings "
                          "its own)",
                          path);
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    gl_status st = gl_gguf_open(&g, path, &op, err);
    if (st != GL_OK)
        return st;
    struct gl_vision_config cfg;
    struct gl_vgguf_info info = {0, 1};
    struct gl_err inner = {0};
    if (gl_vgguf_is_mmproj(g)) {
        if ((st = gl_vgguf_mmproj_read(g, &cfg, &info, &inner)) != GL_OK)
            gl_err_set(err, st, "model: %s: %.400s", path, inner.msg);
        cfg.rms_eps = m->cfg.rms_eps; // perception_emb_norm uses the text eps (§6.3 step 11)
    } else if (gl_vgguf_kind(g, NULL) == GL_VGGUF_NOT_VISION) {
        st = gl_err_set(err, GL_E_FORMAT, "model: %s has no " GL_VGGUF_PATCH ": not a vision GGUF",
                        path);
    } else if ((st = gl_vgguf_check(path, g, err)) == GL_OK &&
               (st = gl_vgguf_config(g, &cfg, &inner)) != GL_OK) {
        gl_err_set(err, st, "model: %s: %.400s", path, inner.msg);
    }
    if (st == GL_OK && cfg.out_dim != m->cfg.n_embd)
        st = gl_err_set(err, GL_E_FORMAT,
                        "model: %s: projection_dim %d is not the text model's embedding width %d "
                        "(a vision GGUF of another model?)",
                        path, (int)cfg.out_dim, (int)m->cfg.n_embd);
    if (st == GL_OK && !(m->vision_path = gl_strdup(path)))
        st = gl_err_set(err, GL_E_NOMEM, "model: no memory");
    if (st != GL_OK) {
        gl_gguf_close(g);
        return st;
    }
    m->vision_gguf = g;
    m->vision_cfg = cfg;
    m->vision_mmproj = info.mmproj;
    m->vision_no_video = !info.video;
    if ((st = bind_tower(m, err)) != GL_OK) {
        // leave the model as it was: text only
        m->has_vision = 0;
        gl_free(m->vision_layers);
        m->vision_layers = NULL;
        gl_gguf_close(m->vision_gguf);
        m->vision_gguf = NULL;
        gl_free(m->vision_path);
        m->vision_path = NULL;
        m->vision_mmproj = m->vision_no_video = 0;
    }
    return st;
}

const char *gl_model_vision_video(const struct gl_model *m)
{
    return m && m->has_vision && m->vision_no_video
               ? "the vision GGUF (--mmproj) stores the patch kernel with its two temporal slabs "
                 "summed (llama.cpp's mmproj layout): right for still images, but video needs the "
                 "slabs apart; use an mmproj written by glint convert --vision-out"
               : NULL;
}

const struct gl_vision_weights *gl_model_vision(const struct gl_model *m)
{
    return m && m->has_vision ? &m->vision : NULL;
}

const struct gl_vision_config *gl_model_vision_config(const struct gl_model *m)
{
    return m && m->has_vision ? &m->vision_cfg : NULL;
}
