// SPDX-License-Identifier: MIT
// schema: JSON Schema (2020-12, and the draft-3..7 spellings found in the wild) -> grammar IR.
// Each schema is flattened into a "view" ($ref chain + allOf + siblings merged: types
// intersected, properties merged per key, bounds tightened), which compiles to JSON nodes with
// anyOf/oneOf/dependencies/if-then-else distributed as alternatives; oneOf is kept only where the
// branches are provably disjoint or made so (each excludes the others by a sound negation).
// Views and nodes are memoised: shared and recursive $defs cost one node set.
// Invariant: never accept an instance the schema rejects (restricting is allowed: formats are
// strict regexes, integer bounds stop at 2^53); what we cannot enforce is GL_E_UNSUPPORTED
// naming the keyword and its JSON pointer (lenient: warned and dropped). Spec: json-schema.org.
#include "base/buf.h"
#include "grammar/frontend.h"
#include "grammar/regex.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SC_MAX_DEPTH     96   // nested compile / expansion calls along one path (C stack bound)
#define SC_MAX_ENUM      8192 // values in one enum
#define SC_MAX_BRANCHES  256  // members of one anyOf/oneOf
#define SC_MAX_ALTS      64   // alternatives when several anyOf/oneOf lists multiply out
#define SC_MAX_LIST      8    // patterns / formats / not / anyOf lists merged into one view
#define SC_MAX_ENUMERATE 1024 // integers enumerated to enforce an integer multipleOf
#define SC_NEVER         (-2) // compile result: the schema accepts no value
#define SC_FAIL          (-1) // compile result: error set in sc->err
#define SC_INT_LIMIT     9007199254740992.0 // 2^53: integer bounds are exact within this

// OpenAPI `nullable: true` adds null to an explicit type list.
#define SC_NULLABLE_ADDS_NULL 1

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_OBJ = 4,
    T_ARR = 8,
    T_STR = 16,
    T_NUM = 32, // any number (includes integers)
    T_INT = 64, // integers only
    T_ALL = 63, // every type (number includes integer)
};

// One flattened schema: what every conjunct ($ref target, allOf member, siblings) requires.
// json_t pointers are borrowed from the document or from sc->keep (synthesized merges).
struct view {
    unsigned types;
    json_t *props;    // object or NULL
    json_t *required; // array of strings or NULL
    json_t *addl;     // schema or NULL (absent: any value)
    json_t *pprops;   // object or NULL
    json_t *prefix;   // array or NULL
    json_t *items;    // schema after the prefix or NULL (absent: any value)
    json_t *enumv;    // array of allowed values or NULL (const is folded in)
    json_t *pnames;   // propertyNames schema or NULL
    json_t **parts;   // every schema object merged into this view (in sc->scratch)
    size_t n_parts;
    json_t *pat[SC_MAX_LIST]; // pattern strings (search semantics), {"not": P} negated
    int n_pat;
    json_t *fmt[SC_MAX_LIST]; // format names
    int n_fmt;
    json_t *nots[SC_MAX_LIST];
    int n_not;
    json_t *anyof[SC_MAX_LIST]; // arrays: each must have a matching member
    int n_anyof;
    json_t *oneof[SC_MAX_LIST]; // arrays: each must have exactly one matching member
    int n_oneof;
    json_t *ifs[SC_MAX_LIST][3]; // if / then / else (then, else: NULL when absent)
    int n_if;
    double nmin, nmax;
    uint8_t has_min, has_max, excl_min, excl_max;
    uint8_t has_mult, unique, never;
    double mult;
    int64_t min_len, max_len, min_items, max_items, min_props, max_props; // max < 0: none
};

// Hash table with byte-string keys (owned copies), values are a pointer and two ints.
struct hent {
    uint64_t h;
    uint8_t *key; // NULL: empty slot
    size_t klen;
    void *p;
    int32_t i0, i1;
};
struct htab {
    struct hent *e;
    size_t cap, n;
};

struct idname {
    const char *name;
    size_t len;
    json_t *schema;
};

struct sc {
    struct gl_gir_builder *b;
    struct gl_gctx *c;
    struct gl_err *err;
    json_t *doc;
    json_t *keep;        // array: synthesized schemas kept alive while views and memo refer to them
    struct htab views;   // json_t* or sorted part set -> struct view*
    struct htab memo;    // (view*, raw) -> node (i0), state (i1: 1 in progress, 2 done), cdepth (p)
    struct htab regexes; // flags + source -> regex index (i0)
    struct gl_arena *scratch; // view part lists
    struct view **all_views;
    size_t n_views, cap_views;
    char *path; // current JSON pointer (RFC 6901 escaped), NUL-terminated
    size_t plen, pcap;
    int depth, cdepth, raw;
    int strict_int; // draft 3/4 document: an integer has no fraction ("1.0" is not one)
    int pre7; // draft 3/4/6 document: if/then/else are not keywords there (draft 7 added them)
    unsigned tick;
    int32_t any, any_raw, never_node, null_node, bool_node;
    struct idname *ids; // $id / id / $anchor names, scanned on first non-local $ref
    size_t n_ids, cap_ids;
    int ids_scanned;
};

// ---- hashing and the table ----

static uint64_t fnv(const void *p, size_t n)
{
    uint64_t h = gl_fnv1a(p, n);
    return h ^ (h >> 29);
}

static struct hent *ht_find(struct htab *t, const void *key, size_t klen)
{
    if (!t->cap)
        return NULL;
    uint64_t h = fnv(key, klen);
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        struct hent *e = &t->e[i];
        if (!e->key)
            return NULL;
        if (e->h == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    }
}

// Inserts (or returns the existing) entry for key; NULL on allocation failure.
static struct hent *ht_put(struct htab *t, const void *key, size_t klen)
{
    struct hent *f = ht_find(t, key, klen);
    if (f)
        return f;
    if ((t->n + 1) * 2 > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        struct hent *ne = gl_calloc(nc, sizeof *ne);
        if (!ne)
            return NULL;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->e[i].key)
                continue;
            size_t j = t->e[i].h & (nc - 1);
            while (ne[j].key)
                j = (j + 1) & (nc - 1);
            ne[j] = t->e[i];
        }
        gl_free(t->e);
        t->e = ne;
        t->cap = nc;
    }
    uint8_t *k = gl_malloc(klen ? klen : 1);
    if (!k)
        return NULL;
    memcpy(k, key, klen);
    uint64_t h = fnv(key, klen);
    size_t i = h & (t->cap - 1);
    while (t->e[i].key)
        i = (i + 1) & (t->cap - 1);
    t->e[i] = (struct hent){.h = h, .key = k, .klen = klen, .i0 = -1};
    t->n++;
    return &t->e[i];
}

static void ht_free(struct htab *t)
{
    for (size_t i = 0; i < t->cap; i++)
        gl_free(t->e[i].key);
    gl_free(t->e);
    memset(t, 0, sizeof *t);
}

// ---- errors and the JSON pointer of the current position ----

static const char *sc_ptr(const struct sc *sc)
{
    return sc->plen ? sc->path : "(root)";
}

static int path_reserve(struct sc *sc, size_t more)
{
    if (sc->plen + more + 1 <= sc->pcap)
        return 1;
    size_t nc = (sc->plen + more + 1) * 2;
    char *np = gl_realloc(sc->path, nc);
    if (!np)
        return 0;
    sc->path = np;
    sc->pcap = nc;
    return 1;
}

// Appends "/" + key (escaped ~0 ~1); returns the old length to restore with path_pop.
static size_t path_push(struct sc *sc, const char *key, size_t len)
{
    size_t old = sc->plen;
    if (!path_reserve(sc, 2 * len + 1))
        return old; // keeps the shorter pointer; only messages are affected
    sc->path[sc->plen++] = '/';
    for (size_t i = 0; i < len; i++) {
        char ch = key[i];
        if (ch == '~' || ch == '/') {
            sc->path[sc->plen++] = '~';
            sc->path[sc->plen++] = ch == '~' ? '0' : '1';
        } else {
            sc->path[sc->plen++] = ch ? ch : '?';
        }
    }
    sc->path[sc->plen] = 0;
    return old;
}

static size_t path_push_idx(struct sc *sc, const char *kw, size_t idx)
{
    char buf[32];
    size_t old = path_push(sc, kw, strlen(kw));
    int n = snprintf(buf, sizeof buf, "%zu", idx);
    path_push(sc, buf, (size_t)n);
    return old;
}

static void path_pop(struct sc *sc, size_t old)
{
    sc->plen = old;
    if (sc->path)
        sc->path[old] = 0;
}

static gl_status sc_nomem(struct sc *sc)
{
    return gl_err_set(sc->err, GL_E_NOMEM, "grammar: out of memory compiling the schema at %s",
                      sc_ptr(sc));
}

static gl_status sc_bad(struct sc *sc, const char *kw, const char *why)
{
    return gl_err_set(sc->err, GL_E_INVAL, "grammar: invalid keyword '%s' at %s: %s", kw,
                      sc_ptr(sc), why);
}

// An unenforceable keyword: an error, or in lenient mode a warning (GL_OK: drop the keyword).
static gl_status sc_unsup(struct sc *sc, const char *kw, const char *why)
{
    if (sc->c->opts && sc->c->opts->lenient) {
        if (!gl_gctx_warn(sc->c, kw, sc_ptr(sc)))
            return sc_nomem(sc);
        return GL_OK;
    }
    return gl_err_set(sc->err, GL_E_UNSUPPORTED, "grammar: unsupported keyword '%s' at %s: %s", kw,
                      sc_ptr(sc), why);
}

// The per-compile memory ceiling (gl_grammar_opts.max_compile_bytes), naming this sub-schema.
static gl_status sc_check_mem(struct sc *sc)
{
    if (sc->c->mem && sc->c->opts && sc->c->opts->max_compile_bytes > 0 &&
        sc->c->mem->peak > sc->c->opts->max_compile_bytes) {
        char where[600];
        snprintf(where, sizeof where, "the schema at %.560s", sc_ptr(sc));
        return gl_gctx_check_mem(sc->c, where, sc->err);
    }
    return GL_OK;
}

static gl_status sc_tick(struct sc *sc)
{
    gl_status st = sc_check_mem(sc);
    if (st != GL_OK)
        return st;
    if ((++sc->tick & 31) == 0)
        return gl_gctx_check_time(sc->c, sc->err);
    return GL_OK;
}

// Keeps a synthesized schema alive until the build ends (steals the reference).
static json_t *sc_keep(struct sc *sc, json_t *j)
{
    if (!j)
        return NULL;
    if (json_array_append_new(sc->keep, j) != 0)
        return NULL;
    return j;
}

// {"allOf": list} (or the single member; NULL for an empty list, meaning "any value").
static json_t *synth_all(struct sc *sc, json_t *const *list, int n)
{
    int m = 0;
    json_t *uniq[2 * SC_MAX_LIST + 4];
    for (int i = 0; i < n; i++) {
        if (!list[i] || json_is_true(list[i]))
            continue;
        int dup = 0;
        for (int j = 0; j < m; j++)
            dup |= uniq[j] == list[i];
        GL_ASSERT(m < (int)(sizeof uniq / sizeof uniq[0])); // callers pass <= 2*SC_MAX_LIST+2
        if (!dup)
            uniq[m++] = list[i];
    }
    if (m == 0)
        return NULL;
    if (m == 1)
        return uniq[0];
    json_t *arr = json_array();
    json_t *o = json_object();
    if (!arr || !o) {
        json_decref(arr);
        json_decref(o);
        return NULL;
    }
    for (int i = 0; i < m; i++)
        json_array_append(arr, uniq[i]);
    json_object_set_new(o, "allOf", arr);
    return sc_keep(sc, o);
}

// ---- regexes (cached per build by flags + source) ----

static int32_t sc_regex(struct sc *sc, const char *src, size_t len, int flags)
{
    uint8_t stackbuf[256];
    uint8_t *key = len + 1 <= sizeof stackbuf ? stackbuf : gl_malloc(len + 1);
    if (!key) {
        sc_nomem(sc);
        return -1;
    }
    key[0] = (uint8_t)flags;
    memcpy(key + 1, src, len);
    struct hent *e = ht_put(&sc->regexes, key, len + 1);
    if (key != stackbuf)
        gl_free(key);
    if (!e) {
        sc_nomem(sc);
        return -1;
    }
    if (e->i0 >= 0)
        return e->i0;
    struct gl_regex *re = NULL;
    int32_t max_states = sc->c->opts ? sc->c->opts->max_regex_states : 0;
    gl_status st = gl_regex_compile(&re, src, len, flags, max_states, sc->err);
    if (st != GL_OK) {
        char msg[GL_ERR_MSG_CAP];
        snprintf(msg, sizeof msg, "%s", sc->err ? sc->err->msg : "regex error");
        gl_err_set(sc->err, st, "grammar: regex at %s: %s", sc_ptr(sc), msg);
        return -1;
    }
    int32_t idx = gl_gir_add_regex(sc->b, re);
    e->i0 = idx;
    return idx;
}

// A `pattern` of a view: a string (search semantics), or {"not": string} for the strings that
// `not: {pattern}` leaves (its complement, GL_RE_NEGATE).
static int32_t sc_pattern(struct sc *sc, json_t *p)
{
    json_t *src = json_is_object(p) ? json_object_get(p, "not") : p;
    return sc_regex(sc, json_string_value(src), json_string_length(src),
                    GL_RE_SEARCH | (src != p ? GL_RE_NEGATE : 0));
}

static struct gl_regex *sc_re(struct sc *sc, int32_t idx)
{
    return sc->b->ir->regexes[idx];
}

// ---- formats: full-match regexes over the decoded string ----

#define RX_DEC8 "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define RX_IPV4 "(?:" RX_DEC8 "\\.){3}" RX_DEC8
#define RX_H16  "[0-9A-Fa-f]{1,4}"
#define RX_LS32 "(?:" RX_H16 ":" RX_H16 "|" RX_IPV4 ")"
#define RX_IPV6                                                                                    \
    "(?:(?:" RX_H16 ":){6}" RX_LS32 "|::(?:" RX_H16 ":){5}" RX_LS32 "|(?:" RX_H16 ")?::(?:" RX_H16 \
    ":){4}" RX_LS32 "|(?:(?:" RX_H16 ":){0,1}" RX_H16 ")?::(?:" RX_H16 ":){3}" RX_LS32             \
    "|(?:(?:" RX_H16 ":){0,2}" RX_H16 ")?::(?:" RX_H16 ":){2}" RX_LS32 "|(?:(?:" RX_H16            \
    ":){0,3}" RX_H16 ")?::" RX_H16 ":" RX_LS32 "|(?:(?:" RX_H16 ":){0,4}" RX_H16 ")?::" RX_LS32    \
    "|(?:(?:" RX_H16 ":){0,5}" RX_H16 ")?::" RX_H16 "|(?:(?:" RX_H16 ":){0,6}" RX_H16 ")?::)"
// date, time and date-time: the intersection of RFC 3339 and what the parsers that read our
// output accept (as for email below): Python's datetime behind pydantic (v1's regex and v2's
// speedate) has no year 0000 and no leap second, and pydantic 1.x reads only an upper-case T and
// Z and at most 12 fraction digits (9 here: nanoseconds). RFC 3339 allows all of those; we never
// emit them (stricter, never looser).
#define RX_YEAR "(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
#define RX_DATE                                                                                    \
    "(?:" RX_YEAR "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|"     \
    "[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|"     \
    "(?:0[48]|[2468][048]|[13579][26])00)-02-29)"
#define RX_TIME                                                                                    \
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):"   \
    "[0-5][0-9])"
// A host label of 1..63 letters, digits and inner hyphens, never "--" in the 3rd and 4th place
// (that marks an IDNA A-label, whose Punycode we do not validate: refused, never looser).
#define RX_AN  "[A-Za-z0-9]"
#define RX_ANH "[A-Za-z0-9-]"
#define RX_LABEL                                                                                   \
    "(?:" RX_AN "(?:" RX_ANH "?" RX_AN ")?|" RX_AN RX_ANH RX_AN RX_ANH "{0,59}" RX_AN              \
    "|" RX_AN RX_ANH "-" RX_AN "(?:" RX_ANH "{0,58}" RX_AN ")?)"
#define RX_HOST  RX_LABEL "(?:\\." RX_LABEL ")*"
#define RX_ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
#define RX_PCT   "%[0-9A-Fa-f]{2}"
// RFC 3986 pieces; the *_I variants add the non-ASCII characters of RFC 3987 (IRIs).
#define RX_UNRES_SUB "A-Za-z0-9._~!$&'()*+,;=\\-"
#define RX_PCHAR(x)  "(?:[" RX_UNRES_SUB ":@" x "]|" RX_PCT ")"
#define RX_AUTH(x)                                                                                 \
    "(?:(?:[" RX_UNRES_SUB ":" x "]|" RX_PCT ")*@)?(?:\\[" RX_IPV6 "\\]|(?:[" RX_UNRES_SUB x       \
    "]|" RX_PCT ")*)(?::[0-9]*)?"
// hier-part without RFC 3986's path-empty ("urn:" alone): ajv-formats refuses it, and a URI with
// nothing after the scheme is never what a schema asking for a URI wants.
#define RX_HIER(x)                                                                                 \
    "(?://" RX_AUTH(x) "(?:/" RX_PCHAR(x) "*)*|/(?:" RX_PCHAR(x) "+(?:/" RX_PCHAR(                 \
        x) "*)*)?|" RX_PCHAR(x) "+(?:/" RX_PCHAR(x) "*)*)"
#define RX_QF(x)       "(?:\\?(?:" RX_PCHAR(x) "|[/?])*)?(?:#(?:" RX_PCHAR(x) "|[/?])*)?"
#define RX_URI(x)      "[A-Za-z][A-Za-z0-9+.-]*:" RX_HIER(x) RX_QF(x)
#define RX_NOSCHEME(x) "(?:[" RX_UNRES_SUB "@" x "]|" RX_PCT ")"
#define RX_RELREF(x)                                                                               \
    "(?://" RX_AUTH(x) "(?:/" RX_PCHAR(x) "*)*|/(?:" RX_PCHAR(x) "+(?:/" RX_PCHAR(                 \
        x) "*)*)?|" RX_NOSCHEME(x) "+(?:/" RX_PCHAR(x) "*)*)?" RX_QF(x)
#define RX_NONASCII "\\u0080-\\u{10FFFF}"
#define RX_DUR_TIME "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"

struct fmt_def {
    const char *name;
    const char *re; // NULL: a known format we cannot enforce
    int32_t max_chars;
    const char *re2; // non-NULL: the format is re|re2 (C caps one string literal's length)
};
static const struct fmt_def k_formats[] = {
    {"date-time", RX_DATE "T" RX_TIME, -1, NULL},
    {"date", RX_DATE, -1, NULL},
    {"time", RX_TIME, -1, NULL},
    {"duration",
     "P(?:[0-9]+W|(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:" RX_DUR_TIME
     ")?|" RX_DUR_TIME ")",
     -1, NULL},
    // email: the intersection of RFC 5321 and what the validators that judge our output accept
    // (ajv-formats, pydantic's email-validator): a dot-atom local part and a dotted domain. Quoted
    // local parts, IP literals and dotless domains are valid RFC addresses that we never emit.
    {"email", RX_ATEXT "+(?:\\." RX_ATEXT "+)*@" RX_LABEL "(?:\\." RX_LABEL ")+", -1, NULL},
    {"idn-email",
     "(?:" RX_ATEXT "|[" RX_NONASCII "])+(?:\\.(?:" RX_ATEXT "|[" RX_NONASCII
     "])+)*@(?:[A-Za-z0-9" RX_NONASCII "](?:[A-Za-z0-9" RX_NONASCII "\\-]*[A-Za-z0-9" RX_NONASCII
     "])?\\.)*[A-Za-z0-9" RX_NONASCII "](?:[A-Za-z0-9" RX_NONASCII "\\-]*[A-Za-z0-9" RX_NONASCII
     "])?",
     -1, NULL},
    {"hostname", RX_HOST, 253, NULL},
    {"ipv4", RX_IPV4, -1, NULL},
    {"ipv6", RX_IPV6, -1, NULL},
    {"uuid", "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", -1,
     NULL},
    {"uri", RX_URI(""), -1, NULL},
    {"uri-reference", RX_URI(""), -1, RX_RELREF("")},
    {"iri", RX_URI(RX_NONASCII), -1, NULL},
    {"iri-reference", RX_URI(RX_NONASCII), -1, RX_RELREF(RX_NONASCII)},
    {"json-pointer", "(?:/(?:[^~/]|~[01])*)*", -1, NULL},
    {"relative-json-pointer", "(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)", -1, NULL},
    {"regex", NULL, -1, NULL},
    {"idn-hostname", NULL, -1, NULL},
    {"uri-template", NULL, -1, NULL},
};

// Format lookup: 1 known (def set; def->re NULL means known but unenforceable), 0 unknown
// (an annotation: JSON Schema validators ignore formats they do not know).
static int fmt_lookup(const char *name, const struct fmt_def **def)
{
    for (size_t i = 0; i < sizeof k_formats / sizeof k_formats[0]; i++) {
        if (strcmp(k_formats[i].name, name) == 0) {
            *def = &k_formats[i];
            return 1;
        }
    }
    return 0;
}

static int32_t fmt_regex(struct sc *sc, const struct fmt_def *d)
{
    if (!d->re2)
        return sc_regex(sc, d->re, strlen(d->re), 0);
    size_t n1 = strlen(d->re), n2 = strlen(d->re2);
    char *src = gl_malloc(n1 + n2 + 8);
    if (!src) {
        sc_nomem(sc);
        return -1;
    }
    int n = snprintf(src, n1 + n2 + 8, "(?:%s|%s)", d->re, d->re2);
    int32_t r = sc_regex(sc, src, (size_t)n, 0);
    gl_free(src);
    return r;
}

// ---- views: parsing one schema object (a "part") ----

static int key_is(const char *k, size_t kl, const char *name)
{
    return kl == strlen(name) && memcmp(k, name, kl) == 0;
}

static void view_init(struct view *v)
{
    memset(v, 0, sizeof *v);
    v->types = T_ALL;
    v->max_len = v->max_items = v->max_props = -1;
}

static int view_is_empty(const struct view *v)
{
    return v->types == T_ALL && !v->props && !v->required && !v->addl && !v->pprops && !v->pnames &&
           !v->prefix && !v->items && !v->enumv && !v->n_pat && !v->n_fmt && !v->n_not &&
           !v->n_anyof && !v->n_oneof && !v->n_if && !v->has_min && !v->has_max && !v->has_mult &&
           !v->unique && !v->never && v->min_len == 0 && v->max_len < 0 && v->min_items == 0 &&
           v->max_items < 0 && v->min_props == 0 && v->max_props < 0;
}

static struct view *view_new(struct sc *sc)
{
    if (sc->n_views == sc->cap_views) {
        size_t nc = sc->cap_views ? sc->cap_views * 2 : 64;
        struct view **nv = gl_realloc(sc->all_views, nc * sizeof *nv);
        if (!nv)
            return NULL;
        sc->all_views = nv;
        sc->cap_views = nc;
    }
    struct view *v = gl_malloc(sizeof *v);
    if (!v)
        return NULL;
    view_init(v);
    sc->all_views[sc->n_views++] = v;
    return v;
}

static unsigned type_bit(const char *name)
{
    static const struct {
        const char *n;
        unsigned bit;
    } k[] = {{"null", T_NULL},  {"boolean", T_BOOL}, {"object", T_OBJ},  {"array", T_ARR},
             {"string", T_STR}, {"number", T_NUM},   {"integer", T_INT}, {"any", T_ALL}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(k[i].n, name) == 0)
            return k[i].bit;
    return 0;
}

// Intersection of type sets, where "number" contains "integer".
static unsigned types_and(unsigned a, unsigned b)
{
    if (a & T_NUM)
        a |= T_INT;
    if (b & T_NUM)
        b |= T_INT;
    unsigned r = a & b;
    if (r & T_NUM)
        r &= ~(unsigned)T_INT;
    return r;
}

// Non-negative integer keyword value (integral reals such as 2.0 accepted), clamped to 2^62.
static int get_count(json_t *x, int64_t *out)
{
    if (json_is_integer(x)) {
        if (json_integer_value(x) < 0)
            return 0;
        *out = json_integer_value(x);
        return 1;
    }
    if (json_is_real(x)) {
        double d = json_real_value(x);
        if (!(d >= 0) || floor(d) != d)
            return 0;
        *out = d > 4.6e18 ? (int64_t)4611686018427387904 : (int64_t)d;
        return 1;
    }
    return 0;
}

static void bound_min(struct view *v, double x, int excl)
{
    if (!v->has_min || x > v->nmin || (x == v->nmin && excl && !v->excl_min)) {
        v->nmin = x;
        v->excl_min = (uint8_t)excl;
        v->has_min = 1;
    }
}

static void bound_max(struct view *v, double x, int excl)
{
    if (!v->has_max || x < v->nmax || (x == v->nmax && excl && !v->excl_max)) {
        v->nmax = x;
        v->excl_max = (uint8_t)excl;
        v->has_max = 1;
    }
}

static int val_equal(json_t *a, json_t *b);

// Keywords that change validity and are not enforced.
static const char *const k_unsupported[] = {
    "contains",      "unevaluatedProperties", "unevaluatedItems", "propertyNames", "$dynamicRef",
    "$recursiveRef", "divisibleBy",           "disallow",         "extends",
};

// dependencies / dependentRequired / dependentSchemas: "if key k is present, then ...", as
// anyOf [{not: {required: [k]}}, {required: [k, ...] (, allOf: [schema])}] (disjoint on k).
static gl_status parse_dependencies(struct sc *sc, struct view *v, const char *kw, size_t kwl,
                                    json_t *deps)
{
    const char *k;
    size_t kl;
    json_t *x;
    json_object_keylen_foreach(deps, k, kl, x)
    {
        if (json_is_true(x) || (json_is_object(x) && json_object_size(x) == 0) ||
            (json_is_array(x) && json_array_size(x) == 0))
            continue;
        if (!json_is_array(x) && !json_is_object(x) && !json_is_false(x))
            return sc_bad(sc, kw, "each dependency must be an array of names or a schema");
        if (v->n_anyof >= 4) {
            size_t old = path_push(sc, kw, kwl);
            gl_status st = sc_unsup(sc, kw, "more than 4 dependencies in one schema");
            path_pop(sc, old);
            return st;
        }
        json_t *name = json_stringn(k, kl);
        json_t *req = json_array();
        json_t *with = json_object();
        if (!name || !req || !with)
            goto nomem;
        json_array_append(req, name);
        if (json_is_array(x)) {
            size_t i;
            json_t *e;
            json_array_foreach(x, i, e)
            {
                if (!json_is_string(e))
                    goto bad;
                json_array_append(req, e);
            }
        } else {
            json_object_set_new(with, "allOf", json_pack("[O]", x));
        }
        json_object_set(with, "required", req);
        json_t *alts = json_pack("[{s{s[O]}}O]", "not", "required", name, with);
        json_decref(name);
        json_decref(req);
        json_decref(with);
        if (!alts || !sc_keep(sc, alts))
            return sc_nomem(sc);
        v->anyof[v->n_anyof++] = alts;
        continue;
    bad:
        json_decref(name);
        json_decref(req);
        json_decref(with);
        return sc_bad(sc, kw, "each dependency must be an array of names or a schema");
    nomem:
        json_decref(name);
        json_decref(req);
        json_decref(with);
        return sc_nomem(sc);
    }
    return GL_OK;
}

// What parse_part gathers from one schema object before it settles the view: the keywords whose
// meaning depends on a sibling (items on prefixItems, minimum on a draft-4 exclusiveMinimum,
// const on enum, then on if, nullable on type).
struct part {
    json_t *o; // the schema object being parsed
    json_t *minimum, *maximum, *emin, *emax;
    json_t *items, *prefix, *add_items, *constv, *enumv;
    int has_const, nullable, has_type, contains_any;
    json_t *if_s, *then_s, *else_s;
};

// One keyword's check and effect: x is the value of keyword k[0..kl) of p->o; sets v (or p, for
// keywords parse_part settles later). GL_OK, or the error set in sc->err.
typedef gl_status (*kw_fn)(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                           json_t *x);

static gl_status kw_type(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                         json_t *x)
{
    (void)k, (void)kl;
    unsigned t = 0;
    if (json_is_string(x)) {
        t = type_bit(json_string_value(x));
    } else if (json_is_array(x) && json_array_size(x) > 0) {
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e)
        {
            unsigned bit = json_is_string(e) ? type_bit(json_string_value(e)) : 0;
            if (!bit) {
                t = 0;
                break;
            }
            t |= bit;
        }
    }
    if (!t)
        return sc_bad(sc, "type", "not a type name or a non-empty list of them");
    v->types = t;
    p->has_type = 1;
    return GL_OK;
}

static gl_status kw_properties(struct sc *sc, struct view *v, struct part *p, const char *k,
                               size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_object(x))
        return sc_bad(sc, "properties", "must be an object");
    v->props = x;
    return GL_OK;
}

static gl_status kw_pattern_properties(struct sc *sc, struct view *v, struct part *p, const char *k,
                                       size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_object(x))
        return sc_bad(sc, "patternProperties", "must be an object");
    if (json_object_size(x))
        v->pprops = x;
    return GL_OK;
}

static gl_status kw_required(struct sc *sc, struct view *v, struct part *p, const char *k,
                             size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (json_is_boolean(x))
        return GL_OK; // draft 3: handled by the parent's properties
    if (!json_is_array(x))
        return sc_bad(sc, "required", "must be an array of strings");
    size_t i;
    json_t *e;
    json_array_foreach(x, i, e) if (!json_is_string(e)) return sc_bad(
        sc, "required", "must be an array of strings");
    if (json_array_size(x))
        v->required = x;
    return GL_OK;
}

static gl_status kw_additional_properties(struct sc *sc, struct view *v, struct part *p,
                                          const char *k, size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_object(x) && !json_is_boolean(x))
        return sc_bad(sc, "additionalProperties", "must be a schema");
    v->addl = x;
    return GL_OK;
}

static gl_status kw_items(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                          json_t *x)
{
    (void)v, (void)k, (void)kl;
    if (!json_is_object(x) && !json_is_boolean(x) && !json_is_array(x))
        return sc_bad(sc, "items", "must be a schema or an array of schemas");
    p->items = x;
    return GL_OK;
}

static gl_status kw_prefix_items(struct sc *sc, struct view *v, struct part *p, const char *k,
                                 size_t kl, json_t *x)
{
    (void)v, (void)k, (void)kl;
    if (!json_is_array(x))
        return sc_bad(sc, "prefixItems", "must be an array of schemas");
    p->prefix = x;
    return GL_OK;
}

static gl_status kw_additional_items(struct sc *sc, struct view *v, struct part *p, const char *k,
                                     size_t kl, json_t *x)
{
    (void)v, (void)k, (void)kl;
    if (!json_is_object(x) && !json_is_boolean(x))
        return sc_bad(sc, "additionalItems", "must be a schema");
    p->add_items = x;
    return GL_OK;
}

static gl_status kw_enum(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                         json_t *x)
{
    (void)v, (void)k, (void)kl;
    if (!json_is_array(x))
        return sc_bad(sc, "enum", "must be an array");
    if (json_array_size(x) > SC_MAX_ENUM)
        return gl_err_set(sc->err, GL_E_LIMIT,
                          "grammar: 'enum' at %s has %zu values, over the limit of %d", sc_ptr(sc),
                          json_array_size(x), SC_MAX_ENUM);
    p->enumv = x;
    return GL_OK;
}

static gl_status kw_const(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                          json_t *x)
{
    (void)sc, (void)v, (void)k, (void)kl;
    p->constv = x;
    p->has_const = 1;
    return GL_OK;
}

// minimum, maximum
static gl_status kw_bound(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                          json_t *x)
{
    (void)v, (void)kl;
    if (!json_is_number(x))
        return sc_bad(sc, k, "must be a number");
    *(k[1] == 'i' ? &p->minimum : &p->maximum) = x;
    return GL_OK;
}

// exclusiveMinimum, exclusiveMaximum: a number, or a draft-4 flag on minimum/maximum
static gl_status kw_exclusive(struct sc *sc, struct view *v, struct part *p, const char *k,
                              size_t kl, json_t *x)
{
    (void)v, (void)kl;
    if (!json_is_number(x) && !json_is_boolean(x))
        return sc_bad(sc, k, "must be a number (or a boolean, draft 4)");
    *(k[10] == 'i' ? &p->emin : &p->emax) = x;
    return GL_OK;
}

static gl_status kw_multiple_of(struct sc *sc, struct view *v, struct part *p, const char *k,
                                size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_number(x) || !(json_number_value(x) > 0))
        return sc_bad(sc, "multipleOf", "must be a number > 0");
    v->has_mult = 1;
    v->mult = json_number_value(x);
    return GL_OK;
}

// min/max Length, Items, Properties
static gl_status kw_count(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                          json_t *x)
{
    (void)p, (void)kl;
    int64_t n;
    if (!get_count(x, &n))
        return sc_bad(sc, k, "must be a non-negative integer");
    int64_t *dst = k[1] == 'i' ? (k[3] == 'L'   ? &v->min_len
                                  : k[3] == 'I' ? &v->min_items
                                                : &v->min_props)
                               : (k[3] == 'L'   ? &v->max_len
                                  : k[3] == 'I' ? &v->max_items
                                                : &v->max_props);
    *dst = n;
    return GL_OK;
}

static gl_status kw_pattern(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                            json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_string(x))
        return sc_bad(sc, "pattern", "must be a string");
    v->pat[v->n_pat++] = x;
    return GL_OK;
}

static gl_status kw_format(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                           json_t *x)
{
    (void)sc, (void)p, (void)k, (void)kl;
    if (json_is_string(x))
        v->fmt[v->n_fmt++] = x;
    return GL_OK;
}

// anyOf, oneOf
static gl_status kw_alternatives(struct sc *sc, struct view *v, struct part *p, const char *k,
                                 size_t kl, json_t *x)
{
    (void)p, (void)kl;
    if (!json_is_array(x) || json_array_size(x) == 0)
        return sc_bad(sc, k, "must be a non-empty array of schemas");
    if (k[0] == 'a')
        v->anyof[v->n_anyof++] = x;
    else
        v->oneof[v->n_oneof++] = x;
    return GL_OK;
}

static gl_status kw_not(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                        json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_object(x) && !json_is_boolean(x))
        return sc_bad(sc, "not", "must be a schema");
    v->nots[v->n_not++] = x;
    return GL_OK;
}

static gl_status kw_unique_items(struct sc *sc, struct view *v, struct part *p, const char *k,
                                 size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (!json_is_boolean(x))
        return sc_bad(sc, "uniqueItems", "must be a boolean");
    v->unique = json_is_true(x);
    return GL_OK;
}

static gl_status kw_nullable(struct sc *sc, struct view *v, struct part *p, const char *k,
                             size_t kl, json_t *x)
{
    (void)sc, (void)v, (void)k, (void)kl;
    p->nullable = json_is_true(x);
    return GL_OK;
}

// dependencies, dependentRequired, dependentSchemas
static gl_status kw_dependencies(struct sc *sc, struct view *v, struct part *p, const char *k,
                                 size_t kl, json_t *x)
{
    (void)p;
    if (!json_is_object(x))
        return sc_bad(sc, k, "must be an object");
    return parse_dependencies(sc, v, k, kl, x);
}

static gl_status kw_property_names(struct sc *sc, struct view *v, struct part *p, const char *k,
                                   size_t kl, json_t *x)
{
    (void)p, (void)k, (void)kl;
    if (json_is_false(x))
        v->max_props = 0;
    else if (json_is_object(x) && json_object_size(x))
        v->pnames = x;
    else if (!json_is_boolean(x) && !json_is_object(x))
        return sc_bad(sc, "propertyNames", "must be a schema");
    return GL_OK;
}

// if, then, else
static gl_status kw_conditional(struct sc *sc, struct view *v, struct part *p, const char *k,
                                size_t kl, json_t *x)
{
    (void)v, (void)kl;
    if (!json_is_object(x) && !json_is_boolean(x))
        return sc_bad(sc, k, "must be a schema");
    *(k[0] == 'i' ? &p->if_s : k[0] == 't' ? &p->then_s : &p->else_s) = x;
    return GL_OK;
}

// The keywords parse_part reads; any other is an annotation, or one of k_unsupported.
static const struct {
    const char *name;
    kw_fn fn;
} k_keywords[] = {
    {"type", kw_type},
    {"properties", kw_properties},
    {"patternProperties", kw_pattern_properties},
    {"required", kw_required},
    {"additionalProperties", kw_additional_properties},
    {"items", kw_items},
    {"prefixItems", kw_prefix_items},
    {"additionalItems", kw_additional_items},
    {"enum", kw_enum},
    {"const", kw_const},
    {"minimum", kw_bound},
    {"maximum", kw_bound},
    {"exclusiveMinimum", kw_exclusive},
    {"exclusiveMaximum", kw_exclusive},
    {"multipleOf", kw_multiple_of},
    {"minLength", kw_count},
    {"maxLength", kw_count},
    {"minItems", kw_count},
    {"maxItems", kw_count},
    {"minProperties", kw_count},
    {"maxProperties", kw_count},
    {"pattern", kw_pattern},
    {"format", kw_format},
    {"anyOf", kw_alternatives},
    {"oneOf", kw_alternatives},
    {"not", kw_not},
    {"uniqueItems", kw_unique_items},
    {"nullable", kw_nullable},
    {"dependencies", kw_dependencies},
    {"dependentRequired", kw_dependencies},
    {"dependentSchemas", kw_dependencies},
    {"propertyNames", kw_property_names},
    {"if", kw_conditional},
    {"then", kw_conditional},
    {"else", kw_conditional},
};

// A keyword not in k_keywords: an annotation (ignored), or one of k_unsupported, which is an
// error (a warning when lenient) unless its value constrains nothing.
static gl_status kw_other(struct sc *sc, struct view *v, struct part *p, const char *k, size_t kl,
                          json_t *x)
{
    for (size_t i = 0; i < sizeof k_unsupported / sizeof k_unsupported[0]; i++) {
        if (!key_is(k, kl, k_unsupported[i]))
            continue;
        // Forms that constrain nothing are accepted as they are; contains: true (or {})
        // only asks for a first item.
        if (key_is(k, kl, "contains") && !json_object_get(p->o, "minContains") &&
            !json_object_get(p->o, "maxContains") &&
            (json_is_true(x) || (json_is_object(x) && json_object_size(x) == 0))) {
            p->contains_any = 1;
            return GL_OK;
        }
        if (!key_is(k, kl, "contains") &&
            (json_is_true(x) || (json_is_object(x) && json_object_size(x) == 0)))
            return GL_OK;
        if (key_is(k, kl, "propertyNames") && json_is_false(x)) {
            v->max_props = 0;
            return GL_OK;
        }
        size_t old = path_push(sc, k, kl);
        gl_status st = sc_unsup(sc, k_unsupported[i], "not enforced by the grammar");
        path_pop(sc, old);
        return st;
    }
    return GL_OK;
}

// Settles the keywords that depend on a sibling (struct part) into v.
static gl_status part_settle(struct sc *sc, struct view *v, const struct part *p)
{
    if (p->contains_any && v->min_items < 1)
        v->min_items = 1;
    if (p->if_s && (p->then_s || p->else_s) && !sc->pre7) {
        v->ifs[0][0] = p->if_s;
        v->ifs[0][1] = p->then_s;
        v->ifs[0][2] = p->else_s;
        v->n_if = 1;
    }
    // Arrays: 2020-12 prefixItems + items, or draft 4-7 array-form items + additionalItems.
    if (p->prefix) {
        if (json_is_array(p->items))
            return sc_bad(sc, "items", "array form together with prefixItems");
        v->prefix = p->prefix;
        v->items = p->items;
    } else if (json_is_array(p->items)) {
        v->prefix = p->items;
        v->items = p->add_items;
    } else {
        v->items = p->items;
    }
    if (v->prefix && json_array_size(v->prefix) == 0)
        v->prefix = NULL;
    // Numbers: draft-4 boolean exclusive flags modify minimum/maximum.
    if (p->minimum)
        bound_min(v, json_number_value(p->minimum), json_is_true(p->emin));
    if (p->maximum)
        bound_max(v, json_number_value(p->maximum), json_is_true(p->emax));
    if (json_is_number(p->emin))
        bound_min(v, json_number_value(p->emin), 1);
    if (json_is_number(p->emax))
        bound_max(v, json_number_value(p->emax), 1);
    // const: a one-value enum (empty when an enum beside it does not hold the value).
    if (p->has_const) {
        json_t *arr = json_array();
        if (!arr)
            return sc_nomem(sc);
        int in_enum = !p->enumv;
        for (size_t i = 0; p->enumv && i < json_array_size(p->enumv); i++)
            in_enum |= val_equal(json_array_get(p->enumv, i), p->constv);
        if (in_enum)
            json_array_append(arr, p->constv);
        v->enumv = sc_keep(sc, arr);
        if (!v->enumv)
            return sc_nomem(sc);
    } else if (p->enumv) {
        v->enumv = p->enumv;
    }
    if (p->nullable && p->has_type && SC_NULLABLE_ADDS_NULL)
        v->types |= T_NULL;
    return GL_OK;
}

// Reads one schema object's keywords into v (which the caller has initialised): each keyword's
// table entry checks and records it, then part_settle combines the ones that depend on each
// other. GL_OK, or the error set in sc->err.
static gl_status parse_part(struct sc *sc, json_t *o, struct view *v)
{
    struct part p = {.o = o};
    const char *k;
    size_t kl;
    json_t *x;
    json_object_keylen_foreach(o, k, kl, x)
    {
        kw_fn fn = kw_other;
        for (size_t i = 0; i < sizeof k_keywords / sizeof k_keywords[0]; i++) {
            if (key_is(k, kl, k_keywords[i].name)) {
                fn = k_keywords[i].fn;
                break;
            }
        }
        gl_status st = fn(sc, v, &p, k, kl, x);
        if (st != GL_OK)
            return st;
    }
    return part_settle(sc, v, &p);
}

// ---- merging parts (allOf, $ref siblings) ----

// The schemas a view applies to the value of key `name`: the property, else the matching
// patternProperties, else additionalProperties (absent: none, any value).
static gl_status key_side(struct sc *sc, const struct view *v, const char *name, size_t len,
                          json_t **out, int *n, int cap)
{
    json_t *p = v->props ? json_object_getn(v->props, name, len) : NULL;
    if (p) {
        out[(*n)++] = p;
        return GL_OK;
    }
    int matched = 0;
    if (v->pprops) {
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach(v->pprops, k, kl, x)
        {
            int32_t re = sc_regex(sc, k, kl, GL_RE_SEARCH);
            if (re < 0)
                return sc->err ? sc->err->code : GL_E_INVAL;
            if (gl_regex_match(sc_re(sc, re), name, len)) {
                matched = 1;
                if (*n < cap)
                    out[(*n)++] = x;
                else
                    return sc_unsup(sc, "patternProperties", "too many patterns match one key");
            }
        }
    }
    if (!matched && v->addl) {
        if (*n >= cap)
            return sc_unsup(sc, "additionalProperties", "too many schemas apply to one key");
        out[(*n)++] = v->addl;
    }
    return GL_OK;
}

static int append_list(json_t **dst, int *n, json_t *const *src, int m)
{
    for (int i = 0; i < m; i++) {
        if (*n >= SC_MAX_LIST)
            return 0;
        dst[(*n)++] = src[i];
    }
    return 1;
}

static gl_status merge_objects(struct sc *sc, struct view *a, const struct view *b)
{
    if (!b->props && !b->pprops && !b->addl)
        return GL_OK;
    if (!a->props && !a->pprops && !a->addl) {
        a->props = b->props;
        a->pprops = b->pprops;
        a->addl = b->addl;
        return GL_OK;
    }
    int a_closed = a->addl && !json_is_true(a->addl), b_closed = b->addl && !json_is_true(b->addl);
    if ((a->pprops && b_closed) || (b->pprops && a_closed))
        return sc_unsup(sc, "allOf", "cannot merge patternProperties with additionalProperties");
    json_t *props = json_object();
    if (!props || !sc_keep(sc, props))
        return sc_nomem(sc);
    const struct view *side[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        if (!side[s]->props)
            continue;
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach(side[s]->props, k, kl, x)
        {
            (void)x;
            if (json_object_getn(props, k, kl))
                continue;
            json_t *list[2 * SC_MAX_LIST + 4];
            int n = 0;
            gl_status st = key_side(sc, a, k, kl, list, &n, SC_MAX_LIST);
            if (st == GL_OK)
                st = key_side(sc, b, k, kl, list, &n, 2 * SC_MAX_LIST);
            if (st != GL_OK)
                return st;
            json_t *m = synth_all(sc, list, n);
            if (json_object_setn(props, k, kl, m ? m : json_true()) != 0)
                return sc_nomem(sc);
        }
    }
    a->props = props;
    if (a->pprops && b->pprops && a->pprops != b->pprops) {
        json_t *pp = json_object();
        if (!pp || !sc_keep(sc, pp))
            return sc_nomem(sc);
        json_object_update(pp, a->pprops);
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach(b->pprops, k, kl, x)
        {
            json_t *old = json_object_getn(pp, k, kl);
            json_t *pair[2] = {old, x};
            json_t *m = old ? synth_all(sc, pair, 2) : x;
            json_object_setn(pp, k, kl, m ? m : json_true());
        }
        a->pprops = pp;
    } else if (b->pprops) {
        a->pprops = b->pprops;
    }
    json_t *pair[2] = {a->addl, b->addl};
    a->addl = synth_all(sc, pair, 2);
    if (!a->addl && (json_is_true(pair[0]) || json_is_true(pair[1])))
        a->addl = NULL;
    return GL_OK;
}

static gl_status merge_arrays(struct sc *sc, struct view *a, const struct view *b)
{
    if (!b->prefix && !b->items)
        return GL_OK;
    if (!a->prefix && !a->items) {
        a->prefix = b->prefix;
        a->items = b->items;
        return GL_OK;
    }
    size_t na = a->prefix ? json_array_size(a->prefix) : 0;
    size_t nb = b->prefix ? json_array_size(b->prefix) : 0;
    size_t n = na > nb ? na : nb;
    if (n) {
        json_t *pre = json_array();
        if (!pre || !sc_keep(sc, pre))
            return sc_nomem(sc);
        for (size_t i = 0; i < n; i++) {
            json_t *pair[2] = {i < na ? json_array_get(a->prefix, i) : a->items,
                               i < nb ? json_array_get(b->prefix, i) : b->items};
            json_t *m = synth_all(sc, pair, 2);
            json_array_append(pre, m ? m : json_true());
        }
        a->prefix = pre;
    }
    json_t *pair[2] = {a->items, b->items};
    a->items = synth_all(sc, pair, 2);
    return GL_OK;
}

static gl_status merge_into(struct sc *sc, struct view *a, const struct view *b)
{
    gl_status st;
    a->never |= b->never;
    a->types = types_and(a->types, b->types);
    if ((st = merge_objects(sc, a, b)) != GL_OK || (st = merge_arrays(sc, a, b)) != GL_OK)
        return st;
    if (b->pnames) {
        if (a->pnames && a->pnames != b->pnames)
            return sc_unsup(sc, "propertyNames", "cannot merge two propertyNames");
        a->pnames = b->pnames;
    }
    if (b->required) {
        if (!a->required) {
            a->required = b->required;
        } else if (a->required != b->required) {
            json_t *r = json_array();
            if (!r || !sc_keep(sc, r))
                return sc_nomem(sc);
            json_array_extend(r, a->required);
            json_array_extend(r, b->required);
            a->required = r;
        }
    }
    if (b->enumv) {
        if (!a->enumv) {
            a->enumv = b->enumv;
        } else if (a->enumv != b->enumv) {
            json_t *r = json_array();
            if (!r || !sc_keep(sc, r))
                return sc_nomem(sc);
            for (size_t i = 0; i < json_array_size(a->enumv); i++)
                for (size_t j = 0; j < json_array_size(b->enumv); j++)
                    if (val_equal(json_array_get(a->enumv, i), json_array_get(b->enumv, j))) {
                        json_array_append(r, json_array_get(a->enumv, i));
                        break;
                    }
            a->enumv = r;
        }
    }
    if (!append_list(a->pat, &a->n_pat, b->pat, b->n_pat) ||
        !append_list(a->fmt, &a->n_fmt, b->fmt, b->n_fmt) ||
        !append_list(a->nots, &a->n_not, b->nots, b->n_not) ||
        !append_list(a->anyof, &a->n_anyof, b->anyof, b->n_anyof) ||
        !append_list(a->oneof, &a->n_oneof, b->oneof, b->n_oneof))
        return sc_unsup(sc, "allOf", "too many merged pattern/format/not/anyOf/oneOf keywords");
    for (int i = 0; i < b->n_if; i++) {
        if (a->n_if >= SC_MAX_LIST)
            return sc_unsup(sc, "if", "too many merged if/then/else");
        memcpy(a->ifs[a->n_if++], b->ifs[i], sizeof b->ifs[i]);
    }
    if (b->has_min)
        bound_min(a, b->nmin, b->excl_min);
    if (b->has_max)
        bound_max(a, b->nmax, b->excl_max);
    if (b->has_mult) {
        if (!a->has_mult) {
            a->has_mult = 1;
            a->mult = b->mult;
        } else if (a->mult != b->mult) {
            double x = a->mult, y = b->mult;
            if (floor(x) == x && floor(y) == y && x < 1e9 && y < 1e9) {
                int64_t p = (int64_t)x, q = (int64_t)y, g = p, h = q;
                while (h) {
                    int64_t t = g % h;
                    g = h;
                    h = t;
                }
                a->mult = (double)(p / g * q);
            } else if (fmod(x, y) == 0) {
                // x is a multiple of y: x already implies y
            } else if (fmod(y, x) == 0) {
                a->mult = y;
            } else {
                return sc_unsup(sc, "multipleOf", "cannot merge two non-integer multipleOf");
            }
        }
    }
#define MAXOF(f) a->f = a->f > b->f ? a->f : b->f
#define MINOF(f) a->f = (a->f < 0 || (b->f >= 0 && b->f < a->f)) ? b->f : a->f
    MAXOF(min_len);
    MAXOF(min_items);
    MAXOF(min_props);
    MINOF(max_len);
    MINOF(max_items);
    MINOF(max_props);
#undef MAXOF
#undef MINOF
    a->unique |= b->unique;
    return GL_OK;
}

// ---- $ref resolution ----

static void ids_scan(struct sc *sc, json_t *j, int depth)
{
    if (depth > 64)
        return;
    if (json_is_object(j)) {
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach(j, k, kl, x)
        {
            if ((key_is(k, kl, "$id") || key_is(k, kl, "id") || key_is(k, kl, "$anchor")) &&
                json_is_string(x)) {
                if (sc->n_ids == sc->cap_ids) {
                    size_t nc = sc->cap_ids ? sc->cap_ids * 2 : 16;
                    struct idname *ni = gl_realloc(sc->ids, nc * sizeof *ni);
                    if (!ni)
                        return;
                    sc->ids = ni;
                    sc->cap_ids = nc;
                }
                const char *s = json_string_value(x);
                size_t n = json_string_length(x);
                int anchor = k[1] == 'a';
                if (!anchor && n && s[n - 1] == '#')
                    n--; // "http://x/y.json#" names the resource itself
                if (!anchor && n && s[0] == '#') {
                    s++; // draft-6 style plain-name fragment id
                    n--;
                    anchor = 1;
                }
                sc->ids[sc->n_ids++] = (struct idname){s, n, j};
                (void)anchor;
            } else if (!key_is(k, kl, "enum") && !key_is(k, kl, "const") &&
                       !key_is(k, kl, "default") && !key_is(k, kl, "examples")) {
                ids_scan(sc, x, depth + 1);
            }
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *x;
        json_array_foreach(j, i, x) ids_scan(sc, x, depth + 1);
    }
}

static json_t *ids_find(struct sc *sc, const char *s, size_t n)
{
    if (!sc->ids_scanned) {
        sc->ids_scanned = 1;
        ids_scan(sc, sc->doc, 0);
    }
    json_t *hit = NULL;
    for (size_t i = 0; i < sc->n_ids; i++)
        if (sc->ids[i].len == n && memcmp(sc->ids[i].name, s, n) == 0) {
            if (hit && hit != sc->ids[i].schema)
                return NULL; // defined twice (scoped by $id): we do not track base URIs
            hit = sc->ids[i].schema;
        }
    if (hit)
        return hit;
    // A relative reference such as "other.json" against an absolute id ".../other.json".
    for (size_t i = 0; i < sc->n_ids; i++) {
        const struct idname *d = &sc->ids[i];
        if (d->len > n && memcmp(d->name + d->len - n, s, n) == 0 && d->name[d->len - n - 1] == '/')
            return d->schema;
    }
    return NULL;
}

// Resolves ref against the document; sets the error (naming $ref and the pointer) on failure.
static json_t *resolve_ref(struct sc *sc, const char *ref, size_t len)
{
    const char *hash = memchr(ref, '#', len);
    size_t ulen = hash ? (size_t)(hash - ref) : len;
    json_t *base = sc->doc;
    if (ulen) {
        base = ids_find(sc, ref, ulen);
        if (!base) {
            gl_err_set(sc->err, GL_E_UNSUPPORTED,
                       "grammar: unsupported keyword '$ref' at %s: remote reference '%.*s'",
                       sc_ptr(sc), (int)(len > 200 ? 200 : len), ref);
            return NULL;
        }
    }
    if (!hash)
        return base;
    const char *f = hash + 1, *end = ref + len;
    if (f == end)
        return base;
    if (*f != '/') {
        json_t *a = ids_find(sc, f, (size_t)(end - f));
        if (!a)
            gl_err_set(sc->err, GL_E_INVAL, "grammar: '$ref' at %s: anchor '%.*s' not found",
                       sc_ptr(sc), (int)((end - f) > 200 ? 200 : (end - f)), f);
        return a;
    }
    json_t *cur = base;
    char tok[1024];
    while (f < end && cur) {
        f++; // '/'
        size_t tl = 0;
        while (f < end && *f != '/') {
            char ch = *f++;
            if (ch == '%' && end - f >= 2 && gl_hex_val(f[0]) >= 0 && gl_hex_val(f[1]) >= 0) {
                ch = (char)(gl_hex_val(f[0]) * 16 + gl_hex_val(f[1]));
                f += 2;
            }
            if (ch == '~' && f < end && (*f == '0' || *f == '1')) {
                ch = *f++ == '0' ? '~' : '/';
            }
            if (tl < sizeof tok)
                tok[tl++] = ch;
        }
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, tok, tl);
        } else if (json_is_array(cur)) {
            size_t idx = 0;
            int ok = tl > 0 && tl < 10;
            for (size_t i = 0; i < tl && ok; i++) {
                ok = tok[i] >= '0' && tok[i] <= '9';
                idx = idx * 10 + (size_t)(tok[i] - '0');
            }
            cur = ok ? json_array_get(cur, idx) : NULL;
        } else {
            cur = NULL;
        }
    }
    if (!cur)
        gl_err_set(sc->err, GL_E_INVAL, "grammar: '$ref' at %s: '%.*s' does not resolve",
                   sc_ptr(sc), (int)(len > 200 ? 200 : len), ref);
    return cur;
}

// ---- flattening: $ref + allOf + siblings -> one view ----

struct pvec {
    json_t **p;
    size_t n, cap;
};

static int pvec_push(struct pvec *v, json_t *j)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 16;
        json_t **np = gl_realloc(v->p, nc * sizeof *np);
        if (!np)
            return 0;
        v->p = np;
        v->cap = nc;
    }
    v->p[v->n++] = j;
    return 1;
}

static int pvec_has(const struct pvec *v, const json_t *j)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->p[i] == j)
            return (int)i + 1;
    return 0;
}

// Expansion state: parts merged (a diamond merges once; the first n_seed came from the view a
// branch extends), the $ref/allOf chain being expanded, and the parts that constrain anything
// (the cache key: a bare {"$ref": ...} adds nothing of its own).
struct xp {
    struct pvec parts, active, keys;
    size_t n_seed;
};

static void xp_free(struct xp *x)
{
    gl_free(x->parts.p);
    gl_free(x->active.p);
    gl_free(x->keys.p);
}

static int xp_seed(struct xp *x, const struct view *v)
{
    for (size_t i = 0; i < v->n_parts; i++)
        if (!pvec_push(&x->parts, v->parts[i]))
            return 0;
    x->n_seed = v->n_parts;
    return 1;
}

static int view_set_parts(struct sc *sc, struct view *v, const struct pvec *parts)
{
    v->parts = gl_arena_alloc(sc->scratch, (parts->n ? parts->n : 1) * sizeof(json_t *));
    if (!v->parts)
        return 0;
    if (parts->n)
        memcpy(v->parts, parts->p, parts->n * sizeof(json_t *));
    v->n_parts = parts->n;
    return 1;
}

// Merges schema s (and what its $ref / allOf reach) into acc. parts: every object merged so far
// (a diamond merges once); active: the $ref/allOf chain being expanded (a repeat is a cycle that
// consumes no input).
static gl_status expand(struct sc *sc, json_t *s, struct view *acc, struct xp *x)
{
    struct pvec *parts = &x->parts, *active = &x->active;
    if (json_is_boolean(s)) {
        if (json_is_false(s)) {
            acc->never = 1;
            if (!pvec_has(&x->keys, s) && !pvec_push(&x->keys, s))
                return sc_nomem(sc);
        }
        return GL_OK;
    }
    if (!json_is_object(s))
        return gl_err_set(sc->err, GL_E_INVAL,
                          "grammar: schema at %s must be an object or a boolean", sc_ptr(sc));
    if (pvec_has(active, s))
        return gl_err_set(sc->err, GL_E_INVAL,
                          "grammar: '$ref' cycle at %s: the schema refers to itself without "
                          "consuming input (through $ref/allOf)",
                          sc_ptr(sc));
    int seen = pvec_has(parts, s);
    if (seen && (size_t)seen <= x->n_seed &&
        (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")))
        return gl_err_set(sc->err, GL_E_INVAL,
                          "grammar: '$ref' cycle at %s: an anyOf/oneOf branch reaches the "
                          "schema that contains it without consuming input",
                          sc_ptr(sc));
    if (seen)
        return GL_OK;
    if (active->n >= SC_MAX_DEPTH)
        return gl_err_set(sc->err, GL_E_LIMIT,
                          "grammar: schema nests $ref/allOf deeper than %d at %s", SC_MAX_DEPTH,
                          sc_ptr(sc));
    gl_status st = sc_tick(sc);
    if (st != GL_OK)
        return st;
    if (!pvec_push(parts, s) || !pvec_push(active, s))
        return sc_nomem(sc);
    struct view part;
    view_init(&part);
    st = parse_part(sc, s, &part);
    if (st == GL_OK && !view_is_empty(&part) && !pvec_push(&x->keys, s))
        st = sc_nomem(sc);
    if (st == GL_OK)
        st = merge_into(sc, acc, &part);
    json_t *ref = json_object_get(s, "$ref");
    if (st == GL_OK && ref) {
        if (!json_is_string(ref)) {
            st = sc_bad(sc, "$ref", "must be a string");
        } else {
            const char *r = json_string_value(ref);
            size_t rl = json_string_length(ref);
            json_t *t = resolve_ref(sc, r, rl);
            if (!t) {
                st = sc->err ? sc->err->code : GL_E_INVAL;
            } else {
                char *saved = gl_strdup(sc->path ? sc->path : "");
                size_t saved_len = sc->plen;
                const char *h = memchr(r, '#', rl);
                path_pop(sc, 0);
                if (h && path_reserve(sc, rl)) {
                    size_t fl = rl - (size_t)(h + 1 - r);
                    memcpy(sc->path, h + 1, fl);
                    sc->plen = fl;
                    sc->path[fl] = 0;
                }
                st = expand(sc, t, acc, x);
                if (saved && path_reserve(sc, saved_len)) {
                    memcpy(sc->path, saved, saved_len + 1);
                    sc->plen = saved_len;
                }
                gl_free(saved);
            }
        }
    }
    json_t *all = json_object_get(s, "allOf");
    if (st == GL_OK && all) {
        if (!json_is_array(all) || json_array_size(all) == 0) {
            st = sc_bad(sc, "allOf", "must be a non-empty array of schemas");
        } else {
            for (size_t i = 0; i < json_array_size(all) && st == GL_OK; i++) {
                size_t old = path_push_idx(sc, "allOf", i);
                st = expand(sc, json_array_get(all, i), acc, x);
                path_pop(sc, old);
            }
        }
    }
    active->n--;
    return st;
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (json_t *const *)a, y = (uintptr_t) * (json_t *const *)b;
    return x < y ? -1 : x > y;
}

// The flattened view of schema s (an object or boolean), cached by s and by the set of parts
// it merges, so synthesized {"allOf": [...]} of the same schemas share one view. NULL: error.
static struct view *view_get(struct sc *sc, json_t *s)
{
    uint8_t key[1 + sizeof(json_t *)];
    key[0] = 'P';
    memcpy(key + 1, &s, sizeof s);
    struct hent *e = ht_find(&sc->views, key, sizeof key);
    if (e)
        return e->p;
    struct view *v = view_new(sc);
    if (!v) {
        sc_nomem(sc);
        return NULL;
    }
    struct xp x;
    memset(&x, 0, sizeof x);
    gl_status st = expand(sc, s, v, &x);
    struct view *res = v;
    if (st == GL_OK && !view_set_parts(sc, v, &x.parts))
        st = sc_nomem(sc);
    if (st == GL_OK && !(x.keys.n == 1 && x.keys.p[0] == s)) {
        if (x.keys.n > 1)
            qsort(x.keys.p, x.keys.n, sizeof x.keys.p[0], ptr_cmp);
        size_t kl = 1 + x.keys.n * sizeof(json_t *);
        uint8_t *sk = gl_malloc(kl);
        struct hent *se = NULL;
        if (sk) {
            sk[0] = 'S';
            if (x.keys.n)
                memcpy(sk + 1, x.keys.p, kl - 1);
            se = ht_put(&sc->views, sk, kl);
        }
        gl_free(sk);
        if (!se) {
            st = sc_nomem(sc);
        } else if (se->p) {
            res = se->p;
        } else {
            se->p = v;
        }
    }
    xp_free(&x);
    if (st != GL_OK)
        return NULL;
    e = ht_put(&sc->views, key, sizeof key);
    if (!e) {
        sc_nomem(sc);
        return NULL;
    }
    e->p = res;
    return res;
}

// ---- a small validator: enum values against sibling keywords, oneOf disjointness ----

// JSON Schema equality: numbers by value (1 == 1.0), containers recursively.
static int val_equal(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!val_equal(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach(a, k, kl, x)
        {
            json_t *y = json_object_getn(b, k, kl);
            if (!y || !val_equal(x, y))
                return 0;
        }
        return 1;
    }
    return json_equal(a, b);
}

static int is_integral(json_t *v)
{
    if (json_is_integer(v))
        return 1;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        return floor(d) == d;
    }
    return 0;
}

static unsigned value_types(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        return T_NULL;
    case JSON_TRUE:
    case JSON_FALSE:
        return T_BOOL;
    case JSON_OBJECT:
        return T_OBJ;
    case JSON_ARRAY:
        return T_ARR;
    case JSON_STRING:
        return T_STR;
    default:
        return T_NUM | (is_integral(v) ? T_INT : 0u);
    }
}

static int64_t utf8_chars(const char *s, size_t n)
{
    int64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((uint8_t)s[i] & 0xC0) != 0x80;
    return c;
}

#define V_UNKNOWN (-1)
#define V_ERROR   (-2)
static int val_schema(struct sc *sc, json_t *s, json_t *x, int depth);

// val_view's phases: each returns what val_view does for the keywords of one kind -- 1 valid, 0
// invalid, V_UNKNOWN cannot tell, V_ERROR error set -- stopping at the first 0 or error.

// A string: length in code points, patterns (search), and formats we can check.
static int val_string(struct sc *sc, const struct view *v, json_t *x)
{
    int unknown = 0;
    const char *s = json_string_value(x);
    size_t n = json_string_length(x);
    int64_t c = utf8_chars(s, n);
    if (c < v->min_len || (v->max_len >= 0 && c > v->max_len))
        return 0;
    for (int i = 0; i < v->n_pat; i++) {
        int32_t re = sc_pattern(sc, v->pat[i]);
        if (re < 0)
            return V_ERROR;
        if (!gl_regex_match(sc_re(sc, re), s, n))
            return 0;
    }
    for (int i = 0; i < v->n_fmt; i++) {
        const struct fmt_def *d;
        if (!fmt_lookup(json_string_value(v->fmt[i]), &d))
            continue;
        if (!d->re) {
            unknown = 1;
            continue;
        }
        int32_t re = fmt_regex(sc, d);
        if (re < 0)
            return V_ERROR;
        if (!gl_regex_match(sc_re(sc, re), s, n) || (d->max_chars >= 0 && c > d->max_chars))
            return 0;
    }
    return unknown ? V_UNKNOWN : 1;
}

// A number: bounds, and multipleOf where it is exact (integral divisor and value below 2^53).
static int val_number(const struct view *v, json_t *x)
{
    double d = json_number_value(x);
    if (v->has_min && (d < v->nmin || (v->excl_min && d == v->nmin)))
        return 0;
    if (v->has_max && (d > v->nmax || (v->excl_max && d == v->nmax)))
        return 0;
    if (v->has_mult) {
        if (floor(v->mult) == v->mult && is_integral(x) && fabs(d) < SC_INT_LIMIT &&
            v->mult < SC_INT_LIMIT) {
            if ((int64_t)d % (int64_t)v->mult != 0)
                return 0;
        } else {
            return V_UNKNOWN;
        }
    }
    return 1;
}

// An object: size, required names, then each member's name (propertyNames) and value (the
// schemas key_side gives its key).
static int val_object(struct sc *sc, const struct view *v, json_t *x, int depth)
{
    int unknown = 0, r;
    int64_t n = (int64_t)json_object_size(x);
    if (n < v->min_props || (v->max_props >= 0 && n > v->max_props))
        return 0;
    for (size_t i = 0; v->required && i < json_array_size(v->required); i++) {
        json_t *k = json_array_get(v->required, i);
        if (!json_object_getn(x, json_string_value(k), json_string_length(k)))
            return 0;
    }
    const char *k;
    size_t kl;
    json_t *val;
    json_object_keylen_foreach(x, k, kl, val)
    {
        json_t *list[SC_MAX_LIST + 2];
        int nl = 0;
        if (v->pnames) {
            json_t *ks = json_stringn(k, kl);
            r = ks ? val_schema(sc, v->pnames, ks, depth + 1) : V_UNKNOWN;
            json_decref(ks);
            if (r == 0 || r == V_ERROR)
                return r;
            unknown |= r == V_UNKNOWN;
        }
        if (key_side(sc, v, k, kl, list, &nl, SC_MAX_LIST) != GL_OK)
            return V_ERROR;
        for (int i = 0; i < nl; i++) {
            r = val_schema(sc, list[i], val, depth + 1);
            if (r == 0 || r == V_ERROR)
                return r;
            unknown |= r == V_UNKNOWN;
        }
    }
    return unknown ? V_UNKNOWN : 1;
}

// An array: size, each item against prefixItems or items, then uniqueItems.
static int val_array(struct sc *sc, const struct view *v, json_t *x, int depth)
{
    int unknown = 0, r;
    int64_t n = (int64_t)json_array_size(x);
    if (n < v->min_items || (v->max_items >= 0 && n > v->max_items))
        return 0;
    size_t np = v->prefix ? json_array_size(v->prefix) : 0;
    for (size_t i = 0; i < json_array_size(x); i++) {
        json_t *s = i < np ? json_array_get(v->prefix, i) : v->items;
        r = val_schema(sc, s, json_array_get(x, i), depth + 1);
        if (r == 0 || r == V_ERROR)
            return r;
        unknown |= r == V_UNKNOWN;
    }
    if (v->unique)
        for (size_t i = 0; i < json_array_size(x); i++)
            for (size_t j = i + 1; j < json_array_size(x); j++)
                if (val_equal(json_array_get(x, i), json_array_get(x, j)))
                    return 0;
    return unknown ? V_UNKNOWN : 1;
}

// The applicators: each `not`, each if/then/else, and each anyOf (some member) and oneOf
// (exactly one member) list.
static int val_applicators(struct sc *sc, const struct view *v, json_t *x, int depth)
{
    int unknown = 0, r;
    for (int i = 0; i < v->n_not; i++) {
        r = val_schema(sc, v->nots[i], x, depth + 1);
        if (r == 1)
            return 0;
        if (r == V_ERROR)
            return r;
        unknown |= r == V_UNKNOWN;
    }
    for (int i = 0; i < v->n_if; i++) {
        r = val_schema(sc, v->ifs[i][0], x, depth + 1);
        if (r == V_ERROR)
            return r;
        if (r == V_UNKNOWN) {
            unknown = 1;
            continue;
        }
        r = val_schema(sc, v->ifs[i][r ? 1 : 2], x, depth + 1);
        if (r == 0 || r == V_ERROR)
            return r;
        unknown |= r == V_UNKNOWN;
    }
    for (int l = 0; l < v->n_anyof + v->n_oneof; l++) {
        json_t *arr = l < v->n_anyof ? v->anyof[l] : v->oneof[l - v->n_anyof];
        int matches = 0, unk = 0;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            r = val_schema(sc, json_array_get(arr, i), x, depth + 1);
            if (r == V_ERROR)
                return r;
            matches += r == 1;
            unk |= r == V_UNKNOWN;
        }
        if (l < v->n_anyof) {
            if (!matches && !unk)
                return 0;
            unknown |= !matches && unk;
        } else {
            if ((matches == 0 && !unk) || matches > 1)
                return 0;
            unknown |= unk;
        }
    }
    return unknown ? V_UNKNOWN : 1;
}

// 1 valid, 0 invalid, V_UNKNOWN cannot tell, V_ERROR error set.
static int val_view(struct sc *sc, const struct view *v, json_t *x, int depth)
{
    if (depth > 32)
        return V_UNKNOWN;
    if (v->never)
        return 0;
    unsigned t = value_types(x);
    if (!(t & v->types))
        return 0;
    if (v->enumv) {
        int found = 0;
        for (size_t i = 0; i < json_array_size(v->enumv) && !found; i++)
            found = val_equal(json_array_get(v->enumv, i), x);
        if (!found)
            return 0;
    }
    int r = 1;
    if (json_is_string(x))
        r = val_string(sc, v, x);
    else if (json_is_number(x))
        r = val_number(v, x);
    else if (json_is_object(x))
        r = val_object(sc, v, x, depth);
    else if (json_is_array(x))
        r = val_array(sc, v, x, depth);
    if (r == 0 || r == V_ERROR)
        return r;
    int unknown = r == V_UNKNOWN;
    r = val_applicators(sc, v, x, depth);
    if (r == 0 || r == V_ERROR)
        return r;
    return unknown || r == V_UNKNOWN ? V_UNKNOWN : 1;
}

static int val_schema(struct sc *sc, json_t *s, json_t *x, int depth)
{
    if (!s || json_is_true(s))
        return 1;
    if (json_is_false(s))
        return 0;
    struct view *v = view_get(sc, s);
    if (!v)
        return V_ERROR;
    return val_view(sc, v, x, depth);
}

// 1 when no byte string matches both regexes (breadth-first over pairs of DFA states, bounded);
// 0 when one does or the search ran out of budget.
static int regex_disjoint(struct gl_regex *a, struct gl_regex *b)
{
    enum { CAP = 4096 };
    uint32_t(*q)[2] = gl_malloc(CAP * sizeof *q);
    struct htab seen = {0};
    int res = 0;
    size_t head = 0, tail = 0;
    if (!q)
        return 0;
    q[tail][0] = gl_regex_start(a);
    q[tail++][1] = gl_regex_start(b);
    while (head < tail) {
        uint32_t sa = q[head][0], sb = q[head][1];
        head++;
        if (gl_regex_is_accept(a, sa) && gl_regex_is_accept(b, sb))
            goto done;
        for (int c = 0; c < 256; c++) {
            uint32_t pair[2] = {gl_regex_step(a, sa, (uint8_t)c), gl_regex_step(b, sb, (uint8_t)c)};
            if (pair[0] == GL_RE_DEAD || pair[1] == GL_RE_DEAD)
                continue;
            if (ht_find(&seen, pair, sizeof pair))
                continue;
            if (tail == CAP || !ht_put(&seen, pair, sizeof pair))
                goto done;
            q[tail][0] = pair[0];
            q[tail++][1] = pair[1];
        }
    }
    res = !gl_regex_overflowed(a) && !gl_regex_overflowed(b);
done:
    ht_free(&seen);
    gl_free(q);
    return res;
}

// ---- oneOf: provable disjointness of two branches ----

static unsigned view_types_eff(const struct view *v)
{
    unsigned t = v->types;
    if (v->never)
        return 0;
    if (v->enumv) {
        unsigned e = 0;
        for (size_t i = 0; i < json_array_size(v->enumv); i++)
            e |= value_types(json_array_get(v->enumv, i));
        t = types_and(t, e);
    }
    return t;
}

static int disjoint_views(struct sc *sc, const struct view *a, const struct view *b, int depth);

static int disjoint_schemas(struct sc *sc, json_t *x, json_t *y, int depth)
{
    if (!x || !y || json_is_true(x) || json_is_true(y))
        return 0;
    if (json_is_false(x) || json_is_false(y))
        return 1;
    struct view *a = view_get(sc, x), *b = a ? view_get(sc, y) : NULL;
    if (!a || !b)
        return V_ERROR;
    return disjoint_views(sc, a, b, depth + 1);
}

// The regexes a string must match under v (patterns, known formats); -1 on error.
static int string_regexes(struct sc *sc, const struct view *v, int32_t *out)
{
    int n = 0;
    for (int i = 0; i < v->n_pat; i++) {
        out[n] = sc_pattern(sc, v->pat[i]);
        if (out[n++] < 0)
            return -1;
    }
    for (int i = 0; i < v->n_fmt; i++) {
        const struct fmt_def *d;
        if (!fmt_lookup(json_string_value(v->fmt[i]), &d) || !d->re)
            continue;
        if ((out[n++] = fmt_regex(sc, d)) < 0)
            return -1;
    }
    return n;
}

// 1 when no key name is allowed by both closed objects (additionalProperties false): every
// declared name of one is refused by the other and their patterns match no common name.
// A name matching a pattern whose schema is false is refused there; a declared name is looked
// up as key_side does (its patterns not consulted: conservative). 0: not proven.
static int keys_disjoint(struct sc *sc, const struct view *a, const struct view *b)
{
    if (!json_is_false(a->addl) || !json_is_false(b->addl))
        return 0;
    for (int side = 0; side < 2; side++) {
        const struct view *p = side ? b : a, *q = side ? a : b;
        const char *k;
        size_t kl;
        json_t *x;
        if (p->props)
            json_object_keylen_foreach(p->props, k, kl, x)
            {
                json_t *lq[SC_MAX_LIST + 2];
                int nq = 0, closed = 0;
                if (json_is_false(x))
                    continue;
                if (key_side(sc, q, k, kl, lq, &nq, SC_MAX_LIST) != GL_OK)
                    return V_ERROR;
                for (int j = 0; j < nq; j++)
                    closed |= json_is_false(lq[j]);
                if (!closed)
                    return 0;
            }
    }
    const char *ka, *kb;
    size_t kal, kbl;
    json_t *xa, *xb;
    if (a->pprops && b->pprops)
        json_object_keylen_foreach(a->pprops, ka, kal, xa)
        {
            int32_t ra = sc_regex(sc, ka, kal, GL_RE_SEARCH);
            if (ra < 0)
                return V_ERROR;
            json_object_keylen_foreach(b->pprops, kb, kbl, xb)
            {
                int32_t rb = sc_regex(sc, kb, kbl, GL_RE_SEARCH);
                if (rb < 0)
                    return V_ERROR;
                if (!json_is_false(xa) && !json_is_false(xb) &&
                    !regex_disjoint(sc_re(sc, ra), sc_re(sc, rb)))
                    return 0;
            }
        }
    return 1;
}

// 1: no value satisfies both; 0: not proven; V_ERROR.
static int disjoint_views(struct sc *sc, const struct view *a, const struct view *b, int depth)
{
    if (depth > 8)
        return 0;
    unsigned ta = view_types_eff(a), tb = view_types_eff(b);
    if (!types_and(ta, tb))
        return 1;
    for (int side = 0; side < 2; side++) {
        const struct view *p = side ? b : a, *q = side ? a : b;
        if (!p->enumv)
            continue;
        int all_out = 1;
        for (size_t i = 0; i < json_array_size(p->enumv) && all_out; i++) {
            int r = val_view(sc, q, json_array_get(p->enumv, i), 0);
            if (r == V_ERROR)
                return r;
            all_out = r == 0 || val_view(sc, p, json_array_get(p->enumv, i), 0) == 0;
        }
        if (all_out)
            return 1;
    }
    unsigned common = types_and(ta, tb);
    if (common == T_OBJ) {
        for (int side = 0; side < 2; side++) {
            const struct view *p = side ? b : a, *q = side ? a : b;
            for (size_t i = 0; p->required && i < json_array_size(p->required); i++) {
                json_t *r = json_array_get(p->required, i);
                const char *k = json_string_value(r);
                size_t kl = json_string_length(r);
                json_t *lp[SC_MAX_LIST + 2], *lq[SC_MAX_LIST + 2];
                int np = 0, nq = 0;
                if (key_side(sc, p, k, kl, lp, &np, SC_MAX_LIST) != GL_OK ||
                    key_side(sc, q, k, kl, lq, &nq, SC_MAX_LIST) != GL_OK)
                    return V_ERROR;
                // q closed for this key: every q-object lacks it, every p-object has it.
                for (int j = 0; j < nq; j++)
                    if (json_is_false(lq[j]))
                        return 1;
                for (int x = 0; x < np; x++)
                    for (int y = 0; y < nq; y++) {
                        int d = disjoint_schemas(sc, lp[x], lq[y], depth);
                        if (d != 0)
                            return d;
                    }
            }
        }
    }
    // Two closed objects with no key name in common share only {}; one needing a key rules
    // that out.
    if (common == T_OBJ && (a->min_props > 0 || json_array_size(a->required) > 0 ||
                            b->min_props > 0 || json_array_size(b->required) > 0)) {
        int d = keys_disjoint(sc, a, b);
        if (d != 0)
            return d;
    }
    if (common == T_NUM || common == T_INT) {
        if (a->has_max && b->has_min &&
            (a->nmax < b->nmin || (a->nmax == b->nmin && (a->excl_max || b->excl_min))))
            return 1;
        if (b->has_max && a->has_min &&
            (b->nmax < a->nmin || (b->nmax == a->nmin && (b->excl_max || a->excl_min))))
            return 1;
    }
    if (common == T_STR) {
        if ((a->max_len >= 0 && a->max_len < b->min_len) ||
            (b->max_len >= 0 && b->max_len < a->min_len))
            return 1;
        // two patterns / formats no string satisfies together (e.g. ^success$ / ^fail$)
        int32_t ra[2 * SC_MAX_LIST], rb[2 * SC_MAX_LIST];
        int na = string_regexes(sc, a, ra), nb = na < 0 ? -1 : string_regexes(sc, b, rb);
        if (nb < 0)
            return V_ERROR;
        for (int i = 0; i < na; i++)
            for (int j = 0; j < nb; j++)
                if (regex_disjoint(sc_re(sc, ra[i]), sc_re(sc, rb[j])))
                    return 1;
    }
    if (common == T_ARR) {
        if ((a->max_items >= 0 && a->max_items < b->min_items) ||
            (b->max_items >= 0 && b->max_items < a->min_items))
            return 1;
    }
    // A value of p satisfies a member of each of p's anyOf/oneOf lists: when every member of
    // one list is disjoint from q, so is p (`oneOf: [{oneOf: [string, array]}, object]`).
    for (int side = 0; side < 2 && depth < 4; side++) {
        const struct view *p = side ? b : a, *q = side ? a : b;
        for (int l = 0; l < p->n_anyof + p->n_oneof; l++) {
            json_t *list = l < p->n_anyof ? p->anyof[l] : p->oneof[l - p->n_anyof];
            int all = json_array_size(list) > 0;
            for (size_t i = 0; all && i < json_array_size(list); i++) {
                json_t *m = json_array_get(list, i);
                struct view *mv = json_is_object(m) ? view_get(sc, m) : NULL;
                if (json_is_object(m) && !mv)
                    return V_ERROR;
                int d = json_is_false(m) ? 1 : mv ? disjoint_views(sc, mv, q, depth + 1) : 0;
                if (d == V_ERROR)
                    return d;
                all = d == 1;
            }
            if (all)
                return 1;
        }
    }
    return 0;
}

// ---- node helpers ----

static int32_t sc_add(struct sc *sc, const struct gl_gnode *n)
{
    return gl_gir_add(sc->b, n); // -1 (SC_FAIL) with the error set by the builder
}

static void *sc_alloc(struct sc *sc, size_t n)
{
    void *p = gl_arena_alloc(sc->b->ir->arena, n ? n : 1);
    if (!p)
        sc_nomem(sc);
    return p;
}

static int32_t sc_alt(struct sc *sc, const int32_t *kids, int32_t n)
{
    if (n == 0)
        return SC_NEVER;
    if (n == 1)
        return kids[0];
    return gl_gir_add_list(sc->b, GN_ALT, kids, n);
}

// A node whose language is empty (ALT of nothing): a declared key that may not appear while
// other keys are open to additionalProperties/patternProperties.
static int32_t sc_never_node(struct sc *sc)
{
    if (sc->never_node < 0)
        sc->never_node = gl_gir_add_list(sc->b, GN_ALT, NULL, 0);
    return sc->never_node;
}

static int32_t sc_null(struct sc *sc)
{
    if (sc->null_node < 0)
        sc->null_node = gl_gir_add_bytes(sc->b, "null", 4);
    return sc->null_node;
}

static int32_t sc_bool(struct sc *sc)
{
    if (sc->bool_node < 0) {
        int32_t k[2] = {gl_gir_add_bytes(sc->b, "true", 4), gl_gir_add_bytes(sc->b, "false", 5)};
        if (k[0] < 0 || k[1] < 0)
            return SC_FAIL;
        sc->bool_node = gl_gir_add_list(sc->b, GN_ALT, k, 2);
    }
    return sc->bool_node;
}

int32_t gl_schema_any_value(struct gl_gir_builder *b)
{
    int32_t r = gl_gir_reserve(b);
    if (r < 0)
        return -1;
    struct gl_gnode n;
    int32_t k[6];
    k[0] = gl_gir_add_bytes(b, "null", 4);
    k[1] = gl_gir_add_bytes(b, "true", 4);
    k[2] = gl_gir_add_bytes(b, "false", 5);
    memset(&n, 0, sizeof n);
    n.kind = GN_JNUMBER;
    k[3] = gl_gir_add(b, &n);
    memset(&n, 0, sizeof n);
    n.kind = GN_JSTRING;
    n.u.str.max_chars = -1;
    k[4] = gl_gir_add(b, &n);
    memset(&n, 0, sizeof n);
    n.kind = GN_JOBJECT;
    n.u.obj.additional = r;
    n.u.obj.max_props = -1;
    int32_t obj = gl_gir_add(b, &n);
    memset(&n, 0, sizeof n);
    n.kind = GN_JARRAY;
    n.u.arr.items = r;
    n.u.arr.max_items = -1;
    k[5] = gl_gir_add(b, &n);
    for (int i = 0; i < 6; i++)
        if (k[i] < 0)
            return -1;
    if (obj < 0)
        return -1;
    int32_t kids[7] = {obj, k[5], k[4], k[3], k[0], k[1], k[2]};
    int32_t alt = gl_gir_add_list(b, GN_ALT, kids, 7);
    if (alt < 0)
        return -1;
    struct gl_gnode copy = b->ir->nodes[alt];
    gl_gir_set(b, r, &copy);
    return r;
}

// Any value; in raw mode (an ATEM parameter value) a string is raw text.
static int32_t sc_any(struct sc *sc)
{
    if (sc->any < 0)
        sc->any = gl_schema_any_value(sc->b);
    if (!sc->raw || sc->any < 0)
        return sc->any;
    if (sc->any_raw < 0) {
        struct gl_gnode n;
        memset(&n, 0, sizeof n);
        n.kind = GN_JSTRING;
        n.u.str.max_chars = -1;
        n.u.str.raw = 1;
        int32_t kids[2] = {gl_gir_add(sc->b, &n), sc->any};
        if (kids[0] < 0)
            return SC_FAIL;
        sc->any_raw = gl_gir_add_list(sc->b, GN_ALT, kids, 2);
    }
    return sc->any_raw;
}

static int32_t clamp32(int64_t x)
{
    return x > INT32_MAX ? INT32_MAX : (int32_t)x;
}

static int32_t compile_schema(struct sc *sc, json_t *s);

// Compiles a child value (a property, item, ...) one container level down, never raw.
static int32_t compile_child(struct sc *sc, json_t *s, const char *kw, const char *key, size_t kl)
{
    size_t old = path_push(sc, kw, strlen(kw));
    if (key)
        path_push(sc, key, kl);
    int raw = sc->raw;
    sc->raw = 0;
    sc->cdepth++;
    int32_t r = compile_schema(sc, s);
    sc->cdepth--;
    sc->raw = raw;
    path_pop(sc, old);
    return r;
}

// ---- literals (enum / const) ----

static int32_t lit_number(struct sc *sc, json_t *x)
{
    double d = json_number_value(x);
    if (json_is_integer(x) && fabs(d) > SC_INT_LIMIT) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(x));
        return gl_gir_add_bytes(sc->b, buf, (size_t)n);
    }
    struct gl_gnode n;
    memset(&n, 0, sizeof n);
    n.kind = GN_JNUMBER;
    n.u.num.has_min = n.u.num.has_max = 1;
    n.u.num.min = n.u.num.max = d;
    return sc_add(sc, &n);
}

// One JSTRING whose decoded value is one of the given strings (full match).
static int32_t lit_names(struct sc *sc, json_t **vals, size_t n, struct gl_gstr *str);

static int32_t lit_strings(struct sc *sc, json_t **vals, size_t n)
{
    if (!n)
        return SC_NEVER;
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t c = utf8_chars(json_string_value(vals[i]), json_string_length(vals[i]));
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    int32_t re;
    if (n == 1) {
        re = sc_regex(sc, json_string_value(vals[0]), json_string_length(vals[0]), GL_RE_LITERAL);
    } else {
        size_t cap = 16;
        for (size_t i = 0; i < n; i++)
            cap += 4 * json_string_length(vals[i]) + 8;
        char *src = gl_malloc(cap);
        if (!src)
            return sc_nomem(sc), SC_FAIL;
        size_t len = 0;
        memcpy(src, "(?:", 3);
        len = 3;
        for (size_t i = 0; i < n; i++) {
            if (i)
                src[len++] = '|';
            len += gl_regex_escape(json_string_value(vals[i]), json_string_length(vals[i]),
                                   src + len, cap - len);
            if (len + 4 > cap)
                break;
        }
        src[len++] = ')';
        src[len] = 0;
        GL_ASSERT(len < cap);
        re = sc_regex(sc, src, len, 0);
        gl_free(src);
    }
    if (re < 0)
        return SC_FAIL;
    int32_t *res = sc_alloc(sc, sizeof(int32_t));
    if (!res)
        return SC_FAIL;
    res[0] = re;
    struct gl_gnode nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = GN_JSTRING;
    nd.u.str.regexes = res;
    nd.u.str.n_regex = 1;
    nd.u.str.min_chars = clamp32(lo);
    nd.u.str.max_chars = clamp32(hi);
    nd.u.str.raw = (uint8_t)sc->raw;
    if (lit_names(sc, vals, n, &nd.u.str) == SC_FAIL)
        return SC_FAIL;
    return sc_add(sc, &nd);
}

static int32_t lit_value(struct sc *sc, json_t *x);

static int bytes_cmp(const void *a, const void *b)
{
    const struct gl_gbytes *p = a, *q = b;
    uint32_t n = p->len < q->len ? p->len : q->len;
    int c = n ? memcmp(p->p, q->p, n) : 0;
    return c ? c : (p->len > q->len) - (p->len < q->len);
}

// The strings vals[0..n) as the node's names (ir.h): sorted, distinct. 0 or SC_FAIL.
static int32_t lit_names(struct sc *sc, json_t **vals, size_t n, struct gl_gstr *str)
{
    struct gl_gbytes *nm = sc_alloc(sc, n * sizeof *nm);
    if (!nm)
        return SC_FAIL;
    for (size_t i = 0; i < n; i++) {
        nm[i].len = (uint32_t)json_string_length(vals[i]);
        nm[i].p = gl_arena_memdup(sc->b->ir->arena, json_string_value(vals[i]),
                                  nm[i].len ? nm[i].len : 1);
        if (!nm[i].p)
            return sc_nomem(sc), SC_FAIL;
    }
    qsort(nm, n, sizeof *nm, bytes_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || bytes_cmp(&nm[k - 1], &nm[i]))
            nm[k++] = nm[i];
    str->names = nm;
    str->n_names = (int32_t)k;
    return 0;
}

static int prop_cmp(const void *a, const void *b)
{
    return bytes_cmp(&((const struct gl_gprop *)a)->name, &((const struct gl_gprop *)b)->name);
}

static int32_t lit_container(struct sc *sc, json_t *x)
{
    int raw = sc->raw;
    sc->raw = 0;
    struct gl_gnode n;
    memset(&n, 0, sizeof n);
    int32_t r = SC_FAIL;
    if (json_is_object(x)) {
        size_t np = json_object_size(x);
        struct gl_gprop *props = sc_alloc(sc, np * sizeof *props);
        if (!props)
            goto out;
        size_t i = 0;
        const char *k;
        size_t kl;
        json_t *v;
        json_object_keylen_foreach(x, k, kl, v)
        {
            props[i].name.p = gl_arena_memdup(sc->b->ir->arena, k, kl ? kl : 1);
            props[i].name.len = (uint32_t)kl;
            props[i].required = 1;
            props[i].value = lit_value(sc, v);
            if (!props[i].name.p || props[i].value < 0)
                goto out;
            i++;
        }
        qsort(props, np, sizeof *props, prop_cmp);
        n.kind = GN_JOBJECT;
        n.u.obj.props = props;
        n.u.obj.n_props = (int32_t)np;
        n.u.obj.additional = -1;
        n.u.obj.min_props = (int32_t)np;
        n.u.obj.max_props = (int32_t)np;
    } else {
        size_t ni = json_array_size(x);
        int32_t *pre = sc_alloc(sc, ni * sizeof *pre);
        if (!pre)
            goto out;
        for (size_t i = 0; i < ni; i++)
            if ((pre[i] = lit_value(sc, json_array_get(x, i))) < 0)
                goto out;
        n.kind = GN_JARRAY;
        n.u.arr.prefix = pre;
        n.u.arr.n_prefix = (int32_t)ni;
        n.u.arr.items = -1;
        n.u.arr.min_items = n.u.arr.max_items = (int32_t)ni;
    }
    r = sc_add(sc, &n);
out:
    sc->raw = raw;
    return r;
}

static int32_t lit_value(struct sc *sc, json_t *x)
{
    if (sc_tick(sc) != GL_OK)
        return SC_FAIL;
    switch (json_typeof(x)) {
    case JSON_NULL:
        return sc_null(sc);
    case JSON_TRUE:
        return gl_gir_add_bytes(sc->b, "true", 4);
    case JSON_FALSE:
        return gl_gir_add_bytes(sc->b, "false", 5);
    case JSON_STRING:
        if (sc->raw && memchr(json_string_value(x), '<', json_string_length(x)))
            return SC_NEVER;
        return lit_strings(sc, &x, 1);
    case JSON_INTEGER:
    case JSON_REAL:
        return lit_number(sc, x);
    default:
        return lit_container(sc, x);
    }
}

// The enum values that satisfy every other keyword of v, as an ALT of literals.
static int32_t compile_enum(struct sc *sc, const struct view *v)
{
    size_t n = json_array_size(v->enumv);
    json_t **strs = gl_malloc((n ? n : 1) * sizeof *strs);
    int32_t *kids = gl_malloc((n + 1) * sizeof *kids);
    int32_t r = SC_FAIL;
    size_t ns = 0;
    int32_t nk = 0;
    if (!strs || !kids) {
        sc_nomem(sc);
        goto out;
    }
    struct view rest = *v; // the siblings (x is in the enum by construction)
    rest.enumv = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v->enumv, i);
        int dup = 0;
        for (size_t j = 0; j < i && !dup && n <= 256; j++)
            dup = val_equal(json_array_get(v->enumv, j), x);
        if (dup)
            continue;
        int ok = val_view(sc, &rest, x, 0);
        if (ok == V_ERROR)
            goto out;
        if (ok == V_UNKNOWN) {
            if (sc_unsup(sc, "enum", "cannot check the values against the sibling keywords") !=
                GL_OK)
                goto out;
            ok = 1;
        }
        if (!ok)
            continue;
        if (json_is_string(x)) {
            if (!(sc->raw && memchr(json_string_value(x), '<', json_string_length(x))))
                strs[ns++] = x;
            continue;
        }
        int32_t k = lit_value(sc, x);
        if (k == SC_FAIL)
            goto out;
        if (k != SC_NEVER)
            kids[nk++] = k;
    }
    if (ns) {
        int32_t k = lit_strings(sc, strs, ns);
        if (k == SC_FAIL)
            goto out;
        kids[nk++] = k;
    }
    r = sc_alt(sc, kids, nk);
out:
    gl_free(strs);
    gl_free(kids);
    return r;
}

// ---- typed nodes ----

static int32_t compile_string(struct sc *sc, const struct view *v)
{
    int32_t res[2 * SC_MAX_LIST];
    int nr = 0;
    int64_t max_len = v->max_len;
    for (int i = 0; i < v->n_fmt; i++) {
        const struct fmt_def *d;
        const char *name = json_string_value(v->fmt[i]);
        if (!fmt_lookup(name, &d))
            continue; // unknown formats are annotations
        if (!d->re) {
            size_t old = path_push(sc, "format", 6);
            gl_status st = sc_unsup(sc, "format", "this format is not enforced");
            path_pop(sc, old);
            if (st != GL_OK)
                return SC_FAIL;
            continue;
        }
        int32_t re = fmt_regex(sc, d);
        if (re < 0)
            return SC_FAIL;
        res[nr++] = re;
        if (d->max_chars >= 0 && (max_len < 0 || max_len > d->max_chars))
            max_len = d->max_chars;
    }
    for (int i = 0; i < v->n_pat; i++) {
        size_t old = path_push(sc, "pattern", 7);
        int32_t re = sc_pattern(sc, v->pat[i]);
        path_pop(sc, old);
        if (re < 0)
            return SC_FAIL;
        res[nr++] = re;
    }
    if (max_len >= 0 && max_len < v->min_len)
        return SC_NEVER;
    struct gl_gnode n;
    memset(&n, 0, sizeof n);
    n.kind = GN_JSTRING;
    if (nr) {
        int32_t *r = sc_alloc(sc, (size_t)nr * sizeof *r);
        if (!r)
            return SC_FAIL;
        memcpy(r, res, (size_t)nr * sizeof *r);
        n.u.str.regexes = r;
        n.u.str.n_regex = nr;
    }
    n.u.str.min_chars = clamp32(v->min_len);
    n.u.str.max_chars = max_len < 0 ? -1 : clamp32(max_len);
    n.u.str.raw = (uint8_t)sc->raw;
    return sc_add(sc, &n);
}

static int mult_scale(double m, int *s_out, double *a_out);
static char *mult_regex(double m, int integer, int nonneg);

// compile_number's bounds into g: integers get exact inclusive bounds within 2^53 (a wider bound
// narrowed, an unrepresentable range refused); other numbers keep theirs with the exclusive
// flags. 0, SC_NEVER (an empty range) or SC_FAIL.
static int32_t num_bounds(struct sc *sc, const struct view *v, struct gl_gnum *g)
{
    double lo = -HUGE_VAL, hi = HUGE_VAL;
    if (g->integer) {
        if (v->has_min)
            lo = v->excl_min ? floor(v->nmin) + 1 : ceil(v->nmin);
        if (v->has_max)
            hi = v->excl_max ? ceil(v->nmax) - 1 : floor(v->nmax);
        if (lo > hi)
            return SC_NEVER;
        // Exact integer bounds within 2^53: a wider bound is narrowed (rejecting only values
        // beyond 2^53, never accepting an invalid one); an unrepresentable range is refused.
        if (lo > SC_INT_LIMIT || hi < -SC_INT_LIMIT) {
            size_t old = path_push(sc, lo > SC_INT_LIMIT ? "minimum" : "maximum", 7);
            gl_status st = gl_err_set(sc->err, GL_E_UNSUPPORTED,
                                      "grammar: unsupported keyword '%s' at %s: integer bound "
                                      "beyond 2^53",
                                      lo > SC_INT_LIMIT ? "minimum" : "maximum", sc_ptr(sc));
            path_pop(sc, old);
            (void)st;
            return SC_FAIL;
        }
        if (v->has_min) {
            g->has_min = 1;
            g->min = lo < -SC_INT_LIMIT ? -SC_INT_LIMIT : lo;
        }
        if (v->has_max) {
            g->has_max = 1;
            g->max = hi > SC_INT_LIMIT ? SC_INT_LIMIT : hi;
        }
    } else {
        g->has_min = v->has_min;
        g->has_max = v->has_max;
        g->excl_min = v->excl_min;
        g->excl_max = v->excl_max;
        g->min = v->nmin;
        g->max = v->nmax;
        if (v->has_min && v->has_max &&
            (v->nmin > v->nmax || (v->nmin == v->nmax && (v->excl_min || v->excl_max))))
            return SC_NEVER;
    }
    return 0;
}

// The multiples first * m .. last * m, one exact GN_JNUMBER each (any spelling of each value),
// as a GN_ALT; SC_FAIL.
static int32_t num_enumerate(struct sc *sc, double first, double last, double m)
{
    int32_t nk = (int32_t)(last - first) + 1;
    int32_t *kids = gl_malloc((size_t)nk * sizeof *kids);
    if (!kids)
        return sc_nomem(sc), SC_FAIL;
    for (int32_t i = 0; i < nk; i++) {
        struct gl_gnode n;
        memset(&n, 0, sizeof n);
        n.kind = GN_JNUMBER;
        n.u.num.has_min = n.u.num.has_max = 1;
        n.u.num.min = n.u.num.max = (first + i) * m;
        kids[i] = sc_add(sc, &n);
        if (kids[i] < 0) {
            gl_free(kids);
            return SC_FAIL;
        }
    }
    int32_t r = sc_alt(sc, kids, nk);
    gl_free(kids);
    return r;
}

// multipleOf m (not 1) on the bounded number g. 1 with *out the result (node, SC_NEVER or
// SC_FAIL): the multiples enumerated (bounded integers, under SC_MAX_ENUMERATE) or a regex over
// the number's text (unbounded, or only minimum 0). 0 when the plain number node follows: every
// integer is a multiple, or g takes the matcher's decimal grid, or (lenient) unsupported.
static int num_multiple(struct sc *sc, struct gl_gnum *g, double m, int32_t *out)
{
    double inv = 1 / m;
    if (g->integer && inv < SC_INT_LIMIT && fabs(inv - round(inv)) < 1e-9)
        return 0; // m = 1/k: every integer is a multiple
    if (floor(m) == m && m < SC_INT_LIMIT && g->has_min && g->has_max) {
        // Bounded integers: enumerate the multiples (exact, any spelling of each value).
        double first = ceil((g->integer ? g->min : g->min) / m), last = floor(g->max / m);
        if (!g->integer) {
            if (g->excl_min && first * m == g->min)
                first += 1;
            if (g->excl_max && last * m == g->max)
                last -= 1;
        }
        if (last < first) {
            *out = SC_NEVER;
            return 1;
        }
        if (last - first < SC_MAX_ENUMERATE) {
            *out = num_enumerate(sc, first, last, m);
            return 1;
        }
    }
    // Unbounded (or only minimum 0): the multiples as a regex over the number's text.
    int nonneg = g->has_min && !g->excl_min && g->min == 0 && !g->has_max;
    char *rx = (!g->has_min && !g->has_max) || nonneg ? mult_regex(m, g->integer, nonneg) : NULL;
    if (rx) {
        int32_t re = sc_regex(sc, rx, strlen(rx), 0);
        gl_free(rx);
        if (re < 0) {
            *out = SC_FAIL;
            return 1;
        }
        struct gl_gnode n;
        memset(&n, 0, sizeof n);
        n.kind = GN_REGEX;
        n.u.regex.re = re;
        *out = sc_add(sc, &n);
        return 1;
    }
    // Any other bound: the matcher's decimal grid (ir.h gl_gnum.mult_a), exact.
    int gs;
    double ga;
    if ((g->has_min || g->has_max) && mult_scale(m, &gs, &ga) && (gs == 0 || !g->integer)) {
        g->mult_a = (uint32_t)ga;
        g->mult_s = (uint8_t)gs;
        return 0;
    }
    size_t old = path_push(sc, "multipleOf", 10);
    gl_status st = sc_unsup(sc, "multipleOf",
                            "only a / 10^s (a < 10^6, s <= 6) with a minimum or maximum, 1, "
                            "or a / 10^s with a = 2^i 5^j <= 1000 unbounded or with minimum "
                            "0");
    path_pop(sc, old);
    if (st != GL_OK) {
        *out = SC_FAIL;
        return 1;
    }
    return 0;
}

// A number view (integer: only integers) to a node: bounds, then multipleOf, then the plain
// GN_JNUMBER (or, for strict integers without bounds, the integer regex).
static int32_t compile_number(struct sc *sc, const struct view *v, int integer)
{
    struct gl_gnum g;
    memset(&g, 0, sizeof g);
    g.integer = (uint8_t)integer;
    if (v->has_mult && floor(v->mult) == v->mult && v->mult == 1)
        g.integer = 1;
    int32_t r = num_bounds(sc, v, &g);
    if (r != 0)
        return r;
    if (v->has_mult && v->mult != 1 && num_multiple(sc, &g, v->mult, &r))
        return r;
    struct gl_gnode n;
    memset(&n, 0, sizeof n);
    if (g.integer && sc->strict_int && !g.has_min && !g.has_max) {
        static const char k_int[] = "-?(?:0|[1-9][0-9]*)";
        int32_t re = sc_regex(sc, k_int, sizeof k_int - 1, 0);
        if (re < 0)
            return SC_FAIL;
        n.kind = GN_REGEX;
        n.u.regex.re = re;
        return sc_add(sc, &n);
    }
    n.kind = GN_JNUMBER;
    n.u.num = g;
    return sc_add(sc, &n);
}

// names that a `not: {required: [k]}` forbids
struct forbid {
    json_t *names[SC_MAX_LIST];
    int n;
};

static int forbidden(const struct forbid *f, const char *k, size_t kl)
{
    for (int i = 0; f && i < f->n; i++)
        if (json_string_length(f->names[i]) == kl &&
            memcmp(json_string_value(f->names[i]), k, kl) == 0)
            return 1;
    return 0;
}

// ---- objects: compile_object and its phases ----
//
// Each phase returns 0 to go on, or the object's result: SC_FAIL (error set in sc->err) or
// SC_NEVER (no object satisfies the view).

// The object being compiled: the view, the names a `not: {required}` forbids, and what the
// phases build for the GN_JOBJECT node.
struct objc {
    const struct view *v;
    const struct forbid *fb;
    size_t np, nreq;               // declared properties, required names (counts)
    struct gl_gprop *props;        // [np + nreq + fb->n] capacity; n used
    int32_t n;                     //
    int32_t additional;            // node for undeclared keys; -1: none may appear
    int32_t pn_re, pn_value;       // propertyNames' one pattern and its value node; -1: none
    int open;                      // an undeclared key may appear
    struct gl_gpattern_prop *pats; // [npat]: patternProperties (or propertyNames' pattern)
    int32_t npat;                  //
    int32_t *order;                // [n] declaration order for ordered_keys, else NULL
};

// One candidate name: its key, the schemas its value must satisfy (list[0..nl)), and whether it
// is required.
struct objname {
    const char *k;
    size_t kl;
    json_t *list[2 * SC_MAX_LIST + 4];
    int nl;
    int req;
};

enum { OBJ_NAME, OBJ_SKIP, OBJ_END, OBJ_ERR };

// The value node of undeclared keys (o->additional): additionalProperties, absent meaning any
// value unless opts->closed_objects. A schema that accepts nothing becomes -1 (no such key).
static int32_t obj_additional(struct sc *sc, struct objc *o)
{
    const struct view *v = o->v;
    int32_t additional;
    if (!v->addl && sc->c->opts && sc->c->opts->closed_objects) {
        additional = SC_NEVER; // vLLM's closed default (grammar.h closed_objects)
    } else if (!v->addl || json_is_true(v->addl)) {
        additional = sc_any(sc) == SC_FAIL ? SC_FAIL : sc->any;
    } else {
        additional = compile_child(sc, v->addl, "additionalProperties", NULL, 0);
    }
    if (additional == SC_FAIL)
        return SC_FAIL;
    o->additional = additional == SC_NEVER ? -1 : additional;
    return 0;
}

// propertyNames with one pattern: undeclared keys become that patternProperty (o->pn_re, its
// value the former o->additional); declared names that fail it cannot appear. {type: string}
// alone constrains nothing; other forms are unsupported.
static int32_t obj_property_names(struct sc *sc, struct objc *o)
{
    const struct view *v = o->v;
    if (!v->pnames)
        return 0;
    struct view *pv = view_get(sc, v->pnames);
    if (!pv)
        return SC_FAIL;
    struct view t = *pv;
    t.types = T_ALL;
    t.n_pat = 0;
    if (!(pv->types & T_STR) || pv->never)
        return SC_NEVER; // no key is valid: only {} -- approximated as no object (restriction)
    if (view_is_empty(&t) && pv->n_pat == 1 && !v->pprops) {
        size_t old = path_push(sc, "propertyNames", 13);
        o->pn_re = sc_pattern(sc, pv->pat[0]);
        path_pop(sc, old);
        if (o->pn_re < 0)
            return SC_FAIL;
        o->pn_value = o->additional;
        o->additional = -1;
    } else if (!(view_is_empty(&t) && pv->n_pat == 0)) {
        size_t old = path_push(sc, "propertyNames", 13);
        gl_status st = sc_unsup(sc, "propertyNames", "only {type: string} or one pattern");
        path_pop(sc, old);
        if (st != GL_OK)
            return SC_FAIL;
    }
    return 0;
}

// 1 when o->props already holds the name k[0..kl).
static int obj_has(const struct objc *o, const char *k, size_t kl)
{
    int dup = 0;
    for (int32_t j = 0; j < o->n && !dup; j++)
        dup = o->props[j].name.len == kl && memcmp(o->props[j].name.p, k, kl) == 0;
    return dup;
}

// The idx-th candidate name into *nm: declared properties (declaration order, *it walks them),
// then required names not declared, then names a `not: {required}` forbids. OBJ_SKIP for a name
// already listed, OBJ_END past the last, OBJ_ERR with the error set.
static int obj_name(struct sc *sc, const struct objc *o, void **it, size_t idx, struct objname *nm)
{
    const struct view *v = o->v;
    nm->req = 0;
    nm->nl = 0;
    if (*it) {
        nm->k = json_object_iter_key(*it);
        nm->kl = json_object_iter_key_len(*it);
        json_t *ps = json_object_iter_value(*it);
        *it = json_object_iter_next(v->props, *it);
        nm->list[nm->nl++] = ps;
        // draft 3: {"required": true} inside the property schema
        if (json_is_object(ps) && json_is_true(json_object_get(ps, "required")))
            nm->req = 1;
        if (v->pprops) {
            // the property also satisfies every patternProperties schema it matches
            struct view tmp = *v;
            tmp.props = NULL;
            tmp.addl = NULL;
            if (key_side(sc, &tmp, nm->k, nm->kl, nm->list, &nm->nl, 2 * SC_MAX_LIST) != GL_OK)
                return OBJ_ERR;
        }
    } else if (idx < o->np + o->nreq) {
        json_t *rq = json_array_get(v->required, idx - o->np);
        nm->k = json_string_value(rq);
        nm->kl = json_string_length(rq);
        if (v->props && json_object_getn(v->props, nm->k, nm->kl))
            return OBJ_SKIP;
        if (obj_has(o, nm->k, nm->kl))
            return OBJ_SKIP;
        if (key_side(sc, v, nm->k, nm->kl, nm->list, &nm->nl, 2 * SC_MAX_LIST) != GL_OK)
            return OBJ_ERR;
        if (nm->nl == 0) // additionalProperties: true, or absent (any value)
            nm->list[nm->nl++] = json_true();
    } else if (o->fb && idx < o->np + o->nreq + (size_t)o->fb->n) {
        json_t *name = o->fb->names[idx - o->np - o->nreq];
        nm->k = json_string_value(name);
        nm->kl = json_string_length(name);
        if (obj_has(o, nm->k, nm->kl))
            return OBJ_SKIP;
        nm->list[nm->nl++] = json_false();
    } else {
        return OBJ_END;
    }
    if (idx >= o->np && idx < o->np + o->nreq)
        nm->req = 1;
    for (size_t j = 0; !nm->req && v->required && j < json_array_size(v->required); j++) {
        json_t *rq = json_array_get(v->required, j);
        nm->req =
            json_string_length(rq) == nm->kl && memcmp(json_string_value(rq), nm->k, nm->kl) == 0;
    }
    return OBJ_NAME;
}

// Compiles one candidate's value (the allOf of its list) and appends it to o->props. A name that
// propertyNames or `not: {required}` rules out, or whose value accepts nothing, is dropped when
// optional (kept as a never node while undeclared keys may appear, so it is not taken for one)
// and makes the object SC_NEVER when required.
static int32_t obj_place(struct sc *sc, struct objc *o, const struct objname *nm)
{
    int32_t val;
    if (o->pn_re >= 0 && !gl_regex_match(sc_re(sc, o->pn_re), nm->k, nm->kl))
        return nm->req ? SC_NEVER : 0;
    if (forbidden(o->fb, nm->k, nm->kl)) {
        val = SC_NEVER;
    } else {
        json_t *s = synth_all(sc, nm->list, nm->nl);
        val = compile_child(sc, s ? s : json_true(), "properties", nm->k, nm->kl);
        if (val == SC_FAIL)
            return SC_FAIL;
    }
    if (val == SC_NEVER) {
        if (nm->req)
            return SC_NEVER;
        if (!o->open)
            return 0; // the key cannot appear anyway
        val = sc_never_node(sc);
        if (val < 0)
            return SC_FAIL;
    }
    struct gl_gprop *p = &o->props[o->n];
    p->name.p = gl_arena_memdup(sc->b->ir->arena, nm->k, nm->kl ? nm->kl : 1);
    if (!p->name.p) {
        sc_nomem(sc);
        return SC_FAIL;
    }
    p->name.len = (uint32_t)nm->kl;
    p->value = val;
    p->required = (uint8_t)nm->req;
    o->n++;
    return 0;
}

// The named properties (o->props[0..n)), in candidate order.
static int32_t obj_properties(struct sc *sc, struct objc *o)
{
    void *it = o->v->props ? json_object_iter(o->v->props) : NULL;
    for (size_t idx = 0;; idx++) {
        struct objname nm;
        int got = obj_name(sc, o, &it, idx, &nm);
        if (got == OBJ_END)
            return 0;
        if (got == OBJ_ERR)
            return SC_FAIL;
        if (got == OBJ_SKIP)
            continue;
        int32_t r = obj_place(sc, o, &nm);
        if (r != 0)
            return r;
    }
}

// The pattern-keyed values (o->pats[0..npat)): propertyNames' pattern, or patternProperties
// (search regexes, declaration order). The matcher gives an undeclared key the first pattern it
// matches; JSON Schema wants every matching pattern. Equal only when patterns with different
// schemas never share a key, so any other pair is unsupported.
static int32_t obj_patterns(struct sc *sc, struct objc *o)
{
    const struct view *v = o->v;
    if (o->pn_value >= 0) {
        o->pats = sc_alloc(sc, sizeof *o->pats);
        if (!o->pats)
            return SC_FAIL;
        o->pats[0].re = o->pn_re;
        o->pats[0].value = o->pn_value;
        o->npat = 1;
    }
    if (v->pprops) {
        o->pats = sc_alloc(sc, json_object_size(v->pprops) * sizeof *o->pats);
        if (!o->pats)
            return SC_FAIL;
        const char *k;
        size_t kl;
        json_t *ps;
        json_object_keylen_foreach(v->pprops, k, kl, ps)
        {
            size_t old = path_push(sc, "patternProperties", 17);
            path_push(sc, k, kl);
            int32_t re = sc_regex(sc, k, kl, GL_RE_SEARCH);
            path_pop(sc, old);
            if (re < 0)
                return SC_FAIL;
            int32_t val = compile_child(sc, ps, "patternProperties", k, kl);
            if (val == SC_FAIL)
                return SC_FAIL;
            if (val == SC_NEVER && (val = sc_never_node(sc)) < 0)
                return SC_FAIL;
            o->pats[o->npat].re = re;
            o->pats[o->npat].value = val;
            o->npat++;
        }
    }
    struct gl_gpattern_prop *pats = o->pats;
    for (int32_t i = 0; i < o->npat; i++)
        for (int32_t j = i + 1; j < o->npat; j++) {
            if (pats[i].value == pats[j].value ||
                regex_disjoint(sc_re(sc, pats[i].re), sc_re(sc, pats[j].re)))
                continue;
            size_t old = path_push(sc, "patternProperties", 17);
            gl_status st = sc_unsup(sc, "patternProperties",
                                    "two patterns with different schemas may match one key");
            path_pop(sc, old);
            if (st != GL_OK)
                return SC_FAIL;
            i = j = o->npat;
        }
    return 0;
}

// Required count, min/maxProperties: an object that cannot be completed is SC_NEVER (so the
// matcher never enters a dead end).
static int32_t obj_completable(struct sc *sc, const struct objc *o)
{
    const struct view *v = o->v;
    int32_t n_required = 0, n_possible = 0;
    for (int32_t i = 0; i < o->n; i++) {
        n_required += o->props[i].required;
        n_possible += o->props[i].value != sc->never_node || sc->never_node < 0;
    }
    if (v->max_props >= 0 && (n_required > v->max_props || v->min_props > v->max_props))
        return SC_NEVER;
    if (o->additional < 0 && !o->npat && v->min_props > n_possible)
        return SC_NEVER;
    return 0;
}

// Sorts o->props by name bytes (the matcher's binary search); for ordered_keys, o->order[i] is
// the sorted position of the i-th declared name.
static int32_t obj_sort(struct sc *sc, struct objc *o)
{
    int32_t n = o->n;
    if (!(sc->c->opts && sc->c->opts->ordered_keys && n > 0)) {
        qsort(o->props, (size_t)n, sizeof *o->props, prop_cmp);
        return 0;
    }
    o->order = sc_alloc(sc, (size_t)n * sizeof *o->order);
    if (!o->order)
        return SC_FAIL;
    // Remember each declared name, sort, then map positions back by name.
    struct gl_gbytes *names = gl_malloc((size_t)n * sizeof *names);
    if (!names) {
        sc_nomem(sc);
        return SC_FAIL;
    }
    for (int32_t i = 0; i < n; i++)
        names[i] = o->props[i].name;
    qsort(o->props, (size_t)n, sizeof *o->props, prop_cmp);
    for (int32_t i = 0; i < n; i++) {
        struct gl_gprop key = {.name = names[i]};
        struct gl_gprop *hit = bsearch(&key, o->props, (size_t)n, sizeof *o->props, prop_cmp);
        GL_ASSERT(hit);
        o->order[i] = (int32_t)(hit - o->props);
    }
    gl_free(names);
    return 0;
}

// A GN_JOBJECT node for an object view (fb: names a `not: {required}` forbids, or NULL), or
// SC_NEVER / SC_FAIL.
static int32_t compile_object(struct sc *sc, const struct view *v, const struct forbid *fb)
{
    struct objc o = {.v = v, .fb = fb, .pn_re = -1, .pn_value = -1};
    o.np = v->props ? json_object_size(v->props) : 0;
    o.nreq = v->required ? json_array_size(v->required) : 0;
    size_t cap = o.np + o.nreq + (size_t)(fb ? fb->n : 0);
    o.props = sc_alloc(sc, (cap ? cap : 1) * sizeof *o.props);
    if (!o.props) {
        sc_nomem(sc);
        return SC_FAIL;
    }
    int32_t r = obj_additional(sc, &o);
    if (r == 0)
        r = obj_property_names(sc, &o);
    o.open = o.additional >= 0 || v->pprops || o.pn_value >= 0;
    if (r == 0)
        r = obj_properties(sc, &o);
    if (r == 0)
        r = obj_patterns(sc, &o);
    if (r == 0)
        r = obj_completable(sc, &o);
    if (r == 0)
        r = obj_sort(sc, &o);
    if (r != 0)
        return r;
    struct gl_gnode nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = GN_JOBJECT;
    nd.u.obj.props = o.props;
    nd.u.obj.n_props = o.n;
    nd.u.obj.patterns = o.pats;
    nd.u.obj.n_patterns = o.npat;
    nd.u.obj.additional = o.additional;
    nd.u.obj.min_props = clamp32(v->min_props);
    nd.u.obj.max_props = v->max_props < 0 ? -1 : clamp32(v->max_props);
    nd.u.obj.order = o.order;
    return sc_add(sc, &nd);
}

// 1 when every state regex idx can reach (a search for up to RE_INEX_STATES of them) has
// arbitrarily long completions (gl_regex_unbounded: a cycle before a match), so infinitely many;
// 0 when one has not, or too many states, or the regex is a complement (GL_RE_NEGATE, whose
// states' unbounded flag is not exact).
#define RE_INEX_STATES 256
static int re_inexhaustible(struct sc *sc, int32_t idx)
{
    for (size_t i = 0; i < sc->regexes.cap; i++) {
        const struct hent *e = &sc->regexes.e[i];
        if (e->key && e->i0 == idx && (e->key[0] & GL_RE_NEGATE))
            return 0;
    }
    struct gl_regex *re = sc_re(sc, idx);
    uint32_t ncls;
    const uint8_t *rep;
    gl_regex_classes(re, &ncls, &rep);
    uint32_t seen[RE_INEX_STATES];
    uint32_t n = 0;
    seen[n++] = gl_regex_start(re);
    for (uint32_t q = 0; q < n; q++) {
        if (seen[q] == GL_RE_DEAD)
            continue;
        if (!gl_regex_unbounded(re, seen[q]))
            return 0;
        for (uint32_t c = 0; c < ncls; c++) {
            uint32_t t = gl_regex_step(re, seen[q], rep[c]);
            uint32_t k = 0;
            while (k < n && seen[k] != t)
                k++;
            if (k == n) {
                if (n == RE_INEX_STATES)
                    return 0;
                seen[n++] = t;
            }
        }
    }
    return !gl_regex_overflowed(re);
}

// uniqueItems over items node `items` after n prefix items: the matcher enforces it for strings
// whose every prefix keeps a completion that no earlier item takes (ir.h): without maxLength and
// with no regex or one whose every state has infinitely many completions (re_inexhaustible:
// `^[a-z][a-z0-9_]*$`, not `^v[0-9]$`), or an enum of strings (the unseen values). Returns a
// copy of the item node marked uniq, UNIQ_DROPPED when refused in lenient mode, or SC_FAIL.
#define UNIQ_DROPPED (-3)
static int32_t unique_items(struct sc *sc, size_t n, int32_t items)
{
    const struct gl_gnode *it = items >= 0 ? &sc->b->ir->nodes[items] : NULL;
    if (!n && it && it->kind == GN_JSTRING && !it->u.str.raw &&
        (it->u.str.names ||
         (it->u.str.max_chars < 0 &&
          (!it->u.str.n_regex ||
           (it->u.str.n_regex == 1 && re_inexhaustible(sc, it->u.str.regexes[0])))))) {
        struct gl_gnode nd = *it;
        nd.u.str.uniq = 1;
        return sc_add(sc, &nd);
    }
    size_t old = path_push(sc, "uniqueItems", 11);
    gl_status st = sc_unsup(sc, "uniqueItems",
                            "only over strings: an enum, or without maxLength and with at most "
                            "one pattern or format that never runs out of completions");
    path_pop(sc, old);
    return st == GL_OK ? UNIQ_DROPPED : SC_FAIL;
}

static int32_t compile_array(struct sc *sc, const struct view *v)
{
    int64_t max_items = v->max_items;
    int unique = v->unique && !(max_items >= 0 && max_items <= 1);
    size_t np = v->prefix ? json_array_size(v->prefix) : 0;
    if (max_items >= 0 && (size_t)max_items < np)
        np = (size_t)max_items;
    int32_t *pre = sc_alloc(sc, (np ? np : 1) * sizeof *pre);
    if (!pre)
        return SC_FAIL;
    size_t n = 0;
    for (; n < np; n++) {
        size_t old = path_push_idx(sc, v->prefix == NULL ? "items" : "prefixItems", n);
        int raw = sc->raw;
        sc->raw = 0;
        sc->cdepth++;
        int32_t k = compile_schema(sc, json_array_get(v->prefix, n));
        sc->cdepth--;
        sc->raw = raw;
        path_pop(sc, old);
        if (k == SC_FAIL)
            return SC_FAIL;
        if (k == SC_NEVER) {
            max_items = (int64_t)n; // no array can have an item here
            break;
        }
        pre[n] = k;
    }
    int32_t items = -1;
    if ((max_items < 0 || max_items > (int64_t)n) && n == np) {
        if (!v->items || json_is_true(v->items))
            items = sc_any(sc) == SC_FAIL ? SC_FAIL : sc->any;
        else
            items = compile_child(sc, v->items, "items", NULL, 0);
        if (items == SC_FAIL)
            return SC_FAIL;
        if (items == SC_NEVER)
            items = -1;
    }
    if (items < 0 && (max_items < 0 || max_items > (int64_t)n))
        max_items = (int64_t)n;
    if (unique && (max_items < 0 || max_items > 1)) {
        int32_t k = unique_items(sc, n, items);
        if (k == SC_FAIL)
            return SC_FAIL;
        if (k >= 0) {
            items = k;
            int32_t nn = sc->b->ir->nodes[k].u.str.n_names;
            if (nn && (max_items < 0 || max_items > nn))
                max_items = nn; // distinct values of a set of nn
        } else {
            unique = 0; // lenient: dropped
        }
    } else {
        unique = 0;
    }
    if (max_items >= 0 && v->min_items > max_items)
        return SC_NEVER;
    struct gl_gnode nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = GN_JARRAY;
    nd.u.arr.unique = (uint8_t)unique;
    nd.u.arr.prefix = pre;
    nd.u.arr.n_prefix = (int32_t)n;
    nd.u.arr.items = items;
    nd.u.arr.min_items = clamp32(v->min_items);
    nd.u.arr.max_items = max_items < 0 ? -1 : clamp32(max_items);
    return sc_add(sc, &nd);
}

// ---- not, the plain view, anyOf/oneOf distribution, memo ----

// Applies `not` schemas that have an exact effect on *v: not {} (nothing), not {type},
// not {required: [k]}, not {enum of null/booleans}; with an enum, compile_enum checks them.
// ---- not {enum}: the strings outside a finite set, as a regex ----

#define SC_NOT_STR_MAX 4096 // code points over all strings of one negated enum

static void sb_cp(struct gl_buf *b, uint32_t cp)
{
    gl_buf_printf(b, "\\u{%X}", (unsigned)cp);
}

// One string of the set as code points (jansson strings are valid UTF-8).
struct cps {
    uint32_t *c;
    size_t n;
};

static int cps_cmp(const void *a, const void *b)
{
    const struct cps *x = a, *y = b;
    for (size_t i = 0; i < x->n && i < y->n; i++)
        if (x->c[i] != y->c[i])
            return x->c[i] < y->c[i] ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n;
}

static size_t utf8_decode_all(const char *s, size_t n, uint32_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? c : c & (0x3Fu >> (len - 1));
        for (int j = 1; j < len && i + (size_t)j < n; j++)
            cp = cp << 6 | ((uint8_t)s[i + (size_t)j] & 0x3Fu);
        out[k++] = cp;
        i += (size_t)len;
    }
    return k;
}

// Strings with prefix w[lo].c[0..d) that are not in w[lo..hi) (sorted): end here (unless a member
// does), take a member's next code point and recurse, or leave the set's trie for good.
static void not_set_regex(struct gl_buf *b, const struct cps *w, size_t lo, size_t hi, size_t d)
{
    int member = 0;
    while (lo < hi && w[lo].n == d) {
        member = 1;
        lo++;
    }
    gl_buf_put(b, "(?:", 3);
    if (!member)
        gl_buf_put(b, "|", 1); // the empty alternative: the string ends here
    for (size_t i = lo; i < hi;) {
        size_t j = i;
        while (j < hi && w[j].c[d] == w[i].c[d])
            j++;
        sb_cp(b, w[i].c[d]);
        not_set_regex(b, w, i, j, d + 1);
        gl_buf_put(b, "|", 1);
        i = j;
    }
    if (lo == hi) {
        gl_buf_put(b, "[\\s\\S]+)", 8);
        return;
    }
    gl_buf_put(b, "[^", 2);
    for (size_t i = lo; i < hi; i++)
        if (i == lo || w[i].c[d] != w[i - 1].c[d])
            sb_cp(b, w[i].c[d]);
    gl_buf_put(b, "][\\s\\S]*)", 9);
}

// `not {enum: [...]}` (const folded in; a sibling type filters the values): each value is removed
// from v's language exactly -- null and both booleans by type, strings by an anchored pattern
// that matches every string outside the set. GL_E_UNSUPPORTED (err untouched) when a value
// cannot be removed: one boolean, a number, an object or array while v allows that type.
static gl_status not_enum(struct sc *sc, struct view *v, const struct view *nv)
{
    unsigned rm = 0;
    int has_t = 0, has_f = 0;
    size_t n_str = 0, n_cp = 0;
    for (size_t j = 0; j < json_array_size(nv->enumv); j++) {
        json_t *x = json_array_get(nv->enumv, j);
        unsigned vt = value_types(x);
        if (!(vt & nv->types))
            continue; // not in the negated schema's language: removes nothing
        if (json_is_null(x))
            rm |= T_NULL;
        else if (json_is_boolean(x))
            *(json_is_true(x) ? &has_t : &has_f) = 1;
        else if (json_is_string(x) && (v->types & T_STR))
            n_str++, n_cp += json_string_length(x);
        else if (!json_is_string(x) && (v->types & vt))
            return GL_E_UNSUPPORTED;
    }
    if (has_t != has_f && (v->types & T_BOOL))
        return GL_E_UNSUPPORTED;
    if (n_str && (n_cp > SC_NOT_STR_MAX || v->n_pat >= SC_MAX_LIST))
        return GL_E_UNSUPPORTED;
    if (has_t && has_f)
        rm |= T_BOOL;
    v->types &= ~rm;
    if (!n_str)
        return GL_OK;
    struct cps *w = gl_calloc(n_str, sizeof *w);
    uint32_t *pool = gl_calloc(n_cp + 1, sizeof *pool);
    struct gl_buf b = {0};
    gl_status st = GL_OK;
    if (!w || !pool) {
        st = sc_nomem(sc);
        goto out;
    }
    size_t k = 0, used = 0;
    for (size_t j = 0; j < json_array_size(nv->enumv); j++) {
        json_t *x = json_array_get(nv->enumv, j);
        if (!json_is_string(x))
            continue;
        w[k].c = pool + used;
        w[k].n = utf8_decode_all(json_string_value(x), json_string_length(x), w[k].c);
        used += w[k++].n;
    }
    qsort(w, k, sizeof *w, cps_cmp);
    gl_buf_put(&b, "^", 1);
    not_set_regex(&b, w, 0, k, 0);
    gl_buf_put(&b, "$", 1);
    json_t *pat = b.oom ? NULL : sc_keep(sc, json_stringn(b.p, b.len));
    if (!pat) {
        st = sc_nomem(sc);
        goto out;
    }
    v->pat[v->n_pat++] = pat;
out:
    gl_free(w);
    gl_free(pool);
    gl_buf_free(&b);
    return st;
}

// multipleOf m = a / 10^s where every prime factor of a is 2 or 5 (0.01, 0.25, 0.5, 10, 1000):
// whether a number is a multiple depends only on its last digits, so the multiples form a regex
// over the number's text (exact decimal arithmetic, as the spec says; no exponent: a narrowing).
// Write x as I.W (W possibly empty); with f = min(|W|, s) fraction digits counted (digits of W
// past s must be 0), x * 10^s = D 0^(s-f) where D is the digit string I W[0..f). a | 10^k, so x
// is a multiple iff the last j = k - (s - f) digits t of D (zero-padded) have t * 10^(s-f) % a
// == 0: every written form is enumerated by f and t. Returns the regex text (owned) or NULL
// when m has no such form (or the regex would be too large).
#define SC_MULT_MAX_SCALE GL_GNUM_GRID_MAX_SCALE
#define SC_MULT_MAX_K     3
// m as a / 10^s (a < 10^6 an integer, s <= SC_MULT_MAX_SCALE, the least such s); 0 when m has
// no such form.
static int mult_scale(double m, int *s_out, double *a_out)
{
    for (int i = 0; i <= SC_MULT_MAX_SCALE; i++) {
        double x = m * pow(10, i);
        if (x < 1e6 && fabs(x - round(x)) <= 1e-9 * x && round(x) >= 1) {
            *s_out = i;
            *a_out = round(x);
            return 1;
        }
    }
    return 0;
}

static char *mult_regex(double m, int integer, int nonneg)
{
    int s = -1;
    double a = 0;
    if (!mult_scale(m, &s, &a))
        return NULL;
    int k = 0;
    int64_t ai = (int64_t)a, p10 = 1;
    while (p10 % ai && k < SC_MULT_MAX_K)
        k++, p10 *= 10;
    if (p10 % ai)
        return NULL; // a has a prime factor other than 2 and 5
    struct gl_buf b = {0};
    gl_buf_put(&b, nonneg ? "(?:" : "-?(?:", nonneg ? 3 : 5);
    int first = 1;
    for (int f = 0; f <= (integer ? 0 : s); f++) {
        int j = k - (s - f);
        int64_t scale = 1, span = 1;
        for (int i = 0; i < s - f; i++)
            scale *= 10;
        for (int i = 0; i < j; i++)
            span *= 10;
        for (int64_t t = 0; t < span; t++) {
            if (j > 0 && (t * scale) % ai)
                continue;
            char ts[SC_MULT_MAX_K + 1] = ""; // t as j digits, zero-padded (j <= k)
            for (int i = j, v = (int)t; i > 0; i--, v /= 10)
                ts[i - 1] = (char)('0' + v % 10);
            ts[j > 0 ? j : 0] = '\0';
            int jj = j > 0 ? j : 0, ip = jj > f ? jj - f : 0; // digits of t in I
            char ipart[SC_MULT_MAX_K + 1], q[SC_MULT_MAX_K + 2];
            memcpy(ipart, ts, (size_t)ip);
            ipart[ip] = '\0';
            const char *qs = ipart;
            while (*qs == '0')
                qs++;
            snprintf(q, sizeof q, "%s", *qs ? qs : "0");
            gl_buf_put(&b, first ? "" : "|", first ? 0 : 1);
            first = 0;
            // I: any integer when t lies in the fraction, else one ending in t's head
            if (ip == 0)
                gl_buf_put(&b, "(?:0|[1-9][0-9]*)", 17);
            else
                gl_buf_printf(&b, "(?:%s|[1-9][0-9]*%s)", q, ipart);
            if (f == 0 && s == 0 && !integer)
                gl_buf_put(&b, "(?:\\.0+)?", 9); // 10.0: an integral number written as a real
            if (f > 0) {
                int free_digits = f - (jj - ip);
                gl_buf_printf(&b, "\\.[0-9]{%d}%s%s", free_digits, ts + ip, f == s ? "0*" : "");
            }
        }
    }
    gl_buf_put(&b, ")", 1);
    return gl_buf_take(&b, NULL); // NULL when out of memory
}

static gl_status apply_nots(struct sc *sc, struct view *v, struct forbid *fb)
{
    if (v->enumv)
        return GL_OK;
    for (int i = 0; i < v->n_not; i++) {
        json_t *ns = v->nots[i];
        if (json_is_false(ns))
            continue;
        if (json_is_true(ns)) {
            v->never = 1;
            continue;
        }
        struct view *nv = view_get(sc, ns);
        if (!nv)
            return sc->err ? sc->err->code : GL_E_INVAL;
        struct view t = *nv;
        unsigned nt = t.types;
        t.types = T_ALL;
        if (view_is_empty(&t) && nt == T_ALL) {
            v->never = 1;
            continue;
        }
        if (view_is_empty(&t)) {
            if ((nt & T_INT) && !(nt & T_NUM) && (v->types & T_NUM)) {
                gl_status st = sc_unsup(sc, "not", "'not integer' inside a number type");
                if (st != GL_OK)
                    return st;
                continue;
            }
            unsigned rm = nt | ((nt & T_NUM) ? (unsigned)T_INT : 0u);
            v->types &= ~rm;
            continue;
        }
        t.required = NULL;
        if (nt == T_ALL && view_is_empty(&t) && json_array_size(nv->required) == 1 &&
            fb->n < SC_MAX_LIST) {
            fb->names[fb->n++] = json_array_get(nv->required, 0);
            continue;
        }
        t = *nv;
        t.n_pat = 0;
        t.types = T_ALL;
        if (view_is_empty(&t) && nv->n_pat == 1 && json_is_string(nv->pat[0]) &&
            v->n_pat < SC_MAX_LIST && (!(nt & T_INT) || (nt & T_NUM))) {
            // not {type: nt, pattern: P}: values of nt's other types satisfy it (a pattern
            // constrains strings only), so they go; strings stay when they fail P.
            unsigned rm = nt & ~(unsigned)T_STR;
            v->types &= ~(rm | ((rm & T_NUM) ? (unsigned)T_INT : 0u));
            if (nt & T_STR) {
                json_t *neg = json_pack("{sO}", "not", nv->pat[0]);
                if (!neg || !sc_keep(sc, neg))
                    return sc_nomem(sc);
                v->pat[v->n_pat++] = neg;
            }
            continue;
        }
        t = *nv;
        t.enumv = NULL;
        t.types = T_ALL;
        if (view_is_empty(&t) && nv->enumv) {
            gl_status st = not_enum(sc, v, nv);
            if (st == GL_OK)
                continue;
            if (st != GL_E_UNSUPPORTED)
                return st;
        }
        size_t old = path_push(sc, "not", 3);
        gl_status st = sc_unsup(sc, "not",
                                "only not {}, {type}, {required: [one]}, {pattern}, {enum/const} "
                                "of null, both booleans or strings");
        path_pop(sc, old);
        if (st != GL_OK)
            return st; // lenient: dropped
    }
    v->n_not = 0;
    return GL_OK;
}

static int32_t compile_plain(struct sc *sc, struct view *v)
{
    struct forbid fb;
    fb.n = 0;
    if (v->never)
        return SC_NEVER;
    if (v->n_not && apply_nots(sc, v, &fb) != GL_OK)
        return SC_FAIL;
    if (v->never || !v->types)
        return SC_NEVER;
    if (v->enumv)
        return compile_enum(sc, v);
    if (view_is_empty(v) && !fb.n)
        return sc_any(sc);
    int32_t kids[8];
    int32_t nk = 0;
    int32_t k;
    // Order: the containers, string, number, then the literals (the matcher tracks all).
    if (v->types & T_OBJ) {
        if ((k = compile_object(sc, v, &fb)) == SC_FAIL)
            return SC_FAIL;
        if (k != SC_NEVER)
            kids[nk++] = k;
    }
    if (v->types & T_ARR) {
        if ((k = compile_array(sc, v)) == SC_FAIL)
            return SC_FAIL;
        if (k != SC_NEVER)
            kids[nk++] = k;
    }
    if (v->types & T_STR) {
        if ((k = compile_string(sc, v)) == SC_FAIL)
            return SC_FAIL;
        if (k != SC_NEVER)
            kids[nk++] = k;
    }
    if (v->types & (T_NUM | T_INT)) {
        if ((k = compile_number(sc, v, !(v->types & T_NUM))) == SC_FAIL)
            return SC_FAIL;
        if (k != SC_NEVER)
            kids[nk++] = k;
    }
    if (v->types & T_BOOL) {
        if ((k = sc_bool(sc)) == SC_FAIL)
            return SC_FAIL;
        kids[nk++] = k;
    }
    if (v->types & T_NULL) {
        if ((k = sc_null(sc)) == SC_FAIL)
            return SC_FAIL;
        kids[nk++] = k;
    }
    return sc_alt(sc, kids, nk);
}

static int32_t compile_view(struct sc *sc, struct view *v);

// A count bound of v (properties, items, string length): a value of that type beyond it, one
// alternative per bound, appended to alts.
static void append_count_negations(json_t *alts, const struct view *v)
{
    static const struct {
        const char *type, *min_kw, *max_kw;
        size_t lo, hi; // offsets of the view's min / max counts
    } counts[] = {
        {"object", "minProperties", "maxProperties", offsetof(struct view, min_props),
         offsetof(struct view, max_props)},
        {"array", "minItems", "maxItems", offsetof(struct view, min_items),
         offsetof(struct view, max_items)},
        {"string", "minLength", "maxLength", offsetof(struct view, min_len),
         offsetof(struct view, max_len)},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t lo = *(const int64_t *)((const char *)v + counts[i].lo);
        int64_t hi = *(const int64_t *)((const char *)v + counts[i].hi);
        if (lo > 0)
            json_array_append_new(alts, json_pack("{sssI}", "type", counts[i].type,
                                                  counts[i].max_kw, (json_int_t)(lo - 1)));
        if (hi >= 0)
            json_array_append_new(alts, json_pack("{sssI}", "type", counts[i].type,
                                                  counts[i].min_kw, (json_int_t)(hi + 1)));
    }
}

// ---- negate_member's alternatives ----
// Each appends to alts conditions that imply "not member mv" (any one of them holding suffices).
// hint: the other branch's view (oneOf), or NULL when negating an `if`.

// Not the member's types (unless that removes every value of the other branch: kills), one of
// its required names absent, a number beyond one of its bounds, or one of its `not`s satisfied.
static void neg_basic(json_t *alts, const struct view *mv, int kills)
{
    unsigned t = mv->types;
    if (t != T_ALL && (!(t & T_INT) || (t & T_NUM)) && !kills) {
        static const char *const names[] = {"null",  "boolean", "object",
                                            "array", "string",  "number"};
        json_t *tl = json_array();
        for (int i = 0; i < 6; i++)
            if (t & (1u << i))
                json_array_append_new(tl, json_string(names[i]));
        json_array_append_new(alts, json_pack("{s{so}}", "not", "type", tl));
    }
    for (size_t i = 0; mv->required && i < json_array_size(mv->required); i++)
        json_array_append_new(
            alts, json_pack("{s{s[O]}}", "not", "required", json_array_get(mv->required, i)));
    // A number beyond one of the member's bounds fails it.
    if (mv->has_max)
        json_array_append_new(alts, json_pack("{ssso}", "type", "number",
                                              mv->excl_max ? "minimum" : "exclusiveMinimum",
                                              json_real(mv->nmax)));
    if (mv->has_min)
        json_array_append_new(alts, json_pack("{ssso}", "type", "number",
                                              mv->excl_min ? "maximum" : "exclusiveMaximum",
                                              json_real(mv->nmin)));
    // The member says "not N": satisfying N fails it.
    for (int i = 0; i < mv->n_not; i++)
        if (!json_is_false(mv->nots[i]))
            json_array_append(alts, mv->nots[i]);
}

// A key the member forbids (a false property, or additionalProperties false and no pattern
// matching it) that the other branch declares: that key present. GL_OK, or the error set.
static gl_status neg_forbidden_keys(struct sc *sc, json_t *alts, const struct view *mv,
                                    const struct view *hint)
{
    if (!(hint && hint->props && (mv->addl || mv->props)))
        return GL_OK;
    const char *k;
    size_t kl;
    json_t *ps;
    json_object_keylen_foreach(hint->props, k, kl, ps)
    {
        json_t *side[SC_MAX_LIST + 2];
        int ns = 0, closed = 0;
        gl_status st = key_side(sc, mv, k, kl, side, &ns, SC_MAX_LIST);
        if (st != GL_OK)
            return st;
        for (int i = 0; i < ns; i++)
            closed |= json_is_false(side[i]);
        if (closed)
            json_array_append_new(alts, json_pack("{s[s%]}", "required", k, kl));
    }
    return GL_OK;
}

// A discriminator: the member's property p has finitely many values (enum/const) and so has the
// other branch's: p present with a value outside the member's set. Negating an `if` (no other
// branch), the same when not_enum can remove the set (strings and null) and the `if` has
// `required` (without, neg_failing_property gives this alternative already).
static void neg_discriminators(struct sc *sc, json_t *alts, const struct view *mv,
                               const struct view *hint)
{
    for (void *it = (!hint || hint->props) && mv->props ? json_object_iter(mv->props) : NULL; it;
         it = json_object_iter_next(mv->props, it)) {
        const char *k = json_object_iter_key(it);
        size_t kl = json_object_iter_key_len(it);
        json_t *ps = json_object_iter_value(it);
        json_t *hs = hint ? json_object_getn(hint->props, k, kl) : NULL;
        struct view *pv = json_is_object(ps) ? view_get(sc, ps) : NULL;
        struct view *hv = json_is_object(hs) ? view_get(sc, hs) : NULL;
        int plain = pv && pv->enumv;
        for (size_t i = 0; plain && !hint && i < json_array_size(pv->enumv); i++) {
            json_t *x = json_array_get(pv->enumv, i);
            plain = json_is_string(x) || json_is_null(x);
        }
        if (pv && pv->enumv && ((hv && hv->enumv) || (!hint && plain && mv->required)))
            json_array_append_new(alts,
                                  json_pack("{sss[s%]s{s%{sO}}}", "type", "object", "required", k,
                                            kl, "properties", k, kl, "not", ps));
    }
}

// m = "every listed property present satisfies its schema" (properties and nothing else): one of
// them present and failing it implies not m.
static void neg_failing_property(json_t *alts, const struct view *mv)
{
    struct view rest = *mv;
    rest.types = T_ALL;
    rest.required = NULL;
    rest.props = NULL;
    if (!(mv->props && !mv->required && mv->types == T_ALL && view_is_empty(&rest)))
        return;
    const char *k;
    size_t kl;
    json_t *ps;
    json_object_keylen_foreach(mv->props, k, kl, ps)
    {
        json_t *name = json_stringn(k, kl);
        json_array_append_new(alts, json_pack("{sss[o]s{s{sO}}}", "type", "object", "required",
                                              name, "properties", k, "not", ps));
    }
}

// Only when nothing else does (every alternative multiplies the branches): a value outside the
// member's enum of strings and null; a value of a type beyond the member's count bound; a string
// failing one of its patterns.
static void neg_fallbacks(json_t *alts, const struct view *mv)
{
    int enum_negatable = mv->enumv != NULL;
    for (size_t i = 0; enum_negatable && i < json_array_size(mv->enumv); i++) {
        json_t *x = json_array_get(mv->enumv, i);
        enum_negatable = json_is_string(x) || json_is_null(x);
    }
    if (enum_negatable && json_array_size(alts) == 0)
        json_array_append_new(alts, json_pack("{s{sO}}", "not", "enum", mv->enumv));
    // A member with a count bound: a value of that type beyond it fails it.
    if (json_array_size(alts) == 0)
        append_count_negations(alts, mv);
    // A member with patterns: a string failing one of them fails it (a negated one is P again).
    for (int i = 0; i < mv->n_pat && json_array_size(alts) == 0; i++)
        for (int j = 0; j < mv->n_pat; j++) {
            json_t *p = mv->pat[j], *np = json_object_get(p, "not");
            json_array_append_new(
                alts, np ? json_pack("{sssO}", "type", "string", "pattern", np)
                         : json_pack("{sss{sO}}", "type", "string", "not", "pattern", p));
        }
}

// A condition that implies "not member m" (exact when m has only types or only `required`):
// not its types, or one of its required names absent. Using a stronger condition than the exact
// negation only removes instances (sound). NULL when m has neither.
static json_t *negate_member(struct sc *sc, json_t *m, const struct view *hint)
{
    if (json_is_true(m))
        return json_false();
    struct view *mv = json_is_object(m) ? view_get(sc, m) : NULL;
    if (!mv || mv->never)
        return NULL;
    if (view_is_empty(mv))
        return json_false(); // m takes every value: nothing fails it
    json_t *alts = json_array();
    if (!alts || !sc_keep(sc, alts)) {
        json_decref(alts);
        sc_nomem(sc);
        return NULL;
    }
    // "not these types" is useless where it removes every value of the other branch
    int kills = hint && !(view_types_eff(hint) & ~types_and(mv->types, view_types_eff(hint)));
    neg_basic(alts, mv, kills);
    if (neg_forbidden_keys(sc, alts, mv, hint) != GL_OK)
        return NULL;
    neg_discriminators(sc, alts, mv, hint);
    neg_failing_property(alts, mv);
    neg_fallbacks(alts, mv);
    // A member with only types whose negation removes all of the other branch: that branch
    // is then empty, exactly (every value of it satisfies the member).
    struct view only_t = *mv;
    only_t.types = T_ALL;
    if (json_array_size(alts) == 0 && kills && view_is_empty(&only_t))
        return json_false();
    size_t n = json_array_size(alts);
    if (n == 0)
        return NULL;
    if (n == 1)
        return json_array_get(alts, 0);
    json_t *r = json_pack("{sO}", "anyOf", alts);
    if (!r) {
        sc_nomem(sc);
        return NULL;
    }
    return sc_keep(sc, r);
}

// 1 when v constrains objects only (every value of another type satisfies it).
static int object_only(const struct view *v)
{
    struct view t = *v;
    t.props = t.required = t.addl = t.pprops = t.pnames = NULL;
    t.min_props = 0;
    t.max_props = -1;
    return v->types == T_ALL && view_is_empty(&t);
}

// A discriminated pair: a property both declare with disjoint schemas (`kind` const "a" in
// one, "b" in the other). Branch b is narrowed to objects having the property: those fail
// member m, so the narrowing is sound and stays one alternative however many members there
// are; what it loses is objects without the property that satisfy b and not m. NULL if none.
static json_t *discriminator(struct sc *sc, const struct view *b, json_t *m)
{
    struct view *mv = json_is_object(m) ? view_get(sc, m) : NULL;
    if (!mv || !mv->props || !b->props || !(view_types_eff(b) & T_OBJ))
        return NULL;
    const char *k;
    size_t kl;
    json_t *ps;
    json_object_keylen_foreach(mv->props, k, kl, ps)
    {
        json_t *bs = json_object_getn(b->props, k, kl);
        int d = bs ? disjoint_schemas(sc, bs, ps, 0) : 0;
        if (d == V_ERROR)
            return NULL;
        if (d == 1) {
            json_t *r = json_pack("{sss[s%]}", "type", "object", "required", k, kl);
            if (!r)
                sc_nomem(sc);
            return r ? sc_keep(sc, r) : NULL;
        }
    }
    return NULL;
}

// Branch b with an enum excludes member m exactly by dropping the values m accepts (each
// value checked by the validator). 1 done, 0 when some value cannot be decided, V_ERROR.
static int enum_minus(struct sc *sc, struct view *b, json_t *m)
{
    if (!b->enumv)
        return 0;
    json_t *keep = json_array();
    if (!keep || !sc_keep(sc, keep)) {
        json_decref(keep);
        sc_nomem(sc);
        return V_ERROR;
    }
    for (size_t i = 0; i < json_array_size(b->enumv); i++) {
        json_t *x = json_array_get(b->enumv, i);
        int r = val_schema(sc, m, x, 0);
        if (r == V_ERROR || r == V_UNKNOWN)
            return r == V_ERROR ? V_ERROR : 0;
        if (r == 0 && json_array_append(keep, x))
            return sc_nomem(sc), V_ERROR;
    }
    b->enumv = keep;
    b->never |= json_array_size(keep) == 0;
    return 1;
}

// A copy of base merged with one member schema of an anyOf/oneOf (path: kw/idx).
static struct view *branch_view(struct sc *sc, const struct view *base, json_t *member,
                                const char *kw, size_t idx)
{
    struct view *bv = view_new(sc);
    if (!bv) {
        sc_nomem(sc);
        return NULL;
    }
    *bv = *base;
    struct xp x;
    memset(&x, 0, sizeof x);
    size_t old = path_push_idx(sc, kw, idx);
    gl_status st = xp_seed(&x, base) ? expand(sc, member, bv, &x) : sc_nomem(sc);
    path_pop(sc, old);
    if (st == GL_OK && !view_set_parts(sc, bv, &x.parts))
        st = sc_nomem(sc);
    xp_free(&x);
    return st == GL_OK ? bv : NULL;
}

// The exact negation of a view that has only `type` and either object keywords (properties,
// required) or an enum of numbers, as a list of alternatives (an anyOf); NULL if nv has another
// shape (or on error, sc->err set). not {type T, required R, properties P} = not T, or an object
// without some k of R, or an object with some k of P whose value fails P[k] (that `not` is
// compiled like any other). not {enum: [e1 < ... < en]} (numbers) = not a number, or a number in
// one of the open intervals (-inf, e1), (e1, e2), ..., (en, inf).
#define SC_NOT_NUM_MAX 16 // numbers in a negated enum (each adds an interval alternative)
static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// negate_exact's enum: the values in nv's types, numbers into e[0..*ne) (at most
// SC_NOT_NUM_MAX, each within 2^53) and booleans into *bools (bit 1: true, bit 0: false); *et
// the types met. 0 when a value cannot be negated here (a string, null or container).
static int nex_enum(const struct view *nv, double *e, size_t *ne, int *bools, unsigned *et)
{
    unsigned nt = nv->types;
    for (size_t i = 0; i < json_array_size(nv->enumv); i++) {
        json_t *x = json_array_get(nv->enumv, i);
        if (!(value_types(x) & nt))
            continue;
        if (json_is_boolean(x))
            *bools |= json_is_true(x) ? 2 : 1;
        else if (!json_is_number(x) || *ne == SC_NOT_NUM_MAX ||
                 !(fabs(json_number_value(x)) < SC_INT_LIMIT))
            return 0;
        else
            e[(*ne)++] = json_number_value(x);
        *et |= value_types(x) & (T_NUM | T_BOOL);
    }
    return 1;
}

// The shape of nv (no enum) negated: a value of a type beyond one of its counts or bounds, an
// object without one of its required names, or with one of its properties failing its schema.
static void nex_shape(json_t *alts, const struct view *nv)
{
    append_count_negations(alts, nv);
    if (nv->has_max)
        json_array_append_new(alts, json_pack("{ssso}", "type", "number",
                                              nv->excl_max ? "minimum" : "exclusiveMinimum",
                                              json_real(nv->nmax)));
    if (nv->has_min)
        json_array_append_new(alts, json_pack("{ssso}", "type", "number",
                                              nv->excl_min ? "maximum" : "exclusiveMaximum",
                                              json_real(nv->nmin)));
    for (size_t i = 0; nv->required && i < json_array_size(nv->required); i++)
        json_array_append_new(alts, json_pack("{sss{s[O]}}", "type", "object", "not", "required",
                                              json_array_get(nv->required, i)));
    const char *k;
    size_t kl;
    json_t *ps;
    if (nv->props)
        json_object_keylen_foreach(nv->props, k, kl, ps)
        {
            if (json_is_true(ps) || (json_is_object(ps) && !json_object_size(ps)))
                continue; // no value fails it
            json_array_append_new(alts,
                                  json_pack("{sss[s%]s{s%{sO}}}", "type", "object", "required", k,
                                            kl, "properties", k, kl, "not", ps));
        }
}

// Numbers outside the enum's e[0..ne): the open intervals (-inf, e1), (e1, e2), ..., (en, inf)
// of the sorted values (sorts e).
static void nex_intervals(json_t *alts, double *e, size_t ne)
{
    if (!ne)
        return;
    qsort(e, ne, sizeof e[0], dbl_cmp);
    for (size_t i = 0; i <= ne; i++) {
        if (i > 0 && i < ne && e[i] == e[i - 1])
            continue;
        json_t *a = json_pack("{ss}", "type", "number");
        if (a && i > 0)
            json_object_set_new(a, "exclusiveMinimum", json_real(e[i - 1]));
        if (a && i < ne)
            json_object_set_new(a, "exclusiveMaximum", json_real(e[i]));
        json_array_append_new(alts, a);
    }
}

static json_t *negate_exact(struct sc *sc, const struct view *nv)
{
    struct view t = *nv;
    t.types = T_ALL;
    t.required = t.props = t.enumv = NULL;
    t.has_min = t.has_max = 0;
    t.min_len = t.min_items = t.min_props = 0;
    t.max_len = t.max_items = t.max_props = -1;
    unsigned nt = nv->types;
    if (!view_is_empty(&t) || ((nt & T_INT) && !(nt & T_NUM)))
        return NULL;
    // The enum's values in nv's types: numbers (as intervals) and booleans (the other one).
    double e[SC_NOT_NUM_MAX];
    size_t ne = 0;
    int bools = 0; // bit 1: true in the enum, bit 0: false
    unsigned et = 0;
    if (!nex_enum(nv, e, &ne, &bools, &et))
        return NULL; // strings and null: not_enum's; containers: not here
    int num = nv->enumv != NULL;
    struct view u = *nv;
    u.types = T_ALL;
    if ((num && !et) || view_is_empty(&u))
        return NULL; // an enum with no value of nv's types, or only types: apply_nots's
    if (num && (nv->props || nv->required || nv->has_min || nv->has_max))
        return NULL;
    // a bound beyond 2^53 may have been rounded: its complement would not be exact
    if ((nv->has_min && !(fabs(nv->nmin) < SC_INT_LIMIT)) ||
        (nv->has_max && !(fabs(nv->nmax) < SC_INT_LIMIT)))
        return NULL;
    json_t *alts = json_array();
    if (!alts || !sc_keep(sc, alts)) {
        json_decref(alts);
        sc_nomem(sc);
        return NULL;
    }
    static const char *const names[] = {"null", "boolean", "object", "array", "string", "number"};
    unsigned keep = num ? et : nt; // not T: the values outside keep
    if (keep != T_ALL) {
        json_t *tl = json_array();
        for (int i = 0; i < 6; i++)
            if (keep & (1u << i))
                json_array_append_new(tl, json_string(names[i]));
        json_array_append_new(alts, json_pack("{s{so}}", "not", "type", tl));
    }
    if (num && (bools == 1 || bools == 2))
        json_array_append_new(alts, json_pack("{so}", "const", json_boolean(bools == 1)));
    if (!num)
        nex_shape(alts, nv);
    nex_intervals(alts, e, ne);
    return alts;
}

// anyOf/oneOf distributed over the siblings: ALT over the combinations of one member per list.
// De Morgan on `not`: not anyOf[A..] = not A and not ...; not {types + required [k..]} = one
// of (not types, k absent, ...), an anyOf list the distribution below handles.
static gl_status rewrite_nots(struct sc *sc, struct view *w)
{
    for (int pass = 0; pass < 3; pass++) {
        json_t *keep[SC_MAX_LIST];
        int nk = 0, changed = 0;
        for (int i = 0; i < w->n_not; i++) {
            json_t *ns = w->nots[i];
            struct view *nv = json_is_object(ns) ? view_get(sc, ns) : NULL;
            if (json_is_object(ns) && !nv)
                return sc->err ? sc->err->code : GL_E_INVAL;
            struct view t;
            if (nv) {
                t = *nv;
                t.n_anyof = t.n_oneof = t.n_not = 0;
            }
            // not not X = X (an anyOf of one member, distributed below)
            if (nv && view_is_empty(&t) && nv->n_not == 1 && !nv->n_anyof && !nv->n_oneof &&
                w->n_anyof < SC_MAX_LIST) {
                json_t *l = json_pack("[O]", nv->nots[0]);
                if (!l || !sc_keep(sc, l))
                    return sc_nomem(sc);
                w->anyof[w->n_anyof++] = l;
                changed = 1;
                continue;
            }
            // not anyOf [A, B] = not A and not B; a oneOf of one member is that member
            if (nv && view_is_empty(&t) && !nv->n_not &&
                ((nv->n_anyof == 1 && !nv->n_oneof) ||
                 (nv->n_oneof == 1 && !nv->n_anyof && json_array_size(nv->oneof[0]) == 1))) {
                json_t *l = nv->n_anyof ? nv->anyof[0] : nv->oneof[0];
                for (size_t j = 0; j < json_array_size(l); j++) {
                    if (nk >= SC_MAX_LIST)
                        return sc_unsup(sc, "not", "too many negated anyOf members");
                    keep[nk++] = json_array_get(l, j); // the operands of `not`
                }
                changed = 1;
                continue;
            }
            if (nv) {
                t = *nv;
                t.types = T_ALL;
                t.required = NULL;
            }
            if (nv && view_is_empty(&t) && nv->required &&
                (json_array_size(nv->required) > 1 || nv->types != T_ALL) &&
                w->n_anyof < SC_MAX_LIST) {
                json_t *neg = negate_member(sc, ns, NULL);
                if (!neg)
                    return sc->err ? sc->err->code : GL_E_INVAL;
                json_t *alts = json_object_get(neg, "anyOf");
                if (alts) {
                    w->anyof[w->n_anyof++] = alts;
                } else if (nk < SC_MAX_LIST) {
                    json_t *inner = json_object_get(neg, "not"); // neg is {"not": X}
                    if (!inner)
                        return sc_unsup(sc, "not", "cannot negate");
                    keep[nk++] = inner;
                }
                changed = 1;
                continue;
            }
            // (not {required: [one]} stays for apply_nots, which forbids the key directly)
            int direct = nv && nv->types == T_ALL && !nv->props && !nv->enumv &&
                         json_array_size(nv->required) == 1;
            json_t *alts = nv && !direct ? negate_exact(sc, nv) : NULL;
            if (!alts && sc->err && sc->err->code != GL_OK)
                return sc->err->code;
            if (alts && json_array_size(alts) == 0) {
                w->never = 1; // nv takes every value
                changed = 1;
                continue;
            }
            if (alts && w->n_anyof < SC_MAX_LIST) {
                w->anyof[w->n_anyof++] = alts;
                changed = 1;
                continue;
            }
            if (nk >= SC_MAX_LIST)
                return sc_unsup(sc, "not", "too many not keywords");
            keep[nk++] = ns;
        }
        memcpy(w->nots, keep, (size_t)nk * sizeof keep[0]);
        w->n_not = nk;
        if (!changed)
            break;
    }
    return GL_OK;
}

// ---- compile_view's phases ----
// Each returns 0 to go on or SC_FAIL (error set in sc->err).

// if/then/else (with an enum the values are checked directly): (if and then) or (N and else), N
// a condition implying "not if" (negate_member), added to v as one more anyOf list. Clears
// v->n_if unless v has an enum.
static int32_t cv_ifs(struct sc *sc, struct view *v)
{
    for (int i = 0; i < v->n_if && !v->enumv; i++) {
        json_t *neg = negate_member(sc, v->ifs[i][0], NULL);
        json_t *alts = json_array();
        if (!alts || !sc_keep(sc, alts))
            return sc_nomem(sc), SC_FAIL;
        if (!neg) {
            if (sc->err && sc->err->code == GL_E_NOMEM)
                return SC_FAIL;
            size_t old = path_push(sc, "if", 2);
            gl_status st = sc_unsup(sc, "if", "cannot negate the 'if' schema");
            path_pop(sc, old);
            if (st != GL_OK)
                return SC_FAIL;
            continue;
        }
        json_t *t = v->ifs[i][1] ? v->ifs[i][1] : json_true();
        json_t *e = v->ifs[i][2] ? v->ifs[i][2] : json_true();
        json_array_append_new(alts, json_pack("{s[OO]}", "allOf", v->ifs[i][0], t));
        json_array_append_new(alts, json_pack("{s[OO]}", "allOf", neg, e));
        if (v->n_anyof >= SC_MAX_LIST)
            return sc_unsup(sc, "if", "too many anyOf lists"), SC_FAIL;
        v->anyof[v->n_anyof++] = alts;
    }
    if (!v->enumv)
        v->n_if = 0;
    return 0;
}

// The anyOf/oneOf lists multiply out (each branch of one carries the others): refused above
// SC_MAX_ALTS alternatives in all.
static int32_t cv_product(struct sc *sc, const struct view *v)
{
    if (v->n_anyof + v->n_oneof <= 1)
        return 0;
    size_t prod = 1;
    for (int i = 0; i < v->n_anyof + v->n_oneof; i++) {
        json_t *l = i < v->n_anyof ? v->anyof[i] : v->oneof[i - v->n_anyof];
        prod *= json_array_size(l);
        if (prod > SC_MAX_ALTS) {
            char why[96];
            snprintf(why, sizeof why, "anyOf/oneOf lists multiply to over %d alternatives",
                     SC_MAX_ALTS);
            gl_err_set(sc->err, GL_E_UNSUPPORTED, "grammar: unsupported keyword '%s' at %s: %s",
                       v->n_oneof ? "oneOf" : "anyOf", sc_ptr(sc), why);
            return SC_FAIL;
        }
    }
    return 0;
}

// The one anyOf/oneOf list compile_view takes apart: its members' views (each with the rest of
// the schema, or alone when nothing else constrains) and, for oneOf, which pairs may overlap.
struct cvlist {
    struct view base; // the schema without this list (still carrying the other lists)
    json_t *list;
    const char *kw;   // "anyOf" or "oneOf"
    int one;          // oneOf: branches must be made disjoint
    size_t n;         // members
    int bare;         // base is empty: members compile alone (compile_schema, memoised)
    struct view **bv; // [n] member views
    uint8_t *ov;      // [n * n] oneOf: 0 disjoint, 1 overlap, 2 only outside objects
};

// The member views L->bv. With no sibling constraints, a member compiles on its own (memoised,
// and a member that reaches this schema again is caught as a cycle by the memo).
static int32_t cv_member_views(struct sc *sc, struct cvlist *L)
{
    L->bare = view_is_empty(&L->base);
    for (size_t i = 0; i < L->n; i++) {
        json_t *m = json_array_get(L->list, i);
        if (L->bare) {
            size_t old = path_push_idx(sc, L->kw, i);
            L->bv[i] = view_get(sc, m);
            path_pop(sc, old);
        } else {
            L->bv[i] = branch_view(sc, &L->base, m, L->kw, i);
        }
        if (!L->bv[i])
            return SC_FAIL;
    }
    return 0;
}

// oneOf: L->ov for every pair of members that may both match. Overlapping members get their own
// branch views (they will be changed), even when bare.
static int32_t cv_overlaps(struct sc *sc, struct cvlist *L)
{
    size_t n = L->n;
    struct view **bv = L->bv;
    if (L->one && (L->ov = gl_calloc(n * n, 1)) == NULL) {
        sc_nomem(sc);
        return SC_FAIL;
    }
    int any_ov = 0;
    for (size_t i = 0; L->one && i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            int d = disjoint_views(sc, bv[i], bv[j], 0);
            if (d == V_ERROR)
                return SC_FAIL;
            if (d == 1)
                continue;
            // Members that only constrain objects both take every other value; when their
            // objects are disjoint, the exact "neither" for the other types is "object".
            if (object_only(bv[i]) && object_only(bv[j])) {
                struct view oi = *bv[i];
                oi.types = T_OBJ;
                if ((d = disjoint_views(sc, &oi, bv[j], 0)) == V_ERROR)
                    return SC_FAIL;
            }
            L->ov[i * n + j] = L->ov[j * n + i] = d == 1 ? 2 : 1;
            any_ov = 1;
        }
    if (any_ov && L->bare) {
        L->bare = 0;
        for (size_t i = 0; i < n; i++)
            if (!(bv[i] = branch_view(sc, &L->base, json_array_get(L->list, i), L->kw, i)))
                return SC_FAIL;
    }
    return 0;
}

// Overlapping members: branch i also excludes member j (a condition implying "not member j"),
// which makes the branches disjoint by construction. Where no such condition is found (or the
// alternatives would multiply past SC_MAX_ALTS) the oneOf is unsupported (lenient: an anyOf).
static int32_t cv_exclusive(struct sc *sc, struct cvlist *L)
{
    size_t n = L->n;
    struct view **bv = L->bv;
    const uint8_t *ov = L->ov;
    for (size_t i = 0; L->one && i < n; i++) {
        size_t prod = 1;
        for (size_t j = 0; j < n; j++) {
            if (ov[i * n + j] == 2)
                bv[i]->types = types_and(bv[i]->types, T_OBJ);
            if (ov[i * n + j] != 1)
                continue;
            json_t *m = json_array_get(L->list, j);
            int f = enum_minus(sc, bv[i], m);
            if (f == V_ERROR)
                return SC_FAIL;
            if (f == 1)
                continue;
            json_t *neg = discriminator(sc, bv[i], m);
            if (!neg && sc->err && sc->err->code != GL_OK)
                return SC_FAIL;
            if (!neg && n <= 16)
                neg = negate_member(sc, m, bv[i]);
            json_t *alts = neg ? json_object_get(neg, "anyOf") : NULL;
            prod *= alts ? json_array_size(alts) : 1;
            if (neg && prod <= SC_MAX_ALTS) {
                struct xp x;
                memset(&x, 0, sizeof x);
                size_t old = path_push_idx(sc, L->kw, j);
                gl_status st = xp_seed(&x, bv[i]) ? expand(sc, neg, bv[i], &x) : sc_nomem(sc);
                path_pop(sc, old);
                if (st == GL_OK && !view_set_parts(sc, bv[i], &x.parts))
                    st = sc_nomem(sc);
                xp_free(&x);
                if (st != GL_OK)
                    return SC_FAIL;
                continue;
            }
            if (sc->err && sc->err->code == GL_E_NOMEM)
                return SC_FAIL;
            char why[128];
            snprintf(why, sizeof why,
                     "branches %zu and %zu may both match (not provably exclusive)", i, j);
            if (sc_unsup(sc, "oneOf", why) != GL_OK)
                return SC_FAIL;
            i = j = n; // lenient: compiled as anyOf
        }
    }
    return 0;
}

// The GN_ALT of the branches that accept something (kids: [n] scratch), or SC_FAIL.
static int32_t cv_branches(struct sc *sc, const struct cvlist *L, int32_t *kids)
{
    int32_t nk = 0;
    for (size_t i = 0; i < L->n; i++) {
        size_t old = path_push_idx(sc, L->kw, i);
        sc->depth += !L->bare; // (compile_schema counts its own depth)
        int32_t k =
            L->bare ? compile_schema(sc, json_array_get(L->list, i)) : compile_view(sc, L->bv[i]);
        sc->depth -= !L->bare;
        path_pop(sc, old);
        if (k == SC_FAIL)
            return SC_FAIL;
        if (k != SC_NEVER)
            kids[nk++] = k;
    }
    return sc_alt(sc, kids, nk);
}

// A view to a node: negations rewritten, if/then/else turned into an anyOf list, then one
// anyOf/oneOf list at a time becomes a GN_ALT of its members (each carrying the rest, which
// recursion takes apart); with no list left, compile_plain. SC_NEVER / SC_FAIL.
static int32_t compile_view(struct sc *sc, struct view *v0)
{
    if (sc->depth > SC_MAX_DEPTH)
        return gl_err_set(sc->err, GL_E_LIMIT, "grammar: schema nests deeper than %d at %s",
                          SC_MAX_DEPTH, sc_ptr(sc)),
               SC_FAIL;
    struct view w = *v0, *v = &w;
    if (v->n_not && !v->enumv && rewrite_nots(sc, v) != GL_OK)
        return SC_FAIL;
    if (cv_ifs(sc, v) != 0)
        return SC_FAIL;
    if (!v->n_anyof && !v->n_oneof) {
        struct view copy = *v;
        return compile_plain(sc, &copy);
    }
    if (cv_product(sc, v) != 0)
        return SC_FAIL;
    // Take one list at a time: the branches still carry the other lists (recursion).
    struct cvlist L = {.base = *v};
    if (L.base.n_oneof) {
        L.list = L.base.oneof[--L.base.n_oneof];
        L.kw = "oneOf";
        L.one = 1;
    } else {
        L.list = L.base.anyof[--L.base.n_anyof];
        L.kw = "anyOf";
        L.one = 0;
    }
    L.n = json_array_size(L.list);
    if (L.n > SC_MAX_BRANCHES)
        return gl_err_set(sc->err, GL_E_LIMIT, "grammar: '%s' at %s has %zu branches, over %d",
                          L.kw, sc_ptr(sc), L.n, SC_MAX_BRANCHES),
               SC_FAIL;
    L.bv = gl_calloc(L.n, sizeof *L.bv);
    int32_t *kids = gl_malloc(L.n * sizeof *kids);
    int32_t r = SC_FAIL;
    if (!L.bv || !kids)
        sc_nomem(sc);
    else if (cv_member_views(sc, &L) == 0 && cv_overlaps(sc, &L) == 0 && cv_exclusive(sc, &L) == 0)
        r = cv_branches(sc, &L, kids);
    gl_free(L.bv);
    gl_free(kids);
    gl_free(L.ov);
    return r;
}

// Compiles a schema (object or boolean) once per (flattened view, raw mode).
static int32_t compile_schema(struct sc *sc, json_t *s)
{
    if (!s || json_is_true(s))
        return sc_any(sc);
    if (json_is_false(s))
        return SC_NEVER;
    if (sc->depth >= SC_MAX_DEPTH)
        return gl_err_set(sc->err, GL_E_LIMIT, "grammar: schema nests deeper than %d at %s",
                          SC_MAX_DEPTH, sc_ptr(sc)),
               SC_FAIL;
    if (sc_tick(sc) != GL_OK)
        return SC_FAIL;
    struct view *v = view_get(sc, s);
    if (!v)
        return SC_FAIL;
    uint8_t key[2 + sizeof v];
    key[0] = 'M';
    key[1] = (uint8_t)sc->raw;
    memcpy(key + 2, &v, sizeof v);
    struct hent *e = ht_find(&sc->memo, key, sizeof key);
    if (e) {
        if (e->i1 == 2)
            return e->i0;
        if ((intptr_t)e->p == sc->cdepth)
            return gl_err_set(sc->err, GL_E_INVAL,
                              "grammar: '$ref' cycle at %s: the schema refers to itself without "
                              "consuming input (through anyOf/oneOf)",
                              sc_ptr(sc)),
                   SC_FAIL;
        return e->i0; // recursion through an object or array: a grammar cycle
    }
    int32_t res = gl_gir_reserve(sc->b);
    if (res < 0)
        return SC_FAIL;
    e = ht_put(&sc->memo, key, sizeof key);
    if (!e)
        return sc_nomem(sc), SC_FAIL;
    e->i0 = res;
    e->i1 = 1;
    e->p = (void *)(intptr_t)sc->cdepth;
    sc->depth++;
    int32_t n = compile_view(sc, v);
    sc->depth--;
    if (n != SC_FAIL && sc_check_mem(sc) != GL_OK) // what this sub-schema's own nodes took
        n = SC_FAIL;
    e = ht_find(&sc->memo, key, sizeof key);
    GL_ASSERT(e);
    if (n == SC_FAIL)
        return SC_FAIL;
    struct gl_gnode copy;
    if (n == SC_NEVER) {
        int32_t nn = sc_never_node(sc);
        if (nn < 0)
            return SC_FAIL;
        copy = sc->b->ir->nodes[nn];
        gl_gir_set(sc->b, res, &copy);
        e->i0 = SC_NEVER;
        e->i1 = 2;
        return SC_NEVER;
    }
    copy = sc->b->ir->nodes[n];
    gl_gir_set(sc->b, res, &copy);
    e->i0 = res;
    e->i1 = 2;
    return res;
}

// ---- entry points ----

gl_status gl_schema_build_at(struct gl_gir_builder *b, struct gl_gctx *c, json_t *doc,
                             json_t *schema, const char *ptr, int raw_strings, int32_t *root,
                             struct gl_err *err)
{
    struct sc sc;
    memset(&sc, 0, sizeof sc);
    sc.b = b;
    sc.c = c;
    sc.err = err;
    sc.doc = doc ? doc : schema;
    sc.raw = raw_strings ? 1 : 0;
    json_t *dialect = json_object_get(sc.doc, "$schema");
    if (json_is_string(dialect) && (strstr(json_string_value(dialect), "draft-04") ||
                                    strstr(json_string_value(dialect), "draft-03")))
        sc.strict_int = 1;
    if (json_is_string(dialect) &&
        (sc.strict_int || strstr(json_string_value(dialect), "draft-06")))
        sc.pre7 = 1;
    sc.any = sc.any_raw = sc.never_node = sc.null_node = sc.bool_node = -1;
    sc.keep = json_array();
    sc.scratch = gl_arena_new();
    gl_status st = GL_OK;
    if (!sc.keep || !sc.scratch) {
        json_decref(sc.keep);
        gl_arena_free(sc.scratch);
        return gl_err_set(err, GL_E_NOMEM, "grammar: out of memory");
    }
    if (ptr && *ptr) {
        size_t n = strlen(ptr);
        if (path_reserve(&sc, n)) {
            memcpy(sc.path, ptr, n + 1);
            sc.plen = n;
        }
    }
    int32_t r = compile_schema(&sc, schema);
    if (r == SC_FAIL) {
        st = err && err->code != GL_OK ? err->code : GL_E_INVAL;
    } else if (r == SC_NEVER) {
        st = gl_err_set(err, GL_E_INVAL, "grammar: the schema at %s accepts no value", sc_ptr(&sc));
    } else {
        *root = r;
    }
    ht_free(&sc.views);
    ht_free(&sc.memo);
    ht_free(&sc.regexes);
    for (size_t i = 0; i < sc.n_views; i++)
        gl_free(sc.all_views[i]);
    gl_free(sc.all_views);
    gl_free(sc.ids);
    gl_free(sc.path);
    json_decref(sc.keep);
    gl_arena_free(sc.scratch);
    return st;
}

gl_status gl_schema_build(struct gl_gir_builder *b, struct gl_gctx *c, json_t *schema,
                          int32_t *root, struct gl_err *err)
{
    return gl_schema_build_at(b, c, schema, schema, "", 0, root, err);
}
