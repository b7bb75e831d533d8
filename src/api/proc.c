// SPDX-License-Identifier: MIT
// api/proc: the grammar as an engine logits processor, one per choice. It runs on the engine
// thread; every grammar call holds config->grammar_lock because compiled grammars (their mask
// caches, refcounts) are shared with HTTP threads that look grammars up.
// Reasoning budget: a second ATEM parser follows the tokens so the processor knows when it is
// inside the reasoning body; once the body has used `budget` tokens, <|eom|> is the only
// allowed token there (the turn grammar then forces <|start|>assistant and the answer arm).
// Room for the answer: with max_tokens set, the tokens left (max_tokens - generated) are compared
// with the grammar's shortest completion (grammar.h gl_matcher_shortest: an upper bound in
// tokens, framing and stop included). Inside the reasoning body <|eom|> is forced as soon as
// another reasoning token would leave less than that; in the turn's headers the mask keeps only
// the arms that still fit (gl_matcher_filter_within), so reasoning is not opened without room.
// With finish_within_max_tokens the same filter runs on every mask outside the reasoning body.
#include "api/api_int.h"
#include "chat/atem_parse.h"

#include <math.h>
#include <string.h>

#define GL_TOK_EOM 200007 // <|eom|>

struct proc {
    const struct gl_api_config *c;
    struct gl_matcher *m;
    uint32_t *mask;
    int mask_valid; // mask holds the current state's allowed set (left there by forced())
    struct gl_atem_parser *atem; // turn grammars only: where are we in the turn
    int32_t budget;              // reasoning body tokens allowed; < 0: no limit
    int32_t n_reasoning;
    int32_t max_tokens; // the request's; <= 0: no room rule
    int32_t n_gen;      // tokens accepted or forced so far
    int within;         // finish_within_max_tokens
    struct gl_api_mask_stats *ms;
};

const double gl_api_mask_bounds_us[GL_API_MASK_BUCKETS] = {10,   25,   50,    100,   250, 500,
                                                           1000, 2500, 10000, 25000, 1e5, 1e6};

static void observe(struct gl_api_mask_stats *ms, int64_t us)
{
    int i = 0;
    while (i < GL_API_MASK_BUCKETS && (double)us > gl_api_mask_bounds_us[i])
        i++;
    atomic_fetch_add(&ms->buckets[i], 1);
    atomic_fetch_add(&ms->count, 1);
    atomic_fetch_add(&ms->us_total, us);
}

static void no_sink(void *user, const struct gl_atem_event *ev)
{
    (void)user;
    (void)ev;
}

// Under the grammar lock, with p->mask the current state's mask: 1 when the reasoning body must
// close now (budget spent, or no room for another reasoning token and the shortest rest);
// elsewhere the room filter narrows p->mask where it applies (file comment).
static int room_rule(struct proc *p)
{
    int reasoning = p->atem && gl_atem_parser_state(p->atem) == GL_ATEM_ST_REASONING;
    int64_t left = p->max_tokens > 0 ? (int64_t)p->max_tokens - p->n_gen : -1;
    if (reasoning) {
        if (p->budget >= 0 && p->n_reasoning >= p->budget)
            return 1;
        int64_t up = -1;
        if (left > 0)
            gl_matcher_shortest(p->m, NULL, &up);
        return up >= 0 && left <= up; // a reasoning token leaves the shortest rest unchanged
    }
    int header = p->atem && (gl_atem_parser_state(p->atem) == GL_ATEM_ST_HEADER ||
                             gl_atem_parser_state(p->atem) == GL_ATEM_ST_BETWEEN);
    if (left > 0 && (p->within || header))
        gl_matcher_filter_within(p->m, p->mask, left);
    return 0;
}

static void proc_mask(void *user, float *logits, int32_t n_vocab)
{
    struct proc *p = user;
    int64_t t0 = gl_time_us();
    pthread_mutex_lock(p->c->grammar_lock);
    int finished = gl_matcher_is_finished(p->m), close = 0;
    if (!finished && !p->mask_valid)
        gl_matcher_fill_mask(p->m, p->mask);
    if (!finished)
        close = room_rule(p);
    p->mask_valid = 0;
    pthread_mutex_unlock(p->c->grammar_lock);
    if (finished) // after the stop token (ignore_eos): nothing left to constrain
        return;
    int force_eom =
        close && GL_TOK_EOM < n_vocab && (p->mask[GL_TOK_EOM / 32] >> (GL_TOK_EOM % 32) & 1);
    for (int32_t w = 0; w < (n_vocab + 31) / 32; w++) {
        uint32_t bits =
            force_eom ? (w == GL_TOK_EOM / 32 ? 1u << (GL_TOK_EOM % 32) : 0) : p->mask[w];
        if (bits == 0xffffffffu)
            continue;
        int32_t end = w * 32 + 32 < n_vocab ? w * 32 + 32 : n_vocab;
        for (int32_t i = w * 32; i < end; i++)
            if (!(bits >> (i - w * 32) & 1))
                logits[i] = -INFINITY;
    }
    observe(p->ms, gl_time_us() - t0);
}

static void track(struct proc *p, int32_t t)
{
    p->n_gen++;
    if (!p->atem)
        return;
    if (gl_atem_parser_state(p->atem) == GL_ATEM_ST_REASONING && t != GL_TOK_EOM)
        p->n_reasoning++;
    gl_status st = gl_atem_parser_feed(p->atem, t, NULL); // only its state is read
    (void)st;
}

static int proc_accept(void *user, int32_t token)
{
    struct proc *p = user;
    pthread_mutex_lock(p->c->grammar_lock);
    int ok = gl_matcher_is_finished(p->m) || gl_matcher_accept(p->m, token);
    pthread_mutex_unlock(p->c->grammar_lock);
    p->mask_valid = 0;
    if (ok)
        track(p, token);
    return ok ? 0 : 1;
}

static int32_t proc_forced(void *user, int32_t *out, int32_t cap)
{
    struct proc *p = user;
    // Inside a budget-limited reasoning body the mask is not the grammar's: no jumping there.
    if (p->atem && gl_atem_parser_state(p->atem) == GL_ATEM_ST_REASONING)
        return 0;
    int64_t t0 = gl_time_us();
    pthread_mutex_lock(p->c->grammar_lock);
    int finished = gl_matcher_is_finished(p->m);
    int32_t n = finished ? 0 : gl_matcher_forced_tokens(p->m, out, cap, p->mask);
    pthread_mutex_unlock(p->c->grammar_lock);
    // The matcher leaves the current state's mask behind (grammar.h): the next mask() call
    // reuses it instead of computing it twice per token.
    p->mask_valid = !finished;
    observe(p->ms, gl_time_us() - t0);
    for (int32_t i = 0; i < n; i++)
        track(p, out[i]);
    return n;
}

// The current state's allowed set while forced() has left it in p->mask (engine.h, partial head).
// With a reasoning budget spent, mask() allows only <|eom|>: a subset of it, as required.
static const uint32_t *proc_allowed(void *user, int32_t n_vocab)
{
    struct proc *p = user;
    if (!p->mask_valid || (int64_t)n_vocab > (int64_t)gl_gvocab_mask_words(p->c->gvocab) * 32)
        return NULL;
    return p->mask;
}

// Speculative decoding (engine.h draft_ok): walk the matcher along the draft while it accepts,
// then roll it back exactly. After a stop token the processor accepts anything (proc_accept),
// so the rest of such a draft counts as allowed.
static int32_t proc_draft_ok(void *user, const int32_t *draft, int32_t n)
{
    struct proc *p = user;
    pthread_mutex_lock(p->c->grammar_lock);
    int32_t walked = 0;
    int finished = gl_matcher_is_finished(p->m);
    while (!finished && walked < n && gl_matcher_accept(p->m, draft[walked])) {
        walked++;
        finished = gl_matcher_is_finished(p->m);
    }
    gl_status st = gl_matcher_rollback(p->m, walked, NULL);
    pthread_mutex_unlock(p->c->grammar_lock);
    GL_ASSERT(st == GL_OK); // walked <= the tokens just accepted
    return finished ? n : walked;
}

static void proc_free(void *user)
{
    struct proc *p = user;
    if (!p)
        return;
    pthread_mutex_lock(p->c->grammar_lock);
    gl_matcher_free(p->m);
    pthread_mutex_unlock(p->c->grammar_lock);
    gl_atem_parser_free(p->atem);
    gl_free(p->mask);
    gl_free(p);
}

gl_status gl_api_make_procs(const struct gl_api_config *c, const struct gl_api_req *r,
                            struct gl_api_mask_stats *ms, struct gl_logits_processor **out,
                            struct gl_err *err)
{
    *out = NULL;
    if (!r->grammar)
        return GL_OK;
    const int32_t n = r->sp.n;
    struct gl_logits_processor *procs = gl_calloc((size_t)n, sizeof *procs);
    if (!procs)
        return gl_err_set(err, GL_E_NOMEM, "api: no memory for logits processors");
    // The matcher's stop set: the model's, the tokenizer's, and the request's stop ids.
    int32_t stop[GL_ENGINE_MAX_EOS + 2 + GL_API_MAX_STOP_IDS];
    int n_stop = 0;
    stop[n_stop++] = gl_tokenizer_eos(c->tok);
    if (gl_tokenizer_eot(c->tok) >= 0)
        stop[n_stop++] = gl_tokenizer_eot(c->tok);
    for (int32_t i = 0; i < c->n_eos; i++)
        stop[n_stop++] = c->eos_ids[i];
    for (int32_t i = 0; i < r->sp.n_stop_ids && i < GL_API_MAX_STOP_IDS; i++)
        stop[n_stop++] = r->sp.stop_token_ids[i];
    gl_status st = GL_OK;
    for (int32_t i = 0; i < n && st == GL_OK; i++) {
        struct proc *p = gl_calloc(1, sizeof *p);
        if (!p) {
            st = gl_err_set(err, GL_E_NOMEM, "api: no memory for a logits processor");
            break;
        }
        p->c = c;
        p->ms = ms;
        p->budget = r->turn ? r->reasoning_budget : -1;
        p->max_tokens = r->sp.max_tokens;
        p->within = r->finish_within;
        p->mask = gl_malloc(gl_gvocab_mask_words(c->gvocab) * sizeof *p->mask);
        procs[i] = (struct gl_logits_processor){.user = p,
                                                .mask = proc_mask,
                                                .accept = proc_accept,
                                                .forced = proc_forced,
                                                .allowed = proc_allowed,
                                                .draft_ok = proc_draft_ok,
                                                .free = proc_free};
        if (!p->mask) {
            st = gl_err_set(err, GL_E_NOMEM, "api: no memory for a token mask");
            break;
        }
        if (r->turn &&
            (st = gl_atem_parser_new(&p->atem, c->tok, NULL, no_sink, NULL, err)) != GL_OK)
            break;
        pthread_mutex_lock(c->grammar_lock);
        st = gl_matcher_new(&p->m, r->grammar, c->gvocab, stop, n_stop, err);
        pthread_mutex_unlock(c->grammar_lock);
    }
    if (st != GL_OK) {
        for (int32_t i = 0; i < n; i++)
            proc_free(procs[i].user);
        gl_free(procs);
        return st;
    }
    *out = procs;
    return GL_OK;
}
