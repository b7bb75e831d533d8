// SPDX-License-Identifier: MIT
// engine/spec: the n-gram drafter of speculative decoding (vLLM's "ngram" method, prompt lookup).
// It needs no weights: text that copies names and numbers from its prompt proposes the tokens
// that followed the same n tokens earlier. Plain O(n_tok * n) scan from the end; at the lengths a
// CPU serves (thousands of tokens) that is microseconds against a decode step of milliseconds.
#include "engine/engine.h"

#include <math.h>
#include <string.h>

int32_t gl_spec_ngram_propose(const int32_t *tok, int64_t n_tok, int32_t lookup_min,
                              int32_t lookup_max, int32_t k, int32_t *out)
{
    if (k <= 0 || lookup_min < 1 || lookup_max < lookup_min)
        return 0;
    for (int32_t n = lookup_max; n >= lookup_min; n--) {
        if (n_tok < (int64_t)n + 1)
            continue;
        const int32_t *suf = tok + n_tok - n;
        // Most recent earlier start j (j + n <= n_tok - 1: something follows it).
        for (int64_t j = n_tok - n - 1; j >= 0; j--) {
            int32_t i = 0;
            while (i < n && tok[j + i] == suf[i])
                i++;
            if (i < n)
                continue;
            int32_t m = 0;
            for (int64_t p = j + n; p < n_tok && m < k; p++)
                out[m++] = tok[p];
            return m;
        }
    }
    return 0;
}

// ---- the cost model (engine.h) ----

// Rows bucket: R itself below 32, then 16 buckets per power of two (4 mantissa bits).
static int bucket_of(int64_t r)
{
    if (r < 32)
        return r < 1 ? 1 : (int)r;
    int e = 63 - __builtin_clzll((unsigned long long)r); // >= 5
    int b = 32 + (e - 5) * 16 + (int)((r >> (e - 4)) & 15);
    return b < GL_SPEC_COST_BUCKETS ? b : GL_SPEC_COST_BUCKETS - 1;
}

// The smallest R of bucket b.
static double rows_of(int b)
{
    if (b < 32)
        return b;
    const int e = 5 + (b - 32) / 16, m = (b - 32) % 16;
    return (double)((int64_t)(16 + m) << (e - 4));
}

void gl_spec_cost_init(struct gl_spec_cost *c)
{
    memset(c, 0, sizeof *c);
    c->tested = 1.0; // prior: 0 accepted of 1 tested
    c->since_probe = GL_SPEC_PROBE_EVERY;
}

// Measured within the last GL_SPEC_STALE steps.
static int fresh(const struct gl_spec_cost *c, int b)
{
    return c->t_us[b] > 0.0 && c->steps - c->t_at[b] <= GL_SPEC_STALE;
}

void gl_spec_cost_step(struct gl_spec_cost *c, int64_t rows, double us)
{
    if (rows <= 0 || !(us > 0.0))
        return;
    const int b = bucket_of(rows);
    double *t = &c->t_us[b];
    *t = fresh(c, b) ? *t + 0.125 * (us - *t) : us; // a stale value is replaced (engine.h)
    c->t_at[b] = ++c->steps;
}

void gl_spec_cost_verified(struct gl_spec_cost *c, int32_t n_accepted, int32_t n_tested)
{
    c->acc = 0.99 * c->acc + n_accepted;
    c->tested = 0.99 * c->tested + n_tested;
}

double gl_spec_cost_acceptance(const struct gl_spec_cost *c)
{
    return c->tested > 0.0 ? c->acc / c->tested : 0.0;
}

double gl_spec_cost_time(const struct gl_spec_cost *c, int64_t rows)
{
    const int bt = bucket_of(rows);
    double env = 0.0; // running max of the measured buckets up to bt, but a stale one below a
    int lo = -1;      // fresh one (engine.h)
    for (int b = bt, fresh_above = 0; b >= 1; b--)
        if (c->t_us[b] > 0.0 && (fresh(c, b) || !fresh_above)) {
            env = env > c->t_us[b] ? env : c->t_us[b];
            lo = lo < 0 ? b : lo;
            fresh_above |= fresh(c, b);
        }
    if (lo == bt)
        return env;
    int hi = bt + 1;
    while (hi < GL_SPEC_COST_BUCKETS && !(c->t_us[hi] > 0.0))
        hi++;
    if (hi == GL_SPEC_COST_BUCKETS)
        return env; // flat beyond the largest measured R (0: none measured)
    if (lo < 0)
        return c->t_us[hi];
    const double r = (double)rows, r0 = rows_of(lo), r1 = rows_of(hi);
    const double x = r <= r0 ? 0.0 : r >= r1 ? 1.0 : (r - r0) / (r1 - r0);
    const double top = c->t_us[hi] > env ? c->t_us[hi] : env;
    return env + x * (top - env); // from the envelope at lo to bucket hi
}

int32_t gl_spec_cost_choose(const struct gl_spec_cost *c, int64_t rows0, int32_t n_spec, int32_t k)
{
    const double t0 = gl_spec_cost_time(c, rows0);
    if (n_spec <= 0 || k <= 0 || !(t0 > 0.0))
        return 0;
    const double a = gl_spec_cost_acceptance(c);
    int32_t best = 0;
    double best_v = (double)n_spec / t0; // tokens per microsecond without drafts
    for (int32_t j = 1; j <= k && j <= GL_SPEC_MAX_K; j++) {
        const double g = a >= 1.0 ? j + 1.0 : (1.0 - pow(a, j + 1.0)) / (1.0 - a);
        const double v = (double)n_spec * g / gl_spec_cost_time(c, rows0 + (int64_t)n_spec * j);
        if (v > best_v) {
            best_v = v;
            best = j;
        }
    }
    return best;
}

int32_t gl_spec_cost_explore(struct gl_spec_cost *c, int64_t rows0, int32_t n_spec, int32_t k,
                             int32_t j)
{
    if (j <= 0 || ++c->since_explore < GL_SPEC_PROBE_EVERY)
        return j;
    c->since_explore = 0;
    c->explore_up ^= 1;
    const int32_t n = c->explore_up ? j + 1 : j - 1;
    if (n < 0 || n > k || n > GL_SPEC_MAX_K || fresh(c, bucket_of(rows0 + (int64_t)n_spec * n)))
        return j;
    return n;
}
