// SPDX-License-Identifier: MIT
// The vision encoder against tests/oracle/vision_ref.py (float64 torch). Reads the directory in
// $GLINT_VISION_REF (config.json, weights.f32, <case>.in.f32, <case>.ref.f64), runs
// gl_vision_encode on every case with F32 weights and prints the max error relative to the
// output's max |ref|; fails when it exceeds $GLINT_VISION_TOL (default 1e-5). The same cases
// with F16 weights are printed for information (their error is the weight rounding's). Prints
// SKIP and exits 0 when $GLINT_VISION_REF is unset: tests/oracle/check_vision_torch.sh sets it.
#include "vision/vision.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Whole file into a malloc'd buffer; NULL on failure.
static void *read_all(const char *dir, const char *name, size_t *n_bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n_bytes = buf ? (size_t)n : 0;
    return buf;
}

static int32_t cfg_int(json_t *c, const char *key)
{
    return (int32_t)json_integer_value(json_object_get(c, key));
}

static void load_config(json_t *c, struct gl_vision_config *cfg)
{
    gl_vision_config_default(cfg);
    cfg->patch_size = cfg_int(c, "patch_size");
    cfg->patch_frames = cfg_int(c, "patch_frames");
    cfg->hidden = cfg_int(c, "hidden");
    cfg->n_layers = cfg_int(c, "n_layers");
    cfg->n_heads = cfg_int(c, "n_heads");
    cfg->head_dim = cfg_int(c, "head_dim");
    cfg->ffn = cfg_int(c, "ffn");
    cfg->pos_h = cfg_int(c, "pos_h");
    cfg->pos_w = cfg_int(c, "pos_w");
    cfg->merge = cfg_int(c, "merge");
    cfg->full_every = cfg_int(c, "full_every");
    cfg->adapter = cfg_int(c, "adapter");
    cfg->out_dim = cfg_int(c, "out_dim");
    cfg->ln_eps = (float)json_real_value(json_object_get(c, "ln_eps"));
    cfg->rms_eps = (float)json_real_value(json_object_get(c, "rms_eps"));
    cfg->rope_theta = (float)json_real_value(json_object_get(c, "rope_theta"));
}

// Walks weights.f32 in vision_ref.py's order. Matrices are F32, or converted into type
// (F16 or BF16) in freshly allocated rows recorded in owned[] for freeing.
struct cursor {
    const float *p, *end;
    enum gl_type type;
    void *owned[512];
    int n_owned;
};

static const float *take_vec(struct cursor *c, int64_t n)
{
    const float *v = c->p;
    c->p += n;
    return c->p <= c->end ? v : NULL;
}

static struct gl_vision_mat take_mat(struct cursor *c, int64_t n_out, int64_t n_in)
{
    const float *src = take_vec(c, n_out * n_in);
    struct gl_vision_mat m = {GL_TYPE_F32, src};
    if (!src || c->type == GL_TYPE_F32 || c->n_owned == 512)
        return m;
    size_t row = gl_type_row_size(c->type, n_in);
    uint8_t *dst = malloc(row * (size_t)n_out);
    if (!dst)
        return (struct gl_vision_mat){c->type, NULL};
    for (int64_t r = 0; r < n_out; r++)
        gl_kernels_get()->from_float[c->type](src + r * n_in, dst + (size_t)r * row, n_in);
    c->owned[c->n_owned++] = dst;
    return (struct gl_vision_mat){c->type, dst};
}

static int load_weights(const struct gl_vision_config *cfg, struct cursor *c,
                        struct gl_vision_weights *w, struct gl_vision_layer *layers)
{
    int64_t H = cfg->hidden, F = cfg->ffn, A = cfg->adapter;
    w->patch = take_mat(c, H, gl_vision_patch_dim(cfg));
    w->pos = take_vec(c, (int64_t)cfg->pos_h * cfg->pos_w * H);
    w->ln_pre_w = take_vec(c, H);
    w->ln_pre_b = take_vec(c, H);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        struct gl_vision_layer *L = &layers[l];
        L->ln1_w = take_vec(c, H);
        L->ln1_b = take_vec(c, H);
        L->q = take_mat(c, H, H);
        L->q_b = take_vec(c, H);
        L->k = take_mat(c, H, H);
        L->k_b = take_vec(c, H);
        L->v = take_mat(c, H, H);
        L->v_b = take_vec(c, H);
        L->proj = take_mat(c, H, H);
        L->proj_b = take_vec(c, H);
        L->ln2_w = take_vec(c, H);
        L->ln2_b = take_vec(c, H);
        L->fc1 = take_mat(c, F, H);
        L->fc1_b = take_vec(c, F);
        L->fc2 = take_mat(c, H, F);
        L->fc2_b = take_vec(c, H);
    }
    w->layers = layers;
    w->ln_post_w = take_vec(c, H);
    w->ln_post_b = take_vec(c, H);
    w->adapter_fc1 = take_mat(c, A, 4 * H);
    w->adapter_fc2 = take_mat(c, A, A);
    w->projection = take_mat(c, cfg->out_dim, A);
    return c->p == c->end; // every byte used, none missing
}

// Runs one case; returns the max |out - ref| / max |ref|, or -1 on failure, and the worst and
// mean cosine between each soft token (output row) and the reference's.
static double run_case(struct gl_pool *pool, const struct gl_vision_config *cfg,
                       const struct gl_vision_weights *w, const char *dir, json_t *cs,
                       double *cos_min, double *cos_mean)
{
    int64_t gh = json_integer_value(json_object_get(cs, "gh"));
    int64_t gw = json_integer_value(json_object_get(cs, "gw"));
    size_t n_in = 0, n_ref = 0;
    float *in = read_all(dir, json_string_value(json_object_get(cs, "input")), &n_in);
    double *ref = read_all(dir, json_string_value(json_object_get(cs, "ref")), &n_ref);
    int64_t n_out = gh * gw / 4 * cfg->out_dim;
    float *out = malloc((size_t)n_out * sizeof(float));
    double rel = -1;
    struct gl_err err = {0};
    if (!in || !ref || !out || n_in != (size_t)(gh * gw * gl_vision_patch_dim(cfg)) * 4 ||
        n_ref != (size_t)n_out * 8) {
        fprintf(stderr, "  bad or missing case files\n");
    } else if (gl_vision_encode(pool, cfg, w, in, gh, gw, out, &err) != GL_OK) {
        fprintf(stderr, "  gl_vision_encode: %s\n", err.msg);
    } else {
        double max_ref = 0, max_diff = 0;
        for (int64_t i = 0; i < n_out; i++) {
            max_ref = fmax(max_ref, fabs(ref[i]));
            max_diff = fmax(max_diff, fabs((double)out[i] - ref[i]));
        }
        rel = max_diff / max_ref;
        *cos_min = 1.0;
        *cos_mean = 0.0;
        const int64_t D = cfg->out_dim, rows = n_out / D;
        for (int64_t r = 0; r < rows; r++) {
            double dot = 0, na = 0, nb = 0;
            for (int64_t j = 0; j < D; j++) {
                double a = out[r * D + j], b = ref[r * D + j];
                dot += a * b;
                na += a * a;
                nb += b * b;
            }
            double cs_r = dot / sqrt(na * nb);
            *cos_min = fmin(*cos_min, cs_r);
            *cos_mean += cs_r / (double)rows;
        }
    }
    free(in);
    free(ref);
    free(out);
    return rel;
}

int main(void)
{
    const char *dir = getenv("GLINT_VISION_REF");
    if (!dir || !dir[0]) {
        printf("SKIP test_vision_oracle: GLINT_VISION_REF not set "
               "(tests/oracle/check_vision_torch.sh sets it)\n");
        return 0;
    }
    const char *tol_s = getenv("GLINT_VISION_TOL");
    double tol = tol_s ? strtod(tol_s, NULL) : 1e-5;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    size_t n_bytes = 0;
    float *blob = read_all(dir, "weights.f32", &n_bytes);
    if (!root || !blob) {
        fprintf(stderr, "test_vision_oracle: cannot read %s/config.json or weights.f32\n", dir);
        return 1;
    }
    struct gl_vision_config cfg;
    load_config(json_object_get(root, "config"), &cfg);
    struct gl_vision_layer *layers = calloc((size_t)cfg.n_layers, sizeof *layers);
    struct gl_pool *pool = gl_pool_new(2);
    int failed = !layers || !pool;
    // F32 is held to tol; the F16 and BF16 arms are reported (their error is the weight rounding)
    // and only held to a loose bound.
    const enum gl_type types[3] = {GL_TYPE_F32, GL_TYPE_F16, GL_TYPE_BF16};
    const char *tname[3] = {"F32", "F16", "BF16"};
    for (int ti = 0; ti < 3 && !failed; ti++) {
        struct cursor c = {.p = blob, .end = blob + n_bytes / 4, .type = types[ti]};
        struct gl_vision_weights w = {0};
        if (!load_weights(&cfg, &c, &w, layers)) {
            fprintf(stderr, "test_vision_oracle: weights.f32 does not match config.json\n");
            failed = 1;
        }
        json_t *cases = json_object_get(root, "cases");
        for (size_t i = 0; i < json_array_size(cases) && !failed; i++) {
            json_t *cs = json_array_get(cases, i);
            double cmin = 0, cmean = 0;
            double rel = run_case(pool, &cfg, &w, dir, cs, &cmin, &cmean);
            const char *name = json_string_value(json_object_get(cs, "name"));
            double bound = ti == 0 ? tol : 5e-2;
            int ok = rel >= 0 && rel <= bound;
            printf("%s vision %s weights, case %s (%lldx%lld patches): max rel error %.3g (tol "
                   "%.0e); soft-token cosine worst %.6f mean %.6f\n",
                   ok ? "ok" : "not ok", tname[ti], name,
                   (long long)json_integer_value(json_object_get(cs, "gh")),
                   (long long)json_integer_value(json_object_get(cs, "gw")), rel, bound, cmin,
                   cmean);
            failed |= !ok;
        }
        for (int i = 0; i < c.n_owned; i++)
            free(c.owned[i]);
    }
    gl_pool_delete(pool);
    free(layers);
    free(blob);
    json_decref(root);
    return failed;
}
