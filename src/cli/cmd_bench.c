// SPDX-License-Identifier: MIT
// `glint bench`: llama-bench-like speed test. pp<P> = one batched forward of P random token ids
// from an empty cache (last-token logits only); tg<N> = N single-token decode steps (each with
// full logits and a greedy pick) after a 1-token prompt. Each test runs r times after one
// untimed warm-up pass; reports mean ± sample sd of tokens/s as a markdown table, or JSON with
// --json (fields avg_ts / stddev_ts / samples_ts as llama-bench's JSON). --batch 1,4,8,16: for
// each size B, B concurrent greedy sequences (16-token prompts, -n tokens each, EOS ignored)
// through the engine; aggregate decode tokens/s counted from the step after every sequence has
// its first token, and the ratio over batch 1 (one JSON line per size).
#include "cli.h"
#include "engine/engine.h"
#include "model/model.h"
#include "sampling/sampling.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *f)
{
    fprintf(f, "usage: glint bench --model F [-p 512] [-n 128] [-t 2] [-r 3] [--json]\n"
               "  -p P    prompt tokens processed in one batch (0 = skip pp)\n"
               "  -n N    tokens generated one at a time (0 = skip tg)\n"
               "  -t T    threads (default 2)\n"
               "  -r R    repetitions (default 3)\n"
               "  --json  print JSON instead of a table\n"
               "  --batch 1,4,8,16  aggregate decode t/s of B concurrent sequences through the\n"
               "          engine (-n tokens each, default 64 here), ratio over batch 1\n"
               "          (JSON: over the mean of every 1 listed, e.g. 1,4,8,16,1)\n");
    return f == stdout ? 0 : 2;
}

struct result {
    char name[32];
    int64_t n_prompt, n_gen;
    double *samples; // tokens/s per repetition
    double mean, sd;
};

static void stats(struct result *r, int reps)
{
    double s = 0.0, ss = 0.0;
    for (int i = 0; i < reps; i++)
        s += r->samples[i];
    r->mean = s / reps;
    for (int i = 0; i < reps; i++)
        ss += (r->samples[i] - r->mean) * (r->samples[i] - r->mean);
    r->sd = reps > 1 ? sqrt(ss / (reps - 1)) : 0.0;
}

#define BATCH_PROMPT 16
#define MAX_BATCHES  16

// Decode phase of B sequences: returns aggregate decode tokens/s (< 0 on error).
static double batch_decode_ts(const struct gl_model *m, int B, long long n_gen, long long threads,
                              int64_t *n_tok, int64_t *n_steps)
{
    struct gl_engine_params ep = gl_engine_default_params(m);
    ep.max_num_seqs = B;
    ep.max_num_batched_tokens = B * BATCH_PROMPT > 512 ? B * BATCH_PROMPT : 512;
    ep.n_threads = (int)threads;
    ep.kv.budget_bytes = (int64_t)256 << 20;
    ep.max_model_len = BATCH_PROMPT + (int32_t)n_gen + 1;
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    if (gl_engine_new(&e, m, NULL, &ep, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        return -1.0;
    }
    struct gl_rng rng;
    gl_rng_seed(&rng, 99);
    const int32_t id_range = m->cfg.n_vocab < 200000 ? m->cfg.n_vocab : 200000;
    for (int b = 0; b < B; b++) {
        int32_t prompt[BATCH_PROMPT];
        for (int i = 0; i < BATCH_PROMPT; i++)
            prompt[i] = (int32_t)(gl_rng_next(&rng) % (uint64_t)id_range);
        struct gl_request rq = {.prompt = prompt, .n_prompt = BATCH_PROMPT};
        rq.sp = gl_sample_default_params();
        rq.sp.temperature = 0.0f;
        rq.sp.ignore_eos = 1;
        rq.sp.max_tokens = (int32_t)n_gen;
        if (gl_engine_submit(e, &rq, NULL, &err) != GL_OK) {
            fprintf(stderr, "glint bench: %s\n", err.msg);
            gl_engine_free(e);
            return -1.0;
        }
    }
    struct gl_engine_stats st;
    int n_active = 1;
    int64_t t0 = 0, g0 = 0, s0 = 0;
    while (n_active > 0) {
        if (gl_engine_step(e, &n_active, &err) != GL_OK) {
            fprintf(stderr, "glint bench: %s\n", err.msg);
            gl_engine_free(e);
            return -1.0;
        }
        gl_engine_stats(e, &st);
        if (t0 == 0 && st.generated_tokens >= B) { // every sequence prefilled: decode from here
            t0 = gl_time_us();
            g0 = st.generated_tokens;
            s0 = st.steps;
        }
    }
    int64_t t1 = gl_time_us();
    gl_engine_stats(e, &st);
    gl_engine_free(e);
    *n_tok = st.generated_tokens - g0;
    *n_steps = st.steps - s0;
    return t1 > t0 ? (double)*n_tok / ((double)(t1 - t0) / 1e6) : 0.0;
}

static int bench_batch(const char *path, const char *list, long long n_gen, long long threads)
{
    int sizes[MAX_BATCHES], n_sizes = 0;
    for (const char *p = list; *p && n_sizes < MAX_BATCHES;) {
        char num[16];
        size_t k = 0;
        while (*p && *p != ',' && k + 1 < sizeof num)
            num[k++] = *p++;
        num[k] = 0;
        long long b;
        if (gl_cli_parse_int(num, 1, 256, &b)) {
            fprintf(stderr, "glint bench: --batch: bad size '%s'\n", num);
            return 2;
        }
        sizes[n_sizes++] = (int)b;
        if (*p == ',')
            p++;
    }
    struct gl_err err = {0};
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    if (gl_model_open(&m, path, &mp, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        return 1;
    }
    int64_t nt, ns;
    if (batch_decode_ts(m, 1, 4, threads, &nt, &ns) < 0) { // warm-up: page in the weights
        gl_model_delete(m);
        return 1;
    }
    double base = 0.0;
    printf("| batch | decode tokens | steps | aggregate t/s | per-sequence t/s | x batch 1 |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    double ts[MAX_BATCHES];
    int64_t ntok[MAX_BATCHES], nstep[MAX_BATCHES];
    for (int i = 0; i < n_sizes; i++) {
        ts[i] = batch_decode_ts(m, sizes[i], n_gen, threads, &ntok[i], &nstep[i]);
        if (ts[i] < 0) {
            gl_model_delete(m);
            return 1;
        }
        if (sizes[i] == 1)
            base = ts[i];
        printf("| %d | %lld | %lld | %.2f | %.2f | %.2f |\n", sizes[i], (long long)ntok[i],
               (long long)nstep[i], ts[i], ts[i] / sizes[i], base > 0 ? ts[i] / base : 0.0);
        fflush(stdout);
    }
    // JSON ratios use the mean of every batch-1 entry: listing 1 first and last (1,8,16,1)
    // brackets load drift on a shared machine.
    double b1 = 0.0;
    int n_b1 = 0;
    for (int i = 0; i < n_sizes; i++)
        if (sizes[i] == 1) {
            b1 += ts[i];
            n_b1++;
        }
    base = n_b1 ? b1 / n_b1 : 0.0;
    for (int i = 0; i < n_sizes; i++)
        printf("{\"model\": \"%s\", \"test\": \"batch_decode\", \"batch\": %d, \"n_gen\": %lld, "
               "\"n_threads\": %lld, \"decode_tokens\": %lld, \"aggregate_ts\": %.4f, "
               "\"per_seq_ts\": %.4f, \"ratio_vs_batch1\": %.4f}\n",
               path, sizes[i], n_gen, threads, (long long)ntok[i], ts[i], ts[i] / sizes[i],
               base > 0 ? ts[i] / base : 0.0);
    gl_model_delete(m);
    return 0;
}

int gl_cmd_bench(int argc, char **argv)
{
    const char *path = NULL;
    long long p = 512, n = 128, t = 2, reps = 3;
    int json = 0, n_set = 0;
    const char *batch = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(stdout);
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "glint bench: unknown or incomplete option '%s'\n", a);
            return usage(stderr);
        }
        i++;
        if (!strcmp(a, "--model") || !strcmp(a, "-m"))
            path = v;
        else if ((!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) &&
                 !gl_cli_parse_int(v, 0, 65536, &p))
            ;
        else if ((!strcmp(a, "-n") || !strcmp(a, "--n-gen")) && !gl_cli_parse_int(v, 0, 65536, &n))
            n_set = 1;
        else if (!strcmp(a, "--batch"))
            batch = v;
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && !gl_cli_parse_int(v, 1, 256, &t))
            ;
        else if ((!strcmp(a, "-r") || !strcmp(a, "--repetitions")) &&
                 !gl_cli_parse_int(v, 1, 1000, &reps))
            ;
        else {
            fprintf(stderr, "glint bench: bad option or value: %s %s\n", a, v);
            return usage(stderr);
        }
    }
    if (!path) {
        fprintf(stderr, "glint bench: need --model\n");
        return usage(stderr);
    }
    if (batch)
        return bench_batch(path, batch, n_set ? (n > 0 ? n : 1) : 64, t);

    struct gl_err err = {0};
    struct gl_model *m = NULL;
    struct gl_model_ctx *ctx = NULL;
    struct gl_kv_cache *kv = NULL;
    float *logits = NULL;
    int32_t *ids = NULL;
    struct result res[2];
    memset(res, 0, sizeof res);
    int n_res = 0, rc = 1;
    struct gl_model_params mp = gl_model_default_params();
    int64_t tl0 = gl_time_us();
    if (gl_model_open(&m, path, &mp, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        return 1;
    }
    int64_t tl1 = gl_time_us();
    const struct gl_model_config *cf = &m->cfg;
    int64_t n_ctx = p > n + 1 ? p : n + 1;
    if (gl_model_ctx_new(&ctx, m, p > 0 ? (int)p : 1, (int)t, n_ctx, &err) != GL_OK ||
        gl_kv_cache_new(&kv, cf, n_ctx, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        goto done;
    }
    logits = gl_malloc((size_t)cf->n_vocab * sizeof(float));
    ids = gl_malloc((size_t)(p > 1 ? p : 1) * sizeof *ids);
    if (!logits || !ids) {
        fprintf(stderr, "glint bench: out of memory\n");
        goto done;
    }
    struct gl_rng rng;
    gl_rng_seed(&rng, 1234);
    const int32_t id_range = cf->n_vocab < 200000 ? cf->n_vocab : 200000; // ordinary tokens
    for (int64_t i = 0; i < (p > 1 ? p : 1); i++)
        ids[i] = (int32_t)(gl_rng_next(&rng) % (uint64_t)id_range);

    // Warm-up (as llama-bench): one untimed pass pages in the mapping and first-touches the
    // step scratch, so rep 1 is not an outlier.
    if (gl_model_forward(ctx, kv, ids, p > 0 ? p : 1, 0, logits, 0, NULL, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        goto done;
    }
    if (p > 0) {
        struct result *r = &res[n_res++];
        snprintf(r->name, sizeof r->name, "pp%lld", p);
        r->n_prompt = p;
        r->samples = gl_calloc((size_t)reps, sizeof(double));
        if (!r->samples)
            goto done;
        for (int k = 0; k < reps; k++) {
            gl_kv_cache_clear(kv);
            int64_t a = gl_time_us();
            if (gl_model_forward(ctx, kv, ids, p, 0, logits, 0, NULL, &err) != GL_OK) {
                fprintf(stderr, "glint bench: %s\n", err.msg);
                goto done;
            }
            r->samples[k] = (double)p / ((double)(gl_time_us() - a) / 1e6);
        }
        stats(r, (int)reps);
    }
    if (n > 0) {
        struct result *r = &res[n_res++];
        snprintf(r->name, sizeof r->name, "tg%lld", n);
        r->n_gen = n;
        r->samples = gl_calloc((size_t)reps, sizeof(double));
        if (!r->samples)
            goto done;
        for (int k = 0; k < reps; k++) {
            gl_kv_cache_clear(kv);
            if (gl_model_forward(ctx, kv, ids, 1, 0, logits, 0, NULL, &err) != GL_OK) {
                fprintf(stderr, "glint bench: %s\n", err.msg);
                goto done;
            }
            int64_t a = gl_time_us();
            for (int64_t i = 0; i < n; i++) {
                int32_t id = gl_sample_argmax(logits, cf->n_vocab);
                if (gl_model_forward(ctx, kv, &id, 1, 1 + i, logits, 0, NULL, &err) != GL_OK) {
                    fprintf(stderr, "glint bench: %s\n", err.msg);
                    goto done;
                }
            }
            r->samples[k] = (double)n / ((double)(gl_time_us() - a) / 1e6);
        }
        stats(r, (int)reps);
    }

    const struct gl_kernels *kn = gl_model_ctx_kernels(ctx);
    double size_gib = (double)gl_gguf_file_size(m->gguf) / (1024.0 * 1024.0 * 1024.0);
    if (json) {
        printf("[\n");
        for (int i = 0; i < n_res; i++) {
            struct result *r = &res[i];
            printf("  {\"model\": \"%s\", \"test\": \"%s\", \"n_prompt\": %lld, \"n_gen\": %lld, "
                   "\"n_threads\": %lld, \"isa\": \"%s\", \"model_size\": %llu, \"n_layer\": %d, "
                   "\"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [",
                   path, r->name, (long long)r->n_prompt, (long long)r->n_gen, t, kn->isa,
                   (unsigned long long)gl_gguf_file_size(m->gguf), cf->n_layer, r->mean, r->sd);
            for (int k = 0; k < reps; k++)
                printf("%s%.6f", k ? ", " : "", r->samples[k]);
            printf("]}%s\n", i + 1 < n_res ? "," : "");
        }
        printf("]\n");
    } else {
        printf("| model | size | threads | isa | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: |\n");
        for (int i = 0; i < n_res; i++)
            printf("| %s | %.2f GiB | %lld | %s | %s | %.2f ± %.2f |\n", path, size_gib, t, kn->isa,
                   res[i].name, res[i].mean, res[i].sd);
        fprintf(stderr, "load: %.2f s; %d layers, vocab %d\n", (double)(tl1 - tl0) / 1e6,
                cf->n_layer, cf->n_vocab);
    }
    rc = 0;
done:
    for (int i = 0; i < 2; i++)
        gl_free(res[i].samples);
    gl_free(logits);
    gl_free(ids);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(ctx);
    gl_model_delete(m);
    return rc;
}
