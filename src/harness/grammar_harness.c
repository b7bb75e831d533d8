// SPDX-License-Identifier: MIT
// harness/grammar_harness.c: the harnesses behind `glint grammar` (harness.h), used by benchmarks
// and outside checks; the flags are parsed by cli/cmd_grammar.c.
//   check  -- the MaskBench harness: compile each case file's schema, walk every instance through
//             the matcher token by token, classify, and time every compile and every mask.
//   sample -- random walks under the mask, printed for independent validators to judge.
// Both also police the matcher's contract on every step they take: mask and accept agree, no
// special token is ever allowed, the stop set is allowed exactly when the document can end, a
// live mask is never empty; sample also checks rollback and forced bytes. Any breach is an error.
// Instances are re-serialized compactly from their source text, as Python's json.dumps does
// (docs/GRAMMAR.md §4).
#include "harness.h"

#include "base/buf.h"
#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

#include <ctype.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CASE_FILE_MAX   (256u << 20) // bytes; MaskBench's largest file is ~1.3 MB
#define JSON_MAX_DEPTH  512          // nesting of a case file (hostile input)
#define MAX_STOP        8
#define LIST_CAP        50 // failures / compile errors echoed in --json
#define SAMPLE_MAX_STEP GL_GRAMMAR_SAMPLE_MAX_TOKENS

// ---------------------------------------------------------------------------------------------
// Small utilities: growable arrays, monotonic clock, JSON string output (bytes: base/buf.h).

struct dvec {
    double *v;
    size_t n, cap;
};

static int dvec_push(struct dvec *d, double x)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        double *v = realloc(d->v, cap * sizeof *v);
        if (!v)
            return -1;
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return 0;
}

// The clock of compile and mask timings: wall (CLOCK_MONOTONIC, MaskBench's method) or, with
// --cpu-time, this thread's CPU time (robust when other processes share the cores).
static clockid_t timing_clock = CLOCK_MONOTONIC;

static double clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double now_ns(void)
{
    return clock_ns(timing_clock);
}

// Writes s as a JSON string literal (UTF-8 kept, control bytes escaped).
static void put_jstr_n(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_jstr(FILE *f, const char *s)
{
    put_jstr_n(f, s, strlen(s));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Nearest-rank percentile of a sorted array (p in [0,1]); 0 for an empty one.
static double pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    double r = ceil(p * (double)n);
    size_t i = r < 1 ? 0 : (size_t)r - 1;
    return v[i < n ? i : n - 1];
}

static char *read_file(const char *path, size_t *len, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = "cannot open";
        return NULL;
    }
    struct gl_buf b = {0};
    char chunk[1 << 16];
    size_t n;
    *why = NULL;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > CASE_FILE_MAX) {
            *why = "file larger than 256 MiB";
            break;
        }
        if (gl_buf_put(&b, chunk, n) != GL_OK) {
            *why = "out of memory";
            break;
        }
    }
    if (!*why && ferror(f))
        *why = "read error";
    fclose(f);
    if (*why) {
        gl_free(b.p);
        return NULL;
    }
    if (!b.p && gl_buf_reserve(&b, 0) != GL_OK) {
        *why = "out of memory";
        return NULL;
    }
    b.p[b.len] = '\0';
    *len = b.len;
    return b.p;
}

// ---------------------------------------------------------------------------------------------
// Tokenizer loading: a GGUF (by its magic) or a tiktoken ranks file.

static struct gl_tokenizer *load_tokenizer(const char *cmd, const char *path)
{
    struct gl_err err = {0};
    struct gl_tokenizer *t = NULL;
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "glint grammar %s: cannot open tokenizer %s\n", cmd, path);
        return NULL;
    }
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    gl_status st;
    if (got == 4 && !memcmp(magic, "GGUF", 4)) {
        struct gl_gguf *g = NULL;
        struct gl_gguf_open_params p = gl_gguf_default_open_params();
        p.allow_no_data = 1;
        st = gl_gguf_open(&g, path, &p, &err);
        if (st == GL_OK)
            st = gl_tokenizer_load_gguf(&t, g, &err);
        gl_gguf_close(g);
    } else {
        st = gl_tokenizer_load_tiktoken(&t, path, &err);
    }
    if (st != GL_OK) {
        fprintf(stderr, "glint grammar %s: %s: %s: %s\n", cmd, path, gl_status_name(st), err.msg);
        return NULL;
    }
    return t;
}

// The stop set: the tokenizer's EOS and <|eot|> (deduplicated).
static int stop_set(const struct gl_tokenizer *t, int32_t *ids)
{
    int n = 0;
    gl_token eos = gl_tokenizer_eos(t), eot = gl_tokenizer_eot(t);
    if (eos >= 0)
        ids[n++] = eos;
    if (eot >= 0 && eot != eos)
        ids[n++] = eot;
    return n;
}

// ---------------------------------------------------------------------------------------------
// Case files. A strict JSON scanner finds the spans of "schema" and of each test's "data" and
// "valid" without building a tree (so integers of any size survive), and a compactor rewrites a
// value span: whitespace outside strings dropped, strings decoded and re-encoded minimally (UTF-8
// kept, only '"', '\\' and control characters escaped, as Python's json.dumps(ensure_ascii=False)
// does), key order and integers kept exactly as written, reals printed as Python's repr.

struct jscan {
    const char *p, *end, *base;
    const char *why;
    size_t at; // byte offset of the error
};

static int js_fail(struct jscan *s, const char *why)
{
    if (!s->why) {
        s->why = why;
        s->at = (size_t)(s->p - s->base);
    }
    return -1;
}

static void js_ws(struct jscan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int js_string(struct jscan *s)
{
    if (s->p >= s->end || *s->p != '"')
        return js_fail(s, "expected a string");
    s->p++;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p;
        if (c == '"') {
            s->p++;
            return 0;
        }
        if (c < 0x20)
            return js_fail(s, "control character in a string");
        if (c == '\\') {
            if (s->end - s->p < 2)
                break;
            char e = s->p[1];
            if (e == 'u') {
                if (s->end - s->p < 6)
                    break;
                for (int i = 2; i < 6; i++)
                    if (gl_hex_val(s->p[i]) < 0)
                        return js_fail(s, "bad \\u escape");
                s->p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == '\0')
                return js_fail(s, "bad escape");
            s->p += 2;
            continue;
        }
        s->p++;
    }
    return js_fail(s, "unterminated string");
}

static int js_number(struct jscan *s)
{
    const char *p = s->p;
    if (p < s->end && *p == '-')
        p++;
    if (p >= s->end || *p < '0' || *p > '9')
        return js_fail(s, "bad number");
    if (*p == '0')
        p++;
    else
        while (p < s->end && *p >= '0' && *p <= '9')
            p++;
    if (p < s->end && *p == '.') {
        p++;
        if (p >= s->end || *p < '0' || *p > '9')
            return js_fail(s, "bad number fraction");
        while (p < s->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < s->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < s->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= s->end || *p < '0' || *p > '9')
            return js_fail(s, "bad number exponent");
        while (p < s->end && *p >= '0' && *p <= '9')
            p++;
    }
    s->p = p;
    return 0;
}

static int js_value(struct jscan *s, int depth);

static int js_literal(struct jscan *s, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n))
        return js_fail(s, "unexpected character");
    s->p += n;
    return 0;
}

static int js_container(struct jscan *s, int depth, char close)
{
    s->p++;
    js_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (js_string(s))
                return -1;
            js_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return js_fail(s, "expected ':'");
            s->p++;
        }
        if (js_value(s, depth + 1))
            return -1;
        js_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            js_ws(s);
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        return js_fail(s, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

// Scans one value (leading whitespace skipped); s->p ends just after it.
static int js_value(struct jscan *s, int depth)
{
    js_ws(s);
    if (depth > JSON_MAX_DEPTH)
        return js_fail(s, "nesting deeper than 512");
    if (s->p >= s->end)
        return js_fail(s, "unexpected end of input");
    switch (*s->p) {
    case '{':
        return js_container(s, depth, '}');
    case '[':
        return js_container(s, depth, ']');
    case '"':
        return js_string(s);
    case 't':
        return js_literal(s, "true");
    case 'f':
        return js_literal(s, "false");
    case 'n':
        return js_literal(s, "null");
    default:
        return js_number(s);
    }
}

static void put_utf8(struct gl_buf *b, uint32_t cp, int *oom)
{
    uint8_t u[4];
    *oom |= gl_buf_put(b, u, (size_t)gl_utf8_encode(cp, u)) != GL_OK;
}

// One decoded character of a string, re-escaped the minimal way.
static void put_str_char(struct gl_buf *b, uint32_t cp, int *oom)
{
    char e[8];
    switch (cp) {
    case '"':
        *oom |= gl_buf_put(b, "\\\"", 2) != GL_OK;
        return;
    case '\\':
        *oom |= gl_buf_put(b, "\\\\", 2) != GL_OK;
        return;
    case '\b':
        *oom |= gl_buf_put(b, "\\b", 2) != GL_OK;
        return;
    case '\f':
        *oom |= gl_buf_put(b, "\\f", 2) != GL_OK;
        return;
    case '\n':
        *oom |= gl_buf_put(b, "\\n", 2) != GL_OK;
        return;
    case '\r':
        *oom |= gl_buf_put(b, "\\r", 2) != GL_OK;
        return;
    case '\t':
        *oom |= gl_buf_put(b, "\\t", 2) != GL_OK;
        return;
    default:
        break;
    }
    if (cp < 0x20 || (cp >= 0xd800 && cp < 0xe000)) { // controls; lone surrogates stay escaped
        snprintf(e, sizeof e, "\\u%04x", (unsigned)cp);
        *oom |= gl_buf_put(b, e, 6) != GL_OK;
        return;
    }
    put_utf8(b, cp, oom);
}

static uint32_t hex4(const char *p)
{
    return (uint32_t)(gl_hex_val(p[0]) << 12 | gl_hex_val(p[1]) << 8 | gl_hex_val(p[2]) << 4 |
                      gl_hex_val(p[3]));
}

// A number with a fraction or an exponent, rewritten the way Python's repr(float) does: the
// shortest digits that read back to the same double, fixed notation for decimal exponents
// -4 <= e < 16 (with ".0" when integral), else d.ddde+XX. Lexemes that overflow the double range
// are kept as written (Python would print the non-JSON "Infinity").
static gl_status put_real(struct gl_buf *b, const char *lex, size_t n)
{
    char tmp[400], s[48], out[64];
    if (n >= sizeof tmp)
        return gl_buf_put(b, lex, n);
    memcpy(tmp, lex, n);
    tmp[n] = '\0';
    double x = strtod(tmp, NULL);
    if (isinf(x) || isnan(x))
        return gl_buf_put(b, lex, n);
    for (int p = 0; p < 17; p++) { // shortest round trip; %.16e always does
        snprintf(s, sizeof s, "%.*e", p, x);
        if (strtod(s, NULL) == x)
            break;
    }
    char digits[24];
    int nd = 0, neg = s[0] == '-';
    const char *q = s + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int e10 = atoi(q + 1), decpt = e10 + 1, o = 0;
    if (neg)
        out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -decpt; i++)
                out[o++] = '0';
            for (int i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else if (nd <= decpt) {
            for (int i = 0; i < decpt; i++)
                out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            out[o++] = '0';
        } else {
            for (int i = 0; i < nd; i++) {
                if (i == decpt)
                    out[o++] = '.';
                out[o++] = digits[i];
            }
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", e10 < 0 ? '-' : '+',
                      e10 < 0 ? -e10 : e10);
    }
    return gl_buf_put(b, out, (size_t)o);
}

// Compacts a span already validated by js_value. Returns 0, or -1 when out of memory.
static int compact(const char *p, const char *end, struct gl_buf *out)
{
    int oom = 0;
    while (p < end && !oom) {
        char c = *p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            p++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) { // integers exactly, reals as Python prints
            const char *q = p;
            int real = 0;
            while (q < end && strchr("+-0123456789.eE", *q) && *q) {
                real |= *q == '.' || *q == 'e' || *q == 'E';
                q++;
            }
            oom |= (real ? put_real(out, p, (size_t)(q - p))
                         : gl_buf_put(out, p, (size_t)(q - p))) != GL_OK;
            p = q;
            continue;
        }
        if (c != '"') {
            oom |= gl_buf_putc(out, c) != GL_OK;
            p++;
            continue;
        }
        oom |= gl_buf_putc(out, '"') != GL_OK;
        p++;
        while (*p != '"') {
            if (*p != '\\') { // raw bytes (UTF-8 or not) pass through
                oom |= gl_buf_putc(out, *p) != GL_OK;
                p++;
                continue;
            }
            char e = p[1];
            if (e != 'u') {
                static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
                put_str_char(out, (unsigned char)to[strchr(from, e) - from], &oom);
                p += 2;
                continue;
            }
            uint32_t cp = hex4(p + 2);
            p += 6;
            if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                uint32_t lo = hex4(p + 2);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
            }
            put_str_char(out, cp, &oom);
        }
        oom |= gl_buf_putc(out, '"') != GL_OK;
        p++;
    }
    return oom ? -1 : 0;
}

// Compares a scanned key span (with quotes) with a plain ASCII name.
static int key_is(const char *k, const char *kend, const char *name)
{
    size_t n = strlen(name);
    return (size_t)(kend - k) == n + 2 && !memcmp(k + 1, name, n);
}

struct span {
    const char *p, *end;
};

struct case_test {
    struct span data;
    int valid; // -1 = missing/not a boolean
};

struct case_file {
    struct span schema;
    struct case_test *tests;
    size_t n_tests;
};

// Iterates an object's members: calls fn(key span, value span) for each.
typedef int (*member_fn)(void *ctx, struct span key, struct span val);

static int js_members(struct jscan *s, member_fn fn, void *ctx)
{
    js_ws(s);
    if (s->p >= s->end || *s->p != '{')
        return js_fail(s, "expected an object");
    s->p++;
    js_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        struct span k, v;
        js_ws(s);
        k.p = s->p;
        if (js_string(s))
            return -1;
        k.end = s->p;
        js_ws(s);
        if (s->p >= s->end || *s->p != ':')
            return js_fail(s, "expected ':'");
        s->p++;
        js_ws(s);
        v.p = s->p;
        if (js_value(s, 1))
            return -1;
        v.end = s->p;
        if (fn(ctx, k, v))
            return js_fail(s, "out of memory");
        js_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return 0;
        }
        return js_fail(s, "expected ',' or '}'");
    }
}

static int test_member(void *ctx, struct span k, struct span v)
{
    struct case_test *t = ctx;
    if (key_is(k.p, k.end, "data"))
        t->data = v;
    else if (key_is(k.p, k.end, "valid"))
        t->valid = v.end - v.p == 4 && !memcmp(v.p, "true", 4)    ? 1
                   : v.end - v.p == 5 && !memcmp(v.p, "false", 5) ? 0
                                                                  : -1;
    return 0;
}

struct file_ctx {
    struct case_file *cf;
    struct span tests;
    int have_tests;
};

static int file_member(void *ctx, struct span k, struct span v)
{
    struct file_ctx *fc = ctx;
    if (key_is(k.p, k.end, "schema"))
        fc->cf->schema = v;
    else if (key_is(k.p, k.end, "tests")) {
        fc->tests = v;
        fc->have_tests = 1;
    }
    return 0;
}

// Parses a case file; on failure returns -1 with *why and *at set. cf->tests is malloc'ed.
static int case_parse(const char *text, size_t len, struct case_file *cf, const char **why,
                      size_t *at)
{
    struct jscan s = {.p = text, .end = text + len, .base = text};
    struct file_ctx fc = {.cf = cf};
    memset(cf, 0, sizeof *cf);
    if (js_members(&s, file_member, &fc))
        goto fail;
    js_ws(&s);
    if (s.p != s.end) {
        js_fail(&s, "trailing characters after the case object");
        goto fail;
    }
    if (!cf->schema.p) {
        s.p = text;
        js_fail(&s, "no \"schema\" member");
        goto fail;
    }
    if (!fc.have_tests)
        return 0; // a schema without tests: compiled and timed only
    s.p = fc.tests.p;
    if (*s.p != '[') {
        js_fail(&s, "\"tests\" is not an array");
        goto fail;
    }
    s.p++;
    js_ws(&s);
    size_t cap = 0;
    while (s.p < fc.tests.end && *s.p != ']') {
        if (cf->n_tests == cap) {
            cap = cap ? cap * 2 : 8;
            struct case_test *nt = realloc(cf->tests, cap * sizeof *nt);
            if (!nt) {
                js_fail(&s, "out of memory");
                goto fail;
            }
            cf->tests = nt;
        }
        struct case_test *t = &cf->tests[cf->n_tests++];
        *t = (struct case_test){.valid = -1};
        if (js_members(&s, test_member, t))
            goto fail;
        if (!t->data.p || t->valid < 0) {
            js_fail(&s, "a test lacks \"data\" or a boolean \"valid\"");
            goto fail;
        }
        js_ws(&s);
        if (*s.p == ',') {
            s.p++;
            js_ws(&s);
        }
    }
    return 0;
fail:
    free(cf->tests);
    cf->tests = NULL;
    *why = s.why;
    *at = s.at;
    return -1;
}

// ---------------------------------------------------------------------------------------------
// Matcher policing shared by check and sample.

struct police {
    const struct gl_tokenizer *tok;
    int32_t *specials; // ids flagged special by the tokenizer, minus the stop set
    size_t n_specials;
    int32_t stop[MAX_STOP];
    int n_stop;
    size_t words;
};

static int mask_has(const uint32_t *mask, int32_t id)
{
    return (int)(mask[id >> 5] >> (id & 31) & 1u);
}

static int police_init(struct police *pc, const struct gl_tokenizer *tok, size_t words)
{
    *pc = (struct police){.tok = tok, .words = words};
    pc->n_stop = stop_set(tok, pc->stop);
    int32_t nv = gl_tokenizer_n_vocab(tok);
    pc->specials = malloc((size_t)nv * sizeof *pc->specials);
    if (!pc->specials)
        return -1;
    for (int32_t id = 0; id < nv; id++) {
        int is_stop = 0;
        for (int i = 0; i < pc->n_stop; i++)
            is_stop |= pc->stop[i] == id;
        if (!is_stop && gl_tokenizer_is_special(tok, id))
            pc->specials[pc->n_specials++] = id;
    }
    return 0;
}

// Checks one mask against the contract; returns NULL or what is wrong (static text).
static const char *police_mask(const struct police *pc, const uint32_t *mask, int can_end)
{
    size_t i = 0;
    while (i < pc->words && !mask[i])
        i++;
    if (i == pc->words)
        return "empty mask on a live matcher";
    for (size_t k = 0; k < pc->n_specials; k++)
        if (mask_has(mask, pc->specials[k]))
            return "special token allowed";
    for (int k = 0; k < pc->n_stop; k++)
        if (mask_has(mask, pc->stop[k]) != !!can_end)
            return can_end ? "stop token masked though the document can end"
                           : "stop token allowed though the document is incomplete";
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// glint grammar check

struct kw_count {
    char *name;
    long long n;
};

struct check_run {
    struct police pc;
    struct gl_gvocab *vocab;
    const struct gl_tokenizer *tok;
    struct gl_grammar_opts gopts;
    uint32_t *mask;
    struct dvec compile_ms, mask_us;
    struct kw_count *kw;
    size_t n_kw;
    long long total, compiled, passing, valid_rejected, invalid_accepted, errors, tokens;
    long long n_valid, n_invalid, n_tests;
    struct gl_buf failures, compile_errors; // JSON array bodies
    int n_failures, n_compile_errors;
    struct gl_buf inst; // compacted instance scratch
    int verbose, dump;
    FILE *per_file; // JSON lines, one per case file (--per-file)
    FILE *digest;   // --mask-digest: one hash a mask, to compare two builds' masks exactly
    // Per case file, for --per-file: mask time sum and the slowest mask (its instance, token
    // index and the instance bytes before it), so slow states can be found and reproduced.
    double file_mask_sum, file_mask_max;
    long long verify, verified; // --verify-every K: every K-th mask against the reference
    uint32_t *ref;
    long long file_masks, slow_test, slow_tok;
    struct gl_buf slow_prefix;
};

static int kw_add(struct check_run *r, const char *name)
{
    for (size_t i = 0; i < r->n_kw; i++)
        if (!strcmp(r->kw[i].name, name)) {
            r->kw[i].n++;
            return 0;
        }
    struct kw_count *nk = realloc(r->kw, (r->n_kw + 1) * sizeof *nk);
    if (!nk)
        return -1;
    r->kw = nk;
    size_t n = strlen(name);
    char *copy = malloc(n + 1);
    if (!copy)
        return -1;
    memcpy(copy, name, n + 1);
    r->kw[r->n_kw++] = (struct kw_count){copy, 1};
    return 0;
}

// The keyword a compile error is about: the text in quotes after "keyword" in the message
// ("unsupported keyword 'uniqueItems' at /properties/x") or opening it ("'$ref' at /items: ..."),
// "accepts no value" for an unsatisfiable schema, else the status name.
static void error_keyword(gl_status st, const char *msg, char *out, size_t cap)
{
    const char *k = strstr(msg, "keyword ");
    if (k) {
        k += 8;
        char q = *k;
        if (q == '\'' || q == '"' || q == '`') {
            const char *e = strchr(k + 1, q);
            if (e && e > k + 1 && (size_t)(e - k - 1) < cap) {
                memcpy(out, k + 1, (size_t)(e - k - 1));
                out[e - k - 1] = '\0';
                return;
            }
        }
    }
    const char *q = strncmp(msg, "grammar: ", 9) ? msg : msg + 9; // "'$ref' at /x: ..."
    const char *e = *q == '\'' ? strchr(q + 1, '\'') : NULL;
    if (e && e > q + 1 && (size_t)(e - q - 1) < cap) {
        memcpy(out, q + 1, (size_t)(e - q - 1));
        out[e - q - 1] = '\0';
        return;
    }
    snprintf(out, cap, "%s",
             strstr(msg, "accepts no value") ? "accepts no value" : gl_status_name(st));
}

static void list_sep(struct gl_buf *b, int n)
{
    if (n > 0)
        gl_buf_putc(b, ',');
}

// Appends {"file":..., ...} to r->failures (first LIST_CAP only).
static void add_failure(struct check_run *r, const char *file, long long test, int valid,
                        const char *kind, long long at_token, const char *why)
{
    if (r->n_failures >= LIST_CAP)
        return;
    char num[96];
    struct gl_buf *b = &r->failures;
    list_sep(b, r->n_failures++);
    gl_buf_put(b, "{\"file\":", 8);
    gl_buf_putc(b, '"');
    for (const char *p = file; *p; p++) {
        if (*p == '"' || *p == '\\')
            gl_buf_putc(b, '\\');
        if ((unsigned char)*p >= 0x20)
            gl_buf_putc(b, *p);
    }
    gl_buf_putc(b, '"');
    snprintf(num, sizeof num, ",\"test\":%lld,\"valid\":%s,\"at_token\":%lld,\"kind\":", test,
             valid ? "true" : "false", at_token);
    gl_buf_put(b, num, strlen(num));
    gl_buf_putc(b, '"');
    gl_buf_put(b, kind, strlen(kind));
    gl_buf_put(b, "\",\"why\":\"", 9);
    for (const char *p = why; *p; p++) {
        if (*p == '"' || *p == '\\')
            gl_buf_putc(b, '\\');
        if ((unsigned char)*p >= 0x20)
            gl_buf_putc(b, *p);
    }
    gl_buf_put(b, "\"}", 2);
}

static void add_compile_error(struct check_run *r, const char *file, const char *kw,
                              const char *msg)
{
    if (r->n_compile_errors >= LIST_CAP)
        return;
    struct gl_buf *b = &r->compile_errors;
    list_sep(b, r->n_compile_errors++);
    const char *parts[3] = {file, kw, msg};
    const char *keys[3] = {"{\"file\":\"", "\",\"keyword\":\"", "\",\"message\":\""};
    for (int i = 0; i < 3; i++) {
        gl_buf_put(b, keys[i], strlen(keys[i]));
        for (const char *p = parts[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                gl_buf_putc(b, '\\');
            if ((unsigned char)*p >= 0x20)
                gl_buf_putc(b, *p);
        }
    }
    gl_buf_put(b, "\"}", 2);
}

// FNV-1a over the mask words (--mask-digest): equal masks give equal lines, and two builds whose
// digest files are identical computed the same masks at every step of every walk.
static uint64_t mask_hash(const uint32_t *mask, size_t words)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t w = 0; w < words; w++)
        h = (h ^ mask[w]) * 0x100000001b3ULL;
    return h;
}

// Walks one instance. Returns 1 when classified right, 0 when wrong, -1 on a contract breach.
static int check_instance(struct check_run *r, struct gl_matcher *m, const char *file,
                          size_t test_idx, const struct case_test *t)
{
    struct gl_err err = {0};
    r->inst.len = 0;
    if (compact(t->data.p, t->data.end, &r->inst)) {
        add_failure(r, file, (long long)test_idx, t->valid, "error", -1, "out of memory");
        return -1;
    }
    gl_token *ids = NULL;
    size_t n_ids = 0;
    gl_status st = gl_tokenizer_encode(r->tok, r->inst.p, r->inst.len, 0, 0, &ids, &n_ids, &err);
    if (st != GL_OK) {
        add_failure(r, file, (long long)test_idx, t->valid, "error", -1, err.msg);
        return -1;
    }
    gl_matcher_reset(m);
    const char *breach = NULL;
    long long at = -1;
    int accepted_all = 1, ended = 0;
    for (size_t i = 0; i <= n_ids && !breach; i++) {
        double t0 = now_ns();
        gl_matcher_fill_mask(m, r->mask);
        double dt = now_ns() - t0;
        dvec_push(&r->mask_us, dt / 1e3);
        r->tokens++;
        r->file_masks++;
        r->file_mask_sum += dt / 1e3;
        if (dt / 1e3 > r->file_mask_max) {
            r->file_mask_max = dt / 1e3;
            r->slow_test = (long long)test_idx;
            r->slow_tok = (long long)i;
            size_t nb = 0;
            for (size_t k = 0; k < i; k++) {
                size_t tl = 0;
                (void)gl_tokenizer_token_bytes(r->tok, ids[k], &tl);
                nb += tl;
            }
            r->slow_prefix.len = 0;
            if (nb > r->inst.len)
                nb = r->inst.len;
            // Whole characters only (a token may end inside one): the line stays valid JSON text.
            size_t lead = nb;
            while (lead > 0 && nb - lead < 4 && ((uint8_t)r->inst.p[lead - 1] & 0xC0) == 0x80)
                lead--;
            if (lead > 0 && (uint8_t)r->inst.p[lead - 1] >= 0xC0) {
                uint8_t c0 = (uint8_t)r->inst.p[lead - 1];
                size_t need = c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : 2;
                if (nb - (lead - 1) < need)
                    nb = lead - 1;
            }
            gl_buf_put(&r->slow_prefix, r->inst.p, nb);
            gl_buf_putc(&r->slow_prefix, 0);
        }
        int can_end = gl_matcher_can_end(m);
        if (r->digest)
            fprintf(r->digest, "%016llx\n", (unsigned long long)mask_hash(r->mask, r->pc.words));
        breach = police_mask(&r->pc, r->mask, can_end);
        if (!breach && r->verify > 0 && r->tokens % r->verify == 0) {
            // The definition: a token is allowed iff accept takes it (undone by a rollback).
            struct gl_err rerr;
            memset(r->ref, 0, r->pc.words * sizeof *r->ref);
            for (int32_t id = 0; id < gl_tokenizer_n_vocab(r->tok); id++)
                if (gl_matcher_accept(m, id)) {
                    r->ref[id >> 5] |= 1u << (id & 31);
                    if (gl_matcher_rollback(m, 1, &rerr) != GL_OK)
                        breach = "rollback of a probe token failed";
                }
            r->verified++;
            if (!breach && memcmp(r->ref, r->mask, r->pc.words * sizeof *r->ref))
                breach = "mask differs from the token-by-token reference";
        }
        if (breach) {
            at = (long long)i;
            break;
        }
        if (i == n_ids) { // the end: the stop set must be allowed iff can_end
            if (r->pc.n_stop > 0) {
                int allowed = mask_has(r->mask, r->pc.stop[0]);
                int acc = gl_matcher_accept(m, r->pc.stop[0]);
                if (acc != allowed)
                    breach = "mask and accept disagree on the stop token";
                else if (acc && !gl_matcher_is_finished(m))
                    breach = "accepted stop token did not finish the matcher";
                ended = acc;
            } else {
                ended = can_end;
            }
            at = (long long)i;
            break;
        }
        int allowed = mask_has(r->mask, ids[i]);
        int acc = gl_matcher_accept(m, ids[i]);
        if (acc != allowed) {
            breach = allowed ? "mask allows a token that accept refuses"
                             : "accept takes a token the mask refuses";
            at = (long long)i;
            break;
        }
        if (!acc) {
            accepted_all = 0;
            at = (long long)i;
            break;
        }
    }
    gl_free(ids);
    if (breach) {
        r->errors++;
        add_failure(r, file, (long long)test_idx, t->valid, "error", at, breach);
        return -1;
    }
    int ok_doc = accepted_all && ended;
    if (ok_doc == t->valid)
        return 1;
    if (t->valid) {
        r->valid_rejected++;
        add_failure(r, file, (long long)test_idx, 1, "valid_rejected", at,
                    accepted_all ? "stop token refused at the end" : "token refused");
    } else {
        r->invalid_accepted++;
        add_failure(r, file, (long long)test_idx, 0, "invalid_accepted", at,
                    "whole instance accepted and may end");
    }
    if (r->n_failures <= LIST_CAP && getenv("GLINT_GRAMMAR_DEBUG"))
        fprintf(stderr, "%s #%zu (%s) %s: %.*s\n", file, test_idx, t->valid ? "valid" : "invalid",
                t->valid ? "rejected" : "accepted", (int)(r->inst.len > 400 ? 400 : r->inst.len),
                r->inst.p);
    return 0;
}

// One --per-file line: the file, whether it compiled (else the keyword and message), and how its
// instances were classified.
static void per_file_line(struct check_run *r, const char *name, const char *kw, const char *msg,
                          double ms, long long tests, long long vr, long long ia, long long errs,
                          int passing)
{
    FILE *f = r->per_file;
    if (!f)
        return;
    fputs("{\"file\":", f);
    put_jstr(f, name);
    fprintf(f,
            ",\"compiled\":%s,\"passing\":%s,\"tests\":%lld,\"valid_rejected\":%lld,"
            "\"invalid_accepted\":%lld,\"errors\":%lld,\"compile_ms\":%.4f",
            kw ? "false" : "true", passing ? "true" : "false", tests, vr, ia, errs, ms);
    if (!kw && r->file_masks) {
        fprintf(f,
                ",\"masks\":%lld,\"mask_us_sum\":%.1f,\"mask_us_max\":%.1f,\"slow_test\":%lld,"
                "\"slow_token\":%lld,\"slow_prefix\":",
                r->file_masks, r->file_mask_sum, r->file_mask_max, r->slow_test, r->slow_tok);
        put_jstr(f, r->slow_prefix.len ? r->slow_prefix.p : "");
    }
    if (kw) {
        fputs(",\"keyword\":", f);
        put_jstr(f, kw);
        fputs(",\"message\":", f);
        put_jstr(f, msg);
    }
    fputs("}\n", f);
}

static void check_file(struct check_run *r, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0, at = 0;
    const char *why = NULL;
    char *text = read_file(path, &len, &why);
    r->total++;
    if (r->digest)
        fprintf(r->digest, "# %s\n", name);
    r->file_masks = 0;
    r->file_mask_sum = r->file_mask_max = 0;
    struct case_file cf;
    if (!text || case_parse(text, len, &cf, &why, &at)) {
        char msg[256];
        snprintf(msg, sizeof msg, "case file: %s at byte %zu", why ? why : "?", text ? at : 0);
        kw_add(r, "bad case file");
        add_compile_error(r, name, "bad case file", msg);
        per_file_line(r, name, "bad case file", msg, 0, 0, 0, 0, 0, 0);
        gl_free(text);
        return;
    }
    if (r->dump) { // the serialization only: one compact instance per line
        for (size_t i = 0; i < cf.n_tests; i++) {
            r->inst.len = 0;
            if (compact(cf.tests[i].data.p, cf.tests[i].data.end, &r->inst) == 0)
                printf("%s\n", r->inst.p);
        }
        free(cf.tests);
        gl_free(text);
        return;
    }
    struct gl_err err = {0};
    struct gl_grammar *g = NULL;
    double t0 = now_ns();
    gl_status st = gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, cf.schema.p,
                                      (size_t)(cf.schema.end - cf.schema.p), &r->gopts, &err);
    double ms = (now_ns() - t0) / 1e6;
    if (st != GL_OK) {
        char kw[128];
        error_keyword(st, err.msg, kw, sizeof kw);
        kw_add(r, kw);
        add_compile_error(r, name, kw, err.msg);
        per_file_line(r, name, kw, err.msg, ms, (long long)cf.n_tests, 0, 0, 0, 0);
        if (r->verbose)
            fprintf(stderr, "%s: compile: %s: %s\n", name, gl_status_name(st), err.msg);
        free(cf.tests);
        gl_free(text);
        return;
    }
    r->compiled++;
    dvec_push(&r->compile_ms, ms);
    struct gl_matcher *m = NULL;
    st = gl_matcher_new(&m, g, r->vocab, r->pc.stop, r->pc.n_stop, &err);
    int all_ok = st == GL_OK;
    long long vr0 = r->valid_rejected, ia0 = r->invalid_accepted, e0 = r->errors;
    if (st != GL_OK) {
        r->errors++;
        add_failure(r, name, -1, 0, "error", -1, err.msg);
    }
    for (size_t i = 0; m && i < cf.n_tests; i++) {
        r->n_tests++;
        if (cf.tests[i].valid)
            r->n_valid++;
        else
            r->n_invalid++;
        if (check_instance(r, m, name, i, &cf.tests[i]) != 1)
            all_ok = 0;
    }
    per_file_line(r, name, NULL, NULL, ms, (long long)cf.n_tests, r->valid_rejected - vr0,
                  r->invalid_accepted - ia0, r->errors - e0, all_ok);
    if (all_ok)
        r->passing++;
    else if (r->verbose)
        fprintf(stderr, "%s: not passing\n", name);
    gl_matcher_free(m);
    gl_grammar_unref(g);
    free(cf.tests);
    gl_free(text);
}

// Sorted *.json names in dir (malloc'ed array of malloc'ed strings).
static char **list_cases(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json"))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        if (!(v[*n] = malloc(l + 1)))
            break;
        memcpy(v[(*n)++], e->d_name, l + 1);
    }
    closedir(d);
    if (!v)
        v = malloc(sizeof *v);
    if (v)
        qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static void print_check_json(struct check_run *r, double wall_s)
{
    qsort(r->compile_ms.v, r->compile_ms.n, sizeof(double), cmp_double);
    qsort(r->mask_us.v, r->mask_us.n, sizeof(double), cmp_double);
    double sum = 0, csum = 0;
    for (size_t i = 0; i < r->mask_us.n; i++)
        sum += r->mask_us.v[i];
    for (size_t i = 0; i < r->compile_ms.n; i++)
        csum += r->compile_ms.v[i];
    const double *c = r->compile_ms.v, *mu = r->mask_us.v;
    size_t nc = r->compile_ms.n, nm = r->mask_us.n;
    printf("{\"schemas_total\":%lld,\"schemas_compiled\":%lld,\"schemas_passing\":%lld,"
           "\"valid_rejected\":%lld,\"invalid_accepted\":%lld,",
           r->total, r->compiled, r->passing, r->valid_rejected, r->invalid_accepted);
    printf("\"compile_ms\":{\"p50\":%.4f,\"p99\":%.4f,\"max\":%.4f,\"mean\":%.4f},", pct(c, nc, .5),
           pct(c, nc, .99), nc ? c[nc - 1] : 0.0, nc ? csum / (double)nc : 0.0);
    printf("\"mask_us\":{\"mean\":%.3f,\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"p90\":%.3f,"
           "\"p999\":%.3f},",
           nm ? sum / (double)nm : 0.0, pct(mu, nm, .5), pct(mu, nm, .99), nm ? mu[nm - 1] : 0.0,
           pct(mu, nm, .9), pct(mu, nm, .999));
    printf("\"errors_by_keyword\":{");
    for (size_t i = 0; i < r->n_kw; i++) { // most frequent first
        size_t best = i;
        for (size_t j = i + 1; j < r->n_kw; j++)
            if (r->kw[j].n > r->kw[best].n)
                best = j;
        struct kw_count tmp = r->kw[i];
        r->kw[i] = r->kw[best];
        r->kw[best] = tmp;
        if (i)
            putchar(',');
        put_jstr(stdout, r->kw[i].name);
        printf(":%lld", r->kw[i].n);
    }
    printf("},\"instances\":%lld,\"instances_valid\":%lld,\"instances_invalid\":%lld,", r->n_tests,
           r->n_valid, r->n_invalid);
    printf("\"tokens\":%lld,\"masks\":%zu,\"masks_verified\":%lld,\"errors\":%lld,"
           "\"ws_max\":%d,\"wall_s\":%.2f,",
           r->tokens, nm, r->verified, r->errors, r->gopts.ws_max, wall_s);
    printf("\"clock\":\"%s\",", timing_clock == CLOCK_MONOTONIC ? "wall" : "thread-cpu");
    printf("\"failures\":[%s],\"compile_errors\":[%s]}\n", r->failures.p ? r->failures.p : "",
           r->compile_errors.p ? r->compile_errors.p : "");
}

static void print_check_text(struct check_run *r, double wall_s)
{
    qsort(r->compile_ms.v, r->compile_ms.n, sizeof(double), cmp_double);
    qsort(r->mask_us.v, r->mask_us.n, sizeof(double), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < r->mask_us.n; i++)
        sum += r->mask_us.v[i];
    size_t nm = r->mask_us.n, nc = r->compile_ms.n;
    printf("schemas: %lld total, %lld compiled, %lld passing (%.1f%%)\n", r->total, r->compiled,
           r->passing, r->total ? 100.0 * (double)r->passing / (double)r->total : 0.0);
    printf(
        "instances: %lld (%lld valid, %lld invalid); valid rejected %lld, invalid accepted %lld, "
        "contract errors %lld\n",
        r->n_tests, r->n_valid, r->n_invalid, r->valid_rejected, r->invalid_accepted, r->errors);
    printf("compile ms: p50 %.3f p99 %.3f max %.3f\n", pct(r->compile_ms.v, nc, .5),
           pct(r->compile_ms.v, nc, .99), nc ? r->compile_ms.v[nc - 1] : 0.0);
    printf("mask us (%zu masks): mean %.2f p50 %.2f p99 %.2f max %.2f\n", nm,
           nm ? sum / (double)nm : 0.0, pct(r->mask_us.v, nm, .5), pct(r->mask_us.v, nm, .99),
           nm ? r->mask_us.v[nm - 1] : 0.0);
    for (size_t i = 0; i < r->n_kw; i++)
        printf("  compile error %-32s %lld\n", r->kw[i].name, r->kw[i].n);
    printf("wall %.1f s\n", wall_s);
}

int gl_harness_grammar_check(const struct gl_grammar_check_opts *po)
{
    struct gl_grammar_check_opts o = *po;
    timing_clock = o.cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    size_t n_files = 0;
    char **files = list_cases(o.cases, &n_files);
    if (!files) {
        fprintf(stderr, "glint grammar check: cannot list %s\n", o.cases);
        return 1;
    }
    struct gl_tokenizer *tok = o.dump ? NULL : load_tokenizer("check", o.tokenizer);
    struct check_run r = {
        .tok = tok, .gopts = gl_grammar_default_opts(), .verbose = o.verbose, .dump = o.dump};
    struct gl_err err = {0};
    int rc = 1;
    if (o.dump) {
        for (size_t i = 0; i < n_files; i += (size_t)o.every)
            check_file(&r, o.cases, files[i]);
        rc = 0;
        goto out;
    }
    if (!tok)
        goto out;
    if (o.per_file && !(r.per_file = fopen(o.per_file, "w"))) {
        fprintf(stderr, "glint grammar check: cannot write %s\n", o.per_file);
        goto out;
    }
    if (o.digest && !(r.digest = fopen(o.digest, "w"))) {
        fprintf(stderr, "glint grammar check: cannot write %s\n", o.digest);
        goto out;
    }
    if (o.ws_max >= 0)
        r.gopts.ws_max = o.ws_max;
    if (gl_gvocab_new(&r.vocab, tok, &err) != GL_OK) {
        fprintf(stderr, "glint grammar check: vocabulary index: %s\n", err.msg);
        goto out;
    }
    size_t words = gl_gvocab_mask_words(r.vocab);
    r.mask = malloc(words * sizeof *r.mask);
    r.verify = o.verify;
    r.ref = o.verify > 0 ? malloc(words * sizeof *r.ref) : NULL;
    if (!r.mask || (o.verify > 0 && !r.ref) || police_init(&r.pc, tok, words)) {
        fprintf(stderr, "glint grammar check: out of memory\n");
        goto out;
    }
    double t0 = clock_ns(CLOCK_MONOTONIC);
    long long done = 0;
    for (size_t i = 0; i < n_files; i += (size_t)o.every) {
        if (o.limit >= 0 && done >= o.limit)
            break;
        check_file(&r, o.cases, files[i]);
        done++;
    }
    double wall = (clock_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    if (o.json)
        print_check_json(&r, wall);
    else
        print_check_text(&r, wall);
    rc = r.errors ? 1 : 0;
out:
    for (size_t i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    for (size_t i = 0; i < r.n_kw; i++)
        free(r.kw[i].name);
    free(r.kw);
    free(r.compile_ms.v);
    free(r.mask_us.v);
    gl_free(r.failures.p);
    gl_free(r.compile_errors.p);
    gl_free(r.inst.p);
    gl_free(r.slow_prefix.p);
    free(r.ref);
    free(r.mask);
    free(r.pc.specials);
    gl_gvocab_free(r.vocab);
    gl_tokenizer_free(tok);
    if (r.per_file && fclose(r.per_file) && rc == 0) {
        fprintf(stderr, "glint grammar check: writing %s failed\n", o.per_file);
        rc = 1;
    }
    if (r.digest && fclose(r.digest) && rc == 0) {
        fprintf(stderr, "glint grammar check: writing %s failed\n", o.digest);
        rc = 1;
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// glint grammar sample
//
// The walk: at each step fill the mask; if a stop token is allowed take it with probability
// 0.85 (1 past M/2, where M = --max-tokens); else draw a token. A draw is in "closing" mode with
// probability 0.1 + 0.9 * min(1, step / (M/2)), otherwise uniform over the allowed tokens. In
// closing mode the draw picks a token class by cls_share (pure closers like '"', '"}' and ']'
// first, then punctuation), then a token uniformly within it: strings, numbers, arrays and
// objects end soon while early choices stay wide. Token classes come from the bytes, once.

struct rng {
    uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

// Token classes for the closing-mode weights (index = class; OTHER and SPECIAL have no list).
enum { TCLS_CLOSE_Q, TCLS_CLOSE, TCLS_PUNCT, TCLS_CLOSER, TCLS_SHORT, TCLS_OTHER, TCLS_SPECIAL };
#define N_WCLS 5
// CLOSE_Q: only '"', '}', ']' with a '"' (ends a string, or opens and ends an empty one);
// CLOSE: only '}' and ']'; PUNCT: one ASCII punctuation byte other than those and ',', '{', '['
// (it reaches the '@' of an email, the '-' of a date); CLOSER: some closer, no ',', '{', '[';
// SHORT: <= 2 bytes. cls_share: each class's share of a closing-mode draw (OTHER gets the rest),
// renormalized over the classes with an allowed token; uniform within a class.
static const double cls_share[N_WCLS] = {0.45, 0.2, 0.25, 0.02, 0.04};
#define OTHER_SHARE 0.04
#define HINT_SHARE  0.5 // closing mode in a string or at a key: first try the schema's strings

struct walker {
    struct police pc;
    const struct gl_tokenizer *tok;
    uint8_t *cls;
    int32_t *ids[N_WCLS]; // token ids by class
    size_t n_ids[N_WCLS];
    int32_t *cand;       // scratch for allowed members of the classes
    struct gl_buf hints; // the schema's strings as JSON string bodies, NUL-separated (walker_hints)
    size_t n_hints;
    // Where the document so far stands (fed with each accepted token's bytes): nesting, inside a
    // string (from byte str_start of the document), and whether an object key may start here.
    char stack[64];
    int depth, in_str, esc, key_pos, str_is_key;
    size_t str_start;
    uint32_t *mask, *mask2, *mask3;
    size_t words;
    long long violations;
};

static int token_class(const char *b, size_t len)
{
    int close = 0, open = 0, quote = 0, pure = 1;
    for (size_t i = 0; i < len; i++) {
        int c = b[i] == '"' || b[i] == '}' || b[i] == ']';
        close |= c;
        pure &= c;
        quote |= b[i] == '"';
        open |= b[i] == ',' || b[i] == '{' || b[i] == '[';
    }
    if (pure && len > 0)
        return quote ? TCLS_CLOSE_Q : TCLS_CLOSE;
    if (len == 1 && b[0] > ' ' && b[0] < 0x7f && !isalnum((unsigned char)b[0]) && !open)
        return TCLS_PUNCT;
    if (close && !open)
        return TCLS_CLOSER;
    return len <= 2 ? TCLS_SHORT : TCLS_OTHER;
}

static int walker_init(struct walker *w, const struct gl_tokenizer *tok, size_t words)
{
    int32_t nv = gl_tokenizer_n_vocab(tok);
    w->tok = tok;
    w->words = words;
    w->cls = calloc((size_t)nv, 1);
    w->cand = malloc((size_t)nv * sizeof(int32_t));
    w->mask = malloc(words * sizeof(uint32_t));
    w->mask2 = malloc(words * sizeof(uint32_t));
    w->mask3 = malloc(words * sizeof(uint32_t));
    if (!w->cls || !w->cand || !w->mask || !w->mask2 || !w->mask3)
        return -1;
    for (int32_t id = 0; id < nv; id++) {
        size_t len = 0;
        const char *b = gl_tokenizer_token_bytes(tok, id, &len);
        w->cls[id] = !b || gl_tokenizer_is_special(tok, id) ? TCLS_SPECIAL : token_class(b, len);
        if (w->cls[id] < N_WCLS)
            w->n_ids[w->cls[id]]++;
    }
    for (int c = 0; c < N_WCLS; c++) {
        if (!(w->ids[c] = malloc((w->n_ids[c] + 1) * sizeof(int32_t))))
            return -1;
        w->n_ids[c] = 0;
    }
    for (int32_t id = 0; id < nv; id++)
        if (w->cls[id] < N_WCLS)
            w->ids[w->cls[id]][w->n_ids[w->cls[id]]++] = id;
    return police_init(&w->pc, tok, words);
}

static void walker_free(struct walker *w)
{
    free(w->cls);
    for (int c = 0; c < N_WCLS; c++)
        free(w->ids[c]);
    free(w->cand);
    gl_free(w->hints.p);
    free(w->mask);
    free(w->mask2);
    free(w->mask3);
    free(w->pc.specials);
}

// The k-th (0-based) set bit of the mask.
static int32_t nth_allowed(const uint32_t *mask, size_t words, uint64_t k)
{
    for (size_t i = 0; i < words; i++) {
        uint64_t c = (uint64_t)__builtin_popcount(mask[i]);
        if (k < c) {
            uint32_t w = mask[i];
            for (uint64_t j = 0; j < k; j++)
                w &= w - 1;
            return (int32_t)(i * 32 + (size_t)__builtin_ctz(w));
        }
        k -= c;
    }
    return -1;
}

// Hints: every string of the schema (object keys and string values) as a JSON string body. A
// required key among free-form keys (additionalProperties) or an enum deep in an anyOf is found
// by a random walk only if closing mode steers towards them: see hint_draw.
static void walker_hints(struct walker *w, json_t *v, int depth, int required)
{
    const char *key;
    json_t *child;
    size_t i;
    int oom = 0;
    if (depth > 64 || w->n_hints >= 4096)
        return;
    if (json_is_string(v)) {
        const unsigned char *p = (const unsigned char *)json_string_value(v);
        size_t len = json_string_length(v);
        oom |= gl_buf_putc(&w->hints, required ? 'R' : '-') != GL_OK; // a name listed in "required"
        for (size_t k = 0; k < len; k++) // re-escape; non-ASCII bytes pass through as UTF-8
            if (p[k] < 0x80)
                put_str_char(&w->hints, p[k], &oom);
            else
                oom |= gl_buf_putc(&w->hints, (char)p[k]) != GL_OK;
        oom |= gl_buf_putc(&w->hints, '\0') != GL_OK;
        w->n_hints += !oom;
    } else if (json_is_object(v)) {
        json_object_foreach(v, key, child)
        {
            json_t *k = json_string(key);
            if (k)
                walker_hints(w, k, depth + 1, 0);
            json_decref(k);
            walker_hints(w, child, depth + 1, !strcmp(key, "required"));
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, child) walker_hints(w, child, depth + 1, required);
    }
}

static void track_bytes(struct walker *w, const char *p, size_t n, size_t pos)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (w->in_str) {
            if (w->esc)
                w->esc = 0;
            else if (c == '\\')
                w->esc = 1;
            else if (c == '"')
                w->in_str = 0;
            continue;
        }
        if (c == '{' || c == '[') {
            if (w->depth < (int)sizeof w->stack)
                w->stack[w->depth] = c;
            w->depth++;
            w->key_pos = c == '{';
        } else if (c == '}' || c == ']') {
            w->depth -= w->depth > 0;
            w->key_pos = 0;
        } else if (c == '"') {
            w->in_str = 1;
            w->str_start = pos + i + 1;
            w->str_is_key = w->key_pos;
            w->key_pos = 0;
        } else if (c == ',') {
            w->key_pos =
                w->depth > 0 && w->depth <= (int)sizeof w->stack && w->stack[w->depth - 1] == '{';
        } else if (c == ':') {
            w->key_pos = 0;
        }
    }
}

// A token that continues the document towards one of the schema's strings: inside a string
// whose bytes so far are a prefix of a hint, the first token of the hint's rest and the closing
// quote; outside strings, the first token of a whole quoted hint. -1 if none is allowed.
static int32_t hint_draw(struct walker *w, struct rng *rg, const struct gl_buf *doc,
                         int only_required)
{
    const char *pre = w->in_str ? doc->p + w->str_start : "";
    size_t npre = w->in_str ? doc->len - w->str_start : 0, nc = 0;
    char tmp[520];
    for (const char *e = w->hints.p, *end = e + w->hints.len; e && e < end; e += strlen(e) + 1) {
        const char *h = e + 1; // after the 'R' / '-' flag
        size_t hl = strlen(h), n = 0;
        if (only_required && *e != 'R')
            continue;
        if (hl < npre || memcmp(h, pre, npre) || hl - npre + 2 > sizeof tmp)
            continue;
        if (!w->in_str)
            tmp[n++] = '"';
        memcpy(tmp + n, h + npre, hl - npre);
        n += hl - npre;
        tmp[n++] = '"';
        gl_token *ids = NULL;
        size_t nid = 0;
        if (gl_tokenizer_encode(w->tok, tmp, n, 0, 0, &ids, &nid, NULL) != GL_OK)
            continue;
        if (nid > 0 && mask_has(w->mask, ids[0]))
            w->cand[nc++] = ids[0];
        gl_free(ids);
    }
    return nc ? w->cand[rng_next(rg) % nc] : -1;
}

static int32_t draw(struct walker *w, struct rng *rg, long long step, long long max_tokens,
                    const struct gl_buf *doc)
{
    uint64_t total = 0;
    for (size_t i = 0; i < w->words; i++)
        total += (uint64_t)__builtin_popcount(w->mask[i]);
    if (total == 0)
        return -1;
    if (w->n_hints && w->in_str && (doc->len > w->str_start || w->str_is_key) &&
        rng_unit(rg) < 0.9) { // finish a string that began as a hint (or a key just opened)
        int32_t id = doc->len == w->str_start ? hint_draw(w, rg, doc, 1) : -1;
        if (id < 0)
            id = hint_draw(w, rg, doc, 0);
        if (id >= 0)
            return id;
    }
    if (w->n_hints && w->key_pos && rng_unit(rg) < 0.7) { // mostly declared keys, required first
        int32_t id = hint_draw(w, rg, doc, 1);
        if (id < 0)
            id = hint_draw(w, rg, doc, 0);
        if (id >= 0)
            return id;
    }
    double half = (double)max_tokens / 2.0;
    double pclose = 0.1 + 0.9 * fmin(1.0, (double)step / (half > 1 ? half : 1));
    if (rng_unit(rg) >= pclose)
        return nth_allowed(w->mask, w->words, rng_next(rg) % total);
    if (w->n_hints && (w->in_str || w->key_pos) && rng_unit(rg) < HINT_SHARE) {
        int32_t id = w->key_pos ? hint_draw(w, rg, doc, 1) : -1; // required keys first
        if (id < 0)
            id = hint_draw(w, rg, doc, 0);
        if (id >= 0)
            return id;
    }
    size_t start[N_WCLS + 1], n = 0;
    double sum = 0, cw[N_WCLS];
    for (int c = 0; c < N_WCLS; c++) {
        start[c] = n;
        for (size_t i = 0; i < w->n_ids[c]; i++)
            if (mask_has(w->mask, w->ids[c][i]))
                w->cand[n++] = w->ids[c][i];
        cw[c] = n > start[c] ? cls_share[c] : 0;
        sum += cw[c];
    }
    start[N_WCLS] = n;
    double x = rng_unit(rg) * (sum + (total > n ? OTHER_SHARE : 0));
    for (int c = 0; c < N_WCLS; c++) {
        if (x < cw[c])
            return w->cand[start[c] + rng_next(rg) % (start[c + 1] - start[c])];
        x -= cw[c];
    }
    for (int tries = 0; tries < 64; tries++) { // an "other" token by rejection
        int32_t id = nth_allowed(w->mask, w->words, rng_next(rg) % total);
        if (w->cls[id] == TCLS_OTHER || tries == 63)
            return id;
    }
    return -1;
}

static void violation(struct walker *w, long long walk, long long step, const char *what)
{
    w->violations++;
    if (w->violations <= 20)
        fprintf(stderr, "glint grammar sample: walk %lld step %lld: %s\n", walk, step, what);
}

// One walk; returns 1 when finished (document in *doc), 0 when out of budget, -1 on a breach.
static int walk_once(struct walker *w, struct gl_matcher *m, struct rng *rg, long long walk,
                     long long max_tokens, struct gl_buf *doc)
{
    struct gl_err err = {0};
    gl_matcher_reset(m);
    doc->len = 0;
    w->depth = w->in_str = w->esc = w->key_pos = w->str_is_key = 0;
    char forced[256];
    for (long long step = 0; step < max_tokens; step++) {
        gl_matcher_fill_mask(m, w->mask);
        int can_end = gl_matcher_can_end(m);
        const char *bad = police_mask(&w->pc, w->mask, can_end);
        if (bad) {
            violation(w, walk, step, bad);
            fprintf(stderr, "  document so far: %.*s\n", (int)doc->len, doc->p ? doc->p : "");
            return -1;
        }
        if (can_end && w->pc.n_stop > 0) {
            double pstop = step >= max_tokens / 2 ? 1.0 : 0.85;
            if (rng_unit(rg) < pstop) {
                int32_t stop = w->pc.stop[rng_next(rg) % (uint64_t)w->pc.n_stop];
                if (!gl_matcher_accept(m, stop) || !gl_matcher_is_finished(m)) {
                    violation(w, walk, step, "allowed stop token refused by accept");
                    return -1;
                }
                gl_matcher_fill_mask(m, w->mask);
                for (size_t i = 0; i < w->words; i++)
                    if (w->mask[i]) {
                        violation(w, walk, step, "mask not empty after the stop token");
                        return -1;
                    }
                return 1;
            }
        }
        int32_t id = draw(w, rg, step, max_tokens, doc);
        if (id >= 0 && w->cls[id] == TCLS_SPECIAL) { // only a stop token can be (police_mask)
            if (!gl_matcher_accept(m, id) || !gl_matcher_is_finished(m)) {
                violation(w, walk, step, "allowed stop token refused by accept");
                return -1;
            }
            return 1;
        }
        if (id < 0) {
            violation(w, walk, step, "no token to draw");
            return -1;
        }
        size_t tlen = 0;
        const char *tb = gl_tokenizer_token_bytes(w->tok, id, &tlen);
        size_t nf = gl_matcher_forced_bytes(m, forced, sizeof forced);
        size_t ncmp = nf < tlen ? nf : tlen;
        if (ncmp && memcmp(forced, tb, ncmp)) {
            violation(w, walk, step, "an allowed token contradicts the forced bytes");
            return -1;
        }
        int check_rb = rng_next(rg) % 8 == 0;
        if (check_rb)
            memcpy(w->mask3, w->mask, w->words * sizeof *w->mask);
        if (!gl_matcher_accept(m, id)) {
            violation(w, walk, step, "mask allows a token that accept refuses");
            fprintf(stderr, "  after %zu bytes: %.*s\n  token %d: ", doc->len, (int)doc->len,
                    doc->p ? doc->p : "", (int)id);
            put_jstr_n(stderr, tb, tlen);
            fputc('\n', stderr);
            return -1;
        }
        if (check_rb) { // rollback must restore the exact state: same masks before and after
            gl_matcher_fill_mask(m, w->mask);
            if (gl_matcher_rollback(m, 1, &err) != GL_OK) {
                violation(w, walk, step, "rollback of 1 token failed");
                return -1;
            }
            gl_matcher_fill_mask(m, w->mask2);
            if (memcmp(w->mask2, w->mask3, w->words * sizeof *w->mask)) {
                violation(w, walk, step, "mask after rollback differs from the mask before");
                return -1;
            }
            if (!gl_matcher_accept(m, id)) {
                violation(w, walk, step, "token refused after rollback");
                return -1;
            }
            gl_matcher_fill_mask(m, w->mask2);
            if (memcmp(w->mask2, w->mask, w->words * sizeof *w->mask)) {
                violation(w, walk, step, "mask after rollback + re-accept differs");
                return -1;
            }
        }
        track_bytes(w, tb, tlen, doc->len);
        if (gl_buf_put(doc, tb, tlen) != GL_OK)
            return -1;
    }
    return 0;
}

int gl_harness_grammar_sample(const struct gl_grammar_sample_opts *po)
{
    struct gl_grammar_sample_opts o = *po;
    size_t slen = 0;
    const char *why = NULL;
    char *src = read_file(o.schema, &slen, &why);
    if (!src) {
        fprintf(stderr, "glint grammar sample: %s: %s\n", o.schema, why);
        return 1;
    }
    struct gl_tokenizer *tok = load_tokenizer("sample", o.tokenizer);
    struct gl_gvocab *vocab = NULL;
    struct gl_grammar *g = NULL;
    struct gl_matcher *m = NULL;
    struct walker w = {0};
    struct gl_buf doc = {0};
    struct gl_err err = {0};
    int rc = 1;
    if (!tok)
        goto out;
    struct gl_grammar_opts gopts = gl_grammar_default_opts();
    gopts.ws_max = (int32_t)o.ws_max;
    gopts.closed_objects = o.closed;
    gl_status st = gl_grammar_compile(&g, GL_GRAMMAR_JSON_SCHEMA, src, slen, &gopts, &err);
    if (st != GL_OK) {
        fprintf(stderr, "glint grammar sample: %s: does not compile: %s: %s\n", o.schema,
                gl_status_name(st), err.msg);
        goto out;
    }
    if (gl_gvocab_new(&vocab, tok, &err) != GL_OK) {
        fprintf(stderr, "glint grammar sample: vocabulary index: %s\n", err.msg);
        goto out;
    }
    json_t *schema_json = json_loadb(src, slen, JSON_DECODE_ANY, NULL);
    int bad_init = walker_init(&w, tok, gl_gvocab_mask_words(vocab));
    if (!bad_init && schema_json)
        walker_hints(&w, schema_json, 0, 0);
    json_decref(schema_json);
    if (bad_init) {
        fprintf(stderr, "glint grammar sample: out of memory\n");
        goto out;
    }
    if (gl_matcher_new(&m, g, vocab, w.pc.stop, w.pc.n_stop, &err) != GL_OK) {
        fprintf(stderr, "glint grammar sample: matcher: %s\n", err.msg);
        goto out;
    }
    struct rng rg = {(uint64_t)o.seed * 0x2545f4914f6cdd1dull + 1};
    long long fin = 0, unfin = 0;
    for (long long k = 0; k < o.n; k++) {
        int r = walk_once(&w, m, &rg, k, o.max_tokens, &doc);
        if (r == 1) {
            fin++;
            if (o.ws_max > 0)
                put_jstr_n(stdout, doc.p ? doc.p : "", doc.len);
            else
                fwrite(doc.p ? doc.p : "", 1, doc.len, stdout);
            putchar('\n');
        } else {
            unfin++;
            if (o.verbose)
                fprintf(stderr, "unfinished walk %lld: %.*s\n", k, (int)doc.len,
                        doc.p ? doc.p : "");
        }
    }
    printf("{\"finished\": %lld, \"unfinished\": %lld}\n", fin, unfin);
    rc = w.violations ? 1 : 0;
out:
    gl_free(doc.p);
    walker_free(&w);
    gl_matcher_free(m);
    gl_grammar_unref(g);
    gl_gvocab_free(vocab);
    gl_tokenizer_free(tok);
    gl_free(src);
    return rc;
}
