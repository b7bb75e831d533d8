// SPDX-License-Identifier: MIT
// microbench_spec: timing program (not a test). Decode tokens/s of ONE greedy sequence through
// the engine with speculative decoding off and on, interleaved (off, ngram, replay... off, ...)
// in one process so load from other processes hits every mode alike; medians and ratios over
// off. The prompt copies text: 64 random ids P, P's own greedy continuation G (n tokens, from an
// off run), then P again, so the ngram lookup finds P ... G when the model repeats itself (with
// random weights it mostly does not: the acceptance is reported, not tuned to). The replay
// drafter proposes G itself, kept with probability alpha per token: alpha 0 is the pure cost of
// drafting k tokens that are all rejected, alpha 0.7 the goal point.
// Decode time: from the first token's event to the last one's (prefill excluded).
// Usage: microbench_spec MODEL [n=32] [rounds=3] [threads=2] [k=4] [batch=1]
#include "engine/engine.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_LEN = 64, MAX_N = 256, MAX_B = 16 };

struct run {
    int32_t tok[MAX_B][MAX_N + 8];
    int32_t n[MAX_B];
    int64_t t_first, t_last;
};

static void on_event(void *user, const struct gl_event *ev)
{
    struct run *r = user;
    int64_t now = gl_time_us();
    int32_t b = (int32_t)(ev->request_id - 1);
    if (!r->t_first)
        r->t_first = now;
    r->t_last = now;
    for (int32_t i = 0; i < ev->n_tokens && r->n[b] < MAX_N + 8; i++)
        r->tok[b][r->n[b]++] = ev->tokens[i];
}

static double run_once(const struct gl_model *m, const struct gl_spec_params *sp,
                       const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int threads,
                       int batch, struct run *r, struct gl_engine_stats *st)
{
    struct gl_engine_params p = gl_engine_default_params(m);
    p.kv.budget_bytes = (int64_t)256 << 20;
    p.kv.prefix_cache = 0; // every sequence computes its prompt: the same work in every mode
    p.max_num_seqs = batch;
    p.max_num_batched_tokens = 512;
    p.max_model_len = 1024;
    p.n_threads = threads;
    p.n_eos = 0;
    p.spec = *sp;
    p.spec.fixed_k = 1; // always k, as measured before the cost model (docs/STATUS.md)
    struct gl_engine *e = NULL;
    struct gl_err err = {0};
    GL_ASSERT_MSG(gl_engine_new(&e, m, NULL, &p, &err) == GL_OK, "%s", err.msg);
    memset(r, 0, sizeof *r);
    struct gl_sample_params s = gl_sample_default_params();
    s.temperature = 0.0f;
    s.max_tokens = n_gen;
    s.ignore_eos = 1;
    for (int b = 0; b < batch; b++) {
        struct gl_request rq = {
            .prompt = prompt, .n_prompt = n_prompt, .sp = s, .on_event = on_event, .user = r};
        GL_ASSERT_MSG(gl_engine_submit(e, &rq, NULL, &err) == GL_OK, "%s", err.msg);
    }
    // Prefill every sequence before the clock starts (one step each chunk), then decode.
    GL_ASSERT_MSG(gl_engine_run(e, &err) == GL_OK, "%s", err.msg);
    gl_engine_stats(e, st);
    gl_engine_free(e);
    return (double)batch * (double)(n_gen - 1) / ((double)(r->t_last - r->t_first) * 1e-6);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: microbench_spec MODEL [n=32] [rounds=3] [threads=2] [k=4] "
                        "[batch=1]\n");
        return 2;
    }
    const int32_t n_gen = argc > 2 ? atoi(argv[2]) : 32;
    const int rounds = argc > 3 ? atoi(argv[3]) : 3;
    const int threads = argc > 4 ? atoi(argv[4]) : 2;
    const int k = argc > 5 ? atoi(argv[5]) : 4;
    const int batch = argc > 6 ? atoi(argv[6]) : 1;
    GL_ASSERT(n_gen >= 2 && n_gen <= MAX_N && batch >= 1 && batch <= MAX_B);
    struct gl_model *m = NULL;
    struct gl_err err = {0};
    struct gl_model_params mp = gl_model_default_params();
    GL_ASSERT_MSG(gl_model_open(&m, argv[1], &mp, &err) == GL_OK, "%s", err.msg);
    static int32_t prompt[2 * P_LEN + MAX_N];
    uint64_t x = 12345;
    for (int i = 0; i < P_LEN; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = (int32_t)((x >> 33) % 100000) + 1000; // ordinary text ids
    }
    static struct run r;
    struct gl_engine_stats st;
    const struct gl_spec_params off = {0};
    (void)run_once(m, &off, prompt, P_LEN, n_gen, threads, 1, &r, &st); // G: P's continuation
    int32_t G[MAX_N];
    memcpy(G, r.tok[0], (size_t)n_gen * sizeof *G);
    memcpy(prompt + P_LEN, G, (size_t)n_gen * sizeof *G);
    memcpy(prompt + P_LEN + n_gen, prompt, P_LEN * sizeof *prompt);
    const int32_t n_prompt = 2 * P_LEN + n_gen;
    // Reference output of the copy prompt with speculation off: what replay must propose.
    (void)run_once(m, &off, prompt, n_prompt, n_gen, threads, 1, &r, &st);
    static int32_t ref[MAX_N];
    memcpy(ref, r.tok[0], (size_t)n_gen * sizeof *ref);
    enum { MODES = 4 };
    const char *names[MODES] = {"off", "ngram", "replay a=0", "replay a=0.7"};
    struct gl_spec_params modes[MODES] = {{0}};
    modes[1] =
        (struct gl_spec_params){.method = GL_SPEC_NGRAM, .k = k, .lookup_min = 2, .lookup_max = 4};
    modes[2] = (struct gl_spec_params){
        .method = GL_SPEC_REPLAY, .k = k, .replay = ref, .n_replay = n_gen, .alpha = 0.0f};
    modes[3] = modes[2];
    modes[3].alpha = 0.7f;
    static double ts[MODES][64];
    struct gl_engine_stats last[MODES];
    int same[MODES] = {1, 1, 1, 1};
    for (int rd = 0; rd < rounds && rd < 64; rd++)
        for (int md = 0; md < MODES; md++) {
            ts[md][rd] =
                run_once(m, &modes[md], prompt, n_prompt, n_gen, threads, batch, &r, &last[md]);
            for (int b = 0; b < batch; b++)
                same[md] &= r.n[b] == n_gen && memcmp(r.tok[b], ref, (size_t)n_gen * 4) == 0;
        }
    double med[MODES];
    for (int md = 0; md < MODES; md++) {
        qsort(ts[md], (size_t)rounds, sizeof(double), cmp_d);
        med[md] = ts[md][rounds / 2];
    }
    printf("decode of %d tokens x batch %d, k %d, %d threads, %d interleaved rounds (median)\n",
           n_gen, batch, k, threads, rounds);
    for (int md = 0; md < MODES; md++) {
        const struct gl_engine_stats *s = &last[md];
        printf("  %-13s %7.2f t/s  x%.3f  drafts %lld, draft tokens %lld, accepted %lld "
               "(%.0f%%), steps %lld, output %s\n",
               names[md], med[md], med[md] / med[0], (long long)s->spec_drafts,
               (long long)s->spec_draft_tokens, (long long)s->spec_accepted_tokens,
               s->spec_draft_tokens
                   ? 100.0 * (double)s->spec_accepted_tokens / (double)s->spec_draft_tokens
                   : 0.0,
               (long long)s->steps, same[md] ? "= off" : "DIFFERS");
    }
    gl_model_delete(m);
    return 0;
}
