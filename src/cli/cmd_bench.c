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
#include "bench/bench.h"
#include "cli.h"
#include "gguf/gguf.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *f)
{
    fprintf(f, "usage: glint bench --model F [-p 512] [-n 128] [-d 0] [-t 2] [-r 3] [--json]\n"
               "  -p P    prompt tokens processed in one batch (0 = skip pp)\n"
               "  -n N    tokens generated one at a time (0 = skip tg)\n"
               "  -d D    depth: pp and tg run after D tokens already in the cache (written\n"
               "          once, untimed, like llama-bench -d)\n"
               "  -t T    threads (default 2)\n"
               "  --device D    cpu (default) or vulkan[:INDEX] (pp/tg and --batch)\n"
               "  -r R    repetitions (default 3)\n"
               "  --json  print JSON instead of a table\n"
               "  --batch 1,4,8,16  aggregate decode t/s of B concurrent sequences through the\n"
               "          engine (-n tokens each, default 64 here), ratio over batch 1\n"
               "          (JSON: over the mean of every 1 listed, e.g. 1,4,8,16,1)\n");
    return f == stdout ? 0 : 2;
}

#define MAX_BATCHES 16

static int bench_batch(const char *path, const char *list, long long n_gen, long long threads,
                       int device)
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
    if (gl_bench_batch_decode(m, 1, 4, (int)threads, device, &ts1, &nt, &ns, &err) != GL_OK) {
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
        if (gl_bench_batch_decode(m, sizes[i], n_gen, (int)threads, device, &ts[i], &ntok[i],
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

int gl_cmd_bench(int argc, char **argv)
{
    const char *path = NULL;
    long long p = 512, n = 128, d = 0, t = 2, reps = 3;
    int json = 0, n_set = 0, device = -1;
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
        else if ((!strcmp(a, "-d") || !strcmp(a, "--n-depth")) &&
                 !gl_cli_parse_int(v, 0, 1 << 20, &d))
            ;
        else if (!strcmp(a, "--batch"))
            batch = v;
        else if (!strcmp(a, "--device")) {
            if (gl_cli_device("glint bench", v, 1, &device))
                return 2;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) &&
                   !gl_cli_parse_int(v, 1, 256, &t))
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
        return bench_batch(path, batch, n_set ? (n > 0 ? n : 1) : 64, t, device);

    struct gl_err err = {0};
    struct gl_model *m = NULL;
    struct gl_model_params mp = gl_model_default_params();
    int64_t tl0 = gl_time_us();
    if (gl_model_open(&m, path, &mp, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        return 1;
    }
    int64_t tl1 = gl_time_us();
    const struct gl_model_config *cf = &m->cfg;
    struct gl_bench_params bp = {.n_prompt = p,
                                 .n_gen = n,
                                 .n_depth = d,
                                 .n_threads = (int)t,
                                 .reps = (int)reps,
                                 .device = device};
    struct gl_bench_result res[2];
    int n_res = 0;
    const char *isa = "?";
    if (gl_bench_pp_tg(m, &bp, res, &n_res, &isa, &err) != GL_OK) {
        fprintf(stderr, "glint bench: %s\n", err.msg);
        gl_model_delete(m);
        return 1;
    }
    uint64_t model_size = 0; // file bytes (GGUF) or tensor bytes (HF folder)
    if (m->gguf)
        model_size = gl_gguf_file_size(m->gguf);
    for (int64_t i = 0; !m->gguf && i < gl_safetensors_n_tensors(m->st); i++)
        model_size += gl_safetensors_tensor_at(m->st, i)->nbytes;
    double size_gib = (double)model_size / (1024.0 * 1024.0 * 1024.0);
    if (json) {
        printf("[\n");
        for (int i = 0; i < n_res; i++) {
            struct gl_bench_result *r = &res[i];
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
        fprintf(stderr, "load: %.2f s; %d layers, vocab %d\n", (double)(tl1 - tl0) / 1e6,
                cf->n_layer, cf->n_vocab);
    }
    for (int i = 0; i < n_res; i++)
        gl_bench_result_free(&res[i]);
    gl_model_delete(m);
    return 0;
}
