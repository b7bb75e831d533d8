// SPDX-License-Identifier: MIT
// make_model: random-weight Muse Glimmer GGUF writer (contract in make_model.h). Keys and tensor
// names follow muse-glimmer-arch.md §3 (what llama.cpp's converter writes and its loader reads);
// the vocabulary is the Llama-4 tiktoken file turned into GGUF "gpt2" form (§4): GPT-2
// byte-to-unicode token strings, "A B" merges in priority order, 2,048 control specials.
// Weights: N(0, std) from a 65,536-entry table of normal quantiles indexed by splitmix64 output,
// one stream per (seed, tensor name, row); norms are 1 + small noise, q_norm 3.87, k_norm 1.
// 30b-shape weights are assembled from a bank of pre-quantized 256-element units (see mm_bank).
#include "model/make_model.h"

#include "gguf/gguf.h"
#include "model/dflash.h"
#include "model/model.h"
#include "quant/quant.h"
#include "safetensors/safetensors.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <sys/stat.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define ARCH            "muse-glimmer"
#define MM_MAX_LAYERS   1024
#define MM_MAX_THREADS  8
#define MM_NORMAL_BITS  16
#define MM_NORMAL_N     (1 << MM_NORMAL_BITS)
#define MM_TEMPLATE_MAX (1u << 20) // chat template size limit (the real one is 9,992 bytes)

// Constants of the released model (arch doc §1, §3.1).
#define MM_QK_SCALE    3.87f
#define MM_LOGIT_SCALE 0.19611613513818404f // 1/sqrt(6656/256)
#define MM_ROPE_BASE   500000.0f
#define MM_RMS_EPS     1e-5f
#define MM_SOFTCAP     20.0f
#define MM_SWA_PERIOD  4
// Tiny preset: std of the output weights chosen so that logits (before the soft-cap) have a
// standard deviation of about MM_TINY_LOGIT_STD: logit = logit_scale * <w_row, x>, |x|^2 ~ E.
#define MM_TINY_LOGIT_STD 3.0

// ---- type recipes ----

enum mm_mix { MM_UNIFORM, MM_KQUANT_M };

static const struct mm_type_spec {
    const char *name;
    enum mm_mix mix;
    enum gl_type type;  // uniform type, or the base type of a _M mix
    uint32_t file_type; // llama_ftype
} mm_type_specs[] = {
    {"F32", MM_UNIFORM, GL_TYPE_F32, 0},       {"F16", MM_UNIFORM, GL_TYPE_F16, 1},
    {"BF16", MM_UNIFORM, GL_TYPE_BF16, 32},    {"Q8_0", MM_UNIFORM, GL_TYPE_Q8_0, 7},
    {"Q4_0", MM_UNIFORM, GL_TYPE_Q4_0, 2},     {"Q4_K", MM_UNIFORM, GL_TYPE_Q4_K, 14},
    {"Q5_K", MM_UNIFORM, GL_TYPE_Q5_K, 16},    {"Q6_K", MM_UNIFORM, GL_TYPE_Q6_K, 18},
    {"Q4_K_M", MM_KQUANT_M, GL_TYPE_Q4_K, 15}, {"Q5_K_M", MM_KQUANT_M, GL_TYPE_Q5_K, 17},
};

static const struct mm_type_spec *type_spec_find(const char *name)
{
    for (size_t i = 0; i < sizeof mm_type_specs / sizeof mm_type_specs[0]; i++)
        if (!strcasecmp(name, mm_type_specs[i].name))
            return &mm_type_specs[i];
    return NULL;
}

// llama.cpp's layer rule for the _M mixes: extra bits on the first and last eighth of the layers
// and on every third layer in between.
static int use_more_bits(int64_t i, int64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// ---- the plan: hyper-parameters and the tensor list ----

enum mm_kind {
    MM_WEIGHT, // scale * N(0, 1)
    MM_NORM,   // 1 + scale * N(0, 1)
    MM_CONST,  // every element = scale
};

// Decision: 30b-shape 2-D weights are built from a bank of MM_BANK_N random 256-element units,
// quantized once; row r of a tensor is a random sequence of units (one splitmix64 draw each).
// Why: reference k-quantization costs ~100 ns/element and a 4-layer 30b-shape file holds 4.6 G
// elements (minutes on 2 cores); copying pre-quantized units makes the write I/O-bound. Values
// stay N(0, std) per element and rows stay distinct (26 units of 4,096 choices each), so logits
// do not tie. The tiny preset does not use it: its 256-element rows would be single units.
#define MM_BANK_UNIT 256 // elements per unit: a multiple of every block size
#define MM_BANK_N    4096
#define MM_MAX_BANKS 4

struct mm_bank {
    enum gl_type type;
    float scale;
    float *values;     // MM_BANK_N x MM_BANK_UNIT floats, owned (NULL until built)
    uint8_t *bytes;    // MM_BANK_N quantized units, owned (NULL unless built with bytes)
    size_t unit_bytes; // bytes of one quantized unit
};

struct mm_tensor {
    char name[80];
    uint32_t n_dims;
    int64_t ne[2]; // [in, out]; ne[1] = 1 for vectors
    enum gl_type type;
    enum mm_kind kind;
    float scale;
    uint64_t stream; // FNV-1a of the name: the tensor's random stream id
    int bank;        // index into mm_plan.banks, or -1: every element drawn directly
};

struct mm_plan {
    struct gl_make_model_params p;
    struct gl_make_model_hparams hp;
    const struct mm_type_spec *spec;
    struct mm_tensor *t; // n_t entries, owned
    int64_t n_t;
    int64_t max_ne0;
    float *normal; // MM_NORMAL_N normal quantiles, owned
    struct mm_bank banks[MM_MAX_BANKS];
    int n_banks;
};

struct gl_make_model_params gl_make_model_default_params(void)
{
    struct gl_make_model_params p;
    memset(&p, 0, sizeof p);
    p.preset = GL_MAKE_MODEL_TINY;
    p.seed = 1;
    p.softcap_mode = GL_MAKE_MODEL_SOFTCAP_VALUE;
    p.softcap = MM_SOFTCAP;
    return p;
}

static gl_status resolve(const struct gl_make_model_params *p, struct gl_make_model_hparams *hp,
                         const struct mm_type_spec **spec, struct gl_err *err)
{
    memset(hp, 0, sizeof *hp);
    hp->n_vocab = GL_TOK_N_BASE + GL_TOK_N_SPECIAL;
    const char *type = p->type;
    if (p->preset == GL_MAKE_MODEL_TINY) {
        hp->n_embd = 256, hp->n_head = 32, hp->n_head_kv = 2, hp->head_dim = 16, hp->n_ff = 512;
        hp->n_layers = 4, hp->window = 8, hp->n_ctx = 4096;
        type = type ? type : "F32";
    } else if (p->preset == GL_MAKE_MODEL_30B_SHAPE) {
        hp->n_embd = 6656, hp->n_head = 32, hp->n_head_kv = 2, hp->head_dim = 128;
        hp->n_ff = 19968, hp->n_layers = 52, hp->window = 2048, hp->n_ctx = 131072;
        type = type ? type : p->format == GL_MAKE_MODEL_SAFETENSORS ? "BF16" : "Q4_K_M";
    } else if (p->preset == GL_MAKE_MODEL_DFLASH_TINY) {
        // Tiny target: 4 layers. Its outputs 0, 1, 2 feed the drafter (the real drafter skips
        // the last layers too: 1..49 of 52, spaced by 12).
        hp->n_embd = 256, hp->n_head = 8, hp->n_head_kv = 2, hp->head_dim = 32, hp->n_ff = 512;
        hp->n_layers = 5, hp->window = 8, hp->n_ctx = 4096;
        hp->n_target = 3;
        for (int i = 0; i < 3; i++)
            hp->target_layer_ids[i] = i;
        type = type ? type : "F32";
    } else if (p->preset == GL_MAKE_MODEL_DFLASH_30B_SHAPE) {
        hp->n_embd = 6656, hp->n_head = 32, hp->n_head_kv = 8, hp->head_dim = 128;
        hp->n_ff = 19968, hp->n_layers = 5, hp->window = 2048, hp->n_ctx = 131072;
        hp->n_target = 5;
        for (int i = 0; i < 5; i++)
            hp->target_layer_ids[i] = 1 + 12 * i; // arch doc §7: 1, 13, 25, 37, 49
        type = type ? type : p->format == GL_MAKE_MODEL_SAFETENSORS ? "BF16" : "Q4_K_M";
    } else {
        return gl_err_set(err, GL_E_INVAL, "make-model: unknown preset %d", (int)p->preset);
    }
    if (hp->n_target > 0) {
        hp->dflash = 1;
        hp->block_size = GL_MAKE_MODEL_DFLASH_BLOCK;
        hp->mask_token_id = GL_MAKE_MODEL_DFLASH_MASK;
    }
    if (p->n_layers < 0 || p->n_layers > MM_MAX_LAYERS)
        return gl_err_set(err, GL_E_INVAL, "make-model: --layers %d outside 1..%d", p->n_layers,
                          MM_MAX_LAYERS);
    if (p->n_layers)
        hp->n_layers = p->n_layers;
    if (p->window < 0)
        return gl_err_set(err, GL_E_INVAL, "make-model: --window %d must be >= 1", p->window);
    if (p->window)
        hp->window = p->window;
    if (p->softcap_mode == GL_MAKE_MODEL_SOFTCAP_VALUE &&
        !(p->softcap >= 0.0f && isfinite(p->softcap)))
        return gl_err_set(err, GL_E_INVAL, "make-model: soft-cap %g must be finite and >= 0",
                          (double)p->softcap);
    *spec = type_spec_find(type);
    if (!*spec)
        return gl_err_set(err, GL_E_INVAL,
                          "make-model: unknown type '%s' (F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|"
                          "Q4_K_M|Q5_K_M)",
                          type);
    if (p->format == GL_MAKE_MODEL_SAFETENSORS &&
        ((*spec)->mix != MM_UNIFORM ||
         ((*spec)->type != GL_TYPE_F32 && (*spec)->type != GL_TYPE_F16 &&
          (*spec)->type != GL_TYPE_BF16)))
        return gl_err_set(err, GL_E_INVAL,
                          "make-model: type '%s' cannot be stored in safetensors (F32|F16|BF16)",
                          type);
    hp->file_type = (*spec)->file_type;
    return GL_OK;
}

gl_status gl_make_model_hparams(const struct gl_make_model_params *p,
                                struct gl_make_model_hparams *out, struct gl_err *err)
{
    const struct mm_type_spec *spec;
    return resolve(p, out, &spec, err);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

// Type of a 2-D weight under recipe spec. `role` is the tensor name without "blk.N." / ".weight".
static enum gl_type recipe_weight_type(const struct mm_type_spec *spec, const char *role,
                                       int64_t layer, int64_t n_layers)
{
    if (spec->mix == MM_UNIFORM)
        return spec->type;
    if (!strcmp(role, "output"))
        return GL_TYPE_Q6_K;
    if ((!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) && use_more_bits(layer, n_layers))
        return GL_TYPE_Q6_K;
    return spec->type;
}

static enum gl_type weight_type(const struct mm_plan *pl, const char *role, int64_t layer)
{
    return recipe_weight_type(pl->spec, role, layer, pl->hp.n_layers);
}

int gl_make_model_recipe_type(const char *recipe, const char *name, int64_t n_layers,
                              uint32_t *file_type)
{
    const struct mm_type_spec *spec = recipe ? type_spec_find(recipe) : NULL;
    if (!spec)
        return -1;
    if (file_type)
        *file_type = spec->file_type;
    if (!name)
        return (int)spec->type;
    int layer = -1, n = 0;
    char role[64] = "";
    if (sscanf(name, "blk.%d.%63[a-z_].weight%n", &layer, role, &n) != 2 || name[n] != '\0') {
        const char *dot = strchr(name, '.');
        snprintf(role, sizeof role, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
        layer = -1;
    }
    return (int)recipe_weight_type(spec, role, layer, n_layers);
}

// Adds tensor `name` (HF vision names are used verbatim; text tensors get their GGUF name from
// plan_add). role and layer choose the type under a _M mix.
static void plan_add_named(struct mm_plan *pl, const char *name, int64_t layer, const char *role,
                           int64_t ne0, int64_t ne1, enum mm_kind kind, float scale)
{
    struct mm_tensor *t = &pl->t[pl->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->type = ne1 ? weight_type(pl, role, layer) : GL_TYPE_F32; // vectors always F32
    t->kind = kind;
    t->scale = scale;
    t->stream = fnv1a(t->name);
    t->bank = -1;
    if ((pl->p.preset == GL_MAKE_MODEL_30B_SHAPE ||
         pl->p.preset == GL_MAKE_MODEL_DFLASH_30B_SHAPE) &&
        kind == MM_WEIGHT && ne0 % MM_BANK_UNIT == 0) {
        while (t->bank < 0) {
            for (int b = 0; b < pl->n_banks; b++)
                if (pl->banks[b].type == t->type && pl->banks[b].scale == scale)
                    t->bank = b;
            if (t->bank < 0) {
                GL_ASSERT(pl->n_banks < MM_MAX_BANKS);
                pl->banks[pl->n_banks].type = t->type;
                pl->banks[pl->n_banks++].scale = scale;
            }
        }
    }
    if (ne0 > pl->max_ne0)
        pl->max_ne0 = ne0;
}

static void plan_add(struct mm_plan *pl, int64_t layer, const char *role, int64_t ne0, int64_t ne1,
                     enum mm_kind kind, float scale)
{
    char name[80];
    if (layer >= 0)
        snprintf(name, sizeof name, "blk.%d.%s.weight", (int)layer, role);
    else
        snprintf(name, sizeof name, "%s.weight", role);
    plan_add_named(pl, name, layer, role, ne0, ne1, kind, scale);
}

// Vision tower dims written for a preset (arch doc §6.1; tiny: scaled down).
struct mm_vision {
    int64_t hidden, inter, layers, heads, pos_side, proj; // proj: adapter width (4096 released)
};

static struct mm_vision vision_dims(const struct gl_make_model_params *p)
{
    if (p->preset == GL_MAKE_MODEL_TINY)
        return (struct mm_vision){64, 128, 2, 4, 4, 128};
    return (struct mm_vision){1536, 8960, 50, 16, 32, 4096};
}

#define MM_PATCH_DIM (2 * 3 * 14 * 14) // temporal x channel x 14 x 14 values per patch (§6.2)

static int is_drafter(const struct gl_make_model_params *p)
{
    return p->preset == GL_MAKE_MODEL_DFLASH_TINY || p->preset == GL_MAKE_MODEL_DFLASH_30B_SHAPE;
}

static int64_t vision_n_tensors(const struct gl_make_model_params *p)
{
    return p->format == GL_MAKE_MODEL_SAFETENSORS && !is_drafter(p) ? 9 + 16 * vision_dims(p).layers
                                                                    : 0;
}

// The vision tower under its HF names (§6.6), for the safetensors form only: ne = [in, out] as
// for the text tensors; LayerNorm weights 1 + noise, biases and weights N(0, std).
static void plan_add_vision(struct mm_plan *pl, int tiny)
{
    const struct mm_vision v = vision_dims(&pl->p);
    const int64_t E = pl->hp.n_embd, merged = 4 * v.hidden; // 2x2 pixel shuffle
    const float b = 0.02f;
    char nm[80];
#define FAN(n)                           (tiny ? (float)(1.0 / sqrt((double)(n))) : 0.02f)
#define ADD(name, ne0, ne1, kind, scale) plan_add_named(pl, name, -1, "", ne0, ne1, kind, scale)
    ADD("model.vision_tower.patch_embedder.patch_embedding.weight", MM_PATCH_DIM, v.hidden,
        MM_WEIGHT, FAN(MM_PATCH_DIM));
    ADD("model.vision_tower.patch_embedder.position_embedding_table.weight", v.hidden,
        v.pos_side * v.pos_side, MM_WEIGHT, b);
    ADD("model.vision_tower.ln_pre.weight", v.hidden, 0, MM_NORM, b);
    ADD("model.vision_tower.ln_pre.bias", v.hidden, 0, MM_WEIGHT, b);
    static const char *const norms[2] = {"norm1", "norm2"}, *const attn[4] = {"q_proj", "k_proj",
                                                                              "v_proj", "proj"};
    for (int64_t l = 0; l < v.layers; l++) {
        for (int i = 0; i < 2; i++) {
            snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.%s.weight", (int)l, norms[i]);
            ADD(nm, v.hidden, 0, MM_NORM, b);
            snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.%s.bias", (int)l, norms[i]);
            ADD(nm, v.hidden, 0, MM_WEIGHT, b);
        }
        for (int i = 0; i < 4; i++) {
            snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.attn.%s.weight", (int)l, attn[i]);
            ADD(nm, v.hidden, v.hidden, MM_WEIGHT, FAN(v.hidden));
            snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.attn.%s.bias", (int)l, attn[i]);
            ADD(nm, v.hidden, 0, MM_WEIGHT, b);
        }
        snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.mlp.fc1.weight", (int)l);
        ADD(nm, v.hidden, v.inter, MM_WEIGHT, FAN(v.hidden));
        snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.mlp.fc1.bias", (int)l);
        ADD(nm, v.inter, 0, MM_WEIGHT, b);
        snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.mlp.fc2.weight", (int)l);
        ADD(nm, v.inter, v.hidden, MM_WEIGHT, FAN(v.inter));
        snprintf(nm, sizeof nm, "model.vision_tower.layers.%d.mlp.fc2.bias", (int)l);
        ADD(nm, v.hidden, 0, MM_WEIGHT, b);
    }
    ADD("model.vision_tower.ln_post.weight", v.hidden, 0, MM_NORM, b);
    ADD("model.vision_tower.ln_post.bias", v.hidden, 0, MM_WEIGHT, b);
    ADD("model.vision_adapter.fc1.weight", merged, v.proj, MM_WEIGHT, FAN(merged));
    ADD("model.vision_adapter.fc2.weight", v.proj, v.proj, MM_WEIGHT, FAN(v.proj));
    ADD("model.vision_projection.weight", v.proj, E, MM_WEIGHT, FAN(v.proj));
#undef ADD
#undef FAN
}

// Inverse standard normal CDF for 0 < p <= 0.5 (Acklam's rational approximation, relative error
// below 1.2e-9: far finer than the float table it fills).
static double normal_quantile_lower(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    if (p < 0.02425) {
        double q = sqrt(-2.0 * log(p));
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    }
    double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

static void plan_free(struct mm_plan *pl)
{
    for (int b = 0; b < pl->n_banks; b++) {
        gl_free(pl->banks[b].values);
        gl_free(pl->banks[b].bytes);
        pl->banks[b].values = NULL;
        pl->banks[b].bytes = NULL;
    }
    gl_free(pl->t);
    gl_free(pl->normal);
    pl->t = NULL;
    pl->normal = NULL;
}

static gl_status plan_init(struct mm_plan *pl, const struct gl_make_model_params *p,
                           struct gl_err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->p = *p;
    gl_status st = resolve(p, &pl->hp, &pl->spec, err);
    if (st != GL_OK)
        return st;
    const struct gl_make_model_hparams *hp = &pl->hp;
    pl->t = gl_calloc((size_t)(3 + 14 * hp->n_layers + vision_n_tensors(p)), sizeof *pl->t);
    // (a drafter has 3 + 11 per block: fewer)
    pl->normal = gl_malloc(MM_NORMAL_N * sizeof *pl->normal);
    if (!pl->t || !pl->normal) {
        plan_free(pl);
        return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for the tensor plan");
    }
    // Symmetric table: entry i is the quantile at (i + 0.5) / N, so the mean is exactly 0.
    for (int i = 0; i < MM_NORMAL_N / 2; i++) {
        float v = (float)normal_quantile_lower((i + 0.5) / MM_NORMAL_N);
        pl->normal[i] = v;
        pl->normal[MM_NORMAL_N - 1 - i] = -v;
    }

    const int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    const int64_t QD = hp->n_head * hp->head_dim, KD = hp->n_head_kv * hp->head_dim;
    const int tiny = p->preset == GL_MAKE_MODEL_TINY || p->preset == GL_MAKE_MODEL_DFLASH_TINY;
    // Tiny: projections N(0, 1/fan_in) so every pre-activation has unit variance; embeddings are
    // RMS-normalised at run time so their scale is free. 30b-shape: N(0, 0.02) like the perf
    // anchor (its logits are near-uniform, which does not matter for speed).
    const float std_embd = tiny ? 1.0f : 0.02f;
    const float std_out =
        tiny ? (float)(MM_TINY_LOGIT_STD / (sqrt((double)E) * (double)MM_LOGIT_SCALE)) : 0.02f;
    const float noise = tiny ? 0.05f : 0.02f;
#define FAN(n) (tiny ? (float)(1.0 / sqrt((double)(n))) : 0.02f)
    if (hp->dflash) {
        // llama.cpp's dflash tensors (llama-model dflash load_arch_tensors): plain w * RMS norms,
        // learned q/k norms, no gate, no sandwich norms, no embedding or head of its own.
        const int64_t TE = hp->n_target * E;
        plan_add(pl, -1, "fc", TE, E, MM_WEIGHT, FAN(TE));
        plan_add_named(pl, "enc.output_norm.weight", -1, "enc.output_norm", E, 0, MM_NORM, noise);
        plan_add(pl, -1, "output_norm", E, 0, MM_NORM, noise);
        for (int64_t l = 0; l < hp->n_layers; l++) {
            plan_add(pl, l, "attn_norm", E, 0, MM_NORM, noise);
            plan_add(pl, l, "attn_q", E, QD, MM_WEIGHT, FAN(E));
            plan_add(pl, l, "attn_k", E, KD, MM_WEIGHT, FAN(E));
            plan_add(pl, l, "attn_v", E, KD, MM_WEIGHT, FAN(E));
            plan_add(pl, l, "attn_output", QD, E, MM_WEIGHT, FAN(QD));
            plan_add(pl, l, "attn_q_norm", hp->head_dim, 0, MM_NORM, noise);
            plan_add(pl, l, "attn_k_norm", hp->head_dim, 0, MM_NORM, noise);
            plan_add(pl, l, "ffn_norm", E, 0, MM_NORM, noise);
            plan_add(pl, l, "ffn_gate", E, F, MM_WEIGHT, FAN(E));
            plan_add(pl, l, "ffn_up", E, F, MM_WEIGHT, FAN(E));
            plan_add(pl, l, "ffn_down", F, E, MM_WEIGHT, FAN(F));
        }
    } else {
        plan_add(pl, -1, "token_embd", E, V, MM_WEIGHT, std_embd);
        plan_add(pl, -1, "output_norm", E, 0, MM_NORM, noise);
        plan_add(pl, -1, "output", E, V, MM_WEIGHT, std_out);
    }
    for (int64_t l = 0; !hp->dflash && l < hp->n_layers; l++) {
        plan_add(pl, l, "attn_norm", E, 0, MM_NORM, noise);
        plan_add(pl, l, "attn_q", E, QD, MM_WEIGHT, FAN(E));
        plan_add(pl, l, "attn_k", E, KD, MM_WEIGHT, FAN(E));
        plan_add(pl, l, "attn_v", E, KD, MM_WEIGHT, FAN(E));
        plan_add(pl, l, "attn_gate", E, QD, MM_WEIGHT, FAN(E));
        plan_add(pl, l, "attn_output", QD, E, MM_WEIGHT, FAN(QD));
        plan_add(pl, l, "attn_q_norm", hp->head_dim, 0, MM_CONST, MM_QK_SCALE);
        plan_add(pl, l, "attn_k_norm", hp->head_dim, 0, MM_CONST, 1.0f);
        plan_add(pl, l, "post_attention_norm", E, 0, MM_NORM, noise);
        plan_add(pl, l, "ffn_norm", E, 0, MM_NORM, noise);
        plan_add(pl, l, "post_ffw_norm", E, 0, MM_NORM, noise);
        plan_add(pl, l, "ffn_gate", E, F, MM_WEIGHT, FAN(E));
        plan_add(pl, l, "ffn_up", E, F, MM_WEIGHT, FAN(E));
        plan_add(pl, l, "ffn_down", F, E, MM_WEIGHT, FAN(F));
    }
#undef FAN
    if (p->format == GL_MAKE_MODEL_SAFETENSORS && !hp->dflash)
        plan_add_vision(pl, tiny);
    for (int64_t i = 0; i < pl->n_t; i++) {
        const struct mm_tensor *t = &pl->t[i];
        if (gl_type_row_size(t->type, t->ne[0]) == 0) {
            const struct gl_type_traits *tr = gl_type_traits_of(t->type);
            st = gl_err_set(err, GL_E_UNSUPPORTED,
                            "make-model: tensor '%s' has ne[0] = %lld, not a multiple of the %s "
                            "block size %lld; choose another --type",
                            t->name, (long long)t->ne[0], tr && tr->name ? tr->name : "?",
                            tr ? (long long)tr->blck_size : 0LL);
            plan_free(pl);
            return st;
        }
    }
    return GL_OK;
}

static const struct mm_tensor *plan_find(const struct mm_plan *pl, const char *name)
{
    for (int64_t i = 0; i < pl->n_t; i++)
        if (!strcmp(pl->t[i].name, name))
            return &pl->t[i];
    return NULL;
}

// ---- random rows ----

#define MM_GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t row_stream(const struct mm_plan *pl, uint64_t stream, int64_t row)
{
    return mix64(mix64(pl->p.seed ^ stream) + (uint64_t)row * MM_GOLDEN);
}

// n values mean + scale * N(0, 1) from a splitmix64 stream; each 64-bit draw indexes the
// quantile table four times (16 bits each).
static void fill_normal(const struct mm_plan *pl, uint64_t s, float mean, float scale, float *dst,
                        int64_t n)
{
    for (int64_t i = 0; i < n; i += 4) {
        s += MM_GOLDEN;
        uint64_t r = mix64(s);
        for (int64_t k = 0; k < 4 && i + k < n; k++, r >>= MM_NORMAL_BITS)
            dst[i + k] = mean + scale * pl->normal[r & (MM_NORMAL_N - 1)];
    }
}

// Bank unit chosen for unit j of a row whose stream state is s (advanced in place).
static uint32_t bank_pick(uint64_t *s)
{
    *s += MM_GOLDEN;
    return (uint32_t)(mix64(*s) % MM_BANK_N);
}

// Fills the banks' float values and, if with_bytes, their quantized units.
static gl_status plan_build_banks(struct mm_plan *pl, int with_bytes, struct gl_err *err)
{
    for (int b = 0; b < pl->n_banks; b++) {
        struct mm_bank *bk = &pl->banks[b];
        bk->unit_bytes = gl_type_row_size(bk->type, MM_BANK_UNIT);
        bk->values = gl_malloc((size_t)MM_BANK_N * MM_BANK_UNIT * sizeof(float));
        bk->bytes = with_bytes ? gl_malloc((size_t)MM_BANK_N * bk->unit_bytes) : NULL;
        if (!bk->values || (with_bytes && !bk->bytes))
            return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for a weight bank");
        char name[32];
        snprintf(name, sizeof name, "bank.%d", (int)bk->type);
        const uint64_t stream = fnv1a(name);
        for (int64_t e = 0; e < MM_BANK_N; e++) {
            float *v = bk->values + e * MM_BANK_UNIT;
            fill_normal(pl, row_stream(pl, stream, e), 0.0f, bk->scale, v, MM_BANK_UNIT);
            if (with_bytes)
                gl_quantize_row_ref(bk->type, v, bk->bytes + (size_t)e * bk->unit_bytes,
                                    MM_BANK_UNIT);
        }
    }
    return GL_OK;
}

// Row `row` of tensor t as floats (ne[0] of them): what the file approximates.
static void gen_row(const struct mm_plan *pl, const struct mm_tensor *t, int64_t row, float *dst)
{
    const int64_t n = t->ne[0];
    uint64_t s = row_stream(pl, t->stream, row);
    if (t->kind == MM_CONST) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = t->scale;
    } else if (t->bank >= 0) {
        const struct mm_bank *bk = &pl->banks[t->bank];
        for (int64_t j = 0; j < n; j += MM_BANK_UNIT)
            memcpy(dst + j, bk->values + (size_t)bank_pick(&s) * MM_BANK_UNIT,
                   MM_BANK_UNIT * sizeof(float));
    } else {
        fill_normal(pl, s, t->kind == MM_NORM ? 1.0f : 0.0f, t->scale, dst, n);
    }
}

// Row `row` of tensor t in its stored type (row_size bytes); scratch holds ne[0] floats.
static void gen_row_stored(const struct mm_plan *pl, const struct mm_tensor *t, int64_t row,
                           uint8_t *dst, float *scratch)
{
    if (t->bank >= 0) {
        const struct mm_bank *bk = &pl->banks[t->bank];
        uint64_t s = row_stream(pl, t->stream, row);
        for (int64_t j = 0; j < t->ne[0] / MM_BANK_UNIT; j++, dst += bk->unit_bytes)
            memcpy(dst, bk->bytes + (size_t)bank_pick(&s) * bk->unit_bytes, bk->unit_bytes);
        return;
    }
    gen_row(pl, t, row, scratch);
    gl_quantize_row_ref(t->type, scratch, dst, t->ne[0]);
}

gl_status gl_make_model_gen_rows(const struct gl_make_model_params *p, const char *name,
                                 int64_t row0, int64_t n_rows, float *dst, struct gl_err *err)
{
    struct mm_plan pl;
    gl_status st = plan_init(&pl, p, err);
    if (st != GL_OK)
        return st;
    const struct mm_tensor *t = plan_find(&pl, name);
    if (!t)
        st = gl_err_set(err, GL_E_INVAL, "make-model: no tensor '%s' in this model", name);
    else if (row0 < 0 || n_rows < 0 || row0 + n_rows > t->ne[1])
        st = gl_err_set(err, GL_E_INVAL, "make-model: rows [%lld, %lld) outside '%s' (%lld rows)",
                        (long long)row0, (long long)(row0 + n_rows), name, (long long)t->ne[1]);
    else if (t->bank >= 0)
        st = plan_build_banks(&pl, 0, err);
    for (int64_t r = 0; st == GL_OK && r < n_rows; r++)
        gen_row(&pl, t, row0 + r, dst + r * t->ne[0]);
    plan_free(&pl);
    return st;
}

int gl_make_model_tensor_type(const struct gl_make_model_params *p, const char *name)
{
    struct mm_plan pl;
    if (plan_init(&pl, p, NULL) != GL_OK)
        return -1;
    const struct mm_tensor *t = plan_find(&pl, name);
    int type = t ? (int)t->type : -1;
    plan_free(&pl);
    return type;
}

// ---- worker pool: generate + quantize a chunk of rows on all threads ----
// Rows are split statically into n_parts contiguous ranges; the calling thread does part 0.
// Results do not depend on the split because every row has its own stream.

struct mm_job {
    const struct mm_plan *pl;
    const struct mm_tensor *t;
    int64_t row0, n_rows;
    uint8_t *dst;
    size_t row_size;
};

struct mm_pool;
struct mm_worker {
    struct mm_pool *pool;
    int part;
    pthread_t thread;
};

struct mm_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    struct mm_job job;         // guarded by mu; read by workers after an epoch change
    uint64_t epoch;            // guarded by mu: bumped per dispatched job
    int n_running;             // guarded by mu: workers still busy on the current job
    int quit;                  // guarded by mu
    int n_parts;               // workers + the caller
    int n_started;             // workers actually created
    struct mm_worker *workers; // n_parts - 1 entries
    float **scratch;           // n_parts rows of max_ne0 floats
};

static void job_run_part(const struct mm_job *j, int part, int n_parts, float *scratch)
{
    const int64_t lo = j->n_rows * part / n_parts, hi = j->n_rows * (part + 1) / n_parts;
    for (int64_t r = lo; r < hi; r++)
        gen_row_stored(j->pl, j->t, j->row0 + r, j->dst + (size_t)r * j->row_size, scratch);
}

static void *worker_main(void *arg)
{
    struct mm_worker *w = arg;
    struct mm_pool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        while (!pool->quit && pool->epoch == seen)
            pthread_cond_wait(&pool->cv_start, &pool->mu);
        if (pool->quit) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        seen = pool->epoch;
        struct mm_job job = pool->job;
        pthread_mutex_unlock(&pool->mu);
        job_run_part(&job, w->part, pool->n_parts, pool->scratch[w->part]);
        pthread_mutex_lock(&pool->mu);
        if (--pool->n_running == 0)
            pthread_cond_signal(&pool->cv_done);
        pthread_mutex_unlock(&pool->mu);
    }
}

static void pool_stop(struct mm_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
    pthread_cond_broadcast(&pool->cv_start);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n_started; i++)
        pthread_join(pool->workers[i].thread, NULL);
    for (int i = 0; pool->scratch && i < pool->n_parts; i++)
        gl_free(pool->scratch[i]);
    gl_free(pool->scratch);
    gl_free(pool->workers);
    pthread_cond_destroy(&pool->cv_start);
    pthread_cond_destroy(&pool->cv_done);
    pthread_mutex_destroy(&pool->mu);
}

static gl_status pool_start(struct mm_pool *pool, int n_threads, int64_t max_ne0,
                            struct gl_err *err)
{
    memset(pool, 0, sizeof *pool);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_start, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    pool->n_parts = n_threads;
    pool->scratch = gl_calloc((size_t)n_threads, sizeof *pool->scratch);
    pool->workers = gl_calloc((size_t)n_threads, sizeof *pool->workers);
    int ok = pool->scratch && pool->workers;
    for (int i = 0; ok && i < n_threads; i++)
        ok = (pool->scratch[i] = gl_malloc((size_t)max_ne0 * sizeof(float))) != NULL;
    if (!ok) {
        pool_stop(pool);
        return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for %d worker buffers",
                          n_threads);
    }
    for (int i = 0; i < n_threads - 1; i++) {
        struct mm_worker *w = &pool->workers[i];
        w->pool = pool;
        w->part = i + 1;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            break; // fewer threads: parts of absent workers are done by the caller
        pool->n_started++;
    }
    return GL_OK;
}

static void pool_run(struct mm_pool *pool, const struct mm_job *job)
{
    // Below ~64k elements a wake-up costs more than it saves.
    if (pool->n_started == 0 || job->n_rows < 2 || job->n_rows * job->t->ne[0] < (1 << 16)) {
        job_run_part(job, 0, 1, pool->scratch[0]);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    pool->job = *job;
    pool->epoch++;
    pool->n_running = pool->n_started;
    pthread_cond_broadcast(&pool->cv_start);
    pthread_mutex_unlock(&pool->mu);
    job_run_part(job, 0, pool->n_parts, pool->scratch[0]);
    for (int part = pool->n_started + 1; part < pool->n_parts; part++)
        job_run_part(job, part, pool->n_parts, pool->scratch[0]);
    pthread_mutex_lock(&pool->mu);
    while (pool->n_running > 0)
        pthread_cond_wait(&pool->cv_done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

struct mm_fill_ctx {
    const struct mm_plan *pl;
    struct mm_pool *pool;
};

static gl_status fill_rows(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                           struct gl_err *err)
{
    (void)err;
    const struct mm_fill_ctx *c = ctx;
    GL_ASSERT(ti >= 0 && ti < c->pl->n_t);
    const struct mm_tensor *t = &c->pl->t[ti];
    GL_ASSERT(row0 >= 0 && n_rows >= 0 && row0 + n_rows <= t->ne[1]);
    struct mm_job job = {c->pl, t, row0, n_rows, dst, gl_type_row_size(t->type, t->ne[0])};
    pool_run(c->pool, &job);
    return GL_OK;
}

// ---- metadata ----

// The architecture prefix of the keys add_model_keys writes (a drafter's are gl_dflash_add_keys').
static const char *const g_arch = ARCH;

static const char *arch_key(char *buf, size_t cap, const char *suffix)
{
    snprintf(buf, cap, "%s.%s", g_arch, suffix);
    return buf;
}

static void kv_arch_u32(struct gl_gguf_keys *kv, const char *suffix, uint32_t v)
{
    char key[96];
    gl_gguf_keys_u32(kv, arch_key(key, sizeof key, suffix), v);
}
static void kv_arch_f32(struct gl_gguf_keys *kv, const char *suffix, float v)
{
    char key[96];
    gl_gguf_keys_f32(kv, arch_key(key, sizeof key, suffix), v);
}

// The drafter's hyper-parameters as the loader sees them (every layer sliding_attention, as the
// release's layer_types).
static void drafter_config(const struct mm_plan *pl, struct gl_dflash_config *c)
{
    const struct gl_make_model_hparams *hp = &pl->hp;
    memset(c, 0, sizeof *c);
    c->n_embd = (int32_t)hp->n_embd, c->n_ff = (int32_t)hp->n_ff;
    c->n_layer = (int32_t)hp->n_layers, c->n_head = (int32_t)hp->n_head;
    c->n_head_kv = (int32_t)hp->n_head_kv, c->head_dim = (int32_t)hp->head_dim;
    c->n_ctx_train = (int32_t)hp->n_ctx, c->window = (int32_t)hp->window;
    c->rms_eps = MM_RMS_EPS, c->rope_base = MM_ROPE_BASE;
    c->kq_scale = (float)(1.0 / sqrt((double)hp->head_dim));
    memset(c->swa, 1, sizeof c->swa);
    c->block_size = hp->block_size, c->mask_token_id = hp->mask_token_id;
    c->n_target = hp->n_target;
    for (int i = 0; i < hp->n_target; i++)
        c->target_layers[i] = hp->target_layer_ids[i];
}

// llama.cpp's converter for MuseGlimmerAssistantModel (conversion/muse_glimmer.py, base
// TextModel.set_gguf_parameters; docs/dflash.md), written by gl_dflash_add_keys (the same writer
// `glint convert` uses for an assistant folder): the base text keys, block_size, target_layers
// as INT32 ids + 1 (llama.cpp extracts the *input* of layer id + 1), and the sliding window with
// an all-true bool pattern (every drafter layer is sliding_attention). No logit_scale / softcap.
static gl_status add_dflash_keys(struct gl_gguf_writer *w, const struct mm_plan *pl,
                                 struct gl_err *err)
{
    char name[160];
    snprintf(name, sizeof name,
             "Muse-Glimmer assistant %s (random DFlash drafter, glint make-model seed %llu)",
             pl->p.preset == GL_MAKE_MODEL_DFLASH_TINY ? "tiny" : "30b-shape",
             (unsigned long long)pl->p.seed);
    struct gl_dflash_config c;
    drafter_config(pl, &c);
    return gl_dflash_add_keys(w, &c, name, pl->hp.file_type, err);
}

static gl_status add_model_keys(struct gl_gguf_writer *w, const struct mm_plan *pl,
                                struct gl_err *err)
{
    const struct gl_make_model_hparams *hp = &pl->hp;
    struct gl_gguf_keys kv = {w, GL_OK};
    char name[160], key[96];
    snprintf(name, sizeof name, "Muse-Glimmer %s (random weights, glint make-model seed %llu)",
             pl->p.preset == GL_MAKE_MODEL_TINY ? "tiny" : "30b-shape",
             (unsigned long long)pl->p.seed);
    gl_gguf_keys_str(&kv, "general.architecture", ARCH);
    gl_gguf_keys_str(&kv, "general.name", name);
    gl_gguf_keys_u32(&kv, "general.file_type", hp->file_type);
    gl_gguf_keys_u32(&kv, "general.quantization_version", 2);
    gl_gguf_keys_u32(&kv, "general.alignment", 32);
    kv_arch_u32(&kv, "context_length", (uint32_t)hp->n_ctx);
    kv_arch_u32(&kv, "embedding_length", (uint32_t)hp->n_embd);
    kv_arch_u32(&kv, "block_count", (uint32_t)hp->n_layers);
    kv_arch_u32(&kv, "feed_forward_length", (uint32_t)hp->n_ff);
    kv_arch_u32(&kv, "attention.head_count", (uint32_t)hp->n_head);
    kv_arch_u32(&kv, "attention.head_count_kv", (uint32_t)hp->n_head_kv);
    kv_arch_u32(&kv, "attention.key_length", (uint32_t)hp->head_dim);
    kv_arch_u32(&kv, "attention.value_length", (uint32_t)hp->head_dim);
    kv_arch_f32(&kv, "attention.layer_norm_rms_epsilon", MM_RMS_EPS);
    kv_arch_f32(&kv, "rope.freq_base", MM_ROPE_BASE);
    if (pl->p.softcap_mode == GL_MAKE_MODEL_SOFTCAP_VALUE)
        kv_arch_f32(&kv, "final_logit_softcapping", pl->p.softcap);
    kv_arch_f32(&kv, "logit_scale", MM_LOGIT_SCALE);
    kv_arch_u32(&kv, "attention.sliding_window", (uint32_t)hp->window);
    arch_key(key, sizeof key, "attention.sliding_window_pattern");
    if (pl->p.pattern_period) {
        gl_gguf_keys_u32(&kv, key, MM_SWA_PERIOD);
    } else if (kv.st == GL_OK) {
        // HF rule (arch doc §1): layer i is full attention iff (n - 1 - i) % 4 == 0, counted from
        // the last layer; true = sliding.
        uint8_t pat[MM_MAX_LAYERS];
        for (int64_t i = 0; i < hp->n_layers; i++)
            pat[i] = (hp->n_layers - 1 - i) % MM_SWA_PERIOD != 0;
        kv.st = gl_gguf_writer_add_arr(w, key, GL_GGUF_BOOL, pat, (uint64_t)hp->n_layers);
    }
    if (kv.st != GL_OK)
        return gl_err_set(err, kv.st, "make-model: adding model metadata failed (%s)",
                          gl_status_name(kv.st));
    return GL_OK;
}

// GPT-2 byte-to-unicode: printable bytes (33..126, 161..172, 174..255) map to the same code
// point, the other 68 bytes to U+0100.. in byte order; enc[b] is that code point as UTF-8.
struct byte_map {
    char enc[256][2];
    uint8_t len[256];
};

static void byte_map_init(struct byte_map *m)
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        int cp = printable ? b : next++;
        if (cp < 0x80) {
            m->enc[b][0] = (char)cp;
            m->len[b] = 1;
        } else {
            m->enc[b][0] = (char)(0xc0 | (cp >> 6));
            m->enc[b][1] = (char)(0x80 | (cp & 0x3f));
            m->len[b] = 2;
        }
    }
}

// Token strings as GGUF wants them, in one owned blob.
struct vocab_strs {
    char *blob;
    const char **strs;
    uint64_t *lens;
    int32_t *types;
};

static void vocab_strs_free(struct vocab_strs *v)
{
    gl_free(v->blob);
    gl_free(v->strs);
    gl_free(v->lens);
    gl_free(v->types);
}

static gl_status vocab_strs_build(struct vocab_strs *v, const struct gl_tokenizer *tok, int32_t n,
                                  const struct byte_map *bm, struct gl_err *err)
{
    memset(v, 0, sizeof *v);
    size_t total = 0;
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const uint8_t *b = (const uint8_t *)gl_tokenizer_token_bytes(tok, id, &len);
        if (!b)
            return gl_err_set(err, GL_E_FORMAT, "make-model: vocab has no bytes for token %d", id);
        if (id >= GL_TOK_N_BASE)
            total += len; // specials keep their literal names
        else
            for (size_t i = 0; i < len; i++)
                total += bm->len[b[i]];
    }
    v->blob = gl_malloc(total ? total : 1);
    v->strs = gl_malloc((size_t)n * sizeof *v->strs);
    v->lens = gl_malloc((size_t)n * sizeof *v->lens);
    v->types = gl_malloc((size_t)n * sizeof *v->types);
    if (!v->blob || !v->strs || !v->lens || !v->types) {
        vocab_strs_free(v);
        return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for %zu vocab bytes", total);
    }
    char *o = v->blob;
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const uint8_t *b = (const uint8_t *)gl_tokenizer_token_bytes(tok, id, &len);
        v->strs[id] = o;
        if (id >= GL_TOK_N_BASE) {
            memcpy(o, b, len);
            o += len;
        } else {
            for (size_t i = 0; i < len; i++) {
                memcpy(o, bm->enc[b[i]], bm->len[b[i]]);
                o += bm->len[b[i]];
            }
        }
        v->lens[id] = (uint64_t)(o - v->strs[id]);
        v->types[id] = id >= GL_TOK_N_BASE ? GL_TOKTYPE_CONTROL : GL_TOKTYPE_NORMAL;
    }
    return GL_OK;
}

static gl_status add_merges(struct gl_gguf_writer *w, const struct gl_tokenizer *tok,
                            const struct vocab_strs *v, int32_t n_vocab, struct gl_err *err)
{
    const int64_t n = gl_tokenizer_n_merges(tok);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        gl_token l, r;
        gl_tokenizer_merge_at(tok, i, &l, &r);
        if (l < 0 || r < 0 || l >= n_vocab || r >= n_vocab)
            return gl_err_set(err, GL_E_FORMAT, "make-model: merge %lld joins bad ids %d, %d",
                              (long long)i, l, r);
        total += v->lens[l] + 1 + v->lens[r];
    }
    char *blob = gl_malloc(total ? total : 1);
    const char **strs = gl_malloc((size_t)(n ? n : 1) * sizeof *strs);
    uint64_t *lens = gl_malloc((size_t)(n ? n : 1) * sizeof *lens);
    gl_status st = GL_OK;
    if (!blob || !strs || !lens) {
        st = gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for %lld merges", (long long)n);
        goto done;
    }
    char *o = blob;
    for (int64_t i = 0; i < n; i++) {
        gl_token l, r;
        gl_tokenizer_merge_at(tok, i, &l, &r);
        strs[i] = o;
        memcpy(o, v->strs[l], v->lens[l]);
        o += v->lens[l];
        *o++ = ' ';
        memcpy(o, v->strs[r], v->lens[r]);
        o += v->lens[r];
        lens[i] = (uint64_t)(o - strs[i]);
    }
    st = gl_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", strs, lens, (uint64_t)n);
    if (st != GL_OK)
        gl_err_set(err, st, "make-model: adding tokenizer.ggml.merges failed (%s)",
                   gl_status_name(st));
done:
    gl_free(blob);
    gl_free(strs);
    gl_free(lens);
    return st;
}

gl_status gl_make_model_add_vocab(struct gl_gguf_writer *w, const struct gl_tokenizer *tok,
                                  struct gl_err *err)
{
    const int32_t n = gl_tokenizer_n_vocab(tok);
    if (n != GL_TOK_N_BASE + GL_TOK_N_SPECIAL)
        return gl_err_set(err, GL_E_FORMAT, "make-model: vocab has %d tokens, expected %d", n,
                          GL_TOK_N_BASE + GL_TOK_N_SPECIAL);
    struct byte_map bm;
    byte_map_init(&bm);
    struct vocab_strs v;
    gl_status st = vocab_strs_build(&v, tok, n, &bm, err);
    if (st != GL_OK)
        return st;
    struct gl_gguf_keys kv = {w, GL_OK};
    gl_gguf_keys_str(&kv, "tokenizer.ggml.model", "gpt2");
    gl_gguf_keys_str(&kv, "tokenizer.ggml.pre", "llama4");
    if (kv.st == GL_OK)
        kv.st = gl_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", v.strs, v.lens, (uint64_t)n);
    if (kv.st == GL_OK)
        kv.st = gl_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GL_GGUF_I32, v.types,
                                       (uint64_t)n);
    if (kv.st != GL_OK) {
        st = gl_err_set(err, kv.st, "make-model: adding tokenizer tokens failed (%s)",
                        gl_status_name(kv.st));
        goto done;
    }
    st = add_merges(w, tok, &v, n, err);
    if (st != GL_OK)
        goto done;
    gl_gguf_keys_u32(&kv, "tokenizer.ggml.bos_token_id", GL_TOK_BOS);
    gl_gguf_keys_u32(&kv, "tokenizer.ggml.eos_token_id", GL_TOK_EOS);
    gl_gguf_keys_u32(&kv, "tokenizer.ggml.eot_token_id", GL_TOK_EOT);
    gl_gguf_keys_u32(&kv, "tokenizer.ggml.padding_token_id", GL_TOK_PAD);
    gl_gguf_keys_bool(&kv, "tokenizer.ggml.add_bos_token", 1);
    if (kv.st != GL_OK)
        st = gl_err_set(err, kv.st, "make-model: adding tokenizer ids failed (%s)",
                        gl_status_name(kv.st));
done:
    vocab_strs_free(&v);
    return st;
}

// The chat template lives next to the vocab in the shared data folder:
// <data>/tokenizer/<vocab> and <data>/chat-template/muse-glimmer.jinja (or beside the vocab).
// Absent: a warning and no key. Returns an owned NUL-terminated text or NULL.
static char *read_chat_template(const char *vocab_path)
{
    const char *slash = strrchr(vocab_path, '/');
    int dir_len = slash ? (int)(slash - vocab_path) : 1;
    const char *dir = slash ? vocab_path : ".";
    char cand[2][4096];
    snprintf(cand[0], sizeof cand[0], "%.*s/../chat-template/muse-glimmer.jinja", dir_len, dir);
    snprintf(cand[1], sizeof cand[1], "%.*s/muse-glimmer.jinja", dir_len, dir);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(cand[i], "rb");
        if (!f)
            continue;
        char *text = gl_malloc(MM_TEMPLATE_MAX + 1);
        size_t n = text ? fread(text, 1, MM_TEMPLATE_MAX + 1, f) : 0;
        int bad = ferror(f) || n > MM_TEMPLATE_MAX || memchr(text ? text : "", 0, n) != NULL;
        fclose(f);
        if (!text || bad) {
            GL_LOGW("make-model: chat template %s unreadable or over %u bytes; skipped", cand[i],
                    MM_TEMPLATE_MAX);
            gl_free(text);
            return NULL;
        }
        text[n] = '\0';
        return text;
    }
    GL_LOGW("make-model: no chat template beside the vocab (%s); tokenizer.chat_template omitted",
            cand[0]);
    return NULL;
}

static const char *vocab_path_of(const struct gl_make_model_params *p)
{
    if (p->vocab_path && *p->vocab_path)
        return p->vocab_path;
    const char *env = getenv("GLINT_VOCAB");
    if (env && *env)
        return env;
#ifdef GLINT_SOURCE_DIR
    return GLINT_SOURCE_DIR "/../shared/data/tokenizer/llama4-tokenizer.model";
#else
    return NULL;
#endif
}

static gl_status add_tokenizer(struct gl_gguf_writer *w, const struct gl_make_model_params *p,
                               struct gl_err *err)
{
    const char *path = vocab_path_of(p);
    if (!path || access(path, R_OK) != 0)
        return gl_err_set(err, GL_E_IO,
                          "make-model: vocabulary file '%s' not found or unreadable (pass --vocab "
                          "PATH or set GLINT_VOCAB to the llama4 tiktoken .model file)",
                          path ? path : "(none)");
    int64_t t0 = gl_time_us();
    struct gl_tokenizer *tok = NULL;
    gl_status st = gl_tokenizer_load_tiktoken(&tok, path, err);
    if (st != GL_OK)
        return st;
    int64_t t1 = gl_time_us();
    st = gl_make_model_add_vocab(w, tok, err);
    gl_tokenizer_free(tok);
    if (st != GL_OK)
        return st;
    char *tmpl = read_chat_template(path);
    if (tmpl) {
        st = gl_gguf_writer_add_str(w, "tokenizer.chat_template", tmpl);
        gl_free(tmpl);
        if (st != GL_OK)
            return gl_err_set(err, st, "make-model: adding tokenizer.chat_template failed");
    }
    GL_LOGD("make-model: vocab load %.2f s, GGUF vocab keys %.2f s", (double)(t1 - t0) * 1e-6,
            (double)(gl_time_us() - t1) * 1e-6);
    return GL_OK;
}

// ---- HF folder (safetensors) ----
// The same plan and random rows as the GGUF, in HF layout (arch doc §2.2-§2.4, §3.3): the plan
// tensor's rows are generated once per HF row, then converted exactly as the GGUF writer does
// (gl_quantize_row_ref), so F32/F16/BF16 weights are bit-identical across the two containers.

// What an HF row r of plan tensor t is made from.
enum hf_xform {
    HF_PLAIN,    // plan row r as is
    HF_CENTERED, // stored w - 1 (HF CRMS weights; x - 1 is exact for x in [0.5, 2], Sterbenz)
    HF_ROPE,     // plan row (interleaved) 2j + t of the head, for HF row t*D/2 + j (rotate-half)
};

struct hf_tensor {
    const struct mm_tensor *t;
    enum hf_xform xf;
    int shard;
};

struct hf_fill_ctx {
    const struct mm_plan *pl;
    const struct hf_tensor *ht; // indexed by the shard writer's tensor index, offset by first
    int64_t first;
    float *scratch; // max_ne0 floats
};

static gl_status hf_fill(void *ctx, int64_t ti, int64_t row0, int64_t n_rows, void *dst,
                         struct gl_err *err)
{
    (void)err;
    const struct hf_fill_ctx *c = ctx;
    const struct hf_tensor *h = &c->ht[c->first + ti];
    const struct mm_tensor *t = h->t;
    const size_t rb = gl_type_row_size(t->type, t->ne[0]);
    const int64_t D = c->pl->hp.head_dim;
    for (int64_t r = row0; r < row0 + n_rows; r++) {
        uint8_t *o = (uint8_t *)dst + (size_t)(r - row0) * rb;
        if (t->n_dims == 1) { // a vector is one row of ne[0]: F32, as in the GGUF
            gen_row(c->pl, t, 0, c->scratch);
            for (int64_t i = 0; h->xf == HF_CENTERED && i < t->ne[0]; i++)
                c->scratch[i] -= 1.0f;
            memcpy(o, c->scratch, (size_t)t->ne[0] * sizeof(float));
            continue;
        }
        int64_t src = r;
        if (h->xf == HF_ROPE) {
            const int64_t head = r / D, i = r % D, half = D / 2;
            src = head * D + 2 * (i % half) + i / half;
        }
        gen_row_stored(c->pl, t, src, o, c->scratch);
    }
    return GL_OK;
}

static gl_status copy_file(const char *from, const char *to, struct gl_err *err)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return gl_err_set(err, GL_E_IO, "make-model: cannot read %s: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return gl_err_set(err, GL_E_IO, "make-model: cannot create %s: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int bad = 0;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, out) != n;
    bad |= ferror(in);
    fclose(in);
    bad |= fclose(out) != 0;
    return bad ? gl_err_set(err, GL_E_IO, "make-model: copying %s to %s failed", from, to) : GL_OK;
}

static json_t *int_list(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

// config.json: every text key explicit (arch doc §1 names), vision_config at the release dims for
// 30b-shape and scaled down for tiny (its weights are not written yet).
static gl_status write_hf_config(const struct mm_plan *pl, const char *dir, struct gl_err *err)
{
    const struct gl_make_model_hparams *hp = &pl->hp;
    json_t *tc = json_object(), *vc = json_object(), *root = json_object();
    json_t *lt = json_array(), *lrt = json_array(), *rp = json_object();
    if (!tc || !vc || !root || !lt || !lrt || !rp) {
        json_decref(tc), json_decref(vc), json_decref(root), json_decref(lt), json_decref(lrt);
        json_decref(rp);
        return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for config.json");
    }
    for (int64_t i = 0; i < hp->n_layers; i++) {
        // The same rule as the GGUF sliding_window_pattern of these params.
        int sliding = pl->p.pattern_period ? i % MM_SWA_PERIOD != MM_SWA_PERIOD - 1
                                           : (hp->n_layers - 1 - i) % MM_SWA_PERIOD != 0;
        json_array_append_new(lt, json_string(sliding ? "sliding_attention" : "full_attention"));
        json_array_append_new(lrt, json_real(sliding ? (double)MM_ROPE_BASE : 0.0));
    }
    json_object_set_new(rp, "rope_type", json_string("default"));
    json_object_set_new(rp, "rope_theta", json_real((double)MM_ROPE_BASE));
    json_object_set_new(tc, "model_type", json_string("muse_glimmer_text"));
    json_object_set_new(tc, "vocab_size", json_integer(hp->n_vocab));
    json_object_set_new(tc, "hidden_size", json_integer(hp->n_embd));
    json_object_set_new(tc, "intermediate_size", json_integer(hp->n_ff));
    json_object_set_new(tc, "num_hidden_layers", json_integer(hp->n_layers));
    json_object_set_new(tc, "num_attention_heads", json_integer(hp->n_head));
    json_object_set_new(tc, "num_key_value_heads", json_integer(hp->n_head_kv));
    json_object_set_new(tc, "head_dim", json_integer(hp->head_dim));
    json_object_set_new(tc, "hidden_activation", json_string("silu"));
    json_object_set_new(tc, "max_position_embeddings", json_integer(hp->n_ctx));
    json_object_set_new(tc, "rms_norm_eps", json_real(1e-5));
    json_object_set_new(tc, "post_norm_eps", json_real(1e-8));
    json_object_set_new(tc, "rope_parameters", rp);
    json_object_set_new(tc, "layer_rope_theta", lrt);
    json_object_set_new(tc, "layer_types", lt);
    json_object_set_new(tc, "sliding_window", json_integer(hp->window));
    if (pl->p.softcap_mode == GL_MAKE_MODEL_SOFTCAP_VALUE)
        json_object_set_new(tc, "final_logit_softcapping", json_real((double)pl->p.softcap));
    json_object_set_new(tc, "qk_scale_factor", json_real(3.87));
    json_object_set_new(tc, "output_multiplier", json_real(0.19611613513818404));
    json_object_set_new(tc, "attention_bias", json_false());
    json_object_set_new(tc, "tie_word_embeddings", json_false());
    json_object_set_new(tc, "bos_token_id", json_integer(GL_TOK_BOS));
    json_object_set_new(tc, "eos_token_id", json_integer(GL_TOK_EOS));
    json_object_set_new(tc, "pad_token_id", json_null());
    const struct mm_vision vd = vision_dims(&pl->p);
    json_object_set_new(vc, "model_type", json_string("muse_glimmer_vision"));
    json_object_set_new(vc, "hidden_size", json_integer(vd.hidden));
    json_object_set_new(vc, "num_hidden_layers", json_integer(vd.layers));
    json_object_set_new(vc, "num_attention_heads", json_integer(vd.heads));
    json_object_set_new(vc, "intermediate_size", json_integer(vd.inter));
    json_object_set_new(vc, "patch_size", json_integer(14));
    json_object_set_new(vc, "patch_temporal", json_integer(2));
    json_object_set_new(vc, "merge_size", json_integer(2));
    json_object_set_new(vc, "pos_emb_height", json_integer(vd.pos_side));
    json_object_set_new(vc, "pos_emb_width", json_integer(vd.pos_side));
    json_object_set_new(vc, "hidden_act", json_string("gelu"));
    json_object_set_new(vc, "layer_norm_eps", json_real(1e-5));
    const int64_t eos[2] = {GL_TOK_EOS, GL_TOK_EOT};
    json_object_set_new(root, "architectures",
                        json_pack("[s]", "MuseGlimmerForConditionalGeneration"));
    json_object_set_new(root, "model_type", json_string("muse_glimmer"));
    json_object_set_new(root, "image_token_id", json_integer(200092));
    json_object_set_new(root, "video_token_id", json_integer(200091));
    json_object_set_new(root, "eos_token_id", int_list(eos, 2));
    json_object_set_new(root, "out_hidden_size", json_integer(4 * vd.hidden));
    json_object_set_new(root, "projector_hidden_size", json_integer(vd.proj));
    json_object_set_new(root, "projector_hidden_act", json_string("gelu"));
    json_object_set_new(root, "dtype",
                        json_string(pl->spec->type == GL_TYPE_F32   ? "float32"
                                    : pl->spec->type == GL_TYPE_F16 ? "float16"
                                                                    : "bfloat16"));
    json_object_set_new(root, "text_config", tc);
    json_object_set_new(root, "vision_config", vc);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int bad = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0;
    json_decref(root);
    if (bad)
        return gl_err_set(err, GL_E_IO, "make-model: cannot write %s", path);
    // generation_config.json as HF-CONV writes it (arch doc §4): eom (200007) is not a stop id.
    json_t *gen = json_object();
    json_object_set_new(gen, "bos_token_id", json_integer(GL_TOK_BOS));
    json_object_set_new(gen, "eos_token_id", int_list(eos, 2));
    json_object_set_new(gen, "pad_token_id", json_integer(GL_TOK_PAD));
    json_object_set_new(gen, "max_length", json_integer(hp->n_ctx));
    json_object_set_new(gen, "do_sample", json_false());
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    bad = !gen || json_dump_file(gen, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0;
    json_decref(gen);
    return bad ? gl_err_set(err, GL_E_IO, "make-model: cannot write %s", path) : GL_OK;
}

// The drafter's config.json as transformers' save_pretrained writes MuseGlimmerAssistantConfig
// (HF-ASST; keys sorted): the preset's dims, every layer sliding_attention, target_layer_ids as
// 0-based layer outputs (the GGUF stores them + 1).
static gl_status write_hf_dflash_config(const struct mm_plan *pl, const char *dir,
                                        struct gl_err *err)
{
    const struct gl_make_model_hparams *hp = &pl->hp;
    json_t *root = json_object(), *lt = json_array(), *ids = json_array(), *rp = json_object();
    if (!root || !lt || !ids || !rp) {
        json_decref(root), json_decref(lt), json_decref(ids), json_decref(rp);
        return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for config.json");
    }
    for (int64_t i = 0; i < hp->n_layers; i++)
        json_array_append_new(lt, json_string("sliding_attention"));
    for (int i = 0; i < hp->n_target; i++)
        json_array_append_new(ids, json_integer(hp->target_layer_ids[i]));
    json_object_set_new(rp, "rope_type", json_string("default"));
    json_object_set_new(rp, "rope_theta", json_real((double)MM_ROPE_BASE));
    json_object_set_new(root, "architectures", json_pack("[s]", GL_DFLASH_HF_ARCH));
    json_object_set_new(root, "model_type", json_string(GL_DFLASH_HF_MODEL_TYPE));
    json_object_set_new(root, "attention_dropout", json_integer(0));
    json_object_set_new(root, "block_size", json_integer(hp->block_size));
    json_object_set_new(root, "bos_token_id", json_integer(GL_TOK_BOS));
    json_object_set_new(root, "eos_token_id", json_integer(GL_TOK_EOS));
    json_object_set_new(root, "pad_token_id", json_integer(GL_TOK_PAD));
    json_object_set_new(root, "dtype",
                        json_string(pl->spec->type == GL_TYPE_F32   ? "float32"
                                    : pl->spec->type == GL_TYPE_F16 ? "float16"
                                                                    : "bfloat16"));
    json_object_set_new(root, "head_dim", json_integer(hp->head_dim));
    json_object_set_new(root, "hidden_act", json_string("silu"));
    json_object_set_new(root, "hidden_size", json_integer(hp->n_embd));
    json_object_set_new(root, "intermediate_size", json_integer(hp->n_ff));
    json_object_set_new(root, "layer_types", lt);
    json_object_set_new(root, "mask_token_id", json_integer(hp->mask_token_id));
    json_object_set_new(root, "max_position_embeddings", json_integer(hp->n_ctx));
    json_object_set_new(root, "num_attention_heads", json_integer(hp->n_head));
    json_object_set_new(root, "num_hidden_layers", json_integer(hp->n_layers));
    json_object_set_new(root, "num_key_value_heads", json_integer(hp->n_head_kv));
    json_object_set_new(root, "rms_norm_eps", json_real(1e-5)); // MM_RMS_EPS
    json_object_set_new(root, "rope_parameters", rp);
    json_object_set_new(root, "sliding_window", json_integer(hp->window));
    json_object_set_new(root, "target_layer_ids", ids);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int bad = json_dump_file(root, path, JSON_INDENT(2) | JSON_SORT_KEYS) != 0;
    json_decref(root);
    return bad ? gl_err_set(err, GL_E_IO, "make-model: cannot write %s", path) : GL_OK;
}

static gl_status write_hf_tensors(struct mm_plan *pl, const char *dir, struct gl_err *err)
{
    const uint64_t shard_cap = pl->p.shard_bytes ? pl->p.shard_bytes : (uint64_t)4 << 30;
    struct hf_tensor *ht = gl_calloc((size_t)pl->n_t, sizeof *ht);
    char(*names)[96] = gl_calloc((size_t)pl->n_t, sizeof *names);
    float *scratch = gl_malloc((size_t)pl->max_ne0 * sizeof(float));
    gl_status st = GL_OK;
    if (!ht || !names || !scratch) {
        st = gl_err_set(err, GL_E_NOMEM, "make-model: out of memory");
        goto done;
    }
    // Which tensors go out, in plan order, and their shards.
    int64_t n = 0;
    int n_shards = 1;
    uint64_t in_shard = 0, total = 0;
    for (int64_t i = 0; i < pl->n_t; i++) {
        const struct mm_tensor *t = &pl->t[i];
        if (pl->hp.dflash) { // the assistant's names (dflash_hf.c); no transforms (below)
            if (!gl_dflash_hf_tensor_name(t->name, names[n], sizeof names[n]))
                GL_ASSERT_MSG(0, "no HF name for drafter tensor %s", t->name);
        } else if (!strncmp(t->name, "model.", 6)) { // a vision tensor: already its HF name
            snprintf(names[n], sizeof names[n], "%s", t->name);
        } else if (!gl_model_hf_tensor_name(t->name, 0, names[n], sizeof names[n])) {
            continue; // the QK-norm weights: HF has qk_scale_factor instead
        }
        const char *role = strchr(t->name + 4, '.');
        role = !strncmp(t->name, "blk.", 4) && role ? role + 1 : t->name;
        ht[n].t = t;
        const int text_norm = t->kind == MM_NORM && !strncmp(t->name, "blk.", 4);
        // The drafter is NeoX RoPE in both containers and its norms are plain w (HF-ASST's
        // MuseGlimmerAssistantRMSNorm): llama.cpp's converter copies every tensor unchanged.
        ht[n].xf = pl->hp.dflash                                                      ? HF_PLAIN
                   : !strcmp(role, "attn_q.weight") || !strcmp(role, "attn_k.weight") ? HF_ROPE
                   : text_norm                                                        ? HF_CENTERED
                                                                                      : HF_PLAIN;
        uint64_t nb = gl_type_row_size(t->type, t->ne[0]) * (uint64_t)t->ne[1];
        if (in_shard > 0 && in_shard + nb > shard_cap) {
            n_shards++;
            in_shard = 0;
        }
        ht[n].shard = n_shards - 1;
        in_shard += nb;
        total += nb;
        n++;
    }
    const char **files = gl_calloc((size_t)n, sizeof *files);
    const char **tn = gl_calloc((size_t)n, sizeof *tn);
    char(*fnames)[64] = gl_calloc((size_t)n_shards, sizeof *fnames);
    if (!files || !tn || !fnames) {
        gl_free(files), gl_free(tn), gl_free(fnames);
        st = gl_err_set(err, GL_E_NOMEM, "make-model: out of memory");
        goto done;
    }
    for (int s = 0; s < n_shards; s++) {
        if (n_shards == 1)
            snprintf(fnames[s], sizeof fnames[s], "model.safetensors");
        else
            snprintf(fnames[s], sizeof fnames[s], "model-%05d-of-%05d.safetensors", s + 1,
                     n_shards);
    }
    int64_t first = 0;
    for (int s = 0; st == GL_OK && s < n_shards; s++) {
        struct gl_safetensors_writer *w = gl_safetensors_writer_new();
        if (!w) {
            st = gl_err_set(err, GL_E_NOMEM, "make-model: out of memory");
            break;
        }
        st = gl_safetensors_writer_add_meta(w, "format", "pt", err);
        int64_t end = first;
        for (; st == GL_OK && end < n && ht[end].shard == s; end++) {
            const struct mm_tensor *t = ht[end].t;
            const enum gl_safetensors_dtype dt = t->type == GL_TYPE_F32 ? GL_SAFETENSORS_DTYPE_F32
                                                 : t->type == GL_TYPE_F16
                                                     ? GL_SAFETENSORS_DTYPE_F16
                                                     : GL_SAFETENSORS_DTYPE_BF16;
            const int64_t shape[2] = {t->n_dims == 1 ? t->ne[0] : t->ne[1], t->ne[0]};
            if (gl_safetensors_writer_add_tensor(w, names[end], dt, (int)t->n_dims, shape, err) < 0)
                st = err ? err->code : GL_E_INVAL;
            files[end] = fnames[s];
            tn[end] = names[end];
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, fnames[s]);
        struct hf_fill_ctx c = {pl, ht, first, scratch};
        if (st == GL_OK)
            st = gl_safetensors_writer_write(w, path, hf_fill, &c, err);
        gl_safetensors_writer_delete(w);
        first = end;
    }
    if (st == GL_OK && n_shards > 1)
        st = gl_safetensors_write_index(dir, tn, files, n, total, err);
    gl_free(files), gl_free(tn), gl_free(fnames);
done:
    gl_free(ht);
    gl_free(names);
    gl_free(scratch);
    return st;
}

static gl_status write_hf(const struct gl_make_model_params *p, const char *dir, struct gl_err *err)
{
    int64_t t0 = gl_time_us();
    if (p->header_only || p->vocab_only)
        return gl_err_set(err, GL_E_INVAL,
                          "make-model: --header-only / --vocab-only are GGUF-only options");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return gl_err_set(err, GL_E_IO, "make-model: cannot create folder %s: %s", dir,
                          strerror(errno));
    const char *vocab = vocab_path_of(p);
    if (!vocab || access(vocab, R_OK) != 0)
        return gl_err_set(err, GL_E_IO,
                          "make-model: vocabulary file '%s' not found or unreadable (pass --vocab "
                          "PATH or set GLINT_VOCAB to the llama4 tiktoken .model file)",
                          vocab ? vocab : "(none)");
    struct mm_plan pl;
    gl_status st = plan_init(&pl, p, err);
    if (st != GL_OK)
        return st;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    st = copy_file(vocab, path, err);
    char *tmpl = st == GL_OK ? read_chat_template(vocab) : NULL;
    if (tmpl) {
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        FILE *f = fopen(path, "wb");
        if (!f || fputs(tmpl, f) < 0)
            st = gl_err_set(err, GL_E_IO, "make-model: cannot write %s", path);
        if (f && fclose(f) != 0 && st == GL_OK)
            st = gl_err_set(err, GL_E_IO, "make-model: cannot write %s", path);
        gl_free(tmpl);
    }
    if (st == GL_OK)
        st = pl.hp.dflash ? write_hf_dflash_config(&pl, dir, err) : write_hf_config(&pl, dir, err);
    if (st == GL_OK)
        st = plan_build_banks(&pl, 1, err);
    if (st == GL_OK)
        st = write_hf_tensors(&pl, dir, err);
    if (st == GL_OK)
        GL_LOGI("make-model: wrote HF folder %s (%s, %lld layers) in %.1f s", dir, pl.spec->name,
                (long long)pl.hp.n_layers, (double)(gl_time_us() - t0) * 1e-6);
    plan_free(&pl);
    return st;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MM_MAX_THREADS ? MM_MAX_THREADS : (int)n;
}

gl_status gl_make_model_write(const struct gl_make_model_params *p, const char *path,
                              struct gl_err *err)
{
    if (p->format == GL_MAKE_MODEL_SAFETENSORS)
        return write_hf(p, path, err);
    int64_t t0 = gl_time_us();
    struct mm_plan pl;
    gl_status st = plan_init(&pl, p, err);
    if (st != GL_OK)
        return st;
    struct gl_gguf_writer *w = gl_gguf_writer_new();
    if (!w) {
        plan_free(&pl);
        return gl_err_set(err, GL_E_NOMEM, "make-model: out of memory for the gguf writer");
    }
    st = pl.hp.dflash ? add_dflash_keys(w, &pl, err) : add_model_keys(w, &pl, err);
    if (st == GL_OK)
        st = add_tokenizer(w, p, err);
    if (st == GL_OK && pl.hp.dflash &&
        gl_gguf_writer_add_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)pl.hp.mask_token_id) !=
            GL_OK)
        st = gl_err_set(err, GL_E_NOMEM, "make-model: adding tokenizer.ggml.mask_token_id failed");
    for (int64_t i = 0; st == GL_OK && !p->vocab_only && i < pl.n_t; i++) {
        const struct mm_tensor *t = &pl.t[i];
        int64_t ti = gl_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type);
        if (ti < 0)
            st = gl_err_set(err, GL_E_NOMEM, "make-model: adding tensor '%s' failed", t->name);
        else
            GL_ASSERT(ti == i);
    }
    if (st == GL_OK && !p->header_only && !p->vocab_only)
        st = plan_build_banks(&pl, 1, err);
    if (st == GL_OK) {
        int n_threads = p->n_threads > 0 ? p->n_threads : default_threads();
        if (n_threads > MM_MAX_THREADS)
            n_threads = MM_MAX_THREADS;
        struct mm_pool pool;
        st = pool_start(&pool, n_threads, pl.max_ne0, err);
        if (st == GL_OK) {
            struct mm_fill_ctx ctx = {&pl, &pool};
            st = gl_gguf_writer_write(w, path, p->header_only, fill_rows, &ctx, err);
            pool_stop(&pool);
        }
    }
    if (st == GL_OK)
        GL_LOGI("make-model: wrote %s (%s, %s%lld layers, %lld tensors) in %.1f s", path,
                pl.spec->name,
                p->vocab_only    ? "vocab only, "
                : p->header_only ? "header only, "
                                 : "",
                (long long)pl.hp.n_layers, p->vocab_only ? 0LL : (long long)pl.n_t,
                (double)(gl_time_us() - t0) * 1e-6);
    gl_gguf_writer_delete(w);
    plan_free(&pl);
    return st;
}
