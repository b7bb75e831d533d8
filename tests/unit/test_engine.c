// SPDX-License-Identifier: MIT
// engine tests on the micro model of micro_model.h (vocab 512, E 64, H 4, Hkv 2, D 16, F 96, 4
// layers, window 8, 3 sliding : 1 global) and the real tokenizer for text: batching is exact
// (greedy outputs of many concurrent sequences with chunked prefill, window-crossing prompts and
// prefix-cache hits equal a plain single-sequence forward loop), seeded sampling does not
// depend on batch composition, pool exhaustion preempts and still completes everything
// exactly, cancel in every phase leaves the pool audit clean, overload / limit statuses, and
// stop strings across token boundaries, stop ids, min_tokens, max_tokens and ignore_eos; and
// jump-forward (a logits processor's forced tokens): the same seeded tokens and text in fewer
// steps alone, in a shared batch, split under a tiny step budget and through preemption; forced
// runs cut by max_tokens / max_model_len / stop ids / stop strings; never with logprobs.
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "micro_model.h"
#include "quant/quant.h"
#include "test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_OUT = 64 };

// ---- results collected from events ----

struct result {
    int32_t tok[MAX_OUT + 8];
    int32_t n_tok;
    char text[4096];
    size_t n_text;
    enum gl_finish finish;
    const char *stop_matched; // compared by content only while the request lives
    char stop_str[64];
    int32_t stop_token;
    int32_t n_events, n_final;
    float lp[MAX_OUT]; // logprob of each token when requested
    int32_t top0[4];   // first event's top ids
    float top_lp0[4];  // and their logprobs
    int32_t top_n;
};

static void on_event(void *user, const struct gl_event *ev)
{
    struct result *r = (struct result *)user + ev->index; // n > 1: one result per choice
    if (ev->logprobs && ev->n_tokens == 1 && r->n_tok < MAX_OUT) {
        r->lp[r->n_tok] = ev->logprobs[0];
        if (r->n_events == 0) {
            r->top_n = ev->top_n;
            for (int32_t i = 0; i < ev->top_n && i < 4; i++) {
                r->top0[i] = ev->top_ids[i];
                r->top_lp0[i] = ev->top_logprobs[i];
            }
        }
    }
    r->n_events++;
    for (int32_t i = 0; i < ev->n_tokens && r->n_tok < MAX_OUT + 8; i++)
        r->tok[r->n_tok++] = ev->tokens[i];
    GL_ASSERT(r->n_text + ev->text_len < sizeof r->text);
    memcpy(r->text + r->n_text, ev->text, ev->text_len);
    r->n_text += ev->text_len;
    r->text[r->n_text] = 0;
    if (ev->finish != GL_FINISH_NONE) {
        r->n_final++;
        r->finish = ev->finish;
        r->stop_token = ev->stop_token;
        if (ev->stop_matched)
            snprintf(r->stop_str, sizeof r->stop_str, "%s", ev->stop_matched);
    }
}

// Greedy reference: one sequence through the plain f32 cache, a token at a time.
static int32_t reference(const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int32_t *out)
{
    struct gl_model_ctx *c = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_err err;
    GL_ASSERT(gl_model_ctx_new(&c, g_model, n_prompt, 1, T_CTX, &err) == GL_OK);
    GL_ASSERT(gl_kv_cache_new(&kv, &g_model->cfg, T_CTX, &err) == GL_OK);
    float lg[T_V];
    GL_ASSERT(gl_model_forward(c, kv, prompt, n_prompt, 0, lg, 0, NULL, &err) == GL_OK);
    for (int32_t i = 0; i < n_gen; i++) {
        out[i] = gl_sample_argmax(lg, T_V);
        if (i + 1 < n_gen)
            GL_ASSERT(gl_model_forward(c, kv, &out[i], 1, n_prompt + i, lg, 0, NULL, &err) ==
                      GL_OK);
    }
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(c);
    return n_gen;
}

static struct gl_engine_params eparams(enum gl_kv_dtype dt, int64_t budget, int seqs, int tokens)
{
    struct gl_engine_params p = gl_engine_default_params(g_model);
    p.kv.dtype = dt;
    p.kv.budget_bytes = budget;
    p.kv.block_size = 16;
    p.max_num_seqs = seqs;
    p.max_num_batched_tokens = tokens;
    p.max_model_len = T_CTX;
    p.n_threads = 1;
    p.n_eos = 0; // the micro model's ids are not the release's
    return p;
}

static struct gl_sample_params greedy(int32_t max_tokens)
{
    struct gl_sample_params sp = gl_sample_default_params();
    sp.temperature = 0.0f;
    sp.max_tokens = max_tokens;
    return sp;
}

static void submit(struct gl_engine *e, const int32_t *prompt, int32_t n,
                   const struct gl_sample_params *sp, struct result *r, uint64_t *id)
{
    struct gl_request rq = {
        .prompt = prompt, .n_prompt = n, .sp = *sp, .on_event = on_event, .user = r};
    struct gl_err err = {0};
    gl_status st = gl_engine_submit(e, &rq, id, &err);
    GL_ASSERT_MSG(st == GL_OK, "submit: %s", err.msg);
}

static void run_to_end(struct gl_engine *e)
{
    struct gl_err err = {0};
    gl_status st = gl_engine_run(e, &err);
    GL_ASSERT_MSG(st == GL_OK, "run: %s", err.msg);
}

// Prompt i of the batch tests: lengths 1..~70, half of them sharing a 40-token prefix (prefix
// cache hits of two 16-token blocks), ids spread over the vocabulary.
static int32_t make_prompt(int i, int32_t *p)
{
    int32_t n = 1 + (i * 37) % 70;
    for (int32_t k = 0; k < n; k++) {
        int shared = (i % 2 == 0) && k < 40;
        p[k] = (int32_t)((shared ? 7 + k * 13 : i * 101 + k * 29 + 3) % T_V);
    }
    return n;
}

// ---- tests ----

// Many concurrent greedy sequences vs each alone. Returns how many matched.
static int batch_vs_alone(enum gl_kv_dtype dt, int n_req, int64_t budget, int seqs, int tokens,
                          struct gl_engine_stats *stats, int strict)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(dt, budget, seqs, tokens);
    struct gl_engine *e = NULL;
    GL_ASSERT_MSG(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK, "%s", err.msg);
    struct result *res = calloc((size_t)n_req, sizeof *res);
    int32_t prompts[64][80], n_prompt[64], max_tok[64];
    GL_ASSERT(res && n_req <= 64);
    for (int i = 0; i < n_req; i++) {
        n_prompt[i] = make_prompt(i, prompts[i]);
        max_tok[i] = 4 + (i * 7) % 17;
    }
    // Two waves: the second arrives while the first decodes, so steps mix decodes with prefill
    // chunks and the second wave hits blocks the first wave cached.
    for (int wave = 0; wave < 2; wave++) {
        for (int i = wave; i < n_req; i += 2) {
            struct gl_sample_params sp = greedy(max_tok[i]);
            submit(e, prompts[i], n_prompt[i], &sp, &res[i], NULL);
        }
        for (int k = 0; k < 3 && wave == 0; k++) {
            int n_active;
            GL_ASSERT(gl_engine_step(e, &n_active, &err) == GL_OK);
        }
    }
    run_to_end(e);
    int same = 0;
    for (int i = 0; i < n_req; i++) {
        int32_t ref[MAX_OUT];
        reference(prompts[i], n_prompt[i], max_tok[i], ref);
        int ok = res[i].n_tok == max_tok[i] && res[i].finish == GL_FINISH_LENGTH &&
                 res[i].n_final == 1 && memcmp(ref, res[i].tok, (size_t)max_tok[i] * 4) == 0;
        if (strict)
            CHECKF(ok, "request %d (prompt %d, %d tokens): differs from running alone", i,
                   n_prompt[i], max_tok[i]);
        same += ok;
    }
    gl_engine_stats(e, stats);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    CHECK(stats->n_running == 0 && stats->n_waiting == 0);
    gl_engine_free(e);
    free(res);
    return same;
}

TEST(test_batching_exact)
{
    struct gl_engine_stats st;
    int same = batch_vs_alone(GL_KV_F32, 32, 64 << 20, 16, 24, &st, 1);
    CHECK(same == 32);
    CHECKF(st.prefix_hit_tokens > 0, "prefix hits %lld", (long long)st.prefix_hit_tokens);
    CHECK(st.n_preempted_total == 0);
    printf("  f32 KV: %d/32 identical, %lld steps, %lld prefix-hit tokens\n", same,
           (long long)st.steps, (long long)st.prefix_hit_tokens);
    // The default KV type rounds K/V to f16: report agreement, not required to be exact.
    const enum gl_kv_dtype lossy[3] = {GL_KV_F16, GL_KV_BF16, GL_KV_FP8_E4M3};
    for (int i = 0; i < 3; i++) {
        same = batch_vs_alone(lossy[i], 32, 64 << 20, 16, 24, &st, 0);
        printf("  %s KV: %d/32 identical to the f32 single-sequence reference\n",
               gl_kv_dtype_name(lossy[i]), same);
    }
}

TEST(test_pool_exhaustion_preempts)
{
    // Pages for a handful of sequences only, 64 requests, 32 running at most.
    struct gl_engine_stats st;
    struct gl_kv_plan plan;
    struct gl_engine_params p = eparams(GL_KV_F32, 1 << 20, 32, 64);
    struct gl_err err;
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 96, &plan, &err) == GL_OK);
    int64_t budget = (int64_t)plan.page_bytes * plan.pages_per_seq * 6;
    int same = batch_vs_alone(GL_KV_F32, 64, budget, 32, 64, &st, 1);
    CHECK(same == 64);
    CHECKF(st.n_preempted_total > 0, "preemptions %d", st.n_preempted_total);
    printf("  64 sequences in %lld pages: %d preemptions, all identical\n",
           (long long)st.kv_pages_total, st.n_preempted_total);
}

// Seeded sampling: the same tokens alone, in a batch of 8, and as choice 0 of an n = 2 request.
TEST(test_seeded_independent_of_batch)
{
    struct gl_err err = {0};
    enum { N = 8 };
    struct result alone[N], together[N], pair[N][2], squeezed[N];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    memset(pair, 0, sizeof pair);
    memset(squeezed, 0, sizeof squeezed);
    int32_t prompts[N][80], n_prompt[N];
    struct gl_sample_params sp[N];
    for (int i = 0; i < N; i++) {
        n_prompt[i] = make_prompt(i + 3, prompts[i]);
        sp[i] = gl_sample_default_params();
        sp[i].temperature = 1.5f;
        sp[i].top_p = 0.95f;
        sp[i].top_k = 50;
        sp[i].max_tokens = 12;
        sp[i].seed = 1000 + (uint64_t)i;
        sp[i].has_seed = 1;
    }
    struct gl_engine_params p = eparams(GL_KV_F32, 32 << 20, 8, 32);
    // Mode 3 squeezes the pool so that sequences are preempted mid-sampling: their RNG state
    // must survive the recompute.
    struct gl_kv_plan plan;
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 80, &plan, &err) == GL_OK);
    for (int mode = 0; mode < 4; mode++) {
        struct gl_engine *e = NULL;
        struct gl_engine_params pm = p;
        if (mode == 3)
            pm.kv.budget_bytes = (int64_t)plan.page_bytes * plan.pages_per_seq * 2;
        REQUIRE(gl_engine_new(&e, g_model, g_tok, &pm, &err) == GL_OK);
        struct result *dst[4] = {alone, together, NULL, squeezed};
        for (int i = 0; i < N; i++) {
            struct gl_sample_params s = sp[i];
            s.n = mode == 2 ? 2 : 1;
            submit(e, prompts[i], n_prompt[i], &s, mode == 2 ? pair[i] : &dst[mode][i], NULL);
            if (mode == 0)
                run_to_end(e);
        }
        run_to_end(e);
        struct gl_engine_stats st;
        gl_engine_stats(e, &st);
        if (mode == 3)
            CHECKF(st.n_preempted_total > 0, "preemptions %d", st.n_preempted_total);
        CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
        gl_engine_free(e);
    }
    int differ_from_greedy = 0;
    for (int i = 0; i < N; i++) {
        CHECK(alone[i].n_tok == 12 && together[i].n_tok == 12 && pair[i][0].n_tok == 12);
        CHECKF(memcmp(alone[i].tok, together[i].tok, 12 * 4) == 0, "request %d", i);
        CHECKF(memcmp(alone[i].tok, pair[i][0].tok, 12 * 4) == 0, "request %d choice 0", i);
        CHECKF(squeezed[i].n_tok == 12 && memcmp(alone[i].tok, squeezed[i].tok, 12 * 4) == 0,
               "request %d after preemption", i);
        CHECK(memcmp(pair[i][0].tok, pair[i][1].tok, 12 * 4) != 0); // its own stream
        int32_t ref[12];
        reference(prompts[i], n_prompt[i], 12, ref);
        differ_from_greedy += memcmp(ref, alone[i].tok, sizeof ref) != 0;
    }
    CHECK(differ_from_greedy > N / 2); // the test really samples
}

// n = 3 greedy choices: identical outputs, and choices 1 and 2 reuse choice 0's prompt blocks.
TEST(test_n_choices_share_prefix)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 8, 64);
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    int32_t prompt[50];
    for (int i = 0; i < 50; i++)
        prompt[i] = (i * 17 + 11) % T_V;
    struct result r[3];
    memset(r, 0, sizeof r);
    struct gl_sample_params sp = greedy(6);
    sp.n = 3;
    submit(e, prompt, 50, &sp, r, NULL);
    run_to_end(e);
    struct gl_engine_stats st;
    gl_engine_stats(e, &st);
    int32_t ref[6];
    reference(prompt, 50, 6, ref);
    for (int i = 0; i < 3; i++)
        CHECKF(r[i].n_tok == 6 && memcmp(r[i].tok, ref, sizeof ref) == 0, "choice %d", i);
    CHECKF(st.prefix_hit_tokens == 2 * 48, "prefix hits %lld", (long long)st.prefix_hit_tokens);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    gl_engine_free(e);
}

// cache_salt: one after another, the same 50-token prompt under salts 0, A, A, B, 0 and a
// salted prompt after a media-free one: only equal salts share blocks (3 full blocks = 48 hit
// tokens), and the output is the same whatever the salt (keys only, never the computation).
TEST(test_cache_salt_isolates_prefixes)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 8, 64);
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    int32_t prompt[50];
    for (int i = 0; i < 50; i++)
        prompt[i] = (i * 23 + 5) % T_V;
    const uint64_t salts[5] = {0, 0xA11CEull, 0xA11CEull, 0xB0Bull, 0};
    const int64_t want_hits[5] = {0, 0, 48, 0, 48};
    int32_t ref[4];
    reference(prompt, 50, 4, ref);
    int64_t before = 0;
    for (int k = 0; k < 5; k++) {
        struct result r;
        memset(&r, 0, sizeof r);
        struct gl_request rq = {.prompt = prompt,
                                .n_prompt = 50,
                                .sp = greedy(4),
                                .cache_salt = salts[k],
                                .on_event = on_event,
                                .user = &r};
        REQUIRE(gl_engine_submit(e, &rq, NULL, &err) == GL_OK);
        run_to_end(e);
        struct gl_engine_stats st;
        gl_engine_stats(e, &st);
        CHECKF(st.prefix_hit_tokens - before == want_hits[k], "run %d (salt %llx): %lld hit tokens",
               k, (unsigned long long)salts[k], (long long)(st.prefix_hit_tokens - before));
        before = st.prefix_hit_tokens;
        CHECKF(r.n_tok == 4 && memcmp(r.tok, ref, sizeof ref) == 0, "run %d output", k);
    }
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    gl_engine_free(e);
}

struct submitter {
    struct gl_engine *e;
    struct result *res;
    int n;
    volatile int done;
};

static void *submit_thread(void *arg)
{
    struct submitter *sb = arg;
    for (int i = 0; i < sb->n; i++) {
        int32_t prompt[3] = {i + 1, 2 * i + 3, 40};
        struct gl_sample_params sp = gl_sample_default_params(); // unseeded, temperature 1
        sp.max_tokens = 5;
        struct gl_request rq = {
            .prompt = prompt, .n_prompt = 3, .sp = sp, .on_event = on_event, .user = &sb->res[i]};
        struct gl_err err;
        while (gl_engine_submit(sb->e, &rq, NULL, &err) == GL_E_AGAIN)
            usleep(100);
    }
    __atomic_store_n(&sb->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

// Submits from another thread while this one steps (the mutex path, checked under ASan); two
// engines with the same base seed give unseeded requests the same seeds, so equal outputs.
TEST(test_submit_from_thread_unseeded)
{
    enum { N = 12 };
    struct result res[2][N];
    memset(res, 0, sizeof res);
    for (int run = 0; run < 2; run++) {
        struct gl_err err = {0};
        struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 4, 32);
        p.max_waiting = 4;
        struct gl_engine *e = NULL;
        REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
        struct submitter sb = {e, res[run], N, 0};
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, submit_thread, &sb) == 0);
        int n_active = 1;
        while (!__atomic_load_n(&sb.done, __ATOMIC_ACQUIRE) || n_active > 0) {
            if (n_active == 0) // idle: sleep until the submitter queues more
                gl_engine_wait(e, 50);
            REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
        }
        pthread_join(th, NULL);
        CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
        gl_engine_free(e);
    }
    int differ = 0;
    for (int i = 0; i < N; i++) {
        CHECK(res[0][i].n_tok == 5 && res[0][i].n_final == 1);
        CHECK(memcmp(res[0][i].tok, res[1][i].tok, 5 * 4) == 0);
        differ += i > 0 && memcmp(res[0][i].tok, res[0][i - 1].tok, 5 * 4) != 0;
    }
    CHECK(differ > 0);
    // wait: times out with nothing queued, wakes at once for gl_engine_wake.
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 1 << 20, 1, 16);
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    int64_t t0 = gl_time_us();
    CHECK(gl_engine_wait(e, 30) == 0 && gl_time_us() - t0 >= 25000);
    gl_engine_wake(e);
    t0 = gl_time_us();
    CHECK(gl_engine_wait(e, 5000) == 0 && gl_time_us() - t0 < 2000000);
    gl_engine_free(e);
}

// Cancel while queued, while prefilling (chunked), while decoding: an abort event each, pages
// back in the pool at once, the audit clean.
TEST(test_cancel_every_phase)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 2, 16);
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    int32_t longp[200];
    for (int i = 0; i < 200; i++)
        longp[i] = (i * 31 + 5) % T_V;
    struct result r[4];
    memset(r, 0, sizeof r);
    uint64_t id[4];
    struct gl_sample_params sp = greedy(30);
    submit(e, longp, 10, &sp, &r[0], &id[0]);  // will be decoding
    submit(e, longp, 200, &sp, &r[1], &id[1]); // will be prefilling (16-token budget)
    submit(e, longp, 5, &sp, &r[2], &id[2]);   // queued (max_num_seqs 2)
    int n_active;
    for (int k = 0; k < 4; k++)
        REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    struct gl_engine_stats st;
    gl_engine_stats(e, &st);
    CHECK(st.n_running == 2 && st.n_waiting == 1);
    CHECK(r[0].n_tok > 0 && r[1].n_tok == 0 && r[2].n_tok == 0);
    int64_t used_before = gl_kv_pool_audit(gl_engine_kv_pool(e));
    CHECK(used_before > 0);
    CHECK(gl_engine_cancel(e, id[2]) == 1); // queued
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    CHECK(r[2].finish == GL_FINISH_ABORT && r[2].n_final == 1);
    CHECK(gl_engine_cancel(e, id[1]) == 1); // prefilling
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    CHECK(r[1].finish == GL_FINISH_ABORT && r[1].n_tok == 0);
    int64_t used_mid = gl_kv_pool_audit(gl_engine_kv_pool(e));
    CHECK(used_mid < used_before);
    CHECK(gl_engine_cancel(e, id[0]) == 1); // decoding
    REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
    CHECK(r[0].finish == GL_FINISH_ABORT && r[0].n_final == 1 && r[0].n_tok < 30);
    CHECK(n_active == 0);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    CHECK(gl_engine_cancel(e, id[0]) == 0); // finished ids are unknown
    CHECK(gl_engine_cancel(e, 12345) == 0);
    // Freeing the engine aborts what is still queued.
    submit(e, longp, 3, &sp, &r[3], &id[3]);
    gl_engine_free(e);
    CHECK(r[3].finish == GL_FINISH_ABORT && r[3].n_final == 1);
}

TEST(test_overloaded_and_limits)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 2, 16);
    p.max_waiting = 3;
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    int32_t pr[4] = {1, 2, 3, 4};
    struct result r[8];
    memset(r, 0, sizeof r);
    struct gl_sample_params sp = greedy(2);
    struct gl_request rq = {.prompt = pr, .n_prompt = 4, .sp = sp, .on_event = on_event};
    for (int i = 0; i < 3; i++) {
        rq.user = &r[i];
        CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_OK);
    }
    rq.user = &r[3];
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_AGAIN && strstr(err.msg, "overloaded"));
    // Bad requests: INVAL naming the problem.
    rq.sp.temperature = -1.0f;
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_INVAL && strstr(err.msg, "temperature"));
    rq.sp = sp;
    int32_t bad[2] = {1, T_V};
    rq.prompt = bad;
    rq.n_prompt = 2;
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_INVAL && strstr(err.msg, "prompt[1]"));
    static int32_t big[T_CTX];
    rq.prompt = big;
    rq.n_prompt = T_CTX;
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_INVAL && strstr(err.msg, "max_model_len"));
    run_to_end(e);
    for (int i = 0; i < 3; i++)
        CHECK(r[i].finish == GL_FINISH_LENGTH && r[i].n_tok == 2);
    CHECK(r[3].n_events == 0);
    gl_engine_free(e);
    // A pool smaller than the prompt: GL_E_LIMIT at submit.
    struct gl_kv_plan plan;
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 16, &plan, &err) == GL_OK);
    p.kv.budget_bytes = (int64_t)plan.page_bytes * (plan.n_groups + 1);
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    rq.n_prompt = 300;
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_LIMIT && strstr(err.msg, "pool"));
    gl_engine_free(e);
}

// Random submits (mixed n, lengths, stops, sampling), cancels and steps on a small pool with a
// tiny step budget: the pool audit holds after every step and every choice ends with exactly one
// final event.
TEST(test_random_ops)
{
    enum { N = 48 };
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 1 << 20, 6, 12);
    struct gl_kv_plan plan;
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 64, &plan, &err) == GL_OK);
    p.kv.budget_bytes = (int64_t)plan.page_bytes * plan.pages_per_seq * 3;
    p.max_waiting = 16;
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    static struct result res[N][2];
    memset(res, 0, sizeof res);
    uint64_t ids[N] = {0};
    int n_choices[N] = {0}, submitted = 0, rejected = 0;
    struct gl_rng rng;
    gl_rng_seed(&rng, 2024);
    int n_active = 0;
    while (submitted < N || n_active > 0) {
        uint64_t r = gl_rng_next(&rng) % 10;
        if (r < 4 && submitted < N) {
            int i = submitted;
            int32_t prompt[60];
            int32_t n = 1 + (int32_t)(gl_rng_next(&rng) % 60);
            for (int k = 0; k < n; k++)
                prompt[k] = (int32_t)(gl_rng_next(&rng) % 64); // few ids: prefix-cache hits
            struct gl_sample_params sp = gl_sample_default_params();
            sp.n = 1 + (int32_t)(gl_rng_next(&rng) % 2);
            sp.max_tokens = 1 + (int32_t)(gl_rng_next(&rng) % 20);
            sp.temperature = (gl_rng_next(&rng) % 2) ? 0.0f : 1.0f;
            sp.stop[0] = "e";
            sp.n_stop = (int32_t)(gl_rng_next(&rng) % 2);
            struct gl_request rq = {
                .prompt = prompt, .n_prompt = n, .sp = sp, .on_event = on_event, .user = res[i]};
            gl_status st = gl_engine_submit(e, &rq, &ids[i], &err);
            CHECK(st == GL_OK || st == GL_E_AGAIN);
            if (st == GL_OK)
                n_choices[i] = sp.n;
            rejected += st != GL_OK;
            submitted++;
        } else if (r < 5 && submitted > 0) {
            (void)gl_engine_cancel(e, ids[gl_rng_next(&rng) % (uint64_t)submitted]);
        } else {
            REQUIRE(gl_engine_step(e, &n_active, &err) == GL_OK);
            (void)gl_kv_pool_audit(gl_engine_kv_pool(e)); // asserts on any inconsistency
        }
    }
    struct gl_engine_stats st;
    gl_engine_stats(e, &st);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    int aborted = 0;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 2; c++) {
            CHECKF(res[i][c].n_final == (c < n_choices[i]), "request %d choice %d: %d finals", i, c,
                   res[i][c].n_final);
            aborted += res[i][c].finish == GL_FINISH_ABORT;
        }
    printf("  %d submitted (%d overloaded), %d aborted, %d preemptions, %lld steps\n", N, rejected,
           aborted, st.n_preempted_total, (long long)st.steps);
    CHECK(aborted > 0);
    gl_engine_free(e);
}

// One request with parameters sp; returns its result.
static struct result run_one(const int32_t *prompt, int32_t n, const struct gl_sample_params *sp,
                             const int32_t *eos, int n_eos)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 8 << 20, 4, 64);
    for (int i = 0; i < n_eos; i++)
        p.eos_ids[i] = eos[i];
    p.n_eos = n_eos;
    struct gl_engine *e = NULL;
    GL_ASSERT(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    struct result r;
    memset(&r, 0, sizeof r);
    submit(e, prompt, n, sp, &r, NULL);
    run_to_end(e);
    GL_ASSERT(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    gl_engine_free(e);
    return r;
}

// Text after each generated token, as the engine's streaming detokenizer would release it.
static void ref_text(const int32_t *tok, int n, char *text, size_t *after)
{
    struct gl_detok dt = {0};
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        len += (size_t)gl_detok_feed(&dt, g_tok, tok[i], 1, text + len, 256);
        after[i] = len;
    }
    len += (size_t)gl_detok_flush(&dt, text + len, 16);
    text[len] = 0;
}

TEST(test_stop_helpers)
{
    struct gl_sample_params sp = gl_sample_default_params();
    sp.stop[0] = "bcd";
    sp.stop[1] = "cx";
    sp.stop[2] = "abcdef";
    sp.n_stop = 2;
    CHECK(gl_stop_holdback(&sp, "zabc", 4) == 2); // "bc" may become "bcd"
    CHECK(gl_stop_holdback(&sp, "zab", 3) == 1);
    CHECK(gl_stop_holdback(&sp, "zbd", 3) == 0);
    CHECK(gl_stop_holdback(&sp, "", 0) == 0);
    size_t at = 99;
    CHECK(gl_stop_match(&sp, "aacxbcd", 7, &at) == 1 && at == 2); // earliest wins
    CHECK(gl_stop_match(&sp, "abcabc", 6, &at) == -1);
    sp.n_stop = 3;
    CHECK(gl_stop_holdback(&sp, "xabcde", 6) == 5);
    CHECK(gl_stop_match(&sp, "xabcdefg", 8, &at) == 2 && at == 1); // before "bcd" at 2
    sp.stop[1] = "bc";
    CHECK(gl_stop_match(&sp, "xbcdy", 5, &at) == 0 && at == 1); // same offset: the longer
}

TEST(test_stops)
{
    const int32_t prompt[6] = {300, 17, 99, 250, 3, 42};
    enum { G = 40 };
    int32_t ref[G];
    reference(prompt, 6, G, ref);
    char text[G * 300];
    size_t after[G];
    ref_text(ref, G, text, after);
    struct gl_sample_params sp = greedy(G);
    struct result base = run_one(prompt, 6, &sp, NULL, 0);
    CHECK(base.n_tok == G && memcmp(base.tok, ref, sizeof ref) == 0);
    CHECK(base.n_text == strlen(text) && strcmp(base.text, text) == 0);

    // A stop string straddling tokens k and k+1 (last byte of one, first of the next).
    int k = -1;
    for (int i = 2; i + 1 < G && k < 0; i++)
        if (after[i] > after[i - 1] && after[i + 1] > after[i] && text[after[i] - 1] &&
            text[after[i]])
            k = i;
    REQUIRE(k >= 0);
    char stop[3] = {text[after[k] - 1], text[after[k]], 0};
    const char *first = strstr(text, stop);
    size_t at = (size_t)(first - text);
    int j = 0; // the token whose text completes the first occurrence
    while (after[j] < at + 2)
        j++;
    sp.stop[0] = stop;
    sp.n_stop = 1;
    struct result r = run_one(prompt, 6, &sp, NULL, 0);
    CHECKF(r.finish == GL_FINISH_STOP && r.n_tok == j + 1, "finish %d after %d tokens, want %d",
           r.finish, r.n_tok, j + 1);
    CHECK(r.n_text == at && memcmp(r.text, text, at) == 0 && strcmp(r.stop_str, stop) == 0);
    CHECK(r.stop_token == -1);
    sp.include_stop_str_in_output = 1;
    r = run_one(prompt, 6, &sp, NULL, 0);
    CHECK(r.n_text == at + 2 && memcmp(r.text, text, at + 2) == 0);
    sp.include_stop_str_in_output = 0;
    sp.n_stop = 0;

    // stop_token_ids: stops at the first occurrence, the id reported, its text not added.
    int32_t sid = ref[5];
    int first_i = 0;
    while (ref[first_i] != sid)
        first_i++;
    sp.stop_token_ids = &sid;
    sp.n_stop_ids = 1;
    r = run_one(prompt, 6, &sp, NULL, 0);
    CHECK(r.finish == GL_FINISH_STOP && r.stop_token == sid && r.n_tok == first_i + 1);
    CHECK(r.tok[first_i] == sid);
    // min_tokens masks the stop id until min_tokens outputs exist.
    sp.min_tokens = first_i + 3;
    r = run_one(prompt, 6, &sp, NULL, 0);
    CHECK(r.n_tok > first_i + 3);
    for (int i = 0; i < first_i + 3 && i < r.n_tok; i++)
        CHECK(r.tok[i] != sid);
    CHECK(r.finish == GL_FINISH_LENGTH || r.tok[r.n_tok - 1] == sid);
    sp.min_tokens = 0;
    sp.n_stop_ids = 0;

    // Engine EOS ids stop unless ignore_eos; max_tokens gives "length".
    r = run_one(prompt, 6, &sp, &sid, 1);
    CHECK(r.finish == GL_FINISH_STOP && r.stop_token == sid && r.n_tok == first_i + 1);
    sp.ignore_eos = 1;
    r = run_one(prompt, 6, &sp, &sid, 1);
    CHECK(r.finish == GL_FINISH_LENGTH && r.n_tok == G && memcmp(r.tok, ref, sizeof ref) == 0);
    sp.ignore_eos = 0;
    sp.max_tokens = 3;
    r = run_one(prompt, 6, &sp, NULL, 0);
    CHECK(r.finish == GL_FINISH_LENGTH && r.n_tok == 3 && r.n_final == 1 && r.n_events == 3);
}

// A processor that bans every token < 256 and aborts the sequence after 3 accepted tokens.
struct proc_state {
    int n_accept, n_free, n_mask;
};
static void p_mask(void *user, float *logits, int32_t n_vocab)
{
    ((struct proc_state *)user)->n_mask++;
    for (int32_t i = 0; i < 256 && i < n_vocab; i++)
        logits[i] = -INFINITY;
}
static int p_accept(void *user, int32_t token)
{
    struct proc_state *ps = user;
    GL_ASSERT(token >= 256);
    return ++ps->n_accept >= 3;
}
static void p_free(void *user)
{
    ((struct proc_state *)user)->n_free++;
}

TEST(test_logprobs_and_processor)
{
    const int32_t prompt[3] = {5, 6, 7};
    struct gl_sample_params sp = greedy(4);
    sp.logprobs = 3;
    sp.presence_penalty = 2.0f; // modifies the sampled distribution but not the raw logprobs
    struct result r = run_one(prompt, 3, &sp, NULL, 0);
    REQUIRE(r.n_tok == 4 && r.top_n == 3);
    // Raw logprobs: log_softmax of the model's first-step logits.
    struct gl_model_ctx *c = NULL;
    struct gl_kv_cache *kv = NULL;
    struct gl_err err;
    REQUIRE(gl_model_ctx_new(&c, g_model, 3, 1, T_CTX, &err) == GL_OK);
    REQUIRE(gl_kv_cache_new(&kv, &g_model->cfg, T_CTX, &err) == GL_OK);
    float lg[T_V], lp;
    int32_t top[3];
    float top_lp[3];
    REQUIRE(gl_model_forward(c, kv, prompt, 3, 0, lg, 0, NULL, &err) == GL_OK);
    gl_kv_cache_delete(kv);
    gl_model_ctx_delete(c);
    gl_sample_logprobs(lg, T_V, r.tok[0], 3, &lp, top, top_lp);
    CHECK(r.tok[0] == top[0] && fabsf(r.lp[0] - lp) < 1e-5f && lp < 0.0f);
    for (int i = 0; i < 3; i++)
        CHECK(r.top0[i] == top[i] && fabsf(r.top_lp0[i] - top_lp[i]) < 1e-5f);

    // Logits processor: mask honoured, accept's refusal aborts, free called once.
    struct gl_engine_params p = eparams(GL_KV_F32, 8 << 20, 4, 64);
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    struct proc_state ps = {0};
    struct gl_logits_processor proc = {&ps, p_mask, p_accept, p_free, NULL, NULL, NULL};
    struct result pr;
    memset(&pr, 0, sizeof pr);
    struct gl_sample_params g = greedy(10);
    struct gl_request rq = {.prompt = prompt,
                            .n_prompt = 3,
                            .sp = g,
                            .on_event = on_event,
                            .user = &pr,
                            .procs = &proc};
    REQUIRE(gl_engine_submit(e, &rq, NULL, &err) == GL_OK);
    run_to_end(e);
    CHECK(pr.finish == GL_FINISH_ERROR && pr.n_tok == 3 && ps.n_mask == 3 && ps.n_free == 1);
    for (int i = 0; i < pr.n_tok; i++)
        CHECK(pr.tok[i] >= 256);
    // Rejected at submit: the processor is still freed.
    rq.sp.temperature = -1.0f;
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_INVAL && ps.n_free == 2);
    gl_engine_free(e);
}

// A pool too small for one long sequence: nothing ends early with a "length" that is really the
// pool. Submit refuses what cannot fit (GL_E_LIMIT: max_tokens too large, or unset and so up to
// max_model_len); what fits runs to its real max_tokens, alone or preempted by others. A long
// prompt whose first chunk alone would overflow the pool (sliding groups hold window - 1 +
// chunk positions until committed) is admitted in smaller chunks, not failed.
TEST(test_pool_too_small_is_refused)
{
    struct gl_err err = {0};
    struct gl_engine_params p = eparams(GL_KV_F32, 1 << 20, 2, 64);
    struct gl_kv_plan plan;
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 40, &plan, &err) == GL_OK);
    p.kv.budget_bytes = (int64_t)plan.page_bytes * plan.pages_per_seq;
    struct gl_engine *e = NULL;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    const int32_t prompt[4] = {9, 8, 7, 6};
    struct result r[3];
    memset(r, 0, sizeof r);
    struct gl_sample_params sp = greedy(200);
    struct gl_request rq = {.prompt = prompt, .n_prompt = 4, .sp = sp, .on_event = on_event};
    rq.user = &r[0];
    CHECKF(gl_engine_submit(e, &rq, NULL, &err) == GL_E_LIMIT && strstr(err.msg, "pool") &&
               strstr(err.msg, "max_tokens 200"),
           "%s", err.msg);
    rq.sp.max_tokens = -1; // unset: up to max_model_len, which the pool cannot hold either
    CHECK(gl_engine_submit(e, &rq, NULL, &err) == GL_E_LIMIT && strstr(err.msg, "unset"));
    // Two that each fit alone but not together: one is preempted; both reach max_tokens.
    sp = greedy(30);
    submit(e, prompt, 4, &sp, &r[0], NULL);
    submit(e, prompt + 1, 3, &sp, &r[1], NULL);
    run_to_end(e);
    CHECKF(r[0].finish == GL_FINISH_LENGTH && r[0].n_tok == 30, "%d tokens", r[0].n_tok);
    CHECKF(r[1].finish == GL_FINISH_LENGTH && r[1].n_tok == 30, "%d tokens", r[1].n_tok);
    struct gl_engine_stats st;
    gl_engine_stats(e, &st);
    CHECK(st.n_preempted_total >= 1 && st.kv_pages_used == 0);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    gl_engine_free(e);
    // A 200-token prompt, a 256-token step budget, a pool that holds the sequence but not a
    // 200-token chunk's sliding blocks: split at admission, same tokens as the reference.
    p = eparams(GL_KV_F32, 1 << 20, 2, 256);
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 208, &plan, &err) == GL_OK);
    p.kv.budget_bytes = (int64_t)plan.page_bytes * plan.pages_per_seq;
    REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
    static int32_t longp[200];
    for (int k = 0; k < 200; k++)
        longp[k] = (k * 37 + 11) % T_V;
    sp = greedy(8);
    memset(&r[2], 0, sizeof r[2]);
    submit(e, longp, 200, &sp, &r[2], NULL);
    run_to_end(e);
    int32_t ref[8];
    reference(longp, 200, 8, ref);
    CHECKF(r[2].finish == GL_FINISH_LENGTH && r[2].n_tok == 8 &&
               memcmp(r[2].tok, ref, sizeof ref) == 0,
           "finish %d, %d tokens", (int)r[2].finish, r[2].n_tok);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    gl_engine_free(e);
}

// ---- jump-forward ----

// A logits processor like a grammar with literal runs: at scheduled generated positions exactly
// one token is allowed, elsewhere anything but `ban`. With jump-forward on, forced() reports the
// scheduled runs (advancing pos over them); accept checks that the schedule was obeyed.
enum { JF_POS = 48 };
struct jf_state {
    int32_t only[JF_POS]; // the one allowed token at generated position i, or -1: free
    int32_t ban;          // banned at free positions (-1: none)
    int32_t pos;          // generated tokens so far (accepted + forced)
    int lie;              // forced() returns cap + 1 (a broken processor)
    int n_forced_calls, n_forced_tokens, n_free, n_wrong, n_mask;
};

static int32_t jf_only(const struct jf_state *s)
{
    return s->pos < JF_POS ? s->only[s->pos] : -1;
}

static void jf_mask(void *user, float *logits, int32_t n_vocab)
{
    struct jf_state *s = user;
    int32_t t = jf_only(s);
    s->n_mask++;
    for (int32_t i = 0; t >= 0 && i < n_vocab; i++)
        if (i != t)
            logits[i] = -INFINITY;
    if (t < 0 && s->ban >= 0)
        logits[s->ban] = -INFINITY;
}

static int jf_accept(void *user, int32_t token)
{
    struct jf_state *s = user;
    int32_t t = jf_only(s);
    s->n_wrong += (t >= 0 && token != t) || (t < 0 && token == s->ban);
    s->pos++;
    return 0;
}

static int32_t jf_forced(void *user, int32_t *out, int32_t cap)
{
    struct jf_state *s = user;
    s->n_forced_calls++;
    GL_ASSERT(cap > 0 && cap <= GL_ENGINE_MAX_FORCED);
    if (s->lie)
        return cap + 1;
    int32_t n = 0;
    while (n < cap && jf_only(s) >= 0) {
        out[n++] = jf_only(s);
        s->pos++;
    }
    s->n_forced_tokens += n;
    return n;
}

static void jf_free(void *user)
{
    ((struct jf_state *)user)->n_free++;
}

// The schedule of the tests: generated positions 2..5, 9 and 12..15 (each + shift) allow one
// token each.
static const int g_jf_pos[9] = {2, 3, 4, 5, 9, 12, 13, 14, 15};

static void jf_schedule(struct jf_state *s, int shift, int32_t base)
{
    memset(s, 0, sizeof *s);
    s->ban = -1;
    for (int i = 0; i < JF_POS; i++)
        s->only[i] = -1;
    for (int k = 0; k < 9; k++)
        s->only[g_jf_pos[k] + shift] = (base + 37 * k) % T_V;
}

struct jf_req {
    int32_t prompt[80];
    int32_t n_prompt;
    struct gl_sample_params sp;
    int plain;          // no processor
    struct jf_state ps; // schedule; each run starts from a copy
    struct jf_state st; // the processor state of the last run
    struct result res;  // and its events
};

// Runs q[0..n) concurrently on a fresh engine with params p, jump-forward on or off; the pool
// audit must be clean afterwards and every processor freed once.
static void jf_run(struct jf_req *q, int n, const struct gl_engine_params *p, int jump,
                   struct gl_engine_stats *st)
{
    struct gl_err err = {0};
    struct gl_engine *e = NULL;
    GL_ASSERT_MSG(gl_engine_new(&e, g_model, g_tok, p, &err) == GL_OK, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        q[i].st = q[i].ps;
        memset(&q[i].res, 0, sizeof q[i].res);
        struct gl_logits_processor proc = {
            &q[i].st, jf_mask, jf_accept, jf_free, jump ? jf_forced : NULL, NULL, NULL};
        struct gl_request rq = {.prompt = q[i].prompt,
                                .n_prompt = q[i].n_prompt,
                                .sp = q[i].sp,
                                .on_event = on_event,
                                .user = &q[i].res,
                                .procs = q[i].plain ? NULL : &proc};
        gl_status s = gl_engine_submit(e, &rq, NULL, &err);
        GL_ASSERT_MSG(s == GL_OK, "submit: %s", err.msg);
    }
    run_to_end(e);
    gl_engine_stats(e, st);
    CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
    CHECK(st->n_running == 0 && st->n_waiting == 0 && st->kv_pages_used == 0);
    gl_engine_free(e);
    for (int i = 0; i < n; i++) {
        CHECKF(q[i].plain || (q[i].st.n_free == 1 && q[i].st.n_wrong == 0),
               "request %d: freed %d, %d tokens off the schedule", i, q[i].st.n_free,
               q[i].st.n_wrong);
        CHECK(q[i].res.n_final == 1);
        if (!jump)
            CHECK(q[i].st.n_forced_calls == 0);
    }
}

static int same_output(const struct result *a, const struct result *b)
{
    return a->n_tok == b->n_tok && memcmp(a->tok, b->tok, (size_t)a->n_tok * 4) == 0 &&
           a->n_text == b->n_text && memcmp(a->text, b->text, a->n_text) == 0 &&
           a->finish == b->finish && a->stop_token == b->stop_token &&
           strcmp(a->stop_str, b->stop_str) == 0;
}

// Seeded temperature-1 sampling under the schedule: with forced() the tokens and text equal a
// token-by-token run (no draw is made where one token is allowed) and take fewer steps --
// alone, in a batch of 9 (some without a processor), with a 4-token step budget that splits the
// forced chunks, and in a pool so small that sequences with forced tokens are recomputed.
TEST(test_jump_forward_same_tokens_fewer_steps)
{
    enum { N = 9 };
    static struct jf_req q[N];
    static struct result alone[N]; // each request alone, token by token
    memset(q, 0, sizeof q);
    for (int i = 0; i < N; i++) {
        q[i].n_prompt = make_prompt(i + 5, q[i].prompt);
        q[i].sp = gl_sample_default_params();
        q[i].sp.temperature = 1.0f;
        q[i].sp.seed = 4242 + (uint64_t)i;
        q[i].sp.has_seed = 1;
        q[i].plain = i % 4 == 3;
        // The plain ones end early so that the batch's step count shows the others' savings.
        q[i].sp.max_tokens = q[i].plain ? 8 : 18 + i % 4;
        jf_schedule(&q[i].ps, i % 3, 100 + 7 * i);
    }
    struct gl_engine_stats st0, st1;
    struct gl_engine_params p = eparams(GL_KV_F32, 32 << 20, 4, 64);
    for (int i = 0; i < N; i++) {
        jf_run(&q[i], 1, &p, 0, &st0);
        alone[i] = q[i].res;
        CHECK(alone[i].finish == GL_FINISH_LENGTH && alone[i].n_tok == q[i].sp.max_tokens);
        for (int k = 0; k < 9 && !q[i].plain; k++)
            CHECK(alone[i].tok[g_jf_pos[k] + i % 3] == q[i].ps.only[g_jf_pos[k] + i % 3]);
    }
    // The free positions really sample: another seed gives other tokens.
    q[0].sp.seed++;
    jf_run(&q[0], 1, &p, 0, &st0);
    CHECK(!same_output(&q[0].res, &alone[0]));
    q[0].sp.seed--;

    struct gl_kv_plan plan;
    struct gl_err err;
    REQUIRE(gl_kv_plan_compute(&g_model->cfg, &p.kv, 96, &plan, &err) == GL_OK);
    struct {
        const char *name;
        int n, seqs, tokens;
        int64_t kv_bytes;
    } modes[5] = {
        {"alone", 1, 4, 64, 32 << 20},
        {"batch of 9", N, 16, 64, 32 << 20},
        {"alone, 4-token steps", 1, 1, 4, 32 << 20},
        {"batch of 9, 4-token steps", N, 4, 4, 32 << 20},
        {"batch of 9, pool of 2 sequences", N, 9, 32,
         (int64_t)plan.page_bytes * plan.pages_per_seq * 2},
    };
    for (int m = 0; m < 5; m++) {
        struct gl_engine_params pm =
            eparams(GL_KV_F32, modes[m].kv_bytes, modes[m].seqs, modes[m].tokens);
        jf_run(q, modes[m].n, &pm, 0, &st0);
        for (int i = 0; i < modes[m].n; i++)
            CHECKF(same_output(&q[i].res, &alone[i]), "%s, no jump-forward: request %d differs",
                   modes[m].name, i);
        jf_run(q, modes[m].n, &pm, 1, &st1);
        int forced = 0;
        for (int i = 0; i < modes[m].n; i++) {
            CHECKF(same_output(&q[i].res, &alone[i]), "%s, jump-forward: request %d differs",
                   modes[m].name, i);
            forced += q[i].st.n_forced_tokens;
            if (!q[i].plain)
                CHECKF(q[i].st.n_forced_tokens > 0 && q[i].res.n_events < q[i].res.n_tok,
                       "%s: request %d: %d forced, %d events for %d tokens", modes[m].name, i,
                       q[i].st.n_forced_tokens, q[i].res.n_events, q[i].res.n_tok);
        }
        CHECK(st1.generated_tokens == st0.generated_tokens);
        if (m < 4)
            CHECKF(st1.steps < st0.steps, "%s: %lld steps with jump-forward, %lld without",
                   modes[m].name, (long long)st1.steps, (long long)st0.steps);
        if (m == 4)
            CHECKF(st0.n_preempted_total > 0 && st1.n_preempted_total > 0, "preemptions %d / %d",
                   st0.n_preempted_total, st1.n_preempted_total);
        printf("  %s: %lld steps -> %lld with jump-forward (%d forced tokens, %d preemptions)\n",
               modes[m].name, (long long)st0.steps, (long long)st1.steps, forced,
               st1.n_preempted_total);
    }
}

// A forced run cut by max_tokens and by max_model_len: "length" with exactly that many tokens,
// forced() never asked for more than the room left.
TEST(test_jump_forward_length)
{
    static struct jf_req q;
    memset(&q, 0, sizeof q);
    q.n_prompt = make_prompt(11, q.prompt);
    q.sp = gl_sample_default_params();
    q.sp.seed = 99;
    q.sp.has_seed = 1;
    jf_schedule(&q.ps, 0, 300);
    struct gl_engine_stats st;
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 4, 64);
    const int32_t max_tok[4] = {3, 4, 6, 10};
    for (int k = 0; k < 4; k++) {
        q.sp.max_tokens = max_tok[k];
        jf_run(&q, 1, &p, 0, &st);
        struct result ref = q.res;
        jf_run(&q, 1, &p, 1, &st);
        CHECKF(q.res.finish == GL_FINISH_LENGTH && q.res.n_tok == max_tok[k],
               "max_tokens %d: finish %d after %d tokens", max_tok[k], q.res.finish, q.res.n_tok);
        CHECK(same_output(&q.res, &ref));
        // Token 1 is sampled, then positions 2..5 are forced as far as max_tokens allows.
        int32_t want = max_tok[k] < 6 ? max_tok[k] - 2 : 4;
        CHECKF(q.st.n_forced_tokens == want + (max_tok[k] == 10 ? 1 : 0),
               "max_tokens %d: %d forced", max_tok[k], q.st.n_forced_tokens);
        CHECK(q.res.n_events == (max_tok[k] == 10 ? 5 : 2));
        CHECK(st.generated_tokens == max_tok[k]);
    }
    // max_model_len 4 positions past the prompt: the forced run stops there too.
    p.max_model_len = q.n_prompt + 4;
    q.sp.max_tokens = -1;
    jf_run(&q, 1, &p, 1, &st);
    CHECK(q.res.finish == GL_FINISH_LENGTH && q.res.n_tok == 4 && q.st.n_forced_tokens == 2);
    // A processor that claims more than cap (at its first call, after token 0): the sequence
    // ends with an error (not a reply), nothing leaks.
    p.max_model_len = T_CTX;
    q.sp.max_tokens = 10;
    q.ps.lie = 1;
    jf_run(&q, 1, &p, 1, &st);
    CHECK(q.res.finish == GL_FINISH_ERROR && q.res.n_tok == 1 && q.st.n_forced_calls == 1);
    q.ps.lie = 0;
}

// The id of the token whose text is exactly c.
static int32_t char_token(char c)
{
    for (int32_t id = 0; id < T_V; id++) {
        size_t len = 0;
        const char *b = gl_tokenizer_token_bytes(g_tok, id, &len);
        if (b && len == 1 && b[0] == c)
            return id;
    }
    GL_ASSERT_MSG(0, "no token for '%c'", c);
    return -1;
}

// Forced tokens that contain a stop id or complete a stop string: "stop" at that token, the
// rest of the run dropped, the text cut as a token-by-token run cuts it.
TEST(test_jump_forward_stops)
{
    static struct jf_req q;
    memset(&q, 0, sizeof q);
    q.n_prompt = make_prompt(12, q.prompt);
    q.sp = gl_sample_default_params();
    q.sp.seed = 7;
    q.sp.has_seed = 1;
    q.sp.max_tokens = 20;
    const int32_t X = 333; // the stop id: forced at positions 2 and 9, banned elsewhere
    jf_schedule(&q.ps, 0, 200);
    q.ps.ban = X;
    q.ps.only[2] = X;
    q.ps.only[3] = char_token('Q');
    q.ps.only[4] = char_token('J');
    q.ps.only[5] = char_token('{');
    q.ps.only[9] = X;
    struct gl_engine_stats st;
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 4, 64);

    // Without stops: the reference tokens and text (X adds no text only when it stops).
    jf_run(&q, 1, &p, 1, &st);
    REQUIRE(q.res.n_tok == 20 && q.res.tok[2] == X && q.res.tok[9] == X);
    int32_t tok[20];
    memcpy(tok, q.res.tok, sizeof tok);

    // Stop id X: ends at position 2, positions 3..5 of the same forced run dropped.
    q.sp.stop_token_ids = &X;
    q.sp.n_stop_ids = 1;
    for (int jump = 0; jump < 2; jump++) {
        jf_run(&q, 1, &p, jump, &st);
        char text[4096];
        size_t after[20];
        ref_text(tok, 2, text, after);
        CHECKF(q.res.finish == GL_FINISH_STOP && q.res.stop_token == X && q.res.n_tok == 3,
               "jump %d: finish %d, stop token %d after %d tokens", jump, q.res.finish,
               q.res.stop_token, q.res.n_tok);
        CHECK(memcmp(q.res.tok, tok, 3 * 4) == 0);
        CHECKF(strcmp(q.res.text, text) == 0, "jump %d: text '%s', want '%s'", jump, q.res.text,
               text);
        CHECK(st.generated_tokens == 3);
        if (jump)
            CHECK(q.st.n_forced_tokens == 4 && q.res.n_events == 2); // forced 2..5, cut at 2
    }
    // min_tokens 3: X at position 2 (the 3rd output) does not stop, X at 9 does (a forced token
    // is not masked by min_tokens, so only with jump-forward: without it the only allowed token
    // would be banned).
    q.sp.min_tokens = 3;
    jf_run(&q, 1, &p, 1, &st);
    CHECKF(q.res.finish == GL_FINISH_STOP && q.res.stop_token == X && q.res.n_tok == 10,
           "min_tokens: finish %d after %d tokens", q.res.finish, q.res.n_tok);
    CHECK(memcmp(q.res.tok, tok, 10 * 4) == 0);
    q.sp.min_tokens = 0;
    q.sp.n_stop_ids = 0;

    // Stop string "QJ": completed by forced position 4 inside the forced run 2..5 (5 dropped).
    char text[4096];
    size_t after[20];
    ref_text(tok, 20, text, after);
    const char *qj = strstr(text, "QJ");
    REQUIRE(qj && (size_t)(qj - text) + 2 == after[4]); // its first occurrence ends at token 4
    size_t at = (size_t)(qj - text);
    q.sp.stop[0] = "QJ";
    q.sp.n_stop = 1;
    struct result ref;
    for (int incl = 0; incl < 2; incl++) {
        q.sp.include_stop_str_in_output = incl;
        for (int jump = 0; jump < 2; jump++) {
            jf_run(&q, 1, &p, jump, &st);
            size_t want = at + (incl ? 2 : 0);
            CHECKF(q.res.finish == GL_FINISH_STOP && q.res.n_tok == 5 && q.res.stop_token == -1 &&
                       strcmp(q.res.stop_str, "QJ") == 0,
                   "jump %d incl %d: finish %d after %d tokens", jump, incl, q.res.finish,
                   q.res.n_tok);
            CHECKF(q.res.n_text == want && memcmp(q.res.text, text, want) == 0,
                   "jump %d incl %d: text '%s'", jump, incl, q.res.text);
            if (jump)
                CHECK(same_output(&q.res, &ref) && q.res.n_events == 2);
            ref = q.res;
        }
    }
    q.sp.n_stop = 0;
}

// logprobs requested: forced() is never called; the schedule is still obeyed (mask), one token
// per event, each with its logprob, and the same tokens as with jump-forward off.
TEST(test_jump_forward_not_with_logprobs)
{
    static struct jf_req q;
    memset(&q, 0, sizeof q);
    q.n_prompt = make_prompt(13, q.prompt);
    q.sp = gl_sample_default_params();
    q.sp.seed = 5;
    q.sp.has_seed = 1;
    q.sp.max_tokens = 18;
    q.sp.logprobs = 2;
    jf_schedule(&q.ps, 1, 50);
    struct gl_engine_stats st0, st1;
    struct gl_engine_params p = eparams(GL_KV_F32, 16 << 20, 4, 64);
    jf_run(&q, 1, &p, 0, &st0);
    struct result ref = q.res;
    jf_run(&q, 1, &p, 1, &st1);
    CHECK(q.st.n_forced_calls == 0 && q.st.n_forced_tokens == 0);
    CHECK(q.res.n_tok == 18 && q.res.n_events == 18 && same_output(&q.res, &ref));
    CHECK(st1.steps == st0.steps);
    for (int i = 0; i < 18; i++)
        CHECK(q.res.lp[i] == ref.lp[i] && q.res.lp[i] <= 0.0f);
}

// ---- partial head ----

// A processor that allows 6 tokens at each position, spread over at most 6 of the 32 16-row
// groups of the micro model's head, and (with_allowed) reports them through allowed().
struct ph_state {
    int32_t pos;
    uint32_t bits[T_V / 32];
    int with_allowed;
    int n_pre_inf, n_mask, n_wrong, n_free;
};

static void ph_fill(struct ph_state *s)
{
    memset(s->bits, 0, sizeof s->bits);
    for (int j = 0; j < 6; j++) {
        int32_t t = (s->pos * 29 + j * 83 + 5) % T_V;
        s->bits[t / 32] |= 1u << (t % 32);
    }
}

static int ph_has(const struct ph_state *s, int32_t t)
{
    return s->bits[t / 32] >> (t % 32) & 1;
}

// Counts the disallowed logits that arrive already -inf: those outside the computed groups.
static void ph_mask(void *user, float *logits, int32_t n_vocab)
{
    struct ph_state *s = user;
    s->n_mask++;
    for (int32_t i = 0; i < n_vocab; i++)
        if (!ph_has(s, i)) {
            s->n_pre_inf += isinf(logits[i]) && logits[i] < 0.0f;
            logits[i] = -INFINITY;
        } else {
            s->n_wrong += !isfinite(logits[i]); // an allowed logit must have been computed
        }
}

static int ph_accept(void *user, int32_t token)
{
    struct ph_state *s = user;
    s->n_wrong += !ph_has(s, token);
    s->pos++;
    ph_fill(s);
    return 0;
}

static const uint32_t *ph_allowed(void *user, int32_t n_vocab)
{
    struct ph_state *s = user;
    GL_ASSERT(n_vocab == T_V);
    return s->with_allowed ? s->bits : NULL;
}

static void ph_free(void *user)
{
    ((struct ph_state *)user)->n_free++;
}

// Seeded temperature-1 sampling, 3 requests batched (the head's selection is the union of their
// sets), one of them with logprobs and half as long (its raw logits must be whole, so the head
// is full while it runs): the tokens equal a full-head run's, and the allowed() run sees logits
// that arrive -inf (the partial head was taken) once the logprobs request is done.
TEST(test_partial_head_same_tokens)
{
    enum { N = 3, OUT = 20 };
    struct result res[2][N];
    struct ph_state st[2][N];
    for (int mode = 0; mode < 2; mode++) {
        struct gl_engine_params p = eparams(GL_KV_F32, 8 << 20, 4, 64);
        struct gl_engine *e = NULL;
        struct gl_err err = {0};
        REQUIRE(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK);
        for (int i = 0; i < N; i++) {
            memset(&st[mode][i], 0, sizeof st[mode][i]);
            st[mode][i].pos = 3 * i;
            st[mode][i].with_allowed = mode;
            ph_fill(&st[mode][i]);
            memset(&res[mode][i], 0, sizeof res[mode][i]);
            struct gl_logits_processor proc = {&st[mode][i], ph_mask,    ph_accept, ph_free,
                                               NULL,         ph_allowed, NULL};
            int32_t prompt[80];
            struct gl_request rq = {.prompt = prompt,
                                    .n_prompt = make_prompt(i + 2, prompt),
                                    .sp = gl_sample_default_params(),
                                    .on_event = on_event,
                                    .user = &res[mode][i],
                                    .procs = &proc};
            rq.sp.temperature = 1.0f;
            rq.sp.seed = 77 + (uint64_t)i;
            rq.sp.has_seed = 1;
            rq.sp.max_tokens = i == N - 1 ? OUT / 2 : OUT;
            rq.sp.logprobs = i == N - 1 ? 2 : -1;
            REQUIRE(gl_engine_submit(e, &rq, NULL, &err) == GL_OK);
        }
        run_to_end(e);
        gl_engine_free(e);
    }
    for (int i = 0; i < N; i++) {
        CHECKF(same_output(&res[0][i], &res[1][i]), "request %d: partial head changed tokens", i);
        CHECK(res[1][i].n_tok == (i == N - 1 ? OUT / 2 : OUT) && st[1][i].n_free == 1);
        CHECK(st[0][i].n_wrong == 0 && st[1][i].n_wrong == 0 && st[0][i].n_pre_inf == 0);
    }
    // While the logprobs request (half as long) is in the batch, the head is full.
    CHECKF(st[1][0].n_pre_inf > 0 && st[1][1].n_pre_inf > 0, "partial head never taken: %d %d",
           st[1][0].n_pre_inf, st[1][1].n_pre_inf);
    CHECK(st[1][N - 1].n_pre_inf == 0);
    for (int t = 0; t < OUT / 2; t++)
        CHECK(res[1][N - 1].lp[t] == res[0][N - 1].lp[t]);
}

// ---- prompt logprobs ----

enum { PLP_MAX = 128, PLP_K = 3 };
struct plp_result {
    struct result r;
    float lp[PLP_MAX];
    int32_t rank[PLP_MAX], top[PLP_MAX][PLP_K];
    int32_t next; // the next position expected (1 first)
    int in_order, after_tokens;
};

static void on_plp(void *user, const struct gl_event *ev)
{
    struct plp_result *q = user;
    if (ev->n_plp == 0) {
        on_event(&q->r, ev);
        return;
    }
    q->in_order &= ev->plp_pos == q->next && ev->plp_k == PLP_K && ev->n_tokens == 0;
    q->after_tokens |= q->r.n_tok > 0;
    for (int32_t i = 0; i < ev->n_plp && ev->plp_pos + i < PLP_MAX; i++) {
        q->lp[ev->plp_pos + i] = ev->plp_logprobs[i];
        q->rank[ev->plp_pos + i] = ev->plp_ranks[i];
        for (int k = 0; k < PLP_K; k++)
            q->top[ev->plp_pos + i][k] = ev->plp_top_ids[i * PLP_K + k];
    }
    q->next = ev->plp_pos + ev->n_plp;
}

// Every prompt position's logprob, rank and top 3 against the teacher-forced logits of a plain
// single-sequence forward (all rows), for prompts longer than the step's spare rows (chunks cut),
// next to a plain request, after the same prompt filled the prefix cache (no hit may be taken),
// and through preemption in a pool too small for all three; the generated tokens are unchanged.
TEST(test_prompt_logprobs)
{
    for (int tight = 0; tight < 2; tight++) {
        struct gl_err err = {0};
        struct gl_engine_params p = eparams(GL_KV_F32, tight ? 56 * 1024 : 1 << 22, 4, 48);
        struct gl_engine *e = NULL;
        GL_ASSERT_MSG(gl_engine_new(&e, g_model, g_tok, &p, &err) == GL_OK, "%s", err.msg);
        int32_t pa[100], pb[60];
        for (int i = 0; i < 100; i++)
            pa[i] = (7 + i * 13) % T_V;
        for (int i = 0; i < 60; i++)
            pb[i] = (5 + i * 31) % T_V;
        struct gl_sample_params sp = greedy(6);
        struct result warm = {0}, plain = {0};
        submit(e, pa, 100, &sp, &warm, NULL); // fills the prefix cache with pa
        run_to_end(e);
        struct plp_result *qa = calloc(2, sizeof *qa);
        GL_ASSERT(qa);
        sp.prompt_logprobs = PLP_K;
        const int32_t *prm[2] = {pa, pb};
        const int32_t np[2] = {100, 60};
        for (int j = 0; j < 2; j++) {
            qa[j].next = 1;
            qa[j].in_order = 1;
            struct gl_request rq = {
                .prompt = prm[j], .n_prompt = np[j], .sp = sp, .on_event = on_plp, .user = &qa[j]};
            GL_ASSERT(gl_engine_submit(e, &rq, NULL, &err) == GL_OK);
        }
        struct gl_sample_params sp0 = greedy(6);
        submit(e, pb, 60, &sp0, &plain, NULL);
        run_to_end(e);
        for (int j = 0; j < 2; j++) {
            struct plp_result *q = &qa[j];
            const int32_t n = np[j];
            CHECKF(q->in_order && q->next == n && !q->after_tokens,
                   "tight %d prompt %d: positions in order %d, next %d of %d, after tokens %d",
                   tight, j, q->in_order, q->next, n, q->after_tokens);
            struct gl_model_ctx *c = NULL;
            struct gl_kv_cache *kv = NULL;
            GL_ASSERT(gl_model_ctx_new(&c, g_model, n, 1, T_CTX, &err) == GL_OK);
            GL_ASSERT(gl_kv_cache_new(&kv, &g_model->cfg, T_CTX, &err) == GL_OK);
            float *lg = malloc((size_t)n * T_V * sizeof *lg);
            GL_ASSERT(lg);
            GL_ASSERT(gl_model_forward(c, kv, prm[j], n, 0, lg, 1, NULL, &err) == GL_OK);
            int bad = 0;
            for (int32_t pos = 1; pos < n; pos++) {
                const float *row = lg + (size_t)(pos - 1) * T_V;
                float want, tlp[PLP_K];
                int32_t tid[PLP_K];
                gl_sample_logprobs(row, T_V, prm[j][pos], PLP_K, &want, tid, tlp);
                int ok = fabsf(q->lp[pos] - want) < 1e-4f &&
                         abs(q->rank[pos] - gl_sample_rank(row, T_V, prm[j][pos])) <= 1 &&
                         q->top[pos][0] == tid[0];
                if (!ok && bad++ < 3)
                    fprintf(stderr,
                            "  tight %d prompt %d pos %d: lp %g vs %g, rank %d, top %d vs %d\n",
                            tight, j, pos, (double)q->lp[pos], (double)want, q->rank[pos],
                            q->top[pos][0], tid[0]);
            }
            CHECKF(bad == 0, "tight %d prompt %d: %d positions differ", tight, j, bad);
            int32_t ref[8];
            reference(prm[j], n, 6, ref);
            CHECKF(q->r.n_tok == 6 && memcmp(ref, q->r.tok, 6 * sizeof *ref) == 0,
                   "tight %d prompt %d: generated tokens changed", tight, j);
            free(lg);
            gl_kv_cache_delete(kv);
            gl_model_ctx_delete(c);
        }
        CHECK(plain.n_tok == 6 && memcmp(plain.tok, qa[1].r.tok, 6 * sizeof plain.tok[0]) == 0);
        struct gl_engine_stats st;
        gl_engine_stats(e, &st);
        if (tight)
            CHECKF(st.n_preempted_total > 0, "the tight pool preempted nothing (%lld)",
                   (long long)st.n_preempted_total);
        CHECK(gl_kv_pool_audit(gl_engine_kv_pool(e)) == 0);
        free(qa);
        gl_engine_free(e);
    }
}

int main(void)
{
    micro_model_setup("test_engine");
    RUN_TESTS(test_batching_exact, test_pool_exhaustion_preempts, test_seeded_independent_of_batch,
              test_n_choices_share_prefix, test_cache_salt_isolates_prefixes,
              test_submit_from_thread_unseeded, test_cancel_every_phase, test_overloaded_and_limits,
              test_stop_helpers, test_stops, test_logprobs_and_processor,
              test_pool_too_small_is_refused, test_random_ops,
              test_jump_forward_same_tokens_fewer_steps, test_jump_forward_length,
              test_jump_forward_stops, test_jump_forward_not_with_logprobs,
              test_partial_head_same_tokens, test_prompt_logprobs);
}
