// SPDX-License-Identifier: MIT
// sampling: allowed/banned -> bias -> penalties -> temperature -> min_p -> top-k -> top-p -> draw
// (vLLM order), per-sequence RNG. Probabilities are kept relative to the most likely token
// (p_i / p_max = exp(z_i - z_max)) so min_p is a direct comparison and nothing overflows; they
// are normalised once at the end. Penalty counts live in a shared scratch table that is zeroed
// again after each use, so a sequence carries no per-vocabulary state.
#include "sampling/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- RNG ----

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

uint64_t gl_sample_choice_seed(uint64_t seed, int32_t index)
{
    if (index == 0)
        return seed;
    uint64_t x = seed ^ ((uint64_t)(uint32_t)index * 0xD1B54A32D192ED03ull);
    return splitmix64(&x);
}

// ---- parameters ----

struct gl_sample_params gl_sample_default_params(void)
{
    struct gl_sample_params p;
    memset(&p, 0, sizeof p);
    p.n = 1;
    p.max_tokens = -1;
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repetition_penalty = 1.0f;
    p.logprobs = -1;
    p.prompt_logprobs = -1;
    p.skip_special_tokens = 1;
    return p;
}

static gl_status check_ids(const int32_t *ids, int32_t n, int32_t n_vocab, const char *what,
                           struct gl_err *err)
{
    if (n < 0 || (n > 0 && !ids))
        return gl_err_set(err, GL_E_INVAL, "sampling: %s: bad list (%d entries)", what, n);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return gl_err_set(err, GL_E_INVAL, "sampling: %s[%d] = %d not in [0, %d)", what, i,
                              ids[i], n_vocab);
    return GL_OK;
}

static gl_status check_range(float x, float lo, float hi, int lo_open, const char *what,
                             struct gl_err *err)
{
    if (!isfinite(x) || x > hi || (lo_open ? !(x > lo) : !(x >= lo)))
        return gl_err_set(err, GL_E_INVAL, "sampling: %s %g must be in %c%g, %g]", what, (double)x,
                          lo_open ? '(' : '[', (double)lo, (double)hi);
    return GL_OK;
}

gl_status gl_sample_params_check(const struct gl_sample_params *p, int32_t n_vocab,
                                 struct gl_err *err)
{
    gl_status st;
    if (n_vocab <= 0)
        return gl_err_set(err, GL_E_INVAL, "sampling: vocabulary size %d", n_vocab);
    if (p->n < 1 || p->n > GL_SAMPLE_MAX_N)
        return gl_err_set(err, GL_E_INVAL, "sampling: n %d must be in [1, %d]", p->n,
                          GL_SAMPLE_MAX_N);
    if (p->max_tokens == 0)
        return gl_err_set(
            err, GL_E_INVAL,
            "sampling: max_tokens 0: must be >= 1 (or < 0 for the rest of the context)");
    if (p->min_tokens < 0 || (p->max_tokens >= 0 && p->min_tokens > p->max_tokens))
        return gl_err_set(err, GL_E_INVAL, "sampling: min_tokens %d must be in [0, max_tokens %d]",
                          p->min_tokens, p->max_tokens);
    if ((st = check_range(p->temperature, 0.0f, 1e6f, 0, "temperature", err)) ||
        (st = check_range(p->top_p, 0.0f, 1.0f, 1, "top_p", err)) ||
        (st = check_range(p->min_p, 0.0f, 1.0f, 0, "min_p", err)) ||
        (st = check_range(p->presence_penalty, -2.0f, 2.0f, 0, "presence_penalty", err)) ||
        (st = check_range(p->frequency_penalty, -2.0f, 2.0f, 0, "frequency_penalty", err)) ||
        (st = check_range(p->repetition_penalty, 0.0f, 2.0f, 1, "repetition_penalty", err)))
        return st;
    if (p->top_k < -1)
        return gl_err_set(err, GL_E_INVAL, "sampling: top_k %d must be -1, 0 or positive",
                          p->top_k);
    if (p->logprobs > GL_SAMPLE_MAX_LOGPROBS)
        return gl_err_set(err, GL_E_INVAL, "sampling: logprobs %d over the limit %d", p->logprobs,
                          GL_SAMPLE_MAX_LOGPROBS);
    if (p->prompt_logprobs > GL_SAMPLE_MAX_LOGPROBS)
        return gl_err_set(err, GL_E_INVAL, "sampling: prompt_logprobs %d over the limit %d",
                          p->prompt_logprobs, GL_SAMPLE_MAX_LOGPROBS);
    if ((st = check_ids(p->allowed_ids, p->n_allowed, n_vocab, "allowed_token_ids", err)) ||
        (st = check_ids(p->bad_ids, p->n_bad, n_vocab, "bad token ids", err)) ||
        (st = check_ids(p->stop_token_ids, p->n_stop_ids, n_vocab, "stop_token_ids", err)))
        return st;
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return gl_err_set(err, GL_E_INVAL, "sampling: logit_bias: bad list");
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const struct gl_logit_bias *b = &p->logit_bias[i];
        if (b->id < 0 || b->id >= n_vocab || !isfinite(b->bias))
            return gl_err_set(err, GL_E_INVAL, "sampling: logit_bias[%d]: token %d bias %g", i,
                              b->id, (double)b->bias);
    }
    if (p->n_stop < 0 || p->n_stop > GL_SAMPLE_MAX_STOP)
        return gl_err_set(err, GL_E_LIMIT, "sampling: %d stop strings, at most %d", p->n_stop,
                          GL_SAMPLE_MAX_STOP);
    for (int32_t i = 0; i < p->n_stop; i++) {
        size_t len = p->stop[i] ? strlen(p->stop[i]) : 0;
        if (len == 0)
            return gl_err_set(err, GL_E_INVAL, "sampling: stop[%d] is empty", i);
        if (len > GL_SAMPLE_MAX_STOP_LEN)
            return gl_err_set(err, GL_E_LIMIT, "sampling: stop[%d] is %zu bytes, at most %d", i,
                              len, GL_SAMPLE_MAX_STOP_LEN);
    }
    return GL_OK;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void *dup_bytes(const void *src, size_t n, int *fail)
{
    if (n == 0)
        return NULL;
    void *d = gl_malloc(n);
    if (!d) {
        *fail = 1;
        return NULL;
    }
    memcpy(d, src, n);
    return d;
}

gl_status gl_sample_params_copy(struct gl_sample_params *dst, const struct gl_sample_params *src,
                                struct gl_err *err)
{
    int fail = 0;
    *dst = *src;
    dst->logit_bias =
        dup_bytes(src->logit_bias, (size_t)src->n_logit_bias * sizeof *src->logit_bias, &fail);
    dst->allowed_ids = dup_bytes(src->allowed_ids, (size_t)src->n_allowed * sizeof(int32_t), &fail);
    dst->bad_ids = dup_bytes(src->bad_ids, (size_t)src->n_bad * sizeof(int32_t), &fail);
    dst->stop_token_ids =
        dup_bytes(src->stop_token_ids, (size_t)src->n_stop_ids * sizeof(int32_t), &fail);
    for (int32_t i = 0; i < src->n_stop; i++)
        dst->stop[i] = dup_bytes(src->stop[i], strlen(src->stop[i]) + 1, &fail);
    if (fail) {
        gl_sample_params_free(dst);
        memset(dst, 0, sizeof *dst);
        return gl_err_set(err, GL_E_NOMEM, "sampling: no memory to copy the request parameters");
    }
    if (dst->n_allowed > 1) // sorted: the allowed-ids mask is one merge pass over the vocabulary
        qsort((void *)dst->allowed_ids, (size_t)dst->n_allowed, sizeof(int32_t), cmp_i32);
    return GL_OK;
}

void gl_sample_params_free(struct gl_sample_params *p)
{
    gl_free((void *)p->logit_bias);
    gl_free((void *)p->allowed_ids);
    gl_free((void *)p->bad_ids);
    gl_free((void *)p->stop_token_ids);
    for (int32_t i = 0; i < p->n_stop; i++) {
        gl_free((void *)p->stop[i]);
        p->stop[i] = NULL;
    }
    p->logit_bias = NULL;
    p->allowed_ids = p->bad_ids = p->stop_token_ids = NULL;
    p->n_logit_bias = p->n_allowed = p->n_bad = p->n_stop_ids = p->n_stop = 0;
}

// ---- scratch ----

gl_status gl_sample_work_init(struct gl_sample_work *w, int32_t n_vocab, struct gl_err *err)
{
    memset(w, 0, sizeof *w);
    if (n_vocab <= 0)
        return gl_err_set(err, GL_E_INVAL, "sampling: vocabulary size %d", n_vocab);
    w->cand = gl_malloc((size_t)n_vocab * sizeof *w->cand);
    w->count = gl_calloc((size_t)n_vocab, sizeof *w->count);
    if (!w->cand || !w->count) {
        gl_sample_work_free(w);
        return gl_err_set(err, GL_E_NOMEM, "sampling: no memory for %d candidates", n_vocab);
    }
    w->n_vocab = n_vocab;
    return GL_OK;
}

void gl_sample_work_free(struct gl_sample_work *w)
{
    gl_free(w->cand);
    gl_free(w->count);
    memset(w, 0, sizeof *w);
}

// ---- logits processing ----

// count[] encoding while penalties run: bit 30 = seen in the prompt, low bits = output count.
#define IN_PROMPT (1 << 30)

static void apply_penalties(const struct gl_sample_params *p, float *logits,
                            struct gl_sample_work *w, const int32_t *prompt, int64_t n_prompt,
                            const int32_t *out, int64_t n_out)
{
    const int rep = p->repetition_penalty != 1.0f;
    const int pf = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if (!rep && !pf)
        return;
    int32_t *cnt = w->count;
    if (rep)
        for (int64_t i = 0; i < n_prompt; i++)
            cnt[prompt[i]] |= IN_PROMPT;
    for (int64_t i = 0; i < n_out; i++)
        cnt[out[i]]++;
    // Visit each distinct token once: the first visit applies the penalty and clears the entry.
    for (int pass = 0; pass < 2; pass++) {
        const int32_t *ids = pass ? out : prompt;
        int64_t n = pass ? n_out : (rep ? n_prompt : 0);
        for (int64_t i = 0; i < n; i++) {
            int32_t id = ids[i], c = cnt[id];
            if (c == 0)
                continue;
            float *l = &logits[id];
            if (rep) // vLLM / CTRL: divide positive logits, multiply negative ones
                *l = *l > 0.0f ? *l / p->repetition_penalty : *l * p->repetition_penalty;
            int32_t n_gen = c & ~IN_PROMPT;
            if (n_gen > 0)
                *l -= p->frequency_penalty * (float)n_gen + p->presence_penalty;
            cnt[id] = 0;
        }
    }
}

void gl_sample_process(const struct gl_sample_params *p, float *logits, struct gl_sample_work *w,
                       const int32_t *prompt, int64_t n_prompt, const int32_t *out, int64_t n_out)
{
    const int32_t V = w->n_vocab;
    if (p->n_allowed > 0) { // allowed ids are sorted by gl_sample_params_copy
        int32_t j = 0;
        for (int32_t i = 0; i < V; i++) {
            while (j < p->n_allowed && p->allowed_ids[j] < i)
                j++;
            if (j == p->n_allowed || p->allowed_ids[j] != i)
                logits[i] = -INFINITY;
        }
    }
    for (int32_t i = 0; i < p->n_bad; i++)
        logits[p->bad_ids[i]] = -INFINITY;
    for (int32_t i = 0; i < p->n_logit_bias; i++)
        logits[p->logit_bias[i].id] += p->logit_bias[i].bias;
    apply_penalties(p, logits, w, prompt, n_prompt, out, n_out);
}

// ---- filtering ----

int32_t gl_sample_argmax(const float *logits, int32_t n_vocab)
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

static void only_argmax(const float *logits, struct gl_sample_work *w)
{
    w->cand[0].id = gl_sample_argmax(logits, w->n_vocab);
    w->cand[0].p = 1.0f;
    w->n_cand = 1;
}

// Top-p over c[0..n) (relative probabilities summing to *total): keeps the shortest prefix in
// (p desc, id asc) order whose mass reaches top_p; returns the survivors, updates *total.
static int32_t top_p_cut(struct gl_tok_prob *c, int32_t n, float top_p, double *total)
{
    // Only the best m candidates can survive once their mass reaches top_p: grow m until it
    // does, then sort just those (a full sort of a 200k vocabulary costs ~20 ms a token).
    int32_t m = n < 64 ? n : 64;
    for (;;) {
        if (m < n)
            select_top_k(c, n, m);
        double mass = 0.0;
        for (int32_t i = 0; i < m; i++)
            mass += (double)c[i].p;
        if (m == n || mass / *total >= (double)top_p)
            break;
        m = m > n / 4 ? n : m * 4;
    }
    qsort(c, (size_t)m, sizeof *c, cmp_cand);
    // Token i survives iff the mass strictly before it is < top_p (vLLM's ascending-cumsum
    // rule, at least one kept).
    double before_mass = 0.0;
    int32_t kept = 0;
    while (kept < m && before_mass / *total < (double)top_p) {
        before_mass += (double)c[kept].p;
        kept++;
    }
    *total = before_mass;
    return kept;
}

void gl_sample_filter(const struct gl_sample_params *p, const float *logits,
                      struct gl_sample_work *w)
{
    const int32_t V = w->n_vocab;
    struct gl_tok_prob *c = w->cand;
    if (p->temperature <= 0.0f) {
        only_argmax(logits, w);
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
    if (zmax > -INFINITY) {
        for (int32_t i = 0; i < V; i++) {
            float r = expf(logits[i] * inv_t - zmax);
            // min_p on the tempered distribution; zero-probability tokens can never be drawn.
            if (r > 0.0f && r >= p->min_p) {
                c[n].id = i;
                c[n].p = r;
                n++;
            }
        }
    }
    if (n == 0) { // every logit -inf or NaN: fall back to the argmax
        only_argmax(logits, w);
        return;
    }
    if (p->top_k > 0 && n > p->top_k) {
        select_top_k(c, n, p->top_k);
        n = p->top_k;
    }
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += (double)c[i].p;
    if (p->top_p < 1.0f)
        n = top_p_cut(c, n, p->top_p, &total);
    else if (p->top_k > 0)
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
    for (int32_t i = 0; i < n; i++)
        c[i].p = (float)((double)c[i].p / total);
    w->n_cand = n;
}

int32_t gl_sample_pick(const struct gl_sample_params *p, const float *logits,
                       struct gl_sample_work *w, struct gl_rng *rng)
{
    gl_sample_filter(p, logits, w);
    if (w->n_cand == 1)
        return w->cand[0].id;
    double u = gl_rng_uniform(rng), acc = 0.0;
    for (int32_t i = 0; i < w->n_cand; i++) {
        acc += (double)w->cand[i].p;
        if (u < acc)
            return w->cand[i].id;
    }
    return w->cand[w->n_cand - 1].id; // rounding left u just above the summed mass
}

// ---- logprobs ----

void gl_sample_logprobs(const float *logits, int32_t n_vocab, int32_t chosen, int32_t top_n,
                        float *chosen_lp, int32_t *top_ids, float *top_lps)
{
    GL_ASSERT(top_n >= 0 && top_n <= GL_SAMPLE_MAX_LOGPROBS && chosen >= 0 && chosen < n_vocab);
    float mx = logits[gl_sample_argmax(logits, n_vocab)];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - mx));
    const double lse = (double)mx + log(sum);
    *chosen_lp = (float)((double)logits[chosen] - lse);
    // Insertion into a sorted list of at most 20: one pass over the vocabulary.
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab && top_n > 0; i++) {
        float v = logits[i];
        if (n == top_n && !(v > top_lps[n - 1]))
            continue;
        int32_t j = n < top_n ? n++ : n - 1;
        while (j > 0 && v > top_lps[j - 1]) {
            top_lps[j] = top_lps[j - 1];
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_lps[j] = v;
        top_ids[j] = i;
    }
    for (int32_t i = 0; i < n; i++)
        top_lps[i] = (float)((double)top_lps[i] - lse);
}

int32_t gl_sample_rank(const float *logits, int32_t n_vocab, int32_t id)
{
    GL_ASSERT(id >= 0 && id < n_vocab);
    const float v = logits[id];
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        n += logits[i] >= v;
    return n;
}
