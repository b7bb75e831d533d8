// SPDX-License-Identifier: MIT
// The shortest-completion query (shortest.c, gl_matcher_shortest) against brute force: along
// random byte walks through small grammars (JSON Schema with nested objects, arrays, enums,
// bounded numbers and constrained strings; a regex; a choice; GBNF recursion; the ATEM turn with
// its pinned header tokens, reasoning and tool calls), every state's value must equal a
// breadth-first search over bytes and token literals to the nearest complete document. The
// states where shortest.h promises only an upper bound (minProperties, patterned keys) are
// checked to be >= the search. Negative controls: a table that ignores token literals, and the
// value plus one, must both disagree with the search. Then the public API on the real vocabulary
// (lower <= upper, the choice turn's counts) and gl_matcher_fill_mask_within: random token
// walks under it always end with a stop token within the budget, and plain masks do not.
#include "test.h"
#include "grammar/grammar.h"
#include "grammar/mask.h"
#include "grammar/shortest.h"
#include "tokenizer/tokenizer.h"

#include <string.h>

#define BFS_MAX   6000 // states per search; a search that needs more is skipped (and counted)
#define WALK_LEN  48
#define TOK_MSG   200023
#define TOK_EOM   200007
#define TOK_START 200022

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

// ---- breadth-first search over bytes and token literals ----

struct pool {
    struct gl_mstate **st;
    int64_t *dist;
    uint32_t n, cap;
    uint32_t *slot; // open addressing by state hash: index + 1
    uint32_t hcap;
    const struct gl_gir *ir;
};

static struct gl_mstate *pool_state(struct pool *p, uint32_t i)
{
    if (i >= p->cap) {
        uint32_t nc = p->cap ? p->cap * 2 : 1024;
        p->st = realloc(p->st, nc * sizeof *p->st);
        p->dist = realloc(p->dist, nc * sizeof *p->dist);
        for (uint32_t k = p->cap; k < nc; k++)
            p->st[k] = NULL;
        p->cap = nc;
    }
    if (!p->st[i])
        GL_ASSERT(gl_mstate_new(&p->st[i], p->ir, NULL, NULL) == GL_OK);
    return p->st[i];
}

static void pool_free(struct pool *p)
{
    for (uint32_t k = 0; k < p->cap; k++)
        gl_mstate_free(p->st[k]);
    free(p->st);
    free(p->dist);
    free(p->slot);
    memset(p, 0, sizeof *p);
}

// Inserts a copy of s at distance d unless an equal state is there; 1 when new.
static int pool_add(struct pool *p, const struct gl_mstate *s, int64_t d)
{
    uint32_t mask = p->hcap - 1;
    for (uint32_t h = (uint32_t)gl_mstate_hash(s) & mask;; h = (h + 1) & mask) {
        if (!p->slot[h]) {
            gl_mstate_copy(pool_state(p, p->n), s);
            p->dist[p->n] = d;
            p->slot[h] = ++p->n;
            return 1;
        }
        if (gl_mstate_equal(p->st[p->slot[h] - 1], s))
            return 0;
    }
}

// Distance from s to the nearest complete document in bytes and token literals; -1 when the
// search grew past BFS_MAX states.
static int64_t bfs(struct pool *p, const struct gl_mstate *s, struct gl_mstate *tmp)
{
    p->n = 0;
    if (!p->slot) {
        p->hcap = 1u << 15; // a power of two above 4 * BFS_MAX
        p->slot = calloc(p->hcap, sizeof *p->slot);
    }
    memset(p->slot, 0, p->hcap * sizeof *p->slot);
    pool_add(p, s, 0);
    for (uint32_t head = 0; head < p->n; head++) {
        if (gl_mstate_can_end(p->st[head]))
            return p->dist[head];
        if (p->n >= BFS_MAX)
            return -1;
        int64_t d = p->dist[head];
        uint64_t set[4];
        gl_mstate_next_bytes(p->st[head], set);
        for (int b = 0; b < 256; b++) {
            if (!(set[b >> 6] >> (b & 63) & 1))
                continue;
            gl_mstate_copy(tmp, p->st[head]);
            if (gl_mstate_advance_byte(tmp, (uint8_t)b))
                pool_add(p, tmp, d + 1);
        }
        int32_t ids[16];
        int nt = gl_mstate_expected_tokens(p->st[head], ids, 16);
        for (int k = 0; k < nt && k < 16; k++) {
            gl_mstate_copy(tmp, p->st[head]);
            if (gl_mstate_advance_token(tmp, ids[k]))
                pool_add(p, tmp, d + 1);
        }
    }
    return -1; // no complete document reachable (never for a live state)
}

// ---- walks ----

struct tally {
    int compared, skipped, mismatched, below; // below: value under the search (never allowed)
};

// One random step: an accepted byte or token literal (a token literal one time in four when
// there is one). 0 when nothing is accepted.
static char trail[512];
static int trail_n;
static int random_step(struct gl_mstate *s, struct gl_mstate *tmp)
{
    int32_t ids[16];
    int nt = gl_mstate_expected_tokens(s, ids, 16);
    if (nt > 16)
        nt = 16;
    uint8_t ok[256];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        gl_mstate_copy(tmp, s);
        if (gl_mstate_advance_byte(tmp, (uint8_t)b))
            ok[n++] = (uint8_t)b;
    }
    if (nt > 0 && (n == 0 || rnd() % 4 == 0)) {
        if (trail_n < 500)
            trail[trail_n++] = '@';
        return gl_mstate_advance_token(s, ids[rnd() % (uint32_t)nt]);
    }
    if (n == 0)
        return 0;
    // Favour the bytes that structure the document, so walks leave strings and free text.
    uint8_t pick = ok[rnd() % (uint32_t)n];
    if (rnd() % 2) {
        for (int k = 0; k < n; k++)
            if (strchr("\"{}[],:0123456789-", ok[k]) && ok[k]) {
                pick = ok[(k + (int)(rnd() % 4)) % n];
                break;
            }
    }
    if (trail_n < 500)
        trail[trail_n++] = (char)pick;
    return gl_mstate_advance_byte(s, pick);
}

// exact: the value must equal the search; else only never be below it. plus: compare value + 1
// instead (the negative control). Returns the tally.
static struct tally walk_grammar(const struct gl_gir *ir, struct gl_short *sh, int walks, int exact,
                                 int plus)
{
    struct tally t = {0, 0, 0, 0};
    struct pool p = {.ir = ir};
    struct gl_mstate *s = NULL, *tmp = NULL, *tmp2 = NULL;
    GL_ASSERT(gl_mstate_new(&s, ir, NULL, NULL) == GL_OK);
    GL_ASSERT(gl_mstate_new(&tmp, ir, NULL, NULL) == GL_OK);
    GL_ASSERT(gl_mstate_new(&tmp2, ir, NULL, NULL) == GL_OK);
    for (int w = 0; w < walks; w++) {
        gl_mstate_reset(s);
        trail_n = 0;
        int wait = 0; // after a search too large, the next few states are skipped untried (time)
        for (int step = 0; step < WALK_LEN; step++) {
            int64_t want = wait > 0 ? -1 : bfs(&p, s, tmp);
            if (want < 0) {
                t.skipped++;
                wait = wait > 0 ? wait - 1 : 3;
            } else {
                int64_t got = gl_short_state(sh, s) + plus;
                t.compared++;
                if (got < want)
                    t.below++;
                if (exact ? got != want : got < want) {
                    if (t.mismatched++ < 3 && !plus)
                        fprintf(stderr,
                                "  walk %d step %d: shortest %lld, search %lld after '%.*s'\n", w,
                                step, (long long)got, (long long)want, trail_n, trail);
                }
            }
            if ((gl_mstate_can_end(s) && rnd() % 8 == 0) || !random_step(s, tmp2))
                break;
        }
    }
    gl_mstate_free(s);
    gl_mstate_free(tmp);
    gl_mstate_free(tmp2);
    pool_free(&p);
    return t;
}

static struct gl_grammar *compile(enum gl_grammar_kind kind, const char *src, int ws_max)
{
    struct gl_grammar *g = NULL;
    struct gl_grammar_opts o = gl_grammar_default_opts();
    o.ws_max = ws_max;
    struct gl_err err = {0};
    if (gl_grammar_compile(&g, kind, src, strlen(src), &o, &err) != GL_OK)
        fprintf(stderr, "  compile: %s\n", err.msg);
    return g;
}

// Walks g with the (byte 1, token 1) table; exact or upper-bound comparison.
static void check_grammar(const char *name, enum gl_grammar_kind kind, const char *src, int ws_max,
                          int exact, int walks)
{
    struct gl_grammar *g = compile(kind, src, ws_max);
    REQUIRE(g);
    struct gl_short *sh = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_short_new(&sh, &g->ir, 1, 1, &err) == GL_OK);
    struct tally t = walk_grammar(&g->ir, sh, walks, exact, 0);
    fflush(stdout);
    printf("# %s: %d states compared, %d skipped (search too large), %d mismatched\n", name,
           t.compared, t.skipped, t.mismatched);
    CHECKF(t.mismatched == 0, "%s: %d of %d states disagree", name, t.mismatched, t.compared);
    CHECK(t.below == 0);
    CHECKF(t.compared >= 10, "%s: %d compared, %d skipped", name, t.compared, t.skipped);
    gl_short_free(sh);
    gl_grammar_unref(g);
}

// clang-format off
static const char SCHEMA[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"id\",\"owner\"],"
    "\"properties\":{"
    "\"id\":{\"type\":\"integer\",\"minimum\":7,\"maximum\":12},"
    "\"tags\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":2,\"items\":{\"type\":\"string\","
    "\"maxLength\":2}},"
    "\"owner\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"n\"],"
    "\"properties\":{\"n\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}}}}}";
static const char PAIR[] = "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"kind\":{\"enum\":[\"alpha\",\"b\"]},"
    "\"pair\":{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"const\":\"x\"}],"
    "\"items\":false,\"minItems\":2}}}";
static const char STRINGS[] =
    "{\"type\":\"array\",\"minItems\":1,\"maxItems\":2,\"items\":{\"anyOf\":["
    "{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}-[0-9]{2}$\"},"
    "{\"type\":\"string\",\"format\":\"date\"},"
    "{\"type\":\"integer\",\"minimum\":-250,\"maximum\":-40},"
    "{\"type\":\"number\",\"exclusiveMinimum\":12.5,\"maximum\":12.625},"
    "{\"type\":\"number\",\"minimum\":0.001,\"maximum\":0.002},"
    "{\"type\":\"null\"}]}}";
static const char UPPER_ONLY[] =
    "{\"type\":\"object\",\"minProperties\":3,\"properties\":{\"a\":{\"type\":\"integer\"}},"
    "\"patternProperties\":{\"^x[0-9]$\":{\"type\":\"boolean\"}},\"additionalProperties\":false}";
static const char GBNF[] =
    "root ::= expr\n"
    "expr ::= term (\"+\" term)*\n"
    "term ::= [0-9] | \"(\" expr \")\" | \"neg \" term\n";
// clang-format on

// The ATEM turn with pinned header tokens (the release vocabulary's ids), a choice body and a
// tool (raw string parameters with length bounds, an enum), tool_choice auto.
static char *turn_spec(void)
{
    static const char spec[] =
        "{\"body\":{\"kind\":\"choice\",\"source\":[\"positive\",\"negative\",\"neutral\"]},"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":5},"
        "\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"],\"additionalProperties\":false}"
        "}}],\"tool_choice\":\"auto\",\"parallel\":true,\"reasoning\":true,"
        "\"header_tokens\":{\"to\":328,\"self\":19669,\"user\":76976,\"assistant\":140680}}";
    return strdup(spec);
}

TEST(test_schema_exact)
{
    check_grammar("schema compact", GL_GRAMMAR_JSON_SCHEMA, SCHEMA, 0, 1, 4);
    check_grammar("enum, prefixItems, ws 1", GL_GRAMMAR_JSON_SCHEMA, PAIR, 1, 1, 4);
}

// The value after each prefix equals the search (states a random walk rarely reaches: a split
// UTF-8 character under a minLength, an escape).
static void check_prefixes(const char *schema, const char *const *prefixes, int n)
{
    struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, schema, 0);
    REQUIRE(g);
    struct gl_short *sh = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_short_new(&sh, &g->ir, 1, 1, &err) == GL_OK);
    struct pool p = {.ir = &g->ir};
    struct gl_mstate *s = NULL, *tmp = NULL;
    REQUIRE(gl_mstate_new(&s, &g->ir, NULL, NULL) == GL_OK);
    REQUIRE(gl_mstate_new(&tmp, &g->ir, NULL, NULL) == GL_OK);
    for (int i = 0; i < n; i++) {
        gl_mstate_reset(s);
        for (const char *c = prefixes[i]; *c; c++)
            REQUIRE(gl_mstate_advance_byte(s, (uint8_t)*c));
        int64_t want = bfs(&p, s, tmp), got = gl_short_state(sh, s);
        CHECKF(want >= 0 && got == want, "after %s: shortest %lld, search %lld", prefixes[i],
               (long long)got, (long long)want);
    }
    gl_mstate_free(s);
    gl_mstate_free(tmp);
    pool_free(&p);
    gl_short_free(sh);
    gl_grammar_unref(g);
}

TEST(test_strings_numbers_exact)
{
    static const char *const pre[] = {"\"",       "\"\xe2", "\"\xe2\x82", "\"a\xf0\x9f",
                                      "\"ab\xc3", "\"\\",   "\"\\u00",    "\"abc\xe2\x82"};
    check_prefixes("{\"type\":\"string\",\"minLength\":3,\"maxLength\":5}", pre, 8);
    check_grammar("strings and numbers", GL_GRAMMAR_JSON_SCHEMA, STRINGS, 0, 1, 4);
}

TEST(test_regex_choice_gbnf_exact)
{
    check_grammar("regex", GL_GRAMMAR_REGEX, "[a-z]{2,4}-[0-9]+(\\.[0-9]{2})?|#", 0, 1, 4);
    check_grammar("choice", GL_GRAMMAR_CHOICE, "[\"positive\",\"negative\",\"neutral\",\"n/a\"]", 0,
                  1, 4);
    check_grammar("gbnf", GL_GRAMMAR_GBNF, GBNF, 0, 1, 4);
}

TEST(test_turn_exact)
{
    char *spec = turn_spec();
    check_grammar("atem turn", GL_GRAMMAR_ATEM_TURN, spec, 0, 1, T_BY_BUILD(2, 1));
    free(spec);
}

TEST(test_upper_bound_states)
{
    check_grammar("minProperties + patternProperties (upper bound)", GL_GRAMMAR_JSON_SCHEMA,
                  UPPER_ONLY, 0, 0, 4);
}

// Negative controls: the comparison must notice a wrong answer.
TEST(test_negative_controls)
{
    char *spec = turn_spec();
    struct gl_grammar *g = compile(GL_GRAMMAR_ATEM_TURN, spec, 0);
    free(spec);
    REQUIRE(g);
    struct gl_short *no_tokens = NULL, *sh = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_short_new(&no_tokens, &g->ir, 1, 0, &err) == GL_OK);
    REQUIRE(gl_short_new(&sh, &g->ir, 1, 1, &err) == GL_OK);
    struct tally a = walk_grammar(&g->ir, no_tokens, 2, 1, 0);
    struct tally b = walk_grammar(&g->ir, sh, 1, 1, 1);
    printf("# controls: token literals ignored: %d of %d disagree; value + 1: %d of %d\n",
           a.mismatched, a.compared, b.mismatched, b.compared);
    CHECK(a.compared > 0 && a.below > 0);
    CHECK(b.compared > 0 && b.mismatched == b.compared);
    gl_short_free(no_tokens);
    gl_short_free(sh);
    gl_grammar_unref(g);
}

// ---- the public API on the real vocabulary ----

static struct gl_tokenizer *tok;
static struct gl_gvocab *vocab;
static const int32_t STOPS[2] = {200008, 200001}; // <|eot|>, <|end_of_text|>

TEST(test_turn_counts)
{
    char *spec = turn_spec();
    struct gl_grammar *g = compile(GL_GRAMMAR_ATEM_TURN, spec, 0);
    free(spec);
    REQUIRE(g);
    struct gl_matcher *m = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_matcher_new(&m, g, vocab, STOPS, 2, &err) == GL_OK);
    int64_t lo, up;
    // " to" "=user" <|message|> "neutral" (7 bytes) <|eot|>.
    gl_matcher_shortest(m, &lo, &up);
    CHECKF(up == 11, "upper %lld", (long long)up);
    // The lower bound: never above the 5 tokens " to" "=user" <|message|> "neutral" <|eot|>.
    CHECKF(lo >= 3 && lo <= 5, "lower %lld", (long long)lo);
    // Inside the reasoning: <|eom|> <|start|> "assistant" " to" "=user" <|message|> + 7 + stop.
    CHECK(gl_matcher_accept(m, 328) && gl_matcher_accept(m, 19669) &&
          gl_matcher_accept(m, TOK_MSG) && gl_matcher_accept_bytes(m, "hmm", 3));
    gl_matcher_shortest(m, &lo, &up);
    CHECKF(up == 14, "upper %lld", (long long)up);
    CHECK(lo >= 3 && lo <= 8);
    // A reasoning token leaves the upper bound at 14, so it needs 15 tokens left; with 14 the
    // reasoning must close now: only <|eom|> is left.
    uint32_t *mask = calloc(gl_gvocab_mask_words(vocab), 4);
    gl_matcher_fill_mask_within(m, mask, 15);
    CHECK(mask[TOK_EOM / 32] >> (TOK_EOM % 32) & 1);
    CHECK(mask[('a') / 32] >> ('a' % 32) & 1); // 15 tokens: free text still fits
    gl_matcher_fill_mask_within(m, mask, 14);
    int n = 0;
    for (size_t w = 0; w < gl_gvocab_mask_words(vocab); w++)
        n += __builtin_popcount(mask[w]);
    CHECKF(n == 1 && (mask[TOK_EOM / 32] >> (TOK_EOM % 32) & 1), "%d tokens allowed", n);
    // No token fits at all (1 token left, 14 needed): the filter never empties the mask; it
    // keeps the tokens that finish soonest, here <|eom|> again.
    gl_matcher_fill_mask_within(m, mask, 1);
    n = 0;
    for (size_t w = 0; w < gl_gvocab_mask_words(vocab); w++)
        n += __builtin_popcount(mask[w]);
    CHECKF(n == 1 && (mask[TOK_EOM / 32] >> (TOK_EOM % 32) & 1), "%d tokens allowed", n);
    free(mask);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

// Accepts a token drawn uniformly from mask (cand: scratch for every id); 0 when none.
static int accept_random(struct gl_matcher *m, const uint32_t *mask, int32_t *cand)
{
    int n = 0;
    for (size_t w = 0; w < gl_gvocab_mask_words(vocab); w++)
        for (uint32_t b = mask[w]; b; b &= b - 1)
            cand[n++] = (int32_t)(w * 32 + (size_t)__builtin_ctz(b));
    return n > 0 && gl_matcher_accept(m, cand[rnd() % (uint32_t)n]);
}

// Random token walks from the start with `remaining` tokens: 1 when the walk accepted a stop
// token within them.
static int token_walk(struct gl_matcher *m, uint32_t *mask, int64_t remaining, int within)
{
    size_t words = gl_gvocab_mask_words(vocab);
    int32_t *cand = malloc(words * 32 * sizeof *cand);
    gl_matcher_reset(m);
    int64_t used = 0;
    while (!gl_matcher_is_finished(m) && used < remaining) {
        if (within)
            gl_matcher_fill_mask_within(m, mask, remaining - used);
        else
            gl_matcher_fill_mask(m, mask);
        if (!accept_random(m, mask, cand))
            break;
        used++;
    }
    free(cand);
    return gl_matcher_is_finished(m);
}

// A long extraction: an array of objects with required fields; the budget must end it as a
// complete document.
TEST(test_finish_within_walks)
{
    static const char schema[] =
        "{\"type\":\"object\",\"required\":[\"items\"],\"additionalProperties\":false,"
        "\"properties\":{\"items\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":"
        "\"object\",\"required\":[\"name\",\"qty\"],\"additionalProperties\":false,"
        "\"properties\":{\"name\":{\"type\":\"string\"},\"qty\":{\"type\":\"integer\","
        "\"minimum\":1}}}}}}";
    struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, schema, 0);
    REQUIRE(g);
    struct gl_matcher *m = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_matcher_new(&m, g, vocab, STOPS, 2, &err) == GL_OK);
    int64_t up;
    gl_matcher_shortest(m, NULL, &up);
    CHECKF(up == (int64_t)strlen("{\"items\":[{\"name\":\"\",\"qty\":1}]}") + 1, "upper %lld",
           (long long)up);
    uint32_t *mask = calloc(gl_gvocab_mask_words(vocab), 4);
    int ok = 0, plain_ok = 0, n = 8;
    for (int i = 0; i < n; i++) {
        ok += token_walk(m, mask, up + 12, 1);
        plain_ok += token_walk(m, mask, up + 12, 0);
    }
    printf("# finish within %lld tokens: %d of %d walks ended; without the filter %d\n",
           (long long)up + 12, ok, n, plain_ok);
    CHECK(ok == n);
    CHECK(plain_ok < n); // negative control: unfiltered random walks run out
    free(mask);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

// The unit argument of the upper bound (grammar.h): each of the 256 bytes is a token of its own
// that byte-level masks may allow. Were one missing, gl_matcher_shortest would report -1.
// The finish-within filter's trie walk (shortest.h gl_short_filter) against its reference
// (every token judged one by one from the state): along random token walks through grammars
// whose states need every token stepped (open and closed object keys, numbers, a GBNF, a regex,
// the ATEM turn), the filtered mask at budgets around the state's shortest completion must be
// the same bit for bit. Counts how many compared masks the filter narrowed (not vacuous).
static void filter_equal(const char *name, enum gl_grammar_kind kind, const char *src, int walks,
                         int *compared, int *narrowed)
{
    struct gl_grammar *g = compile(kind, src, 0);
    REQUIRE(g);
    struct gl_matcher *m = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_matcher_new(&m, g, vocab, STOPS, 2, &err) == GL_OK);
    size_t words = gl_gvocab_mask_words(vocab);
    uint32_t *plain = calloc(words, 4), *fast = calloc(words, 4), *ref = calloc(words, 4);
    int32_t *cand = malloc(words * 32 * sizeof *cand);
    int diff = 0;
    int64_t us[2] = {0, 0}; // the walk, the reference (fill included in both)
    for (int w = 0; w < walks; w++) {
        gl_matcher_reset(m);
        for (int step = 0; step < 16 && !gl_matcher_is_finished(m); step++) {
            int64_t up;
            gl_matcher_shortest(m, NULL, &up);
            gl_matcher_fill_mask(m, plain);
            for (int64_t left = up - 1; left <= up + 1; left++) {
                if (left < 1)
                    continue;
                gl_short_filter_reference(0);
                int64_t t0 = gl_time_us();
                gl_matcher_fill_mask_within(m, fast, left);
                gl_short_filter_reference(1);
                int64_t t1 = gl_time_us();
                gl_matcher_fill_mask_within(m, ref, left);
                gl_short_filter_reference(0);
                us[0] += t1 - t0;
                us[1] += gl_time_us() - t1;
                (*compared)++;
                *narrowed += memcmp(ref, plain, words * 4) != 0;
                if (memcmp(fast, ref, words * 4) != 0 && diff++ < 3)
                    printf("  %s: walk %d step %d left %lld: the walk's mask differs\n", name, w,
                           step, (long long)left);
            }
            if (!accept_random(m, plain, cand))
                break;
        }
    }
    CHECKF(diff == 0, "%s: %d masks differ", name, diff);
    printf("  %s: mask + filter %.1f ms by the walk, %.1f ms one token at a time\n", name,
           (double)us[0] / 1e3, (double)us[1] / 1e3);
    free(plain);
    free(fast);
    free(ref);
    free(cand);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

TEST(test_filter_walk_equals_reference)
{
    static const char open_obj[] = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":"
                                   "\"number\"}}}";
    int compared = 0, narrowed = 0;
    filter_equal("open object", GL_GRAMMAR_JSON_SCHEMA, open_obj, T_BY_BUILD(1, 0), &compared,
                 &narrowed);
    filter_equal("schema", GL_GRAMMAR_JSON_SCHEMA, SCHEMA, T_BY_BUILD(2, 1), &compared, &narrowed);
    filter_equal("gbnf", GL_GRAMMAR_GBNF, GBNF, T_BY_BUILD(2, 1), &compared, &narrowed);
    filter_equal("regex", GL_GRAMMAR_REGEX, "[a-z]{2,4}-[0-9]+(\\.[0-9]{2})?|#", T_BY_BUILD(2, 1),
                 &compared, &narrowed);
    char *spec = turn_spec();
    filter_equal("atem turn", GL_GRAMMAR_ATEM_TURN, spec, T_BY_BUILD(2, 1), &compared, &narrowed);
    free(spec);
    printf("# filter walk vs reference: %d masks compared, %d narrowed by the filter\n", compared,
           narrowed);
    CHECK(compared > 100 && narrowed > 20);
}

TEST(test_every_byte_is_a_token)
{
    uint64_t seen[4] = {0};
    for (int32_t id = 0; id < gl_gvocab_n_vocab(vocab); id++) {
        size_t len;
        const uint8_t *p = gl_gvocab_token(vocab, id, &len);
        if (p && len == 1 && !gl_gvocab_is_excluded(vocab, id))
            seen[p[0] >> 6] |= 1ull << (p[0] & 63);
    }
    int n = 0;
    for (int k = 0; k < 4; k++)
        n += __builtin_popcountll(seen[k]);
    CHECKF(n == 256, "%d of 256 bytes are single tokens", n);
}

static void free_all(void)
{
    gl_gvocab_free(vocab);
    gl_tokenizer_free(tok);
}

int main(void)
{
    const char *path = t_vocab_path();
    struct gl_err err = {0};
    if (gl_tokenizer_load_tiktoken(&tok, path, &err) != GL_OK ||
        gl_gvocab_new(&vocab, tok, &err) != GL_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return 1;
    }
    atexit(free_all);
    RUN_TESTS(test_schema_exact, test_strings_numbers_exact, test_regex_choice_gbnf_exact,
              test_turn_exact, test_upper_bound_states, test_every_byte_is_a_token,
              test_negative_controls, test_turn_counts, test_finish_within_walks,
              test_filter_walk_equals_reference);
}
