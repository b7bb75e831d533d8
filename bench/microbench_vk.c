// SPDX-License-Identifier: MIT
// microbench_vk: timing program (not a test) for the Vulkan backend on a real GPU (issue 20;
// bench/gpu.sh runs it on a lent machine). Writes a random-weight 30b-shape model with the given
// layer count and type, then:
//   1. parity: logits of 24 prompt tokens on the device against the CPU backend (max |diff| over
//      max |logit|, argmax agreement), one pass each;
//   2. pp / tg on the device and on the CPU (gl_bench_pp_tg: llama-bench's pp<P> and tg<N>);
//   3. aggregate greedy decode of B sequences through the engine on the device (prefill
//      excluded), B from the list.
// It links only glint_core's model/engine/vk parts (libpcre2 and libjansson besides libc), so it
// runs on a machine without glint's other libraries; libvulkan.so.1 is opened at run time.
// Usage: microbench_vk OUT.gguf VOCAB LAYERS TYPE [P=512] [N=64] [reps=3] [threads=16]
//                      [batches=1,8,32] [device=0]
#include "engine/engine.h"
#include "harness/harness.h"
#include "model/make_model.h"

#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct agg {
    int64_t t_first, t_last, n_tok;
};

static void on_event(void *user, const struct gl_event *ev)
{
    struct agg *a = user;
    int64_t now = gl_time_us();
    if (!a->t_first)
        a->t_first = now;
    a->t_last = now;
    a->n_tok += ev->n_tokens;
}

// Aggregate decode t/s of B greedy sequences (16-id prompts, n_gen tokens each) on device.
static double batch_decode(const struct gl_model *m, int B, int32_t n_gen, int threads, int device)
{
    struct gl_engine_params p = gl_engine_default_params(m);
    p.kv.budget_bytes = (int64_t)512 << 20;
    p.kv.prefix_cache = 0;
    p.max_num_seqs = B;
    p.max_num_batched_tokens = B * 16 > 512 ? B * 16 : 512;
    p.max_model_len = 16 + n_gen + 1;
    p.n_threads = threads;
    p.n_eos = 0;
    p.device = device;
    struct gl_engine *e = NULL;
    struct gl_err err = {0};
    if (gl_engine_new(&e, m, NULL, &p, &err) != GL_OK) {
        printf("batch %d: engine: %s\n", B, err.msg);
        return 0;
    }
    static int32_t prompt[16];
    struct agg a = {0};
    struct gl_sample_params s = gl_sample_default_params();
    s.temperature = 0.0f;
    s.max_tokens = n_gen;
    s.ignore_eos = 1;
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < 16; i++)
            prompt[i] = 1000 + (b * 7919 + i * 104729) % 100000;
        struct gl_request rq = {
            .prompt = prompt, .n_prompt = 16, .sp = s, .on_event = on_event, .user = &a};
        GL_ASSERT_MSG(gl_engine_submit(e, &rq, NULL, &err) == GL_OK, "%s", err.msg);
    }
    int64_t t0 = gl_time_us();
    GL_ASSERT_MSG(gl_engine_run(e, &err) == GL_OK, "%s", err.msg);
    int64_t t1 = gl_time_us();
    gl_engine_free(e);
    // The first event of each sequence ends its prefill; count decode from the first event on.
    double dec = (double)(a.n_tok - B) / ((double)(a.t_last - a.t_first) * 1e-6);
    printf("batch %3d: %lld tokens, %.2f s wall, decode %.1f t/s aggregate\n", B,
           (long long)a.n_tok, (double)(t1 - t0) * 1e-6, dec);
    return dec;
}

static void logits_of(const struct gl_model *m, int device, int threads, const int32_t *ids, int n,
                      float *out)
{
    struct gl_model_ctx *c = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_model_ctx_new_dev(&c, m, n, threads, 256, device, &err) == GL_OK, "%s",
                  err.msg);
    GL_ASSERT_MSG(gl_kv_cache_new(&kv, &m->cfg, 256, &err) == GL_OK, "%s", err.msg);
    int64_t t0 = gl_time_us();
    GL_ASSERT_MSG(gl_model_forward(c, kv, ids, n, 0, out, 1, NULL, &err) == GL_OK, "%s", err.msg);
    printf("forward of %d tokens on %s: %.1f ms\n", n, device < 0 ? "cpu" : "device",
           (double)(gl_time_us() - t0) * 1e-3);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(c);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: microbench_vk OUT.gguf VOCAB LAYERS TYPE [P=512] [N=64] "
                        "[reps=3] [threads=16] [batches=1,8,32] [device=0]\n");
        return 2;
    }
    const int64_t P = argc > 5 ? atoll(argv[5]) : 512, N = argc > 6 ? atoll(argv[6]) : 64;
    const int reps = argc > 7 ? atoi(argv[7]) : 3, threads = argc > 8 ? atoi(argv[8]) : 16;
    const char *batches = argc > 9 ? argv[9] : "1,8,32";
    const int device = argc > 10 ? atoi(argv[10]) : 0;
    struct gl_err err = {0};
    struct gl_make_model_params mp = gl_make_model_default_params();
    mp.preset = GL_MAKE_MODEL_30B_SHAPE;
    mp.n_layers = atoi(argv[3]);
    mp.type = argv[4];
    mp.vocab_path = argv[2];
    mp.n_threads = threads;
    int64_t t0 = gl_time_us();
    GL_ASSERT_MSG(gl_make_model_write(&mp, argv[1], &err) == GL_OK, "%s", err.msg);
    printf("model: 30b-shape, %d layers, %s, written in %.1f s\n", mp.n_layers, mp.type,
           (double)(gl_time_us() - t0) * 1e-6);
    struct gl_model *m = NULL;
    struct gl_model_params lp = gl_model_default_params();
    GL_ASSERT_MSG(gl_model_open(&m, argv[1], &lp, &err) == GL_OK, "%s", err.msg);

    // 1. parity
    enum { NT = 24 };
    int32_t ids[NT];
    for (int i = 0; i < NT; i++)
        ids[i] = 1000 + (i * 104729) % 100000;
    const size_t V = (size_t)m->cfg.n_vocab;
    float *a = malloc(NT * V * sizeof *a), *b = malloc(NT * V * sizeof *b);
    GL_ASSERT(a && b);
    t0 = gl_time_us();
    logits_of(m, device, threads, ids, NT, b); // device first: includes the upload
    printf("device context + forward: %.1f s\n", (double)(gl_time_us() - t0) * 1e-6);
    logits_of(m, -1, threads, ids, NT, a);
    double maxd = 0, maxl = 0;
    int agree = 0;
    for (int t = 0; t < NT; t++) {
        size_t ia = 0, ib = 0;
        for (size_t v = 0; v < V; v++) {
            float x = a[t * V + v], y = b[t * V + v];
            maxd = fmax(maxd, fabs((double)x - (double)y));
            maxl = fmax(maxl, fabs((double)x));
            ia = x > a[t * V + ia] ? v : ia;
            ib = y > b[t * V + ib] ? v : ib;
        }
        agree += ia == ib;
    }
    printf("parity: max|diff| %.3g, max|logit| %.3g, rel %.3g, argmax %d/%d\n", maxd, maxl,
           maxd / maxl, agree, NT);
    free(a);
    free(b);

    // 2. pp / tg, device then CPU
    for (int d = 0; d < 2; d++) {
        struct gl_bench_params bp = {.n_prompt = P,
                                     .n_gen = N,
                                     .n_depth = 0,
                                     .n_threads = threads,
                                     .reps = reps,
                                     .device = d == 0 ? device : -1,
                                     .n_gpu_layers = -1};
        struct gl_bench_result r[2];
        int n = 0;
        const char *isa = NULL;
        if (gl_bench_pp_tg(m, &bp, r, &n, &isa, &err) != GL_OK) {
            printf("bench on %s: %s\n", d == 0 ? "device" : "cpu", err.msg);
            continue;
        }
        for (int i = 0; i < n; i++) {
            printf("%s %s: %.2f +- %.2f t/s\n", d == 0 ? "device" : "cpu", r[i].name, r[i].mean,
                   r[i].sd);
            gl_bench_result_free(&r[i]);
        }
    }

    // 3. engine batches on the device
    for (const char *s = batches; *s;) {
        int B = atoi(s);
        if (B > 0)
            batch_decode(m, B, (int32_t)N, threads, device);
        s = strchr(s, ',');
        if (!s)
            break;
        s++;
    }
    gl_model_delete(m);
    return 0;
}
