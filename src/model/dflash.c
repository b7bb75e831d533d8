// SPDX-License-Identifier: MIT
// dflash: the DFlash drafter (dflash.h; arch doc §7; the file layout and the feeding rules from
// llama.cpp are in docs/dflash.md). Plain C around the shared matmul kernels: the elementwise
// pieces (norms, RoPE, attention over at most window + block keys) are cheap next to the
// matmuls, and each is the reference form (double-accumulated norms, fp32 attention).
#include "model/dflash.h"
#include "model/model_int.h"

#include "kernels/kernels.h"
#include "quant/quant.h"
#include "safetensors/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define K_PREFIX GL_DFLASH_ARCH "."

// ---- config ----

static gl_status want_type(const struct gl_gguf_kv *kv, const char *key, int integer,
                           struct gl_err *err)
{
    enum gl_gguf_vtype t = kv->type;
    int is_int = t == GL_GGUF_U8 || t == GL_GGUF_I8 || t == GL_GGUF_U16 || t == GL_GGUF_I16 ||
                 t == GL_GGUF_U32 || t == GL_GGUF_I32 || t == GL_GGUF_U64 || t == GL_GGUF_I64;
    int is_float = t == GL_GGUF_F32 || t == GL_GGUF_F64;
    if (integer ? !is_int : !(is_int || is_float))
        return gl_err_set(err, GL_E_FORMAT, "dflash: key %s has type %s, expected %s", key,
                          gl_gguf_vtype_name(t), integer ? "an integer" : "a number");
    return GL_OK;
}

// An integer key in [lo, hi]; absent -> def (def < 0: required).
static gl_status get_int(const struct gl_gguf *g, const char *key, int64_t lo, int64_t hi,
                         int64_t def, int32_t *out, struct gl_err *err)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    if (!kv) {
        if (def < 0)
            return gl_err_set(err, GL_E_FORMAT, "dflash: required key %s is missing", key);
        *out = (int32_t)def;
        return GL_OK;
    }
    gl_status st = want_type(kv, key, 1, err);
    if (st != GL_OK)
        return st;
    int is_signed = kv->type == GL_GGUF_I8 || kv->type == GL_GGUF_I16 || kv->type == GL_GGUF_I32 ||
                    kv->type == GL_GGUF_I64;
    if (is_signed ? (kv->v.i64 < lo || kv->v.i64 > hi)
                  : (kv->v.u64 > (uint64_t)hi || (int64_t)kv->v.u64 < lo))
        return gl_err_set(err, GL_E_FORMAT, "dflash: key %s = %lld outside %lld..%lld", key,
                          is_signed ? (long long)kv->v.i64 : (long long)kv->v.u64, (long long)lo,
                          (long long)hi);
    *out = (int32_t)(is_signed ? kv->v.i64 : (int64_t)kv->v.u64);
    return GL_OK;
}

// A finite number key in (lo, hi]; absent -> def (NAN: required).
static gl_status get_num(const struct gl_gguf *g, const char *key, double lo, double hi, double def,
                         float *out, struct gl_err *err)
{
    const struct gl_gguf_kv *kv = gl_gguf_find_kv(g, key);
    if (!kv) {
        if (isnan(def))
            return gl_err_set(err, GL_E_FORMAT, "dflash: required key %s is missing", key);
        *out = (float)def;
        return GL_OK;
    }
    gl_status st = want_type(kv, key, 0, err);
    if (st != GL_OK)
        return st;
    double v = kv->type == GL_GGUF_F32 || kv->type == GL_GGUF_F64 ? kv->v.f64
               : (kv->type == GL_GGUF_I8 || kv->type == GL_GGUF_I16 || kv->type == GL_GGUF_I32 ||
                  kv->type == GL_GGUF_I64)
                   ? (double)kv->v.i64
                   : (double)kv->v.u64;
    if (!isfinite(v) || !(v > lo) || v > hi)
        return gl_err_set(err, GL_E_FORMAT, "dflash: key %s = %g outside (%g, %g]", key, v, lo, hi);
    *out = (float)v;
    return GL_OK;
}

// Keys of llama.cpp's dflash variants this drafter does not run: present -> refused by name.
static const char *const unsupported_keys[] = {
    K_PREFIX "hyper_connection_count", // DSpark on a DeepSeek-V4 backbone
    K_PREFIX "selector_rank",          // DFlash2
    K_PREFIX "selector_top_k",          K_PREFIX "conv_kernel_size", K_PREFIX "conv_group_size",
    K_PREFIX "rope.dimension_sections", // M-RoPE targets
};

gl_status gl_dflash_config_parse(struct gl_dflash_config *cfg, const struct gl_gguf *g,
                                 struct gl_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    const struct gl_gguf_kv *arch = gl_gguf_find_kv(g, "general.architecture");
    if (!arch)
        return gl_err_set(err, GL_E_FORMAT, "dflash: general.architecture is missing");
    if (arch->type != GL_GGUF_STR)
        return gl_err_set(err, GL_E_FORMAT, "dflash: general.architecture has type %s, not str",
                          gl_gguf_vtype_name(arch->type));
    if (!gl_gguf_str_eq(arch->v.str, GL_DFLASH_ARCH))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "dflash: general.architecture is '%.*s', expected '" GL_DFLASH_ARCH "'",
                          (int)(arch->v.str.len > 64 ? 64 : arch->v.str.len), arch->v.str.ptr);
    for (size_t i = 0; i < sizeof unsupported_keys / sizeof *unsupported_keys; i++)
        if (gl_gguf_find_kv(g, unsupported_keys[i]))
            return gl_err_set(err, GL_E_UNSUPPORTED,
                              "dflash: key %s marks a drafter variant glint does not run",
                              unsupported_keys[i]);
    gl_status st = GL_OK;
    int32_t kl = 0, vl = 0;
#define INT(k, lo, hi, def, dst)                                                                   \
    if (st == GL_OK)                                                                               \
    st = get_int(g, K_PREFIX k, lo, hi, def, dst, err)
    INT("block_count", 1, GL_DFLASH_MAX_LAYERS, -1, &cfg->n_layer);
    INT("embedding_length", 1, 1 << 16, -1, &cfg->n_embd);
    INT("feed_forward_length", 1, 1 << 18, -1, &cfg->n_ff);
    INT("attention.head_count", 1, 1024, -1, &cfg->n_head);
    INT("attention.head_count_kv", 1, 1024, cfg->n_head, &cfg->n_head_kv);
    INT("attention.key_length", 2, 1024, cfg->n_head ? cfg->n_embd / cfg->n_head : 0, &kl);
    INT("attention.value_length", 2, 1024, kl, &vl);
    INT("context_length", 1, 1 << 24, 131072, &cfg->n_ctx_train);
    INT("attention.sliding_window", 0, 1 << 24, 0, &cfg->window);
    INT("block_size", 1, GL_DFLASH_MAX_BLOCK, 16, &cfg->block_size);
#undef INT
    if (st == GL_OK)
        st = get_int(g, "tokenizer.ggml.mask_token_id", 0, INT32_MAX, -1, &cfg->mask_token_id, err);
    if (st == GL_OK)
        st = get_num(g, K_PREFIX "attention.layer_norm_rms_epsilon", 0.0, 0.1, NAN, &cfg->rms_eps,
                     err);
    if (st == GL_OK)
        st = get_num(g, K_PREFIX "rope.freq_base", 0.0, 1e12, NAN, &cfg->rope_base, err);
    float scale = 0.0f;
    if (st == GL_OK && gl_gguf_find_kv(g, K_PREFIX "attention.scale"))
        st = get_num(g, K_PREFIX "attention.scale", 0.0, 1e6, NAN, &scale, err);
    if (st != GL_OK)
        return st;
    if (kl != vl || kl % 2 != 0)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: key_length %d and value_length %d must be equal and even", kl,
                          vl);
    cfg->head_dim = kl;
    if (cfg->n_head % cfg->n_head_kv != 0)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: attention.head_count %d is not a multiple of head_count_kv %d",
                          cfg->n_head, cfg->n_head_kv);
    cfg->kq_scale = scale > 0.0f ? scale : (float)(1.0 / sqrt((double)cfg->head_dim));
    // Keys that would change the math if set: refuse rather than ignore them.
    const struct gl_gguf_kv *kv;
    if ((kv = gl_gguf_find_kv(g, K_PREFIX "embedding_scale")) != NULL &&
        !(kv->type == GL_GGUF_F32 && kv->v.f64 == 0.0))
        return gl_err_set(err, GL_E_UNSUPPORTED, "dflash: " K_PREFIX "embedding_scale is set");
    if ((kv = gl_gguf_find_kv(g, K_PREFIX "attention.causal")) != NULL &&
        !(kv->type == GL_GGUF_BOOL && kv->v.u64 == 0))
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "dflash: " K_PREFIX "attention.causal is set (a causal-block drafter)");
    if ((kv = gl_gguf_find_kv(g, K_PREFIX "hidden_act")) != NULL &&
        !(kv->type == GL_GGUF_STR && gl_gguf_str_eq(kv->v.str, "silu")))
        return gl_err_set(err, GL_E_UNSUPPORTED, "dflash: " K_PREFIX "hidden_act is not 'silu'");
    // target_layers: integers, each the input of target layer id (>= 1: the output of id - 1).
    kv = gl_gguf_find_kv(g, K_PREFIX "target_layers");
    if (!kv)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: required key " K_PREFIX "target_layers is missing");
    if (kv->type != GL_GGUF_ARR)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: " K_PREFIX "target_layers has type %s, expected an array",
                          gl_gguf_vtype_name(kv->type));
    enum gl_gguf_vtype et = kv->v.arr.type;
    if (!(et == GL_GGUF_U8 || et == GL_GGUF_I8 || et == GL_GGUF_U16 || et == GL_GGUF_I16 ||
          et == GL_GGUF_U32 || et == GL_GGUF_I32 || et == GL_GGUF_U64 || et == GL_GGUF_I64))
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: " K_PREFIX "target_layers holds %s, expected integers",
                          gl_gguf_vtype_name(et));
    if (kv->v.arr.n < 1 || kv->v.arr.n > GL_DFLASH_MAX_TARGETS)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: " K_PREFIX "target_layers has %llu entries, expected 1..%d",
                          (unsigned long long)kv->v.arr.n, GL_DFLASH_MAX_TARGETS);
    cfg->n_target = (int32_t)kv->v.arr.n;
    for (int i = 0; i < cfg->n_target; i++) {
        int64_t v = gl_gguf_arr_get_int(kv, (uint64_t)i);
        if ((et == GL_GGUF_U64 && (uint64_t)v > GL_MODEL_MAX_LAYERS) || v < 1 ||
            v > GL_MODEL_MAX_LAYERS)
            return gl_err_set(err, GL_E_FORMAT,
                              "dflash: " K_PREFIX "target_layers[%d] = %lld outside 1..%d (the "
                              "input of target layer id, i.e. the output of id - 1)",
                              i, (long long)v, GL_MODEL_MAX_LAYERS);
        cfg->target_layers[i] = (int32_t)(v - 1);
    }
    // sliding_window_pattern: optional per-layer bools; absent -> every layer slides (when a
    // window is set), as the released drafter's layer_types are all sliding_attention.
    memset(cfg->swa, 1, sizeof cfg->swa);
    kv = gl_gguf_find_kv(g, K_PREFIX "attention.sliding_window_pattern");
    if (kv) {
        if (kv->type != GL_GGUF_ARR || kv->v.arr.type != GL_GGUF_BOOL ||
            kv->v.arr.n != (uint64_t)cfg->n_layer)
            return gl_err_set(err, GL_E_FORMAT,
                              "dflash: " K_PREFIX "attention.sliding_window_pattern must be a "
                              "bool array of block_count = %d entries",
                              cfg->n_layer);
        for (int i = 0; i < cfg->n_layer; i++)
            cfg->swa[i] = gl_gguf_arr_get_int(kv, (uint64_t)i) != 0;
    }
    return GL_OK;
}

// ---- tensors ----

// A tensor as the binder sees it, from either container: ggml ne order ([in, out]).
struct tview {
    const void *data;
    uint32_t type; // enum gl_type
    int hf;        // from a folder: data carries no alignment promise
};

static gl_status find(const struct gl_dflash *d, const char *name, uint32_t n_dims, int64_t ne0,
                      int64_t ne1, struct tview *out, struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    int64_t want1 = n_dims == 1 ? 1 : ne1;
    if (d->st) {
        char hn[160];
        const struct gl_safetensors_tensor *t = NULL;
        if (!gl_dflash_hf_tensor_name(name, hn, sizeof hn) || !(t = gl_safetensors_find(d->st, hn)))
            return gl_err_set(err, GL_E_FORMAT, "dflash: tensor %s (%s) is missing in %s",
                              gl_dflash_hf_tensor_name(name, hn, sizeof hn) ? hn : "?", name,
                              d->dir);
        // HF shapes are row-major [out, in]; a vector is [n].
        const int ok =
            t->ndim == (int)n_dims &&
            (n_dims == 1 ? t->shape[0] == ne0 : t->shape[0] == ne1 && t->shape[1] == ne0);
        if (!ok) {
            char have[96] = "";
            for (int i = 0, o = 0; i < t->ndim && o < (int)sizeof have; i++)
                o += snprintf(have + o, sizeof have - (size_t)o, "%s%lld", i ? ", " : "",
                              (long long)t->shape[i]);
            return gl_err_set(err, GL_E_FORMAT,
                              "dflash: tensor %s in %s has shape [%s], expected [%lld%s%lld] "
                              "(from config.json; %s)",
                              hn, gl_safetensors_shard_path(d->st, t->shard), have,
                              (long long)(n_dims == 2 ? ne1 : ne0), n_dims == 2 ? ", " : "",
                              n_dims == 2 ? (long long)ne0 : 0LL, name);
        }
        out->data = t->data;
        out->type = t->dtype == GL_SAFETENSORS_DTYPE_F32   ? GL_TYPE_F32
                    : t->dtype == GL_SAFETENSORS_DTYPE_F16 ? GL_TYPE_F16
                                                           : GL_TYPE_BF16;
        out->hf = 1;
        return GL_OK;
    }
    const struct gl_gguf_tensor *t = gl_gguf_find_tensor(d->gguf, name);
    if (!t)
        return gl_err_set(err, GL_E_FORMAT, "dflash: tensor %s is missing", name);
    if (!t->data)
        return gl_err_set(err, GL_E_FORMAT, "dflash: tensor %s has no data (header-only file)",
                          name);
    if (t->n_dims != n_dims || t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 ||
        t->ne[3] != 1)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: tensor %s has shape [%lld, %lld, %lld, %lld] (%u dims), "
                          "expected [%lld%s%lld]",
                          name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], t->n_dims, (long long)ne0, n_dims == 2 ? ", " : "",
                          n_dims == 2 ? (long long)ne1 : 0LL);
    out->data = t->data;
    out->type = t->type;
    return GL_OK;
}

static const char *tname(uint32_t type)
{
    const struct gl_type_traits *tr = gl_type_traits_of(type);
    return tr && tr->name ? tr->name : "unknown";
}

static void *own(struct gl_dflash *d, size_t bytes)
{
    GL_ASSERT(d->n_owned < (int)(sizeof d->owned / sizeof *d->owned)); // one per tensor at most
    void *p = gl_malloc(bytes ? bytes : 1);
    if (p)
        d->owned[d->n_owned++] = p;
    return p;
}

static gl_status bind_matrix(struct gl_dflash *d, const struct gl_kernels *k, const char *name,
                             int64_t n_in, int64_t n_out, struct gl_weight *w, struct gl_err *err)
{
    struct tview t;
    gl_status st = find(d, name, 2, n_in, n_out, &t, err);
    if (st != GL_OK)
        return st;
    const struct gl_type_traits *tr = gl_type_traits_of(t.type);
    enum gl_type vdt = tr && tr->supported && t.type < GL_TYPE_COUNT
                           ? gl_type_vec_dot_type((enum gl_type)t.type)
                           : GL_TYPE_COUNT;
    if (vdt >= GL_TYPE_COUNT || !k->vec_dot[t.type] || !k->from_float[vdt])
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "dflash: tensor %s has type %s (%u), which we cannot compute with", name,
                          tname(t.type), t.type);
    size_t rb = gl_type_row_size(t.type, n_in);
    if (rb == 0)
        return gl_err_set(err, GL_E_FORMAT,
                          "dflash: tensor %s: rows of %lld are not whole %s blocks", name,
                          (long long)n_in, tname(t.type));
    const void *data = t.data;
    const size_t esz = gl_type_row_size(t.type, 1);
    if (t.hf && esz && (uintptr_t)data % esz != 0) { // the kernels load whole elements
        void *c = own(d, rb * (size_t)n_out);
        if (!c)
            return gl_err_set(err, GL_E_NOMEM, "dflash: no memory for a copy of %s", name);
        memcpy(c, data, rb * (size_t)n_out);
        data = c;
    }
    *w = (struct gl_weight){data, (enum gl_type)t.type, n_in, n_out, rb, 0};
    return GL_OK;
}

static gl_status bind_vector(struct gl_dflash *d, const struct gl_kernels *k, const char *name,
                             int64_t n, const float **out, struct gl_err *err)
{
    struct tview t;
    gl_status st = find(d, name, 1, n, 1, &t, err);
    if (st != GL_OK)
        return st;
    if (t.type == GL_TYPE_F32 && (uintptr_t)t.data % sizeof(float) == 0) {
        *out = t.data;
        return GL_OK;
    }
    if (t.type != GL_TYPE_F32 && t.type != GL_TYPE_F16 && t.type != GL_TYPE_BF16)
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "dflash: norm tensor %s has type %s (%u), expected F32/F16/BF16", name,
                          tname(t.type), t.type);
    float *f = own(d, (size_t)n * sizeof(float));
    if (!f)
        return gl_err_set(err, GL_E_NOMEM, "dflash: no memory for %s", name);
    if (t.type == GL_TYPE_F32)
        memcpy(f, t.data, (size_t)n * sizeof(float));
    else
        k->to_float[t.type](t.data, f, n);
    *out = f;
    return GL_OK;
}

// The drafter's matrices in the r16 layout, as the target's (model.h, gl_model_params.repack):
// each step extends every speculating sequence's context through fc and 5 layers' K/V
// (163 MB of Q4_K on the 30b-shape drafter); on the row path that cost 9-15% of a 52-layer
// decode step with nothing drafted, in the r16 GEMM it is bandwidth-bound.
static gl_status repack(struct gl_dflash *d, struct gl_err *err)
{
    struct gl_model_params mp = gl_model_default_params();
    if (!mp.repack || !mp.keep_quant)
        return GL_OK;
    const struct gl_kernels *k = gl_kernels_get();
    const int mm = d->gguf && gl_gguf_is_mmapped(d->gguf);
    for (int i = -1; i < d->cfg.n_layer; i++) {
        struct gl_dflash_layer *L = i >= 0 ? &d->layers[i] : NULL;
        struct gl_weight *ws[7] = {&d->fc};
        if (L) {
            struct gl_weight *lw[7] = {&L->q,        &L->k,      &L->v,       &L->o,
                                       &L->ffn_gate, &L->ffn_up, &L->ffn_down};
            memcpy(ws, lw, sizeof ws);
        }
        for (int j = 0; j < (L ? 7 : 1); j++) {
            void *copy;
            gl_status st = gl_weight_repack_r16(ws[j], k, NULL, mm, &copy, err);
            if (st != GL_OK)
                return st;
            if (copy) {
                GL_ASSERT(d->n_r16 < (int)(sizeof d->r16 / sizeof *d->r16));
                d->r16_bytes[d->n_r16] = ws[j]->row_bytes * (size_t)ws[j]->n_out;
                d->r16[d->n_r16++] = copy;
            }
        }
    }
    return GL_OK;
}

// Exactly the expected set: anything else (token_embd/output of an own head, d2t, DSpark's
// markov heads, post norms, sinks, rope_freqs, fc.scale) belongs to a variant we do not run.
// Called when the count is off (every expected tensor was found): names the first unknown one.
static gl_status unknown_tensor(const struct gl_dflash *d, struct gl_err *err)
{
    const struct gl_dflash_config *cf = &d->cfg;
    const int64_t n = d->st ? gl_safetensors_n_tensors(d->st) : gl_gguf_n_tensors(d->gguf);
    for (int64_t i = 0; i < n; i++) {
        char nm[128], gg[128];
        if (d->st) {
            snprintf(nm, sizeof nm, "%.120s", gl_safetensors_tensor_at(d->st, i)->name);
            if (!gl_dflash_hf_gguf_name(nm, gg, sizeof gg))
                gg[0] = '\0';
        } else {
            const struct gl_gguf_tensor *t = gl_gguf_tensor_at(d->gguf, i);
            snprintf(nm, sizeof nm, "%.*s", (int)(t->name.len > 120 ? 120 : t->name.len),
                     t->name.ptr);
            snprintf(gg, sizeof gg, "%s", nm);
        }
        int known = 0, bl = -1, end = 0;
        char role[32];
        if (!strcmp(gg, "fc.weight") || !strcmp(gg, "enc.output_norm.weight") ||
            !strcmp(gg, "output_norm.weight"))
            known = 1;
        else if (sscanf(gg, "blk.%d.%31[a-z_].weight%n", &bl, role, &end) == 2 && !gg[end] &&
                 bl >= 0 && bl < cf->n_layer) {
            char hn[160];
            known = gl_dflash_hf_tensor_name(gg, hn, sizeof hn);
        }
        if (!known)
            return gl_err_set(
                err, GL_E_UNSUPPORTED,
                "dflash: tensor %s%s%s is not part of a DFlash drafter glint runs", nm,
                d->st ? " in " : "",
                d->st ? gl_safetensors_shard_path(d->st, gl_safetensors_tensor_at(d->st, i)->shard)
                      : "");
    }
    // duplicates are refused by both readers, so this cannot happen
    return gl_err_set(err, GL_E_FORMAT, "dflash: %lld tensors, expected %lld", (long long)n,
                      (long long)gl_dflash_n_tensors(cf));
}

// Binds every tensor of d (config parsed) from its container.
static gl_status bind_all(struct gl_dflash *d, struct gl_err *err)
{
    const struct gl_dflash_config *cf = &d->cfg;
    if (!(d->layers = gl_calloc((size_t)cf->n_layer, sizeof *d->layers)))
        return gl_err_set(err, GL_E_NOMEM, "dflash: out of memory");
    const struct gl_kernels *k = gl_kernels_get();
    const int64_t E = cf->n_embd, F = cf->n_ff, D = cf->head_dim;
    const int64_t QD = (int64_t)cf->n_head * D, KD = (int64_t)cf->n_head_kv * D;
    gl_status st = bind_matrix(d, k, "fc.weight", (int64_t)cf->n_target * E, E, &d->fc, err);
    if (st == GL_OK)
        st = bind_vector(d, k, "enc.output_norm.weight", E, &d->enc_norm, err);
    if (st == GL_OK)
        st = bind_vector(d, k, "output_norm.weight", E, &d->output_norm, err);
    for (int l = 0; st == GL_OK && l < cf->n_layer; l++) {
        struct gl_dflash_layer *L = &d->layers[l];
        char n[64];
#define NM(role) (snprintf(n, sizeof n, "blk.%d." role ".weight", l), n)
        st = bind_vector(d, k, NM("attn_norm"), E, &L->attn_norm, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("attn_q"), E, QD, &L->q, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("attn_k"), E, KD, &L->k, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("attn_v"), E, KD, &L->v, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("attn_output"), QD, E, &L->o, err);
        if (st == GL_OK)
            st = bind_vector(d, k, NM("attn_q_norm"), D, &L->q_norm, err);
        if (st == GL_OK)
            st = bind_vector(d, k, NM("attn_k_norm"), D, &L->k_norm, err);
        if (st == GL_OK)
            st = bind_vector(d, k, NM("ffn_norm"), E, &L->ffn_norm, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("ffn_gate"), E, F, &L->ffn_gate, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("ffn_up"), E, F, &L->ffn_up, err);
        if (st == GL_OK)
            st = bind_matrix(d, k, NM("ffn_down"), F, E, &L->ffn_down, err);
#undef NM
    }
    const int64_t have = d->st ? gl_safetensors_n_tensors(d->st) : gl_gguf_n_tensors(d->gguf);
    if (st == GL_OK && have != gl_dflash_n_tensors(cf))
        st = unknown_tensor(d, err);
    return st == GL_OK ? repack(d, err) : st;
}

gl_status gl_dflash_load(struct gl_dflash **out, const struct gl_gguf *g, struct gl_err *err)
{
    *out = NULL;
    struct gl_dflash *d = gl_calloc(1, sizeof *d);
    if (!d)
        return gl_err_set(err, GL_E_NOMEM, "dflash: out of memory");
    d->gguf = g;
    gl_status st = gl_dflash_config_parse(&d->cfg, g, err);
    if (st == GL_OK)
        st = bind_all(d, err);
    if (st != GL_OK) {
        gl_dflash_delete(d);
        return st;
    }
    *out = d;
    return GL_OK;
}

// An HF assistant folder: config first (cheap, and its errors are the likelier ones), then the
// safetensors (the fuzzed reader validates every header), then the same binding as a GGUF.
static gl_status open_hf(struct gl_dflash **out, const char *dir, struct gl_err *err)
{
    struct gl_dflash *d = gl_calloc(1, sizeof *d);
    if (!d)
        return gl_err_set(err, GL_E_NOMEM, "dflash: out of memory");
    gl_status st = GL_OK;
    if (!(d->dir = gl_strdup(dir)))
        st = gl_err_set(err, GL_E_NOMEM, "dflash: out of memory");
    if (st == GL_OK)
        st = gl_dflash_hf_config_parse(&d->cfg, dir, err);
    if (st == GL_OK)
        st = gl_safetensors_open_dir(&d->st, dir, err);
    if (st == GL_OK)
        st = bind_all(d, err);
    if (st != GL_OK) {
        gl_dflash_delete(d);
        return st;
    }
    *out = d;
    return GL_OK;
}

gl_status gl_dflash_open(struct gl_dflash **out, const char *path, struct gl_err *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return open_hf(out, path, err);
    struct gl_gguf *g = NULL;
    struct gl_gguf_open_params op = gl_gguf_default_open_params();
    gl_status st = gl_gguf_open(&g, path, &op, err);
    if (st != GL_OK)
        return st;
    st = gl_dflash_load(out, g, err);
    if (st != GL_OK) {
        gl_gguf_close(g);
        return st;
    }
    (*out)->owns_gguf = 1;
    return GL_OK;
}

void gl_dflash_delete(struct gl_dflash *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n_owned; i++)
        gl_free(d->owned[i]);
    for (int i = 0; i < d->n_r16; i++)
        gl_free_huge(d->r16[i], d->r16_bytes[i]);
    gl_free(d->layers);
    if (d->owns_gguf)
        gl_gguf_close((struct gl_gguf *)d->gguf);
    gl_safetensors_close(d->st);
    gl_free(d->dir);
    gl_free(d);
}

gl_status gl_dflash_check_target(const struct gl_dflash *d, const struct gl_model *target,
                                 struct gl_err *err)
{
    const struct gl_dflash_config *cf = &d->cfg;
    const struct gl_model_config *tc = &target->cfg;
    if (cf->n_embd != tc->n_embd)
        return gl_err_set(err, GL_E_INVAL,
                          "dflash: drafter hidden size %d differs from the target's %d", cf->n_embd,
                          tc->n_embd);
    for (int i = 0; i < cf->n_target; i++)
        if (cf->target_layers[i] >= tc->n_layer)
            return gl_err_set(err, GL_E_INVAL,
                              "dflash: target_layers[%d] = %d (layer %d's output) but the target "
                              "has %d layers",
                              i, cf->target_layers[i] + 1, cf->target_layers[i], tc->n_layer);
    if (cf->mask_token_id >= tc->n_vocab)
        return gl_err_set(err, GL_E_INVAL,
                          "dflash: mask_token_id %d outside the target vocabulary of %d",
                          cf->mask_token_id, tc->n_vocab);
    return GL_OK;
}

// ---- per-sequence projected context ----

void gl_dflash_kv_config(const struct gl_dflash *d, struct gl_model_config *out)
{
    const struct gl_dflash_config *cf = &d->cfg;
    memset(out, 0, sizeof *out);
    out->n_layer = cf->n_layer;
    out->n_head = cf->n_head;
    out->n_head_kv = cf->n_head_kv;
    out->head_dim = cf->head_dim;
    out->n_embd = cf->n_embd;
    out->window = cf->window;
    for (int l = 0; l < cf->n_layer; l++)
        out->swa[l] = cf->window > 0 && cf->swa[l];
}

// A private, fully mapped f32 store (model.h gl_kv_cache: every position of every layer), so
// that tests and the engine's audit run the very code the paged pool's views feed.
struct gl_dflash_seq {
    int64_t len, capacity;
    struct gl_kv_cache *kv;
    struct gl_kv_view views[GL_DFLASH_MAX_LAYERS];
};

gl_status gl_dflash_seq_new(struct gl_dflash_seq **out, const struct gl_dflash *d, int64_t capacity,
                            struct gl_err *err)
{
    *out = NULL;
    if (capacity < 1)
        return gl_err_set(err, GL_E_INVAL, "dflash: sequence capacity %lld < 1",
                          (long long)capacity);
    struct gl_model_config mc;
    gl_dflash_kv_config(d, &mc);
    struct gl_dflash_seq *s = gl_calloc(1, sizeof *s);
    if (!s)
        return gl_err_set(err, GL_E_NOMEM, "dflash: out of memory");
    s->capacity = capacity;
    gl_status st = gl_kv_cache_new(&s->kv, &mc, capacity, err);
    if (st != GL_OK) {
        gl_free(s);
        return st;
    }
    for (int l = 0; l < d->cfg.n_layer; l++)
        s->views[l] = gl_kv_cache_view(s->kv, l);
    *out = s;
    return GL_OK;
}

void gl_dflash_seq_delete(struct gl_dflash_seq *s)
{
    if (!s)
        return;
    gl_kv_cache_delete(s->kv);
    gl_free(s);
}

int64_t gl_dflash_seq_len(const struct gl_dflash_seq *s)
{
    return s->len;
}

gl_status gl_dflash_seq_truncate(struct gl_dflash_seq *s, int64_t len, struct gl_err *err)
{
    if (len < 0 || len > s->len)
        return gl_err_set(err, GL_E_INVAL, "dflash: truncate to %lld of a %lld-row context",
                          (long long)len, (long long)s->len);
    s->len = len;
    return GL_OK;
}

// Position p's K (is_v 0) or V row of one layer: Hkv * D f32 values in the view's page.
static float *ctx_row(const struct gl_kv_view *v, int64_t p, int is_v)
{
    return (float *)(gl_kv_view__page(v, p) + (is_v ? v->v_off : v->k_off) +
                     (size_t)(p % v->block_size) * v->row_bytes);
}

// ---- forward ----

struct gl_dflash_ctx {
    const struct gl_dflash *d;
    const struct gl_model *target;
    const struct gl_kernels *k;
    struct gl_pool *pool;
    int n_rows;       // rows per call (>= block_size)
    int block_causal; // negative control only
    // Scratch, n_rows rows each: x (E), h (E), q (H*D), kk/vv (Hkv*D), att (H*D), fa/fb (F),
    // act: the quantized activations of the widest input.
    float *x, *h, *q, *kk, *vv, *att, *fa, *fb;
    void *act;
    size_t act_cap;
};

void gl_dflash__set_block_causal(struct gl_dflash_ctx *c, int causal)
{
    c->block_causal = causal;
}

gl_status gl_dflash_ctx_new(struct gl_dflash_ctx **out, const struct gl_dflash *d,
                            const struct gl_model *target, int n_rows, int n_threads,
                            struct gl_err *err)
{
    *out = NULL;
    gl_status st = gl_dflash_check_target(d, target, err);
    if (st != GL_OK)
        return st;
    const struct gl_dflash_config *cf = &d->cfg;
    if (n_rows < cf->block_size)
        n_rows = cf->block_size;
    struct gl_dflash_ctx *c = gl_calloc(1, sizeof *c);
    if (!c)
        return gl_err_set(err, GL_E_NOMEM, "dflash: out of memory");
    c->d = d;
    c->target = target;
    c->k = gl_kernels_get();
    c->n_rows = n_rows;
    c->pool = gl_pool_new(n_threads > 0 ? n_threads : 1);
    const size_t R = (size_t)n_rows, E = (size_t)cf->n_embd, F = (size_t)cf->n_ff;
    const size_t QD = (size_t)cf->n_head * (size_t)cf->head_dim;
    const size_t KD = (size_t)cf->n_head_kv * (size_t)cf->head_dim;
    const size_t TE = (size_t)cf->n_target * E;
    size_t widest = TE > F ? TE : F;
    if (QD > widest)
        widest = QD;
    // Q8_K rows are the largest activation type per element (gl_type_vec_dot_type of k-quants).
    c->act_cap = R * (gl_type_row_size(GL_TYPE_F32, (int64_t)widest) + 64);
    int ok = c->pool != NULL;
#define A(p, n) ok = ok && ((p) = gl_malloc((n) * sizeof(float))) != NULL
    A(c->x, R * E);
    A(c->h, R * E);
    A(c->q, R * QD);
    A(c->kk, R * KD);
    A(c->vv, R * KD);
    A(c->att, R * QD);
    A(c->fa, R * F);
    A(c->fb, R * F);
#undef A
    ok = ok && (c->act = gl_malloc(c->act_cap)) != NULL;
    if (!ok) {
        gl_dflash_ctx_delete(c);
        return gl_err_set(err, GL_E_NOMEM, "dflash: no memory for %d rows of scratch", n_rows);
    }
    *out = c;
    return GL_OK;
}

void gl_dflash_ctx_delete(struct gl_dflash_ctx *c)
{
    if (!c)
        return;
    gl_free(c->x);
    gl_free(c->h);
    gl_free(c->q);
    gl_free(c->kk);
    gl_free(c->vv);
    gl_free(c->att);
    gl_free(c->fa);
    gl_free(c->fb);
    gl_free(c->act);
    if (c->pool)
        gl_pool_delete(c->pool);
    gl_free(c);
}

// out (n x w->n_out) = x (n x w->n_in) times w's rows, through the shared matmul kernels (any
// weight type: the activations are converted to the type's vec_dot format first).
static void matmul(struct gl_dflash_ctx *c, const struct gl_weight *w, const float *x, int64_t n,
                   float *out)
{
    enum gl_type vdt = gl_type_vec_dot_type(w->type);
    const void *act = x;
    size_t stride = (size_t)w->n_in * sizeof(float);
    if (vdt != GL_TYPE_F32) {
        stride = gl_type_row_size(vdt, w->n_in);
        GL_ASSERT(stride > 0 && stride * (size_t)n <= c->act_cap);
        gl_quantize_rows(c->pool, c->k, vdt, x, n, w->n_in, c->act, stride);
        act = c->act;
    }
    (w->r16 ? gl_matmul_r16 : gl_matmul)(c->pool, c->k, w->type, w->data, w->n_out, w->n_in, act,
                                         stride, n, out, w->n_out);
}

// Per head of D values: RMS * w, then NeoX RoPE at position pos (dim j paired with j + D/2,
// angle pos * base^(-2j/D)): the HF rotate-half layout, which the dflash GGUF keeps (not
// permuted, llama.cpp rope type NEOX). The angle depends on j only, so each is computed once for
// all n_heads heads, not once per head.
static void norm_rope_heads(const struct gl_kernels *k, float *v, int n_heads, int D,
                            const float *w, float eps, double base, int64_t pos)
{
    const int half = D / 2;
    for (int h = 0; h < n_heads; h++)
        k->rms_norm(v + (size_t)h * (size_t)D, v + (size_t)h * (size_t)D, w, D, eps);
    for (int j = 0; j < half; j++) {
        double ang = (double)pos * pow(base, -2.0 * j / D);
        float cs = (float)cos(ang), sn = (float)sin(ang);
        for (int h = 0; h < n_heads; h++) {
            float *x = v + (size_t)h * (size_t)D;
            float x0 = x[j], x1 = x[j + half];
            x[j] = x0 * cs - x1 * sn;
            x[j + half] = x0 * sn + x1 * cs;
        }
    }
}

// The views' rows are f32 of Hkv * D values (the drafter's context is never quantized: its
// blocks must equal the reference's bit for bit).
static int kv_ok(const struct gl_dflash_config *cf, const struct gl_dflash_kv *kv)
{
    const size_t rb = (size_t)cf->n_head_kv * (size_t)cf->head_dim * sizeof(float);
    for (int l = 0; l < cf->n_layer; l++)
        if (kv->views[l].dtype != GL_KV_F32 || kv->views[l].row_bytes != rb)
            return 0;
    return kv->len >= 0;
}

gl_status gl_dflash_append(struct gl_dflash_ctx *c, struct gl_dflash_seq *s, const float *hidden,
                           int64_t n, struct gl_err *err)
{
    if (n >= 0 && s->len + n > s->capacity)
        return gl_err_set(err, GL_E_INVAL, "dflash: context of %lld rows is full",
                          (long long)s->capacity);
    const struct gl_dflash_kv kv = {s->views, s->len};
    gl_status st = gl_dflash_append_kv(c, &kv, hidden, n, err);
    if (st == GL_OK)
        s->len += n;
    return st;
}

gl_status gl_dflash_append_kv(struct gl_dflash_ctx *c, const struct gl_dflash_kv *kv,
                              const float *hidden, int64_t n, struct gl_err *err)
{
    const struct gl_dflash *d = c->d;
    const struct gl_dflash_config *cf = &d->cfg;
    if (n < 0 || n > c->n_rows)
        return gl_err_set(err, GL_E_INVAL, "dflash: append of %lld rows (at most %d per call)",
                          (long long)n, c->n_rows);
    if (!kv_ok(cf, kv))
        return gl_err_set(err, GL_E_INVAL, "dflash: context views are not f32 rows of %d x %d",
                          cf->n_head_kv, cf->head_dim);
    if (n == 0)
        return GL_OK;
    const int64_t E = cf->n_embd, KD = (int64_t)cf->n_head_kv * cf->head_dim;
    // g = RMS(fc . hidden) * enc_norm: the projected context, shared by every layer's K/V.
    matmul(c, &d->fc, hidden, n, c->h);
    for (int64_t r = 0; r < n; r++)
        c->k->rms_norm(c->h + r * E, c->h + r * E, d->enc_norm, E, cf->rms_eps);
    for (int l = 0; l < cf->n_layer; l++) {
        const struct gl_dflash_layer *L = &d->layers[l];
        // No attn_norm here: the context K/V are projected from g directly (llama.cpp's
        // injection graph; the block's K/V come from attn_norm(block) below).
        matmul(c, &L->k, c->h, n, c->kk);
        matmul(c, &L->v, c->h, n, c->vv);
        for (int64_t r = 0; r < n; r++) {
            const int64_t p = kv->len + r;
            norm_rope_heads(c->k, c->kk + r * KD, cf->n_head_kv, cf->head_dim, L->k_norm,
                            cf->rms_eps, cf->rope_base, p);
            memcpy(ctx_row(&kv->views[l], p, 0), c->kk + r * KD, (size_t)KD * sizeof(float));
            memcpy(ctx_row(&kv->views[l], p, 1), c->vv + r * KD, (size_t)KD * sizeof(float));
        }
    }
    return GL_OK;
}

// Attention of the block's queries (n rows at positions p0..p0+n-1) over the context rows of kv
// visible to each and the block's own keys: key position pk is visible to query pq iff
// pq - pk < window (no window: always), block keys in both directions (bidirectional) unless
// the negative control asks for causal.
struct attn_job {
    struct gl_dflash_ctx *c;
    const struct gl_dflash_kv *kv;
    int layer;
    int64_t n, p0;
};

// Work is split by KV head: each K and V row is read once for the G * n queries that share it
// (not once per query head and row: at a 2048-row context that is 16 MB per layer re-read 64
// times). Per (query, key) the arithmetic and its order are those of the one-query-at-a-time
// form: the dot over D, the softmax over keys in position order, the V sum in the same order.
static void attn_run(void *ctx, int ith, int nth)
{
    const struct attn_job *j = ctx;
    struct gl_dflash_ctx *c = j->c;
    const struct gl_dflash_config *cf = &c->d->cfg;
    const int H = cf->n_head, D = cf->head_dim, G = cf->n_head / cf->n_head_kv;
    const int64_t QD = (int64_t)H * D, KD = (int64_t)cf->n_head_kv * D;
    const int64_t window = cf->swa[j->layer] ? cf->window : 0;
    const int64_t n_ctx = j->kv->len, n = j->n, nq = n * G;
    const struct gl_kv_view *view = &j->kv->views[j->layer];
    // Context keys any query may see start at c_lo (query 0's window); query i's at c0(i).
    const int64_t c_lo = window > 0 && j->p0 - window + 1 > 0 ? j->p0 - window + 1 : 0;
    const int64_t n_c = n_ctx > c_lo ? n_ctx - c_lo : 0, m = n_c + n;
    float *sc = gl_malloc((size_t)(nq * m) * sizeof(float)); // [query (i, g)][key]
    double *sum = gl_malloc((size_t)nq * sizeof(double));
    GL_ASSERT(sc && sum);
    for (int hk = ith; hk < cf->n_head_kv; hk += nth) {
        for (int64_t p = c_lo; p < n_ctx; p++) {
            const float *k = ctx_row(view, p, 0) + (int64_t)hk * D;
            for (int64_t qi = 0; qi < nq; qi++) {
                const int64_t i = qi / G, pq = j->p0 + i;
                float dot = -INFINITY;
                if (window <= 0 || pq - p < window) {
                    const float *q = c->q + i * QD + (int64_t)(hk * G + qi % G) * D;
                    dot = 0.0f;
                    for (int e = 0; e < D; e++)
                        dot += q[e] * k[e];
                    dot *= cf->kq_scale;
                }
                sc[qi * m + (p - c_lo)] = dot;
            }
        }
        for (int64_t t = 0; t < n; t++) {
            const int64_t pk = j->p0 + t;
            const float *k = c->kk + t * KD + (int64_t)hk * D;
            for (int64_t qi = 0; qi < nq; qi++) {
                const int64_t i = qi / G, pq = j->p0 + i;
                const int vis = (window <= 0 || pq - pk < window) && !(c->block_causal && t > i);
                float dot = -INFINITY;
                if (vis) {
                    const float *q = c->q + i * QD + (int64_t)(hk * G + qi % G) * D;
                    dot = 0.0f;
                    for (int e = 0; e < D; e++)
                        dot += q[e] * k[e];
                    dot *= cf->kq_scale;
                }
                sc[qi * m + n_c + t] = dot;
            }
        }
        for (int64_t qi = 0; qi < nq; qi++) {
            float *row = sc + qi * m, mx = -INFINITY;
            for (int64_t t = 0; t < m; t++)
                mx = row[t] > mx ? row[t] : mx;
            double s = 0.0;
            for (int64_t t = 0; t < m; t++) {
                row[t] = row[t] == -INFINITY ? 0.0f : expf(row[t] - mx);
                s += (double)row[t];
            }
            sum[qi] = s;
            float *o = c->att + (qi / G) * QD + (int64_t)(hk * G + qi % G) * D;
            for (int e = 0; e < D; e++)
                o[e] = 0.0f;
        }
        for (int64_t t = 0; t < m; t++) {
            const float *v = t < n_c ? ctx_row(view, c_lo + t, 1) + (int64_t)hk * D
                                     : c->vv + (t - n_c) * KD + (int64_t)hk * D;
            for (int64_t qi = 0; qi < nq; qi++) {
                const float w = sc[qi * m + t];
                if (w == 0.0f)
                    continue;
                const float wgt = (float)((double)w / sum[qi]);
                float *o = c->att + (qi / G) * QD + (int64_t)(hk * G + qi % G) * D;
                for (int e = 0; e < D; e++)
                    o[e] += wgt * v[e];
            }
        }
    }
    gl_free(sc);
    gl_free(sum);
}

gl_status gl_dflash_block(struct gl_dflash_ctx *c, const struct gl_dflash_seq *s, int32_t anchor,
                          int32_t n_block, float *hidden_out, float *logits, struct gl_err *err)
{
    const struct gl_dflash_kv kv = {s->views, s->len};
    return gl_dflash_block_kv(c, &kv, anchor, n_block, hidden_out, logits, err);
}

gl_status gl_dflash_block_kv(struct gl_dflash_ctx *c, const struct gl_dflash_kv *kv, int32_t anchor,
                             int32_t n_block, float *hidden_out, float *logits, struct gl_err *err)
{
    const struct gl_dflash *d = c->d;
    const struct gl_dflash_config *cf = &d->cfg;
    const struct gl_model *tm = c->target;
    if (n_block < 1 || n_block > cf->block_size)
        return gl_err_set(err, GL_E_INVAL, "dflash: block of %d rows (1..%d)", n_block,
                          cf->block_size);
    if (anchor < 0 || anchor >= tm->cfg.n_vocab)
        return gl_err_set(err, GL_E_INVAL, "dflash: anchor token %d outside 0..%d", anchor,
                          tm->cfg.n_vocab - 1);
    if (!kv_ok(cf, kv))
        return gl_err_set(err, GL_E_INVAL, "dflash: context views are not f32 rows of %d x %d",
                          cf->n_head_kv, cf->head_dim);
    const int64_t n = n_block, E = cf->n_embd, F = cf->n_ff, p0 = kv->len;
    const int64_t QD = (int64_t)cf->n_head * cf->head_dim,
                  KD = (int64_t)cf->n_head_kv * cf->head_dim;
    // The target's RAW embedding rows (no embedding RMSNorm: arch doc §7 "noise_embeds").
    const struct gl_weight *te = &tm->tok_embd;
    for (int64_t i = 0; i < n; i++) {
        const int32_t id = i == 0 ? anchor : cf->mask_token_id;
        const uint8_t *row = (const uint8_t *)te->data + (size_t)id * te->row_bytes;
        if (te->type == GL_TYPE_F32)
            memcpy(c->x + i * E, row, (size_t)E * sizeof(float));
        else
            c->k->to_float[te->type](row, c->x + i * E, E);
    }
    for (int l = 0; l < cf->n_layer; l++) {
        const struct gl_dflash_layer *L = &d->layers[l];
        for (int64_t i = 0; i < n; i++)
            c->k->rms_norm(c->h + i * E, c->x + i * E, L->attn_norm, E, cf->rms_eps);
        matmul(c, &L->q, c->h, n, c->q);
        matmul(c, &L->k, c->h, n, c->kk);
        matmul(c, &L->v, c->h, n, c->vv);
        for (int64_t i = 0; i < n; i++) {
            norm_rope_heads(c->k, c->q + i * QD, cf->n_head, cf->head_dim, L->q_norm, cf->rms_eps,
                            cf->rope_base, p0 + i);
            norm_rope_heads(c->k, c->kk + i * KD, cf->n_head_kv, cf->head_dim, L->k_norm,
                            cf->rms_eps, cf->rope_base, p0 + i);
        }
        struct attn_job aj = {c, kv, l, n, p0};
        gl_pool_run(c->pool, attn_run, &aj);
        matmul(c, &L->o, c->att, n, c->h);
        for (int64_t i = 0; i < n * E; i++)
            c->x[i] += c->h[i];
        for (int64_t i = 0; i < n; i++)
            c->k->rms_norm(c->h + i * E, c->x + i * E, L->ffn_norm, E, cf->rms_eps);
        matmul(c, &L->ffn_gate, c->h, n, c->fa);
        matmul(c, &L->ffn_up, c->h, n, c->fb);
        c->k->swiglu(c->fa, c->fb, n * F);
        matmul(c, &L->ffn_down, c->fa, n, c->h);
        for (int64_t i = 0; i < n * E; i++)
            c->x[i] += c->h[i];
    }
    for (int64_t i = 0; i < n; i++)
        c->k->rms_norm(c->h + i * E, c->x + i * E, d->output_norm, E, cf->rms_eps);
    if (hidden_out)
        memcpy(hidden_out, c->h, (size_t)(n * E) * sizeof(float));
    if (logits) // the target's lm_head, raw (llama.cpp's DFlash applies no scale or cap)
        matmul(c, &tm->output, c->h, n, logits);
    (void)err;
    return GL_OK;
}
