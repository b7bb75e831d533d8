// SPDX-License-Identifier: MIT
// Forced ATEM tool calls (gl_grammar_compile_atem_tools, frontends.c): random
// token walks under the mask over the real vocabulary, fed after " to" to the
// ATEM parser (atem_parse.h), must give exactly one call with the right name
// and arguments that satisfy the tool's schema (checked by a small validator
// below for the keywords the tools use). Also: any parameter order, no
// duplicates, no undeclared or missing required parameters, named vs required
// tool_choice, and errors that name the tool index. Vocabulary: $GLINT_VOCAB,
// else
// ../shared/data/tokenizer/llama4-tokenizer.model (run from the repository
// root).
#include "chat/atem_parse.h"
#include "grammar/grammar.h"
#include "test.h"

#include <jansson.h>
#include <string.h>

// Walks per test (fewer under AddressSanitizer: test.h).
#define N_WALKS T_BY_BUILD(24, 8)

static struct gl_tokenizer *tok;
static struct gl_gvocab *vocab;

// clang-format off
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"w\",\"par"
    "ameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\""
    ":1,\"maxLength\":20},\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":"
    "\"integer\",\"minimum\":1,\"maximum\":14}},\"required\":[\"city\"],\"additionalProperties"
    "\":false}}},{\"type\":\"function\",\"function\":{\"name\":\"search.web\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"maxLength\":30},\"exact\""
    ":{\"type\":\"boolean\"},\"filters\":{\"type\":\"object\",\"properties\":{\"lang\":{\"type"
    "\":\"string\",\"maxLength\":5}},\"additionalProperties\":false},\"tags\":{\"type\":\"array"
    "\",\"items\":{\"type\":\"string\",\"maxLength\":8},\"maxItems\":3},\"score\":{\"type\":\"n"
    "umber\",\"minimum\":0,\"maximum\":1}},\"required\":[\"q\",\"exact\"]}}},{\"name\":\"ping\""
    ",\"parameters\":{\"type\":\"object\",\"properties\":{}}},{\"type\":\"function\",\"function"
    "\":{\"name\":\"bulk\",\"parameters\":{\"type\":\"object\",\"properties\":{\"p0\":{\"type\""
    ":\"integer\",\"minimum\":-99999,\"maximum\":99999},\"p1\":{\"type\":\"boolean\"},\"p2\":{"
    "\"type\":\"null\"},\"p3\":{\"type\":\"integer\"},\"p4\":{\"type\":\"boolean\"},\"p5\":{\"t"
    "ype\":\"integer\",\"minimum\":-99999,\"maximum\":99999},\"p6\":{\"type\":\"boolean\"},\"p7"
    "\":{\"type\":\"null\"},\"p8\":{\"type\":\"number\"},\"p9\":{\"type\":\"boolean\"}},\"requi"
    "red\":[\"p0\",\"p5\"]}}}]";
// clang-format on

// ---- a small JSON Schema validator for the keywords above ----

static size_t utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((uint8_t)s[i] & 0xC0) != 0x80;
    return c;
}

static int type_ok(json_t *v, const char *t)
{
    if (!strcmp(t, "string"))
        return json_is_string(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    if (!strcmp(t, "number"))
        return json_is_number(v);
    if (!strcmp(t, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(t, "null"))
        return json_is_null(v);
    if (!strcmp(t, "object"))
        return json_is_object(v);
    if (!strcmp(t, "array"))
        return json_is_array(v);
    return 0;
}

static int valid(json_t *v, json_t *s, char *why, size_t cap)
{
    json_t *k;
    if ((k = json_object_get(s, "type")) && !type_ok(v, json_string_value(k))) {
        snprintf(why, cap, "not of type %s", json_string_value(k));
        return 0;
    }
    if ((k = json_object_get(s, "enum"))) {
        size_t i;
        json_t *e;
        int hit = 0;
        json_array_foreach(k, i, e) hit |= json_equal(e, v);
        if (!hit) {
            snprintf(why, cap, "not in enum");
            return 0;
        }
    }
    if (json_is_string(v)) {
        size_t n = utf8_chars(json_string_value(v), json_string_length(v));
        if ((k = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(k))
            return snprintf(why, cap, "shorter than minLength"), 0;
        if ((k = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(k))
            return snprintf(why, cap, "longer than maxLength"), 0;
    }
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if ((k = json_object_get(s, "minimum")) && x < json_number_value(k))
            return snprintf(why, cap, "below minimum"), 0;
        if ((k = json_object_get(s, "maximum")) && x > json_number_value(k))
            return snprintf(why, cap, "above maximum"), 0;
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties");
        size_t i;
        json_t *r;
        json_array_foreach(
            json_object_get(s, "required"), i,
            r) if (!json_object_get(v, json_string_value(r))) return snprintf(why, cap,
                                                                              "missing %s",
                                                                              json_string_value(r)),
            0;
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val)
        {
            json_t *ps = props ? json_object_get(props, key) : NULL;
            if (!ps && json_is_false(json_object_get(s, "additionalProperties")))
                return snprintf(why, cap, "undeclared %s", key), 0;
            if (ps && !valid(val, ps, why, cap))
                return 0;
        }
    }
    if (json_is_array(v)) {
        if ((k = json_object_get(s, "maxItems")) &&
            json_array_size(v) > (size_t)json_integer_value(k))
            return snprintf(why, cap, "more than maxItems"), 0;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (json_object_get(s, "items") &&
                                        !valid(e, json_object_get(s, "items"), why, cap)) return 0;
    }
    return 1;
}

// ---- walks ----

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

// Tokens that can close a value (a '<' for raw strings, quotes and brackets for JSON): the walk
// picks among the allowed ones half of the time, so walks finish in a few hundred tokens.
static int32_t *closers;
static int n_closers;

static int allowed(const uint32_t *mask, int32_t id)
{
    return (mask[id >> 5] >> (id & 31)) & 1;
}

// One walk: fills ids (the grammar's tokens, then the stop token). Returns the count, or -1 if
// the walk did not finish within cap tokens or a mask/accept disagreement was seen.
static int walk(struct gl_grammar *g, int32_t *ids, int cap, uint32_t *mask, int32_t *cand)
{
    struct gl_err err = {0};
    int32_t stops[2] = {GL_TOK_EOT, GL_TOK_EOS};
    struct gl_matcher *m = NULL;
    if (gl_matcher_new(&m, g, vocab, stops, 2, &err) != GL_OK) {
        fprintf(stderr, "  matcher_new: %s\n", err.msg);
        return -1;
    }
    size_t words = gl_gvocab_mask_words(vocab);
    int32_t n_vocab = gl_gvocab_n_vocab(vocab);
    int n = 0, ok = 0;
    while (n < cap) {
        gl_matcher_fill_mask(m, mask);
        int32_t pick = -1;
        if (allowed(mask, GL_TOK_EOT))
            pick = GL_TOK_EOT;
        if (pick < 0 && rnd() % 2 == 0) {
            int nc = 0;
            for (int i = 0; i < n_closers; i++)
                if (allowed(mask, closers[i]))
                    cand[nc++] = closers[i];
            if (nc)
                pick = cand[rnd() % (uint32_t)nc];
        }
        for (int t = 0; pick < 0 && t < 64; t++) {
            int32_t id = (int32_t)(rnd() % (uint32_t)n_vocab);
            if (allowed(mask, id))
                pick = id;
        }
        if (pick < 0) {
            int nc = 0;
            for (size_t w = 0; w < words; w++)
                for (uint32_t x = mask[w]; x; x &= x - 1)
                    cand[nc++] = (int32_t)(w * 32 + (size_t)__builtin_ctz(x));
            if (nc == 0) {
                fprintf(stderr, "  empty mask after %d tokens\n", n);
                break;
            }
            pick = cand[rnd() % (uint32_t)nc];
        }
        if (!gl_matcher_accept(m, pick)) {
            fprintf(stderr, "  token %d allowed by the mask but refused\n", pick);
            break;
        }
        ids[n++] = pick;
        if (gl_matcher_is_finished(m)) {
            ok = 1;
            break;
        }
    }
    gl_matcher_free(m);
    return ok ? n : -1;
}

struct parsed {
    struct gl_atem_accum acc;
    gl_status st;
};

// Feeds " to" + ids to the ATEM parser (the generation prompt
// `<|start|>assistant` is already consumed when the parser starts).
static void parse_ids(struct parsed *o, const int32_t *ids, int n)
{
    struct gl_err err = {0};
    o->st = gl_atem_accum_init(&o->acc);
    struct gl_atem_parser *p = NULL;
    if (o->st == GL_OK)
        o->st = gl_atem_parser_new(&p, tok, NULL, gl_atem_accum_sink, &o->acc, &err);
    gl_token *pre = NULL;
    size_t n_pre = 0;
    if (o->st == GL_OK)
        o->st = gl_tokenizer_encode(tok, " to", 3, 0, 0, &pre, &n_pre, &err);
    for (size_t i = 0; o->st == GL_OK && i < n_pre; i++)
        o->st = gl_atem_parser_feed(p, pre[i], &err);
    for (int i = 0; o->st == GL_OK && i < n; i++)
        o->st = gl_atem_parser_feed(p, ids[i], &err);
    if (o->st == GL_OK)
        o->st = gl_atem_parser_finish(p, &err);
    gl_free(pre);
    gl_atem_parser_free(p);
}

static json_t *tool_params(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        json_t *fn = json_object_get(t, "function") ? json_object_get(t, "function") : t;
        if (!strcmp(json_string_value(json_object_get(fn, "name")), name))
            return json_object_get(fn, "parameters");
    }
    return NULL;
}

static void run_walks(const char *only, int n_walks, int *finished, int *good, int *seen_tools,
                      int *reordered)
{
    json_error_t je;
    json_t *tools = json_loads(TOOLS, 0, &je);
    GL_ASSERT(tools);
    struct gl_err err = {0};
    struct gl_grammar *g = NULL;
    gl_status st = gl_grammar_compile_atem_tools(&g, tools, only, GL_ATEM_TOK_MESSAGE, NULL, &err);
    if (st != GL_OK) {
        fprintf(stderr, "  compile: %s\n", err.msg);
        json_decref(tools);
        return;
    }
    size_t words = gl_gvocab_mask_words(vocab);
    uint32_t *mask = malloc(words * 4);
    int32_t *cand = malloc(words * 32 * sizeof *cand);
    int32_t ids[600];
    for (int w = 0; w < n_walks; w++) {
        int n = walk(g, ids, 600, mask, cand);
        if (n < 0)
            continue;
        (*finished)++;
        struct parsed o;
        parse_ids(&o, ids, n);
        int ok = o.st == GL_OK && o.acc.n_calls == 1 && !o.acc.calls[0].truncated &&
                 !o.acc.has_content && !o.acc.has_reasoning;
        char why[128] = "parse";
        if (ok) {
            const char *name = o.acc.calls[0].name;
            json_t *params = tool_params(tools, name);
            json_t *args =
                json_loadb(o.acc.calls[0].arguments, o.acc.calls[0].arguments_len, 0, &je);
            ok = params && args && valid(args, params, why, sizeof why) &&
                 (!only || !strcmp(only, name));
            for (int t = 0; t < 4; t++) {
                static const char *const names[] = {"get_weather", "search.web", "ping", "bulk"};
                if (!strcmp(name, names[t]))
                    seen_tools[t]++;
            }
            // Parameters written out of schema order (any order is allowed).
            const char *a = o.acc.calls[0].arguments;
            const char *c = strstr(a, "\"city\""), *u = strstr(a, "\"unit\"");
            if (c && u && u < c)
                (*reordered)++;
            json_decref(args);
        }
        if (ok) {
            (*good)++;
        } else {
            char text[4096];
            size_t tl = 0;
            for (int i = 0; i < n && tl + 64 < sizeof text; i++) {
                size_t len;
                const char *p = gl_tokenizer_token_bytes(tok, ids[i], &len);
                if (p && tl + len + 1 < sizeof text) {
                    memcpy(text + tl, p, len);
                    tl += len;
                }
            }
            text[tl] = 0;
            fprintf(stderr, "  bad walk (%s; %d calls): %s\n  args: %s\n", why, o.acc.n_calls, text,
                    o.acc.n_calls ? o.acc.calls[0].arguments : "");
        }
        gl_atem_accum_free(&o.acc);
    }
    free(mask);
    free(cand);
    gl_grammar_unref(g);
    json_decref(tools);
}

TEST(test_walks_required)
{
    REQUIRE(vocab);
    int finished = 0, good = 0, seen[4] = {0}, reordered = 0;
    run_walks(NULL, N_WALKS, &finished, &good, seen, &reordered);
    printf("# required: %d/%d finished, %d valid; per tool %d %d %d %d\n", finished, N_WALKS, good,
           seen[0], seen[1], seen[2], seen[3]);
    CHECK(finished >= N_WALKS - N_WALKS / 8);
    CHECK(good == finished);
    for (int t = 0; t < 4 && N_WALKS >= 24; t++) // every tool is drawn (fixed seed)
        CHECK(seen[t] > 0);
}

TEST(test_walks_named)
{
    REQUIRE(vocab);
    int finished = 0, good = 0, seen[4] = {0}, reordered = 0;
    run_walks("get_weather", N_WALKS / 2, &finished, &good, seen, &reordered);
    printf("# named: %d/%d finished, %d valid, %d with unit before city\n", finished, N_WALKS / 2,
           good, reordered);
    CHECK(finished >= N_WALKS / 2 - N_WALKS / 8);
    CHECK(good == finished);
    CHECK(seen[0] == finished && seen[1] == 0);
}

// Exact byte sequences through the public matcher.
static int accepts_call(struct gl_grammar *g, const char *name, const char *params, int stop)
{
    struct gl_err err = {0};
    int32_t stops[1] = {GL_TOK_EOT};
    struct gl_matcher *m = NULL;
    if (gl_matcher_new(&m, g, vocab, stops, 1, &err) != GL_OK)
        return -1;
    char body[1024];
    snprintf(body, sizeof body,
             "<atem:function_calls>\n<atem:invoke name=\"%s\">\n%s</atem:invoke>\n"
             "</atem:function_calls>",
             name, params);
    int ok = gl_matcher_accept_bytes(m, "=", 1) && gl_matcher_accept_bytes(m, name, strlen(name)) &&
             gl_matcher_accept(m, GL_ATEM_TOK_MESSAGE) &&
             gl_matcher_accept_bytes(m, body, strlen(body)) &&
             (!stop || gl_matcher_accept(m, GL_TOK_EOT));
    gl_matcher_free(m);
    return ok;
}

#define P(k, v) "<atem:parameter name=\"" k "\">" v "</atem:parameter>\n"

// A raw string parameter whose pattern meets the raw guard (a number-like text would come back as
// a number): "^\\+?[0-9]{6,12}$" without '+' is only number-like texts. The matcher must refuse
// the digits at once rather than take them into a value no closing tag can follow (found by
// openai's zodFunction with a phone field: 12 digits, then no token allowed).
TEST(test_pattern_meets_raw_guard)
{
    REQUIRE(vocab);
    static const char tools_text[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"save\",\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"phone\":{\"type\":\"string\",\"pattern\":\"^\\\\+?[0-9]"
        "{6,12}$\"}},\"required\":[\"phone\"],\"additionalProperties\":false}}}]";
    json_error_t je;
    json_t *tools = json_loads(tools_text, 0, &je);
    REQUIRE(tools);
    struct gl_err err = {0};
    struct gl_grammar *g = NULL;
    REQUIRE(gl_grammar_compile_atem_tools(&g, tools, NULL, GL_ATEM_TOK_MESSAGE, NULL, &err) ==
            GL_OK);
    CHECK(accepts_call(g, "save", P("phone", "+4930123456"), 1) == 1);
    CHECK(accepts_call(g, "save", P("phone", "4930123456"), 0) == 0); // read back as a number
    // The digits themselves are refused: no dead state after them.
    struct gl_matcher *m = NULL;
    int32_t stops[1] = {GL_TOK_EOT};
    REQUIRE(gl_matcher_new(&m, g, vocab, stops, 1, &err) == GL_OK);
    static const char head[] = "<atem:function_calls>\n<atem:invoke name=\"save\">\n"
                               "<atem:parameter name=\"phone\">";
    CHECK(gl_matcher_accept_bytes(m, "=", 1) && gl_matcher_accept_bytes(m, "save", 4) &&
          gl_matcher_accept(m, GL_ATEM_TOK_MESSAGE) &&
          gl_matcher_accept_bytes(m, head, sizeof head - 1));
    CHECK(!gl_matcher_accept_bytes(m, "67639132", 8));
    CHECK(gl_matcher_accept_bytes(m, "+67639132", 9) && gl_matcher_accept_bytes(m, "<", 1));
    gl_matcher_free(m);
    gl_grammar_unref(g);
    json_decref(tools);
}

TEST(test_parameter_sets)
{
    REQUIRE(vocab);
    json_error_t je;
    json_t *tools = json_loads(TOOLS, 0, &je);
    REQUIRE(tools);
    struct gl_err err = {0};
    struct gl_grammar *g = NULL;
    REQUIRE(gl_grammar_compile_atem_tools(&g, tools, NULL, GL_ATEM_TOK_MESSAGE, NULL, &err) ==
            GL_OK);
    CHECK(accepts_call(g, "get_weather", P("city", "Paris"), 1) == 1);
    CHECK(accepts_call(g, "get_weather", P("city", "Paris") P("unit", "celsius") P("days", "3"),
                       1) == 1);
    CHECK(accepts_call(g, "get_weather", P("days", "3") P("unit", "celsius") P("city", "Paris"),
                       1) == 1);
    CHECK(accepts_call(g, "get_weather", P("unit", "celsius"), 0) == 0);           // missing city
    CHECK(accepts_call(g, "get_weather", P("city", "a") P("city", "b"), 0) == 0);  // duplicate
    CHECK(accepts_call(g, "get_weather", P("city", "a") P("zip", "1"), 0) == 0);   // undeclared
    CHECK(accepts_call(g, "get_weather", P("city", "a<b"), 0) == 0);               // '<' in raw
    CHECK(accepts_call(g, "get_weather", P("city", "a") P("days", "15"), 0) == 0); // maximum
    // A raw string value never reads back as another JSON value (the parser takes a value
    // that is one JSON text as JSON).
    static const char *const raw_ok[] = {"4 apples", "2024-01-01", "truely", "nul",
                                         " 42",      "42 ",        "1.",     "1e",
                                         "-",        "0x1F",       "+1",     "tr ue"};
    static const char *const raw_bad[] = {"42",    "true", "null", "-1.5e3", "0",
                                          "\"x\"", "{a",   "[1]",  "1E+2",   "false"};
    for (size_t i = 0; i < sizeof raw_ok / sizeof *raw_ok; i++) {
        char p[128];
        snprintf(p, sizeof p, P("city", "%s"), raw_ok[i]);
        CHECKF(accepts_call(g, "get_weather", p, 1) == 1, "city %s", raw_ok[i]);
    }
    for (size_t i = 0; i < sizeof raw_bad / sizeof *raw_bad; i++) {
        char p[128];
        snprintf(p, sizeof p, P("city", "%s"), raw_bad[i]);
        CHECKF(accepts_call(g, "get_weather", p, 0) == 0, "city %s", raw_bad[i]);
    }
    CHECK(accepts_call(g, "search.web", P("q", "x") P("exact", "true"), 1) == 1);
    CHECK(accepts_call(g, "search.web", P("exact", "false") P("q", "x") P("tags", "[\"a\"]"), 1) ==
          1);
    CHECK(accepts_call(g, "search.web", P("q", "x") P("exact", "yes"), 0) == 0);
    CHECK(accepts_call(g, "ping", "", 1) == 1);
    CHECK(accepts_call(g, "ping", P("x", "1"), 0) == 0);
    // Ten parameters: schema order.
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p5", "2"), 1) == 1);
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p2", "null") P("p5", "2") P("p9", "true"), 1) ==
          1);
    CHECK(accepts_call(g, "bulk", P("p5", "2") P("p0", "1"), 0) == 0);
    // Numbers stay within what the parser's JSON reader reads (integers: 2^53 - 1).
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p3", "9007199254740991") P("p5", "2"), 1) == 1);
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p3", "9007199254740992") P("p5", "2"), 0) == 0);
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p5", "2") P("p8", "-2500000000000000000.5"), 1) ==
          1);
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p5", "2") P("p8", "1e400"), 0) == 0);
    CHECK(accepts_call(g, "bulk", P("p0", "1") P("p5", "2") P("p8", "99999999999999999999"), 0) ==
          0);
    CHECK(accepts_call(g, "nope", "", 0) == 0);
    gl_grammar_unref(g);

    // opts.ordered_keys: parameters in schema order only.
    struct gl_grammar_opts o = gl_grammar_default_opts();
    o.ordered_keys = 1;
    REQUIRE(gl_grammar_compile_atem_tools(&g, tools, "get_weather", GL_ATEM_TOK_MESSAGE, &o,
                                          &err) == GL_OK);
    CHECK(accepts_call(g, "get_weather", P("city", "Paris") P("days", "3"), 1) == 1);
    CHECK(accepts_call(g, "get_weather", P("days", "3") P("city", "Paris"), 0) == 0);
    gl_grammar_unref(g);

    // Named: only that function.
    REQUIRE(gl_grammar_compile_atem_tools(&g, tools, "search.web", GL_ATEM_TOK_MESSAGE, NULL,
                                          &err) == GL_OK);
    CHECK(accepts_call(g, "search.web", P("q", "x") P("exact", "true"), 1) == 1);
    CHECK(accepts_call(g, "get_weather", P("city", "Paris"), 0) == 0);
    gl_grammar_unref(g);
    json_decref(tools);
}

static gl_status compile_text(const char *tools_text, const char *only, struct gl_err *err)
{
    json_error_t je;
    json_t *tools = json_loads(tools_text, 0, &je);
    GL_ASSERT(tools);
    struct gl_grammar *g = NULL;
    gl_status st = gl_grammar_compile_atem_tools(&g, tools, only, GL_ATEM_TOK_MESSAGE, NULL, err);
    gl_grammar_unref(g);
    json_decref(tools);
    return st;
}

TEST(test_errors)
{
    struct gl_err err = {0};
    static const char ok0[] = "{\"name\":\"a\",\"parameters\":{\"type\":\"object\"}}";
    char buf[512];
    snprintf(buf, sizeof buf,
             "[%s,{\"name\":\"b\",\"parameters\":{\"type\":\"object\","
             "\"properties\":{\"x\":{"
             "\"type\":\"strnig\"}}}}]",
             ok0);
    CHECK(compile_text(buf, NULL, &err) != GL_OK);
    CHECKF(strstr(err.msg, "tools[1]") || strstr(err.msg, "/tools/1/"), "%s", err.msg);
    CHECK(compile_text(buf, "a", &err) == GL_OK); // the bad tool is not compiled when not forced
    snprintf(buf, sizeof buf, "[%s]", ok0);
    CHECK(compile_text(buf, "zz", &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "no function named 'zz'") != NULL);
    CHECK(compile_text("[]", NULL, &err) == GL_E_INVAL);
    CHECK(compile_text("[{\"name\":\"a b\"}]", NULL, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "tools[0]") != NULL);
    snprintf(buf, sizeof buf, "[%s,%s]", ok0, ok0);
    CHECK(compile_text(buf, NULL, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "duplicate") != NULL);
    CHECK(compile_text("[{\"name\":\"a\",\"parameters\":{\"anyOf\":[{}]}}]", NULL, &err) ==
          GL_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "tools[0]") && strstr(err.msg, "anyOf"));
    CHECK(compile_text("[{\"name\":\"a\",\"parameters\":{\"type\":\"array\"}}]", NULL, &err) ==
          GL_E_INVAL);
    CHECK(compile_text("[{\"name\":\"a\",\"parameters\":{\"properties\":{\"x\":{}"
                       "},\"required\":"
                       "[\"x\"],\"maxProperties\":0}}]",
                       NULL, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "cannot be satisfied") != NULL);
    CHECK(compile_text("[{\"name\":\"a\",\"parameters\":{\"required\":[\"x\"],"
                       "\"additionalProperties\":false}}]",
                       NULL, &err) == GL_E_INVAL);
    CHECK(compile_text("[{\"name\":\"a\",\"parameters\":{\"properties\":{\"a\\\"b\":{}}}}]", NULL,
                       &err) == GL_E_UNSUPPORTED);
    // Lenient mode drops what it cannot enforce and says so.
    struct gl_grammar_opts o = gl_grammar_default_opts();
    o.lenient = 1;
    json_error_t je;
    json_t *tools = json_loads("[{\"name\":\"a\",\"parameters\":{\"type\":\"object\",\"properties\""
                               ":{\"x\":{\"type\":\"integer\"}},\"dependentRequired\":{}}}]",
                               0, &je);
    struct gl_grammar *g = NULL;
    CHECK(gl_grammar_compile_atem_tools(&g, tools, NULL, GL_ATEM_TOK_MESSAGE, &o, &err) == GL_OK);
    CHECK(g && strstr(gl_grammar_warnings(g), "dependentRequired at /tools/0/parameters"));
    gl_grammar_unref(g);
    json_decref(tools);
}

static void free_all(void)
{
    gl_gvocab_free(vocab);
    gl_tokenizer_free(tok);
    free(closers);
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
    int32_t nv = gl_tokenizer_n_vocab(tok);
    closers = malloc((size_t)nv * sizeof *closers);
    for (int32_t id = 0; closers && id < GL_TOK_N_BASE && id < nv; id++) {
        size_t len;
        const char *p = gl_tokenizer_token_bytes(tok, id, &len);
        if (p && (memchr(p, '<', len) || memchr(p, '"', len) || memchr(p, ']', len) ||
                  memchr(p, '}', len)))
            closers[n_closers++] = id;
    }
    RUN_TESTS(test_pattern_meets_raw_guard, test_parameter_sets, test_walks_required,
              test_walks_named, test_errors);
}
