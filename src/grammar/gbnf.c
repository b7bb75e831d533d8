// SPDX-License-Identifier: MIT
// GBNF front end: llama.cpp's grammar dialect (grammars/README.md) -> IR nodes. Accepted:
//   rules `name ::= alt | alt` (names [a-zA-Z0-9-]+, each defined once, start rule `root`);
//   string literals "..." and character classes [...] / [^...] with ranges, both with escapes
//   \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH (code points, written as UTF-8; any other
//   escape is an error); `.` (any code point, newline included); groups ( ); postfix * + ?
//   {m} {m,} {m,n} {,n} (stackable; counts <= 1,000,000); # comments; newlines inside groups and
//   after `|` (elsewhere a newline ends the rule); token literals <[id]> and, when the caller
//   gives gl_gctx.token_lookup, <text> for a token whose text is exactly "<text>" (<|eot|>).
// Rejected: negated tokens !<..> (GL_E_UNSUPPORTED); undefined rules, left recursion and open
// repetition of a possibly empty item (GL_E_INVAL, naming the rule and line:col), as llama.cpp;
// a rule defined twice (llama.cpp silently keeps the last definition).
// Semantics are over code points as in llama.cpp, compiled to bytes: literals are GN_BYTES of
// their UTF-8, classes are one-character regexes (GN_REGEX, surrogates excluded), so only valid
// UTF-8 ever matches a class. Literal alternatives with a common tail ("a" x | "b" x) are
// left-factored into one alternation regex, so long keyword lists stay one parse thread.
#include "base/buf.h"
#include "grammar/frontend.h"
#include "grammar/regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH   200     // nested groups
#define MAX_COUNT   1000000 // repetition bounds
#define MAX_CP      0x10FFFF
#define TIME_STRIDE 256 // items between deadline checks

// Open-addressing map from a byte string (borrowed from the source or the arena) to an index.
struct smap_ent {
    const char *k;
    size_t n;
    int32_t v;
};
struct smap {
    struct smap_ent *e;
    size_t cap, len;
};

struct rule {
    const char *name;
    size_t len;
    int32_t node;
    size_t ref_pos; // first reference (for "undefined rule" errors)
    size_t def_pos;
    int defined;
};

struct gp {
    const char *s;
    size_t n, pos;
    struct gl_gir_builder *b;
    struct gl_gctx *c;
    struct gl_err *err;
    struct smap rule_map; // name -> index into rules
    struct rule *rules;
    int32_t n_rules, cap_rules;
    struct smap class_map; // regex source -> node (classes and `.` compiled once)
    char **class_keys;     // owned copies of class_map keys
    int32_t n_class_keys, cap_class_keys;
    uint8_t *is_rule; // by node index - base: 1 for the rules' reserved nodes
    int32_t base, cap_is_rule;
    int32_t depth;
    uint32_t items;
};

static uint64_t hash_bytes(const char *p, size_t n)
{
    return gl_fnv1a(p, n);
}

static struct smap_ent *smap_slot(struct smap *m, const char *k, size_t n)
{
    size_t i = (size_t)hash_bytes(k, n) & (m->cap - 1);
    for (;;) {
        struct smap_ent *e = &m->e[i];
        if (!e->k || (e->n == n && memcmp(e->k, k, n) == 0))
            return e;
        i = (i + 1) & (m->cap - 1);
    }
}

static int32_t smap_get(const struct smap *m, const char *k, size_t n)
{
    if (!m->cap)
        return -1;
    struct smap_ent *e = smap_slot((struct smap *)m, k, n);
    return e->k ? e->v : -1;
}

// Returns 0 on allocation failure.
static int smap_put(struct smap *m, const char *k, size_t n, int32_t v)
{
    if ((m->len + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct smap_ent *old = m->e;
        size_t old_cap = m->cap;
        m->e = gl_calloc(cap, sizeof *m->e);
        if (!m->e) {
            m->e = old;
            return 0;
        }
        m->cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].k)
                *smap_slot(m, old[i].k, old[i].n) = old[i];
        gl_free(old);
    }
    struct smap_ent *e = smap_slot(m, k, n);
    if (!e->k)
        m->len++;
    e->k = k;
    e->n = n;
    e->v = v;
    return 1;
}

// ---- errors ----

static void line_col(const char *s, size_t pos, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (s[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static gl_status fail_at(struct gp *p, gl_status code, size_t pos, const char *what)
{
    int line, col;
    line_col(p->s, pos > p->n ? p->n : pos, &line, &col);
    return gl_err_set(p->err, code, "gbnf: %s at %d:%d", what, line, col);
}

static gl_status fail_rule(struct gp *p, gl_status code, const char *what, int32_t r, size_t pos)
{
    int line, col;
    line_col(p->s, pos > p->n ? p->n : pos, &line, &col);
    const struct rule *ru = &p->rules[r];
    return gl_err_set(p->err, code, "gbnf: %s '%.*s' at %d:%d", what,
                      (int)(ru->len > 64 ? 64 : ru->len), ru->name, line, col);
}

static gl_status nomem(struct gp *p)
{
    return gl_err_set(p->err, GL_E_NOMEM, "gbnf: out of memory");
}

// The builder reports its own failures (node budget, memory) into b->err.
static gl_status fail_builder(struct gp *p)
{
    if (p->b->err && p->b->err != p->err && p->err)
        *p->err = *p->b->err;
    if (p->err && p->err->code != GL_OK)
        return p->err->code;
    return gl_err_set(p->err, GL_E_LIMIT, "gbnf: grammar too large");
}

// ---- lexing ----

static int at_end(const struct gp *p)
{
    return p->pos >= p->n;
}

static int peek(const struct gp *p, size_t off)
{
    return p->pos + off < p->n ? (uint8_t)p->s[p->pos + off] : -1;
}

static int is_name_char(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-';
}

// Skips blanks and comments; newlines too when newline_ok.
static void skip_space(struct gp *p, int newline_ok)
{
    while (!at_end(p)) {
        int ch = peek(p, 0);
        if (ch == ' ' || ch == '\t') {
            p->pos++;
        } else if (ch == '#') {
            while (!at_end(p) && peek(p, 0) != '\n' && peek(p, 0) != '\r')
                p->pos++;
        } else if (newline_ok && (ch == '\n' || ch == '\r')) {
            p->pos++;
        } else {
            break;
        }
    }
}

// Decodes one UTF-8 code point at p->pos; -1 if invalid (overlong, surrogate, truncated).
static int32_t read_utf8(struct gp *p)
{
    const uint8_t *s = (const uint8_t *)p->s + p->pos;
    size_t left = p->n - p->pos;
    uint8_t c0 = s[0];
    int32_t cp;
    size_t len;
    if (c0 < 0x80) {
        p->pos++;
        return c0;
    } else if (c0 >= 0xC2 && c0 <= 0xDF) {
        len = 2;
        cp = c0 & 0x1F;
    } else if (c0 >= 0xE0 && c0 <= 0xEF) {
        len = 3;
        cp = c0 & 0x0F;
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
        len = 4;
        cp = c0 & 0x07;
    } else {
        return -1;
    }
    if (left < len)
        return -1;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > MAX_CP)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    p->pos += len;
    return cp;
}

// One character of a literal or class (after an optional backslash escape) -> code point in *cp.
static gl_status read_char(struct gp *p, int32_t *cp)
{
    size_t start = p->pos;
    if (at_end(p))
        return fail_at(p, GL_E_INVAL, start, "unexpected end of input");
    if (peek(p, 0) != '\\') {
        int32_t v = read_utf8(p);
        if (v < 0)
            return fail_at(p, GL_E_INVAL, start, "invalid UTF-8");
        *cp = v;
        return GL_OK;
    }
    int esc = peek(p, 1);
    p->pos += 2;
    int digits = 0;
    switch (esc) {
    case 'n':
        *cp = '\n';
        return GL_OK;
    case 'r':
        *cp = '\r';
        return GL_OK;
    case 't':
        *cp = '\t';
        return GL_OK;
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
        *cp = esc;
        return GL_OK;
    case 'x':
        digits = 2;
        break;
    case 'u':
        digits = 4;
        break;
    case 'U':
        digits = 8;
        break;
    default:
        return fail_at(p, GL_E_INVAL, start, "unknown escape");
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = gl_hex_val(peek(p, 0));
        if (h < 0)
            return fail_at(p, GL_E_INVAL, start, "escape needs more hex digits");
        v = (v << 4) | (uint32_t)h;
        p->pos++;
    }
    if (v > MAX_CP || (v >= 0xD800 && v <= 0xDFFF))
        return fail_at(p, GL_E_INVAL, start, "escape is not a Unicode scalar value");
    *cp = (int32_t)v;
    return GL_OK;
}

// ---- rules ----

static gl_status rule_find_or_add(struct gp *p, const char *name, size_t len, size_t pos,
                                  int32_t *out)
{
    int32_t r = smap_get(&p->rule_map, name, len);
    if (r >= 0) {
        *out = r;
        return GL_OK;
    }
    if (p->n_rules == p->cap_rules) {
        int32_t cap = p->cap_rules ? p->cap_rules * 2 : 32;
        struct rule *nr = gl_realloc(p->rules, (size_t)cap * sizeof *nr);
        if (!nr)
            return nomem(p);
        p->rules = nr;
        p->cap_rules = cap;
    }
    int32_t node = gl_gir_reserve(p->b);
    if (node < 0)
        return fail_builder(p);
    if (node - p->base >= p->cap_is_rule) {
        int32_t c2 = p->cap_is_rule ? p->cap_is_rule : 256;
        while (c2 <= node - p->base)
            c2 *= 2;
        uint8_t *nf = gl_realloc(p->is_rule, (size_t)c2);
        if (!nf)
            return nomem(p);
        memset(nf + p->cap_is_rule, 0, (size_t)(c2 - p->cap_is_rule));
        p->is_rule = nf;
        p->cap_is_rule = c2;
    }
    p->is_rule[node - p->base] = 1;
    r = p->n_rules;
    p->rules[r] = (struct rule){.name = name, .len = len, .node = node, .ref_pos = pos};
    if (!smap_put(&p->rule_map, name, len, r))
        return nomem(p);
    p->n_rules++;
    *out = r;
    return GL_OK;
}

// ---- terms ----

static gl_status parse_alternatives(struct gp *p, int nested, int32_t **alts, int32_t *n_alts);

static gl_status tick(struct gp *p)
{
    if (++p->items % TIME_STRIDE == 0)
        return gl_gctx_check_time(p->c, p->err);
    return GL_OK;
}

static gl_status add_node(struct gp *p, const struct gl_gnode *nd, int32_t *out)
{
    *out = gl_gir_add(p->b, nd);
    return *out < 0 ? fail_builder(p) : GL_OK;
}

static gl_status parse_literal(struct gp *p, int32_t *out)
{
    size_t start = p->pos++; // opening quote
    size_t cap = 64, len = 0;
    uint8_t *buf = gl_malloc(cap);
    if (!buf)
        return nomem(p);
    gl_status st = GL_OK;
    for (;;) {
        if (at_end(p) || peek(p, 0) == '\n' || peek(p, 0) == '\r') {
            st = fail_at(p, GL_E_INVAL, start, "unterminated string literal");
            break;
        }
        if (peek(p, 0) == '"') {
            p->pos++;
            break;
        }
        int32_t cp;
        if ((st = read_char(p, &cp)) != GL_OK)
            break;
        if (len + 4 > cap) {
            uint8_t *nb = gl_realloc(buf, cap * 2);
            if (!nb) {
                st = nomem(p);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        len += (size_t)gl_utf8_encode((uint32_t)cp, buf + len);
    }
    if (st == GL_OK) {
        if (len == 0) {
            st = add_node(p, &(struct gl_gnode){.kind = GN_EMPTY}, out);
        } else if (len > UINT32_MAX) {
            st = fail_at(p, GL_E_LIMIT, start, "string literal too long");
        } else {
            *out = gl_gir_add_bytes(p->b, buf, len);
            if (*out < 0)
                st = fail_builder(p);
        }
    }
    gl_free(buf);
    return st;
}

struct crange {
    int32_t lo, hi;
};

static int crange_cmp(const void *a, const void *b)
{
    const struct crange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

// A GN_REGEX node for the pattern src (malloc'ed; taken over, freed here or kept as the cache
// key); identical patterns share one node.
static gl_status regex_node(struct gp *p, char *src, size_t len, int32_t *out)
{
    int32_t hit = smap_get(&p->class_map, src, len);
    if (hit >= 0) {
        gl_free(src);
        *out = hit;
        return GL_OK;
    }
    struct gl_regex *re = NULL;
    int32_t max_states = p->c && p->c->opts ? p->c->opts->max_regex_states : 0;
    gl_status st = gl_regex_compile(&re, src, len, 0, max_states, p->err);
    if (st != GL_OK) {
        gl_free(src);
        return st;
    }
    int32_t ri = gl_gir_add_regex(p->b, re);
    if (ri < 0) {
        gl_free(src);
        return fail_builder(p);
    }
    if ((st = add_node(p, &(struct gl_gnode){.kind = GN_REGEX, .u.regex.re = ri}, out)) != GL_OK) {
        gl_free(src);
        return st;
    }
    if (p->n_class_keys == p->cap_class_keys) {
        int32_t c2 = p->cap_class_keys ? p->cap_class_keys * 2 : 16;
        char **nk = gl_realloc(p->class_keys, (size_t)c2 * sizeof *nk);
        if (!nk) {
            gl_free(src);
            return nomem(p);
        }
        p->class_keys = nk;
        p->cap_class_keys = c2;
    }
    p->class_keys[p->n_class_keys++] = src;
    if (!smap_put(&p->class_map, src, len, *out))
        return nomem(p);
    return GL_OK;
}

// Compiles a set of code-point ranges (sorted, merged, no surrogates) into one node: bytes for a
// single code point, else a one-character regex.
static gl_status class_node(struct gp *p, const struct crange *r, size_t n, size_t pos,
                            int32_t *out)
{
    if (n == 0)
        return fail_at(p, GL_E_INVAL, pos, "character class matches nothing");
    if (n == 1 && r[0].lo == r[0].hi) {
        uint8_t u[4];
        *out = gl_gir_add_bytes(p->b, u, (size_t)gl_utf8_encode((uint32_t)r[0].lo, u));
        return *out < 0 ? fail_builder(p) : GL_OK;
    }
    // "[" + per range "\u{HHHHHH}-\u{HHHHHH}" (at most 21 bytes) + "]"
    size_t cap = n * 22 + 3;
    char *src = gl_malloc(cap);
    if (!src)
        return nomem(p);
    size_t len = 0;
    src[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(src + len, cap - len, "\\u{%X}", (unsigned)r[i].lo);
        if (r[i].hi != r[i].lo)
            len += (size_t)snprintf(src + len, cap - len, "-\\u{%X}", (unsigned)r[i].hi);
    }
    src[len++] = ']';
    src[len] = 0;
    return regex_node(p, src, len, out);
}

// Sorts and merges ranges, negates them over [0, U+10FFFF] when asked, and drops surrogates.
static size_t normalize_ranges(struct crange *r, size_t n, int negate, struct crange *tmp)
{
    qsort(r, n, sizeof *r, crange_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    if (negate) {
        size_t k = 0;
        int32_t next = 0;
        for (size_t i = 0; i < m; i++) {
            if (r[i].lo > next)
                tmp[k++] = (struct crange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= MAX_CP)
            tmp[k++] = (struct crange){next, MAX_CP};
        memcpy(r, tmp, k * sizeof *r);
        m = k;
    }
    // Split around the surrogate block D800..DFFF (never valid UTF-8).
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        struct crange a = r[i];
        if (a.hi < 0xD800 || a.lo > 0xDFFF) {
            tmp[k++] = a;
            continue;
        }
        if (a.lo < 0xD800)
            tmp[k++] = (struct crange){a.lo, 0xD7FF};
        if (a.hi > 0xDFFF)
            tmp[k++] = (struct crange){0xE000, a.hi};
    }
    memcpy(r, tmp, k * sizeof *r);
    return k;
}

static gl_status parse_class(struct gp *p, int32_t *out)
{
    size_t start = p->pos++; // '['
    int negate = 0;
    if (peek(p, 0) == '^') {
        negate = 1;
        p->pos++;
    }
    size_t cap = 16, n = 0;
    // 2n + 2 entries: negation and the surrogate split at most double the count (+ 2).
    struct crange *r = gl_malloc(cap * sizeof *r);
    if (!r)
        return nomem(p);
    gl_status st = GL_OK;
    for (;;) {
        if (at_end(p)) {
            st = fail_at(p, GL_E_INVAL, start, "unterminated character class");
            break;
        }
        if (peek(p, 0) == ']') {
            p->pos++;
            break;
        }
        size_t cpos = p->pos;
        int32_t lo, hi;
        if ((st = read_char(p, &lo)) != GL_OK)
            break;
        hi = lo;
        if (peek(p, 0) == '-' && peek(p, 1) != ']' && peek(p, 1) != -1) {
            p->pos++;
            if ((st = read_char(p, &hi)) != GL_OK)
                break;
            if (hi < lo) {
                st = fail_at(p, GL_E_INVAL, cpos, "character range out of order");
                break;
            }
        }
        if (n + 1 > cap / 2 - 2) {
            struct crange *nr = gl_realloc(r, cap * 2 * sizeof *r);
            if (!nr) {
                st = nomem(p);
                break;
            }
            r = nr;
            cap *= 2;
        }
        r[n++] = (struct crange){lo, hi};
        if ((st = tick(p)) != GL_OK)
            break;
    }
    if (st == GL_OK) {
        struct crange *tmp = gl_malloc(cap * sizeof *tmp);
        if (!tmp) {
            st = nomem(p);
        } else {
            n = normalize_ranges(r, n, negate, tmp);
            gl_free(tmp);
            st = class_node(p, r, n, start, out);
        }
    }
    gl_free(r);
    return st;
}

static gl_status parse_token(struct gp *p, int32_t *out)
{
    size_t start = p->pos;
    if (peek(p, 1) == '[') {
        p->pos += 2;
        int64_t id = 0;
        int digits = 0;
        while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
            id = id * 10 + (peek(p, 0) - '0');
            if (id > INT32_MAX)
                return fail_at(p, GL_E_INVAL, start, "token id out of range");
            digits++;
            p->pos++;
        }
        if (!digits || peek(p, 0) != ']' || peek(p, 1) != '>')
            return fail_at(p, GL_E_INVAL, start, "expected <[token-id]>");
        p->pos += 2;
        return add_node(p, &(struct gl_gnode){.kind = GN_TOKEN, .u.token.id = (int32_t)id}, out);
    }
    size_t e = p->pos + 1;
    while (e < p->n && p->s[e] != '>' && p->s[e] != '\n' && p->s[e] != '<')
        e++;
    if (e >= p->n || p->s[e] != '>' || e == p->pos + 1)
        return fail_at(p, GL_E_INVAL, start, "expected <token-text> or <[token-id]>");
    size_t len = e + 1 - p->pos;
    if (!p->c || !p->c->token_lookup)
        return fail_at(p, GL_E_UNSUPPORTED, start,
                       "token by text needs a vocabulary (write it as <[token-id]>)");
    int32_t id = p->c->token_lookup(p->c->token_lookup_user, p->s + p->pos, len);
    if (id < 0)
        return fail_at(p, GL_E_INVAL, start, "no single token has this text");
    p->pos = e + 1;
    return add_node(p, &(struct gl_gnode){.kind = GN_TOKEN, .u.token.id = id}, out);
}

static gl_status list_node(struct gp *p, enum gl_gnode_kind k, const int32_t *kids, int32_t n,
                           int32_t *out)
{
    if (n == 1 && k == GN_SEQ) {
        *out = kids[0];
        return GL_OK;
    }
    if (n == 0)
        return add_node(p, &(struct gl_gnode){.kind = GN_EMPTY}, out);
    *out = gl_gir_add_list(p->b, k, kids, n);
    return *out < 0 ? fail_builder(p) : GL_OK;
}

static gl_status parse_count(struct gp *p, int32_t *v)
{
    size_t start = p->pos;
    int64_t x = 0;
    if (!(peek(p, 0) >= '0' && peek(p, 0) <= '9'))
        return fail_at(p, GL_E_INVAL, start, "expected a number");
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
        x = x * 10 + (peek(p, 0) - '0');
        if (x > MAX_COUNT)
            return fail_at(p, GL_E_LIMIT, start, "repetition count over 1000000");
        p->pos++;
    }
    *v = (int32_t)x;
    return GL_OK;
}

static gl_status parse_postfix(struct gp *p, int32_t *node)
{
    for (;;) {
        int ch = peek(p, 0);
        size_t start = p->pos;
        int32_t mn, mx;
        if (ch == '*') {
            mn = 0, mx = -1;
            p->pos++;
        } else if (ch == '+') {
            mn = 1, mx = -1;
            p->pos++;
        } else if (ch == '?') {
            mn = 0, mx = 1;
            p->pos++;
        } else if (ch == '{') {
            p->pos++;
            skip_space(p, 0);
            gl_status st;
            mn = 0;
            if (peek(p, 0) != ',' && (st = parse_count(p, &mn)) != GL_OK)
                return st;
            skip_space(p, 0);
            mx = mn;
            if (peek(p, 0) == ',') {
                p->pos++;
                skip_space(p, 0);
                mx = -1;
                if (peek(p, 0) != '}' && (st = parse_count(p, &mx)) != GL_OK)
                    return st;
                skip_space(p, 0);
            }
            if (peek(p, 0) != '}')
                return fail_at(p, GL_E_INVAL, start, "expected '}' after repetition bounds");
            p->pos++;
            if (mx >= 0 && mx < mn)
                return fail_at(p, GL_E_INVAL, start, "repetition maximum below minimum");
        } else {
            return GL_OK;
        }
        if (mn == 1 && mx == 1)
            continue;
        gl_status st;
        if (mx == 0) {
            st = add_node(p, &(struct gl_gnode){.kind = GN_EMPTY}, node);
        } else {
            struct gl_gnode nd = {.kind = GN_REPEAT};
            nd.u.rep.kid = *node;
            nd.u.rep.sep = -1;
            nd.u.rep.min = mn;
            nd.u.rep.max = mx;
            st = add_node(p, &nd, node);
        }
        if (st != GL_OK)
            return st;
    }
}

static int is_rule_node(const struct gp *p, int32_t node)
{
    return node >= p->base && node - p->base < p->cap_is_rule && p->is_rule[node - p->base];
}

// The recogniser follows every alternative of an ALT as its own parse thread (64 by default), so
// a long list like ("a" | "b" | ...) or ("kw1" ws | "kw2" ws | ...) would overflow it.
// Alternatives that are a literal followed by the same tail (possibly empty) are left-factored:
// one alternation regex of their literals, then the tail: one deterministic automaton. Rewrites
// alts[0..*n) in place (the order of an ALT's alternatives does not matter).
struct lit_alt {
    int32_t idx;
    const struct gl_gbytes *lit;
    const int32_t *tail;
    int32_t n_tail;
    uint64_t h;
};

static int lit_alt_cmp(const void *x, const void *y)
{
    const struct lit_alt *a = x, *b = y;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    if (a->n_tail != b->n_tail)
        return a->n_tail < b->n_tail ? -1 : 1;
    int c = a->n_tail ? memcmp(a->tail, b->tail, (size_t)a->n_tail * sizeof *a->tail) : 0;
    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

static int same_tail(const struct lit_alt *a, const struct lit_alt *b)
{
    return a->h == b->h && a->n_tail == b->n_tail &&
           (!a->n_tail || !memcmp(a->tail, b->tail, (size_t)a->n_tail * sizeof *a->tail));
}

static int is_literal(const struct gp *p, int32_t node)
{
    const struct gl_gnode *nd = &p->b->ir->nodes[node];
    return nd->kind == GN_BYTES && nd->u.bytes.len > 0 && !is_rule_node(p, node);
}

// One factored alternative: regex over la[0..n)'s literals, then their common tail.
static gl_status factor_group(struct gp *p, const struct lit_alt *la, int32_t n, int32_t *out)
{
    size_t need = 8;
    for (int32_t i = 0; i < n; i++)
        need += gl_regex_escape(la[i].lit->p, la[i].lit->len, NULL, 0) + 1;
    char *src = gl_malloc(need);
    if (!src)
        return nomem(p);
    size_t len = 3;
    memcpy(src, "(?:", 3);
    for (int32_t i = 0; i < n; i++) {
        if (i)
            src[len++] = '|';
        len += gl_regex_escape(la[i].lit->p, la[i].lit->len, src + len, need - len);
    }
    src[len++] = ')';
    src[len] = 0;
    GL_ASSERT(len < need);
    int32_t re;
    gl_status st = regex_node(p, src, len, &re);
    if (st != GL_OK || la[0].n_tail == 0) {
        *out = re;
        return st;
    }
    int32_t *kids = gl_malloc((size_t)(la[0].n_tail + 1) * sizeof *kids);
    if (!kids)
        return nomem(p);
    kids[0] = re;
    memcpy(kids + 1, la[0].tail, (size_t)la[0].n_tail * sizeof *kids);
    *out = gl_gir_add_list(p->b, GN_SEQ, kids, la[0].n_tail + 1);
    gl_free(kids);
    return *out < 0 ? fail_builder(p) : GL_OK;
}

static gl_status merge_literal_alts(struct gp *p, int32_t *alts, int32_t *n)
{
    if (*n < 2)
        return GL_OK;
    struct lit_alt *la = gl_malloc((size_t)*n * sizeof *la);
    if (!la)
        return nomem(p);
    int32_t m = 0, k = 0;
    for (int32_t i = 0; i < *n; i++) {
        const struct gl_gnode *nd = &p->b->ir->nodes[alts[i]];
        struct lit_alt x = {.idx = alts[i]};
        if (is_literal(p, alts[i])) {
            x.lit = &nd->u.bytes;
        } else if (nd->kind == GN_SEQ && nd->u.list.n >= 2 && !is_rule_node(p, alts[i]) &&
                   is_literal(p, nd->u.list.kids[0])) {
            x.lit = &p->b->ir->nodes[nd->u.list.kids[0]].u.bytes;
            x.tail = nd->u.list.kids + 1;
            x.n_tail = nd->u.list.n - 1;
        } else {
            alts[k++] = alts[i];
            continue;
        }
        x.h = hash_bytes((const char *)x.tail, (size_t)x.n_tail * sizeof *x.tail);
        la[m++] = x;
    }
    qsort(la, (size_t)m, sizeof *la, lit_alt_cmp);
    gl_status st = GL_OK;
    for (int32_t i = 0; i < m && st == GL_OK;) {
        int32_t j = i + 1;
        while (j < m && same_tail(&la[i], &la[j]))
            j++;
        if (j - i == 1)
            alts[k++] = la[i].idx;
        else
            st = factor_group(p, la + i, j - i, &alts[k++]);
        i = j;
    }
    gl_free(la);
    *n = k;
    return st;
}

static gl_status parse_item(struct gp *p, int nested, int32_t *out)
{
    gl_status st;
    size_t start = p->pos;
    int ch = peek(p, 0);
    if ((st = tick(p)) != GL_OK)
        return st;
    if (ch == '"') {
        st = parse_literal(p, out);
    } else if (ch == '[') {
        st = parse_class(p, out);
    } else if (ch == '.') {
        p->pos++;
        static const struct crange any[2] = {{0, 0xD7FF}, {0xE000, MAX_CP}};
        st = class_node(p, any, 2, start, out);
    } else if (ch == '(') {
        if (p->depth >= MAX_DEPTH)
            return fail_at(p, GL_E_LIMIT, start, "groups nested deeper than 200");
        p->pos++;
        p->depth++;
        skip_space(p, 1);
        int32_t *alts = NULL, n_alts = 0;
        st = parse_alternatives(p, 1, &alts, &n_alts);
        p->depth--;
        if (st == GL_OK)
            st = merge_literal_alts(p, alts, &n_alts);
        if (st == GL_OK) {
            skip_space(p, 1);
            if (peek(p, 0) != ')')
                st = fail_at(p, GL_E_INVAL, p->pos, "expected ')'");
            else
                p->pos++;
        }
        if (st == GL_OK && n_alts == 1)
            *out = alts[0];
        else if (st == GL_OK)
            st = list_node(p, GN_ALT, alts, n_alts, out);
        gl_free(alts);
    } else if (ch == '<') {
        st = parse_token(p, out);
    } else if (ch == '!') {
        return fail_at(p, GL_E_UNSUPPORTED, start, "negated token literal");
    } else if (is_name_char(ch)) {
        size_t e = p->pos;
        while (e < p->n && is_name_char((uint8_t)p->s[e]))
            e++;
        int32_t r;
        if ((st = rule_find_or_add(p, p->s + p->pos, e - p->pos, start, &r)) != GL_OK)
            return st;
        p->pos = e;
        *out = p->rules[r].node;
    } else {
        (void)nested;
        return fail_at(p, GL_E_INVAL, start, "unexpected character");
    }
    if (st != GL_OK)
        return st;
    return parse_postfix(p, out);
}

static gl_status push_i32(struct gp *p, int32_t **v, int32_t *n, int32_t *cap, int32_t x)
{
    if (*n == *cap) {
        int32_t c2 = *cap ? *cap * 2 : 8;
        int32_t *nv = gl_realloc(*v, (size_t)c2 * sizeof *nv);
        if (!nv)
            return nomem(p);
        *v = nv;
        *cap = c2;
    }
    (*v)[(*n)++] = x;
    return GL_OK;
}

static int ends_sequence(int ch)
{
    return ch == -1 || ch == '|' || ch == ')' || ch == '\n' || ch == '\r';
}

static gl_status parse_sequence(struct gp *p, int nested, int32_t *out)
{
    int32_t *items = NULL, n = 0, cap = 0;
    gl_status st = GL_OK;
    skip_space(p, nested);
    while (!ends_sequence(peek(p, 0))) {
        int32_t it;
        if ((st = parse_item(p, nested, &it)) != GL_OK)
            break;
        if ((st = push_i32(p, &items, &n, &cap, it)) != GL_OK)
            break;
        skip_space(p, nested);
    }
    if (st == GL_OK)
        st = list_node(p, GN_SEQ, items, n, out);
    gl_free(items);
    return st;
}

// alts: malloc'ed list of the alternatives' nodes.
static gl_status parse_alternatives(struct gp *p, int nested, int32_t **alts, int32_t *n_alts)
{
    int32_t cap = 0;
    *alts = NULL;
    *n_alts = 0;
    for (;;) {
        int32_t seq;
        gl_status st = parse_sequence(p, nested, &seq);
        if (st == GL_OK)
            st = push_i32(p, alts, n_alts, &cap, seq);
        if (st != GL_OK) {
            gl_free(*alts);
            *alts = NULL;
            return st;
        }
        skip_space(p, nested);
        if (peek(p, 0) != '|')
            return GL_OK;
        p->pos++;
        skip_space(p, 1);
    }
}

static gl_status parse_rule(struct gp *p)
{
    size_t start = p->pos;
    size_t e = p->pos;
    while (e < p->n && is_name_char((uint8_t)p->s[e]))
        e++;
    if (e == p->pos)
        return fail_at(p, GL_E_INVAL, start, "expected a rule name");
    int32_t r;
    gl_status st = rule_find_or_add(p, p->s + p->pos, e - p->pos, start, &r);
    if (st != GL_OK)
        return st;
    if (p->rules[r].defined)
        return fail_rule(p, GL_E_INVAL, "rule defined twice:", r, start);
    p->rules[r].defined = 1;
    p->rules[r].def_pos = start;
    p->pos = e;
    skip_space(p, 0);
    if (!(peek(p, 0) == ':' && peek(p, 1) == ':' && peek(p, 2) == '='))
        return fail_at(p, GL_E_INVAL, p->pos, "expected '::='");
    p->pos += 3;
    skip_space(p, 1);
    int32_t *alts = NULL, n_alts = 0;
    if ((st = parse_alternatives(p, 0, &alts, &n_alts)) != GL_OK)
        return st;
    if ((st = merge_literal_alts(p, alts, &n_alts)) != GL_OK) {
        gl_free(alts);
        return st;
    }
    // The rule's reserved node becomes its body: an ALT, or a copy of its only alternative
    // unless that is itself a rule node (a = b), which must stay a reference.
    struct gl_gnode nd;
    int32_t only = n_alts == 1 ? alts[0] : -1;
    if (only >= 0 && !is_rule_node(p, only)) {
        nd = p->b->ir->nodes[only];
    } else {
        nd = (struct gl_gnode){.kind = GN_ALT};
        int32_t *kids = gl_arena_alloc(p->b->ir->arena, (size_t)n_alts * sizeof *kids);
        if (!kids) {
            gl_free(alts);
            return nomem(p);
        }
        memcpy(kids, alts, (size_t)n_alts * sizeof *kids);
        nd.u.list.kids = kids;
        nd.u.list.n = n_alts;
    }
    gl_free(alts);
    gl_gir_set(p->b, p->rules[r].node, &nd);
    if (!at_end(p) && peek(p, 0) != '\n' && peek(p, 0) != '\r')
        return fail_at(p, GL_E_INVAL, p->pos, "expected a newline or the end after a rule");
    return GL_OK;
}

// ---- checks: undefined rules, left recursion, open repetition of a nullable item ----

// Rule owning each node (by node index), for naming the rule in errors; -1 outside the grammar.
static int32_t node_rule(const struct gp *p, const int32_t *owner, int32_t base, int32_t i)
{
    (void)p;
    return i >= base ? owner[i - base] : -1;
}

static void kids_of(const struct gl_gnode *nd, const int32_t **kids, int32_t *n, int32_t *one)
{
    *kids = NULL;
    *n = 0;
    if (nd->kind == GN_SEQ || nd->kind == GN_ALT) {
        *kids = nd->u.list.kids;
        *n = nd->u.list.n;
    } else if (nd->kind == GN_REPEAT) {
        *one = nd->u.rep.kid;
        *kids = one;
        *n = 1;
    }
}

// check_graph's view of the nodes this grammar added: ir->nodes[base .. base + n), each array
// indexed by node - base.
struct gcheck {
    const struct gl_gir *ir;
    int32_t base, n;
    uint8_t *nullable; // [n] the node matches the empty string
    int32_t *owner;    // [n] the rule that owns the node (-1: none)
    uint8_t *color;    // [n] left-recursion DFS: 0 unseen, 1 on the stack, 2 done
    int32_t *stack;    // [2n] DFS stack (owners: nodes; left recursion: node, next kid pairs)
};

// Owner: a rule node owns what it reaches without passing another rule node (first wins), so
// that an error found at a node can name its rule.
static void cg_owners(struct gp *p, struct gcheck *g)
{
    int32_t base = g->base, *owner = g->owner, *stack = g->stack;
    for (int32_t i = 0; i < g->n; i++)
        owner[i] = -1;
    for (int32_t r = 0; r < p->n_rules; r++)
        owner[p->rules[r].node - base] = r;
    for (int32_t r = 0; r < p->n_rules; r++) {
        int32_t sp = 0;
        stack[sp++] = p->rules[r].node;
        while (sp) {
            const struct gl_gnode *nd = &g->ir->nodes[stack[--sp]];
            const int32_t *kids;
            int32_t nk, one;
            kids_of(nd, &kids, &nk, &one);
            for (int32_t k = 0; k < nk; k++) {
                int32_t c = kids[k];
                if (c >= base && owner[c - base] < 0) {
                    owner[c - base] = r;
                    stack[sp++] = c;
                }
            }
        }
    }
}

// 1 when nd matches the empty string given what g->nullable knows so far (nodes below base, from
// other grammars, count as not nullable).
static int cg_node_nullable(const struct gcheck *g, const struct gl_gnode *nd)
{
    int32_t base = g->base;
    const uint8_t *nullable = g->nullable;
    int v = 0;
    switch (nd->kind) {
    case GN_EMPTY:
        v = 1;
        break;
    case GN_BYTES:
        v = nd->u.bytes.len == 0;
        break;
    case GN_REGEX: {
        struct gl_regex *re = g->ir->regexes[nd->u.regex.re];
        v = gl_regex_is_accept(re, gl_regex_start(re));
        break;
    }
    case GN_SEQ:
        v = 1;
        for (int32_t k = 0; k < nd->u.list.n && v; k++) {
            int32_t c = nd->u.list.kids[k];
            v = c >= base && nullable[c - base];
        }
        break;
    case GN_ALT:
        for (int32_t k = 0; k < nd->u.list.n && !v; k++) {
            int32_t c = nd->u.list.kids[k];
            v = c >= base && nullable[c - base];
        }
        break;
    case GN_REPEAT:
        v = nd->u.rep.min == 0 || (nd->u.rep.kid >= base && nullable[nd->u.rep.kid - base]);
        break;
    default:
        break;
    }
    return v;
}

// Nullable: the least fixpoint, one sweep over the nodes per round (checks the time budget each
// round).
static gl_status cg_nullable(struct gp *p, struct gcheck *g)
{
    for (int changed = 1; changed;) {
        changed = 0;
        gl_status st = gl_gctx_check_time(p->c, p->err);
        if (st != GL_OK)
            return st;
        for (int32_t i = 0; i < g->n; i++) {
            if (g->nullable[i])
                continue;
            if (cg_node_nullable(g, &g->ir->nodes[g->base + i])) {
                g->nullable[i] = 1;
                changed = 1;
            }
        }
    }
    return GL_OK;
}

// An open repetition (max < 0) of a nullable item would let the matcher loop without reading:
// refused, naming the rule.
static gl_status cg_open_repeat(struct gp *p, const struct gcheck *g)
{
    int32_t base = g->base;
    for (int32_t i = 0; i < g->n; i++) {
        const struct gl_gnode *nd = &g->ir->nodes[base + i];
        if (nd->kind == GN_REPEAT && nd->u.rep.max < 0 && nd->u.rep.kid >= base &&
            g->nullable[nd->u.rep.kid - base]) {
            int32_t r = node_rule(p, g->owner, base, base + i);
            return r >= 0 ? fail_rule(p, GL_E_INVAL,
                                      "open repetition of a possibly empty item in rule", r,
                                      p->rules[r].def_pos)
                          : gl_err_set(p->err, GL_E_INVAL,
                                       "gbnf: open repetition of a possibly empty item");
        }
    }
    return GL_OK;
}

// The error for left recursion found at node c (on the DFS stack): the rule whose node c is,
// else its owner.
static gl_status cg_left_recursion_error(struct gp *p, const struct gcheck *g, int32_t c)
{
    int32_t r = -1;
    for (int32_t i = 0; i < p->n_rules && r < 0; i++)
        if (p->rules[i].node == c)
            r = i;
    if (r < 0)
        r = node_rule(p, g->owner, g->base, c);
    return r >= 0 ? fail_rule(p, GL_E_INVAL, "left recursion through rule", r, p->rules[r].def_pos)
                  : gl_err_set(p->err, GL_E_INVAL, "gbnf: left recursion");
}

// Left recursion: a cycle over "may start with" edges (iterative DFS; color 1 = on stack). The
// matcher would expand such a rule forever without reading a byte.
static gl_status cg_left_recursion(struct gp *p, struct gcheck *g)
{
    int32_t base = g->base, *stack = g->stack;
    uint8_t *color = g->color;
    for (int32_t s0 = 0; s0 < g->n; s0++) {
        if (color[s0])
            continue;
        int32_t sp = 0;
        stack[sp++] = base + s0;
        stack[sp++] = 0; // next kid position to visit
        color[s0] = 1;
        while (sp) {
            int32_t v = stack[sp - 2], k = stack[sp - 1];
            const struct gl_gnode *nd = &g->ir->nodes[v];
            const int32_t *kids;
            int32_t nk, one;
            kids_of(nd, &kids, &nk, &one);
            // In a SEQ only the prefix up to the first non-nullable kid may start the match.
            if (nd->kind == GN_SEQ && k > 0) {
                int32_t prev = kids[k - 1];
                if (!(prev >= base && g->nullable[prev - base]))
                    nk = k;
            }
            if (k >= nk) {
                color[v - base] = 2;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = k + 1;
            int32_t c = kids[k];
            if (c < base)
                continue;
            if (color[c - base] == 1)
                return cg_left_recursion_error(p, g, c);
            if (color[c - base] == 0) {
                color[c - base] = 1;
                stack[sp++] = c;
                stack[sp++] = 0;
            }
        }
    }
    return GL_OK;
}

// Refuses the grammar's nodes (from base on) that the matcher cannot run: an open repetition of
// a possibly empty item, or left recursion. Finds owners and nullability first.
static gl_status check_graph(struct gp *p, int32_t base)
{
    const struct gl_gir *ir = p->b->ir;
    int32_t n = ir->n_nodes - base;
    if (n <= 0)
        return GL_OK;
    struct gcheck g = {.ir = ir, .base = base, .n = n};
    g.nullable = gl_calloc((size_t)n, 1);
    g.owner = gl_malloc((size_t)n * sizeof *g.owner);
    g.color = gl_calloc((size_t)n, 1);
    g.stack = gl_malloc((size_t)n * 2 * sizeof *g.stack);
    gl_status st;
    if (!g.nullable || !g.owner || !g.color || !g.stack) {
        st = nomem(p);
    } else {
        cg_owners(p, &g);
        st = cg_nullable(p, &g);
        if (st == GL_OK)
            st = cg_open_repeat(p, &g);
        if (st == GL_OK)
            st = cg_left_recursion(p, &g);
    }
    gl_free(g.nullable);
    gl_free(g.owner);
    gl_free(g.color);
    gl_free(g.stack);
    return st;
}

gl_status gl_gbnf_build(struct gl_gir_builder *b, struct gl_gctx *c, const char *src, size_t len,
                        int32_t *root, struct gl_err *err)
{
    int32_t base = b->ir->n_nodes;
    struct gp p = {
        .s = src ? src : "", .n = src ? len : 0, .b = b, .c = c, .err = err, .base = base};
    gl_status st = GL_OK;
    for (;;) {
        skip_space(&p, 1);
        if (at_end(&p))
            break;
        if ((st = parse_rule(&p)) != GL_OK)
            goto out;
    }
    for (int32_t r = 0; r < p.n_rules; r++) {
        if (!p.rules[r].defined) {
            st = fail_rule(&p, GL_E_INVAL, "undefined rule", r, p.rules[r].ref_pos);
            goto out;
        }
    }
    int32_t rr = smap_get(&p.rule_map, "root", 4);
    if (rr < 0) {
        st = gl_err_set(err, GL_E_INVAL, "gbnf: no rule 'root'");
        goto out;
    }
    if ((st = check_graph(&p, base)) != GL_OK)
        goto out;
    *root = p.rules[rr].node;
out:
    gl_free(p.rule_map.e);
    gl_free(p.class_map.e);
    for (int32_t i = 0; i < p.n_class_keys; i++)
        gl_free(p.class_keys[i]);
    gl_free(p.class_keys);
    gl_free(p.rules);
    gl_free(p.is_rule);
    return st;
}
