// SPDX-License-Identifier: MIT
// llama_logits: llama.cpp's all-position prompt logits for given token ids, through llama.h's C
// API only, on whatever backend the libllama it is linked against offers. check_vk_llama.sh
// builds it twice with cc: against bench/llama_build.sh's CPU build and against its Vulkan
// variant (LLAMA_VULKAN=1), so the same driver yields llama.cpp-CPU and llama.cpp-Vulkan logits.
// Settings follow llama_oracle.mjs (check_parity's oracle): F32 K/V cache, no flash attention,
// the whole prompt in one batch (one ubatch), every position an output.
//
// usage: llama_logits --model F [--ngl N] [--threads N] --ids "1 2 3" --out FILE [--ids ...]
//   --ngl N      layers to offload (llama_model_params.n_gpu_layers; default 0)
//   --threads N  CPU threads (default 1: ggml's CPU kernels compute each output on one thread)
//   --ids/--out  one job each pair (up to 64): FILE gets float32 [n_tok][n_vocab], row-major
// Where the graph ran is counted, not assumed: the scheduler's eval callback (ask phase only, so
// no extra synchronisation beyond one per split) sees every node of every split, and each node
// is counted under its buffer's name ("Vulkan0", "CPU", ...): a node lives in a buffer of the
// backend that computes it.
// Prints one JSON line per job: {"n_tok", "n_vocab", "n_layer", "nodes": {BUFFER: count, ...}}.
// Exit 0 on success, 1 on the first failure (message on stderr).
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_JOBS = 64, MAX_BUFS = 8 };

struct node_count {
    char name[64];
    long n;
};

static struct node_count g_counts[MAX_BUFS];
static int g_n_counts;

// Ask phase only: count the node under its buffer's name; never ask for the data.
static bool count_node(struct ggml_tensor *t, bool ask, void *user)
{
    (void)user;
    if (!ask)
        return true;
    const char *name = t->buffer ? ggml_backend_buffer_name(t->buffer) : "(none)";
    int i = 0;
    while (i < g_n_counts && strcmp(g_counts[i].name, name) != 0)
        i++;
    if (i == g_n_counts && g_n_counts < MAX_BUFS) {
        snprintf(g_counts[i].name, sizeof g_counts[i].name, "%s", name);
        g_counts[i].n = 0;
        g_n_counts++;
    }
    if (i < g_n_counts)
        g_counts[i].n++;
    return false;
}

static int parse_ids(const char *s, llama_token **out)
{
    int n = 0, cap = 64;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    char *end;
    for (;;) {
        while (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t')
            s++;
        if (!*s)
            break;
        long v = strtol(s, &end, 10);
        if (end == s) {
            free(ids);
            return -1;
        }
        if (n == cap)
            ids = realloc(ids, sizeof *ids * (size_t)(cap *= 2));
        ids[n++] = (llama_token)v;
        s = end;
    }
    *out = ids;
    return n;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *ids_s[MAX_JOBS], *outs[MAX_JOBS];
    int ngl = 0, threads = 1, n_jobs = 0, n_outs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "llama_logits: %s needs a value\n", a);
            return 1;
        }
        if (!strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--ngl"))
            ngl = atoi(v);
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else if (!strcmp(a, "--ids") && n_jobs < MAX_JOBS)
            ids_s[n_jobs++] = v;
        else if (!strcmp(a, "--out") && n_outs < MAX_JOBS)
            outs[n_outs++] = v;
        else {
            fprintf(stderr, "llama_logits: unknown or extra argument %s\n", a);
            return 1;
        }
        i++;
    }
    if (!model_path || n_jobs == 0 || n_jobs != n_outs) {
        fprintf(stderr, "usage: llama_logits --model F [--ngl N] [--threads N] --ids \"1 2\" "
                        "--out FILE [--ids ... --out ...]\n");
        return 1;
    }
    llama_token *ids[MAX_JOBS];
    int n_tok[MAX_JOBS], n_max = 0;
    for (int j = 0; j < n_jobs; j++) {
        n_tok[j] = parse_ids(ids_s[j], &ids[j]);
        if (n_tok[j] <= 0) {
            fprintf(stderr, "llama_logits: cannot parse ids '%.60s'\n", ids_s[j]);
            return 1;
        }
        if (n_tok[j] > n_max)
            n_max = n_tok[j];
    }

    llama_backend_init();
    for (size_t d = 0; d < ggml_backend_dev_count(); d++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(d);
        fprintf(stderr, "llama_logits: backend device %zu: %s (%s)\n", d,
                ggml_backend_dev_name(dev), ggml_backend_dev_description(dev));
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = ngl;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "llama_logits: cannot load %s\n", model_path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_max < 256 ? 256 : n_max);
    cp.n_batch = cp.n_ubatch = (uint32_t)n_max;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.no_perf = true;
    cp.cb_eval = count_node;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_logits: cannot create a context\n");
        return 1;
    }

    for (int j = 0; j < n_jobs; j++) {
        llama_memory_clear(llama_get_memory(ctx), true);
        g_n_counts = 0;
        struct llama_batch b = llama_batch_init(n_tok[j], 0, 1);
        for (int i = 0; i < n_tok[j]; i++) {
            b.token[i] = ids[j][i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        b.n_tokens = n_tok[j];
        int rc = llama_decode(ctx, b);
        if (rc != 0) {
            fprintf(stderr, "llama_logits: llama_decode returned %d (job %d)\n", rc, j);
            return 1;
        }
        FILE *f = fopen(outs[j], "wb");
        if (!f) {
            fprintf(stderr, "llama_logits: cannot write %s\n", outs[j]);
            return 1;
        }
        for (int i = 0; i < n_tok[j]; i++) {
            const float *row = llama_get_logits_ith(ctx, i);
            if (!row || fwrite(row, sizeof *row, (size_t)n_vocab, f) != (size_t)n_vocab) {
                fprintf(stderr, "llama_logits: no logits for position %d (job %d)\n", i, j);
                return 1;
            }
        }
        if (fclose(f) != 0) {
            fprintf(stderr, "llama_logits: writing %s failed\n", outs[j]);
            return 1;
        }
        llama_batch_free(b);
        printf("{\"n_tok\": %d, \"n_vocab\": %d, \"n_layer\": %d, \"nodes\": {", n_tok[j], n_vocab,
               llama_model_n_layer(model));
        for (int k = 0; k < g_n_counts; k++)
            printf("%s\"%s\": %ld", k ? ", " : "", g_counts[k].name, g_counts[k].n);
        printf("}}\n");
        fflush(stdout);
        free(ids[j]);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
