// SPDX-License-Identifier: MIT
// GBNF, regex and choice front ends (src/grammar/gbnf.c, frontends.c): each
// grammar is built into an IR, validated and run with the byte-level recogniser
// (match.h); the strings listed must be accepted in full or rejected (at some
// byte or at the end). Errors must name the rule and line:col. Dialect:
// llama.cpp's grammars/README.md.
#include "grammar/frontend.h"
#include "grammar/match.h"
#include "test.h"

#include <string.h>

enum fe { FE_GBNF, FE_REGEX, FE_CHOICE };

struct built {
    struct gl_gir ir;
    struct gl_mstate *s;
    struct gl_err err;
    gl_status st;
};

static int32_t lookup(void *user, const char *text, size_t len)
{
    (void)user;
    if (len == 7 && memcmp(text, "<|eot|>", 7) == 0)
        return 200008;
    if (len == 7 && memcmp(text, "<think>", 7) == 0)
        return 200100;
    return -1;
}

static void build(struct built *o, enum fe kind, const char *src, int with_lookup)
{
    memset(o, 0, sizeof *o);
    struct gl_grammar_opts opts = gl_grammar_default_opts();
    struct gl_gctx c = {.opts = &opts, .deadline_us = gl_time_us() + 5000000};
    if (with_lookup)
        c.token_lookup = lookup;
    struct gl_gir_builder b;
    o->st = gl_gir_builder_init(&b, &o->ir, 100000, &o->err);
    int32_t root = -1;
    if (o->st == GL_OK) {
        if (kind == FE_GBNF)
            o->st = gl_gbnf_build(&b, &c, src, strlen(src), &root, &o->err);
        else if (kind == FE_REGEX)
            o->st = gl_fe_regex_build(&b, &c, src, strlen(src), &root, &o->err);
        else
            o->st = gl_fe_choice_build(&b, &c, src, strlen(src), &root, &o->err);
    }
    if (o->st == GL_OK) {
        o->ir.root = root;
        o->st = gl_gir_validate(&o->ir, &o->err);
    }
    if (o->st == GL_OK)
        o->st = gl_mstate_new(&o->s, &o->ir, NULL, &o->err);
    gl_free(c.warnings);
}

static void unbuild(struct built *o)
{
    gl_mstate_free(o->s);
    gl_gir_free(&o->ir);
}

// 1: the whole string is accepted and the state can end there.
static int accepts(struct built *o, const char *s, size_t n)
{
    gl_mstate_reset(o->s);
    for (size_t i = 0; i < n; i++)
        if (!gl_mstate_advance_byte(o->s, (uint8_t)s[i]))
            return 0;
    return gl_mstate_can_end(o->s);
}

// Checks every string in yes[] is accepted and every one in no[] rejected
// (NULL-terminated).
static int check_lang(enum fe kind, const char *src, const char *const *yes, const char *const *no)
{
    struct built o;
    build(&o, kind, src, 0);
    if (o.st != GL_OK) {
        fprintf(stderr, "  build failed for %.60s: %s\n", src, o.err.msg);
        unbuild(&o);
        return 0;
    }
    int ok = 1;
    for (; yes && *yes; yes++)
        if (!accepts(&o, *yes, strlen(*yes))) {
            fprintf(stderr, "  %.60s: should accept \"%s\"\n", src, *yes);
            ok = 0;
        }
    for (; no && *no; no++)
        if (accepts(&o, *no, strlen(*no))) {
            fprintf(stderr, "  %.60s: should reject \"%s\"\n", src, *no);
            ok = 0;
        }
    unbuild(&o);
    return ok;
}

// The build fails with code and a message containing want.
static int check_err(const char *src, gl_status code, const char *want)
{
    struct built o;
    build(&o, FE_GBNF, src, 0);
    int ok = o.st == code && strstr(o.err.msg, want) != NULL;
    if (!ok)
        fprintf(stderr, "  %s: got %s \"%s\", want %s \"%s\"\n", src, gl_status_name(o.st),
                o.err.msg, gl_status_name(code), want);
    unbuild(&o);
    return ok;
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

TEST(test_literals_and_alternatives)
{
    CHECK(
        check_lang(FE_GBNF, "root ::= \"a\" | \"bc\" | \"\"", L("a", "bc", ""), L("b", "ab", "c")));
    CHECK(check_lang(FE_GBNF, "root ::= \"x\\n\\t\\\\\\\"\\x41\\u00e9\\U0001F600\"",
                     L("x\n\t\\\"A\xC3\xA9\xF0\x9F\x98\x80"), L("x", "x\n\t\\\"A")));
    // Literal UTF-8 in the source is a code point sequence, written back as the
    // same bytes.
    CHECK(check_lang(FE_GBNF, "root ::= \"h\xC3\xA9\" \"!\"", L("h\xC3\xA9!"), L("he!")));
    // \x80 is U+0080 (two UTF-8 bytes), as llama.cpp reads code points.
    CHECK(check_lang(FE_GBNF, "root ::= \"\\x80\"", L("\xC2\x80"), L("\x80")));
}

TEST(test_classes_and_any)
{
    CHECK(check_lang(FE_GBNF, "root ::= [a-cx]+", L("a", "cab", "x"), L("", "d", "ab-")));
    CHECK(check_lang(FE_GBNF, "root ::= [^a\\n]", L("b", "\xE6\xBC\xA2", "\t"),
                     L("a", "\n", "bb", "\xFF")));
    CHECK(check_lang(FE_GBNF, "root ::= [\\-\\]\\\\]", L("-", "]", "\\"), L("a")));
    CHECK(check_lang(FE_GBNF, "root ::= [\xE3\x81\x81-\xE3\x82\x9F]{2}",
                     L("\xE3\x81\x82\xE3\x82\x93"), L("\xE3\x81\x82", "ab")));
    CHECK(check_lang(FE_GBNF, "root ::= [\\x00-\\x1F\\U0001F600]", L("\x01", "\xF0\x9F\x98\x80"),
                     L(" ", "\xF0\x9F\x98\x81")));
    // `.` is any code point, newline included; never invalid UTF-8.
    CHECK(check_lang(FE_GBNF, "root ::= . .", L("ab", "\n\xE2\x82\xAC"),
                     L("a", "abc", "a\xFF", "a\xC3")));
    // A negated class over everything but surrogates still matches the rest.
    CHECK(check_lang(FE_GBNF, "root ::= [^a]*", L("", "bcd", "\xF4\x8F\xBF\xBF"), L("ba")));
}

TEST(test_repetition)
{
    CHECK(check_lang(FE_GBNF, "root ::= \"a\"{3}", L("aaa"), L("aa", "aaaa")));
    CHECK(check_lang(FE_GBNF, "root ::= \"a\"{2,}", L("aa", "aaaaaaaa"), L("a")));
    CHECK(check_lang(FE_GBNF, "root ::= \"a\"{1,3} \"b\"", L("ab", "aaab"), L("b", "aaaab")));
    CHECK(check_lang(FE_GBNF, "root ::= \"a\"{,2}", L("", "aa"), L("aaa")));
    CHECK(check_lang(FE_GBNF, "root ::= \"a\"{ 2 , 3 }", L("aa", "aaa"), L("a")));
    CHECK(check_lang(FE_GBNF, "root ::= \"a\"? \"b\"* \"c\"+", L("c", "abbcc", "bc"),
                     L("", "ab", "aac")));
    CHECK(check_lang(FE_GBNF, "root ::= (\"ab\" | \"c\"){2}", L("abab", "cab", "cc"),
                     L("ab", "abc c")));
    CHECK(check_lang(FE_GBNF, "root ::= \"x\"{0}", L(""), L("x")));
    // A bounded repetition of a possibly empty item is fine (finite).
    CHECK(check_lang(FE_GBNF, "root ::= (\"a\"?){2}", L("", "a", "aa"), L("aaa")));
}

TEST(test_rules_comments_newlines)
{
    static const char g[] = "# a list of items\n"
                            "root ::= item (\",\" ws item)* # trailing comment\n"
                            "\n"
                            "item ::= (\n"
                            "    num    # a number\n"
                            "  | word\n"
                            ")\n"
                            "num ::= [0-9]+\n"
                            "word ::=\n"
                            "  [a-z]+ |\n"
                            "  \"<\" word \">\"\n"
                            "ws ::= \" \"?\n";
    CHECK(check_lang(FE_GBNF, g, L("1", "1,ab", "12, <<x>>,3"), L("", "1,", "<x", "1 ,2")));
    // A rule that is just another rule, defined after its use; right recursion.
    CHECK(check_lang(FE_GBNF, "root ::= a\na ::= b\nb ::= \"(\" b \")\" | \"\"",
                     L("", "()", "((()))"), L("(", "())")));
    // CRLF line ends.
    CHECK(check_lang(FE_GBNF, "root ::= x\r\nx ::= \"y\"\r\n", L("y"), L("x")));
}

// 300 alternatives, more than the recogniser's 64 parse threads: literal alternatives (alone or
// before a common tail) are merged into one automaton, so every one of them still matches.
TEST(test_long_alternations)
{
    size_t cap = 300 * 24 + 64;
    char *g = malloc(cap), *h = malloc(cap);
    REQUIRE(g && h);
    size_t n = (size_t)snprintf(g, cap, "root ::= ");
    size_t m = (size_t)snprintf(h, cap, "root ::= (");
    for (int i = 0; i < 300; i++) {
        n += (size_t)snprintf(g + n, cap - n, "%s\"w%d\"", i ? " | " : "", i);
        m += (size_t)snprintf(h + m, cap - m, "%s\"k%d\" x", i ? " | " : "", i);
    }
    snprintf(h + m, cap - m, " | \"k\" [0-9] )\nx ::= [a-z]\n");
    CHECK(check_lang(FE_GBNF, g, L("w0", "w57", "w299"), L("w300", "w", "w2990")));
    CHECK(check_lang(FE_GBNF, h, L("k0a", "k57q", "k299z", "k7", "k2x"), L("k300a", "k57", "k1A")));
    free(g);
    free(h);
}

// A JSON grammar in the style of llama.cpp's json.gbnf (written for this test).
TEST(test_json_grammar)
{
    static const char g[] =
        "root   ::= value\n"
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
        "object ::= \"{\" ws ( pair ( \",\" ws pair )* )? \"}\" ws\n"
        "pair   ::= string \":\" ws value\n"
        "array  ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] |"
        " \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\" ws\n"
        "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]+ )?"
        " ( [eE] [-+]? [0-9]+ )? ws\n"
        "ws     ::= [ \\t\\n]{0,8}\n";
    CHECK(check_lang(FE_GBNF, g,
                     L("{}", "[1, 2.5e3, -0, \"a\\u00e9\\n\"]", "{\"k\": {\"x\": [true, null]}}",
                       "\"\xC3\xA9\"", "0 "),
                     L("{", "[1,]", "01", "\"\\x\"", "{\"a\" 1}", "tru", "\"\x01\"")));
}

TEST(test_tokens)
{
    struct built o;
    build(&o, FE_GBNF, "root ::= \"a\" <[200008]>", 0);
    REQUIRE(o.st == GL_OK);
    gl_mstate_reset(o.s);
    CHECK(gl_mstate_advance_byte(o.s, 'a'));
    CHECK(!gl_mstate_can_end(o.s));
    int32_t ids[4];
    CHECK(gl_mstate_expected_tokens(o.s, ids, 4) == 1 && ids[0] == 200008);
    CHECK(!gl_mstate_advance_byte(o.s, '<')); // its text never matches as bytes
    CHECK(!gl_mstate_advance_token(o.s, 200007));
    CHECK(gl_mstate_advance_token(o.s, 200008));
    CHECK(gl_mstate_can_end(o.s));
    unbuild(&o);

    build(&o, FE_GBNF, "root ::= <think> \"x\" <|eot|>", 1);
    REQUIRE(o.st == GL_OK);
    gl_mstate_reset(o.s);
    CHECK(gl_mstate_advance_token(o.s, 200100));
    CHECK(gl_mstate_advance_byte(o.s, 'x'));
    CHECK(gl_mstate_advance_token(o.s, 200008));
    CHECK(gl_mstate_can_end(o.s));
    unbuild(&o);

    build(&o, FE_GBNF, "root ::= <nope>", 1);
    CHECK(o.st == GL_E_INVAL && strstr(o.err.msg, "at 1:10"));
    unbuild(&o);
    CHECK(check_err("root ::= <think>", GL_E_UNSUPPORTED, "at 1:10"));
    CHECK(check_err("root ::= !<[5]>", GL_E_UNSUPPORTED, "negated token"));
    CHECK(check_err("root ::= <[99999999999]>", GL_E_INVAL, "token id out of range"));
    CHECK(check_err("root ::= <[12>", GL_E_INVAL, "<[token-id]>"));
}

TEST(test_errors)
{
    CHECK(check_err("root ::= \"a\" foo\n", GL_E_INVAL, "gbnf: undefined rule 'foo' at 1:14"));
    CHECK(check_err("root ::= a\na ::= \"x\" b-2", GL_E_INVAL, "undefined rule 'b-2' at 2:11"));
    CHECK(check_err("start ::= \"a\"", GL_E_INVAL, "no rule 'root'"));
    CHECK(check_err("", GL_E_INVAL, "no rule 'root'"));
    CHECK(
        check_err("root ::= root \"a\" | \"b\"", GL_E_INVAL, "left recursion through rule 'root'"));
    CHECK(
        check_err("root ::= a\na ::= b \"x\"\nb ::= \"\" a | \"y\"", GL_E_INVAL, "left recursion"));
    CHECK(check_err("root ::= x* root\nx ::= \"a\"", GL_E_INVAL, "left recursion"));
    CHECK(check_err("root ::= (\"a\"?)*", GL_E_INVAL, "possibly empty item in rule 'root'"));
    CHECK(check_err("root ::= \"a\"\nroot ::= \"b\"", GL_E_INVAL, "defined twice"));
    CHECK(check_err("root ::= \"\\q\"", GL_E_INVAL, "unknown escape at 1:11"));
    CHECK(check_err("root ::= \"\\x4\"", GL_E_INVAL, "hex digits"));
    CHECK(check_err("root ::= \"\\uD800\"", GL_E_INVAL, "Unicode scalar"));
    CHECK(check_err("root ::= \"abc", GL_E_INVAL, "unterminated string literal at 1:10"));
    CHECK(check_err("root ::= [abc", GL_E_INVAL, "unterminated character class"));
    CHECK(check_err("root ::= [z-a]", GL_E_INVAL, "out of order"));
    CHECK(check_err("root ::= [^\\x00-\\U0010FFFF]", GL_E_INVAL, "matches nothing"));
    CHECK(check_err("root ::= \"a\"\n  | \"b\"", GL_E_INVAL, "expected a rule name at 2:3"));
    CHECK(check_err("root ::= (\"a\"", GL_E_INVAL, "expected ')'"));
    CHECK(check_err("root ::= \"a\")", GL_E_INVAL, "expected a newline"));
    CHECK(check_err("root = \"a\"", GL_E_INVAL, "expected '::='"));
    CHECK(check_err("root ::= \"a\"{3,2}", GL_E_INVAL, "maximum below minimum"));
    CHECK(check_err("root ::= \"a\"{2000000}", GL_E_LIMIT, "over 1000000"));
    CHECK(check_err("root ::= \"a\"{2", GL_E_INVAL, "expected '}'"));
    CHECK(check_err("root ::= \"a\" @", GL_E_INVAL, "unexpected character at 1:14"));
    CHECK(check_err("root ::= \"\xFF\"", GL_E_INVAL, "invalid UTF-8"));
    char deep[600];
    memset(deep, '(', sizeof deep);
    memcpy(deep, "root ::= ", 9);
    deep[sizeof deep - 1] = 0;
    CHECK(check_err(deep, GL_E_LIMIT, "nested deeper"));
}

TEST(test_node_budget)
{
    // 2,000 rules in a chain fit; the same under a 1,000-node budget is
    // GL_E_LIMIT.
    size_t cap = 64 * 2000;
    char *g = malloc(cap);
    REQUIRE(g);
    size_t n = (size_t)snprintf(g, cap, "root ::= r0\n");
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(g + n, cap - n, "r%d ::= \"x\" r%d\n", i, i + 1);
    n += (size_t)snprintf(g + n, cap - n, "r2000 ::= \"!\"\n");
    struct built o;
    build(&o, FE_GBNF, g, 0);
    CHECK(o.st == GL_OK);
    unbuild(&o);
    struct gl_gir ir = {0};
    struct gl_err err = {0};
    struct gl_gir_builder b;
    struct gl_grammar_opts opts = gl_grammar_default_opts();
    struct gl_gctx c = {.opts = &opts};
    int32_t root;
    REQUIRE(gl_gir_builder_init(&b, &ir, 1000, &err) == GL_OK);
    CHECK(gl_gbnf_build(&b, &c, g, n, &root, &err) == GL_E_LIMIT);
    gl_gir_free(&ir);
    free(g);
}

TEST(test_regex_kind)
{
    CHECK(check_lang(FE_REGEX, "[a-z]+@[a-z]+\\.(com|org)", L("ab@cd.com", "x@y.org"),
                     L("ab@cd.net", "@x.com", "ab@cd.com ")));
    struct built o;
    build(&o, FE_REGEX, "(a", 0);
    CHECK(o.st != GL_OK && o.err.msg[0]);
    unbuild(&o);
}

TEST(test_choice_kind)
{
    CHECK(check_lang(FE_CHOICE, "[\"red\", \"green\", \"gr\", \"a.b*\", \"\\u00e9\\n\"]",
                     L("red", "green", "gr", "a.b*", "\xC3\xA9\n"),
                     L("", "re", "gre", "greens", "aab", "a.bb")));
    // A long list stays one deterministic automaton.
    char big[40000];
    size_t n = 0;
    big[n++] = '[';
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s\"item%d\"", i ? "," : "", i);
    big[n++] = ']';
    big[n] = 0;
    CHECK(check_lang(FE_CHOICE, big, L("item0", "item1999", "item57"), L("item2000", "item")));
    struct built o;
    build(&o, FE_CHOICE, "[]", 0);
    CHECK(o.st == GL_E_INVAL && strstr(o.err.msg, "non-empty"));
    unbuild(&o);
    build(&o, FE_CHOICE, "[\"a\", 3]", 0);
    CHECK(o.st == GL_E_INVAL && strstr(o.err.msg, "element 1"));
    unbuild(&o);
    build(&o, FE_CHOICE, "{\"a\": 1}", 0);
    CHECK(o.st == GL_E_INVAL);
    unbuild(&o);
    build(&o, FE_CHOICE, "[\"a\"", 0);
    CHECK(o.st == GL_E_INVAL && strstr(o.err.msg, "invalid JSON"));
    unbuild(&o);
}

TEST(test_ctx_helpers)
{
    struct gl_grammar_opts opts = gl_grammar_default_opts();
    struct gl_gctx c = {.opts = &opts};
    CHECK(gl_gctx_warn(&c, "format", "/properties/a"));
    CHECK(gl_gctx_warn(&c, "not", ""));
    CHECK(c.warnings && strcmp(c.warnings, "format at /properties/a; not at ; ") == 0);
    CHECK(c.warn_len == strlen(c.warnings));
    gl_free(c.warnings);
    struct gl_err err = {0};
    c.deadline_us = 0;
    CHECK(gl_gctx_check_time(&c, &err) == GL_OK);
    c.deadline_us = gl_time_us() + 10000000;
    CHECK(gl_gctx_check_time(&c, &err) == GL_OK);
    c.deadline_us = 1;
    CHECK(gl_gctx_check_time(&c, &err) == GL_E_LIMIT);
    CHECK(strstr(err.msg, "compile time budget of 1000 ms exceeded") != NULL);
}

int main(void)
{
    RUN_TESTS(test_literals_and_alternatives, test_classes_and_any, test_repetition,
              test_rules_comments_newlines, test_long_alternations, test_json_grammar, test_tokens,
              test_errors, test_node_budget, test_regex_kind, test_choice_kind, test_ctx_helpers);
}
