// SPDX-License-Identifier: MIT
// grammar API tests with the real 202,048-token vocabulary: the vocabulary index, token masks
// against the brute-force definition (every token fed byte by byte to a copy of the state) on
// seeded random walks over choice, regex, GBNF and JSON Schema grammars, stop and special tokens,
// rollback and re-accept, forced bytes, the mask cache, the grammar cache and canonical hash,
// and compile errors. The ranks file: $GLINT_VOCAB, else ../shared/data/tokenizer/....
#include "grammar/grammar.h"
#include "grammar/mask.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct gl_tokenizer *g_tok;
static struct gl_gvocab *g_voc;
static size_t g_words;
static const int32_t g_stop[] = {GL_TOK_EOS, GL_TOK_EOT, 200010};
#define N_STOP ((int)(sizeof g_stop / sizeof g_stop[0]))

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static int bit(const uint32_t *m, int32_t id)
{
    return (int)((m[id >> 5] >> (id & 31)) & 1);
}

static int64_t popcount(const uint32_t *m)
{
    int64_t n = 0;
    for (size_t w = 0; w < g_words; w++)
        n += __builtin_popcount(m[w]);
    return n;
}

static int in_list(int32_t id, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static int is_stop_id(int32_t id)
{
    for (int i = 0; i < N_STOP; i++)
        if (g_stop[i] == id)
            return 1;
    return 0;
}

// The id of the token whose bytes are exactly s, or -1.
static int32_t tok_id(const char *s)
{
    size_t n = strlen(s);
    for (int32_t id = 0; id < GL_TOK_N_BASE; id++) {
        size_t len;
        const char *p = gl_tokenizer_token_bytes(g_tok, id, &len);
        if (len == n && !memcmp(p, s, n))
            return id;
    }
    return -1;
}

static uint32_t *mask_new(void)
{
    return calloc(g_words, sizeof(uint32_t));
}

static struct gl_grammar *compile(enum gl_grammar_kind kind, const char *src, int ws_max)
{
    struct gl_grammar_opts o = gl_grammar_default_opts();
    o.ws_max = ws_max;
    struct gl_grammar *g = NULL;
    struct gl_err err = {0};
    gl_status st = gl_grammar_compile(&g, kind, src, src ? strlen(src) : 0, &o, &err);
    if (st != GL_OK)
        fprintf(stderr, "  compile failed (%s): %s\n", gl_status_name(st), err.msg);
    return g;
}

static struct gl_matcher *matcher(struct gl_grammar *g)
{
    struct gl_matcher *m = NULL;
    struct gl_err err = {0};
    if (gl_matcher_new(&m, g, g_voc, g_stop, N_STOP, &err) != GL_OK)
        fprintf(stderr, "  matcher failed: %s\n", err.msg);
    return m;
}

// ---- the reference mask: brute force over the vocabulary through the public accept ----
// A token is allowed iff gl_matcher_accept takes it; the probe is undone with a rollback. This
// checks the whole public contract (bytes, GN_TOKEN, stop, special) token by token.
static void ref_mask(struct gl_matcher *m, uint32_t *mask)
{
    memset(mask, 0, g_words * sizeof *mask);
    int32_t n = gl_gvocab_n_vocab(g_voc);
    for (int32_t id = 0; id < n; id++) {
        if (gl_matcher_accept(m, id)) {
            mask[id >> 5] |= 1u << (id & 31);
            struct gl_err err;
            gl_status st = gl_matcher_rollback(m, 1, &err);
            GL_ASSERT(st == GL_OK);
        }
    }
}

// Picks a random allowed token, preferring stop tokens once allowed after min_len steps.
static int32_t pick(const uint32_t *mask, int step, int min_len)
{
    if (step >= min_len)
        for (int i = 0; i < N_STOP; i++)
            if (bit(mask, g_stop[i]) && rng() % 3 == 0)
                return g_stop[i];
    int64_t n = popcount(mask);
    if (n == 0)
        return -1;
    int64_t k = (int64_t)(rng() % (uint64_t)n);
    for (size_t w = 0; w < g_words; w++) {
        int c = __builtin_popcount(mask[w]);
        if (k < c) {
            uint32_t x = mask[w];
            for (int b = 0; b < 32; b++)
                if ((x >> b) & 1) {
                    if (k-- == 0)
                        return (int32_t)(w * 32 + (size_t)b);
                }
        }
        k -= c;
    }
    return -1;
}

// Walks the grammar: at each step the fast mask equals the reference mask, has no special
// token except stop tokens at the end, is never all zero; stop tokens appear iff can_end.
// named: the special ids the grammar names as token literals (exempt from those two checks).
static void walk_check_named(const char *what, struct gl_grammar *g, int steps, int n_walks,
                             int min_len, const int32_t *named, int n_named)
{
    struct gl_matcher *m = matcher(g);
    REQUIRE(m);
    uint32_t *fast = mask_new(), *ref = mask_new();
    int compared = 0;
    char doc[4096]; // the walk's bytes so far, shown when a mask differs
    for (int w = 0; w < n_walks; w++) {
        gl_matcher_reset(m);
        size_t doc_len = 0;
        for (int s = 0; s < steps && !gl_matcher_is_finished(m); s++) {
            gl_matcher_fill_mask(m, fast);
            ref_mask(m, ref);
            compared++;
            int same = memcmp(fast, ref, g_words * sizeof *fast) == 0;
            CHECKF(same, "%s walk %d step %d: fast %lld vs ref %lld tokens", what, w, s,
                   (long long)popcount(fast), (long long)popcount(ref));
            if (!same) {
                fprintf(stderr, "    after: '%.*s'\n", (int)doc_len, doc);
                for (int32_t id = 0, shown = 0; id < gl_gvocab_n_vocab(g_voc) && shown < 5; id++)
                    if (bit(fast, id) != bit(ref, id)) {
                        size_t len;
                        const char *p = gl_tokenizer_token_bytes(g_tok, id, &len);
                        fprintf(stderr, "    token %d '%.*s' fast %d ref %d\n", id, (int)len, p,
                                bit(fast, id), bit(ref, id));
                        shown++;
                    }
                break;
            }
            CHECK(popcount(fast) > 0);
            int can_end = gl_matcher_can_end(m);
            for (int i = 0; i < N_STOP; i++)
                CHECKF(bit(fast, g_stop[i]) == can_end || in_list(g_stop[i], named, n_named),
                       "%s stop %d can_end %d", what, g_stop[i], can_end);
            int special_leak = 0;
            for (int32_t id = GL_TOK_N_BASE; id < gl_gvocab_n_vocab(g_voc); id++)
                if (!is_stop_id(id) && bit(fast, id) && !in_list(id, named, n_named))
                    special_leak = 1;
            CHECKF(!special_leak, "%s: a special token is allowed", what);
            int32_t t = pick(fast, s, min_len);
            REQUIRE(t >= 0);
            CHECK(gl_matcher_accept(m, t));
            size_t tl = 0;
            const char *tb = gl_tokenizer_token_bytes(g_tok, t, &tl);
            if (tb && doc_len + tl < sizeof doc) {
                memcpy(doc + doc_len, tb, tl);
                doc_len += tl;
            }
        }
        if (gl_matcher_is_finished(m)) {
            gl_matcher_fill_mask(m, fast);
            CHECK(popcount(fast) == 0);
            CHECK(!gl_matcher_accept(m, 'a'));
        }
    }
    CHECK(compared > 0);
    free(fast);
    free(ref);
    gl_matcher_free(m);
}

static void walk_check(const char *what, struct gl_grammar *g, int steps, int n_walks, int min_len)
{
    walk_check_named(what, g, steps, n_walks, min_len, NULL, 0);
}

// ---- tests ----

TEST(test_vocab_index)
{
    REQUIRE(g_voc);
    CHECK(gl_gvocab_n_vocab(g_voc) == 202048);
    CHECK(gl_gvocab_mask_words(g_voc) == (202048 + 31) / 32);
    for (int32_t id = 0; id < 202048; id += 997) {
        size_t a, b;
        const uint8_t *p = gl_gvocab_token(g_voc, id, &a);
        const char *q = gl_tokenizer_token_bytes(g_tok, id, &b);
        CHECK(a == b && (a == 0 || memcmp(p, q, a) == 0));
    }
    CHECK(!gl_gvocab_is_excluded(g_voc, 'a' - 'a' + 64)); // a byte token
    for (int32_t id = GL_TOK_N_BASE; id < 202048; id++)
        if (!gl_gvocab_is_excluded(g_voc, id)) {
            CHECKF(0, "special %d not excluded", id);
            break;
        }
    CHECK(gl_gvocab_is_excluded(g_voc, -1) && gl_gvocab_is_excluded(g_voc, 202048));
    int64_t nodes, slow_tok, slow_nodes;
    gl_gvocab_sizes(g_voc, &nodes, &slow_tok, &slow_nodes);
    // Every base token is in the trie once and adds at most its length in nodes.
    CHECK(nodes > 200000 && nodes < 2000000);
    CHECK(slow_tok > 100 && slow_tok < 20000);
    CHECK(slow_nodes < nodes);
}

TEST(test_choice_masks)
{
    struct gl_grammar *g =
        compile(GL_GRAMMAR_CHOICE, "[\"yes\", \"no\", \"yes!\", \"maybe so\"]", 16);
    REQUIRE(g);
    walk_check("choice", g, 8, 3, 0);
    gl_grammar_unref(g);
}

TEST(test_regex_masks)
{
    struct gl_grammar *g = compile(GL_GRAMMAR_REGEX, "[a-z]{2,6}@(ex|foo)\\.(com|org)", 16);
    REQUIRE(g);
    walk_check("regex", g, 10, 2, 0);
    gl_grammar_unref(g);
}

TEST(test_gbnf_masks)
{
    const char *src = "root ::= \"[\" item (\",\" item){0,3} \"]\"\n"
                      "item ::= [0-9]+ | \"'\" [a-z]* \"'\"\n";
    struct gl_grammar *g = compile(GL_GRAMMAR_GBNF, src, 16);
    REQUIRE(g);
    walk_check("gbnf", g, 10, 2, 4);
    gl_grammar_unref(g);
}

TEST(test_schema_masks)
{
    const char *src = "{\"type\":\"object\",\"properties\":{"
                      "\"name\":{\"type\":\"string\",\"maxLength\":12},"
                      "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
                      "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2}"
                      "},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
    struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, src, 2);
    REQUIRE(g);
    walk_check("schema", g, 12, 2, 6);
    gl_grammar_unref(g);
    g = compile(GL_GRAMMAR_JSON_OBJECT, NULL, 0);
    REQUIRE(g);
    walk_check("json_object", g, 10, 2, 6);
    gl_grammar_unref(g);
}

// The string-body paths of the mask (mask.c): quote-free parts from each thread's frame alone
// (cached by frame value), the class walk over byte partitions (forced here wherever it applies:
// in normal use only frames that accept much take it), several string threads at once, key
// bodies under patternProperties, and quote tokens split at their first quote.
TEST(test_frame_masks)
{
    gl_mask_set_class_policy(0, 0);
    static const char *const schemas[] = {
        // a word counter: the DFA state changes at every space, the accepted classes do not
        "{\"type\":\"string\",\"pattern\":\"^(?:\\\\S+\\\\s+){0,4}\\\\S+$\",\"maxLength\":30}",
        // a search pattern, decided after its first match
        "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"[a-z0-9]\"}}",
        // a fine partition (many literal characters)
        "{\"type\":\"string\",\"format\":\"date-time\"}",
        // two string readings alive together
        "{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"^[a-z ]+$\"},"
        "{\"type\":\"string\",\"minLength\":3,\"maxLength\":6}]}",
        // keys under patterns only; a declared key alongside
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
        "\"patternProperties\":{\"^x[a-z]*$\":{\"type\":\"integer\"}},"
        "\"additionalProperties\":false}",
        // numbers in several readings and contexts
        "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"number\",\"minimum\":-1.5,"
        "\"maximum\":90},{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":"
        "{\"x\":{\"type\":\"number\"}}}]}}",
        // a string value closing into each context: object member, array item
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":"
        "{\"type\":\"string\",\"minLength\":1}},\"b\":{\"type\":\"string\"}}}",
        // the walk memo by stepper state (memo_walk): DFA states recurring under other counts
        // (a maxLength slack above, at and below what a token needs) and other properties
        "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":"
        "\"^[a-z]+(?: [a-z]+)*$\",\"maxLength\":9}}",
        "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":"
        "\"^[a-z]+(?: [a-z]+)*$\",\"maxLength\":200}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"format\":"
        "\"uri\",\"maxLength\":300},\"b\":{\"type\":\"string\",\"format\":\"uri\"},"
        "\"c\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"format\":\"uri\"}}}}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, schemas[i], i % 2);
        REQUIRE(g);
        char what[32];
        snprintf(what, sizeof what, "frame schema %zu", i);
        walk_check(what, g, 14, T_BY_BUILD(2, 1), 8);
        gl_grammar_unref(g);
    }
    gl_mask_set_class_policy(-1, -1);
}

// Keys of declared names only: a multi-byte name sharing a prefix, and names with bytes that
// need an escape ('"', '\\', a control byte).
#define NAMES_SCHEMA                                                                               \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"nam\xc3\xa9\":"         \
    "{\"type\":\"integer\"},\"a\\\"b\":{},\"tab\\tx\":{},\"back\\\\slash\":{},\"nx\":{}},"         \
    "\"additionalProperties\":false,\"required\":[\"nx\"]}"

// Keys of an object open to any other key (additional properties, no patterns; EXTRA: more
// keywords): a quote token's outcome is read from the key frame without stepping it
// (gl_mstate_sframe_key_quote): a declared name, a duplicate of one or of a non-declared key, a
// non-declared key.
#define OKEY_SCHEMA(EXTRA)                                                                         \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"nam\xc3\xa9\":"         \
    "{\"type\":\"integer\"},\"a_\":{},\"nx\":{}},\"additionalProperties\":{\"type\":"              \
    "\"integer\"},\"required\":[\"nx\"]" EXTRA "}"

// An object of pattern properties PATS beside a declared "xname", no other key (EXTRA: more
// keywords).
#define PKEY_SCHEMA(PATS, EXTRA)                                                                   \
    "{\"type\":\"object\",\"properties\":{\"xname\":{}},\"patternProperties\":{" PATS "},"         \
    "\"additionalProperties\":false" EXTRA "}"

// Fixed prefixes that end where the string-body paths are easy to get wrong: after a backslash
// (a quote there is no end), inside \uXXXX, inside a multi-byte character, inside a key under a
// pattern, with two string readings alive; each mask against the reference, with the class walk
// forced and with the default policy.
TEST(test_frame_prefixes)
{
    static const struct {
        const char *schema, *prefix;
    } cases[] = {
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3}}", "[ \"#hl\",\"\\"},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z ]+$\"}", "\"ab\\"},
        {"{\"type\":\"string\",\"pattern\":\"[a-z0-9]\"}", "\"x\\u00"},
        {"{\"type\":\"string\",\"pattern\":\"^(?:\\\\S+\\\\s+){0,2}\\\\S+$\"}", "\"a b \xc3"},
        {"{\"type\":\"string\",\"minLength\":2}", "\"\xe2\x82"},
        {"{\"type\":\"object\",\"patternProperties\":{\"^x[a-z]*$\":{\"type\":\"integer\"}},"
         "\"additionalProperties\":false}",
         "{\"xa"},
        {"{\"type\":\"object\",\"patternProperties\":{\"^x[a-z]*$\":{\"type\":\"integer\"}},"
         "\"additionalProperties\":false}",
         "{\"x\\"},
        {"{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"},{\"type\":\"string\","
         "\"maxLength\":4}]}",
         "\"ab"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":2}},"
         "\"required\":[\"a\"]}",
         "{\"a\":\"x"},
        // numbers: the number-only tokens from the number frame, the rest from the state
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
         "\"b\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":500}}}",
         "{\"a\":1"},
        // keys of declared names only (names_part follows the names through the trie): at the
        // start, inside a shared prefix, inside a multi-byte character, before a name byte
        // that needs an escape ('"', '\\', a control byte), after a member
        {NAMES_SCHEMA, "{\""},
        {NAMES_SCHEMA, "{\"na"},
        {NAMES_SCHEMA, "{\"nam\xc3"},
        {NAMES_SCHEMA, "{\"a"},
        {NAMES_SCHEMA, "{\"ba"},
        {NAMES_SCHEMA, "{\"t"},
        {NAMES_SCHEMA, "{\"name\":\"v\",\""},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"}}}", "{\"a\":-0."},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"}}}", "{\"a\":2e"},
        {"{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\",\"minimum\":-5,"
         "\"maximum\":500}}}",
         "{\"b\":4"},
        {"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"number\",\"maximum\":90},"
         "{\"type\":\"integer\"}]}}",
         "[12"},
        // regexes that take every plain run (all plain tokens, the rest walked): search patterns
        // before, inside and after their match (the search loops), an anchored one that says so
        // only by exploring its states, and near misses that must stay exact: `.` refuses
        // U+2028/U+2029 (E2 80 A8/A9), a maxLength, a position inside a character
        {"{\"type\":\"string\",\"pattern\":\"\\\\.(yaml|json)$\"}", "\"ab"},
        {"{\"type\":\"string\",\"pattern\":\".*[Hh]otel [Pp]aris.*\"}", "\"Hotel Par"},
        {"{\"type\":\"string\",\"pattern\":\".*[Hh]otel [Pp]aris.*\"}", "\"a hotel paris!"},
        {"{\"type\":\"string\",\"pattern\":\"^ab\"}", "\"abz"},
        {"{\"type\":\"string\",\"pattern\":\"^ab\"}", "\"a"},
        {"{\"type\":\"string\",\"pattern\":\"^[\\\\s\\\\S]*$\"}", "\"x"},
        {"{\"type\":\"string\",\"pattern\":\"^x.*$\"}", "\"x"},
        {"{\"type\":\"string\",\"pattern\":\"y\",\"maxLength\":5}", "\"x"},
        {"{\"type\":\"string\",\"pattern\":\"y\"}", "\"x\xe2\x80"},
        // string readings whose ends lead to different states: the quote tokens grouped by the
        // set of readings that end (`",` only after a third character, `"]` already now)
        {"{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},"
         "\"maxItems\":1},{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":3}}]}",
         "[\"ab"},
        {"{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},"
         "\"maxItems\":1},{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":3}}]}",
         "[\"a"},
        // uniqueItems items: the quote (and every token with it) only where the decoded item is
        // new; over an enum, only the bytes that some unseen value continues with
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}",
         "[\"ab\",\"a\",\"a"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}",
         "[\"ab\",\"\",\""},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}",
         "[\"x\",\"\\u007"},
        {"{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true},"
         "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":2}}]}",
         "[\"ab\",\"ab"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z][a-z0-9_]*$\"},"
         "\"uniqueItems\":true}",
         "[\"a_1\",\"b\",\"a_1"},
        {"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"ab\",\"b\",\"ba\"]},"
         "\"uniqueItems\":true}",
         "[\"ab\",\"a\",\""},
        {"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"ab\",\"b\",\"ba\"]},"
         "\"uniqueItems\":true}",
         "[\"ab\",\"ba\",\"b\",\"a\""},
        // keys under the object's one pattern property (walked as a string with that regex, the
        // declared names still possible added by their paths: gl_mstate_sfast): inside a
        // character, under a search pattern, after a name sharing the pattern's prefix was read,
        // with a name still possible that the pattern refuses, inside a name, the name complete
        // with the pattern dead (the frame walk), no room left for a non-declared key
        // (maxProperties and a required name); two patterns (either may take a byte: the frame
        // walk)
        {PKEY_SCHEMA("\"^x.*$\":{}", ""), "{\"x\xc3"},
        {PKEY_SCHEMA("\"[0-9]\":{}", ""), "{\"ab"},
        {PKEY_SCHEMA("\"^x[a-z]*$\":{}", ""), "{\"xname\":1,\"x"},
        {PKEY_SCHEMA("\"^x[0-9]*$\":{}", ""), "{\"x"},
        {PKEY_SCHEMA("\"^x[a-z]*$\":{}", ""), "{\"xnam"},
        {PKEY_SCHEMA("\"^y\":{}", ""), "{\"xname"},
        {PKEY_SCHEMA("\"^x\":{}", ",\"maxProperties\":2,\"required\":[\"xname\"]"),
         "{\"xa\":1,\"x"},
        {PKEY_SCHEMA("\"^x[a-z]*$\":{},\"^[a-c]+$\":{}", ""), "{\"xname\":1,\""},
        // keys of declared names only, inside an escape (the names' next code points against
        // the escape's ranges: key_names_viable): after the backslash, inside \uXXXX before a
        // name's multi-byte character, where no name goes on with an escape
        {NAMES_SCHEMA, "{\"a\\"},
        {NAMES_SCHEMA, "{\"nam\\u00"},
        {NAMES_SCHEMA, "{\"\\u00"},
        {NAMES_SCHEMA, "{\"nx\":1,\"n\\"},
        // keys of an open object (the quote outcomes read from the frame; the real vocabulary's
        // quote tokens have punctuation before their quote, so the names end in one): at the
        // start, before the rest of a declared name ("_" completes "a_"), that name read
        // before (its rest a duplicate), a non-declared key read before (likewise: "z,"),
        // inside a multi-byte character (stepped), no room left for a non-declared key (stepped)
        {OKEY_SCHEMA(""), "{\""},
        {OKEY_SCHEMA(""), "{\"a"},
        {OKEY_SCHEMA(""), "{\"a_\":1,\"a"},
        {OKEY_SCHEMA(""), "{\"z,\":1,\"z"},
        {OKEY_SCHEMA(""), "{\"nam\xc3"},
        {OKEY_SCHEMA(",\"maxProperties\":2"), "{\"zz\":1,\"n"},
    };
    uint32_t *fast = mask_new(), *ref = mask_new();
    for (int forced = 0; forced < 2; forced++) {
        gl_mask_set_class_policy(forced ? 0 : -1, forced ? 0 : -1);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, cases[i].schema, 1);
            REQUIRE(g);
            struct gl_matcher *m = matcher(g);
            REQUIRE(m);
            CHECKF(gl_matcher_accept_bytes(m, cases[i].prefix, strlen(cases[i].prefix)),
                   "case %zu: prefix refused", i);
            gl_matcher_fill_mask(m, fast);
            ref_mask(m, ref);
            CHECKF(!memcmp(fast, ref, g_words * sizeof *fast),
                   "case %zu (class walk %s): fast %lld vs ref %lld tokens", i,
                   forced ? "forced" : "default", (long long)popcount(fast),
                   (long long)popcount(ref));
            gl_matcher_free(m);
            gl_grammar_unref(g);
        }
    }
    gl_mask_set_class_policy(-1, -1);
    free(fast);
    free(ref);
}

// String walks shared across grammars (mask.c, memo_walk's shared table): two grammars from one
// schema number their lazy DFA states in the order they meet them, so state 2 is "after a-c" in
// one and "after d-f" in the other. The shared key is the state's NFA set, not its number: each
// mask of the second grammar still equals the reference. With the class walk forced and not.
TEST(test_shared_walks)
{
    static const char *const schema = "{\"type\":\"array\",\"items\":{\"type\":\"string\","
                                      "\"pattern\":\"^(?:[a-c]+x|[d-f]+y)*$\"}}";
    static const char *const orders[2][2] = {{"[\"ab", "[\"de"}, {"[\"de", "[\"ab"}};
    uint32_t *fast = mask_new(), *ref = mask_new();
    for (int forced = 0; forced < 2; forced++) {
        gl_mask_set_class_policy(forced ? 0 : -1, forced ? 0 : -1);
        for (int o = 0; o < 2; o++) {
            struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, schema, 1);
            REQUIRE(g);
            for (int k = 0; k < 2; k++) {
                struct gl_matcher *m = matcher(g);
                REQUIRE(m);
                const char *p = orders[o][k];
                CHECKF(gl_matcher_accept_bytes(m, p, strlen(p)), "prefix %s refused", p);
                gl_matcher_fill_mask(m, fast);
                ref_mask(m, ref);
                CHECKF(!memcmp(fast, ref, g_words * sizeof *fast),
                       "grammar %d, prefix %s (class walk %s): fast %lld vs ref %lld tokens", o, p,
                       forced ? "forced" : "default", (long long)popcount(fast),
                       (long long)popcount(ref));
                gl_matcher_free(m);
            }
            gl_grammar_unref(g);
        }
    }
    gl_mask_set_class_policy(-1, -1);
    free(fast);
    free(ref);
}

// A regex string that takes every plain run costs a walk of the ~1,000 non-plain tokens, not of
// the ~415k-node trie (a search `pattern` with many literal characters has a byte partition too
// fine for a class trie); test_frame_prefixes checks that those masks are exact.
TEST(test_universal_regex_cost)
{
    static const struct {
        const char *schema, *prefix;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\".*[Hh]otel [Pp]aris.*\"}", "\"Hotel Par"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\.(yaml|json)$\"}", "\"ab"},
        {"{\"type\":\"string\",\"pattern\":\"(afs1-az1|apne1-az2|use1-bos1-az1)\"}", "\"x"},
    };
    uint32_t *mask = mask_new();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, cases[i].schema, 1);
        REQUIRE(g);
        struct gl_matcher *m = matcher(g);
        REQUIRE(m);
        CHECK(gl_matcher_accept_bytes(m, cases[i].prefix, strlen(cases[i].prefix)));
        struct gl_matcher_stats a, b;
        gl_matcher_stats(m, &a);
        gl_matcher_fill_mask(m, mask);
        gl_matcher_stats(m, &b);
        CHECKF(b.nodes_visited - a.nodes_visited < 5000, "case %zu: %lld nodes", i,
               (long long)(b.nodes_visited - a.nodes_visited));
        CHECK(popcount(mask) > 150000);
        gl_matcher_free(m);
        gl_grammar_unref(g);
    }
    free(mask);
}

// Bounded strings exercise the fast path's character classes at every budget, incl. 0.
TEST(test_string_masks)
{
    struct gl_grammar *g =
        compile(GL_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":2,\"maxLength\":7}", 0);
    REQUIRE(g);
    walk_check("string 2..7", g, 6, 4, 3);
    gl_grammar_unref(g);
    g = compile(GL_GRAMMAR_JSON_SCHEMA,
                "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},"
                "\"maxItems\":3}",
                1);
    REQUIRE(g);
    walk_check("array of short strings", g, 10, 2, 4);
    gl_grammar_unref(g);
    // A free string and an enum alive together: not a fast state as a whole, but the walk takes
    // whole plain subtrees once the enum reading has died (the suffix rule).
    g = compile(GL_GRAMMAR_JSON_SCHEMA,
                "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":9},"
                "{\"enum\":[\"INVALID_A\",\"Invalid b\",\"in\"]}]}}",
                0);
    REQUIRE(g);
    walk_check("string or enum", g, 10, 3, 6);
    gl_grammar_unref(g);
}

// Token literals: a special named by id is allowed exactly where the grammar names it; one that
// is also a stop token is taken as the literal (the document goes on), not as the stop.
TEST(test_token_literals)
{
    struct gl_grammar *g =
        compile(GL_GRAMMAR_GBNF, "root ::= \"x\" <[200005]> (\"y\" | <[200008]> \"z\")", 16);
    REQUIRE(g);
    const int32_t named[] = {200005, GL_TOK_EOT};
    walk_check_named("token literal", g, 5, 3, 0, named, 2);
    struct gl_matcher *m = matcher(g);
    REQUIRE(m);
    uint32_t *mask = mask_new();
    CHECK(!gl_matcher_accept(m, 200005));
    CHECK(gl_matcher_accept_bytes(m, "x", 1));
    gl_matcher_fill_mask(m, mask);
    CHECK(popcount(mask) == 1 && bit(mask, 200005));
    char buf[8];
    CHECK(gl_matcher_forced_bytes(m, buf, sizeof buf) == 0); // a token, not a byte, comes next
    CHECK(gl_matcher_accept(m, 200005));
    gl_matcher_fill_mask(m, mask);
    CHECK(bit(mask, GL_TOK_EOT) && !bit(mask, GL_TOK_EOS) && bit(mask, tok_id("y")));
    CHECK(gl_matcher_accept(m, GL_TOK_EOT));
    CHECK(!gl_matcher_is_finished(m) && !gl_matcher_can_end(m));
    CHECK(gl_matcher_accept_bytes(m, "z", 1) && gl_matcher_can_end(m));
    free(mask);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

// Forced tool calls (ATEM): the <|message|> literal, raw string values (which may hold newlines,
// so the mask must not assume JSON string rules there) and JSON values.
TEST(test_atem_tools)
{
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"city\":{\"type\":\"string\",\"maxLength\":6},"
                        "\"days\":{\"type\":\"integer\"}},\"required\":[\"city\"]}}}]";
    json_t *j = json_loads(tools, 0, NULL);
    REQUIRE(j);
    struct gl_grammar *g = NULL;
    struct gl_err err = {0};
    gl_status st = gl_grammar_compile_atem_tools(&g, j, NULL, 200023, NULL, &err);
    CHECKF(st == GL_OK, "%s", err.msg);
    if (g) {
        const int32_t named[] = {200023};
        walk_check_named("atem tools", g, 40, 1, 40, named, 1);
        struct gl_grammar *g2 = NULL;
        CHECK(gl_grammar_compile_atem_tools(&g2, j, "get_weather", 200023, NULL, &err) == GL_OK);
        CHECK(g2 && gl_grammar_hash(g2) != gl_grammar_hash(g));
        gl_grammar_unref(g2);
    }
    gl_grammar_unref(g);
    json_decref(j);
}

// Stop tokens are refused mid-document and accepted at the end; specials never.
TEST(test_stop_and_special)
{
    struct gl_grammar *g = compile(GL_GRAMMAR_CHOICE, "[\"alpha\",\"alphabet\"]", 16);
    REQUIRE(g);
    struct gl_matcher *m = matcher(g);
    REQUIRE(m);
    uint32_t *mask = mask_new();
    CHECK(!gl_matcher_accept(m, GL_TOK_EOS));
    CHECK(!gl_matcher_accept(m, GL_TOK_BOS));
    CHECK(gl_matcher_accept_bytes(m, "alp", 3));
    gl_matcher_fill_mask(m, mask);
    CHECK(!bit(mask, GL_TOK_EOS) && !bit(mask, GL_TOK_EOT) && !bit(mask, GL_TOK_BOS));
    CHECK(!gl_matcher_accept(m, GL_TOK_EOT));
    CHECK(gl_matcher_accept_bytes(m, "ha", 2));
    CHECK(gl_matcher_can_end(m) && !gl_matcher_is_finished(m));
    gl_matcher_fill_mask(m, mask);
    CHECK(bit(mask, GL_TOK_EOS) && bit(mask, GL_TOK_EOT) && bit(mask, 200010));
    CHECK(!bit(mask, GL_TOK_BOS) && !bit(mask, GL_TOK_EOM) && !bit(mask, 202047));
    CHECK(!gl_matcher_accept(m, GL_TOK_EOM)); // a special that is not in the stop set
    CHECK(gl_matcher_accept(m, GL_TOK_EOT));
    CHECK(gl_matcher_is_finished(m));
    gl_matcher_fill_mask(m, mask);
    CHECK(popcount(mask) == 0);
    // Rolling back the stop token revives the matcher.
    struct gl_err err;
    CHECK(gl_matcher_rollback(m, 1, &err) == GL_OK);
    CHECK(!gl_matcher_is_finished(m) && gl_matcher_can_end(m));
    CHECK(gl_matcher_rollback(m, 5, &err) == GL_E_INVAL);
    CHECK(gl_matcher_rollback(m, -1, &err) == GL_E_INVAL);
    // Stop ids are checked; an empty stop set is allowed.
    struct gl_matcher *m2 = NULL;
    CHECK(gl_matcher_new(&m2, g, g_voc, NULL, 0, &err) == GL_OK);
    gl_matcher_free(m2);
    CHECK(gl_matcher_new(&m2, g, g_voc, (const int32_t[]){5, -3}, 2, &err) == GL_E_INVAL);
    CHECK(!m2 && strstr(err.msg, "index 1") != NULL);
    free(mask);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

// Rollback restores the exact state: the masks after rolling back equal the masks recorded on
// the way, and re-accepting the same tokens gives the same masks again.
TEST(test_rollback)
{
    const char *src = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
                      "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}";
    struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, src, 4);
    REQUIRE(g);
    struct gl_matcher *m = matcher(g);
    REQUIRE(m);
    enum { STEPS = 24 };
    uint32_t *masks[STEPS + 1];
    int32_t toks[STEPS];
    int n = 0;
    for (int i = 0; i <= STEPS; i++)
        masks[i] = mask_new();
    for (; n < STEPS; n++) {
        gl_matcher_fill_mask(m, masks[n]);
        int32_t t = pick(masks[n], n, STEPS); // no stop tokens
        if (t < 0 || is_stop_id(t))
            break;
        REQUIRE(gl_matcher_accept(m, t));
        toks[n] = t;
    }
    gl_matcher_fill_mask(m, masks[n]);
    CHECK(gl_matcher_n_accepted(m) == n);
    uint32_t *now = mask_new();
    struct gl_err err;
    for (int back = 1; back <= n; back += 3) {
        REQUIRE(gl_matcher_rollback(m, back, &err) == GL_OK);
        CHECK(gl_matcher_n_accepted(m) == n - back);
        gl_matcher_fill_mask(m, now);
        CHECKF(!memcmp(now, masks[n - back], g_words * 4), "rollback %d", back);
        for (int i = n - back; i < n; i++)
            CHECK(gl_matcher_accept(m, toks[i]));
        gl_matcher_fill_mask(m, now);
        CHECKF(!memcmp(now, masks[n], g_words * 4), "re-accept after rollback %d", back);
    }
    // Rolling back everything equals a reset.
    REQUIRE(gl_matcher_rollback(m, n, &err) == GL_OK);
    gl_matcher_fill_mask(m, now);
    CHECK(!memcmp(now, masks[0], g_words * 4));
    for (int i = 0; i <= STEPS; i++)
        free(masks[i]);
    free(now);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

TEST(test_forced_bytes)
{
    struct gl_grammar *g = compile(GL_GRAMMAR_REGEX, "abc(d|ef)gh", 16);
    REQUIRE(g);
    struct gl_matcher *m = matcher(g);
    REQUIRE(m);
    char buf[32];
    size_t n = gl_matcher_forced_bytes(m, buf, sizeof buf);
    CHECK(n == 3 && !memcmp(buf, "abc", 3));
    CHECK(gl_matcher_forced_bytes(m, buf, 2) == 2); // capped
    CHECK(gl_matcher_n_accepted(m) == 0);           // forced bytes do not advance
    CHECK(gl_matcher_accept_bytes(m, "abce", 4));
    n = gl_matcher_forced_bytes(m, buf, sizeof buf);
    CHECK(n == 3 && !memcmp(buf, "fgh", 3));
    CHECK(!gl_matcher_accept_bytes(m, "fgx", 3)); // all or nothing
    n = gl_matcher_forced_bytes(m, buf, sizeof buf);
    CHECK(n == 3);
    CHECK(gl_matcher_accept_bytes(m, "fgh", 3));
    CHECK(gl_matcher_can_end(m));
    CHECK(gl_matcher_forced_bytes(m, buf, sizeof buf) == 0);
    gl_matcher_free(m);
    gl_grammar_unref(g);
}

// A cache hit returns the same mask as a fresh computation with the cache off.
TEST(test_mask_cache)
{
    const char *src = "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":5}}";
    struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, src, 0);
    struct gl_grammar *g0 = compile(GL_GRAMMAR_JSON_SCHEMA, src, 0);
    REQUIRE(g && g0);
    gl_mask_set_cache(g0, 0, 0);
    gl_mask_set_cache(g, GL_MASK_CACHE_DEFAULT, 0); // cache every mask
    struct gl_matcher *m = matcher(g), *m0 = matcher(g0);
    REQUIRE(m && m0);
    uint32_t *a = mask_new(), *b = mask_new();
    const char *doc = "[\"ab\",\"cd\",\"ab\",\"cd\"]";
    for (int round = 0; round < 2; round++) {
        gl_matcher_reset(m);
        gl_matcher_reset(m0);
        for (const char *p = doc; *p; p++) {
            gl_matcher_fill_mask(m, a);
            gl_matcher_fill_mask(m0, b);
            CHECK(!memcmp(a, b, g_words * 4));
            CHECK(gl_matcher_accept_bytes(m, p, 1) && gl_matcher_accept_bytes(m0, p, 1));
        }
    }
    struct gl_matcher_stats s, s0;
    gl_matcher_stats(m, &s);
    gl_matcher_stats(m0, &s0);
    CHECK(s.masks == 2 * (int64_t)strlen(doc) && s0.masks == s.masks);
    CHECK(s.cache_hits >= (int64_t)strlen(doc)); // the whole second round at least
    CHECK(s0.cache_hits == 0);
    CHECK(s.nodes_visited < s0.nodes_visited);
    free(a);
    free(b);
    gl_matcher_free(m);
    gl_matcher_free(m0);
    gl_grammar_unref(g);
    gl_grammar_unref(g0);
}

// Canonical hash: key order, spacing and escape spelling do not matter; options that change the
// language do. The cache returns the same grammar for equal keys and evicts the least recent.
TEST(test_grammar_cache)
{
    const char *a = "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}";
    const char *b =
        "{ \"properties\" : { \"\\u0078\" : {\"type\":\"integer\"} },\n \"type\":\"object\" }";
    const char *c = "{\"type\":\"array\"}";
    struct gl_grammar *ga = compile(GL_GRAMMAR_JSON_SCHEMA, a, 16);
    struct gl_grammar *gb = compile(GL_GRAMMAR_JSON_SCHEMA, b, 16);
    struct gl_grammar *ga0 = compile(GL_GRAMMAR_JSON_SCHEMA, a, 0);
    REQUIRE(ga && gb && ga0);
    CHECK(gl_grammar_hash(ga) == gl_grammar_hash(gb));
    CHECK(gl_grammar_hash(ga) != gl_grammar_hash(ga0));
    gl_grammar_unref(ga);
    gl_grammar_unref(gb);
    gl_grammar_unref(ga0);

    struct gl_grammar_cache *cache = NULL;
    struct gl_err err;
    REQUIRE(gl_grammar_cache_new(&cache, 2, &err) == GL_OK);
    CHECK(gl_grammar_cache_new(&(struct gl_grammar_cache *){NULL}, 0, &err) == GL_E_INVAL);
    struct gl_grammar *x = NULL, *y = NULL, *z = NULL, *w = NULL;
    CHECK(gl_grammar_cache_get(cache, &x, GL_GRAMMAR_JSON_SCHEMA, a, strlen(a), NULL, &err) ==
          GL_OK);
    CHECK(gl_grammar_cache_get(cache, &y, GL_GRAMMAR_JSON_SCHEMA, b, strlen(b), NULL, &err) ==
          GL_OK);
    CHECK(x && x == y);
    CHECK(gl_grammar_cache_get(cache, &z, GL_GRAMMAR_JSON_SCHEMA, c, strlen(c), NULL, &err) ==
          GL_OK);
    CHECK(z && z != x);
    // a is the least recent now after c? No: order of use is a(x), a(y), c(z): a is older.
    struct gl_grammar *r = NULL;
    CHECK(gl_grammar_cache_get(cache, &r, GL_GRAMMAR_REGEX, "a+", 2, NULL, &err) == GL_OK);
    // a was evicted: asking again compiles a new grammar (x is still alive through our ref).
    CHECK(gl_grammar_cache_get(cache, &w, GL_GRAMMAR_JSON_SCHEMA, a, strlen(a), NULL, &err) ==
          GL_OK);
    CHECK(w && w != x && gl_grammar_hash(w) == gl_grammar_hash(x));
    struct gl_grammar *bad = NULL;
    CHECK(gl_grammar_cache_get(cache, &bad, GL_GRAMMAR_JSON_SCHEMA, "{", 1, NULL, &err) ==
          GL_E_INVAL);
    CHECK(!bad);
    gl_grammar_unref(x);
    gl_grammar_unref(y);
    gl_grammar_unref(z);
    gl_grammar_unref(w);
    gl_grammar_unref(r);
    gl_grammar_cache_free(cache);
}

// gl_grammar_cache_get_locked: the same cache semantics, the lock released on every return (a
// hit, a miss that compiles, an error), and the copy compiled on a miss is the one cached.
TEST(test_grammar_cache_locked)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct gl_grammar_cache *cache = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_grammar_cache_new(&cache, 4, &err) == GL_OK);
    const char *a = "{\"type\":\"integer\"}";
    struct gl_grammar *x = NULL, *y = NULL, *bad = NULL;
    CHECK(gl_grammar_cache_get_locked(cache, &mu, &x, GL_GRAMMAR_JSON_SCHEMA, a, strlen(a), NULL,
                                      &err) == GL_OK);
    CHECK(pthread_mutex_trylock(&mu) == 0 && pthread_mutex_unlock(&mu) == 0);
    CHECK(gl_grammar_cache_get_locked(cache, &mu, &y, GL_GRAMMAR_JSON_SCHEMA, a, strlen(a), NULL,
                                      &err) == GL_OK);
    CHECK(x && x == y);
    CHECK(pthread_mutex_trylock(&mu) == 0 && pthread_mutex_unlock(&mu) == 0);
    const char *nonsense = "{\"type\":\"nonsense\"}"; // valid JSON: fails in the compile
    CHECK(gl_grammar_cache_get_locked(cache, &mu, &bad, GL_GRAMMAR_JSON_SCHEMA, nonsense,
                                      strlen(nonsense), NULL, &err) != GL_OK);
    CHECK(!bad);
    CHECK(pthread_mutex_trylock(&mu) == 0 && pthread_mutex_unlock(&mu) == 0);
    gl_grammar_unref(x);
    gl_grammar_unref(y);
    gl_grammar_cache_free(cache);
    pthread_mutex_destroy(&mu);
}

// ---- memory: the allocation meter, grammar sizes, the cache's byte budget ----

// The meter against sizes it cannot get wrong: what is allocated under it is added at its usable
// size, a reallocation moves the charge, a free gives it back, and blocks allocated unmetered
// change nothing.
TEST(test_alloc_meter)
{
    struct gl_alloc_meter m = {0};
    void *outside = gl_malloc(1000);
    REQUIRE(gl_alloc_meter_swap(&m) == NULL);
    char *a = gl_malloc(100);
    char *b = gl_calloc(10, 1000);
    REQUIRE(a && b);
    CHECK(m.live == (int64_t)(gl_alloc_size(a) + gl_alloc_size(b)) && m.live >= 10100);
    char *c = gl_realloc(a, 50000);
    REQUIRE(c);
    CHECK(m.live == (int64_t)(gl_alloc_size(c) + gl_alloc_size(b)));
    gl_free(b);
    CHECK(m.live == (int64_t)gl_alloc_size(c));
    CHECK(m.peak >= 60000);
    gl_free(c);
    CHECK(m.live == 0);
    gl_alloc_meter_charge(123);
    CHECK(m.live == 123);
    gl_alloc_meter_charge(-123);
    CHECK(gl_alloc_meter_swap(NULL) == &m);
    gl_free(outside);
    CHECK(m.live == 0);
}

// Memory that comes back (gl_mem_release): every gl_free and gl_free_unmetered counts the
// block's usable size (the unmetered pair, jansson's hooks in the server, without touching an
// armed meter); a release trims once 16 MiB are pending, then the count starts over.
TEST(test_mem_freed)
{
    int64_t p0 = gl_mem_freed_pending();
    void *a = gl_malloc(1 << 20);
    REQUIRE(a);
    size_t n = gl_alloc_size(a);
    gl_free(a);
    CHECK(gl_mem_freed_pending() >= p0 + (int64_t)n); // over the 64 KiB a thread holds back
    struct gl_alloc_meter m = {0};
    gl_alloc_meter_swap(&m);
    void *b = gl_malloc_unmetered(1 << 20);
    REQUIRE(b);
    CHECK(m.live == 0);
    int64_t p1 = gl_mem_freed_pending();
    gl_free_unmetered(b);
    CHECK(m.live == 0 && gl_mem_freed_pending() >= p1 + (1 << 20));
    gl_alloc_meter_swap(NULL);
    for (int i = 0; i < 17 && gl_mem_freed_pending() < GL_TRIM_MIN_BYTES; i++)
        gl_free(gl_malloc(1 << 20));
    CHECK(gl_mem_freed_pending() >= GL_TRIM_MIN_BYTES);
    int trimmed = gl_mem_release();
    if (!trimmed) { // an earlier test's cache trimmed within the second: the limit holds
        struct timespec ts = {1, 100000000};
        nanosleep(&ts, NULL);
        trimmed = gl_mem_release();
    }
    CHECK(trimmed == 1);
    CHECK(gl_mem_freed_pending() < GL_TRIM_MIN_BYTES && gl_mem_release() == 0);
}

// A schema with one object property holding an enum of n distinct values (malloc'd text).
static char *enum_schema(int n, int salt)
{
    size_t cap = 128 + (size_t)n * 32, len = 0;
    char *s = malloc(cap);
    GL_ASSERT(s);
    len += (size_t)snprintf(s + len, cap - len,
                            "{\"type\":\"object\",\"required\":[\"v\"],\"properties\":{\"v\":"
                            "{\"enum\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s\"w%d_%x%d\"", i ? "," : "", salt,
                                (unsigned)(rng() & 0xfffff), i);
    snprintf(s + len, cap - len, "]}}}");
    return s;
}

// Runs a matcher over g for up to n tokens (random allowed ones): masks, DFA states, history.
static void walk(struct gl_grammar *g, int n)
{
    struct gl_matcher *m = matcher(g);
    uint32_t *mask = malloc(g_words * sizeof *mask);
    GL_ASSERT(m && mask);
    for (int i = 0; i < n && !gl_matcher_is_finished(m); i++) {
        gl_matcher_fill_mask(m, mask);
        int32_t t = pick(mask, i, n);
        if (t < 0 || !gl_matcher_accept(m, t))
            break;
    }
    free(mask);
    gl_matcher_free(m);
}

// What a grammar is charged agrees with glibc's own count of bytes in use (mallinfo2: an oracle
// independent of the meter) across its compile and its free, and grows as its masks are built.
TEST(test_grammar_bytes)
{
    char *src = enum_schema(3000, 1);
#ifndef __SANITIZE_ADDRESS__ // ASan's allocator is not glibc's
    struct mallinfo2 m0 = mallinfo2();
#endif
    struct gl_grammar *g = compile(GL_GRAMMAR_JSON_SCHEMA, src, 0);
    REQUIRE(g);
    int64_t b0 = gl_grammar_bytes(g);
#ifndef __SANITIZE_ADDRESS__
    struct mallinfo2 m1 = mallinfo2();
    int64_t used = (int64_t)(m1.uordblks + m1.hblkhd) - (int64_t)(m0.uordblks + m0.hblkhd);
    CHECKF(used > b0 * 9 / 10 && used < b0 * 11 / 10 + 65536, "compile: glibc %lld, charged %lld",
           (long long)used, (long long)b0);
#endif
    CHECKF(b0 > 100000, "a 3,000-value enum charged only %lld bytes", (long long)b0);
    walk(g, 24);
    int64_t b1 = gl_grammar_bytes(g);
    CHECKF(b1 > b0 + 25000, "masks built after the compile not charged: %lld -> %lld",
           (long long)b0, (long long)b1);
    gl_grammar_unref(g);
#ifndef __SANITIZE_ADDRESS__
    struct mallinfo2 m2 = mallinfo2();
    int64_t left = (int64_t)(m2.uordblks + m2.hblkhd) - (int64_t)(m0.uordblks + m0.hblkhd);
    CHECKF(left < 65536, "%lld bytes still in use after the grammar was freed", (long long)left);
#endif
    free(src);
}

// The byte budget: entries fit it after every insertion, the least recently used go first, and
// growth after insertion (masks) is charged at the next trim.
TEST(test_grammar_cache_budget)
{
    struct gl_grammar_cache *c = NULL;
    struct gl_err err = {0};
    REQUIRE(gl_grammar_cache_new(&c, 100, &err) == GL_OK);
    char *src[8];
    struct gl_grammar *g[8];
    for (int i = 0; i < 8; i++)
        src[i] = enum_schema(1000, 100 + i);
    REQUIRE(gl_grammar_cache_get(c, &g[0], GL_GRAMMAR_JSON_SCHEMA, src[0], strlen(src[0]), NULL,
                                 &err) == GL_OK);
    int64_t one = gl_grammar_bytes(g[0]);
    gl_grammar_cache_set_budget(c, one * 3 + one / 2); // three fresh ones fit, not four
    for (int i = 1; i < 8; i++) {
        REQUIRE(gl_grammar_cache_get(c, &g[i], GL_GRAMMAR_JSON_SCHEMA, src[i], strlen(src[i]), NULL,
                                     &err) == GL_OK);
        struct gl_grammar_cache_stats st;
        gl_grammar_cache_stats(c, NULL, &st);
        CHECKF(st.bytes <= one * 3 + one / 2 && st.entries == (i < 3 ? i + 1 : 3),
               "after %d: %lld entries, %lld bytes", i, (long long)st.entries, (long long)st.bytes);
    }
    // 5, 6, 7 are cached; 7 is the most recent: a hit keeps the same grammar.
    struct gl_grammar *h = NULL;
    REQUIRE(gl_grammar_cache_get(c, &h, GL_GRAMMAR_JSON_SCHEMA, src[7], strlen(src[7]), NULL,
                                 &err) == GL_OK);
    CHECK(h == g[7]);
    gl_grammar_unref(h);
    // Growing 7 (masks) past the room left pushes out the least recently used (5), not 7.
    walk(g[7], 24);
    CHECK(gl_grammar_bytes(g[7]) > one * 3 / 2 - gl_grammar_bytes(g[5]) / 2);
    gl_grammar_cache_trim(c, NULL);
    struct gl_grammar_cache_stats st;
    gl_grammar_cache_stats(c, NULL, &st);
    CHECKF(st.entries == 2 && st.bytes <= one * 3 + one / 2, "%lld entries, %lld bytes",
           (long long)st.entries, (long long)st.bytes);
    REQUIRE(gl_grammar_cache_get(c, &h, GL_GRAMMAR_JSON_SCHEMA, src[5], strlen(src[5]), NULL,
                                 &err) == GL_OK);
    CHECK(h != g[5]); // compiled again
    gl_grammar_unref(h);
    REQUIRE(gl_grammar_cache_get(c, &h, GL_GRAMMAR_JSON_SCHEMA, src[7], strlen(src[7]), NULL,
                                 &err) == GL_OK);
    CHECK(h == g[7]);
    gl_grammar_unref(h);
    // A grammar bigger than the whole budget is not kept, and its caller's reference still works.
    gl_grammar_cache_set_budget(c, one / 2);
    REQUIRE(gl_grammar_cache_get(c, &h, GL_GRAMMAR_JSON_SCHEMA, src[0], strlen(src[0]), NULL,
                                 &err) == GL_OK);
    gl_grammar_cache_stats(c, NULL, &st);
    CHECKF(st.entries == 0 && st.bytes == 0, "%lld entries", (long long)st.entries);
    walk(h, 8);
    gl_grammar_unref(h);
    for (int i = 0; i < 8; i++) {
        gl_grammar_unref(g[i]);
        free(src[i]);
    }
    gl_grammar_cache_free(c);
}

// The per-compile ceiling: a GL_E_LIMIT naming the schema part, and nothing left allocated; the
// same schema compiles under the default ceiling (the control).
TEST(test_compile_memory_limit)
{
    char *src = enum_schema(3000, 7);
    struct gl_grammar_opts o = gl_grammar_default_opts();
    struct gl_grammar *g = NULL;
    struct gl_err err = {0};
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, src, strlen(src), &o, &err) == GL_OK);
    int64_t need = g ? gl_grammar_bytes(g) : 0;
    gl_grammar_unref(g);
    g = NULL;
    o.max_compile_bytes = need / 2;
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, src, strlen(src), &o, &err) == GL_E_LIMIT);
    CHECKF(!g && strstr(err.msg, "/properties/v") && strstr(err.msg, "bytes of memory"), "%s",
           err.msg);
    o.max_compile_bytes = 4096; // caught early, at the root
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, src, strlen(src), &o, &err) == GL_E_LIMIT);
    o.max_compile_bytes = -1;
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, src, strlen(src), &o, &err) == GL_E_INVAL);
    // Outside JSON Schema the message names the constraint.
    o.max_compile_bytes = 4096;
    static const char re[] = "(abc|def|[a-z]{3,40}x|\\d{2,30}y)*z";
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_REGEX, re, sizeof re - 1, &o, &err) == GL_E_LIMIT);
    CHECKF(strstr(err.msg, "compiling the constraint"), "%s", err.msg);
    free(src);
}

TEST(test_compile_errors)
{
    struct gl_grammar *g = NULL;
    struct gl_err err = {0};
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, "{\"type\":", 8, NULL, &err) ==
          GL_E_INVAL);
    CHECK(!g && strstr(err.msg, "not valid JSON") && strstr(err.msg, "line 1"));
    // an integer literal beyond int64 is read as the same number spelled as a real; a string
    // that looks like one stays a string, and other JSON errors are still reported
    static const char big[] =
        "{\"type\":\"integer\",\"maximum\":9223372036854776000,"
        "\"description\":\"12345678901234567890123 \\\" 99999999999999999999\"}";
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, big, sizeof big - 1, NULL, &err) == GL_OK);
    gl_grammar_unref(g);
    g = NULL;
    static const char big_bad[] = "{\"maximum\":99999999999999999999,}";
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, big_bad, sizeof big_bad - 1, NULL, &err) ==
          GL_E_INVAL);
    CHECK(!g && strstr(err.msg, "too big integer"));
    // whitespace_pattern: 16 when every run of up to 16 [ \t\n\r] matches, 0 (compact) when only
    // the empty string is sure to, an error when not even that
    static const struct {
        const char *pat;
        int ws; // -1: refused
    } wsp[] = {{"\\s*", 16}, {"[ \\t\\n\\r]{0,16}", 16}, {"[\\r\\n\\t ]*", 16},     {"", 0},
               {"[ ]*", 0},  {"[\\n\\t ]*", 0},          {"[ \\t\\n\\r]{0,15}", 0}, {"[ ]+", -1},
               {"(", -1}};
    for (size_t i = 0; i < sizeof wsp / sizeof wsp[0]; i++) {
        int32_t ws = -2;
        gl_status st = gl_grammar_ws_pattern(wsp[i].pat, strlen(wsp[i].pat), &ws, &err);
        CHECKF(wsp[i].ws < 0 ? st != GL_OK : st == GL_OK && ws == wsp[i].ws, "'%s': %d -> %d",
               wsp[i].pat, wsp[i].ws, (int)ws);
    }
    struct gl_grammar_opts o = gl_grammar_default_opts();
    o.ws_max = -1;
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_REGEX, "a", 1, &o, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "ws_max") != NULL);
    o = gl_grammar_default_opts();
    o.max_nodes = 3;
    CHECK(gl_grammar_compile(&g, GL_GRAMMAR_JSON_OBJECT, NULL, 0, &o, &err) == GL_E_LIMIT);
    CHECK(gl_grammar_compile(&g, (enum gl_grammar_kind)42, "a", 1, NULL, &err) == GL_E_INVAL);
    // Warnings are "" for a strict compile.
    g = compile(GL_GRAMMAR_REGEX, "a|b", 16);
    REQUIRE(g);
    CHECK(strcmp(gl_grammar_warnings(g), "") == 0);
    CHECK(gl_grammar_ref(g) == g);
    gl_grammar_unref(g);
    gl_grammar_unref(g);
    gl_grammar_unref(NULL);
}

int main(void)
{
    struct gl_err err = {0};
    if (gl_tokenizer_load_tiktoken(&g_tok, t_vocab_path(), &err) != GL_OK) {
        fprintf(stderr, "cannot load %s: %s\n", t_vocab_path(), err.msg);
        return 1;
    }
    if (gl_gvocab_new(&g_voc, g_tok, &err) != GL_OK) {
        fprintf(stderr, "gvocab: %s\n", err.msg);
        return 1;
    }
    g_words = gl_gvocab_mask_words(g_voc);
    RUN_TESTS(test_vocab_index, test_frame_masks, test_frame_prefixes, test_shared_walks,
              test_universal_regex_cost, test_choice_masks, test_regex_masks, test_gbnf_masks,
              test_schema_masks, test_string_masks, test_token_literals, test_atem_tools,
              test_stop_and_special, test_rollback, test_forced_bytes, test_mask_cache,
              test_grammar_cache, test_grammar_cache_locked, test_compile_errors, test_alloc_meter,
              test_mem_freed, test_grammar_bytes, test_grammar_cache_budget,
              test_compile_memory_limit);
}
