// SPDX-License-Identifier: MIT
// model: Muse Glimmer config from GGUF metadata and weight binding (arch doc §1, §3).
// Every key missing from the file falls back to the release constant (never a neutral value and
// never llama.cpp's softcap 30). Every tensor is checked for presence, shape ([in, out] in ggml ne
// order) and a computable type before the model is returned; weights stay borrowed from the
// mapping unless GLINT_GGUF_KEEP_QUANT=0 asks for the f32 reference expansion.
#include "model/model.h"
#include "model/model_int.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_PREFIX GL_MODEL_ARCH "."

// Keys under muse-glimmer. that we read (or knowingly ignore); anything else is logged.
static const char *const known_keys[] = {
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.freq_base",
    "rope.freq_base_swa",
    "rope.dimension_count",
    "final_logit_softcapping",
    "logit_scale",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "vocab_size",
};

static int key_is_known(const struct gl_gguf_str *k)
{
    size_t plen = strlen(KEY_PREFIX);
    if (k->len <= plen || memcmp(k->ptr, KEY_PREFIX, plen) != 0)
        return 1; // not ours to judge
    for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++) {
        size_t n = strlen(known_keys[i]);
        if (k->len - plen == n && memcmp(k->ptr + plen, known_keys[i], n) == 0)
            return 1;
    }
    return 0;
}

// Reads muse-glimmer.<suffix> as u32, or def when absent.
static gl_status get_u32_def(const struct gl_gguf *g, const char *suffix, uint32_t def,
                             uint32_t *out, struct gl_err *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s%s", KEY_PREFIX, suffix);
    if (!gl_gguf_find_kv(g, key)) {
        *out = def;
        return GL_OK;
    }
    return gl_gguf_get_u32(g, key, out, err);
}

static gl_status get_f32_def(const struct gl_gguf *g, const char *suffix, float def, float *out,
                             int *present, struct gl_err *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s%s", KEY_PREFIX, suffix);
    if (present)
        *present = gl_gguf_find_kv(g, key) != NULL;
    if (!gl_gguf_find_kv(g, key)) {
        *out = def;
        return GL_OK;
    }
    gl_status st = gl_gguf_get_f32(g, key, out, err);
    if (st == GL_OK && !isfinite(*out))
        return gl_err_set(err, GL_E_FORMAT, "model: key %s is not finite", key);
    return st;
}

// sliding_window_pattern: bool (or integer) array of n_layer entries, true = sliding; or a scalar
// period p (full iff i % p == p-1; p == 0 means every layer slides, as llama.cpp); absent -> HF's
// rule counted from the last layer: full iff (L-1-i) % 4 == 0.
static gl_status parse_pattern(struct gl_model_config *cfg, const struct gl_gguf *g,
                               struct gl_err *err)
{
    const char *key = KEY_PREFIX "attention.sliding_window_pattern";
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    int L = cfg->n_layer;
    if (!kv) {
        for (int i = 0; i < L; i++)
            cfg->swa[i] = (L - 1 - i) % 4 != 0;
        return GL_OK;
    }
    if (kv->type == GL_GGUF_ARR) {
        enum gl_gguf_vtype et = kv->v.arr.type;
        if (et == GL_GGUF_STR || et == GL_GGUF_F32 || et == GL_GGUF_F64)
            return gl_err_set(err, GL_E_FORMAT,
                              "model: key %s (at byte %llu) is an array of %s, expected bool", key,
                              (unsigned long long)kv->file_offset, gl_gguf_vtype_name(et));
        if (kv->v.arr.n != (uint64_t)L)
            return gl_err_set(err, GL_E_FORMAT,
                              "model: key %s has %llu entries, expected block_count = %d", key,
                              (unsigned long long)kv->v.arr.n, L);
        for (int i = 0; i < L; i++)
            cfg->swa[i] = gl_gguf_arr_get_int(kv, (uint64_t)i) != 0;
        return GL_OK;
    }
    uint32_t p = 0;
    gl_status st = gl_gguf_get_u32(g, key, &p, err);
    if (st != GL_OK)
        return st;
    for (int i = 0; i < L; i++)
        cfg->swa[i] = p == 0 || (uint32_t)i % p != p - 1;
    return GL_OK;
}

gl_status gl_model_config_parse(struct gl_model_config *cfg, const struct gl_gguf *g,
                                struct gl_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    const struct gl_gguf_kv *akv = gl_gguf_find_kv(g, "general.architecture");
    if (!akv)
        return gl_err_set(err, GL_E_FORMAT, "model: key general.architecture is missing");
    if (akv->type != GL_GGUF_STR)
        return gl_err_set(err, GL_E_FORMAT, "model: key general.architecture is %s, not a string",
                          gl_gguf_vtype_name(akv->type));
    if (!gl_gguf_str_eq(akv->v.str, GL_MODEL_ARCH)) {
        int n = akv->v.str.len > 64 ? 64 : (int)akv->v.str.len;
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "model: architecture \"%.*s\" is not supported (only \"%s\")", n,
                          akv->v.str.ptr, GL_MODEL_ARCH);
    }

    uint32_t v[8];
    gl_status st;
    // Structure keys fall back to the 30B release shape; the tensor shape checks then catch a
    // file whose tensors disagree.
    if ((st = get_u32_def(g, "embedding_length", GL_MODEL_DEF_N_EMBD, &v[0], err)) ||
        (st = get_u32_def(g, "feed_forward_length", GL_MODEL_DEF_N_FF, &v[1], err)) ||
        (st = get_u32_def(g, "block_count", GL_MODEL_DEF_N_LAYER, &v[2], err)) ||
        (st = get_u32_def(g, "attention.head_count", GL_MODEL_DEF_N_HEAD, &v[3], err)) ||
        (st = get_u32_def(g, "context_length", GL_MODEL_DEF_N_CTX, &v[7], err)))
        return st;
    if ((st = get_u32_def(g, "attention.head_count_kv",
                          v[3] < GL_MODEL_DEF_N_HEAD_KV ? v[3] : GL_MODEL_DEF_N_HEAD_KV, &v[4],
                          err)) ||
        (st = get_u32_def(g, "attention.key_length", GL_MODEL_DEF_HEAD_DIM, &v[5], err)))
        return st;
    if ((st = get_u32_def(g, "attention.value_length", v[5], &v[6], err)))
        return st;
    if ((st = gl_model__set_dims(cfg, v, err)))
        return st;

    int has_base = 0;
    if ((st = get_f32_def(g, "attention.layer_norm_rms_epsilon", GL_MODEL_DEF_RMS_EPS,
                          &cfg->rms_eps, NULL, err)) ||
        (st = get_f32_def(g, "rope.freq_base", GL_MODEL_DEF_ROPE_BASE, &cfg->rope_base, &has_base,
                          err)) ||
        (st = get_f32_def(g, "rope.freq_base_swa", cfg->rope_base, &cfg->rope_base_swa, NULL,
                          err)) ||
        (st = get_f32_def(g, "logit_scale", GL_MODEL_DEF_LOGIT_SCALE, &cfg->logit_scale, NULL,
                          err)) ||
        (st = get_f32_def(g, "final_logit_softcapping", GL_MODEL_DEF_SOFTCAP, &cfg->softcap, NULL,
                          err)))
        return st;
    (void)has_base;
    cfg->post_eps = GL_MODEL_DEF_POST_EPS;
    if (!(cfg->rms_eps > 0.0f))
        return gl_err_set(err, GL_E_FORMAT, "model: layer_norm_rms_epsilon %g must be > 0",
                          (double)cfg->rms_eps);
    if (!(cfg->rope_base > 1.0f) || !(cfg->rope_base_swa > 1.0f))
        return gl_err_set(err, GL_E_FORMAT,
                          "model: rope freq_base %g / freq_base_swa %g must be > 1",
                          (double)cfg->rope_base, (double)cfg->rope_base_swa);

    uint32_t w = 0;
    if ((st = get_u32_def(g, "attention.sliding_window", GL_MODEL_DEF_WINDOW, &w, err)))
        return st;
    if (w > (uint32_t)INT32_MAX)
        return gl_err_set(err, GL_E_FORMAT, "model: sliding_window %u too large", w);
    cfg->window = (int32_t)w;
    if ((st = parse_pattern(cfg, g, err)))
        return st;

    uint32_t rdim = 0;
    if ((st = get_u32_def(g, "rope.dimension_count", v[5], &rdim, err)))
        return st;
    if (rdim != v[5])
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "model: rope.dimension_count %u != key_length %u (partial RoPE) is not "
                          "supported",
                          rdim, v[5]);

    for (int64_t i = 0; i < gl_gguf_n_kv(g); i++) {
        const struct gl_gguf_kv *kv = gl_gguf_kv_at(g, i);
        if (!key_is_known(&kv->key))
            GL_LOGW("model: ignoring unrecognised key %.*s",
                    (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr);
    }
    return GL_OK;
}

// ---- weight binding ----

// A tensor as the binder sees it, whatever the container: ggml ne order ([in, out]).
struct tview {
    const void *data;
    uint32_t type; // enum gl_type
    uint32_t n_dims;
    int64_t ne[4];
    char label[320]; // for messages: the name in the file, and for HF the folder and GGUF name
};

static gl_status find_tensor(const struct gl_model *m, const char *name, struct tview *v,
                             struct gl_err *err)
{
    memset(v, 0, sizeof *v);
    if (m->st) {
        char hn[160] = "(no HF name)";
        const struct gl_safetensors_tensor *t = NULL;
        if (!gl_model_hf_tensor_name(name, m->hf_legacy, hn, sizeof hn) ||
            !(t = gl_safetensors_find(m->st, hn)))
            return gl_err_set(err, GL_E_FORMAT, "model: tensor %s (%s) is missing in %s", hn, name,
                              m->hf_dir);
        if (t->ndim < 1 || t->ndim > 4)
            return gl_err_set(err, GL_E_FORMAT, "model: tensor %s has %d dims", hn, t->ndim);
        v->data = t->data;
        v->type = t->dtype == GL_SAFETENSORS_DTYPE_F32   ? GL_TYPE_F32
                  : t->dtype == GL_SAFETENSORS_DTYPE_F16 ? GL_TYPE_F16
                                                         : GL_TYPE_BF16;
        v->n_dims = (uint32_t)t->ndim;
        for (int i = 0; i < 4; i++)
            v->ne[i] = i < t->ndim ? t->shape[t->ndim - 1 - i] : 1; // HF [out, in] -> [in, out]
        snprintf(v->label, sizeof v->label, "%s in %s (%s; shapes in [in, out] order)", hn,
                 gl_safetensors_shard_path(m->st, t->shard), name);
        return GL_OK;
    }
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(m->gguf, name);
    if (!t)
        return gl_err_set(err, GL_E_FORMAT, "model: tensor %s is missing", name);
    if (!t->data)
        return gl_err_set(err, GL_E_FORMAT, "model: tensor %s has no data (header-only file)",
                          name);
    v->data = t->data;
    v->type = t->type;
    v->n_dims = t->n_dims;
    memcpy(v->ne, t->ne, sizeof v->ne);
    snprintf(v->label, sizeof v->label, "%s", name);
    return GL_OK;
}

static const char *type_name(uint32_t type)
{
    const struct gl_type_traits *tr = gl_type_traits_of(type);
    return tr && tr->name ? tr->name : "unknown";
}

// A weight type is usable when the dispatch table can dot it, dequantize it and produce its
// activation format.
static int type_computable(const struct gl_kernels *k, uint32_t type)
{
    const struct gl_type_traits *tr = gl_type_traits_of(type);
    if (!tr || !tr->supported || type >= GL_TYPE_COUNT)
        return 0;
    enum gl_type vdt = gl_type_vec_dot_type((enum gl_type)type);
    return k->vec_dot[type] && k->to_float[type] && (unsigned)vdt < GL_TYPE_COUNT &&
           k->from_float[vdt];
}

// Parallel repack: each thread takes whole 16-row groups (a group is 16 rows' bytes in both
// layouts, so a row range maps to the same byte range).
struct repack_job {
    enum gl_type type;
    const uint8_t *src;
    uint8_t *dst;
    int64_t n_groups, n_in;
    size_t group_bytes;
};

static void repack_worker(void *ctx, int ith, int nth)
{
    const struct repack_job *j = ctx;
    int64_t g0 = j->n_groups * ith / nth, g1 = j->n_groups * (ith + 1) / nth;
    if (g1 <= g0)
        return;
#ifdef MADV_POPULATE_WRITE
    // Fault the fresh destination pages in with one call: on this project's VMs a page fault
    // per 4 KiB store ran at ~1 GB/s, the batched populate at ~2 GB/s (and this is most of the
    // load time of a 17 GB model). Rounding the range out stays inside the buffer's 2 MiB units.
    const uintptr_t pg = 4096;
    uintptr_t a = (uintptr_t)(j->dst + (size_t)g0 * j->group_bytes) & ~(pg - 1);
    uintptr_t e = ((uintptr_t)(j->dst + (size_t)g1 * j->group_bytes) + pg - 1) & ~(pg - 1);
    (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE); // advisory: plain faults still work
#endif
    gl_repack_r16(j->type, j->src + (size_t)g0 * j->group_bytes, (g1 - g0) * GL_R16_ROWS, j->n_in,
                  j->dst + (size_t)g0 * j->group_bytes);
}

gl_status gl_weight_repack_r16(struct gl_weight *w, const struct gl_kernels *k,
                               struct gl_pool *pool, int mmapped, void **copy, struct gl_err *err)
{
    *copy = NULL;
    if (w->r16 || !gl_r16_supported(w->type) || !k->gemm_r16[w->type] ||
        w->n_out % GL_R16_ROWS != 0)
        return GL_OK;
    const size_t bytes = w->row_bytes * (size_t)w->n_out;
    void *dst = gl_alloc_huge(bytes);
    if (!dst)
        return gl_err_set(err, GL_E_NOMEM, "no memory to repack a %lld x %lld matrix (%zu B)",
                          (long long)w->n_out, (long long)w->n_in, bytes);
    struct repack_job j = {
        w->type, w->data, dst, w->n_out / GL_R16_ROWS, w->n_in, w->row_bytes * GL_R16_ROWS};
    if (pool != NULL && j.n_groups > 1)
        gl_pool_run(pool, repack_worker, &j);
    else
        repack_worker(&j, 0, 1);
    if (mmapped) { // the file's copy: drop this process's pages (see model.h)
        const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        uintptr_t a = ((uintptr_t)w->data + pg - 1) & ~(uintptr_t)(pg - 1);
        uintptr_t e = ((uintptr_t)w->data + bytes) & ~(uintptr_t)(pg - 1);
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_DONTNEED);
    }
    w->data = dst;
    w->r16 = 1;
    *copy = dst;
    return GL_OK;
}

// Moves w into the r16 layout (gl_weight_repack_r16) when the model repacks at all, keeping
// the copy in m->huge.
static gl_status maybe_repack(struct gl_model *m, const struct gl_kernels *k, struct gl_pool *pool,
                              const char *name, struct gl_weight *w, struct gl_err *err)
{
    if (!m->repack || !m->keep_quant)
        return GL_OK;
    if (m->n_huge == m->cap_huge) {
        int cap = m->cap_huge ? 2 * m->cap_huge : 64;
        struct gl_model_huge *h = gl_realloc(m->huge, (size_t)cap * sizeof *h);
        if (!h)
            return gl_err_set(err, GL_E_NOMEM, "model: no memory to repack %s", name);
        m->huge = h;
        m->cap_huge = cap;
    }
    const void *src = w->data;
    void *copy;
    struct gl_err e2 = {0};
    if (gl_weight_repack_r16(w, k, pool, m->gguf && gl_gguf_is_mmapped(m->gguf), &copy, &e2) !=
        GL_OK)
        return gl_err_set(err, GL_E_NOMEM, "model: %s: %s", name, e2.msg);
    if (copy) {
        const size_t bytes = w->row_bytes * (size_t)w->n_out;
        m->huge[m->n_huge++] = (struct gl_model_huge){copy, bytes, src};
        m->r16_bytes += bytes;
    }
    return GL_OK;
}

int gl_model_is_repacked(const struct gl_model *m, const void *data)
{
    for (int i = 0; m != NULL && i < m->n_huge; i++)
        if (m->huge[i].src == data)
            return 1;
    return 0;
}

// r16_ok: the weight is only ever multiplied (not row-gathered like token_embd), and any row
// slices taken of it start on 16-row boundaries.
// rope_dim > 0 (HF Q/K only): rows are permuted per head of rope_dim rows from HF's rotate-half
// layout to the interleaved layout of the forward pass (arch doc §2.3): HF row t*D/2 + j ->
// row 2j + t. HF data not aligned to its element size is copied too (kernels load whole floats).
static gl_status bind_weight_ex(struct gl_model *m, const struct gl_kernels *k,
                                struct gl_pool *pool, const char *name, int64_t n_in, int64_t n_out,
                                int r16_ok, int64_t rope_dim, struct gl_weight *w,
                                struct gl_err *err)
{
    struct tview tv;
    const struct tview *t = &tv;
    gl_status fst = find_tensor(m, name, &tv, err);
    if (fst != GL_OK)
        return fst;
    if (t->n_dims != 2 || t->ne[0] != n_in || (n_out >= 0 && t->ne[1] != n_out))
        return gl_err_set(err, GL_E_FORMAT,
                          "model: tensor %s has shape [%lld, %lld, %lld, %lld] (%u dims), "
                          "expected [%lld, %lld]",
                          t->label, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], t->n_dims, (long long)n_in, (long long)n_out);
    if (!type_computable(k, t->type))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "model: tensor %s has type %s (%u), which we "
                          "cannot compute with",
                          t->label, type_name(t->type), t->type);
    size_t rb = gl_type_row_size(t->type, n_in);
    if (rb == 0)
        return gl_err_set(err, GL_E_FORMAT,
                          "model: tensor %s: row of %lld elements is not a whole number of %s "
                          "blocks",
                          t->label, (long long)n_in, type_name(t->type));
    w->data = t->data;
    w->r16 = 0;
    w->type = (enum gl_type)t->type;
    w->n_in = n_in;
    w->n_out = t->ne[1];
    w->row_bytes = rb;
    const size_t esz = gl_type_row_size(t->type, 1);
    if (m->st && (rope_dim > 0 || (esz && (uintptr_t)t->data % esz != 0))) {
        uint8_t *c = gl_model__own(m, rb * (size_t)w->n_out);
        if (!c)
            return gl_err_set(err, GL_E_NOMEM, "model: no memory for a copy of %s", name);
        const int64_t half = rope_dim / 2;
        for (int64_t r = 0; r < w->n_out; r++) {
            int64_t src = r;
            if (rope_dim > 0) { // destination row r = h*D + 2j + t takes HF row h*D + t*D/2 + j
                const int64_t h = r / rope_dim, i = r % rope_dim;
                src = h * rope_dim + (i % 2) * half + i / 2;
            }
            memcpy(c + (size_t)r * rb, (const uint8_t *)t->data + (size_t)src * rb, rb);
        }
        w->data = c;
    }
    if (!m->keep_quant && w->type != GL_TYPE_F32) {
        uint64_t bytes;
        if (!gl_mul_ok((uint64_t)w->n_in * sizeof(float), (uint64_t)w->n_out, &bytes) ||
            bytes > SIZE_MAX)
            return gl_err_set(err, GL_E_NOMEM, "model: f32 copy of %s is too large", name);
        float *f = gl_model__own(m, (size_t)bytes);
        if (!f)
            return gl_err_set(err, GL_E_NOMEM, "model: no memory for the f32 copy of %s (%llu B)",
                              name, (unsigned long long)bytes);
        for (int64_t r = 0; r < w->n_out; r++)
            k->to_float[w->type]((const uint8_t *)w->data + (size_t)r * rb, f + r * w->n_in,
                                 w->n_in);
        w->data = f;
        w->type = GL_TYPE_F32;
        w->row_bytes = (size_t)n_in * sizeof(float);
    }
    return r16_ok ? maybe_repack(m, k, pool, name, w, err) : GL_OK;
}

static gl_status bind_weight(struct gl_model *m, const struct gl_kernels *k, struct gl_pool *pool,
                             const char *name, int64_t n_in, int64_t n_out, int r16_ok,
                             struct gl_weight *w, struct gl_err *err)
{
    return bind_weight_ex(m, k, pool, name, n_in, n_out, r16_ok, 0, w, err);
}

// 1-D norm weight of n floats: borrowed when stored as aligned F32, else converted to an f32 copy.
// HF folders: the four sandwich norms are centered (applied as 1 + w, arch doc §2.2; GGUF stores
// 1 + w), so they always get a copy with the +1 added; the final norm is plain. The weight-less
// QK-norm has no HF tensor: q_norm is qk_scale_factor and k_norm 1 everywhere (§2.4), as the GGUF
// converter synthesises them.
static gl_status bind_norm(struct gl_model *m, const struct gl_kernels *k, const char *name,
                           int64_t n, const float **out, struct gl_err *err)
{
    const size_t nl = strlen(name);
    const int is_q = nl > 18 && !strcmp(name + nl - 18, "attn_q_norm.weight");
    const int is_k = nl > 18 && !strcmp(name + nl - 18, "attn_k_norm.weight");
    if (m->st && (is_q || is_k)) {
        float *f = gl_model__own(m, (size_t)n * sizeof(float));
        if (!f)
            return gl_err_set(err, GL_E_NOMEM, "model: no memory for norm %s", name);
        for (int64_t i = 0; i < n; i++)
            f[i] = is_q ? m->hf_qk_scale : 1.0f;
        *out = f;
        return GL_OK;
    }
    const int centered = m->st && strncmp(name, "blk.", 4) == 0;
    struct tview tv;
    const struct tview *t = &tv;
    gl_status fst = find_tensor(m, name, &tv, err);
    if (fst != GL_OK)
        return fst;
    if (t->n_dims != 1 || t->ne[0] != n)
        return gl_err_set(
            err, GL_E_FORMAT, "model: tensor %s has shape [%lld, %lld] (%u dims), expected [%lld]",
            t->label, (long long)t->ne[0], (long long)t->ne[1], t->n_dims, (long long)n);
    if (t->type == GL_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) == 0 && !centered) {
        *out = t->data;
        return GL_OK;
    }
    if (t->type != GL_TYPE_F32 && t->type != GL_TYPE_F16 && t->type != GL_TYPE_BF16)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "model: norm tensor %s has type %s (%u), expected F32/F16/BF16", t->label,
                          type_name(t->type), t->type);
    float *f = gl_model__own(m, (size_t)n * sizeof(float));
    if (!f)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for norm %s", name);
    if (t->type == GL_TYPE_F32)
        memcpy(f, t->data, (size_t)n * sizeof(float));
    else
        k->to_float[t->type](t->data, f, n);
    for (int64_t i = 0; centered && i < n; i++)
        f[i] += 1.0f;
    *out = f;
    return GL_OK;
}

struct gl_model_params gl_model_default_params(void)
{
    struct gl_model_params p = {.keep_quant = 1, .repack = 1};
    const char *e = getenv("GLINT_GGUF_KEEP_QUANT");
    if (e && strcmp(e, "0") == 0)
        p.keep_quant = 0;
    e = getenv("GLINT_REPACK");
    if (e && strcmp(e, "0") == 0)
        p.repack = 0;
    return p;
}

static gl_status bind_all(struct gl_model *m, struct gl_pool *pool, struct gl_err *err)
{
    const struct gl_kernels *k = gl_kernels_get();
    struct gl_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, F = c->n_ff, HD = (int64_t)c->n_head * c->head_dim,
                  KD = (int64_t)c->n_head_kv * c->head_dim;
    gl_status st;
    if ((st = bind_weight(m, k, pool, "token_embd.weight", E, -1, 0, &m->tok_embd, err)))
        return st;
    if (m->tok_embd.n_out <= 0 || m->tok_embd.n_out > INT32_MAX)
        return gl_err_set(err, GL_E_FORMAT, "model: token_embd.weight has %lld rows",
                          (long long)m->tok_embd.n_out);
    c->n_vocab = (int32_t)m->tok_embd.n_out;
    uint32_t vs = m->hf_vocab_size > 0 ? (uint32_t)m->hf_vocab_size : (uint32_t)c->n_vocab;
    if (m->gguf && (st = get_u32_def(m->gguf, "vocab_size", (uint32_t)c->n_vocab, &vs, err)))
        return st;
    if (vs != (uint32_t)c->n_vocab)
        return gl_err_set(err, GL_E_FORMAT, "model: vocab_size %u != token_embd.weight rows %d", vs,
                          c->n_vocab);
    if ((st = bind_weight(m, k, pool, "output.weight", E, c->n_vocab, 1, &m->output, err)) ||
        (st = bind_norm(m, k, "output_norm.weight", E, &m->output_norm, err)))
        return st;
    m->layers = gl_calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory for %d layers", c->n_layer);
    for (int l = 0; l < c->n_layer; l++) {
        struct gl_layer *ly = &m->layers[l];
        char nm[96];
#define W(field, suffix, nin, nout)                                                                \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d." suffix ".weight", l);                                    \
        if ((st = bind_weight(m, k, pool, nm, nin, nout, 1, &ly->field, err)))                     \
            return st;                                                                             \
    } while (0)
#define N(field, suffix, n)                                                                        \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d." suffix ".weight", l);                                    \
        if ((st = bind_norm(m, k, nm, n, &ly->field, err)))                                        \
            return st;                                                                             \
    } while (0)
        N(attn_norm, "attn_norm", E);
        char fused[96];
        snprintf(fused, sizeof fused, "blk.%d.attn_qkv.weight", l);
        snprintf(nm, sizeof nm, "blk.%d.attn_q.weight", l);
        if (m->gguf && !gl_gguf_find_tensor(m->gguf, nm) && gl_gguf_find_tensor(m->gguf, fused)) {
            // Fused [q | k | v] rows (llama.cpp's attn_qkv): three row-slice views of it.
            struct gl_weight f;
            if ((st = bind_weight(m, k, pool, fused, E, HD + 2 * KD,
                                  HD % GL_R16_ROWS == 0 && KD % GL_R16_ROWS == 0, &f, err)))
                return st;
            ly->q = ly->k = ly->v = f;
            ly->q.n_out = HD;
            ly->k.n_out = ly->v.n_out = KD;
            ly->k.data = (const uint8_t *)f.data + (size_t)HD * f.row_bytes;
            ly->v.data = (const uint8_t *)f.data + (size_t)(HD + KD) * f.row_bytes;
        } else {
            // HF Q/K rows are in rotate-half order; the forward pass pairs (2j, 2j+1).
            const int64_t rd = m->st ? c->head_dim : 0;
            snprintf(nm, sizeof nm, "blk.%d.attn_q.weight", l);
            if ((st = bind_weight_ex(m, k, pool, nm, E, HD, 1, rd, &ly->q, err)))
                return st;
            snprintf(nm, sizeof nm, "blk.%d.attn_k.weight", l);
            if ((st = bind_weight_ex(m, k, pool, nm, E, KD, 1, rd, &ly->k, err)))
                return st;
            W(v, "attn_v", E, KD);
        }
        W(gate, "attn_gate", E, HD);
        W(o, "attn_output", HD, E);
        N(q_norm, "attn_q_norm", c->head_dim);
        N(k_norm, "attn_k_norm", c->head_dim);
        N(post_attn_norm, "post_attention_norm", E);
        N(ffn_norm, "ffn_norm", E);
        W(ffn_gate, "ffn_gate", E, F);
        W(ffn_up, "ffn_up", E, F);
        W(ffn_down, "ffn_down", F, E);
        N(post_ffw_norm, "post_ffw_norm", E);
#undef W
#undef N
        if (m->progress)
            m->progress(m->progress_user, l + 1, c->n_layer);
    }
    return m->st ? gl_model__bind_vision(m, err) : GL_OK;
}

// Stop ids of a GGUF: tokenizer.ggml.eos_token_id then eot_token_id, without repeats.
static void gguf_stop_ids(struct gl_model *m)
{
    const char *keys[2] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2; i++) {
        uint32_t id;
        if (gl_gguf_get_u32(m->gguf, keys[i], &id, NULL) == GL_OK && id <= INT32_MAX &&
            (m->n_stop == 0 || m->stop_ids[0] != (int32_t)id))
            m->stop_ids[m->n_stop++] = (int32_t)id;
    }
}

static struct gl_model *model_new(const struct gl_model_params *params)
{
    struct gl_model *m = gl_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    struct gl_model_params dp = gl_model_default_params();
    m->keep_quant = (params ? params : &dp)->keep_quant;
    m->repack = (params ? params : &dp)->repack;
    m->progress = params ? params->progress : NULL;
    m->progress_user = params ? params->progress_user : NULL;
    return m;
}

// Binds every weight of a model whose config is parsed; deletes m on failure.
static gl_status model_bind(struct gl_model *m, struct gl_model **out, struct gl_err *err)
{
    // Repacking touches every weight byte once (and faults in as many fresh pages): spread
    // it over the cores with a transient pool (the model context creates its own).
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct gl_pool *pool = m->repack ? gl_pool_new(ncpu < 1    ? 1
                                                   : ncpu > 16 ? 16
                                                               : (int)ncpu)
                                     : NULL;
    int64_t t0 = gl_time_us();
    gl_status st = bind_all(m, pool, err);
    gl_pool_delete(pool);
    if (st == GL_OK && m->r16_bytes > 0)
        GL_LOGI("model: %.2f GiB of Q4_K/Q6_K weights repacked into resident memory (r16 "
                "layout) in %.1f s%s",
                (double)m->r16_bytes / (1024.0 * 1024.0 * 1024.0),
                (double)(gl_time_us() - t0) / 1e6,
                m->gguf && gl_gguf_is_mmapped(m->gguf) ? "; their file pages released" : "");
    if (st != GL_OK) {
        gl_model_delete(m);
        return st;
    }
    *out = m;
    return GL_OK;
}

gl_status gl_model_load(struct gl_model **out, const struct gl_gguf *g,
                        const struct gl_model_params *params, struct gl_err *err)
{
    *out = NULL;
    struct gl_model *m = model_new(params);
    if (!m)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory");
    m->gguf = g;
    gl_status st = gl_model_config_parse(&m->cfg, g, err);
    if (st != GL_OK) {
        gl_model_delete(m);
        return st;
    }
    gguf_stop_ids(m);
    return model_bind(m, out, err);
}

// An HF folder: config first (cheap, and its errors are the likelier ones), then the weights.
static gl_status open_hf(struct gl_model **out, const char *dir,
                         const struct gl_model_params *params, struct gl_err *err)
{
    struct gl_model *m = model_new(params);
    if (!m)
        return gl_err_set(err, GL_E_NOMEM, "model: no memory");
    gl_status st = GL_OK;
    if (!(m->hf_dir = gl_strdup(dir)))
        st = gl_err_set(err, GL_E_NOMEM, "model: no memory");
    if (st == GL_OK)
        st = gl_model_hf_config_parse(m, dir, err);
    if (st == GL_OK)
        st = gl_safetensors_open_dir(&m->st, dir, err);
    if (st != GL_OK) {
        gl_model_delete(m);
        return st;
    }
    m->hf_legacy = !gl_safetensors_find(m->st, "model.language_model.embed_tokens.weight") &&
                   gl_safetensors_find(m->st, "model.embed_tokens.weight") != NULL;
    if (m->hf_legacy)
        GL_LOGI("model: %s uses the legacy model.layers.N.* names", dir);
    return model_bind(m, out, err);
}

static gl_status open_main(struct gl_model **out, const char *path,
                           const struct gl_model_params *params, struct gl_err *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return open_hf(out, path, params, err);
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    gl_status st = gl_gguf_open(&g, path, &op, err);
    if (st != GL_OK)
        return st;
    st = gl_model_load(out, g, params, err);
    if (st != GL_OK) {
        gl_gguf_close(g);
        return st;
    }
    (*out)->owns_gguf = 1;
    return GL_OK;
}

gl_status gl_model_open(struct gl_model **out, const char *path,
                        const struct gl_model_params *params, struct gl_err *err)
{
    *out = NULL;
    gl_status st = open_main(out, path, params, err);
    if (st == GL_OK && params && params->mmproj &&
        (st = gl_model_attach_vision(*out, params->mmproj, err)) != GL_OK) {
        gl_model_delete(*out);
        *out = NULL;
    }
    return st;
}

gl_status gl_model_load_tokenizer(const struct gl_model *m, struct gl_tokenizer **out,
                                  struct gl_err *err)
{
    if (m->gguf)
        return gl_tokenizer_load_gguf(out, m->gguf, err);
    return gl_tokenizer_load_hf_dir(out, m->hf_dir, err);
}

void gl_model_delete(struct gl_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_owned; i++)
        gl_free_aligned(m->owned[i]);
    gl_free(m->owned);
    for (int i = 0; i < m->n_huge; i++)
        gl_free_huge(m->huge[i].p, m->huge[i].n);
    gl_free(m->huge);
    gl_free(m->layers);
    gl_free(m->vision_layers);
    gl_gguf_close(m->vision_gguf);
    gl_free(m->vision_path);
    if (m->owns_gguf)
        gl_gguf_close((struct gl_gguf *)m->gguf);
    gl_safetensors_close(m->st);
    gl_free(m->hf_dir);
    gl_free(m);
}

// ---- KV cache: one f32 slab of n_layer x n_blocks pages, page (l, b) = l * n_blocks + b ----

#define KV_BLOCK 256

size_t gl_kv_dtype_size(enum gl_kv_dtype t)
{
    switch (t) {
    case GL_KV_F32:
        return 4;
    case GL_KV_F16:
    case GL_KV_BF16:
        return 2;
    case GL_KV_FP8_E4M3:
        return 1;
    }
    GL_ASSERT(!"unknown kv dtype");
    return 0;
}

struct gl_kv_cache {
    int n_layer;
    int32_t n_blocks;
    int64_t cap, len;
    size_t row_bytes, page_bytes;
    int32_t *pages; // [n_layer * n_blocks], the identity map
    uint8_t *slab;  // n_layer * n_blocks pages: [K rows | V rows] of KV_BLOCK rows each
};

gl_status gl_kv_cache_new(struct gl_kv_cache **out, const struct gl_model_config *cfg,
                          int64_t n_ctx, struct gl_err *err)
{
    *out = NULL;
    if (n_ctx <= 0 || n_ctx > (int64_t)1 << 30)
        return gl_err_set(err, GL_E_LIMIT, "kv: context of %lld positions not supported",
                          (long long)n_ctx);
    struct gl_kv_cache *kv = gl_calloc(1, sizeof *kv);
    if (!kv)
        return gl_err_set(err, GL_E_NOMEM, "kv: no memory");
    kv->n_layer = cfg->n_layer;
    kv->n_blocks = (int32_t)((n_ctx + KV_BLOCK - 1) / KV_BLOCK);
    kv->cap = n_ctx;
    kv->row_bytes = (size_t)cfg->n_head_kv * (size_t)cfg->head_dim * sizeof(float);
    kv->page_bytes = 2 * KV_BLOCK * kv->row_bytes;
    size_t n_pages = (size_t)kv->n_blocks * (size_t)kv->n_layer;
    uint64_t bytes;
    kv->pages = gl_malloc(n_pages * sizeof *kv->pages);
    if (!kv->pages || !gl_mul_ok(n_pages, kv->page_bytes, &bytes) || bytes > SIZE_MAX ||
        !(kv->slab = gl_malloc_aligned((size_t)bytes))) {
        gl_kv_cache_delete(kv);
        return gl_err_set(err, GL_E_NOMEM, "kv: no memory for %lld positions x %d layers",
                          (long long)n_ctx, cfg->n_layer);
    }
    for (size_t i = 0; i < n_pages; i++)
        kv->pages[i] = (int32_t)i;
    *out = kv;
    return GL_OK;
}

void gl_kv_cache_delete(struct gl_kv_cache *kv)
{
    if (!kv)
        return;
    gl_free_aligned(kv->slab);
    gl_free(kv->pages);
    gl_free(kv);
}

int64_t gl_kv_cache_capacity(const struct gl_kv_cache *kv)
{
    return kv->cap;
}
int64_t gl_kv_cache_len(const struct gl_kv_cache *kv)
{
    return kv->len;
}
void gl_kv_cache_clear(struct gl_kv_cache *kv)
{
    kv->len = 0;
}

void gl_kv_cache__set_len(struct gl_kv_cache *kv, int64_t len)
{
    GL_ASSERT(len >= 0 && len <= kv->cap);
    kv->len = len;
}

struct gl_kv_view gl_kv_cache_view(const struct gl_kv_cache *kv, int layer)
{
    GL_ASSERT(layer >= 0 && layer < kv->n_layer);
    struct gl_kv_view v = {
        .block_size = KV_BLOCK,
        .n_blocks = kv->n_blocks,
        .pages = kv->pages + (size_t)layer * (size_t)kv->n_blocks,
        .base = kv->slab,
        .page_bytes = kv->page_bytes,
        .n_pages = (int64_t)kv->n_blocks * kv->n_layer,
        .row_bytes = kv->row_bytes,
        .k_off = 0,
        .v_off = KV_BLOCK * kv->row_bytes,
        .dtype = GL_KV_F32,
    };
    return v;
}
