// SPDX-License-Identifier: MIT
// sampling tests: greedy ties, RNG determinism, and chi-square goodness of fit of 100k draws
// against the distribution a straight-from-the-spec reference computes for each stage order
// (temperature -> min_p -> top-k -> top-p). Each distribution test also checks that the same
// draws are REJECTED against a deliberately wrong order, so the test has the power to fail.
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

static void draw(const struct gl_sampling_params *p, const float *logits, int n, long *counts)
{
    struct gl_sampler s;
    struct gl_err err;
    memset(counts, 0, (size_t)n * sizeof *counts);
    GL_ASSERT(gl_sampler_init(&s, p, n, &err) == GL_OK);
    for (int i = 0; i < N_DRAWS; i++) {
        int32_t id = gl_sampler_sample(&s, logits);
        GL_ASSERT(id >= 0 && id < n);
        counts[id]++;
    }
    gl_sampler_free(&s);
}

// Draws with params, expects a good fit to `order` and a bad fit to `wrong`.
static void check_order(float temp, float min_p, int top_k, float top_p, const char *order,
                        const char *wrong)
{
    struct gl_sampling_params p = {temp, top_p, top_k, min_p, 42};
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
    CHECK(gl_sampler_argmax(l, 5) == 1);
    struct gl_sampling_params p = gl_sampling_default_params();
    p.top_k = 1;
    p.top_p = 0.1f;
    struct gl_sampler s;
    struct gl_err err;
    REQUIRE(gl_sampler_init(&s, &p, 5, &err) == GL_OK);
    for (int i = 0; i < 10; i++)
        CHECK(gl_sampler_sample(&s, l) == 1);
    gl_sampler_free(&s);
    // Sampled with ties: top-k 1 keeps the lowest id among equals.
    p.temperature = 1.0f;
    REQUIRE(gl_sampler_init(&s, &p, 5, &err) == GL_OK);
    for (int i = 0; i < 100; i++)
        CHECK(gl_sampler_sample(&s, l) == 1);
    gl_sampler_filter(&s, l);
    CHECK(s.n_cand == 1 && s.cand[0].id == 1 && s.cand[0].p == 1.0f);
    gl_sampler_free(&s);
}

TEST(test_seed_determinism)
{
    struct gl_sampling_params p = {1.0f, 1.0f, 0, 0.0f, 7};
    int32_t a[200], b[200], c[200];
    struct gl_sampler s;
    struct gl_err err;
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 8 : 7;
        REQUIRE(gl_sampler_init(&s, &p, NV, &err) == GL_OK);
        int32_t *o = run == 0 ? a : run == 1 ? b : c;
        for (int i = 0; i < 200; i++)
            o[i] = gl_sampler_sample(&s, logits8);
        gl_sampler_free(&s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

TEST(test_bad_params)
{
    struct gl_sampler s;
    struct gl_err err;
    struct gl_sampling_params p = gl_sampling_default_params();
    p.top_p = 0.0f;
    CHECK(gl_sampler_init(&s, &p, 4, &err) == GL_E_INVAL && strstr(err.msg, "top_p"));
    p = gl_sampling_default_params();
    p.temperature = -1.0f;
    CHECK(gl_sampler_init(&s, &p, 4, &err) == GL_E_INVAL && strstr(err.msg, "temperature"));
    p = gl_sampling_default_params();
    p.min_p = 1.5f;
    CHECK(gl_sampler_init(&s, &p, 4, &err) == GL_E_INVAL && strstr(err.msg, "min_p"));
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
    struct gl_sampling_params p = {1.0f, 1.0f, 50, 0.0f, 1};
    struct gl_sampler s;
    struct gl_err err;
    REQUIRE(gl_sampler_init(&s, &p, V, &err) == GL_OK);
    gl_sampler_filter(&s, l);
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
    gl_sampler_free(&s);
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
        struct gl_sampling_params p = {1.0f, tps[k], 0, 0.0f, 1};
        struct gl_sampler s;
        struct gl_err err;
        REQUIRE(gl_sampler_init(&s, &p, V, &err) == GL_OK);
        gl_sampler_filter(&s, l);
        float mx = l[gl_sampler_argmax(l, V)];
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
        gl_sampler_free(&s);
    }
}

int main(void)
{
    RUN_TESTS(test_temperature, test_min_p_after_temperature, test_top_k, test_top_p,
              test_full_chain_order, test_greedy_and_ties, test_seed_determinism, test_bad_params,
              test_large_vocab_top_k_select, test_large_vocab_top_p);
}
