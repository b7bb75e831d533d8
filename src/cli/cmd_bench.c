// SPDX-License-Identifier: MIT
// `glint bench`: llama-bench-like speed test; the timing loops live in src/bench/ (bench.h).
// pp<P> = one batched forward of P random token ids (last-token logits only); tg<N> = N
// single-token decode steps (each with full logits and a greedy pick) after a 1-token prompt;
// with -d D both run over D tokens already in the cache (written once, untimed, as
// llama-bench -d). Each test runs r times after one untimed warm-up pass; reports mean ± sample sd
// of tokens/s as a markdown table, or JSON with --json (fields avg_ts / stddev_ts / samples_ts
// and n_depth as llama-bench's JSON). --batch 1,4,8,16 (-d does not apply): for
// each size B, B concurrent greedy sequences (16-token prompts, -n tokens each, EOS ignored)
// through the engine; aggregate decode tokens/s counted from the step after every sequence has
// its first token, and the ratio over batch 1 (one JSON line per size).
#include "cli.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "harness/harness.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BATCHES 16

static int bench_batch(const char *path, const char *list, long long n_gen, long long threads,
                       int device, int ngl)
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
    double ts1;
    if (gl_bench_batch_decode(m, 1, 4, (int)threads, device, ngl, &ts1, &nt, &ns, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg); // the warm-up: pages in the weights
        gl_model_delete(m);
        return 1;
    }
    double base = 0.0;
    printf("| batch | decode tokens | steps | aggregate t/s | per-sequence t/s | x batch 1 |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    double ts[MAX_BATCHES];
    int64_t ntok[MAX_BATCHES], nstep[MAX_BATCHES];
    for (int i = 0; i < n_sizes; i++) {
        if (gl_bench_batch_decode(m, sizes[i], n_gen, (int)threads, device, ngl, &ts[i], &ntok[i],
                                  &nstep[i], &err) != GL_OK) {
            fprintf(stderr, "glint bench: %s\n", err.msg);
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

// Splits a comma list of numbers in [lo, hi] into v[0..max); returns how many, or -1 after
// printing "glint bench: NAME: bad value".
static int parse_list(const char *name, const char *list, double lo, double hi, double *v, int max)
{
    int n = 0;
    for (const char *p = list; *p;) {
        char *end = NULL;
        double x = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(x >= lo && x <= hi) || n == max) {
            fprintf(stderr, "glint bench: %s: bad list '%s' (numbers in [%g, %g], at most %d)\n",
                    name, list, lo, hi, max);
            return -1;
        }
        v[n++] = x;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

// --spec-curve: the lists parsed here, the runs and the table in gl_bench_spec_curve.
#define MAX_CURVE 16
static int bench_spec(const char *path, const char *batches, const char *alphas_s, const char *ks_s,
                      long long n_gen, long long threads, long long rounds, int adaptive)
{
    double bs[MAX_CURVE], al[MAX_CURVE], ks[MAX_CURVE];
    struct gl_bench_curve c = {.batch = bs,
                               .alpha = al,
                               .k = ks,
                               .n_gen = n_gen,
                               .n_threads = (int)threads,
                               .rounds = (int)rounds,
                               .cost_model = adaptive};
    c.n_batch = parse_list("--batch", batches, 1, 256, bs, MAX_CURVE);
    c.n_alpha = parse_list("--alpha", alphas_s, 0, 1, al, MAX_CURVE);
    c.n_k = parse_list("--spec-k", ks_s, 1, GL_SPEC_MAX_K, ks, MAX_CURVE);
    if (c.n_batch < 0 || c.n_alpha < 0 || c.n_k < 0)
        return 2;
    struct gl_err err = {0};
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    if (gl_model_open(&m, path, &mp, &err) != GL_OK ||
        gl_bench_spec_curve(m, &c, stdout, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        gl_model_delete(m);
        return 1;
    }
    gl_model_delete(m);
    return 0;
}

// The pp / tg results as llama-bench prints them: a markdown table, or JSON with --json.
static void print_results(const struct gl_model *m, const char *path, long long t, const char *isa,
                          const struct gl_bench_result *res, int n_res, int json, int64_t load_us)
{
    const struct gl_model_config *cf = &m->cfg;
    uint64_t model_size = 0; // file bytes (GGUF) or tensor bytes (HF folder)
    if (m->gguf)
        model_size = gl_gguf_file_size(m->gguf);
    for (int64_t i = 0; !m->gguf && i < gl_safetensors_n_tensors(m->st); i++)
        model_size += gl_safetensors_tensor_at(m->st, i)->nbytes;
    double size_gib = (double)model_size / (1024.0 * 1024.0 * 1024.0);
    if (json) {
        printf("[\n");
        for (int i = 0; i < n_res; i++) {
            const struct gl_bench_result *r = &res[i];
            printf("  {\"model\": \"%s\", \"test\": \"%s\", \"n_prompt\": %lld, \"n_gen\": %lld, "
                   "\"n_depth\": %lld, \"n_threads\": %lld, \"isa\": \"%s\", \"model_size\": %llu, "
                   "\"n_layer\": %d, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [",
                   path, r->name, (long long)r->n_prompt, (long long)r->n_gen,
                   (long long)r->n_depth, t, isa, (unsigned long long)model_size, cf->n_layer,
                   r->mean, r->sd);
            for (int k = 0; k < r->n_samples; k++)
                printf("%s%.6f", k ? ", " : "", r->samples[k]);
            printf("]}%s\n", i + 1 < n_res ? "," : "");
        }
        printf("]\n");
    } else {
        printf("| model | size | threads | isa | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: |\n");
        for (int i = 0; i < n_res; i++)
            printf("| %s | %.2f GiB | %lld | %s | %s | %.2f ± %.2f |\n", path, size_gib, t, isa,
                   res[i].name, res[i].mean, res[i].sd);
        fprintf(stderr, "load: %.2f s; %d layers, vocab %d\n", (double)load_us / 1e6, cf->n_layer,
                cf->n_vocab);
    }
}

int gl_cmd_bench(int argc, char **argv)
{
    const char *path = NULL, *batch = NULL, *alphas = "0,0.3,0.5,0.7,0.9", *ks = "2,4,8,16";
    long long p = 512, n = -1, d = 0, t = 2, reps = 3;
    int json = 0, device = -1, ngl = -1, curve = 0, adaptive = 0;
    struct gl_opt tab[] = {
        GL_OPT_S("--model", "-m", path, "F", "a GGUF or an HF checkpoint folder"),
        GL_OPT_I("-p", "--n-prompt", p, 0, 65536, "P",
                 "prompt tokens processed in one batch (default 512; 0 = skip pp)"),
        GL_OPT_I("-n", "--n-gen", n, 0, 65536, "N",
                 "tokens generated one at a time (default 128; 0 = skip tg)"),
        GL_OPT_I("-d", "--n-depth", d, 0, 1 << 20, "D",
                 "depth: pp and tg run after D tokens already in the cache (written once, "
                 "untimed, like llama-bench -d)"),
        GL_OPT_I("-t", "--threads", t, 1, 256, "T", "threads (default 2)"),
        GL_OPT_F("--device", NULL, gl_cli_opt_device, &device, "D", NULL,
                 "cpu (default) or vulkan[:INDEX] (pp/tg and --batch)"),
        GL_OPT_I("--n-gpu-layers", "-ngl", ngl, -1, 1 << 20, "N", GL_CLI_NGL_HELP),
        GL_OPT_I("-r", "--repetitions", reps, 1, 1000, "R", "repetitions (default 3)"),
        GL_OPT_B("--json", NULL, json, 1, "print JSON instead of a table"),
        GL_OPT_S("--batch", NULL, batch, "1,4,8,16",
                 "aggregate decode t/s of B concurrent sequences through the engine (-n tokens "
                 "each, default 64 here), ratio over batch 1 (JSON: over the mean of every 1 "
                 "listed, e.g. 1,4,8,16,1)"),
        GL_OPT_B("--spec-curve", NULL, curve, 1,
                 "speculative decoding's cost curve: per --batch size, the replay drafter at each "
                 "--alpha and --spec-k against speculation off, interleaved, -r rounds (-n tokens "
                 "per sequence, default 32 here); prints on / off time per generated token"),
        GL_OPT_S("--alpha", NULL, alphas, "A,..",
                 "--spec-curve: replay acceptance rates (default 0,0.3,0.5,0.7,0.9)"),
        GL_OPT_S("--spec-k", NULL, ks, "K,..", "--spec-curve: draft lengths (default 2,4,8,16)"),
        GL_OPT_B("--spec-cost-model", NULL, adaptive, 1,
                 "--spec-curve: let the engine's cost model choose each step's draft length "
                 "(0..k) instead of always drafting k; every run (both sides) first decodes "
                 "the same sequences once untimed, so the model is warm"),
        GL_OPT_B("--spec-cost-model-vs-fixed", NULL, adaptive, 2,
                 "--spec-curve: both, in the same rounds: each k fixed, then the cost model "
                 "choosing 0..k (every run warm, as --spec-cost-model)"),
    };
    tab[0].required = 1;
    struct gl_cli_spec s = {.cmd = "glint bench",
                            .synopsis = "--model F [-p 512] [-n 128] [-d 0] [-t 2] [-r 3] [--json]",
                            .about = "Prompt-processing (pp) and generation (tg) speed, as "
                                     "llama-bench measures them.",
                            .opts = tab,
                            .n_opts = GL_NOPTS(tab)};
    GL_CLI_PARSE(&s, argc, argv);
    gl_cli_ngl_check("glint bench", device, ngl);
    const int n_set = n >= 0;
    if (!n_set)
        n = 128;
    if (curve && n_set && n < 2) { // the clock starts after every sequence's first token
        fprintf(stderr,
                "glint bench: --spec-curve needs -n >= 2 (got %lld): the timed decode "
                "starts after the first token\n",
                (long long)n);
        return 2;
    }
    if (curve)
        return bench_spec(path, batch ? batch : "1,8", alphas, ks, n_set ? n : 32, t, reps,
                          adaptive);
    if (batch)
        return bench_batch(path, batch, n_set ? (n > 0 ? n : 1) : 64, t, device, (int)ngl);

    struct gl_err err = {0};
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    int64_t tl0 = gl_time_us();
    if (gl_model_open(&m, path, &mp, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        return 1;
    }
    int64_t tl1 = gl_time_us();
    struct gl_bench_params bp = {.n_prompt = p,
                                 .n_gen = n,
                                 .n_depth = d,
                                 .n_threads = (int)t,
                                 .reps = (int)reps,
                                 .device = device,
                                 .n_gpu_layers = (int)ngl};
    struct gl_bench_result res[2];
    int n_res = 0;
    const char *isa = "?";
    if (gl_bench_pp_tg(m, &bp, res, &n_res, &isa, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        gl_model_delete(m);
        return 1;
    }
    print_results(m, path, t, isa, res, n_res, json, tl1 - tl0);
    for (int i = 0; i < n_res; i++)
        gl_bench_result_free(&res[i]);
    gl_model_delete(m);
    return 0;
}
