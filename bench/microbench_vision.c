// SPDX-License-Identifier: MIT
// microbench_vision: timing program (not a test). gl_vision_encode at the released model's widths
// (hidden 1536, 16 heads of 96, ffn 8960, 32x32 windows, adapter 4096, out 6656) with random BF16
// weights, n_layers blocks that all share one set of weights (to keep memory small; the time per
// block is what matters), on a gh2 x gw2 patch grid. Prints the wall time of one encode after a
// warm-up; the 50-layer estimate scales the block time (window and full blocks alike).
// With "q8" as the fifth argument the matrices are Q8_0 (the same random values quantized; the
// patch matrix, 1176 wide, not a whole number of 32-element blocks, stays BF16).
// Usage: microbench_vision [gh2=32] [gw2=32] [n_layers=2] [threads=2] [bf16|q8]
#include "vision/vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rng_state = 88172645463325252ull;

static float rng_float(void) // uniform in [-1, 1)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state >> 40) / (float)(1 << 23) - 1.0f;
}

static float *rand_vec(int64_t n, float scale, float offset)
{
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; v && i < n; i++)
        v[i] = offset + scale * rng_float();
    return v;
}

static enum gl_type g_type = GL_TYPE_BF16;

// A g_type matrix [n_out][n_in] with entries of magnitude ~1/sqrt(n_in) (BF16 where n_in is not
// a whole number of the type's blocks).
static struct gl_vision_mat rand_mat(int64_t n_out, int64_t n_in)
{
    enum gl_type type = gl_type_row_size(g_type, n_in) ? g_type : GL_TYPE_BF16;
    size_t row = gl_type_row_size(type, n_in);
    uint8_t *m = malloc(row * (size_t)n_out);
    float *tmp = rand_vec(n_in, 1.0f, 0.0f);
    for (int64_t r = 0; m && tmp && r < n_out; r++) {
        for (int64_t i = 0; i < n_in; i++)
            tmp[i] = rng_float() * 1.7f / sqrtf((float)n_in);
        gl_kernels_get()->from_float[type](tmp, m + (size_t)r * row, n_in);
    }
    free(tmp);
    return (struct gl_vision_mat){type, m};
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int64_t gh2 = argc > 1 ? atoll(argv[1]) : 32, gw2 = argc > 2 ? atoll(argv[2]) : 32;
    struct gl_vision_config cfg;
    gl_vision_config_default(&cfg);
    cfg.n_layers = argc > 3 ? atoi(argv[3]) : 2;
    if (argc > 5 && argv[5][0] == 'q')
        g_type = GL_TYPE_Q8_0;
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    int64_t H = cfg.hidden, F = cfg.ffn, A = cfg.adapter;
    struct gl_vision_layer L = {
        .ln1_w = rand_vec(H, 0.1f, 1.0f),
        .ln1_b = rand_vec(H, 0.1f, 0.0f),
        .q = rand_mat(H, H),
        .k = rand_mat(H, H),
        .v = rand_mat(H, H),
        .proj = rand_mat(H, H),
        .q_b = rand_vec(H, 0.1f, 0.0f),
        .k_b = rand_vec(H, 0.1f, 0.0f),
        .v_b = rand_vec(H, 0.1f, 0.0f),
        .proj_b = rand_vec(H, 0.1f, 0.0f),
        .ln2_w = rand_vec(H, 0.1f, 1.0f),
        .ln2_b = rand_vec(H, 0.1f, 0.0f),
        .fc1 = rand_mat(F, H),
        .fc1_b = rand_vec(F, 0.1f, 0.0f),
        .fc2 = rand_mat(H, F),
        .fc2_b = rand_vec(H, 0.1f, 0.0f),
    };
    struct gl_vision_layer *layers = malloc((size_t)cfg.n_layers * sizeof *layers);
    for (int32_t l = 0; layers && l < cfg.n_layers; l++)
        layers[l] = L;
    struct gl_vision_weights w = {
        .patch = rand_mat(H, gl_vision_patch_dim(&cfg)),
        .pos = rand_vec((int64_t)cfg.pos_h * cfg.pos_w * H, 1.0f, 0.0f),
        .ln_pre_w = rand_vec(H, 0.1f, 1.0f),
        .ln_pre_b = rand_vec(H, 0.1f, 0.0f),
        .layers = layers,
        .ln_post_w = rand_vec(H, 0.1f, 1.0f),
        .ln_post_b = rand_vec(H, 0.1f, 0.0f),
        .adapter_fc1 = rand_mat(A, 4 * H),
        .adapter_fc2 = rand_mat(A, A),
        .projection = rand_mat(cfg.out_dim, A),
    };
    float *patches = rand_vec(gh2 * gw2 * gl_vision_patch_dim(&cfg), 1.0f, 0.0f);
    float *out = malloc((size_t)(gh2 * gw2 / 4 * cfg.out_dim) * sizeof(float));
    struct gl_pool *pool = gl_pool_new(threads);
    if (!pool || !patches || !out || !layers) {
        fprintf(stderr, "microbench_vision: out of memory\n");
        return 1;
    }
    struct gl_err err = {0};
    double best = 1e30;
    for (int rep = 0; rep < 2; rep++) { // the first run warms caches and page tables
        double t0 = now_s();
        if (gl_vision_encode(pool, &cfg, &w, patches, gh2, gw2, out, &err) != GL_OK) {
            fprintf(stderr, "microbench_vision: %s\n", err.msg);
            return 1;
        }
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    printf("vision encode %lldx%lld patches (%lld merged), %d layers, %s weights, %d threads: "
           "%.3f s\n",
           (long long)gh2, (long long)gw2, (long long)(gh2 * gw2 / 4), (int)cfg.n_layers,
           g_type == GL_TYPE_Q8_0 ? "Q8_0" : "BF16", threads, best);
    return 0;
}
