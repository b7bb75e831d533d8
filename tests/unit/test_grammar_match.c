// SPDX-License-Identifier: MIT
// Tests for the grammar IR (ir.c) and the byte-level matcher (match.c) on hand-built IRs:
// generic nodes, bounded/compact whitespace, JSON strings (escapes, surrogates, UTF-8 splits,
// regexes, length budgets), numbers against exact ranges (exhaustive over integers, decimals
// against arithmetic truth), objects (any order, required, duplicates via escapes, patterns,
// additional, counts, ordered mode), arrays, tokens, copy/hash/equal, and a brute-force
// no-dead-end check: every accepted prefix over a small alphabet completes (BFS to can_end).
#include "grammar/ir.h"
#include "grammar/match.h"
#include "grammar/regex.h"
#include "test.h"

#include <pthread.h>
#include <string.h>

// ---- IR building helpers ----

struct gb {
    struct gl_gir ir;
    struct gl_gir_builder b;
    struct gl_err err;
};

static void gb_init(struct gb *g, int ws_max)
{
    GL_ASSERT(gl_gir_builder_init(&g->b, &g->ir, 100000, &g->err) == GL_OK);
    g->ir.ws_max = ws_max;
}

static int32_t lit(struct gb *g, const char *s)
{
    return gl_gir_add_bytes(&g->b, s, strlen(s));
}

static int32_t seq2(struct gb *g, int32_t a, int32_t b)
{
    int32_t k[2] = {a, b};
    return gl_gir_add_list(&g->b, GN_SEQ, k, 2);
}

static int32_t alt2(struct gb *g, int32_t a, int32_t b)
{
    int32_t k[2] = {a, b};
    return gl_gir_add_list(&g->b, GN_ALT, k, 2);
}

static int32_t node(struct gb *g, struct gl_gnode n)
{
    return gl_gir_add(&g->b, &n);
}

static int32_t regex_idx(struct gb *g, const char *pat)
{
    struct gl_regex *re = NULL;
    GL_ASSERT(gl_regex_compile(&re, pat, strlen(pat), 0, 0, NULL) == GL_OK);
    return gl_gir_add_regex(&g->b, re);
}

static int32_t jstr(struct gb *g, int32_t min, int32_t max, const char *pat)
{
    struct gl_gnode n = {.kind = GN_JSTRING};
    n.u.str.min_chars = min;
    n.u.str.max_chars = max;
    if (pat) {
        int32_t *r = gl_arena_alloc(g->ir.arena, sizeof *r);
        *r = regex_idx(g, pat);
        n.u.str.regexes = r;
        n.u.str.n_regex = 1;
    }
    return node(g, n);
}

static int32_t jnum(struct gb *g, int integer, int has_min, double min, int excl_min, int has_max,
                    double max, int excl_max)
{
    struct gl_gnode n = {.kind = GN_JNUMBER};
    n.u.num.integer = (uint8_t)integer;
    n.u.num.has_min = (uint8_t)has_min;
    n.u.num.min = min;
    n.u.num.excl_min = (uint8_t)excl_min;
    n.u.num.has_max = (uint8_t)has_max;
    n.u.num.max = max;
    n.u.num.excl_max = (uint8_t)excl_max;
    return node(g, n);
}

// props given sorted by name
struct pdef {
    const char *name;
    int32_t value;
    int required;
};
static int32_t jobj(struct gb *g, const struct pdef *pd, int np, int32_t additional, int min_p,
                    int max_p)
{
    struct gl_gprop *p = gl_arena_alloc(g->ir.arena, (size_t)(np ? np : 1) * sizeof *p);
    for (int i = 0; i < np; i++) {
        p[i].name.p = gl_arena_memdup(g->ir.arena, pd[i].name, strlen(pd[i].name));
        p[i].name.len = (uint32_t)strlen(pd[i].name);
        p[i].value = pd[i].value;
        p[i].required = (uint8_t)pd[i].required;
    }
    struct gl_gnode n = {.kind = GN_JOBJECT};
    n.u.obj.props = p;
    n.u.obj.n_props = np;
    n.u.obj.additional = additional;
    n.u.obj.min_props = min_p;
    n.u.obj.max_props = max_p;
    return node(g, n);
}

static int32_t jarr(struct gb *g, const int32_t *prefix, int npre, int32_t items, int min_i,
                    int max_i)
{
    struct gl_gnode n = {.kind = GN_JARRAY};
    if (npre) {
        int32_t *p = gl_arena_alloc(g->ir.arena, (size_t)npre * sizeof *p);
        memcpy(p, prefix, (size_t)npre * sizeof *p);
        n.u.arr.prefix = p;
    }
    n.u.arr.n_prefix = npre;
    n.u.arr.items = items;
    n.u.arr.min_items = min_i;
    n.u.arr.max_items = max_i;
    return node(g, n);
}

static int32_t any_json(struct gb *g)
{
    // value := object | array | string | number | true | false | null (recursive)
    int32_t v = gl_gir_reserve(&g->b);
    int32_t o = jobj(g, NULL, 0, v, 0, -1);
    int32_t a = jarr(g, NULL, 0, v, 0, -1);
    int32_t k[7] = {o,
                    a,
                    jstr(g, 0, -1, NULL),
                    jnum(g, 0, 0, 0, 0, 0, 0, 0),
                    lit(g, "true"),
                    lit(g, "false"),
                    lit(g, "null")};
    int32_t alt = gl_gir_add_list(&g->b, GN_ALT, k, 7);
    struct gl_gnode n = g->ir.nodes[alt];
    gl_gir_set(&g->b, v, &n);
    return v;
}

static struct gl_mstate *gb_state(struct gb *g, int32_t root)
{
    g->ir.root = root;
    struct gl_err err;
    if (gl_gir_validate(&g->ir, &err) != GL_OK) {
        fprintf(stderr, "validate: %s\n", err.msg);
        return NULL;
    }
    struct gl_mstate *s = NULL;
    if (gl_mstate_new(&s, &g->ir, NULL, &err) != GL_OK) {
        fprintf(stderr, "mstate: %s\n", err.msg);
        return NULL;
    }
    return s;
}

// 1 if the whole string is accepted and the state can end there.
static int full(struct gl_mstate *s, const char *txt, size_t len)
{
    gl_mstate_reset(s);
    for (size_t i = 0; i < len; i++)
        if (!gl_mstate_advance_byte(s, (uint8_t)txt[i]))
            return 0;
    return gl_mstate_can_end(s);
}
static int ok(struct gl_mstate *s, const char *txt)
{
    return full(s, txt, strlen(txt));
}
// Number of leading bytes accepted.
static size_t prefix_len(struct gl_mstate *s, const char *txt)
{
    gl_mstate_reset(s);
    size_t i = 0;
    while (txt[i] && gl_mstate_advance_byte(s, (uint8_t)txt[i]))
        i++;
    return i;
}

// ---- brute-force viability ----

#define MEMO_CAP 65536
struct memo {
    uint64_t h[MEMO_CAP];
    int8_t v[MEMO_CAP]; // 0 empty, 1 completes, -1 not found within the horizon
};
static struct memo g_memo;

// Depth-first over alpha bytes (tried in order: put closers first), with a visited set and a
// step budget: can s reach can_end within horizon bytes?
enum { DMAX = 32, VSET = 1 << 16 };
static struct gl_mstate *g_dstack[DMAX];
static const struct gl_gir *g_dir;
static uint64_t g_vset[VSET];
static long g_steps;

static int dfs(int d, const char *alpha, int horizon)
{
    if (d >= horizon || g_steps > 200000)
        return 0;
    int na = (int)strlen(alpha);
    for (int a = 0; a < na; a++) {
        gl_mstate_copy(g_dstack[d + 1], g_dstack[d]);
        g_steps++;
        if (!gl_mstate_advance_byte(g_dstack[d + 1], (uint8_t)alpha[a]))
            continue;
        if (gl_mstate_can_end(g_dstack[d + 1]))
            return 1;
        uint64_t h = (gl_mstate_hash(g_dstack[d + 1]) | 1) ^ ((uint64_t)d << 56);
        uint32_t k = (uint32_t)(h % VSET);
        while (g_vset[k] && g_vset[k] != h)
            k = (k + 1) % VSET;
        if (g_vset[k])
            continue;
        g_vset[k] = h;
        if (dfs(d + 1, alpha, horizon))
            return 1;
    }
    return 0;
}

static int completes(struct gb *g, const struct gl_mstate *s, const char *alpha, int horizon)
{
    if (gl_mstate_can_end(s))
        return 1;
    uint64_t h0 = gl_mstate_hash(s);
    uint32_t slot = (uint32_t)(h0 % MEMO_CAP);
    for (uint32_t k = 0; k < 64; k++) {
        uint32_t i = (slot + k) % MEMO_CAP;
        if (!g_memo.v[i])
            break;
        if (g_memo.h[i] == h0)
            return g_memo.v[i] > 0;
    }
    GL_ASSERT(horizon < DMAX);
    if (g_dir != &g->ir) {
        for (int i = 0; i < DMAX; i++) {
            gl_mstate_free(g_dstack[i]);
            GL_ASSERT(gl_mstate_new(&g_dstack[i], &g->ir, NULL, NULL) == GL_OK);
        }
        g_dir = &g->ir;
    }
    memset(g_vset, 0, sizeof g_vset);
    g_steps = 0;
    gl_mstate_copy(g_dstack[0], s);
    int found = dfs(0, alpha, horizon);
    for (uint32_t k = 0; k < 64; k++) {
        uint32_t i = (slot + k) % MEMO_CAP;
        if (!g_memo.v[i] || g_memo.h[i] == h0) {
            g_memo.h[i] = h0;
            g_memo.v[i] = (int8_t)(found ? 1 : -1);
            break;
        }
    }
    return found;
}

// Every string over alpha of length <= maxlen that the matcher accepts must complete. Returns
// the violations (printing the first few); *n_accepted counts accepted prefixes.
static int no_dead_ends(struct gb *g, struct gl_mstate *s, const char *alpha, int maxlen,
                        const char *calpha, int horizon, long *n_accepted)
{
    memset(&g_memo, 0, sizeof g_memo);
    enum { MAXD = 12 };
    GL_ASSERT(maxlen < MAXD);
    struct gl_mstate *st[MAXD];
    char buf[MAXD];
    int pos[MAXD];
    for (int d = 0; d <= maxlen; d++)
        GL_ASSERT(gl_mstate_new(&st[d], &g->ir, NULL, NULL) == GL_OK);
    gl_mstate_reset(s);
    gl_mstate_copy(st[0], s);
    int na = (int)strlen(alpha), bad = 0, d = 0;
    long acc = 0;
    pos[0] = 0;
    if (!completes(g, st[0], calpha, horizon))
        bad++;
    while (d >= 0) {
        if (d == maxlen || pos[d] >= na) {
            d--;
            if (d >= 0)
                pos[d]++;
            continue;
        }
        gl_mstate_copy(st[d + 1], st[d]);
        if (!gl_mstate_advance_byte(st[d + 1], (uint8_t)alpha[pos[d]])) {
            pos[d]++;
            continue;
        }
        buf[d] = alpha[pos[d]];
        acc++;
        if (!completes(g, st[d + 1], calpha, horizon)) {
            if (bad < 5)
                fprintf(stderr, "  dead end after '%.*s'\n", d + 1, buf);
            bad++;
        }
        d++;
        pos[d] = 0;
    }
    for (int k = 0; k <= maxlen; k++)
        gl_mstate_free(st[k]);
    if (n_accepted)
        *n_accepted = acc;
    return bad;
}

static void gb_free(struct gb *g, struct gl_mstate *s)
{
    if (g_dir == &g->ir) { // the search states belong to this grammar
        for (int i = 0; i < DMAX; i++) {
            gl_mstate_free(g_dstack[i]);
            g_dstack[i] = NULL;
        }
        g_dir = NULL;
    }
    gl_mstate_free(s);
    gl_gir_free(&g->ir);
}

// ---- tests ----

TEST(test_ir_builder_and_validate)
{
    struct gb g;
    gb_init(&g, 16);
    int32_t a = lit(&g, "a");
    int32_t r = gl_gir_reserve(&g.b);
    // r := r "a" | "a"   (left recursion) must be refused
    int32_t left = seq2(&g, r, a);
    struct gl_gnode n = g.ir.nodes[alt2(&g, left, a)];
    gl_gir_set(&g.b, r, &n);
    g.ir.root = r;
    struct gl_err err;
    CHECK(gl_gir_validate(&g.ir, &err) == GL_E_INVAL);
    CHECK(strstr(err.msg, "left recursion") != NULL);
    gl_gir_free(&g.ir);

    // right recursion is fine: r := "a" r | "b"
    gb_init(&g, 16);
    a = lit(&g, "a");
    int32_t b = lit(&g, "b");
    r = gl_gir_reserve(&g.b);
    n = g.ir.nodes[alt2(&g, seq2(&g, a, r), b)];
    gl_gir_set(&g.b, r, &n);
    struct gl_mstate *s = gb_state(&g, r);
    REQUIRE(s);
    CHECK(ok(s, "b"));
    CHECK(ok(s, "aaab"));
    CHECK(!ok(s, "aaa"));
    CHECK(!ok(s, "ba"));
    gb_free(&g, s);

    // bad index and node budget
    gb_init(&g, 16);
    int32_t bad[1] = {99};
    g.ir.root = gl_gir_add_list(&g.b, GN_SEQ, bad, 1);
    CHECK(gl_gir_validate(&g.ir, &err) == GL_E_INVAL);
    gl_gir_free(&g.ir);
    struct gl_gir ir;
    struct gl_gir_builder bl;
    REQUIRE(gl_gir_builder_init(&bl, &ir, 3, &err) == GL_OK);
    CHECK(gl_gir_add_bytes(&bl, "x", 1) >= 0);
    CHECK(gl_gir_add_bytes(&bl, "x", 1) >= 0);
    CHECK(gl_gir_add_bytes(&bl, "x", 1) >= 0);
    CHECK(gl_gir_add_bytes(&bl, "x", 1) == -1 && err.code == GL_E_LIMIT);
    gl_gir_free(&ir);
}

TEST(test_generic_nodes)
{
    struct gb g;
    gb_init(&g, 16);
    // ("ab" | "a" "c"*) ("x"{2,3} sep ",")
    struct gl_gnode rc = {.kind = GN_REPEAT};
    rc.u.rep.kid = lit(&g, "c");
    rc.u.rep.sep = -1;
    rc.u.rep.min = 0;
    rc.u.rep.max = -1;
    int32_t first = alt2(&g, lit(&g, "ab"), seq2(&g, lit(&g, "a"), node(&g, rc)));
    struct gl_gnode rx = {.kind = GN_REPEAT};
    rx.u.rep.kid = lit(&g, "x");
    rx.u.rep.sep = lit(&g, ",");
    rx.u.rep.min = 2;
    rx.u.rep.max = 3;
    struct gl_mstate *s = gb_state(&g, seq2(&g, first, node(&g, rx)));
    REQUIRE(s);
    CHECK(ok(s, "abx,x"));
    CHECK(ok(s, "ax,x,x"));
    CHECK(ok(s, "acccx,x"));
    CHECK(!ok(s, "abx"));
    CHECK(!ok(s, "abx,x,x,x"));
    CHECK(!ok(s, "abcx,x"));
    CHECK(prefix_len(s, "ax,,") == 3);
    gb_free(&g, s);

    // A repeat of a nullable child terminates and dedupes: ("a"? )* "b"
    gb_init(&g, 16);
    int32_t e = node(&g, (struct gl_gnode){.kind = GN_EMPTY});
    struct gl_gnode r = {.kind = GN_REPEAT};
    r.u.rep.kid = alt2(&g, lit(&g, "a"), e);
    r.u.rep.sep = -1;
    r.u.rep.max = -1;
    s = gb_state(&g, seq2(&g, node(&g, r), lit(&g, "b")));
    REQUIRE(s);
    CHECK(ok(s, "b"));
    CHECK(ok(s, "aaaab"));
    CHECK(!ok(s, "aaaa"));
    gb_free(&g, s);

    // Regex node
    gb_init(&g, 16);
    struct gl_gnode rn = {.kind = GN_REGEX};
    rn.u.regex.re = regex_idx(&g, "[a-c]+d?");
    s = gb_state(&g, seq2(&g, node(&g, rn), lit(&g, "!")));
    REQUIRE(s);
    CHECK(ok(s, "abc!"));
    CHECK(ok(s, "abcd!"));
    CHECK(!ok(s, "d!"));
    CHECK(!ok(s, "abdd!"));
    gb_free(&g, s);
}

TEST(test_tokens)
{
    struct gb g;
    gb_init(&g, 16);
    int32_t t1 = node(&g, (struct gl_gnode){.kind = GN_TOKEN, .u.token.id = 200005});
    int32_t t2 = node(&g, (struct gl_gnode){.kind = GN_TOKEN, .u.token.id = 200007});
    struct gl_mstate *s =
        gb_state(&g, seq2(&g, lit(&g, "a"), alt2(&g, t1, seq2(&g, t2, lit(&g, "z")))));
    REQUIRE(s);
    int32_t ids[4];
    CHECK(gl_mstate_expected_tokens(s, ids, 4) == 0);
    CHECK(gl_mstate_advance_byte(s, 'a'));
    int n = gl_mstate_expected_tokens(s, ids, 4);
    CHECK(n == 2);
    CHECK((ids[0] == 200005 && ids[1] == 200007) || (ids[0] == 200007 && ids[1] == 200005));
    CHECK(!gl_mstate_advance_byte(s, '<')); // never its text
    CHECK(!gl_mstate_advance_token(s, 200006));
    CHECK(gl_mstate_advance_token(s, 200007));
    CHECK(!gl_mstate_can_end(s));
    CHECK(gl_mstate_advance_byte(s, 'z'));
    CHECK(gl_mstate_can_end(s));
    gl_mstate_reset(s);
    CHECK(gl_mstate_advance_byte(s, 'a'));
    CHECK(gl_mstate_advance_token(s, 200005));
    CHECK(gl_mstate_can_end(s));
    gb_free(&g, s);
}

TEST(test_whitespace_bounded_and_compact)
{
    struct gb g;
    gb_init(&g, 16);
    struct gl_mstate *s =
        gb_state(&g, seq2(&g, node(&g, (struct gl_gnode){.kind = GN_WS}), lit(&g, "x")));
    REQUIRE(s);
    char buf[64];
    memset(buf, ' ', 16);
    buf[16] = 'x';
    CHECK(full(s, buf, 17));
    memset(buf, '\t', 17);
    buf[17] = 'x';
    CHECK(!full(s, buf, 18));
    CHECK(ok(s, " \r\n\tx"));
    gb_free(&g, s);

    // Inside objects/arrays: runs of <= ws_max at every JSON place; compact: none at all.
    for (int wsmax = 0; wsmax <= 16; wsmax += 16) {
        gb_init(&g, wsmax);
        struct pdef pd[1] = {{"a", 0, 0}};
        int32_t items = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
        pd[0].value = jarr(&g, NULL, 0, items, 0, -1);
        s = gb_state(&g, jobj(&g, pd, 1, -1, 0, -1));
        REQUIRE(s);
        CHECK(ok(s, "{\"a\":[1,2]}"));
        CHECK(ok(s, "{}"));
        CHECK(ok(s, "{\"a\":[]}"));
        int spaced = ok(s, "{ \"a\" : [ 1 , 2 ] }");
        CHECK(spaced == (wsmax > 0));
        CHECK(ok(s, "{\n\"a\":\n[\n]\n}") == (wsmax > 0));
        // 16 spaces ok, 17 refused (after '{')
        char b2[64] = "{";
        memset(b2 + 1, ' ', 17);
        strcpy(b2 + 18, "}");
        CHECK(!ok(s, b2));
        memmove(b2 + 1, b2 + 2, strlen(b2 + 2) + 1);
        CHECK(ok(s, b2) == (wsmax > 0));
        // compact: a bare '"' right after '{', ',' and ':'; no whitespace anywhere
        if (wsmax == 0) {
            CHECK(prefix_len(s, "{ ") == 1);
            CHECK(prefix_len(s, "{\"a\": ") == 5);
            CHECK(prefix_len(s, "{\"a\":[1, ") == 8);
        }
        gb_free(&g, s);
    }
}

TEST(test_string_escapes_utf8)
{
    struct gb g;
    gb_init(&g, 16);
    struct gl_mstate *s = gb_state(&g, jstr(&g, 0, -1, NULL));
    REQUIRE(s);
    CHECK(ok(s, "\"\""));
    CHECK(ok(s, "\"abc\""));
    CHECK(ok(s, "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\""));
    CHECK(ok(s, "\"\\u0041\\u00e9\\u00E9\\uFFFF\""));
    CHECK(ok(s, "\"\\ud83d\\ude00\""));            // pair
    CHECK(!ok(s, "\"\\ud83d\""));                  // lone high
    CHECK(prefix_len(s, "\"\\ud83dx") == 7);       // high must be followed by \u
    CHECK(prefix_len(s, "\"\\ud83d\\u0041") == 9); // ... a low one: '0' refused at once
    CHECK(prefix_len(s, "\"\\ude00") == 4);        // lone low refused at its first digit 'e'
    CHECK(!ok(s, "\"\\x\""));
    CHECK(!ok(s, "\"\\u12G4\""));
    CHECK(ok(s, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""));
    CHECK(!ok(s, "\"\xc0\xaf\""));         // overlong
    CHECK(!ok(s, "\"\xe0\x80\xaf\""));     // overlong 3-byte
    CHECK(!ok(s, "\"\xed\xa0\x80\""));     // encoded surrogate
    CHECK(!ok(s, "\"\xf4\x90\x80\x80\"")); // > U+10FFFF
    CHECK(!ok(s, "\"\x80\""));             // stray continuation
    CHECK(!ok(s, "\"\xc3\""));             // truncated
    CHECK(!ok(s, "\"a\nb\""));             // raw control
    CHECK(ok(s, "\"\x7f\""));
    gb_free(&g, s);

    // Lengths in code points, with escapes and multi-byte characters
    gb_init(&g, 16);
    s = gb_state(&g, jstr(&g, 2, 3, NULL));
    REQUIRE(s);
    CHECK(!ok(s, "\"a\""));
    CHECK(ok(s, "\"ab\""));
    CHECK(ok(s, "\"\xc3\xa9\\u00e9\xf0\x9f\x98\x80\""));
    CHECK(!ok(s, "\"abcd\""));
    CHECK(prefix_len(s, "\"abcd\"") == 4); // 'd' refused, not the quote
    CHECK(prefix_len(s, "\"abc\\") == 4);  // no room for an escape either
    int32_t mn, mx;
    gl_mstate_reset(s);
    CHECK(!gl_mstate_string_fast(s, &mn, &mx)); // before the quote
    gl_mstate_advance_byte(s, '"');
    gl_mstate_advance_byte(s, 'a');
    CHECK(gl_mstate_string_fast(s, &mn, &mx) && mn == 1 && mx == 2);
    gl_mstate_advance_byte(s, 0xc3);
    CHECK(!gl_mstate_string_fast(s, &mn, &mx)); // inside a UTF-8 sequence
    gl_mstate_advance_byte(s, 0xa9);
    CHECK(gl_mstate_string_fast(s, &mn, &mx) && mn == 0 && mx == 1);
    gl_mstate_advance_byte(s, '\\');
    CHECK(!gl_mstate_string_fast(s, &mn, &mx));
    gb_free(&g, s);
}

TEST(test_string_regex)
{
    struct gb g;
    gb_init(&g, 16);
    // decoded bytes are matched: "\u0061" is "a"
    struct gl_mstate *s = gb_state(&g, jstr(&g, 0, -1, "a[0-9]{2}"));
    REQUIRE(s);
    CHECK(ok(s, "\"a12\""));
    CHECK(ok(s, "\"\\u0061\\u00312\""));
    CHECK(!ok(s, "\"a1\""));
    CHECK(prefix_len(s, "\"b") == 1);
    CHECK(prefix_len(s, "\"a123") == 4);
    // an escape that cannot produce an allowed character is refused at its first byte
    CHECK(prefix_len(s, "\"a\\") == 3);
    CHECK(prefix_len(s, "\"\\u00") == 5);
    CHECK(prefix_len(s, "\"\\u01") == 4); // U+0100..U+01FF: none is 'a'
    int32_t mn, mx;
    gl_mstate_reset(s);
    gl_mstate_advance_byte(s, '"');
    CHECK(!gl_mstate_string_fast(s, &mn, &mx)); // regex strings take the slow path
    gb_free(&g, s);

    // max_chars with a regex that needs more: refuse chars that make completion impossible
    gb_init(&g, 16);
    s = gb_state(&g, jstr(&g, 0, 3, "a*b"));
    REQUIRE(s);
    CHECK(ok(s, "\"aab\""));
    CHECK(prefix_len(s, "\"aaa") == 3);
    gb_free(&g, s);

    // raw strings (ATEM parameter values): no quotes, ends where '<' comes
    gb_init(&g, 16);
    struct gl_gnode rs = {.kind = GN_JSTRING};
    rs.u.str.raw = 1;
    rs.u.str.min_chars = 1;
    rs.u.str.max_chars = -1;
    s = gb_state(&g, seq2(&g, node(&g, rs), lit(&g, "</p>")));
    REQUIRE(s);
    CHECK(ok(s, "a \"b\\ \n\xc3\xa9</p>"));
    CHECK(!ok(s, "</p>"));
    CHECK(!ok(s, "a<b</p>"));
    CHECK(!ok(s, "\xc3</p>"));
    gb_free(&g, s);
}

// Arithmetic truth for the number tests: parse the JSON text as a double / exact integer.
static int num_truth_int(const char *t, long lo, long hi, int *in)
{
    // -?(0|[1-9][0-9]*): integers are spelled without a fraction (a narrowing: "1.0" is an
    // integer in JSON Schema 6+, but draft-4 validators and typed consumers reject it).
    const char *p = t;
    if (*p == '-')
        p++;
    if (!(*p >= '0' && *p <= '9'))
        return 0;
    if (*p == '0' && p[1] >= '0' && p[1] <= '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p)
        return 0;
    long v = strtol(t, NULL, 10);
    *in = v >= lo && v <= hi;
    return 1;
}

TEST(test_number_grammar)
{
    struct gb g;
    gb_init(&g, 16);
    struct gl_mstate *s = gb_state(&g, jnum(&g, 0, 0, 0, 0, 0, 0, 0));
    REQUIRE(s);
    const char *good[] = {"0",   "-0",   "1",       "-12", "1.5",  "0.25",
                          "1e5", "1E+5", "-1.5e-3", "10",  "1e99", "2.5E-99"};
    // Exponents are capped at 2 digits so every allowed number is a finite double.
    const char *badn[] = {"01",  "-",   "1.",   ".5", "1e",    "1e+",   "+1",
                          "--1", "0x1", "1.5.", "00", "1e100", "1e999", "1E-308"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECKF(ok(s, good[i]), "%s", good[i]);
    for (size_t i = 0; i < sizeof badn / sizeof *badn; i++)
        CHECKF(!ok(s, badn[i]), "%s", badn[i]);
    gb_free(&g, s);

    gb_init(&g, 16);
    s = gb_state(&g, jnum(&g, 1, 0, 0, 0, 0, 0, 0));
    REQUIRE(s);
    CHECK(ok(s, "12"));
    CHECK(!ok(s, "1.0"));
    CHECK(!ok(s, "-3.000"));
    CHECK(!ok(s, "1.5"));
    CHECK(!ok(s, "1e3"));
    gb_free(&g, s);
}

TEST(test_integer_ranges_exhaustive)
{
    // Every integer text in [-150, 150] (and its ".0" form, always refused) against ranges; and
    // no dead ends by brute force.
    struct {
        double lo, hi;
        int elo, ehi, hlo, hhi;
    } R[] = {{-5, 7, 0, 0, 1, 1},     {0, 100, 0, 0, 1, 1}, {10, 99, 0, 0, 1, 1},
             {-120, -12, 0, 0, 1, 1}, {1, 1, 0, 0, 1, 1},   {0, 10, 1, 1, 1, 1},
             {5, 0, 0, 0, 1, 0},      {0, 42, 0, 0, 0, 1},  {-1, 0, 0, 1, 1, 1}};
    for (size_t r = 0; r < sizeof R / sizeof *R; r++) {
        struct gb g;
        gb_init(&g, 16);
        struct gl_mstate *s =
            gb_state(&g, jnum(&g, 1, R[r].hlo, R[r].lo, R[r].elo, R[r].hhi, R[r].hi, R[r].ehi));
        REQUIRE(s);
        long lo = R[r].hlo ? (long)R[r].lo + R[r].elo : -1000000;
        long hi = R[r].hhi ? (long)R[r].hi - R[r].ehi : 1000000;
        int wrong = 0;
        for (long v = -150; v <= 150; v++) {
            char t[32];
            for (int form = 0; form < 2; form++) {
                snprintf(t, sizeof t, form ? "%ld.0" : "%ld", v);
                int in = 0;
                num_truth_int(t, lo, hi, &in);
                if (ok(s, t) != in) {
                    if (wrong++ < 5)
                        fprintf(stderr, "  range %zu: %s got %d want %d\n", r, t, !in, in);
                }
            }
        }
        CHECK(wrong == 0);
        // "-0" is zero
        int in0 = 0 >= lo && 0 <= hi;
        CHECK(ok(s, "-0") == in0);
        long acc = 0;
        CHECK(no_dead_ends(&g, s, "-0159.", 5, "0159.-", 8, &acc) == 0);
        gb_free(&g, s);
    }
}

TEST(test_decimal_ranges)
{
    struct {
        double lo, hi;
        int elo, ehi, hlo, hhi;
    } R[] = {{0, 1, 0, 0, 1, 1},     {0, 1, 1, 1, 1, 1},  {-2.5, 2.5, 0, 0, 1, 1},
             {0.1, 0.2, 0, 1, 1, 1}, {10, 0, 1, 0, 1, 0}, {0, 0.05, 0, 0, 0, 1},
             {-1, -0.5, 1, 0, 1, 1}};
    const char *texts[] = {"0",    "-0",   "0.0",   "0.5",  "1",    "1.0",  "1.00", "0.999",
                           "0.05", "0.04", "0.06",  "0.1",  "0.15", "0.2",  "0.20", "0.199",
                           "-1",   "-0.5", "-0.7",  "-1.0", "2.5",  "2.51", "-2.5", "-2.50001",
                           "10",   "10.0", "10.01", "11",   "100",  "9.99", "-0.0", "0.0500"};
    for (size_t r = 0; r < sizeof R / sizeof *R; r++) {
        struct gb g;
        gb_init(&g, 16);
        struct gl_mstate *s =
            gb_state(&g, jnum(&g, 0, R[r].hlo, R[r].lo, R[r].elo, R[r].hhi, R[r].hi, R[r].ehi));
        REQUIRE(s);
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
            double v = strtod(texts[i], NULL);
            int in = 1;
            if (R[r].hlo)
                in &= R[r].elo ? v > R[r].lo : v >= R[r].lo;
            if (R[r].hhi)
                in &= R[r].ehi ? v < R[r].hi : v <= R[r].hi;
            CHECKF(ok(s, texts[i]) == in, "range %zu text %s", r, texts[i]);
        }
        CHECK(!ok(s, "1e0")); // bounded numbers refuse exponents (documented restriction)
        long acc = 0;
        CHECK(no_dead_ends(&g, s, "-0159.", 5, "0159.-", 8, &acc) == 0);
        gb_free(&g, s);
    }
}

TEST(test_object_semantics)
{
    struct gb g;
    gb_init(&g, 16);
    int32_t num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    int32_t str = jstr(&g, 0, -1, NULL);
    struct pdef pd[3] = {{"a", num, 1}, {"ab", str, 0}, {"b", num, 1}};
    struct gl_mstate *s = gb_state(&g, jobj(&g, pd, 3, -1, 0, -1));
    REQUIRE(s);
    CHECK(ok(s, "{\"a\":1,\"b\":2}"));
    CHECK(ok(s, "{\"b\":2,\"a\":1}")); // any order
    CHECK(ok(s, "{\"ab\":\"x\",\"b\":2,\"a\":1}"));
    CHECK(!ok(s, "{\"a\":1}"));                         // required missing
    CHECK(prefix_len(s, "{\"a\":1}") == 6);             // '}' refused
    CHECK(!ok(s, "{\"a\":1,\"a\":2,\"b\":3}"));         // duplicate
    CHECK(prefix_len(s, "{\"a\":1,\"a\"") == 9);        // refused at the closing quote
    CHECK(ok(s, "{\"\\u0061\":1,\"b\":2}"));            // escape-equivalence
    CHECK(prefix_len(s, "{\"a\":1,\"\\u0061\"") == 14); // duplicate via escape
    CHECK(!ok(s, "{\"ab\":1,\"a\":1,\"b\":2}"));        // declared type applies to escaped too
    CHECK(!ok(s, "{\"a\\u0062\":1,\"a\":1,\"b\":2}"));
    CHECK(prefix_len(s, "{\"c") == 2);                  // unknown key: no additional
    CHECK(prefix_len(s, "{\"a\":1,\"b\":2,\"b") == 14); // "b" seen: only "b" could follow
    gb_free(&g, s);

    // an escape in a key of declared names only: viable while some name still possible goes on
    // with a code point of the escape's range (\u007 is U+0070..U+007F: "p" = U+0070)
    gb_init(&g, 16);
    num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    struct pdef pd5[2] = {{"a", num, 1}, {"p", num, 1}};
    s = gb_state(&g, jobj(&g, pd5, 2, -1, 0, -1));
    REQUIRE(s);
    CHECK(prefix_len(s, "{\"\\u007") == 7);
    CHECK(prefix_len(s, "{\"\\u008") == 6);          // no name at U+0080..U+008F
    CHECK(prefix_len(s, "{\"p\":1,\"\\u007") == 12); // "p" read before
    CHECK(prefix_len(s, "{\"p\":1,\"\\u006") == 13); // "a" (U+0061) still possible
    CHECK(ok(s, "{\"p\":1,\"\\u0061\":2}"));
    gb_free(&g, s);

    // additional properties with a schema; duplicates of additional keys via hashes
    gb_init(&g, 16);
    num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    str = jstr(&g, 0, -1, NULL);
    struct pdef pd2[1] = {{"name", str, 1}};
    s = gb_state(&g, jobj(&g, pd2, 1, num, 0, -1));
    REQUIRE(s);
    CHECK(ok(s, "{\"name\":\"x\",\"n\":1,\"nam\":2,\"names\":3}"));
    CHECK(!ok(s, "{\"name\":\"x\",\"n\":1,\"n\":2}"));
    CHECK(!ok(s, "{\"name\":\"x\",\"n\":1,\"\\u006e\":2}"));
    CHECK(!ok(s, "{\"name\":1}")); // the declared type, not the additional one
    CHECK(!ok(s, "{\"nam\\u0065\":1}"));
    CHECK(ok(s, "{\"nam\\u0065\":\"y\"}"));
    CHECK(!ok(s, "{\"x\":\"s\",\"name\":\"y\"}"));
    CHECK(ok(s, "{\"\":1,\"name\":\"y\"}"));
    gb_free(&g, s);

    // min/max properties
    gb_init(&g, 16);
    num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    struct pdef pd3[3] = {{"a", num, 0}, {"b", num, 0}, {"c", num, 1}};
    s = gb_state(&g, jobj(&g, pd3, 3, num, 1, 2));
    REQUIRE(s);
    CHECK(ok(s, "{\"c\":1}"));
    CHECK(ok(s, "{\"a\":1,\"c\":1}"));
    CHECK(ok(s, "{\"x\":1,\"c\":1}"));
    CHECK(!ok(s, "{}"));
    CHECK(prefix_len(s, "{\"a\":1,\"b") == 8); // only "c" may come second
    CHECK(prefix_len(s, "{\"a\":1,\"x") == 8);
    CHECK(prefix_len(s, "{\"c\":1,\"a\":2,") == 12); // max reached: only '}'
    gb_free(&g, s);

    // additional forbidden, min_props beyond what is declared: empty language
    gb_init(&g, 16);
    num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    struct pdef pd4[1] = {{"a", num, 0}};
    s = gb_state(&g, jobj(&g, pd4, 1, -1, 2, -1));
    REQUIRE(s);
    CHECK(prefix_len(s, "{") == 0);
    gb_free(&g, s);
}

// An open object's key quote outcomes read from the frame (gl_mstate_sframe_key_quote, which
// the mask's quote tokens take: mask.c quote_okey) against stepping the frame copy byte by byte
// and deciding its quote: the same outcome and member for every prefix and byte string below,
// including bytes a key takes only in an escape or not at all (the real vocabulary's quote
// tokens have none of these before their quote).
TEST(test_key_quote_direct)
{
    struct gb g;
    gb_init(&g, 16);
    int32_t num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    int32_t str = jstr(&g, 0, -1, NULL);
    struct pdef pd[3] = {{"a_", num, 0}, {"name", str, 1}, {"nam\xc3\xa9", num, 0}};
    struct gl_mstate *s = gb_state(&g, jobj(&g, pd, 3, num, 0, -1));
    REQUIRE(s);
    static const char *const prefixes[] = {
        "{\"", "{\"a", "{\"na", "{\"nam", "{\"a_\":1,\"a", "{\"z,\":1,\"z", "{\"nam\xc3", "{\"x\\",
    };
    static const char *const ps[] = {
        "",
        "_",
        "me",
        "m",
        "\xc3\xa9",
        "\xc3",
        "\xa9",
        "\xff",
        "\x01",
        ",",
        "\x7f",
        "e_",
        "e\xe2\x80\x8b",
        "\xed\xa0\x80",
        "\xf4\x90\x80\x80",
    };
    uint64_t fr[GL_SFRAME_MAX / 8], f2[GL_SFRAME_MAX / 8];
    int direct = 0, declared = 0, extra = 0;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        CHECKF(prefix_len(s, prefixes[i]) == strlen(prefixes[i]), "prefix %zu refused", i);
        size_t fs = gl_mstate_sframe(s, 0, fr, sizeof fr);
        REQUIRE(fs > 0);
        for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
            uint32_t n = (uint32_t)strlen(ps[k]);
            int32_t m1 = -1, m2 = -1;
            int r1 = gl_mstate_sframe_key_quote(s, fr, (const uint8_t *)ps[k], n, &m1);
            if (r1 < 0)
                continue; // inside a character or an escape: the caller steps
            memcpy(f2, fr, fs);
            uint32_t j = 0;
            while (j < n && gl_mstate_sframe_step(s, f2, (uint8_t)ps[k][j]))
                j++;
            int r2 = j == n ? gl_mstate_sframe_key_close(s, f2, &m2) : 0;
            CHECKF(r1 == r2 && (r1 == 0 || m1 == m2), "prefix %zu, P %zu: %d/%d vs %d/%d", i, k, r1,
                   m1, r2, m2);
            direct++;
            declared += r1 == 1;
            extra += r1 == 2;
        }
    }
    // Every kind of answer was compared (the two last prefixes are stepped by the caller).
    CHECKF(direct == 6 * (int)(sizeof ps / sizeof *ps) && declared > 0 && extra > 0,
           "%d compared, %d declared, %d extra", direct, declared, extra);
    gb_free(&g, s);
}

TEST(test_object_patterns_and_order)
{
    struct gb g;
    gb_init(&g, 16);
    int32_t num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    int32_t str = jstr(&g, 0, -1, NULL);
    struct pdef pd[1] = {{"ix", num, 0}};
    int32_t o = jobj(&g, pd, 1, -1, 0, -1);
    struct gl_gpattern_prop *pp = gl_arena_alloc(g.ir.arena, 2 * sizeof *pp);
    pp[0].re = regex_idx(&g, "x-[a-z]+");
    pp[0].value = str;
    pp[1].re = regex_idx(&g, "x-.*");
    pp[1].value = num;
    g.ir.nodes[o].u.obj.patterns = pp;
    g.ir.nodes[o].u.obj.n_patterns = 2;
    struct gl_mstate *s = gb_state(&g, o);
    REQUIRE(s);
    CHECK(ok(s, "{\"ix\":1,\"x-ab\":\"s\",\"x-1\":2}"));
    CHECK(!ok(s, "{\"ix\":1,\"x-ab\":2}")); // the first matching pattern wins
    CHECK(!ok(s, "{\"ix\":1,\"x-ab\":\"s\",\"x-ab\":\"t\"}"));
    CHECK(prefix_len(s, "{\"ix\":1,\"y") == 9);
    CHECK(prefix_len(s, "{\"i\"") == 3);
    long acc = 0;
    CHECK(no_dead_ends(&g, s, "{}\"ix-:,1", 6, "\"1:}x,-i{", 10, &acc) == 0);
    CHECK(acc > 50);
    gb_free(&g, s);

    // ordered mode
    gb_init(&g, 16);
    num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    struct pdef pd2[3] = {{"a", num, 0}, {"b", num, 1}, {"c", num, 0}};
    o = jobj(&g, pd2, 3, -1, 0, -1);
    int32_t *ord = gl_arena_alloc(g.ir.arena, 3 * sizeof *ord);
    ord[0] = 2; // declaration order: c, a, b
    ord[1] = 0;
    ord[2] = 1;
    g.ir.nodes[o].u.obj.order = ord;
    s = gb_state(&g, o);
    REQUIRE(s);
    CHECK(ok(s, "{\"c\":1,\"a\":2,\"b\":3}"));
    CHECK(ok(s, "{\"b\":3}"));
    CHECK(ok(s, "{\"a\":2,\"b\":3}"));
    CHECK(!ok(s, "{\"a\":2,\"c\":1,\"b\":3}"));
    CHECK(!ok(s, "{\"b\":3,\"a\":2}"));
    gb_free(&g, s);
}

TEST(test_array_semantics)
{
    struct gb g;
    gb_init(&g, 16);
    int32_t num = jnum(&g, 0, 0, 0, 0, 0, 0, 0);
    int32_t str = jstr(&g, 0, -1, NULL);
    int32_t pre[2] = {str, num};
    struct gl_mstate *s = gb_state(&g, jarr(&g, pre, 2, lit(&g, "true"), 1, 3));
    REQUIRE(s);
    CHECK(ok(s, "[\"a\"]"));
    CHECK(ok(s, "[\"a\",1]"));
    CHECK(ok(s, "[\"a\",1,true]"));
    CHECK(!ok(s, "[\"a\",1,true,true]"));
    CHECK(!ok(s, "[]"));
    CHECK(!ok(s, "[1]"));
    CHECK(prefix_len(s, "[\"a\",1,true,") == 11);
    gb_free(&g, s);

    gb_init(&g, 16);
    str = jstr(&g, 0, -1, NULL);
    s = gb_state(&g, jarr(&g, &str, 1, -1, 0, -1));
    REQUIRE(s);
    CHECK(ok(s, "[]"));
    CHECK(ok(s, "[\"\"]"));
    CHECK(prefix_len(s, "[\"\",") == 3);
    gb_free(&g, s);
}

TEST(test_any_json_and_no_dead_ends)
{
    struct gb g;
    gb_init(&g, 0);
    struct gl_mstate *s = gb_state(&g, any_json(&g));
    REQUIRE(s);
    CHECK(ok(s, "{\"a\":[1,{\"b\":null},\"x\",-0.5e3],\"c\":{}}"));
    CHECK(!ok(s, "{\"a\": 1}")); // compact
    CHECK(ok(s, "[[[[]]]]"));
    CHECK(!ok(s, "{\"a\":1,\"a\":2}"));
    CHECK(!ok(s, "[1,]"));
    CHECK(!ok(s, "{,}"));
    long acc = 0;
    int64_t t0 = gl_time_us();
    CHECK(no_dead_ends(&g, s, "{}[]\":,1a", 5, "\"1:}],{[a", 10, &acc) == 0);
    printf("  any JSON: %ld accepted prefixes checked in %.2f s\n", acc,
           (double)(gl_time_us() - t0) / 1e6);
    CHECK(acc > 1000);
    gb_free(&g, s);

    // strings with regex + length, and an object with required keys: brute force
    gb_init(&g, 0);
    int32_t sv = jstr(&g, 1, 2, "[ab]*b");
    struct pdef pd[2] = {{"a", sv, 1}, {"ab", sv, 0}};
    s = gb_state(&g, jobj(&g, pd, 2, -1, 0, -1));
    REQUIRE(s);
    t0 = gl_time_us();
    CHECK(no_dead_ends(&g, s, "{}\"ab:,\\u0", 8, "\"b:},a\\u0612{", 24, &acc) == 0);
    printf("  object/regex: %ld accepted prefixes checked in %.2f s\n", acc,
           (double)(gl_time_us() - t0) / 1e6);
    CHECK(ok(s, "{\"a\":\"ab\"}"));
    CHECK(ok(s, "{\"\\u0061\":\"\\u0062\",\"ab\":\"b\"}"));
    gb_free(&g, s);
}

TEST(test_copy_hash_equal_and_limits)
{
    struct gb g;
    gb_init(&g, 16);
    struct gl_mstate *s = gb_state(&g, any_json(&g));
    REQUIRE(s);
    struct gl_mstate *t = NULL, *u = NULL;
    REQUIRE(gl_mstate_new(&t, &g.ir, NULL, NULL) == GL_OK);
    REQUIRE(gl_mstate_new(&u, &g.ir, NULL, NULL) == GL_OK);
    CHECK(gl_mstate_equal(s, t));
    CHECK(gl_mstate_hash(s) == gl_mstate_hash(t));
    const char *doc = "{\"k\":[1,2,{\"z\":\"q\"}]}";
    for (const char *p = doc; *p; p++) {
        gl_mstate_copy(u, s);
        CHECK(gl_mstate_equal(u, s) && gl_mstate_hash(u) == gl_mstate_hash(s));
        CHECK(gl_mstate_advance_byte(s, (uint8_t)*p));
        // a rejected byte leaves the state unchanged
        gl_mstate_copy(t, s);
        CHECK(!gl_mstate_advance_byte(t, ']') || 1);
        gl_mstate_copy(t, s);
        if (!gl_mstate_advance_byte(t, 0x01))
            CHECK(gl_mstate_equal(t, s));
    }
    CHECK(gl_mstate_can_end(s));
    // same text reached two ways: "a" and "\u0061" inside a string value give equal states
    gl_mstate_reset(s);
    gl_mstate_reset(t);
    const char *x1 = "[\"a", *x2 = "[\"\\u0061";
    for (const char *p = x1; *p; p++)
        gl_mstate_advance_byte(s, (uint8_t)*p);
    for (const char *p = x2; *p; p++)
        gl_mstate_advance_byte(t, (uint8_t)*p);
    CHECK(gl_mstate_equal(s, t) && gl_mstate_hash(s) == gl_mstate_hash(t));
    CHECK(!gl_mstate_overflowed(s));
    gl_mstate_free(t);
    gl_mstate_free(u);

    // depth limit: deep nesting is refused with the sticky flag, state unchanged
    struct gl_mlimits lim = {.max_threads = 64, .max_depth = 16};
    REQUIRE(gl_mstate_new(&t, &g.ir, &lim, NULL) == GL_OK);
    int n = 0;
    while (n < 100 && gl_mstate_advance_byte(t, '['))
        n++;
    CHECK(n > 3 && n < 16);
    CHECK(gl_mstate_overflowed(t));
    CHECK(gl_mstate_advance_byte(t, ']'));
    gl_mstate_free(t);
    gb_free(&g, s);
}

// A worker thread gets its own scratch, freed when it exits (run under ASan/LSan in CI).
static void *thread_body(void *arg)
{
    struct gb *g = arg;
    struct gl_mstate *s = NULL;
    if (gl_mstate_new(&s, &g->ir, NULL, NULL) != GL_OK)
        return NULL;
    int okk = ok(s, "[1,{\"a\":\"b\"}]");
    gl_mstate_free(s);
    return okk ? arg : NULL;
}

TEST(test_threads)
{
    struct gb g;
    gb_init(&g, 16);
    struct gl_mstate *s = gb_state(&g, any_json(&g));
    REQUIRE(s);
    for (int i = 0; i < 3; i++) {
        pthread_t th;
        void *ret = NULL;
        REQUIRE(pthread_create(&th, NULL, thread_body, &g) == 0);
        REQUIRE(pthread_join(th, &ret) == 0);
        CHECK(ret == &g);
    }
    CHECK(ok(s, "{\"x\":[true]}"));
    gb_free(&g, s);
}

TEST(test_perf_smoke)
{
    // Not a benchmark: a loose bound that catches accidental quadratic work (ns per byte of a
    // long string body and of a copy+advance pair, as the mask's trie walk does).
    struct gb g;
    gb_init(&g, 16);
    struct gl_mstate *s = gb_state(&g, any_json(&g)), *t = NULL;
    REQUIRE(s);
    REQUIRE(gl_mstate_new(&t, &g.ir, NULL, NULL) == GL_OK);
    const char *pre = "{\"key\":[1,{\"x\":\"";
    for (const char *p = pre; *p; p++)
        REQUIRE(gl_mstate_advance_byte(s, (uint8_t)*p));
    int64_t t0 = gl_time_us();
    int iters = 200000;
    for (int i = 0; i < iters; i++) {
        gl_mstate_copy(t, s);
        gl_mstate_advance_byte(t, (uint8_t)('a' + (i & 15)));
    }
    int64_t dt = gl_time_us() - t0;
    double ns = (double)dt * 1000.0 / iters;
    printf("  copy+advance_byte in a string: %.1f ns\n", ns);
    CHECK(ns < 2000.0);
    gl_mstate_free(t);
    gb_free(&g, s);
}

int main(void)
{
    RUN_TESTS(test_perf_smoke, test_ir_builder_and_validate, test_generic_nodes, test_tokens,
              test_whitespace_bounded_and_compact, test_string_escapes_utf8, test_string_regex,
              test_number_grammar, test_integer_ranges_exhaustive, test_decimal_ranges,
              test_object_semantics, test_key_quote_direct, test_object_patterns_and_order,
              test_array_semantics, test_any_json_and_no_dead_ends, test_copy_hash_equal_and_limits,
              test_threads);
}
