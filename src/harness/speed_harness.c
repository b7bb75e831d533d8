// SPDX-License-Identifier: MIT
// harness: the timing loops of `glint bench` (harness.h; was src/bench/). Moved out of
// src/cli/cmd_bench.c unchanged but for the depth (-d), which runs the timed passes through
// gl_model_forward_batch at positions D.. over a cache that keeps its D depth rows.
#include "harness/harness.h"

#include "engine/engine.h"
#include "sampling/sampling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void stats(struct gl_bench_result *r)
{
    double s = 0.0, ss = 0.0;
    for (int i = 0; i < r->n_samples; i++)
        s += r->samples[i];
    r->mean = s / r->n_samples;
    for (int i = 0; i < r->n_samples; i++)
        ss += (r->samples[i] - r->mean) * (r->samples[i] - r->mean);
    r->sd = r->n_samples > 1 ? sqrt(ss / (r->n_samples - 1)) : 0.0;
}

void gl_bench_result_free(struct gl_bench_result *r)
{
    if (!r)
        return;
    gl_free(r->samples);
    r->samples = NULL;
    r->n_samples = 0;
}

// Runs ids[0..n) at positions pos0..: appended through gl_model_forward when there is no depth
// (the cache is cleared before each pass), else one gl_model_forward_batch pass through the
// cache's views that overwrites rows pos0.. and leaves the depth rows 0..D-1 in place.
static gl_status run_at(struct gl_model_ctx *c, struct gl_kv_cache *kv,
                        const struct gl_kv_view *views, int64_t depth, const int32_t *ids,
                        int64_t n, int64_t pos0, float *logits, struct gl_err *err)
{
    if (depth == 0)
        return gl_model_forward(c, kv, ids, n, pos0, logits, 0, NULL, err);
    struct gl_batch_seq s = {.tokens = ids,
                             .n = (int32_t)n,
                             .pos0 = pos0,
                             .views = views,
                             .logits_row = 0,
                             .n_logits = 0};
    return gl_model_forward_batch(c, &s, 1, logits, err);
}

static int new_result(struct gl_bench_result *r, const char *test, int64_t count, int64_t depth,
                      int reps)
{
    memset(r, 0, sizeof *r);
    if (depth > 0)
        snprintf(r->name, sizeof r->name, "%s%lld @ d%lld", test, (long long)count,
                 (long long)depth);
    else
        snprintf(r->name, sizeof r->name, "%s%lld", test, (long long)count);
    r->n_depth = depth;
    r->samples = gl_calloc((size_t)reps, sizeof(double));
    r->n_samples = reps;
    return r->samples != NULL;
}

gl_status gl_bench_pp_tg(const struct gl_model *m, const struct gl_bench_params *p,
                         struct gl_bench_result out[2], int *n_out, const char **isa,
                         struct gl_err *err)
{
    *n_out = 0;
    *isa = "?";
    const struct gl_model_config *cf = &m->cfg;
    const int64_t P = p->n_prompt, N = p->n_gen, D = p->n_depth;
    const int64_t n_ctx = D + (P > N + 1 ? P : N + 1);
    // Batch: the pp pass in one forward; the depth is written in chunks of at most 512.
    int64_t n_batch = P > 0 ? P : 1;
    int64_t fill = D < 512 ? D : 512;
    if (fill > n_batch)
        n_batch = fill;
    const int64_t n_ids = D + (P > 1 ? P : 1);
    struct gl_model_ctx *ctx = NULL;
    struct gl_kv_cache *kv = NULL;
    float *logits = NULL;
    int32_t *ids = NULL;
    struct gl_kv_view *views = NULL;
    gl_status st = GL_OK;
    const struct gl_model_dev md = {.device = p->device, .n_gpu_layers = p->n_gpu_layers};
    if ((st = gl_model_ctx_new_ex(&ctx, m, (int)n_batch, p->n_threads, n_ctx, &md, err)) != GL_OK ||
        (st = gl_kv_cache_new(&kv, cf, n_ctx, err)) != GL_OK)
        goto done;
    *isa = gl_model_ctx_kernels(ctx)->isa;
    logits = gl_malloc((size_t)cf->n_vocab * sizeof(float));
    ids = gl_malloc((size_t)n_ids * sizeof *ids);
    views = gl_calloc((size_t)cf->n_layer, sizeof *views);
    if (!logits || !ids || !views) {
        st = gl_err_set(err, GL_E_NOMEM, "bench: out of memory");
        goto done;
    }
    struct gl_rng rng;
    gl_rng_seed(&rng, 1234);
    const int32_t id_range = cf->n_vocab < 200000 ? cf->n_vocab : 200000; // ordinary tokens
    // ids[0..P) are the prompt (as before -d existed); the depth ids follow them.
    for (int64_t i = 0; i < n_ids; i++)
        ids[i] = (int32_t)(gl_rng_next(&rng) % (uint64_t)id_range);
    const int32_t *prompt = ids, *depth_ids = ids + (P > 1 ? P : 1);

    // Warm-up (as llama-bench): one untimed pass from an empty cache pages in the mapping and
    // first-touches the step scratch, so rep 1 is not an outlier.
    if ((st = gl_model_forward(ctx, kv, prompt, P > 0 ? P : 1, 0, logits, 0, NULL, err)) != GL_OK)
        goto done;
    if (D > 0) { // the depth, once (untimed)
        gl_kv_cache_clear(kv);
        if ((st = gl_model_forward(ctx, kv, depth_ids, D, 0, NULL, 0, NULL, err)) != GL_OK)
            goto done;
        for (int l = 0; l < cf->n_layer; l++)
            views[l] = gl_kv_cache_view(kv, l);
    }
    if (P > 0) {
        struct gl_bench_result *r = &out[*n_out];
        if (!new_result(r, "pp", P, D, p->reps)) {
            st = gl_err_set(err, GL_E_NOMEM, "bench: out of memory");
            goto done;
        }
        (*n_out)++;
        r->n_prompt = P;
        for (int k = 0; k < p->reps; k++) {
            if (D == 0)
                gl_kv_cache_clear(kv);
            int64_t a = gl_time_us();
            if ((st = run_at(ctx, kv, views, D, prompt, P, D, logits, err)) != GL_OK)
                goto done;
            r->samples[k] = (double)P / ((double)(gl_time_us() - a) / 1e6);
        }
        stats(r);
    }
    if (N > 0) {
        struct gl_bench_result *r = &out[*n_out];
        if (!new_result(r, "tg", N, D, p->reps)) {
            st = gl_err_set(err, GL_E_NOMEM, "bench: out of memory");
            goto done;
        }
        (*n_out)++;
        r->n_gen = N;
        for (int k = 0; k < p->reps; k++) {
            if (D == 0)
                gl_kv_cache_clear(kv);
            if ((st = run_at(ctx, kv, views, D, prompt, 1, D, logits, err)) != GL_OK)
                goto done;
            int64_t a = gl_time_us();
            for (int64_t i = 0; i < N; i++) {
                int32_t id = gl_sample_argmax(logits, cf->n_vocab);
                if ((st = run_at(ctx, kv, views, D, &id, 1, D + 1 + i, logits, err)) != GL_OK)
                    goto done;
            }
            r->samples[k] = (double)N / ((double)(gl_time_us() - a) / 1e6);
        }
        stats(r);
    }
done:
    if (st != GL_OK) {
        for (int i = 0; i < *n_out; i++)
            gl_bench_result_free(&out[i]);
        *n_out = 0;
    }
    gl_free(views);
    gl_free(logits);
    gl_free(ids);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(ctx);
    return st;
}

// The benches' next prompt: GL_BENCH_BATCH_PROMPT ids from rng, mod min(vocab, 200000) (the
// base ranks, no specials).
static void bench_prompt(struct gl_rng *rng, const struct gl_model *m, int32_t *prompt)
{
    const int32_t id_range = m->cfg.n_vocab < 200000 ? m->cfg.n_vocab : 200000;
    for (int i = 0; i < GL_BENCH_BATCH_PROMPT; i++)
        prompt[i] = (int32_t)(gl_rng_next(rng) % (uint64_t)id_range);
}

// Steps e until it is idle, then frees it (also on error). The clock starts after the step in
// which all B sequences have their first token (prefill excluded): *us, *n_tok and *n_steps are
// the decode part's; *es the engine's stats at the end.
static gl_status decode_timed(struct gl_engine *e, int B, struct gl_engine_stats *es, int64_t *us,
                              int64_t *n_tok, int64_t *n_steps, struct gl_err *err)
{
    int n_active = 1;
    int64_t t0 = 0, g0 = 0, s0 = 0;
    gl_engine_stats(e, es);
    const int64_t before = es->generated_tokens; // a warm-up's tokens (gl_bench_spec_decode)
    while (n_active > 0) {
        gl_status st = gl_engine_step(e, &n_active, err);
        if (st != GL_OK) {
            gl_engine_free(e);
            return st;
        }
        gl_engine_stats(e, es);
        if (t0 == 0 && es->generated_tokens >= before + B) {
            t0 = gl_time_us();
            g0 = es->generated_tokens;
            s0 = es->steps;
        }
    }
    *us = t0 ? gl_time_us() - t0 : 0;
    gl_engine_stats(e, es);
    gl_engine_free(e);
    *n_tok = es->generated_tokens - g0;
    *n_steps = es->steps - s0;
    return GL_OK;
}

gl_status gl_bench_batch_decode(const struct gl_model *m, int B, int64_t n_gen, int n_threads,
                                int device, int n_gpu_layers, double *ts, int64_t *n_tok,
                                int64_t *n_steps, struct gl_err *err)
{
    *ts = 0.0;
    *n_tok = *n_steps = 0;
    struct gl_engine_params ep = gl_engine_default_params(m);
    ep.max_num_seqs = B;
    ep.max_num_batched_tokens = B * GL_BENCH_BATCH_PROMPT > 512 ? B * GL_BENCH_BATCH_PROMPT : 512;
    ep.n_threads = n_threads;
    ep.device = device;
    ep.n_gpu_layers = n_gpu_layers;
    ep.kv.budget_bytes = (int64_t)256 << 20;
    ep.max_model_len = GL_BENCH_BATCH_PROMPT + (int32_t)n_gen + 1;
    if (device >= 0) {
        // A device pool must fit one storage binding (lavapipe: 128 MiB), so there it is sized
        // to the run: B sequences of max_model_len positions plus a partial 16-position page
        // each, every layer, K and V, f16 (the engine's default dtype), twice that as slack.
        const struct gl_model_config *cf = &m->cfg;
        const int64_t need = (int64_t)B * (ep.max_model_len + 16) * cf->n_layer * 2 *
                             cf->n_head_kv * cf->head_dim * 2;
        const int64_t lo = (int64_t)16 << 20;
        ep.kv.budget_bytes = 2 * need < lo                   ? lo
                             : 2 * need < ep.kv.budget_bytes ? 2 * need
                                                             : ep.kv.budget_bytes;
    }
    struct gl_engine *e = NULL;
    gl_status st = gl_engine_new(&e, m, NULL, &ep, err);
    if (st != GL_OK)
        return st;
    struct gl_rng rng;
    gl_rng_seed(&rng, 99);
    for (int b = 0; b < B; b++) {
        int32_t prompt[GL_BENCH_BATCH_PROMPT];
        bench_prompt(&rng, m, prompt);
        struct gl_request rq = {.prompt = prompt, .n_prompt = GL_BENCH_BATCH_PROMPT};
        rq.sp = gl_sample_default_params();
        rq.sp.temperature = 0.0f;
        rq.sp.ignore_eos = 1;
        rq.sp.max_tokens = (int32_t)n_gen;
        if ((st = gl_engine_submit(e, &rq, NULL, err)) != GL_OK) {
            gl_engine_free(e);
            return st;
        }
    }
    struct gl_engine_stats es;
    int64_t us;
    if ((st = decode_timed(e, B, &es, &us, n_tok, n_steps, err)) != GL_OK)
        return st;
    *ts = us > 0 ? (double)*n_tok / ((double)us / 1e6) : 0.0;
    return GL_OK;
}

// Sequence 0's tokens, for the replay (gl_bench_spec_decode).
struct greedy_sink {
    int32_t *tok;
    int64_t n, cap;
};

static void on_greedy(void *user, const struct gl_event *ev)
{
    struct greedy_sink *g = user;
    for (int32_t i = 0; g->tok && ev->index == 0 && i < ev->n_tokens && g->n < g->cap; i++)
        g->tok[g->n++] = ev->tokens[i];
}

// Submits B greedy sequences of n_gen tokens on prompt (sequence 0's tokens go to sink).
static gl_status spec_submit(struct gl_engine *e, int B, int64_t n_gen, const int32_t *prompt,
                             struct greedy_sink *sink, struct gl_err *err)
{
    for (int b = 0; b < B; b++) {
        struct gl_request rq = {.prompt = prompt, .n_prompt = GL_BENCH_BATCH_PROMPT};
        rq.sp = gl_sample_default_params();
        rq.sp.temperature = 0.0f;
        rq.sp.ignore_eos = 1;
        rq.sp.max_tokens = (int32_t)n_gen;
        rq.on_event = b == 0 && sink ? on_greedy : NULL;
        rq.user = b == 0 ? sink : NULL;
        gl_status st = gl_engine_submit(e, &rq, NULL, err);
        if (st != GL_OK)
            return st;
    }
    return GL_OK;
}

gl_status gl_bench_spec_decode(const struct gl_model *m, int B, int64_t n_gen, int n_threads,
                               const struct gl_spec_params *spec, int warm, int32_t *greedy,
                               struct gl_bench_spec_run *out, struct gl_err *err)
{
    memset(out, 0, sizeof *out);
    struct gl_engine_params ep = gl_engine_default_params(m);
    ep.max_num_seqs = B;
    // Room for every sequence's pending token and a full draft in one step.
    const int32_t k = spec && spec->method != GL_SPEC_NONE ? spec->k : 0;
    const int32_t need = B * (GL_BENCH_BATCH_PROMPT > 1 + k ? GL_BENCH_BATCH_PROMPT : 1 + k);
    ep.max_num_batched_tokens = need > 512 ? need : 512;
    ep.n_threads = n_threads;
    ep.kv.budget_bytes = (int64_t)256 << 20;
    ep.max_model_len = GL_BENCH_BATCH_PROMPT + (int32_t)n_gen + 1;
    if (spec)
        ep.spec = *spec;
    struct gl_engine *e = NULL;
    gl_status st = gl_engine_new(&e, m, NULL, &ep, err);
    if (st != GL_OK)
        return st;
    struct gl_rng rng;
    gl_rng_seed(&rng, 99);
    int32_t prompt[GL_BENCH_BATCH_PROMPT];
    bench_prompt(&rng, m, prompt);
    struct greedy_sink sink = {.tok = greedy, .cap = greedy ? n_gen : 0};
    // Warm-up: the same B sequences once, untimed, so the timed ones meet the engine as a
    // server's later requests do (the cost model's acceptance and step times learned).
    struct gl_engine_stats es0 = {0};
    if (warm) {
        int n_active = 1;
        st = spec_submit(e, B, n_gen, prompt, NULL, err);
        while (st == GL_OK && n_active > 0)
            st = gl_engine_step(e, &n_active, err);
        if (st != GL_OK) {
            gl_engine_free(e);
            return st;
        }
        gl_engine_stats(e, &es0);
    }
    if ((st = spec_submit(e, B, n_gen, prompt, &sink, err)) != GL_OK) {
        gl_engine_free(e);
        return st;
    }
    struct gl_engine_stats es;
    int64_t us;
    if ((st = decode_timed(e, B, &es, &us, &out->n_tok, &out->n_steps, err)) != GL_OK)
        return st;
    out->us_per_tok = out->n_tok > 0 ? (double)us / (double)out->n_tok : 0.0;
    out->drafts = es.spec_drafts - es0.spec_drafts;
    out->draft_tokens = es.spec_draft_tokens - es0.spec_draft_tokens;
    out->accepted = es.spec_accepted_tokens - es0.spec_accepted_tokens;
    out->off_steps = es.spec_len_steps[0] - es0.spec_len_steps[0];
    if (greedy && sink.n < n_gen)
        return gl_err_set(err, GL_E_INTERNAL, "bench: sequence 0 gave %lld of %lld tokens",
                          (long long)sink.n, (long long)n_gen);
    return GL_OK;
}

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_sorted(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Whether cell ic of the curve lets the cost model choose the draft length.
static int cell_model(const struct gl_bench_curve *c, int ic)
{
    return c->cost_model == 2 ? ic % 2 : c->cost_model;
}

gl_status gl_bench_spec_curve(const struct gl_model *m, const struct gl_bench_curve *c, FILE *out,
                              struct gl_err *err)
{
    // Cells (alpha, k, variant): one variant per k, or with cost_model 2 two (fixed k, then the
    // cost model choosing 0..k), interleaved in each round.
    const int nv = c->cost_model == 2 ? 2 : 1, nk = c->n_k, nc = c->n_alpha * nk * nv;
    const int R = c->rounds, warm = c->cost_model != 0;
    const int64_t n_gen = c->n_gen;
    int32_t *replay = gl_malloc((size_t)n_gen * sizeof *replay);
    double *ratio = gl_malloc((size_t)nc * (size_t)R * sizeof *ratio);
    double *off_us = gl_malloc((size_t)nc * (size_t)R * sizeof *off_us);
    struct gl_bench_spec_run *last = gl_calloc((size_t)nc, sizeof *last);
    // Per cell, over the rounds: on us/token, off us/token, on microseconds, on steps, on tokens.
    enum { T_ON, T_OFF, T_ON_US, T_ON_STEPS, T_ON_TOK, T_N };
    double *tot = gl_malloc(T_N * (size_t)nc * sizeof *tot);
    gl_status st = GL_E_NOMEM;
    if (!replay || !ratio || !off_us || !last || !tot) {
        gl_err_set(err, st, "bench: out of memory for the spec curve");
        goto done;
    }
    fprintf(out,
            "| batch | k | alpha | accepted / drafted | steps on / off | off us/token | on "
            "us/token | on / off (median of %d) | speed-up | speed-up (totals) | tokens / step "
            "| step cost c |\n",
            R);
    fprintf(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                 "---: |\n");
    for (int ib = 0; ib < c->n_batch; ib++) {
        const int B = (int)c->batch[ib];
        struct gl_bench_spec_run off, on;
        if ((st = gl_bench_spec_decode(m, B, n_gen, c->n_threads, NULL, warm, replay, &off, err)))
            goto done;
        struct gl_bench_spec_run prev = off;
        memset(tot, 0, T_N * (size_t)nc * sizeof *tot);
        for (int r = 0; r < R; r++)
            for (int ic = 0; ic < nc; ic++) {
                struct gl_spec_params sp = {.method = GL_SPEC_REPLAY,
                                            .k = (int32_t)c->k[ic / nv % nk],
                                            .replay = replay,
                                            .n_replay = (int32_t)n_gen,
                                            .alpha = (float)c->alpha[ic / nv / nk],
                                            .seed = 77 + (uint64_t)r,
                                            .fixed_k = !cell_model(c, ic)};
                if ((st = gl_bench_spec_decode(m, B, n_gen, c->n_threads, &sp, warm, NULL, &on,
                                               err)) ||
                    (st = gl_bench_spec_decode(m, B, n_gen, c->n_threads, NULL, warm, NULL, &off,
                                               err)))
                    goto done;
                const double base = 0.5 * (prev.us_per_tok + off.us_per_tok);
                ratio[(size_t)ic * (size_t)R + (size_t)r] = on.us_per_tok / base;
                off_us[(size_t)ic * (size_t)R + (size_t)r] = base;
                double *tc = tot + (size_t)T_N * (size_t)ic;
                tc[T_ON] += on.us_per_tok;
                tc[T_OFF] += base;
                tc[T_ON_US] += on.us_per_tok * (double)on.n_tok;
                tc[T_ON_STEPS] += (double)on.n_steps;
                tc[T_ON_TOK] += (double)on.n_tok;
                last[ic] = on;
                prev = off;
                fprintf(stderr, "glint bench: B %d round %d k %s%d alpha %.2f: %.0f / %.0f us\n", B,
                        r, sp.fixed_k ? "" : "<= ", sp.k, (double)sp.alpha, on.us_per_tok, base);
            }
        for (int ic = 0; ic < nc; ic++) {
            double *rt = ratio + (size_t)ic * (size_t)R;
            const double med = median_sorted(rt, R);
            const double omed = median_sorted(off_us + (size_t)ic * (size_t)R, R);
            const struct gl_bench_spec_run *o = &last[ic];
            const int k = (int)c->k[ic / nv % nk], model = cell_model(c, ic);
            const double alpha = c->alpha[ic / nv / nk];
            // The speed-up is tokens per step (per sequence) over the step cost c: a verify
            // step's mean time over an off step's (B tokens), both over all rounds.
            const double *tc = tot + (size_t)T_N * (size_t)ic;
            const double tps = tc[T_ON_TOK] / tc[T_ON_STEPS] / B;
            const double cost = tc[T_ON_US] / tc[T_ON_STEPS] / (tc[T_OFF] / R * B);
            fprintf(out,
                    "| %d | %s%d | %.2f | %lld / %lld | %lld / %lld | %.0f | %.0f | %.3f | %.2fx | "
                    "%.2fx | %.3f | %.3f |\n",
                    B, model ? "<= " : "", k, alpha, (long long)o->accepted,
                    (long long)o->draft_tokens, (long long)o->n_steps, (long long)off.n_steps, omed,
                    omed * med, med, 1.0 / med, tc[T_OFF] / tc[T_ON], tps, cost);
            fprintf(out,
                    "{\"test\": \"spec_curve\", \"batch\": %d, \"k\": %d, \"alpha\": %.2f, "
                    "\"adaptive\": %d, \"n_gen\": %lld, \"rounds\": %d, \"accepted\": %lld, "
                    "\"draft_tokens\": %lld, \"off_steps_model\": %lld, \"ratio_on_off\": %.4f, "
                    "\"ratio_min\": %.4f, \"ratio_max\": %.4f, \"ratio_total\": %.4f, "
                    "\"tokens_per_step\": %.4f, \"step_cost\": %.4f}\n",
                    B, k, alpha, model, (long long)n_gen, R, (long long)o->accepted,
                    (long long)o->draft_tokens, (long long)o->off_steps, med, rt[0], rt[R - 1],
                    tc[T_ON] / tc[T_OFF], tps, cost);
            fflush(out);
        }
    }
    st = GL_OK;
done:
    gl_free(replay);
    gl_free(ratio);
    gl_free(off_us);
    gl_free(last);
    gl_free(tot);
    return st;
}
