// SPDX-License-Identifier: MIT
// sampling tests: greedy ties, RNG determinism, and chi-square goodness of fit of 100k draws
// against the distribution a straight-from-the-spec reference computes for each stage order
// (temperature -> min_p -> top-k -> top-p). Each distribution test also checks that the same
// draws are REJECTED against a deliberately wrong order, so the test has the power to fail.
// Also: allowed/banned/bias and penalty arithmetic (vLLM semantics), raw logprobs, parameter
// validation and deep copies, per-choice seed streams.
#include "sampling/sampling.h"
#include "test.h"

#include <string.h>

#define N_DRAWS 100000
#define NV      8

static const float logits8[NV] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};

// Stage order for the reference. 'T' temperature, 'm' min_p, 'k' top-k, 'p' top-p.
static void reference(const float *logits, int n, float temp, float min_p, int top_k, float top_p,
                      const char *order, double *prob)
{
    double z[64];
    int keep[64];
    for (int i = 0; i < n; i++) {
        z[i] = logits[i];
        keep[i] = 1;
    }
    for (const char *o = order; *o; o++) {
        double mx = -1e300, tot = 0.0;
        for (int i = 0; i < n; i++)
            if (keep[i] && z[i] > mx)
                mx = z[i];
        for (int i = 0; i < n; i++)
            prob[i] = keep[i] ? exp(z[i] - mx) : 0.0;
        for (int i = 0; i < n; i++)
            tot += prob[i];
        if (*o == 'T') {
            for (int i = 0; i < n; i++)
                z[i] /= (double)temp;
        } else if (*o == 'm') {
            for (int i = 0; i < n; i++)
                if (prob[i] < (double)min_p) // prob[] is relative to the max here
                    keep[i] = 0;
        } else if (*o == 'k') {
            for (int i = 0; i < n; i++) {
                int better = 0;
                for (int j = 0; j < n; j++)
                    if (keep[j] && (z[j] > z[i] || (z[j] == z[i] && j < i)))
                        better++;
                if (better >= top_k)
                    keep[i] = 0;
            }
        } else if (*o == 'p') {
            for (int i = 0; i < n; i++) {
                if (!keep[i])
                    continue;
                double before = 0.0; // mass of strictly better tokens
                for (int j = 0; j < n; j++)
                    if (keep[j] && (z[j] > z[i] || (z[j] == z[i] && j < i)))
                        before += prob[j] / tot;
                if (before >= (double)top_p)
                    keep[i] = 0;
            }
        }
    }
    double mx = -1e300, tot = 0.0;
    for (int i = 0; i < n; i++)
        if (keep[i] && z[i] > mx)
            mx = z[i];
    for (int i = 0; i < n; i++)
        tot += prob[i] = keep[i] ? exp(z[i] - mx) : 0.0;
    for (int i = 0; i < n; i++)
        prob[i] /= tot;
}

// Upper-tail p-value of a chi-square statistic (Wilson-Hilferty normal approximation; accurate
// to well under a factor of 2 at the thresholds used here).
static double chi2_pvalue(double chi2, int df)
{
    if (df <= 0)
        return 1.0;
    double k = df, z = (pow(chi2 / k, 1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / sqrt(2.0 / (9.0 * k));
    return 0.5 * erfc(z / sqrt(2.0));
}

// Goodness of fit of counts against prob; an observed token with zero expected mass -> p = 0.
static double fit(const long *counts, const double *prob, int n, long total)
{
    double chi2 = 0.0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        double e = prob[i] * (double)total;
        if (prob[i] == 0.0) {
            if (counts[i] > 0)
                return 0.0;
            continue;
        }
        chi2 += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        df++;
    }
    return chi2_pvalue(chi2, df);
}

static struct gl_sample_params mkp(float temp, float top_p, int top_k, float min_p)
{
    struct gl_sample_params p = gl_sample_default_params();
    p.temperature = temp;
    p.top_p = top_p;
    p.top_k = top_k;
    p.min_p = min_p;
    return p;
}

static void draw(const struct gl_sample_params *p, const float *logits, int n, long *counts)
{
    struct gl_sample_work w;
    struct gl_rng rng;
    struct gl_err err;
    memset(counts, 0, (size_t)n * sizeof *counts);
    GL_ASSERT(gl_sample_params_check(p, n, &err) == GL_OK);
    GL_ASSERT(gl_sample_work_init(&w, n, &err) == GL_OK);
    gl_rng_seed(&rng, 42);
    for (int i = 0; i < N_DRAWS; i++) {
        int32_t id = gl_sample_pick(p, logits, &w, &rng);
        GL_ASSERT(id >= 0 && id < n);
        counts[id]++;
    }
    gl_sample_work_free(&w);
}

// Draws with params, expects a good fit to `order` and a bad fit to `wrong`.
static void check_order(float temp, float min_p, int top_k, float top_p, const char *order,
                        const char *wrong)
{
    struct gl_sample_params p = mkp(temp, top_p, top_k, min_p);
    long counts[NV];
    double good[NV], bad[NV];
    draw(&p, logits8, NV, counts);
    reference(logits8, NV, temp, min_p, top_k, top_p, order, good);
    reference(logits8, NV, temp, min_p, top_k, top_p, wrong, bad);
    double pg = fit(counts, good, NV, N_DRAWS), pb = fit(counts, bad, NV, N_DRAWS);
    CHECKF(pg > 1e-3, "order %s: p-value %g", order, pg);
    CHECKF(pb < 1e-9, "wrong order %s not rejected: p-value %g", wrong, pb);
}

TEST(test_temperature)
{
    check_order(0.7f, 0.0f, 0, 1.0f, "T", ""); // wrong: temperature ignored
    check_order(1.8f, 0.0f, 0, 1.0f, "T", "");
}

TEST(test_min_p_after_temperature)
{
    // T=2 flattens: relative probs 1, .78, .61, .47, .37, .29, .22 -> min_p .3 keeps 5 tokens;
    // min_p applied before temperature would keep only 3.
    check_order(2.0f, 0.3f, 0, 1.0f, "Tm", "mT");
}

TEST(test_top_k)
{
    check_order(1.0f, 0.0f, 3, 1.0f, "Tk", "T");
    check_order(1.5f, 0.0f, 1, 1.0f, "Tk", "T");
}

TEST(test_top_p)
{
    check_order(1.0f, 0.0f, 0, 0.7f, "Tp", "T");
    // top-p on the untempered distribution keeps fewer tokens than after T=2.
    check_order(2.0f, 0.0f, 0, 0.6f, "Tp", "pT");
}

TEST(test_full_chain_order)
{
    // top-k before top-p renormalises over k tokens first: with k=3, p=0.8 the chain keeps 2
    // tokens where top-p-then-top-k keeps 3.
    check_order(1.0f, 0.05f, 3, 0.8f, "Tmkp", "Tmpk");
    check_order(1.5f, 0.2f, 5, 0.95f, "Tmkp", "mTkp");
}

TEST(test_greedy_and_ties)
{
    float l[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    CHECK(gl_sample_argmax(l, 5) == 1);
    struct gl_sample_params p = mkp(0.0f, 0.1f, 1, 0.0f);
    struct gl_sample_work w;
    struct gl_rng rng;
    struct gl_err err;
    gl_rng_seed(&rng, 1);
    REQUIRE(gl_sample_work_init(&w, 5, &err) == GL_OK);
    for (int i = 0; i < 10; i++)
        CHECK(gl_sample_pick(&p, l, &w, &rng) == 1);
    // Sampled with ties: top-k 1 keeps the lowest id among equals.
    p.temperature = 1.0f;
    for (int i = 0; i < 100; i++)
        CHECK(gl_sample_pick(&p, l, &w, &rng) == 1);
    gl_sample_filter(&p, l, &w);
    CHECK(w.n_cand == 1 && w.cand[0].id == 1 && w.cand[0].p == 1.0f);
    // Every logit -inf (all banned): falls back to the argmax instead of failing.
    float dead[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK(gl_sample_pick(&p, dead, &w, &rng) == 0);
    gl_sample_work_free(&w);
}

static void run_seq(uint64_t seed, int32_t *o, int n)
{
    struct gl_sample_params p = mkp(1.0f, 1.0f, 0, 0.0f);
    struct gl_sample_work w;
    struct gl_rng rng;
    struct gl_err err;
    GL_ASSERT(gl_sample_work_init(&w, NV, &err) == GL_OK);
    gl_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++)
        o[i] = gl_sample_pick(&p, logits8, &w, &rng);
    gl_sample_work_free(&w);
}

TEST(test_seed_determinism)
{
    int32_t a[200], b[200], c[200], d[200];
    run_seq(7, a, 200);
    run_seq(7, b, 200);
    run_seq(8, c, 200);
    run_seq(gl_sample_choice_seed(7, 1), d, 200);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK(memcmp(a, d, sizeof a) != 0); // choice 1 of seed 7 is its own stream
    CHECK(gl_sample_choice_seed(7, 0) == 7);
    CHECK(gl_sample_choice_seed(7, 1) != gl_sample_choice_seed(8, 1));
    CHECK(gl_sample_choice_seed(7, 1) != 8 && gl_sample_choice_seed(7, 2) != 9);
}

TEST(test_bad_params)
{
    struct gl_err err;
    struct gl_sample_params p = mkp(1.0f, 0.0f, 0, 0.0f);
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "top_p"));
    p = mkp(-1.0f, 1.0f, 0, 0.0f);
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "temperature"));
    p = mkp(1.0f, 1.0f, 0, 1.5f);
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "min_p"));
    p = mkp(1.0f, 1.0f, 0, 0.0f);
    p.repetition_penalty = 0.0f;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "repetition"));
    p = mkp(1.0f, 1.0f, 0, 0.0f);
    int32_t bad = 4;
    p.stop_token_ids = &bad;
    p.n_stop_ids = 1;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "stop_token_ids"));
    p = mkp(1.0f, 1.0f, 0, 0.0f);
    p.logprobs = 21;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "logprobs"));
    p = mkp(1.0f, 1.0f, 0, 0.0f);
    char long_stop[GL_SAMPLE_MAX_STOP_LEN + 2];
    memset(long_stop, 'x', sizeof long_stop - 1);
    long_stop[sizeof long_stop - 1] = 0;
    p.stop[0] = long_stop;
    p.n_stop = 1;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_LIMIT && strstr(err.msg, "stop[0]"));
    p.n_stop = GL_SAMPLE_MAX_STOP + 1;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_LIMIT);
    p = mkp(1.0f, 1.0f, 0, 0.0f);
    p.min_tokens = 5;
    p.max_tokens = 4;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "min_tokens"));
    p.min_tokens = 0;
    p.max_tokens = 0;
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_E_INVAL && strstr(err.msg, "max_tokens"));
    p = gl_sample_default_params();
    CHECK(gl_sample_params_check(&p, 4, &err) == GL_OK);
}

TEST(test_params_copy)
{
    struct gl_sample_params p = gl_sample_default_params(), c;
    int32_t allowed[3] = {5, 1, 3}, stop_ids[1] = {2};
    struct gl_logit_bias bias[1] = {{4, 1.5f}};
    char stop0[] = "END";
    p.allowed_ids = allowed;
    p.n_allowed = 3;
    p.stop_token_ids = stop_ids;
    p.n_stop_ids = 1;
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    p.stop[0] = stop0;
    p.n_stop = 1;
    struct gl_err err;
    REQUIRE(gl_sample_params_copy(&c, &p, &err) == GL_OK);
    stop0[0] = 'X'; // the copy owns its bytes
    allowed[0] = 0;
    CHECK(strcmp(c.stop[0], "END") == 0);
    CHECK(c.allowed_ids[0] == 1 && c.allowed_ids[1] == 3 && c.allowed_ids[2] == 5);
    CHECK(c.logit_bias[0].id == 4 && c.stop_token_ids[0] == 2);
    gl_sample_params_free(&c);
    gl_sample_params_free(&c);
    CHECK(c.n_stop == 0 && c.allowed_ids == NULL);
}

// Allowed / banned ids and logit_bias, then the penalties with vLLM semantics: repetition over
// prompt + output (divide positive, multiply negative logits), presence and frequency over the
// output only.
TEST(test_process)
{
    enum { V = 8 };
    struct gl_sample_work w;
    struct gl_err err;
    REQUIRE(gl_sample_work_init(&w, V, &err) == GL_OK);
    struct gl_sample_params p = gl_sample_default_params(), c;
    int32_t allowed[3] = {6, 1, 2}, banned[1] = {2};
    struct gl_logit_bias bias[1] = {{6, 3.0f}};
    p.allowed_ids = allowed;
    p.n_allowed = 3;
    p.bad_ids = banned;
    p.n_bad = 1;
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    REQUIRE(gl_sample_params_copy(&c, &p, &err) == GL_OK);
    float l[V] = {1, 2, 3, 4, 5, 6, 7, 8};
    gl_sample_process(&c, l, &w, NULL, 0, NULL, 0);
    for (int i = 0; i < V; i++)
        CHECKF(i == 1 || i == 6 ? isfinite(l[i]) : l[i] == -INFINITY, "id %d: %g", i, (double)l[i]);
    CHECK(l[1] == 2.0f && l[6] == 10.0f);
    gl_sample_params_free(&c);

    p = gl_sample_default_params();
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    float m[V] = {4, -4, 4, -4, 4, 4, 4, 4};
    const int32_t prompt[4] = {0, 1, 1, 7}, out[4] = {1, 2, 2, 2};
    gl_sample_process(&p, m, &w, prompt, 4, out, 4);
    CHECK(m[0] == 2.0f);                 // prompt only: repetition
    CHECK(m[1] == -8.0f - 0.25f - 0.5f); // prompt + output once
    CHECK(m[2] == 2.0f - 0.75f - 0.5f);  // output three times
    CHECK(m[3] == -4.0f && m[4] == 4.0f && m[7] == 2.0f);
    for (int i = 0; i < V; i++) // the shared count table is clean again
        CHECK(w.count[i] == 0);
    // Presence/frequency ignore the prompt.
    p.repetition_penalty = 1.0f;
    float q[V] = {0};
    gl_sample_process(&p, q, &w, prompt, 4, NULL, 0);
    for (int i = 0; i < V; i++)
        CHECK(q[i] == 0.0f);
    // Greedy honours the processed logits (bias can flip the argmax), as vLLM does.
    struct gl_sample_params g = gl_sample_default_params();
    g.temperature = 0.0f;
    struct gl_logit_bias b2[1] = {{0, 100.0f}};
    g.logit_bias = b2;
    g.n_logit_bias = 1;
    float r[V] = {0, 0, 0, 0, 0, 0, 0, 5};
    struct gl_rng rng;
    gl_rng_seed(&rng, 1);
    gl_sample_process(&g, r, &w, NULL, 0, NULL, 0);
    CHECK(gl_sample_pick(&g, r, &w, &rng) == 0);
    gl_sample_work_free(&w);
}

TEST(test_logprobs_raw)
{
    const float l[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    double lse = 0.0;
    for (int i = 0; i < 5; i++)
        lse += exp((double)l[i]);
    lse = log(lse);
    float lp, top_lp[3];
    int32_t top[3];
    gl_sample_logprobs(l, 5, 4, 3, &lp, top, top_lp);
    CHECK(fabs((double)lp - (0.5 - lse)) < 1e-6);
    CHECK(top[0] == 1 && top[1] == 3 && top[2] == 0); // ties by id
    CHECK(fabs((double)top_lp[0] - (3.0 - lse)) < 1e-6 && top_lp[0] == top_lp[1]);
    CHECK(fabs((double)top_lp[2] - (1.0 - lse)) < 1e-6);
    gl_sample_logprobs(l, 5, 2, 0, &lp, top, top_lp);
    CHECK(fabs((double)lp - (-2.0 - lse)) < 1e-6);
}

TEST(test_large_vocab_top_k_select)
{
    // Quickselect on a big vocabulary must keep exactly the k best (ties by id).
    enum { V = 50000 };
    static float l[V];
    struct gl_rng r;
    gl_rng_seed(&r, 3);
    for (int i = 0; i < V; i++)
        l[i] = (float)(gl_rng_next(&r) % 1000) / 100.0f; // many ties
    struct gl_sample_params p = mkp(1.0f, 1.0f, 50, 0.0f);
    struct gl_sample_work s;
    struct gl_err err;
    REQUIRE(gl_sample_work_init(&s, V, &err) == GL_OK);
    gl_sample_filter(&p, l, &s);
    REQUIRE(s.n_cand == 50);
    // The 50th best by (logit desc, id asc) computed by brute force.
    float thr = s.cand[49].p;
    int32_t thr_id = s.cand[49].id;
    int better = 0;
    for (int i = 0; i < V; i++)
        if (l[i] > l[thr_id] || (l[i] == l[thr_id] && i < thr_id))
            better++;
    CHECK(better == 49);
    for (int i = 1; i < 50; i++)
        CHECK(s.cand[i - 1].p >= s.cand[i].p);
    (void)thr;
    gl_sample_work_free(&s);
}

static int cmp_desc(const void *a, const void *b)
{
    const struct gl_tok_prob *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

TEST(test_large_vocab_top_p)
{
    // Top-p over a big flat-ish vocabulary: the partial selection (grow m, sort only m) must
    // keep exactly the prefix a full sort keeps, for masses that need several growth rounds.
    enum { V = 20000 };
    static float l[V];
    static struct gl_tok_prob all[V];
    struct gl_rng r;
    gl_rng_seed(&r, 11);
    for (int i = 0; i < V; i++)
        l[i] = (float)(gl_rng_uniform(&r) * 6.0);
    const float tps[3] = {0.05f, 0.5f, 0.97f};
    for (int k = 0; k < 3; k++) {
        struct gl_sample_params p = mkp(1.0f, tps[k], 0, 0.0f);
        struct gl_sample_work s;
        struct gl_err err;
        REQUIRE(gl_sample_work_init(&s, V, &err) == GL_OK);
        gl_sample_filter(&p, l, &s);
        float mx = l[gl_sample_argmax(l, V)];
        double total = 0.0;
        for (int i = 0; i < V; i++) {
            all[i].id = i;
            all[i].p = expf(l[i] - mx);
            total += (double)all[i].p;
        }
        qsort(all, V, sizeof all[0], cmp_desc);
        double before = 0.0;
        int n = 0;
        while (n < V && before / total < (double)tps[k])
            before += (double)all[n++].p;
        CHECKF(s.n_cand == n, "top_p %g: kept %d, full sort keeps %d", (double)tps[k], s.n_cand, n);
        int same = s.n_cand == n;
        for (int i = 0; same && i < n; i++)
            same = s.cand[i].id == all[i].id;
        CHECK(same);
        CHECK(n > 64 || k == 0); // the larger masses needed more than the first 64
        gl_sample_work_free(&s);
    }
}

int main(void)
{
    RUN_TESTS(test_temperature, test_min_p_after_temperature, test_top_k, test_top_p,
              test_full_chain_order, test_greedy_and_ties, test_seed_determinism, test_bad_params,
              test_params_copy, test_process, test_logprobs_raw, test_large_vocab_top_k_select,
              test_large_vocab_top_p);
}
