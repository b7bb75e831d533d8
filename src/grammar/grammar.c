// SPDX-License-Identifier: MIT
// grammar: the public API of src/grammar/. Compiling dispatches to the front ends under one
// time and node budget and validates the IR; grammars are refcounted and cached by a canonical
// key (kind, the options that change the language, the source with JSON re-serialised with
// sorted keys), hashed with FNV-1a 64 and compared in full on a hit. The matcher follows one
// sequence: the current match state, a history of states (one per accepted step) for exact
// rollback, the stop set, and the masks of mask.c.
// Invariant: a matcher's mask allows exactly the tokens gl_matcher_accept accepts.
#include "grammar/frontend.h"
#include "grammar/mask.h"
#include "grammar/regex.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GL_WS_MAX_LIMIT 1024 // largest whitespace run a grammar may allow

struct gl_grammar_opts gl_grammar_default_opts(void)
{
    struct gl_grammar_opts o;
    memset(&o, 0, sizeof o);
    o.ws_max = 16;
    o.ordered_keys = 0;
    o.lenient = 0;
    o.compile_budget_us = 1000000;
    o.max_nodes = 1000000;
    o.max_regex_states = 65536;
    o.max_compile_bytes = (int64_t)256 << 20;
    return o;
}

static gl_status check_opts(const struct gl_grammar_opts *o, struct gl_err *err)
{
    if (o->ws_max < 0 || o->ws_max > GL_WS_MAX_LIMIT)
        return gl_err_set(err, GL_E_INVAL, "grammar: ws_max %d outside 0..%d", (int)o->ws_max,
                          GL_WS_MAX_LIMIT);
    if (o->compile_budget_us < 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: negative compile budget");
    if (o->max_nodes <= 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: max_nodes %d must be positive",
                          (int)o->max_nodes);
    if (o->max_regex_states < 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: negative max_regex_states");
    if (o->max_compile_bytes < 0)
        return gl_err_set(err, GL_E_INVAL, "grammar: negative max_compile_bytes");
    return GL_OK;
}

// ---- canonical key ----

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

// A parsed source and its canonical key: "<kind> <ws_max> <ordered> <lenient> <closed>\n" +
// source, where JSON sources are re-serialised compactly with sorted keys (so key order, spacing
// and escape spelling do not matter). The budgets (time, nodes, DFA states) only decide whether a
// compile succeeds, not the language, so they are not part of the key.
struct gl_gsrc {
    json_t *json; // parsed JSON source (schema, choice list, tools), or NULL
    char *key;
    size_t key_len;
    uint64_t hash;
};

static void gsrc_free(struct gl_gsrc *s)
{
    json_decref(s->json);
    gl_free(s->key);
    memset(s, 0, sizeof *s);
}

// A schema whose integer literal does not fit jansson's int64 (Snowplow's "maximum":
// 9223372036854776000): parsed again with every integer literal of 19+ digits spelled as a real
// (".0" appended), the same number to JSON Schema (1 and 1.0 are equal). Strings are skipped.
// NULL when that does not parse either (the first error is reported).
static json_t *load_big_ints_as_reals(const char *src, size_t len)
{
    char *t = gl_malloc(len + (len / 19 + 1) * 2 + 1);
    if (!t)
        return NULL;
    size_t o = 0;
    int in_str = 0;
    for (size_t i = 0; i < len;) {
        char c = src[i];
        if (in_str) {
            t[o++] = c;
            i++;
            if (c == '\\' && i < len)
                t[o++] = src[i++];
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            t[o++] = src[i++];
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) {
            t[o++] = src[i++];
            continue;
        }
        size_t j = i + (c == '-'), digits = 0;
        while (j < len && src[j] >= '0' && src[j] <= '9')
            j++, digits++;
        int integer = j >= len || (src[j] != '.' && src[j] != 'e' && src[j] != 'E');
        memcpy(t + o, src + i, j - i);
        o += j - i;
        if (integer && digits >= 19) {
            t[o++] = '.';
            t[o++] = '0';
        }
        i = j;
    }
    json_t *j = json_loadb(t, o, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    gl_free(t);
    return j;
}

static gl_status gsrc_key(struct gl_gsrc *s, int kind, const struct gl_grammar_opts *o,
                          const char *body, size_t body_len, const char *tail, struct gl_err *err)
{
    char head[96];
    int hn = snprintf(head, sizeof head, "%d %d %d %d %d\n", kind, (int)o->ws_max,
                      o->ordered_keys ? 1 : 0, o->lenient ? 1 : 0, o->closed_objects ? 1 : 0);
    size_t tn = tail ? strlen(tail) + 1 : 0;
    size_t n = (size_t)hn + body_len + tn;
    s->key = gl_malloc(n + 1);
    if (!s->key)
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the cache key");
    memcpy(s->key, head, (size_t)hn);
    if (body_len)
        memcpy(s->key + hn, body, body_len);
    if (tn) {
        s->key[(size_t)hn + body_len] = '\0'; // separates the tools from the function name
        memcpy(s->key + (size_t)hn + body_len + 1, tail, tn - 1);
    }
    s->key[n] = '\0';
    s->key_len = n;
    s->hash = fnv1a(0xcbf29ce484222325ull, s->key, n);
    return GL_OK;
}

// Key of an already parsed JSON value (tools for ATEM).
static gl_status gsrc_key_json(struct gl_gsrc *s, int kind, const struct gl_grammar_opts *o,
                               const json_t *j, const char *tail, struct gl_err *err)
{
    char *canon = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    if (!canon)
        return gl_err_set(err, GL_E_NOMEM, "grammar: cannot serialise the source");
    gl_status st = gsrc_key(s, kind, o, canon, strlen(canon), tail, err);
    free(canon);
    return st;
}

static gl_status gsrc_parse(struct gl_gsrc *s, enum gl_grammar_kind kind, const char *src,
                            size_t len, const struct gl_grammar_opts *o, struct gl_err *err)
{
    memset(s, 0, sizeof *s);
    if (!src && len)
        return gl_err_set(err, GL_E_INVAL, "grammar: NULL source");
    switch (kind) {
    case GL_GRAMMAR_JSON_SCHEMA: {
        json_error_t je;
        s->json = json_loadb(src ? src : "", len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!s->json && strstr(je.text, "too big integer"))
            s->json = load_big_ints_as_reals(src, len);
        if (!s->json)
            return gl_err_set(err, GL_E_INVAL,
                              "grammar: JSON Schema is not valid JSON: %s (line %d, column %d, "
                              "byte %d)",
                              je.text, je.line, je.column, je.position);
        return gsrc_key_json(s, kind, o, s->json, NULL, err);
    }
    case GL_GRAMMAR_JSON_OBJECT:
        // Open whatever closed_objects says: json_object asks for any object.
        s->json = json_pack("{s:s,s:b}", "type", "object", "additionalProperties", 1);
        if (!s->json)
            return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the json_object schema");
        return gsrc_key(s, kind, o, NULL, 0, NULL, err);
    case GL_GRAMMAR_CHOICE: {
        // Canonical when it parses; a malformed list keeps its bytes and fails in the front end.
        json_t *j = json_loadb(src ? src : "", len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        gl_status st =
            j ? gsrc_key_json(s, kind, o, j, NULL, err) : gsrc_key(s, kind, o, src, len, NULL, err);
        json_decref(j);
        return st;
    }
    case GL_GRAMMAR_REGEX:
    case GL_GRAMMAR_GBNF:
        return gsrc_key(s, kind, o, src, len, NULL, err);
    case GL_GRAMMAR_ATEM_TURN: {
        json_error_t je;
        json_t *spec = json_loadb(src ? src : "", len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!spec)
            return gl_err_set(err, GL_E_INVAL,
                              "atem_turn: spec is not valid JSON: %s (line %d, column %d)", je.text,
                              je.line, je.column);
        gl_status st = gl_fe_atem_turn_canon(spec, &s->json, err);
        json_decref(spec);
        return st == GL_OK ? gsrc_key_json(s, kind, o, s->json, NULL, err) : st;
    }
    }
    return gl_err_set(err, GL_E_INVAL, "grammar: unknown constraint kind %d", (int)kind);
}

// ---- compile ----

static struct gl_grammar *grammar_alloc(int kind, const struct gl_grammar_opts *o)
{
    struct gl_grammar *g = gl_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->refs = 1;
    g->kind = kind;
    g->opts = *o;
    g->mcache_cap = GL_MASK_CACHE_DEFAULT;
    g->mcache_min_nodes = GL_MASK_CACHE_MIN_NODES;
    return g;
}

// Arms g's meter on this thread (gl_grammar_bytes); returns the meter to restore.
static struct gl_alloc_meter *charge(struct gl_grammar *g)
{
    return gl_alloc_meter_swap(&g->mem);
}

static void grammar_destroy(struct gl_grammar *g)
{
    struct gl_alloc_meter *prev = charge(g); // freed under the meter they were charged to
    gl_mask_cache_free(g->mcache);
    for (int i = 0; i < 3; i++)
        gl_short_free(g->shortest[i]);
    gl_gir_free(&g->ir);
    gl_free(g->warnings);
    gl_alloc_meter_swap(prev);
    gl_free(g->key); // allocated before the compile armed the meter
    gl_free(g);
}

int64_t gl_grammar_bytes(const struct gl_grammar *g)
{
    return g->mem.live + (int64_t)gl_alloc_size(g->key) + (int64_t)gl_alloc_size(g);
}

// The front end for g->kind builds into g->ir; then the IR is validated, the budget checked
// and the start state tried (a constraint that matches nothing is an error, not a matcher that
// can never move). Takes the key of s on success.
static gl_status grammar_build(struct gl_grammar *g, struct gl_gsrc *s, const char *src, size_t len,
                               const char *only_name, int32_t message_token, struct gl_err *err)
{
    const struct gl_grammar_opts *o = &g->opts;
    struct gl_gctx c;
    memset(&c, 0, sizeof c);
    c.opts = o;
    c.deadline_us = o->compile_budget_us > 0 ? gl_time_us() + o->compile_budget_us : 0;
    c.mem = &g->mem;
    struct gl_alloc_meter *prev = charge(g);
    struct gl_gir_builder b;
    gl_status st = gl_gir_builder_init(&b, &g->ir, o->max_nodes, err);
    if (st != GL_OK)
        goto done;
    g->ir.ws_max = o->ws_max;
    int32_t root = -1;
    switch (g->kind) {
    case GL_GRAMMAR_JSON_SCHEMA:
    case GL_GRAMMAR_JSON_OBJECT:
        st = gl_schema_build(&b, &c, s->json, &root, err);
        break;
    case GL_GRAMMAR_REGEX:
        st = gl_fe_regex_build(&b, &c, src ? src : "", len, &root, err);
        break;
    case GL_GRAMMAR_CHOICE:
        st = gl_fe_choice_build(&b, &c, src ? src : "", len, &root, err);
        break;
    case GL_GRAMMAR_GBNF:
        st = gl_gbnf_build(&b, &c, src ? src : "", len, &root, err);
        break;
    case GL_GRAMMAR__ATEM_TOOLS:
        st = gl_fe_atem_tools_build(&b, &c, s->json, only_name, message_token, &root, err);
        break;
    case GL_GRAMMAR_ATEM_TURN:
        st = gl_fe_atem_turn_build(&b, &c, s->json, &root, err);
        break;
    default:
        st = gl_err_set(err, GL_E_INVAL, "grammar: unknown constraint kind %d", (int)g->kind);
    }
    if (st != GL_OK)
        goto done;
    if (root < 0 || root >= g->ir.n_nodes) {
        st = gl_err_set(err, GL_E_INTERNAL, "grammar: front end returned root %d of %d nodes",
                        (int)root, (int)g->ir.n_nodes);
        goto done;
    }
    g->ir.root = root;
    g->ir.ws_max = o->ws_max;
    st = gl_gir_validate(&g->ir, err);
    if (st != GL_OK)
        goto done;
    st = gl_gctx_check_time(&c, err);
    if (st != GL_OK)
        goto done;
    struct gl_mstate *start = NULL;
    st = gl_mstate_new(&start, &g->ir, NULL, err);
    if (st != GL_OK)
        goto done;
    gl_mstate_reset(start);
    int dead = gl_mstate_is_dead(start);
    gl_mstate_free(start);
    if (dead) {
        st = gl_err_set(err, GL_E_INVAL, "grammar: the constraint matches no output at all");
        goto done;
    }
    if ((st = gl_gctx_check_mem(&c, "the constraint", err)) != GL_OK)
        goto done;
    g->warnings = c.warnings ? c.warnings : gl_strdup("");
    c.warnings = NULL;
    if (!g->warnings) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for warnings");
        goto done;
    }
    g->hash = s->hash;
    g->key = s->key;
    g->key_len = s->key_len;
    s->key = NULL;
done:
    gl_free(c.warnings);
    gl_alloc_meter_swap(prev);
    return st;
}

static gl_status compile_parsed(struct gl_grammar **out, int kind, struct gl_gsrc *s,
                                const char *src, size_t len, const char *only_name,
                                int32_t message_token, const struct gl_grammar_opts *o,
                                struct gl_err *err)
{
    struct gl_grammar *g = grammar_alloc(kind, o);
    if (!g)
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for a grammar");
    gl_status st = grammar_build(g, s, src, len, only_name, message_token, err);
    if (st != GL_OK) {
        grammar_destroy(g);
        return st;
    }
    *out = g;
    return GL_OK;
}

gl_status gl_grammar_compile(struct gl_grammar **out, enum gl_grammar_kind kind, const char *src,
                             size_t len, const struct gl_grammar_opts *opts, struct gl_err *err)
{
    *out = NULL;
    struct gl_grammar_opts def = gl_grammar_default_opts();
    const struct gl_grammar_opts *o = opts ? opts : &def;
    gl_status st = check_opts(o, err);
    if (st != GL_OK)
        return st;
    struct gl_gsrc s;
    st = gsrc_parse(&s, kind, src, len, o, err);
    if (st == GL_OK)
        st = compile_parsed(out, (int)kind, &s, src, len, NULL, -1, o, err);
    gsrc_free(&s);
    return st;
}

gl_status gl_grammar_compile_atem_tools(struct gl_grammar **out, const void *tools_json,
                                        const char *only_name, int32_t message_token,
                                        const struct gl_grammar_opts *opts, struct gl_err *err)
{
    *out = NULL;
    struct gl_grammar_opts def = gl_grammar_default_opts();
    const struct gl_grammar_opts *o = opts ? opts : &def;
    gl_status st = check_opts(o, err);
    if (st != GL_OK)
        return st;
    if (!tools_json)
        return gl_err_set(err, GL_E_INVAL, "grammar: tool call grammar without tools");
    struct gl_gsrc s;
    memset(&s, 0, sizeof s);
    // The front end reads the caller's tools; the key holds their canonical text.
    s.json = json_incref((json_t *)(uintptr_t)tools_json);
    char tail[32];
    snprintf(tail, sizeof tail, "%d", (int)message_token);
    st = gsrc_key_json(&s, GL_GRAMMAR__ATEM_TOOLS, o, s.json, tail, err);
    if (st == GL_OK && only_name) {
        // Append the forced name after a second separator.
        size_t nl = strlen(only_name);
        char *k = gl_realloc(s.key, s.key_len + nl + 2);
        if (!k) {
            st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the cache key");
        } else {
            s.key = k;
            s.key[s.key_len] = '\0';
            memcpy(s.key + s.key_len + 1, only_name, nl + 1);
            s.key_len += nl + 1;
            s.hash = fnv1a(0xcbf29ce484222325ull, s.key, s.key_len);
        }
    }
    if (st == GL_OK)
        st = compile_parsed(out, GL_GRAMMAR__ATEM_TOOLS, &s, NULL, 0, only_name, message_token, o,
                            err);
    gsrc_free(&s);
    return st;
}

struct gl_grammar *gl_grammar_ref(struct gl_grammar *g)
{
    GL_ASSERT(g && g->refs > 0);
    g->refs++;
    return g;
}

void gl_grammar_unref(struct gl_grammar *g)
{
    if (!g)
        return;
    GL_ASSERT(g->refs > 0);
    if (--g->refs == 0)
        grammar_destroy(g);
}

const char *gl_grammar_warnings(const struct gl_grammar *g)
{
    return g->warnings ? g->warnings : "";
}

// Every run of at most 16 whitespace bytes is matched iff every DFA state reachable
// from the start by at most 16 of the bytes [ \t\n\r] accepts (acceptance does not depend on the
// path), so a breadth-first walk over those states, at most 64 of them, decides it exactly.
#define WS_PATTERN_RUN    16
#define WS_PATTERN_STATES 64
gl_status gl_grammar_ws_pattern(const char *src, size_t len, int32_t *ws_max, struct gl_err *err)
{
    static const uint8_t ws[4] = {' ', '\t', '\n', '\r'};
    struct gl_regex *re = NULL;
    gl_status st = gl_regex_compile(&re, src ? src : "", len, 0, 4096, err);
    if (st != GL_OK)
        return st;
    uint32_t seen[WS_PATTERN_STATES];
    int n = 0, all = 1;
    seen[n++] = gl_regex_start(re);
    for (int depth = 0, lo = 0; depth < WS_PATTERN_RUN && all; depth++) {
        int hi = n;
        for (int i = lo; i < hi && all; i++)
            for (int b = 0; b < 4 && all; b++) {
                uint32_t t = gl_regex_step(re, seen[i], ws[b]);
                int known = 0;
                for (int j = 0; j < n && !known; j++)
                    known = seen[j] == t;
                if (known)
                    continue;
                if (n == WS_PATTERN_STATES || !gl_regex_is_accept(re, t))
                    all = 0;
                else
                    seen[n++] = t;
            }
        lo = hi;
    }
    int empty = gl_regex_is_accept(re, seen[0]);
    gl_regex_free(re);
    if (!empty)
        return gl_err_set(err, GL_E_INVAL,
                          "the pattern does not match the empty string, so compact JSON would "
                          "break it (whitespace is optional everywhere in JSON)");
    *ws_max = all ? WS_PATTERN_RUN : 0;
    return GL_OK;
}

uint64_t gl_grammar_hash(const struct gl_grammar *g)
{
    return g->hash;
}

// ---- grammar cache ----

struct gl_gcentry {
    uint64_t stamp; // LRU clock value of the last use
    struct gl_grammar *g;
};

struct gl_grammar_cache {
    int32_t cap, n;
    uint64_t clock;
    struct gl_gcentry *e;
    int64_t max_bytes; // 0: no byte budget
    int64_t bytes;     // sum of gl_grammar_bytes at the last budget_fit
    int64_t evictions; // entries dropped for the byte budget
};

void gl_grammar_cache_set_budget(struct gl_grammar_cache *c, int64_t max_bytes)
{
    c->max_bytes = max_bytes > 0 ? max_bytes : 0;
}

gl_status gl_grammar_cache_new(struct gl_grammar_cache **out, int capacity, struct gl_err *err)
{
    *out = NULL;
    if (capacity <= 0 || capacity > 1000000)
        return gl_err_set(err, GL_E_INVAL, "grammar: cache capacity %d outside 1..1000000",
                          capacity);
    struct gl_grammar_cache *c = gl_calloc(1, sizeof *c);
    if (c)
        c->e = gl_calloc((size_t)capacity, sizeof *c->e);
    if (!c || !c->e) {
        gl_free(c);
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for a cache of %d", capacity);
    }
    c->cap = capacity;
    *out = c;
    return GL_OK;
}

void gl_grammar_cache_free(struct gl_grammar_cache *c)
{
    if (!c)
        return;
    for (int32_t i = 0; i < c->n; i++)
        gl_grammar_unref(c->e[i].g);
    gl_free(c->e);
    gl_free(c);
}

// A new reference to the cached grammar with this source key, or NULL.
static struct gl_grammar *cache_find(struct gl_grammar_cache *c, uint64_t hash, const char *key,
                                     size_t key_len)
{
    for (int32_t i = 0; i < c->n; i++) {
        struct gl_grammar *g = c->e[i].g;
        if (g->hash == hash && g->key_len == key_len && !memcmp(g->key, key, key_len)) {
            c->e[i].stamp = ++c->clock;
            return gl_grammar_ref(g);
        }
    }
    return NULL;
}

// Drops the least recently used entries until the entries' bytes, read now (they grow after
// insertion), fit the budget.
static void budget_fit(struct gl_grammar_cache *c)
{
    int64_t total = 0;
    for (int32_t i = 0; i < c->n; i++)
        total += gl_grammar_bytes(c->e[i].g);
    while (c->max_bytes > 0 && total > c->max_bytes && c->n > 0) {
        int32_t lru = 0;
        for (int32_t i = 1; i < c->n; i++)
            if (c->e[i].stamp < c->e[lru].stamp)
                lru = i;
        struct gl_grammar *g = c->e[lru].g;
        total -= gl_grammar_bytes(g);
        gl_grammar_unref(g);
        c->e[lru] = c->e[--c->n];
        c->evictions++;
    }
    c->bytes = total;
}

void gl_grammar_cache_trim(struct gl_grammar_cache *c, pthread_mutex_t *mu)
{
    if (mu)
        pthread_mutex_lock(mu);
    budget_fit(c);
    if (mu)
        pthread_mutex_unlock(mu);
    gl_mem_release();
}

void gl_grammar_cache_stats(struct gl_grammar_cache *c, pthread_mutex_t *mu,
                            struct gl_grammar_cache_stats *out)
{
    if (mu)
        pthread_mutex_lock(mu);
    out->entries = c->n;
    out->bytes = c->bytes;
    out->evictions = c->evictions;
    if (mu)
        pthread_mutex_unlock(mu);
}

static void cache_insert(struct gl_grammar_cache *c, struct gl_grammar *g)
{
    struct gl_gcentry *e;
    if (c->n < c->cap) {
        e = &c->e[c->n++];
    } else {
        e = &c->e[0];
        for (int32_t i = 1; i < c->n; i++)
            if (c->e[i].stamp < e->stamp)
                e = &c->e[i];
        gl_grammar_unref(e->g);
    }
    e->g = gl_grammar_ref(g);
    e->stamp = ++c->clock;
}

// mu (may be NULL) guards the cache and every grammar's refcount: held for the lookup and the
// insertion, never for the parse or the compile (a private grammar until inserted), so one
// request's slow compile (up to compile_budget_us) stalls no other grammar user.
static gl_status cache_get(struct gl_grammar_cache *c, pthread_mutex_t *mu, struct gl_grammar **out,
                           enum gl_grammar_kind kind, const char *src, size_t len,
                           const struct gl_grammar_opts *opts, struct gl_err *err)
{
    *out = NULL;
    struct gl_grammar_opts def = gl_grammar_default_opts();
    const struct gl_grammar_opts *o = opts ? opts : &def;
    gl_status st = check_opts(o, err);
    if (st != GL_OK)
        return st;
    struct gl_gsrc s;
    st = gsrc_parse(&s, kind, src, len, o, err);
    if (st != GL_OK) {
        gsrc_free(&s);
        return st;
    }
    if (mu)
        pthread_mutex_lock(mu);
    *out = cache_find(c, s.hash, s.key, s.key_len);
    if (mu)
        pthread_mutex_unlock(mu);
    if (*out) {
        gsrc_free(&s);
        return GL_OK;
    }
    struct gl_grammar *g = NULL;
    st = compile_parsed(&g, (int)kind, &s, src, len, NULL, -1, o, err);
    if (st != GL_OK) {
        gsrc_free(&s);
        return st;
    }
    if (mu)
        pthread_mutex_lock(mu);
    // compiled meanwhile by another thread: keep one copy (the key moved into g)
    *out = cache_find(c, g->hash, g->key, g->key_len);
    if (*out)
        gl_grammar_unref(g);
    else
        cache_insert(c, *out = g);
    budget_fit(c);
    if (mu)
        pthread_mutex_unlock(mu);
    gsrc_free(&s);
    gl_mem_release();
    return GL_OK;
}

gl_status gl_grammar_cache_get(struct gl_grammar_cache *c, struct gl_grammar **out,
                               enum gl_grammar_kind kind, const char *src, size_t len,
                               const struct gl_grammar_opts *opts, struct gl_err *err)
{
    return cache_get(c, NULL, out, kind, src, len, opts, err);
}

gl_status gl_grammar_cache_get_locked(struct gl_grammar_cache *c, pthread_mutex_t *mu,
                                      struct gl_grammar **out, enum gl_grammar_kind kind,
                                      const char *src, size_t len,
                                      const struct gl_grammar_opts *opts, struct gl_err *err)
{
    return cache_get(c, mu, out, kind, src, len, opts, err);
}

// ---- matcher ----

struct gl_matcher {
    struct gl_grammar *g; // referenced
    const struct gl_gvocab *v;
    int32_t *stop; // the stop set, sorted, unique
    int n_stop;
    struct gl_mstate *cur;
    struct gl_mstate *tmp, *tmp2; // scratch
    // hist[i] (i < n_hist): the state before accepted step i. Entries up to n_alloc are allocated
    // and reused after a rollback; growth doubles (amortised O(1) per token).
    struct gl_mstate **hist;
    int64_t n_hist, n_alloc, cap_hist;
    int finished;
    struct gl_matcher_stats stats;
};

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int is_stop(const struct gl_matcher *m, int32_t id)
{
    return bsearch(&id, m->stop, (size_t)m->n_stop, sizeof id, cmp_i32) != NULL;
}

static int is_expected(const struct gl_mstate *s, int32_t id)
{
    int32_t buf[64];
    int n = gl_mstate_expected_tokens(s, buf, 64);
    if (n <= 64) {
        for (int i = 0; i < n; i++)
            if (buf[i] == id)
                return 1;
        return 0;
    }
    int32_t *big = gl_malloc((size_t)n * sizeof *big);
    if (!big)
        return 0;
    int k = gl_mstate_expected_tokens(s, big, n), hit = 0;
    for (int i = 0; i < k && i < n; i++)
        hit |= big[i] == id;
    gl_free(big);
    return hit;
}

static gl_status matcher_new(struct gl_matcher **out, struct gl_grammar *g,
                             const struct gl_gvocab *v, const int32_t *stop_ids, int n_stop,
                             struct gl_err *err)
{
    *out = NULL;
    if (!g || !v)
        return gl_err_set(err, GL_E_INVAL, "grammar: matcher needs a grammar and a vocabulary");
    if (n_stop < 0 || (n_stop > 0 && !stop_ids))
        return gl_err_set(err, GL_E_INVAL, "grammar: bad stop set (%d ids)", n_stop);
    int32_t nv = gl_gvocab_n_vocab(v);
    for (int i = 0; i < n_stop; i++)
        if (stop_ids[i] < 0 || stop_ids[i] >= nv)
            return gl_err_set(err, GL_E_INVAL, "grammar: stop id %d (index %d) outside 0..%d",
                              (int)stop_ids[i], i, (int)nv - 1);
    struct gl_matcher *m = gl_calloc(1, sizeof *m);
    if (!m)
        return gl_err_set(err, GL_E_NOMEM, "grammar: no memory for a matcher");
    m->g = gl_grammar_ref(g);
    m->v = v;
    gl_status st = GL_OK;
    m->stop = gl_malloc((size_t)(n_stop ? n_stop : 1) * sizeof *m->stop);
    if (!m->stop) {
        st = gl_err_set(err, GL_E_NOMEM, "grammar: no memory for the stop set");
        goto fail;
    }
    if (n_stop)
        memcpy(m->stop, stop_ids, (size_t)n_stop * sizeof *m->stop);
    qsort(m->stop, (size_t)n_stop, sizeof *m->stop, cmp_i32);
    for (int i = 0; i < n_stop; i++)
        if (m->n_stop == 0 || m->stop[m->n_stop - 1] != m->stop[i])
            m->stop[m->n_stop++] = m->stop[i];
    st = gl_mstate_new(&m->cur, &g->ir, NULL, err);
    if (st == GL_OK)
        st = gl_mstate_new(&m->tmp, &g->ir, NULL, err);
    if (st == GL_OK)
        st = gl_mstate_new(&m->tmp2, &g->ir, NULL, err);
    if (st == GL_OK)
        st = gl_mask_prepare(g, v, err);
    if (st != GL_OK)
        goto fail;
    gl_matcher_reset(m);
    *out = m;
    return GL_OK;
fail:
    gl_matcher_free(m);
    return st;
}

// Frees all of m but its grammar reference.
static void matcher_release(struct gl_matcher *m)
{
    for (int64_t i = 0; i < m->n_alloc; i++)
        gl_mstate_free(m->hist[i]);
    gl_free(m->hist);
    gl_mstate_free(m->cur);
    gl_mstate_free(m->tmp);
    gl_mstate_free(m->tmp2);
    gl_free(m->stop);
    gl_free(m);
}

void gl_matcher_reset(struct gl_matcher *m)
{
    gl_mstate_reset(m->cur);
    m->n_hist = 0;
    m->finished = 0;
}

// Makes sure hist[n_hist] exists (allocating on first use); 0 when out of memory.
static int hist_slot(struct gl_matcher *m)
{
    if (m->n_hist < m->n_alloc)
        return 1;
    if (m->n_alloc == m->cap_hist) {
        int64_t cap = m->cap_hist ? m->cap_hist * 2 : 64;
        struct gl_mstate **h = gl_realloc(m->hist, (size_t)cap * sizeof *h);
        if (!h)
            return 0;
        m->hist = h;
        m->cap_hist = cap;
    }
    if (gl_mstate_new(&m->hist[m->n_alloc], &m->g->ir, NULL, NULL) != GL_OK)
        return 0;
    m->n_alloc++;
    return 1;
}

// Commits m->tmp as the new current state, keeping the old one in the history (pointer swaps,
// no copy). Returns 0 (nothing changed) when the history cannot grow.
static int commit_tmp(struct gl_matcher *m)
{
    if (!hist_slot(m)) {
        GL_LOGE("grammar: no memory for the matcher history; token refused");
        return 0;
    }
    struct gl_mstate *old = m->cur;
    m->cur = m->tmp;
    m->tmp = m->hist[m->n_hist];
    m->hist[m->n_hist++] = old;
    return 1;
}

static void matcher_fill_mask(struct gl_matcher *m, uint32_t *mask)
{
    size_t words = gl_gvocab_mask_words(m->v);
    if (m->finished) {
        memset(mask, 0, words * sizeof *mask);
        return;
    }
    gl_mask_fill(m->g, m->v, m->cur, mask, &m->stats);
    int can_end = gl_mstate_can_end(m->cur);
    for (int i = 0; i < m->n_stop; i++) {
        int32_t id = m->stop[i];
        uint32_t bit = 1u << (id & 31);
        if (can_end)
            mask[id >> 5] |= bit;
        else if ((mask[id >> 5] & bit) && !is_expected(m->cur, id))
            mask[id >> 5] &= ~bit;
    }
}

static int matcher_accept(struct gl_matcher *m, int32_t token)
{
    if (m->finished || token < 0 || token >= gl_gvocab_n_vocab(m->v))
        return 0;
    // A token literal the grammar names (GN_TOKEN) wins over the stop meaning of the same id.
    gl_mstate_copy(m->tmp, m->cur);
    if (gl_mstate_advance_token(m->tmp, token))
        return commit_tmp(m);
    if (is_stop(m, token)) {
        if (!gl_mstate_can_end(m->cur))
            return 0;
        gl_mstate_copy(m->tmp, m->cur);
        if (!commit_tmp(m))
            return 0;
        m->finished = 1;
        return 1;
    }
    if (gl_gvocab_is_excluded(m->v, token))
        return 0;
    size_t len;
    const uint8_t *p = gl_gvocab_token(m->v, token, &len);
    for (size_t i = 0; i < len; i++)
        if (!gl_mstate_advance_byte(m->tmp, p[i]))
            return 0;
    return commit_tmp(m);
}

static int matcher_accept_bytes(struct gl_matcher *m, const void *p, size_t len)
{
    if (m->finished || (!p && len))
        return 0;
    const uint8_t *b = p;
    gl_mstate_copy(m->tmp, m->cur);
    for (size_t i = 0; i < len; i++)
        if (!gl_mstate_advance_byte(m->tmp, b[i]))
            return 0;
    return commit_tmp(m);
}

static int matcher_can_end(const struct gl_matcher *m)
{
    return m->finished || gl_mstate_can_end(m->cur);
}

int gl_matcher_is_finished(const struct gl_matcher *m)
{
    return m->finished;
}

gl_status gl_matcher_rollback(struct gl_matcher *m, int n, struct gl_err *err)
{
    if (n < 0 || n > m->n_hist)
        return gl_err_set(err, GL_E_INVAL, "grammar: cannot roll back %d of %lld accepted steps", n,
                          (long long)m->n_hist);
    if (n == 0)
        return GL_OK;
    int64_t k = m->n_hist - n;
    struct gl_mstate *s = m->cur;
    m->cur = m->hist[k];
    m->hist[k] = s; // now a spare slot
    m->n_hist = k;
    m->finished = 0; // nothing is accepted after a stop token, so only the last step can be one
    return GL_OK;
}

int64_t gl_matcher_n_accepted(const struct gl_matcher *m)
{
    return m->n_hist;
}

static size_t matcher_forced_bytes(struct gl_matcher *m, char *out, size_t cap)
{
    if (m->finished)
        return 0;
    struct gl_mstate *a = m->tmp, *b = m->tmp2;
    gl_mstate_copy(a, m->cur);
    size_t n = 0;
    int32_t tok;
    while (n < cap) {
        // A complete document may stop here, and a token literal is not a byte: not forced.
        if (gl_mstate_can_end(a) || gl_mstate_expected_tokens(a, &tok, 1) > 0)
            break;
        gl_mstate_copy(b, a);
        int found = -1;
        for (int c = 0; c < 256; c++) {
            if (!gl_mstate_advance_byte(b, (uint8_t)c))
                continue; // b unchanged
            if (found >= 0) {
                found = -2;
                break;
            }
            found = c;
            gl_mstate_copy(b, a);
        }
        if (found < 0)
            break;
        int ok = gl_mstate_advance_byte(a, (uint8_t)found);
        GL_ASSERT(ok);
        out[n++] = (char)found;
    }
    return n;
}

void gl_matcher_stats(const struct gl_matcher *m, struct gl_matcher_stats *out)
{
    *out = m->stats;
}

static int32_t matcher_forced_tokens(struct gl_matcher *m, int32_t *out, int32_t cap,
                                     uint32_t *mask)
{
    size_t words = gl_gvocab_mask_words(m->v);
    int32_t n = 0;
    for (;;) {
        matcher_fill_mask(m, mask);
        if (n >= cap || m->finished)
            break;
        int32_t only = -1;
        for (size_t w = 0; w < words; w++) {
            uint32_t x = mask[w];
            if (!x)
                continue;
            if (only >= 0 || (x & (x - 1))) { // a second allowed token: a real choice
                only = -2;
                break;
            }
            only = (int32_t)(w * 32 + (size_t)__builtin_ctz(x));
        }
        if (only < 0 || is_stop(m, only) || !matcher_accept(m, only))
            break;
        out[n++] = only;
    }
    return n;
}

// ---- the public matcher calls: each charges what it allocates or frees to the grammar ----

gl_status gl_matcher_new(struct gl_matcher **out, struct gl_grammar *g, const struct gl_gvocab *v,
                         const int32_t *stop_ids, int n_stop, struct gl_err *err)
{
    if (!g) {
        *out = NULL;
        return gl_err_set(err, GL_E_INVAL, "grammar: matcher needs a grammar and a vocabulary");
    }
    struct gl_alloc_meter *prev = charge(g);
    gl_status st = matcher_new(out, g, v, stop_ids, n_stop, err);
    gl_alloc_meter_swap(prev);
    return st;
}

void gl_matcher_free(struct gl_matcher *m)
{
    if (!m)
        return;
    struct gl_grammar *g = m->g;
    struct gl_alloc_meter *prev = charge(g);
    matcher_release(m);
    gl_alloc_meter_swap(prev);
    gl_grammar_unref(g);
}

void gl_matcher_fill_mask(struct gl_matcher *m, uint32_t *mask)
{
    struct gl_alloc_meter *prev = charge(m->g);
    matcher_fill_mask(m, mask);
    gl_alloc_meter_swap(prev);
}

int gl_matcher_accept(struct gl_matcher *m, int32_t token)
{
    struct gl_alloc_meter *prev = charge(m->g);
    int ok = matcher_accept(m, token);
    gl_alloc_meter_swap(prev);
    return ok;
}

int gl_matcher_accept_bytes(struct gl_matcher *m, const void *p, size_t len)
{
    struct gl_alloc_meter *prev = charge(m->g);
    int ok = matcher_accept_bytes(m, p, len);
    gl_alloc_meter_swap(prev);
    return ok;
}

int gl_matcher_can_end(const struct gl_matcher *m)
{
    struct gl_alloc_meter *prev = charge(m->g); // may grow a regex DFA
    int ok = matcher_can_end(m);
    gl_alloc_meter_swap(prev);
    return ok;
}

size_t gl_matcher_forced_bytes(struct gl_matcher *m, char *out, size_t cap)
{
    struct gl_alloc_meter *prev = charge(m->g);
    size_t n = matcher_forced_bytes(m, out, cap);
    gl_alloc_meter_swap(prev);
    return n;
}

int32_t gl_matcher_forced_tokens(struct gl_matcher *m, int32_t *out, int32_t cap, uint32_t *mask)
{
    struct gl_alloc_meter *prev = charge(m->g);
    int32_t n = matcher_forced_tokens(m, out, cap, mask);
    gl_alloc_meter_swap(prev);
    return n;
}

// ---- shortest completion (shortest.c) ----

// Unit weights of g->shortest[i]: upper (a byte and a token literal are a token each), token
// literals only, bytes only.
enum { SH_UPPER, SH_TOKENS, SH_BYTES };

static struct gl_short *short_table(struct gl_matcher *m, int which)
{
    static const int64_t w[3][2] = {{1, 1}, {0, 1}, {1, 0}};
    struct gl_grammar *g = m->g;
    struct gl_err err = {0};
    if (!g->shortest[which] &&
        gl_short_new(&g->shortest[which], &g->ir, w[which][0], w[which][1], &err) != GL_OK)
        GL_LOGE("grammar: %s", err.msg); // then the matcher reports no bound (-1)
    return g->shortest[which];
}

static int64_t short_value(struct gl_matcher *m, int which)
{
    struct gl_short *sh = short_table(m, which);
    return sh ? gl_short_state(sh, m->cur) : GL_SHORT_INF;
}

// One pass over the vocabulary (kept on the grammar for the last vocabulary seen): the longest
// token's bytes, and whether every single byte is a token of its own. Counting a byte as a token
// is an upper bound only when each of the 256 bytes is a token that masks may allow.
static void vocab_scan(struct gl_matcher *m)
{
    struct gl_grammar *g = m->g;
    if (g->sv == m->v)
        return;
    uint64_t seen[4] = {0};
    int32_t n = gl_gvocab_n_vocab(m->v), longest = 1;
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const uint8_t *p = gl_gvocab_token(m->v, id, &len);
        if (gl_gvocab_is_excluded(m->v, id) || !p)
            continue;
        if ((int64_t)len > longest)
            longest = (int32_t)len;
        if (len == 1)
            seen[p[0] >> 6] |= 1ull << (p[0] & 63);
    }
    g->sv_max_bytes = longest;
    g->sv_all_bytes = (seen[0] & seen[1] & seen[2] & seen[3]) == UINT64_MAX;
    g->sv = m->v;
}

static void matcher_shortest(struct gl_matcher *m, int64_t *lower, int64_t *upper)
{
    if (m->finished) {
        if (lower)
            *lower = 0;
        if (upper)
            *upper = 0;
        return;
    }
    vocab_scan(m);
    if (upper) {
        int64_t u = m->g->sv_all_bytes ? short_value(m, SH_UPPER) : GL_SHORT_INF;
        *upper = u >= GL_SHORT_INF ? -1 : u + 1;
    }
    if (lower) {
        int64_t t = short_value(m, SH_TOKENS), b = short_value(m, SH_BYTES);
        int64_t per = m->g->sv_max_bytes;
        *lower = t >= GL_SHORT_INF || b >= GL_SHORT_INF ? -1 : t + (b + per - 1) / per + 1;
    }
}

static void matcher_filter_within(struct gl_matcher *m, uint32_t *mask, int64_t remaining)
{
    vocab_scan(m);
    struct gl_short *sh = m->finished || !m->g->sv_all_bytes ? NULL : short_table(m, SH_UPPER);
    if (!sh)
        return;
    // The filter only narrows; should it leave nothing (no token judged to fit), the sampler
    // would have no token: then the mask stays as it was.
    size_t words = gl_gvocab_mask_words(m->v);
    uint32_t *keep = gl_malloc(words * sizeof *keep);
    if (!keep)
        return;
    memcpy(keep, mask, words * sizeof *keep);
    // after the token and before the stop token: remaining - 2 units
    gl_short_filter(m->g, sh, m->v, m->cur, m->tmp, mask, remaining - 2, m->stop, m->n_stop);
    uint32_t any = 0;
    for (size_t w = 0; w < words; w++)
        any |= mask[w];
    if (!any)
        memcpy(mask, keep, words * sizeof *keep);
    gl_free(keep);
}

// The tables built on first use are the grammar's: charged to it like the masks.
void gl_matcher_shortest(struct gl_matcher *m, int64_t *lower, int64_t *upper)
{
    struct gl_alloc_meter *prev = charge(m->g);
    matcher_shortest(m, lower, upper);
    gl_alloc_meter_swap(prev);
}

void gl_matcher_filter_within(struct gl_matcher *m, uint32_t *mask, int64_t remaining)
{
    struct gl_alloc_meter *prev = charge(m->g);
    matcher_filter_within(m, mask, remaining);
    gl_alloc_meter_swap(prev);
}

void gl_matcher_fill_mask_within(struct gl_matcher *m, uint32_t *mask, int64_t remaining)
{
    gl_matcher_fill_mask(m, mask);
    gl_matcher_filter_within(m, mask, remaining);
}
