// SPDX-License-Identifier: MIT
// The whole-turn ATEM grammar (GL_GRAMMAR_ATEM_TURN, grammar.h) and jump-forward
// (gl_matcher_forced_tokens) over the real vocabulary. Random token walks under the mask for each
// arm configuration are split into messages by their special tokens and fed to the ATEM parser
// (atem_parse.h): the arms, recipients, call counts, reasoning and bodies must be what the spec
// allows. Also exact accepts and refusals, forced-token stretches, a jump-forward walk equal to
// the plain walk, the grammar cache, errors, and the cost of a free-text mask.
#include "chat/atem_parse.h"
#include "grammar/grammar.h"
#include "grammar/mask.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <regex.h>
#include <string.h>
#include <time.h>

// Walks per arm configuration (tool_choice, reasoning, parallel), spread over the bodies where
// there is an answer arm (fewer under AddressSanitizer: test.h).
#define N_WALKS  T_BY_BUILD(32, 8)
#define WALK_CAP 1200 // tokens

#define TOK_MSG   GL_ATEM_TOK_MESSAGE
#define TOK_START GL_ATEM_TOK_START

static struct gl_tokenizer *tok;
static struct gl_gvocab *vocab;
static size_t words;
static int32_t n_vocab;
static const int32_t STOPS[2] = {GL_TOK_EOT, GL_TOK_EOS};

// clang-format off
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"obj"
    "ect\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":12},\"unit"
    "\":{\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"],\"additionalProperties\":"
    "false}}},{\"name\":\"ping\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}]";
static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"answer\":{\"type\":\"string\",\"maxLength\":10},\"sco"
    "re\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10}},\"required\":[\"answer\",\"score\"],"
    "\"additionalProperties\":false}";
// clang-format on
static const char REGEX[] = "[a-z]{1,6}(-[0-9]{1,3})?";
static const char *const CHOICES[] = {"yes", "no", "maybe so"};

enum body_kind { B_FREE, B_SCHEMA, B_REGEX, B_CHOICE, B_N };
enum choice { C_NONE, C_AUTO, C_REQUIRED, C_NAMED, C_N };
static const char *const CHOICE_NAMES[] = {"none", "auto", "required", "named"};
static const char *const BODY_NAMES[] = {"free", "json_schema", "regex", "choice"};

// Header pieces pinned to their one-token spelling (grammar.h "header_tokens"), encoded in main.
enum { HT_TO, HT_SELF, HT_USER, HT_ASSISTANT, HT_N };
static const char *const HT_NAMES[] = {"to", "self", "user", "assistant"};
static const char *const HT_TEXT[] = {" to", "=self", "=user", "assistant"};
static int32_t ht[HT_N] = {-1, -1, -1, -1};

static json_t *header_tokens(void)
{
    json_t *o = json_object();
    for (int i = 0; i < HT_N; i++)
        json_object_set_new(o, HT_NAMES[i], json_integer(ht[i]));
    return o;
}

// A spec document (JSON text, malloc'ed); pin: with header_tokens.
static char *make_spec_pin(enum choice ch, int reasoning, int parallel, enum body_kind body,
                           int pin)
{
    json_t *s = json_object();
    json_t *b = json_null();
    if (body == B_SCHEMA)
        b = json_pack("{s:s, s:s}", "kind", "json_schema", "source", SCHEMA);
    else if (body == B_REGEX)
        b = json_pack("{s:s, s:s}", "kind", "regex", "source", REGEX);
    else if (body == B_CHOICE)
        b = json_pack("{s:s, s:s}", "kind", "choice", "source", "[\"yes\",\"no\",\"maybe so\"]");
    json_object_set_new(s, "body", b);
    json_object_set_new(s, "tools", json_loads(TOOLS, 0, NULL));
    json_object_set_new(s, "tool_choice",
                        ch == C_NAMED ? json_pack("{s:s}", "name", "get_weather")
                                      : json_string(CHOICE_NAMES[ch]));
    json_object_set_new(s, "parallel", json_boolean(parallel));
    json_object_set_new(s, "reasoning", json_boolean(reasoning));
    if (pin)
        json_object_set_new(s, "header_tokens", header_tokens());
    char *text = json_dumps(s, JSON_COMPACT);
    json_decref(s);
    return text;
}

static char *make_spec(enum choice ch, int reasoning, int parallel, enum body_kind body)
{
    return make_spec_pin(ch, reasoning, parallel, body, 0);
}

static struct gl_grammar *compile(const char *spec, struct gl_err *err)
{
    struct gl_grammar *g = NULL;
    if (gl_grammar_compile(&g, GL_GRAMMAR_ATEM_TURN, spec, strlen(spec), NULL, err) != GL_OK)
        return NULL;
    return g;
}

static struct gl_matcher *matcher(struct gl_grammar *g, int n_stop)
{
    struct gl_err err = {0};
    struct gl_matcher *m = NULL;
    if (gl_matcher_new(&m, g, vocab, STOPS, n_stop, &err) != GL_OK)
        fprintf(stderr, "  matcher_new: %s\n", err.msg);
    return m;
}

static int allowed(const uint32_t *mask, int32_t id)
{
    return (mask[id >> 5] >> (id & 31)) & 1;
}

static int is_special(int32_t id)
{
    return gl_tokenizer_is_special(tok, id);
}

// ---- random walks ----

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

// Tokens that can close a value (quotes, brackets, '<', '-', digits): picked among the allowed
// ones often, so walks through JSON, regex and tool bodies finish in a few hundred tokens.
static int32_t token_of(const char *text);

static int32_t *closers;
static int n_closers;
static int32_t *cand;

// One random pick among the allowed tokens: a framing special a sixth of the time (free text
// ends after a few tokens), a closer half of the rest, else a uniform probe. Draws only from rnd.
static int32_t pick(const uint32_t *mask)
{
    static const int32_t framing[] = {TOK_MSG, GL_TOK_EOM, TOK_START, GL_TOK_EOT, GL_TOK_EOS};
    int nc = 0;
    if (rnd() % 6 == 0) {
        for (int i = 0; i < 5; i++)
            if (allowed(mask, framing[i]))
                cand[nc++] = framing[i];
        if (nc)
            return cand[rnd() % (uint32_t)nc];
    }
    if (rnd() % 2 == 0) {
        for (int i = 0; i < n_closers; i++)
            if (allowed(mask, closers[i]))
                cand[nc++] = closers[i];
        if (nc)
            return cand[rnd() % (uint32_t)nc];
    }
    for (int t = 0; t < 64; t++) {
        int32_t id = (int32_t)(rnd() % (uint32_t)n_vocab);
        if (allowed(mask, id))
            return id;
    }
    nc = 0;
    for (size_t w = 0; w < words; w++)
        for (uint32_t x = mask[w]; x; x &= x - 1)
            cand[nc++] = (int32_t)(w * 32 + (size_t)__builtin_ctz(x));
    return nc ? cand[rnd() % (uint32_t)nc] : -1;
}

// The only allowed token, -1 when none, -2 when several.
static int32_t only_allowed(const uint32_t *mask)
{
    int32_t only = -1;
    for (size_t w = 0; w < words; w++) {
        uint32_t x = mask[w];
        if (!x)
            continue;
        if (only >= 0 || (x & (x - 1)))
            return -2;
        only = (int32_t)(w * 32 + (size_t)__builtin_ctz(x));
    }
    return only;
}

// A walk until a stop token is accepted. jump: 0 picks every step (a step with one allowed
// non-stop token takes it without a draw), 1 uses gl_matcher_forced_tokens between picks. Returns
// the token count, or -1 (cap reached, or the mask and accept disagreed). *forced: tokens taken
// without a draw.
static int walk(struct gl_grammar *g, int jump, int32_t *ids, int cap, uint32_t *mask, int *forced)
{
    struct gl_matcher *m = matcher(g, 2);
    if (!m)
        return -1;
    int n = 0, ok = 0;
    *forced = 0;
    while (n < cap) {
        int32_t id;
        if (jump) {
            int32_t k = gl_matcher_forced_tokens(m, ids + n, cap - n, mask);
            n += k;
            *forced += k;
            if (n >= cap)
                break;
            id = pick(mask);
        } else {
            gl_matcher_fill_mask(m, mask);
            id = only_allowed(mask);
            if (id >= 0 && id != GL_TOK_EOT && id != GL_TOK_EOS)
                (*forced)++;
            else
                id = pick(mask);
        }
        if (id < 0) {
            fprintf(stderr, "  empty mask after %d tokens\n", n);
            break;
        }
        if (!gl_matcher_accept(m, id)) {
            fprintf(stderr, "  token %d allowed by the mask but refused\n", id);
            break;
        }
        ids[n++] = id;
        if (gl_matcher_is_finished(m)) {
            ok = 1;
            break;
        }
    }
    gl_matcher_free(m);
    return ok ? n : -1;
}

// ---- checking one walk ----

struct msg {
    char header[256]; // bytes before <|message|>
    char *body;       // malloc'ed, NUL-terminated (may hold NULs: body_len)
    size_t body_len;
    int32_t end; // the special token that ended it
};

// Splits a walk into messages by its special tokens: HEADER <|message|> BODY END, END = <|eom|>
// (then <|start|>) or a stop token (the last token). Returns the count, or -1 when a special
// token sits anywhere else (inside a header or a body, or after the end).
static int split(const int32_t *ids, int n, struct msg *out, int cap)
{
    int nm = 0, i = 0;
    while (i < n && nm < cap) {
        struct msg *m = &out[nm];
        memset(m, 0, sizeof *m);
        size_t hl = 0;
        for (; i < n && !is_special(ids[i]); i++) {
            size_t len;
            const char *p = gl_tokenizer_token_bytes(tok, ids[i], &len);
            if (hl + len >= sizeof m->header)
                return -1;
            memcpy(m->header + hl, p, len);
            hl += len;
        }
        if (i == n || ids[i++] != TOK_MSG)
            return -1;
        size_t cap_b = 64;
        m->body = malloc(cap_b);
        nm++;
        for (; i < n && !is_special(ids[i]); i++) {
            size_t len;
            const char *p = gl_tokenizer_token_bytes(tok, ids[i], &len);
            while (m->body_len + len + 1 > cap_b)
                m->body = realloc(m->body, cap_b *= 2);
            memcpy(m->body + m->body_len, p, len);
            m->body_len += len;
        }
        m->body[m->body_len] = 0;
        if (i == n)
            return -1;
        m->end = ids[i++];
        if (m->end == GL_TOK_EOT || m->end == GL_TOK_EOS)
            return i == n ? nm : -1;
        if (m->end != GL_TOK_EOM || i == n || ids[i++] != TOK_START)
            return -1;
    }
    return -1;
}

static void free_msgs(struct msg *ms, int n)
{
    for (int i = 0; i < n; i++)
        free(ms[i].body);
}

// The recipient of a header: the first one has no role word (the prompt wrote `assistant`).
static const char *recipient(const struct msg *m, int first)
{
    const char *want = first ? " to=" : "assistant to=";
    size_t wl = strlen(want);
    return strncmp(m->header, want, wl) == 0 ? m->header + wl : NULL;
}

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as the parser emits it.
static int utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        int k = c < 0x80                ? 0
                : c >= 0xC2 && c < 0xE0 ? 1
                : (c & 0xF0) == 0xE0    ? 2
                : c >= 0xF0 && c < 0xF5 ? 3
                                        : -1;
        if (k < 0 || i + (size_t)k >= n)
            return 0;
        uint8_t c1 = k ? (uint8_t)s[i + 1] : 0x80;
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 >= 0x90))
            return 0;
        for (int j = 1; j <= k; j++)
            if (((uint8_t)s[i + (size_t)j] & 0xC0) != 0x80)
                return 0;
        i += (size_t)k + 1;
    }
    return 1;
}

struct tally {
    int walks, finished, good, pinned;
    int user, tool, reasoning, multi_calls;
};

struct parsed {
    struct gl_atem_accum acc;
    gl_status st;
};

static void parse_ids(struct parsed *o, const int32_t *ids, int n)
{
    struct gl_err err = {0};
    o->st = gl_atem_accum_init(&o->acc);
    struct gl_atem_parser *p = NULL;
    if (o->st == GL_OK)
        o->st = gl_atem_parser_new(&p, tok, NULL, gl_atem_accum_sink, &o->acc, &err);
    for (int i = 0; o->st == GL_OK && i < n; i++)
        o->st = gl_atem_parser_feed(p, ids[i], &err);
    if (o->st == GL_OK)
        o->st = gl_atem_parser_finish(p, &err);
    gl_atem_parser_free(p);
}

// The body of an answer against the body constraint; why: the reason when not.
static int body_ok(enum body_kind body, const char *text, size_t len, const char **why)
{
    if (body == B_SCHEMA) {
        json_t *j = json_loadb(text, len, 0, NULL);
        json_t *a = json_object_get(j, "answer"), *s = json_object_get(j, "score");
        int ok = json_is_object(j) && json_object_size(j) == 2 && json_is_string(a) &&
                 json_is_integer(s) && json_integer_value(s) >= 0 && json_integer_value(s) <= 10;
        json_decref(j);
        *why = "schema body";
        return ok;
    }
    if (body == B_REGEX) {
        regex_t re;
        if (regcomp(&re, "^[a-z]{1,6}(-[0-9]{1,3})?$", REG_EXTENDED | REG_NOSUB))
            return 0;
        int ok = strlen(text) == len && regexec(&re, text, 0, NULL, 0) == 0;
        regfree(&re);
        *why = "regex body";
        return ok;
    }
    if (body == B_CHOICE) {
        *why = "choice body";
        for (int i = 0; i < 3; i++)
            if (strlen(CHOICES[i]) == len && !memcmp(CHOICES[i], text, len))
                return 1;
        return 0;
    }
    return 1;
}

// Checks one finished walk; why: what was wrong.
static int check_walk(const int32_t *ids, int n, enum choice ch, int reasoning, int parallel,
                      enum body_kind body, struct tally *t, const char **why)
{
    struct msg ms[16];
    int nm = split(ids, n, ms, 16);
    *why = "special token outside the framing";
    if (nm < 0)
        return 0;
    int ok = 1, k = 0, n_tool = 0, has_user = 0, has_reason = 0;
    const char *r0 = recipient(&ms[0], 1);
    if (r0 && !strcmp(r0, "self")) {
        has_reason = 1;
        ok = reasoning && ms[0].end == GL_TOK_EOM;
        *why = "reasoning not allowed or not ended by <|eom|>";
        k = 1;
    }
    for (int i = k; ok && i < nm; i++) {
        const char *r = recipient(&ms[i], i == 0);
        int last = i == nm - 1;
        if (!r) {
            *why = "bad header";
            ok = 0;
        } else if (!strcmp(r, "user")) {
            has_user = 1;
            ok = (ch == C_NONE || ch == C_AUTO) && i == k && last &&
                 body_ok(body, ms[i].body, ms[i].body_len, why);
            if (ok && body == B_FREE)
                *why = "user arm";
        } else {
            n_tool++;
            *why = "tool arm";
            ok = ch != C_NONE && (ch != C_NAMED || !strcmp(r, "get_weather")) &&
                 (!strcmp(r, "get_weather") || !strcmp(r, "ping")) && (last || parallel) &&
                 !has_user && (last || ms[i].end == GL_TOK_EOM);
        }
    }
    ok = ok && (has_user || n_tool > 0);
    // The parser reads the same thing.
    struct parsed o;
    parse_ids(&o, ids, n);
    if (ok) {
        *why = "parser";
        ok = o.st == GL_OK && o.acc.n_calls == n_tool && (!o.acc.has_reasoning || has_reason) &&
             (has_user || !o.acc.has_content);
        for (int c = 0; ok && c < o.acc.n_calls; c++) {
            json_t *args =
                json_loadb(o.acc.calls[c].arguments, o.acc.calls[c].arguments_len, 0, NULL);
            ok = args && !o.acc.calls[c].truncated &&
                 (strcmp(o.acc.calls[c].name, "get_weather") ||
                  json_is_string(json_object_get(args, "city")));
            json_decref(args);
        }
        // A free or constrained answer comes back as sent (when it is text at all).
        const struct msg *um = has_user ? &ms[nm - 1] : NULL;
        if (ok && um && utf8_valid(um->body, um->body_len))
            ok = o.acc.content.len == um->body_len &&
                 (!um->body_len || !memcmp(o.acc.content.p, um->body, um->body_len));
        if (ok && has_reason && utf8_valid(ms[0].body, ms[0].body_len))
            ok = o.acc.reasoning.len == ms[0].body_len &&
                 (!ms[0].body_len || !memcmp(o.acc.reasoning.p, ms[0].body, ms[0].body_len));
    }
    t->user += has_user;
    t->tool += n_tool > 0;
    t->reasoning += has_reason;
    t->multi_calls += n_tool > 1;
    gl_atem_accum_free(&o.acc);
    free_msgs(ms, nm);
    return ok;
}

static void print_walk(const int32_t *ids, int n)
{
    fprintf(stderr, "  walk:");
    for (int i = 0; i < n && i < 200; i++) {
        size_t len;
        const char *p = gl_tokenizer_token_bytes(tok, ids[i], &len);
        if (is_special(ids[i]))
            fprintf(stderr, "[%d]", ids[i]);
        else
            fprintf(stderr, "%.*s", (int)len, p);
    }
    fputc('\n', stderr);
}

// A walk under pinned header tokens spells every header canonically: " to" first, then "=self"
// or "=user" (the test tools' names start with neither) or the tool's bytes, and "assistant"
// " to" after each <|start|>.
static int pinned_ok(const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) {
        int h; // the header's " to"
        if (i == 0) {
            h = 0;
        } else if (ids[i] == TOK_START) {
            if (i + 1 >= n || ids[i + 1] != ht[HT_ASSISTANT])
                return 0;
            h = i + 2;
        } else {
            continue;
        }
        if (h + 1 >= n || ids[h] != ht[HT_TO])
            return 0;
        int32_t r = ids[h + 1];
        size_t len;
        const char *p = gl_tokenizer_token_bytes(tok, r, &len);
        int reserved = len >= 5 && (!memcmp(p, "=self", 5) || !memcmp(p, "=user", 5));
        if (reserved && r != ht[HT_SELF] && r != ht[HT_USER])
            return 0;
        if ((r == ht[HT_SELF] || r == ht[HT_USER]) && (h + 2 >= n || ids[h + 2] != TOK_MSG))
            return 0;
    }
    return 1;
}

// Walks alternate between the grammar with the header spelled in bytes and the one with
// header_tokens pinned; both must give right turns.
static void run_config(enum choice ch, int reasoning, int parallel, enum body_kind body,
                       int n_walks, struct tally *t)
{
    struct gl_grammar *g[2] = {NULL, NULL};
    for (int pin = 0; pin < 2; pin++) {
        char *spec = make_spec_pin(ch, reasoning, parallel, body, pin);
        struct gl_err err = {0};
        g[pin] = compile(spec, &err);
        free(spec);
        if (!g[pin])
            fprintf(stderr, "  compile %s/%d/%d/%s pinned %d: %s\n", CHOICE_NAMES[ch], reasoning,
                    parallel, BODY_NAMES[body], pin, err.msg);
    }
    if (!g[0] || !g[1]) {
        t->walks += n_walks;
        gl_grammar_unref(g[0]);
        gl_grammar_unref(g[1]);
        return;
    }
    uint32_t *mask = malloc(words * 4);
    int32_t *ids = malloc(WALK_CAP * sizeof *ids);
    for (int w = 0; w < n_walks; w++) {
        int forced, pin = w & 1;
        int n = walk(g[pin], 0, ids, WALK_CAP, mask, &forced);
        t->walks++;
        if (n < 0)
            continue;
        t->finished++;
        t->pinned += pin;
        const char *why = "";
        if (check_walk(ids, n, ch, reasoning, parallel, body, t, &why) &&
            (!pin || (why = "header not in pinned tokens", pinned_ok(ids, n)))) {
            t->good++;
        } else {
            fprintf(stderr, "  bad walk (%s/%s reasoning %d parallel %d pinned %d): %s\n",
                    CHOICE_NAMES[ch], BODY_NAMES[body], reasoning, parallel, pin, why);
            print_walk(ids, n);
        }
    }
    free(mask);
    free(ids);
    gl_grammar_unref(g[0]);
    gl_grammar_unref(g[1]);
}

static void report(const char *what, const struct tally *t)
{
    printf("# %s: %d/%d finished (%d pinned), %d good; user %d, tool %d, reasoning %d, several "
           "calls %d\n",
           what, t->finished, t->walks, t->pinned, t->good, t->user, t->tool, t->reasoning,
           t->multi_calls);
}

// Most walks finish (a few may run into the cap in long free text), and every finished one is
// right.
static void check_tally(const struct tally *t)
{
    CHECK(t->finished >= t->walks - t->walks / 8);
    CHECK(t->good == t->finished);
    CHECK(t->pinned > 0 && t->pinned < t->finished);
}

TEST(test_walks_none)
{
    REQUIRE(vocab);
    for (int r = 0; r < 2; r++) {
        struct tally t = {0};
        for (int b = 0; b < B_N; b++)
            run_config(C_NONE, r, 1, (enum body_kind)b, N_WALKS / B_N, &t);
        report(r ? "none, reasoning" : "none", &t);
        check_tally(&t);
        CHECK(t.tool == 0 && t.user == t.finished);
        CHECK(r ? t.reasoning > 0 : t.reasoning == 0);
    }
}

TEST(test_walks_auto)
{
    REQUIRE(vocab);
    for (int r = 0; r < 2; r++)
        for (int p = 0; p < 2; p++) {
            struct tally t = {0};
            for (int b = 0; b < B_N; b++)
                run_config(C_AUTO, r, p, (enum body_kind)b, N_WALKS / B_N, &t);
            char what[64];
            snprintf(what, sizeof what, "auto, reasoning %d, parallel %d", r, p);
            report(what, &t);
            check_tally(&t);
            CHECK(t.user > 0 && t.tool > 0); // both arms are drawn (fixed seed)
            CHECK(r ? t.reasoning > 0 : t.reasoning == 0);
            CHECK(p ? t.multi_calls > 0 : t.multi_calls == 0);
        }
}

TEST(test_walks_required_named)
{
    REQUIRE(vocab);
    for (int c = C_REQUIRED; c <= C_NAMED; c++)
        for (int r = 0; r < 2; r++)
            for (int p = 0; p < 2; p++) {
                struct tally t = {0};
                run_config((enum choice)c, r, p, B_SCHEMA, N_WALKS, &t); // the body is ignored
                char what[64];
                snprintf(what, sizeof what, "%s, reasoning %d, parallel %d", CHOICE_NAMES[c], r, p);
                report(what, &t);
                check_tally(&t);
                CHECK(t.user == 0 && t.tool == t.finished);
                CHECK(r ? t.reasoning > 0 : t.reasoning == 0);
                CHECK(p ? t.multi_calls > 0 : t.multi_calls == 0);
            }
}

// ---- exact cases ----

static int acc_str(struct gl_matcher *m, const char *s)
{
    return gl_matcher_accept_bytes(m, s, strlen(s));
}

static int32_t token_of(const char *text)
{
    gl_token *ids = NULL;
    size_t n = 0;
    struct gl_err err = {0};
    if (gl_tokenizer_encode(tok, text, strlen(text), 0, 0, &ids, &n, &err) != GL_OK)
        return -1;
    int32_t id = n == 1 ? ids[0] : -1;
    gl_free(ids);
    return id;
}

static struct gl_grammar *compile_text(const char *spec)
{
    struct gl_err err = {0};
    struct gl_grammar *g = compile(spec, &err);
    if (!g)
        fprintf(stderr, "  compile: %s\n", err.msg);
    return g;
}

TEST(test_exact)
{
    REQUIRE(vocab);
    char *spec = make_spec(C_AUTO, 1, 0, B_FREE);
    struct gl_grammar *a = compile_text(spec);
    free(spec);
    spec = make_spec(C_REQUIRED, 1, 1, B_FREE);
    struct gl_grammar *req = compile_text(spec);
    free(spec);
    spec = make_spec(C_NONE, 0, 0, B_SCHEMA);
    struct gl_grammar *js = compile_text(spec);
    free(spec);
    spec = make_spec(C_NAMED, 0, 0, B_FREE);
    struct gl_grammar *named = compile_text(spec);
    free(spec);
    REQUIRE(a && req && js && named);
    uint32_t *mask = malloc(words * 4);
    struct gl_matcher *m;
    const char *call = "<atem:function_calls>\n<atem:invoke name=\"ping\">\n</atem:invoke>\n"
                       "</atem:function_calls>";

    // auto: the answer arm, free text with any bytes; <|eom|> and specials refused inside it.
    m = matcher(a, 2);
    CHECK(acc_str(m, " to=user") && gl_matcher_accept(m, TOK_MSG));
    CHECK(acc_str(m, "hello \xff\xfe"));
    CHECK(!gl_matcher_accept(m, GL_TOK_EOM) && !gl_matcher_accept(m, TOK_START) &&
          !gl_matcher_accept(m, TOK_MSG));
    gl_matcher_fill_mask(m, mask);
    CHECK(allowed(mask, GL_TOK_EOT) && allowed(mask, GL_TOK_EOS) && !allowed(mask, GL_TOK_EOM));
    CHECK(gl_matcher_accept(m, GL_TOK_EOT) && gl_matcher_is_finished(m));
    gl_matcher_free(m);

    // auto: reasoning first; inside it a stop token or <|start|> is refused, <|eom|> ends it.
    m = matcher(a, 2);
    CHECK(acc_str(m, " to=self") && gl_matcher_accept(m, TOK_MSG) && acc_str(m, "think"));
    gl_matcher_fill_mask(m, mask);
    CHECK(!allowed(mask, GL_TOK_EOT) && !allowed(mask, GL_TOK_EOS) && !allowed(mask, TOK_START) &&
          allowed(mask, GL_TOK_EOM));
    CHECK(!gl_matcher_accept(m, GL_TOK_EOT) && !gl_matcher_accept(m, TOK_START) &&
          !gl_matcher_accept(m, GL_TOK_EOS));
    CHECK(gl_matcher_accept(m, GL_TOK_EOM) && gl_matcher_accept(m, TOK_START));
    CHECK(!acc_str(m, " to=user"));          // the role word comes first
    CHECK(!acc_str(m, "assistant to=self")); // one reasoning message
    CHECK(acc_str(m, "assistant to=ping") && gl_matcher_accept(m, TOK_MSG) && acc_str(m, call));
    CHECK(!gl_matcher_accept(m, GL_TOK_EOM)); // not parallel: one call
    CHECK(gl_matcher_accept(m, GL_TOK_EOT));
    gl_matcher_free(m);

    // required: no answer arm, parallel calls chained by <|eom|><|start|>assistant.
    m = matcher(req, 2);
    CHECK(!acc_str(m, " to=user"));
    CHECK(acc_str(m, " to=ping") && gl_matcher_accept(m, TOK_MSG) && acc_str(m, call));
    CHECK(gl_matcher_accept(m, GL_TOK_EOM) && gl_matcher_accept(m, TOK_START));
    CHECK(!acc_str(m, "assistant to=user"));
    CHECK(acc_str(m, "assistant to=get_weather") && gl_matcher_accept(m, TOK_MSG));
    gl_matcher_free(m);

    // named: only that tool.
    m = matcher(named, 2);
    CHECK(!acc_str(m, " to=ping") && !acc_str(m, " to=user") && !acc_str(m, " to=self"));
    CHECK(acc_str(m, " to=get_weather") && gl_matcher_accept(m, TOK_MSG));
    gl_matcher_free(m);

    // none with a JSON body: a stop token only once the document is complete; no tool arm.
    m = matcher(js, 2);
    CHECK(!acc_str(m, " to=self") && !acc_str(m, " to=ping"));
    CHECK(acc_str(m, " to=user") && gl_matcher_accept(m, TOK_MSG));
    CHECK(acc_str(m, "{\"answer\":\"hi\""));
    gl_matcher_fill_mask(m, mask);
    CHECK(!allowed(mask, GL_TOK_EOT));
    CHECK(!gl_matcher_accept(m, GL_TOK_EOT) && !gl_matcher_accept(m, GL_TOK_EOM));
    CHECK(acc_str(m, ",\"score\":3}"));
    gl_matcher_fill_mask(m, mask);
    CHECK(allowed(mask, GL_TOK_EOT));
    CHECK(gl_matcher_accept(m, GL_TOK_EOT) && gl_matcher_is_finished(m));
    gl_matcher_free(m);

    free(mask);
    gl_grammar_unref(a);
    gl_grammar_unref(req);
    gl_grammar_unref(js);
    gl_grammar_unref(named);
}

// In free text the mask is every non-special token plus what may follow; it agrees with accept
// token by token, costs no trie walk, and its mean cost over a 200-token walk is measured.
TEST(test_free_mask)
{
    REQUIRE(vocab);
    char *spec = make_spec(C_AUTO, 1, 1, B_FREE);
    struct gl_grammar *g = compile_text(spec);
    free(spec);
    REQUIRE(g);
    struct gl_matcher *m = matcher(g, 2);
    REQUIRE(m);
    uint32_t *mask = malloc(words * 4);
    CHECK(acc_str(m, " to=self") && gl_matcher_accept(m, TOK_MSG));
    struct gl_matcher_stats s0, s1;
    gl_matcher_stats(m, &s0);
    double total_us = 0, max_us = 0;
    int steps = 0, n_allowed_ok = 1;
    for (int i = 0; i < 200; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        gl_matcher_fill_mask(m, mask);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        total_us += us;
        max_us = us > max_us ? us : max_us;
        steps++;
        int32_t id;
        do
            id = (int32_t)(rnd() % GL_TOK_N_BASE);
        while (!allowed(mask, id));
        n_allowed_ok &=
            allowed(mask, GL_TOK_EOM) && !allowed(mask, GL_TOK_EOT) && !allowed(mask, TOK_START);
        if (!gl_matcher_accept(m, id)) {
            CHECKF(0, "token %d allowed in free text but refused", id);
            break;
        }
    }
    gl_matcher_stats(m, &s1);
    printf("# free-text mask: mean %.2f us, max %.2f us over %d steps (%lld trie nodes visited)\n",
           total_us / steps, max_us, steps, (long long)(s1.nodes_visited - s0.nodes_visited));
    CHECK(n_allowed_ok);
    CHECK(s1.nodes_visited == s0.nodes_visited); // no trie walk in free text
    CHECK(s1.fast_path - s0.fast_path == steps);
    // The mask against accept (then rolled back) for every special and 4000 random ids.
    gl_matcher_fill_mask(m, mask);
    int agree = 1;
    struct gl_err err = {0};
    for (int i = 0; i < 4000 + GL_TOK_N_SPECIAL; i++) {
        int32_t id = i < GL_TOK_N_SPECIAL ? GL_TOK_N_BASE + i : (int32_t)(rnd() % GL_TOK_N_BASE);
        int acc = gl_matcher_accept(m, id);
        if (acc != allowed(mask, id)) {
            fprintf(stderr, "  token %d: mask %d, accept %d\n", id, allowed(mask, id), acc);
            agree = 0;
        }
        if (acc && gl_matcher_rollback(m, 1, &err) != GL_OK)
            agree = 0;
    }
    CHECK(agree);
    free(mask);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

// ---- jump-forward ----

TEST(test_forced_tokens)
{
    REQUIRE(vocab);
    uint32_t *mask = malloc(words * 4);
    int32_t out[64];
    char *spec = make_spec(C_AUTO, 1, 1, B_FREE);
    struct gl_grammar *a = compile_text(spec);
    free(spec);
    struct gl_grammar *yes = compile_text(
        "{\"body\":{\"kind\":\"choice\",\"source\":\"[\\\"yes\\\"]\"},\"reasoning\":false}");
    REQUIRE(a && yes && mask);

    // After the reasoning header only <|message|> fits; free text follows (no more forcing).
    struct gl_matcher *m = matcher(a, 2);
    CHECK(gl_matcher_forced_tokens(m, out, 64, mask) == 0); // " to..." has several spellings
    CHECK(acc_str(m, " to=self"));
    int32_t n = gl_matcher_forced_tokens(m, out, 64, mask);
    CHECK(n == 1 && out[0] == TOK_MSG);
    CHECK(allowed(mask, GL_TOK_EOM) && allowed(mask, token_of("hello"))); // the state's mask
    CHECK(acc_str(m, "x") && gl_matcher_accept(m, GL_TOK_EOM));
    n = gl_matcher_forced_tokens(m, out, 64, mask);
    CHECK(n == 1 && out[0] == TOK_START); // then "assistant" has several spellings
    gl_matcher_free(m);

    // cap bounds the stretch; cap 0 only fills the mask.
    m = matcher(a, 2);
    CHECK(acc_str(m, " to=self"));
    CHECK(gl_matcher_forced_tokens(m, out, 0, mask) == 0 && allowed(mask, TOK_MSG) &&
          only_allowed(mask) == TOK_MSG);
    gl_matcher_free(m);

    // choice ["yes"]: <|message|> forced, then after "ye" the token "s"; never the stop token,
    // even when it is the only one allowed.
    int32_t s_id = token_of("s");
    REQUIRE(s_id >= 0);
    m = matcher(yes, 1); // stop set {<|eot|>}
    CHECK(acc_str(m, " to=user"));
    n = gl_matcher_forced_tokens(m, out, 64, mask);
    CHECK(n == 1 && out[0] == TOK_MSG);
    CHECK(acc_str(m, "ye"));
    n = gl_matcher_forced_tokens(m, out, 64, mask);
    CHECK(n == 1 && out[0] == s_id);
    CHECK(only_allowed(mask) == GL_TOK_EOT);
    CHECK(gl_matcher_forced_tokens(m, out, 64, mask) == 0 && !gl_matcher_is_finished(m));
    CHECK(gl_matcher_accept(m, GL_TOK_EOT));
    CHECK(gl_matcher_forced_tokens(m, out, 64, mask) == 0 && only_allowed(mask) == -1);
    gl_matcher_free(m);

    // A walk with jump-forward takes the same tokens as the plain walk with the same draws.
    static const int cfg[][4] = {{C_NAMED, 1, 1, B_FREE},
                                 {C_AUTO, 1, 1, B_CHOICE},
                                 {C_NONE, 0, 0, B_SCHEMA},
                                 {C_REQUIRED, 1, 1, B_FREE}};
    int32_t *x = malloc(WALK_CAP * sizeof *x), *y = malloc(WALK_CAP * sizeof *y);
    int same = 0, runs = 0, forced_total = 0;
    for (int c = 0; c < 8; c++) { // each configuration in bytes, then with header_tokens
        spec = make_spec_pin((enum choice)cfg[c % 4][0], cfg[c % 4][1], cfg[c % 4][2],
                             (enum body_kind)cfg[c % 4][3], c >= 4);
        struct gl_grammar *g = compile_text(spec);
        free(spec);
        if (!g)
            continue;
        for (int w = 0; w < 6; w++) {
            uint64_t seed = rng;
            int fx, fy;
            int nx = walk(g, 0, x, WALK_CAP, mask, &fx);
            uint64_t after = rng;
            rng = seed;
            int ny = walk(g, 1, y, WALK_CAP, mask, &fy);
            runs++;
            if (nx == ny && fx == fy && rng == after &&
                (nx <= 0 || !memcmp(x, y, (size_t)nx * sizeof *x)))
                same++;
            else
                fprintf(stderr, "  jump-forward walk differs: %d/%d tokens, %d/%d forced\n", nx, ny,
                        fx, fy);
            forced_total += fy;
        }
        gl_grammar_unref(g);
    }
    printf("# jump-forward: %d/%d walks equal, %d tokens forced\n", same, runs, forced_total);
    CHECK(runs == 48 && same == runs);
    CHECK(forced_total > runs); // at least <|message|> in each walk
    free(x);
    free(y);
    free(mask);
    gl_grammar_unref(a);
    gl_grammar_unref(yes);
}

// ---- pinned header tokens ----

static int popcount_mask(const uint32_t *mask)
{
    int n = 0;
    for (size_t w = 0; w < words; w++)
        n += __builtin_popcount(mask[w]);
    return n;
}

// gl_matcher_forced_tokens from m's state equals want[0..n).
static int forced_is(struct gl_matcher *m, uint32_t *mask, const int32_t *want, int n)
{
    int32_t out[64];
    int32_t k = gl_matcher_forced_tokens(m, out, 64, mask);
    int ok = k == n && (n == 0 || !memcmp(out, want, (size_t)n * sizeof *out));
    if (!ok) {
        fprintf(stderr, "  forced:");
        for (int i = 0; i < k; i++)
            fprintf(stderr, " %d", out[i]);
        fprintf(stderr, " (want");
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d", want[i]);
        fprintf(stderr, ")\n");
    }
    return ok;
}

static struct gl_grammar *compile_pin(enum choice ch, int reasoning, int parallel,
                                      enum body_kind body, int pin)
{
    char *spec = make_spec_pin(ch, reasoning, parallel, body, pin);
    struct gl_grammar *g = compile_text(spec);
    free(spec);
    return g;
}

TEST(test_pinned_header)
{
    REQUIRE(vocab);
    // The canonical one-token spellings of the header pieces.
    static const int32_t known[HT_N] = {328, 19669, 76976, 140680};
    for (int i = 0; i < HT_N; i++)
        CHECKF(ht[i] == known[i], "\"%s\" encodes to %d, not one token %d", HT_TEXT[i], ht[i],
               known[i]);
    REQUIRE(ht[HT_TO] >= 0 && ht[HT_SELF] >= 0 && ht[HT_USER] >= 0 && ht[HT_ASSISTANT] >= 0);
    uint32_t *mask = malloc(words * 4);
    struct gl_grammar *a = compile_pin(C_AUTO, 1, 1, B_FREE, 1);
    struct gl_grammar *a0 = compile_pin(C_AUTO, 1, 1, B_FREE, 0);
    struct gl_grammar *none = compile_pin(C_NONE, 1, 0, B_FREE, 1);
    struct gl_grammar *none0 = compile_pin(C_NONE, 0, 0, B_CHOICE, 1);
    struct gl_grammar *req = compile_pin(C_REQUIRED, 0, 1, B_FREE, 1);
    REQUIRE(mask && a && a0 && none && none0 && req);
    const int32_t start_hdr[] = {TOK_START, ht[HT_ASSISTANT], ht[HT_TO]};
    const int32_t start_user[] = {TOK_START, ht[HT_ASSISTANT], ht[HT_TO], ht[HT_USER], TOK_MSG};
    const int32_t msg[] = {TOK_MSG};
    const char *call = "<atem:function_calls>\n<atem:invoke name=\"ping\">\n</atem:invoke>\n"
                       "</atem:function_calls>";

    // At the very start only " to" is allowed; then reasoning, the answer or a tool.
    struct gl_matcher *m = matcher(a, 2);
    gl_matcher_fill_mask(m, mask);
    CHECK(popcount_mask(mask) == 1 && allowed(mask, ht[HT_TO]));
    CHECK(forced_is(m, mask, ht, 1)); // " to", then a real choice
    int32_t eq_get = token_of("=get"), eq_s = token_of("=s");
    REQUIRE(eq_get >= 0 && eq_s >= 0);
    CHECK(allowed(mask, ht[HT_SELF]) && allowed(mask, ht[HT_USER]) && allowed(mask, eq_get) &&
          !allowed(mask, eq_s)); // tool names in any spelling, "=self" only as the one token
    // Reasoning: <|message|> forced after "=self"; after <|eom|> <|start|> assistant " to" are.
    CHECK(gl_matcher_accept(m, ht[HT_SELF]) && forced_is(m, mask, msg, 1));
    CHECK(acc_str(m, "think") && gl_matcher_accept(m, GL_TOK_EOM));
    CHECK(forced_is(m, mask, start_hdr, 3)); // both arms go on with " to"
    CHECK(!allowed(mask, ht[HT_SELF]));      // one reasoning message
    // The answer: <|message|> forced after "=user".
    CHECK(gl_matcher_accept(m, ht[HT_USER]) && forced_is(m, mask, msg, 1));
    CHECK(acc_str(m, "hi") && gl_matcher_accept(m, GL_TOK_EOT));
    gl_matcher_free(m);

    // The tool arm after reasoning: tool names stay bytes; parallel calls chain canonically.
    m = matcher(a, 2);
    CHECK(gl_matcher_accept(m, ht[HT_TO]) && gl_matcher_accept(m, ht[HT_SELF]) &&
          gl_matcher_accept(m, TOK_MSG) && gl_matcher_accept(m, GL_TOK_EOM));
    CHECK(forced_is(m, mask, start_hdr, 3));
    CHECK(acc_str(m, "=ping") && forced_is(m, mask, msg, 1) && acc_str(m, call));
    CHECK(gl_matcher_accept(m, GL_TOK_EOM) && forced_is(m, mask, start_hdr, 3));
    CHECK(!allowed(mask, ht[HT_USER]) && !allowed(mask, ht[HT_SELF])); // only calls now
    CHECK(acc_str(m, "=get_weather") && gl_matcher_accept(m, TOK_MSG));
    gl_matcher_free(m);

    // "none" with reasoning: after <|eom|> the whole answer header is forced.
    m = matcher(none, 2);
    CHECK(forced_is(m, mask, ht, 1));
    CHECK(gl_matcher_accept(m, ht[HT_SELF]) && forced_is(m, mask, msg, 1));
    CHECK(gl_matcher_accept(m, GL_TOK_EOM) && forced_is(m, mask, start_user, 5));
    gl_matcher_free(m);

    // "none" without reasoning: the header is forced from the first token.
    m = matcher(none0, 2);
    const int32_t user_hdr[] = {ht[HT_TO], ht[HT_USER], TOK_MSG};
    CHECK(forced_is(m, mask, user_hdr, 3));
    CHECK(acc_str(m, "yes") && gl_matcher_accept(m, GL_TOK_EOT));
    gl_matcher_free(m);

    // "required", parallel, no reasoning: " to" forced, then each next call's header.
    m = matcher(req, 2);
    CHECK(forced_is(m, mask, ht, 1) && !allowed(mask, ht[HT_USER]));
    CHECK(acc_str(m, "=ping") && gl_matcher_accept(m, TOK_MSG) && acc_str(m, call));
    CHECK(gl_matcher_accept(m, GL_TOK_EOM) && forced_is(m, mask, start_hdr, 3));
    gl_matcher_free(m);

    // Pinned, the bytes spelled by other tokens are refused; without header_tokens accepted.
    int32_t t_id = token_of(" t");
    REQUIRE(t_id >= 0);
    m = matcher(a, 2);
    CHECK(!gl_matcher_accept(m, t_id) && !acc_str(m, " to=user") && !acc_str(m, " to"));
    CHECK(gl_matcher_accept(m, ht[HT_TO]) && !acc_str(m, "=user") && !acc_str(m, "=self"));
    gl_matcher_free(m);
    m = matcher(a0, 2);
    CHECK(gl_matcher_accept(m, t_id) && acc_str(m, "o=user") && gl_matcher_accept(m, TOK_MSG));
    gl_matcher_free(m);
    m = matcher(a0, 2);
    gl_matcher_fill_mask(m, mask);
    CHECK(popcount_mask(mask) > 1 && allowed(mask, ht[HT_TO]) && allowed(mask, t_id));
    gl_matcher_free(m);

    // Tools whose names start with "user" / "self" keep those pieces in bytes, so "=user" can
    // open the answer or "=user_lookup"; pinned, the call would be unreachable.
    const char *clash =
        "{\"tools\":[{\"name\":\"user_lookup\"},{\"name\":\"selfcheck\"}],\"tool_choice\":"
        "\"auto\",\"header_tokens\":{\"to\":328,\"self\":19669,\"user\":76976,"
        "\"assistant\":140680}}";
    struct gl_grammar *cg = compile_text(clash);
    REQUIRE(cg);
    m = matcher(cg, 2);
    CHECK(gl_matcher_accept(m, ht[HT_TO]) && gl_matcher_accept(m, ht[HT_USER]) &&
          acc_str(m, "_lookup") && gl_matcher_accept(m, TOK_MSG));
    gl_matcher_free(m);
    m = matcher(cg, 2);
    CHECK(gl_matcher_accept(m, ht[HT_TO]) && gl_matcher_accept(m, ht[HT_USER]) &&
          gl_matcher_accept(m, TOK_MSG) && acc_str(m, "ok") && gl_matcher_accept(m, GL_TOK_EOT));
    gl_matcher_free(m);
    m = matcher(cg, 2);
    CHECK(gl_matcher_accept(m, ht[HT_TO]) && gl_matcher_accept(m, ht[HT_SELF]) &&
          acc_str(m, "check") && gl_matcher_accept(m, TOK_MSG));
    gl_matcher_free(m);
    m = matcher(cg, 2);
    CHECK(gl_matcher_accept(m, ht[HT_TO]) && gl_matcher_accept(m, ht[HT_SELF]) &&
          gl_matcher_accept(m, TOK_MSG) && gl_matcher_accept(m, GL_TOK_EOM));
    CHECK(forced_is(m, mask, start_hdr, 3)); // the other pieces stay pinned
    gl_matcher_free(m);
    gl_grammar_unref(cg);

    free(mask);
    gl_grammar_unref(a);
    gl_grammar_unref(a0);
    gl_grammar_unref(none);
    gl_grammar_unref(none0);
    gl_grammar_unref(req);
}

static uint64_t hash_of(const char *spec)
{
    struct gl_grammar *g = compile_text(spec);
    uint64_t h = g ? gl_grammar_hash(g) : 0;
    gl_grammar_unref(g);
    return h;
}

// header_tokens is part of the cache key, reduced to the pinned pieces the language uses.
TEST(test_pinned_cache)
{
    REQUIRE(vocab);
    char *p = make_spec_pin(C_AUTO, 1, 1, B_FREE, 1), *b = make_spec_pin(C_AUTO, 1, 1, B_FREE, 0);
    uint64_t hp = hash_of(p), hb = hash_of(b);
    CHECK(hp && hb && hp != hb);
    struct gl_grammar_cache *c = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_grammar_cache_new(&c, 4, &err) == GL_OK);
    struct gl_grammar *g1 = NULL, *g2 = NULL;
    CHECK(gl_grammar_cache_get(c, &g1, GL_GRAMMAR_ATEM_TURN, p, strlen(p), NULL, &err) == GL_OK);
    CHECK(gl_grammar_cache_get(c, &g2, GL_GRAMMAR_ATEM_TURN, b, strlen(b), NULL, &err) == GL_OK);
    CHECK(g1 && g2 && g1 != g2);
    gl_grammar_unref(g1);
    gl_grammar_unref(g2);
    gl_grammar_cache_free(c);
    free(p);
    free(b);
    // Nothing pinned (absent, null, {}, all -1) is one key: the byte spelling.
    const char *base = "{\"reasoning\":true}";
    uint64_t h0 = hash_of(base);
    CHECK(h0 && h0 == hash_of("{\"reasoning\":true,\"header_tokens\":null}"));
    CHECK(h0 == hash_of("{\"reasoning\":true,\"header_tokens\":{}}"));
    CHECK(h0 == hash_of("{\"reasoning\":true,\"header_tokens\":{\"to\":-1,\"self\":null}}"));
    CHECK(h0 != hash_of("{\"reasoning\":true,\"header_tokens\":{\"to\":328}}"));
    CHECK(hash_of("{\"header_tokens\":{\"to\":328}}") !=
          hash_of("{\"header_tokens\":{\"to\":329}}"));
    // Pieces the language does not use do not split the cache: no reasoning, no "=self".
    CHECK(hash_of("{\"reasoning\":false,\"header_tokens\":{\"to\":328,\"self\":19669,"
                  "\"assistant\":140680}}") ==
          hash_of("{\"reasoning\":false,\"header_tokens\":{\"to\":328}}"));
    CHECK(hash_of("{\"reasoning\":false,\"header_tokens\":{\"self\":19669}}") ==
          hash_of("{\"reasoning\":false}"));
}

// ---- cache and errors ----

TEST(test_cache)
{
    REQUIRE(vocab);
    struct gl_grammar_cache *c = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_grammar_cache_new(&c, 8, &err) == GL_OK);
    // Same spec: key order, spacing and the schema source's key order do not matter.
    const char *s1 =
        "{\"body\":{\"kind\":\"json_schema\",\"source\":\"{\\\"type\\\":\\\"object\\\","
        "\\\"required\\\":[\\\"a\\\"]}\"},\"tools\":null,\"tool_choice\":\"none\","
        "\"parallel\":false,\"reasoning\":true}";
    const char *s2 = "{ \"reasoning\": true, \"parallel\": false, \"tool_choice\": \"none\", "
                     "\"body\": {\"source\": \"{\\\"required\\\": [\\\"a\\\"], \\\"type\\\": "
                     "\\\"object\\\"}\", \"kind\": \"json_schema\"}}";
    const char *s3 =
        "{\"body\":{\"kind\":\"json_schema\",\"source\":\"{\\\"type\\\":\\\"object\\\","
        "\\\"required\\\":[\\\"a\\\"]}\"},\"tool_choice\":\"none\",\"reasoning\":false}";
    struct gl_grammar *g1 = NULL, *g2 = NULL, *g3 = NULL, *g4 = NULL;
    CHECK(gl_grammar_cache_get(c, &g1, GL_GRAMMAR_ATEM_TURN, s1, strlen(s1), NULL, &err) == GL_OK);
    CHECK(gl_grammar_cache_get(c, &g2, GL_GRAMMAR_ATEM_TURN, s2, strlen(s2), NULL, &err) == GL_OK);
    CHECK(gl_grammar_cache_get(c, &g3, GL_GRAMMAR_ATEM_TURN, s3, strlen(s3), NULL, &err) == GL_OK);
    CHECK(gl_grammar_cache_get(c, &g4, GL_GRAMMAR_ATEM_TURN, s1, strlen(s1), NULL, &err) == GL_OK);
    CHECK(g1 && g1 == g2 && g1 == g4);
    CHECK(g3 && g3 != g1);
    // Under "none" the tools and parallel flag change nothing: one entry.
    char *a = make_spec(C_NONE, 1, 1, B_REGEX), *b = make_spec(C_NONE, 1, 0, B_REGEX);
    struct gl_grammar *ga = NULL, *gb = NULL;
    CHECK(gl_grammar_cache_get(c, &ga, GL_GRAMMAR_ATEM_TURN, a, strlen(a), NULL, &err) == GL_OK);
    CHECK(gl_grammar_cache_get(c, &gb, GL_GRAMMAR_ATEM_TURN, b, strlen(b), NULL, &err) == GL_OK);
    CHECK(ga && ga == gb);
    free(a);
    free(b);
    gl_grammar_unref(g1);
    gl_grammar_unref(g2);
    gl_grammar_unref(g3);
    gl_grammar_unref(g4);
    gl_grammar_unref(ga);
    gl_grammar_unref(gb);
    gl_grammar_cache_free(c);
}

static int fails_with(const char *spec, gl_status code, const char *msg)
{
    struct gl_err err = {0};
    struct gl_grammar *g = NULL;
    gl_status st = gl_grammar_compile(&g, GL_GRAMMAR_ATEM_TURN, spec, strlen(spec), NULL, &err);
    int ok = st == code && !g && strstr(err.msg, msg) != NULL;
    if (!ok)
        fprintf(stderr, "  %s\n  -> %s: %s\n", spec, gl_status_name(st), err.msg);
    gl_grammar_unref(g);
    return ok;
}

TEST(test_errors)
{
    REQUIRE(vocab);
    char spec[2048];
    snprintf(spec, sizeof spec, "{\"tools\":%s,\"tool_choice\":{\"name\":\"nope\"}}", TOOLS);
    CHECK(fails_with(spec, GL_E_INVAL, "tool_choice: function 'nope' is not in tools"));
    CHECK(fails_with("{\"tool_choice\":\"required\"}", GL_E_INVAL, "tool_choice: \"required\""));
    CHECK(fails_with("{\"tool_choice\":\"sometimes\"}", GL_E_INVAL, "tool_choice: 'sometimes'"));
    CHECK(fails_with("{\"tool_choice\":{\"name\":\"x\"}}", GL_E_INVAL, "not in tools"));
    CHECK(fails_with("{\"reasoning\":1}", GL_E_INVAL, "reasoning: expected true or false"));
    CHECK(fails_with("{\"parallel\":\"yes\"}", GL_E_INVAL, "parallel: expected"));
    CHECK(fails_with("{\"tools\":{}}", GL_E_INVAL, "tools: expected an array"));
    CHECK(fails_with("{\"bodyy\":null}", GL_E_INVAL, "atem_turn: unknown field 'bodyy'"));
    CHECK(fails_with("{\"header_tokens\":[328]}", GL_E_INVAL, "header_tokens: expected null or"));
    CHECK(fails_with("{\"header_tokens\":{\"from\":1}}", GL_E_INVAL,
                     "header_tokens: unknown piece 'from'"));
    CHECK(fails_with("{\"header_tokens\":{\"to\":-2}}", GL_E_INVAL,
                     "header_tokens: to: expected a token id"));
    CHECK(fails_with("{\"header_tokens\":{\"user\":2147483648}}", GL_E_INVAL,
                     "header_tokens: user: expected a token id"));
    CHECK(fails_with("{\"header_tokens\":{\"self\":\"19669\"}}", GL_E_INVAL,
                     "header_tokens: self: expected"));
    CHECK(fails_with("{\"header_tokens\":{\"assistant\":1.5}}", GL_E_INVAL,
                     "header_tokens: assistant: expected"));
    CHECK(fails_with("[1]", GL_E_INVAL, "atem_turn: the spec must be a JSON object"));
    CHECK(fails_with("{", GL_E_INVAL, "atem_turn: spec is not valid JSON"));
    CHECK(fails_with("{\"body\":{\"kind\":\"xml\",\"source\":\"\"}}", GL_E_INVAL,
                     "body: kind 'xml'"));
    CHECK(fails_with("{\"body\":{\"kind\":\"regex\",\"source\":3}}", GL_E_INVAL,
                     "body: source must be a string"));
    CHECK(fails_with("{\"body\":{\"kind\":\"json_schema\",\"source\":\"{\"}}", GL_E_INVAL,
                     "body: json_schema source is not valid JSON"));
    // Body errors are the front ends' own, behind "body: " (keyword and JSON pointer kept).
    CHECK(fails_with("{\"body\":{\"kind\":\"json_schema\",\"source\":{\"type\":\"object\","
                     "\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":-1}}}}}",
                     GL_E_INVAL, "/properties/a"));
    CHECK(fails_with("{\"body\":{\"kind\":\"json_schema\",\"source\":{\"type\":\"object\","
                     "\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":-1}}}}}",
                     GL_E_INVAL, "body: "));
    CHECK(fails_with("{\"body\":{\"kind\":\"choice\",\"source\":\"[1]\"}}", GL_E_INVAL,
                     "body: choice: element 0 is not a string"));
    CHECK(fails_with("{\"body\":{\"kind\":\"gbnf\",\"source\":\"root ::= ans\"}}", GL_E_INVAL,
                     "body: "));
    // Tools named like the reserved recipients, and bad tools, name the entry.
    CHECK(fails_with("{\"tools\":[{\"name\":\"user\"}],\"tool_choice\":\"auto\"}", GL_E_INVAL,
                     "tools[0]: function name 'user' is a reserved ATEM recipient"));
    CHECK(fails_with("{\"tools\":[{\"name\":\"a b\"}],\"tool_choice\":\"required\"}", GL_E_INVAL,
                     "tools[0]"));
    // A body is ignored where there is no answer arm.
    snprintf(spec, sizeof spec,
             "{\"tools\":%s,\"tool_choice\":\"required\",\"body\":{\"kind\":\"xml\"}}", TOOLS);
    struct gl_grammar *g = compile_text(spec);
    CHECK(g != NULL);
    gl_grammar_unref(g);
}

static void free_all(void)
{
    gl_gvocab_free(vocab);
    gl_tokenizer_free(tok);
    free(closers);
    free(cand);
}

int main(void)
{
    const char *path = t_vocab_path();
    struct gl_err err = {0};
    if (gl_tokenizer_load_tiktoken(&tok, path, &err) != GL_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return 1;
    }
    if (gl_gvocab_new(&vocab, tok, &err) != GL_OK) {
        fprintf(stderr, "vocab: %s\n", err.msg);
        gl_tokenizer_free(tok);
        return 1;
    }
    atexit(free_all);
    words = gl_gvocab_mask_words(vocab);
    n_vocab = gl_gvocab_n_vocab(vocab);
    closers = malloc((size_t)n_vocab * sizeof *closers);
    cand = malloc(words * 32 * sizeof *cand);
    for (int32_t id = 0; closers && id < GL_TOK_N_BASE && id < n_vocab; id++) {
        size_t len;
        const char *p = gl_tokenizer_token_bytes(tok, id, &len);
        int hit = 0;
        for (size_t i = 0; p && i < len && !hit; i++)
            hit = p[i] && strchr("<\"]}-0123456789", p[i]) != NULL;
        if (hit)
            closers[n_closers++] = id;
    }
    for (int i = 0; i < HT_N; i++)
        ht[i] = token_of(HT_TEXT[i]); // -1 unless one token
    RUN_TESTS(test_exact, test_free_mask, test_forced_tokens, test_pinned_header, test_pinned_cache,
              test_cache, test_errors, test_walks_none, test_walks_auto, test_walks_required_named);
}
