// SPDX-License-Identifier: MIT
// microbench_mask: token-mask latency on MaskBench-style files, single thread, real vocabulary,
// timed in thread CPU time.
// For each file ({"schema":..., "tests":[{"data":..., "valid":bool}]}) the schema is compiled,
// every valid instance is serialised compactly, tokenized, and walked through a matcher; every
// gl_matcher_fill_mask is timed. Prints mean / p50 / p99 / max of the mask time and the share of
// masks served by the cache and the string fast path.
// --dump F writes every mask time (microseconds, 3 decimals, one a line) to F, for a histogram.
// Usage: microbench_mask VOCAB FILE... [--no-cache] [--dump F]
#include "grammar/grammar.h"
#include "grammar/mask.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Thread CPU time in nanoseconds: the machine is shared, so wall time would count preemption.
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB FILE... [--no-cache] [--dump F]\n", argv[0]);
        return 2;
    }
    int no_cache = 0;
    FILE *dump = NULL;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--no-cache"))
            no_cache = 1;
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
            if (!(dump = fopen(argv[i + 1], "w"))) {
                perror(argv[i + 1]);
                return 1;
            }
            argv[++i] = "-"; // not a case file
        }
    struct gl_err err = {0};
    struct gl_tokenizer *tok = NULL;
    struct gl_gvocab *voc = NULL;
    if (gl_tokenizer_load_tiktoken(&tok, argv[1], &err) != GL_OK ||
        gl_gvocab_new(&voc, tok, &err) != GL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t words = gl_gvocab_mask_words(voc);
    uint32_t *mask = malloc(words * 4);
    const int32_t stop[] = {GL_TOK_EOS, GL_TOK_EOT};
    int64_t *times = NULL;
    size_t n_times = 0, cap_times = 0;
    int64_t n_files = 0, n_compiled = 0, rejected = 0, slow_over = 0, capped = 0;
    int64_t worst_us = 0;
    const char *worst = "";
    struct gl_matcher_stats tot = {0};
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        json_t *doc = json_load_file(argv[i], 0, NULL);
        if (!doc)
            continue;
        n_files++;
        json_t *schema = json_object_get(doc, "schema");
        char *src = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
        struct gl_grammar *g = NULL;
        if (getenv("MB_PROGRESS"))
            fprintf(stderr, "compile %s\n", argv[i]);
        gl_status st =
            src ? gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, src, strlen(src), NULL, &err)
                : GL_E_NOMEM;
        free(src);
        if (st != GL_OK) {
            json_decref(doc);
            continue;
        }
        n_compiled++;
        if (no_cache)
            gl_mask_set_cache(g, 0, 0);
        struct gl_matcher *m = NULL;
        if (gl_matcher_new(&m, g, voc, stop, 2, &err) != GL_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        size_t k;
        json_t *t;
        int64_t file_us = 0; // mask time spent on this file; capped at 2 s (a runaway schema)
        json_array_foreach(json_object_get(doc, "tests"), k, t)
        {
            if (file_us > 2000000)
                break;
            if (!json_is_true(json_object_get(t, "valid")))
                continue;
            char *text = json_dumps(json_object_get(t, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
            gl_token *ids = NULL;
            size_t n_ids = 0;
            if (!text || gl_tokenizer_encode(tok, text, strlen(text), 0, 0, &ids, &n_ids, &err)) {
                free(text);
                continue;
            }
            gl_matcher_reset(m);
            for (size_t j = 0; j <= n_ids && file_us <= 2000000; j++) {
                struct gl_matcher_stats s0, s1;
                gl_matcher_stats(m, &s0);
                int64_t t0 = cpu_ns();
                gl_matcher_fill_mask(m, mask);
                int64_t dt_ns = cpu_ns() - t0, dt = dt_ns / 1000;
                if (dump)
                    fprintf(dump, "%.3f\n", (double)dt_ns / 1e3);
                gl_matcher_stats(m, &s1);
                if (n_times == cap_times) {
                    cap_times = cap_times ? 2 * cap_times : 4096;
                    times = realloc(times, cap_times * sizeof *times);
                }
                times[n_times++] = dt;
                file_us += dt;
                if (dt > 1000) {
                    slow_over++;
                    if (getenv("MB_VERBOSE")) {
                        int64_t pc = 0;
                        for (size_t w = 0; w < words; w++)
                            pc += __builtin_popcount(mask[w]);
                        fprintf(stderr,
                                "%lld us (%lld nodes, %lld allowed, fast %d): %s at token %zu: ",
                                (long long)dt, (long long)(s1.nodes_visited - s0.nodes_visited),
                                (long long)pc, (int)(s1.fast_path - s0.fast_path), argv[i], j);
                        for (size_t q = 0; q < j; q++) {
                            size_t tl;
                            const char *tp = gl_tokenizer_token_bytes(tok, ids[q], &tl);
                            fprintf(stderr, "%s%.*s", q + 1 == j ? "|" : "", (int)tl, tp);
                        }
                        fprintf(stderr, "\n");
                    }
                }
                int32_t next = j < n_ids ? ids[j] : GL_TOK_EOS;
                if (!gl_matcher_accept(m, next)) {
                    rejected++;
                    break;
                }
            }
            gl_free(ids);
            free(text);
        }
        if (file_us > 2000000)
            capped++;
        if (getenv("MB_PROGRESS"))
            fprintf(stderr, "%s: %lld ms\n", argv[i], (long long)(file_us / 1000));
        if (file_us > worst_us) {
            worst_us = file_us;
            worst = argv[i];
        }
        struct gl_matcher_stats s;
        gl_matcher_stats(m, &s);
        tot.masks += s.masks;
        tot.cache_hits += s.cache_hits;
        tot.fast_path += s.fast_path;
        tot.nodes_visited += s.nodes_visited;
        gl_matcher_free(m);
        gl_grammar_unref(g);
        json_decref(doc);
    }
    if (!n_times) {
        printf("no masks\n");
        return 1;
    }
    qsort(times, n_times, sizeof *times, cmp_i64);
    double sum = 0;
    for (size_t i = 0; i < n_times; i++)
        sum += (double)times[i];
    printf("files %lld compiled %lld valid-rejected %lld masks %zu: mean %.1f us p50 %lld p99 %lld "
           "max %lld (>1ms: %lld); cache hits %.1f%%, fast path %.1f%%, nodes/mask %.0f\n",
           (long long)n_files, (long long)n_compiled, (long long)rejected, n_times,
           sum / (double)n_times, (long long)times[n_times / 2],
           (long long)times[n_times * 99 / 100], (long long)times[n_times - 1],
           (long long)slow_over, 100.0 * (double)tot.cache_hits / (double)tot.masks,
           100.0 * (double)tot.fast_path / (double)tot.masks,
           (double)tot.nodes_visited / (double)(tot.masks - tot.cache_hits + 1));
    printf("files capped at 2 s of masks: %lld; slowest file %s (%lld ms)\n", (long long)capped,
           worst, (long long)(worst_us / 1000));
    if (dump)
        fclose(dump);
    free(times);
    free(mask);
    gl_gvocab_free(voc);
    gl_tokenizer_free(tok);
    return 0;
}
