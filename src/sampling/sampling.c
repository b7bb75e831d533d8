// SPDX-License-Identifier: MIT
// sampling: temperature -> min_p -> top-k -> top-p -> draw (vLLM order), per-sequence RNG.
// Probabilities are kept relative to the most likely token (p_i / p_max = exp(z_i - z_max)) so
// min_p is a direct comparison and nothing overflows; they are normalised once at the end.
#include "sampling/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void gl_rng_seed(struct gl_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t gl_rng_next(struct gl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double gl_rng_uniform(struct gl_rng *r)
{
    return (double)(gl_rng_next(r) >> 11) * 0x1.0p-53;
}

struct gl_sampling_params gl_sampling_default_params(void)
{
    struct gl_sampling_params p = {
        .temperature = 0.0f, .top_p = 1.0f, .top_k = 0, .min_p = 0.0f, .seed = 0};
    return p;
}

gl_status gl_sampler_init(struct gl_sampler *s, const struct gl_sampling_params *p, int32_t n_vocab,
                          struct gl_err *err)
{
    memset(s, 0, sizeof *s);
    if (n_vocab <= 0)
        return gl_err_set(err, GL_E_INVAL, "sampling: vocabulary size %d", n_vocab);
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return gl_err_set(err, GL_E_INVAL, "sampling: temperature %g must be >= 0",
                          (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return gl_err_set(err, GL_E_INVAL, "sampling: top_p %g must be in (0, 1]",
                          (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return gl_err_set(err, GL_E_INVAL, "sampling: min_p %g must be in [0, 1]",
                          (double)p->min_p);
    s->cand = gl_malloc((size_t)n_vocab * sizeof *s->cand);
    if (!s->cand)
        return gl_err_set(err, GL_E_NOMEM, "sampling: no memory for %d candidates", n_vocab);
    s->params = *p;
    s->n_vocab = n_vocab;
    gl_rng_seed(&s->rng, p->seed);
    return GL_OK;
}

void gl_sampler_free(struct gl_sampler *s)
{
    gl_free(s->cand);
    s->cand = NULL;
}

int32_t gl_sampler_argmax(const float *logits, int32_t n_vocab)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

// Descending probability, ties by ascending id: a total order, so results never depend on qsort.
static int before(const struct gl_tok_prob *a, const struct gl_tok_prob *b)
{
    return a->p > b->p || (a->p == b->p && a->id < b->id);
}

static int cmp_cand(const void *pa, const void *pb)
{
    const struct gl_tok_prob *a = pa, *b = pb;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

// Moves the k best candidates (by `before`) to c[0..k) in O(n) expected (Hoare-style select).
static void select_top_k(struct gl_tok_prob *c, int32_t n, int32_t k)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        struct gl_tok_prob pivot = c[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (before(&c[i], &pivot))
                i++;
            while (before(&pivot, &c[j]))
                j--;
            if (i <= j) {
                struct gl_tok_prob t = c[i];
                c[i] = c[j];
                c[j] = t;
                i++;
                j--;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

void gl_sampler_filter(struct gl_sampler *s, const float *logits)
{
    const struct gl_sampling_params *p = &s->params;
    const int32_t V = s->n_vocab;
    struct gl_tok_prob *c = s->cand;
    // (logit processors — penalties, bias — will modify a copy of the logits here.)
    if (p->temperature <= 0.0f) {
        c[0].id = gl_sampler_argmax(logits, V);
        c[0].p = 1.0f;
        s->n_cand = 1;
        return;
    }
    // Temperature: z = logit / T. Relative probability r = exp(z - z_max) = p / p_max.
    const float inv_t = 1.0f / p->temperature;
    float zmax = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        float z = logits[i] * inv_t;
        zmax = z > zmax ? z : zmax;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        float r = expf(logits[i] * inv_t - zmax);
        // min_p on the tempered distribution; zero-probability tokens can never be drawn.
        if (r > 0.0f && r >= p->min_p) {
            c[n].id = i;
            c[n].p = r;
            n++;
        }
    }
    if (n == 0) { // every logit -inf or NaN: fall back to the argmax
        c[0].id = gl_sampler_argmax(logits, V);
        c[0].p = 1.0f;
        s->n_cand = 1;
        return;
    }
    if (p->top_k > 0 && n > p->top_k) {
        select_top_k(c, n, p->top_k);
        n = p->top_k;
    }
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += (double)c[i].p;
    if (p->top_p < 1.0f) {
        // Only the best m candidates can survive once their mass reaches top_p: grow m until it
        // does, then sort just those (a full sort of a 200k vocabulary costs ~20 ms a token).
        int32_t m = n < 64 ? n : 64;
        for (;;) {
            if (m < n)
                select_top_k(c, n, m);
            double mass = 0.0;
            for (int32_t i = 0; i < m; i++)
                mass += (double)c[i].p;
            if (m == n || mass / total >= (double)p->top_p)
                break;
            m = m > n / 4 ? n : m * 4;
        }
        qsort(c, (size_t)m, sizeof *c, cmp_cand);
        // Keep the shortest prefix whose mass reaches top_p: token i survives iff the mass
        // strictly before it is < top_p (vLLM's ascending-cumsum rule, at least one kept).
        double before_mass = 0.0;
        int32_t kept = 0;
        while (kept < m && before_mass / total < (double)p->top_p) {
            before_mass += (double)c[kept].p;
            kept++;
        }
        n = kept;
        total = before_mass;
    } else if (p->top_k > 0) {
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
    }
    for (int32_t i = 0; i < n; i++)
        c[i].p = (float)((double)c[i].p / total);
    s->n_cand = n;
}

int32_t gl_sampler_sample(struct gl_sampler *s, const float *logits)
{
    gl_sampler_filter(s, logits);
    if (s->n_cand == 1)
        return s->cand[0].id;
    double u = gl_rng_uniform(&s->rng), acc = 0.0;
    for (int32_t i = 0; i < s->n_cand; i++) {
        acc += (double)s->cand[i].p;
        if (u < acc)
            return s->cand[i].id;
    }
    return s->cand[s->n_cand - 1].id; // rounding left u just above the summed mass
}
