// SPDX-License-Identifier: MIT
// Tests for src/grammar/regex.c. The oracle is PCRE2 (an independent backtracking engine, UTF
// mode, no UCP): each pattern is translated to PCRE2's spelling of the same ECMA meaning (`.`,
// \s, \v, \u, $) and compared on random strings (valid and invalid UTF-8) and on strings drawn
// from the DFA itself, for whole-string match, search semantics, and prefix viability (PCRE2
// hard partial matching). min_chars and unbounded are checked against brute force over the DFA.
// Also: error kinds with byte offsets, budgets on hostile patterns, escape round trips.
#include "grammar/regex.h"
#include "test.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdint.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)((rng_state >> 11) % n);
}

// Patterns in the regex.h dialect. Kept to constructs PCRE2 can express with the same meaning
// after translate() (no \S inside classes).
static const char *const PATTERNS[] = {
    // literals, alternation, quantifiers
    "abc",
    "a|b|c",
    "ab|cd",
    "a*",
    "a+",
    "a?",
    "a*b",
    "(ab)*",
    "(ab)+c",
    "a{3}",
    "a{2,4}",
    "a{2,}",
    "a{0,2}b",
    "(a|b)*abb",
    "[abc]+",
    "[a-z]*",
    "[^a-z]+",
    "[a-zA-Z0-9_]+",
    "\\d+",
    "\\D+",
    "\\w+",
    "\\W+",
    "\\s*",
    "\\S+",
    ".",
    ".*",
    ".+x",
    "x.y",
    "[.]",
    "\\.",
    "a\\+b",
    "\\(\\)",
    "\\[x\\]",
    "\\{\\}",
    "a{",
    "a{1",
    "a{,2}",
    "{",
    "}",
    "]",
    "x}y",
    "a{0}",
    "a{0,0}b",
    "a{1,1}",
    "(a{2}){2}",
    "a{0,}",
    "(ab){1,3}c",
    // anchors, in and out of alternations
    "^abc",
    "abc$",
    "^abc$",
    "^a|b$",
    "^(a|b)$",
    "a^b",
    "a$b",
    "(^a)",
    "(a$)",
    "^$",
    "^",
    "$",
    "(^a|b)c",
    "a(b$|c)",
    "^a*$",
    "(^|x)y",
    "y($|x)",
    "^(a|^b)c",
    "a$|^b",
    "(a|b$)*",
    // lazy forms (same language)
    "a*?b",
    "a+?",
    "a??b",
    "a{2,3}?",
    ".*?x",
    // groups
    "(?:ab)+",
    "(?<n>a)(?<m>b)",
    "((a))",
    "(a|)",
    "(|a)b",
    "()",
    "(a*)*",
    "(a*)+b",
    "(a|b|)+c",
    "((ab|a)(c|bcd))*d?",
    "(a|ab)(c|bcd)(d*)",
    "x|y+",
    "y+|x",
    "a*b|c",
    "c|a*b",
    // escapes
    "\\t",
    "\\n",
    "\\r",
    "\\f",
    "\\v",
    "\\0",
    "\\x41",
    "\\x7e+",
    "\\u00e9",
    "\\u20ac",
    "\\u{1F600}",
    "\\uD83D\\uDE00",
    "\\cJ",
    "\\/",
    "\\-",
    "[\\-a]",
    "[a\\-z]",
    "[\\]]",
    "[\\\\]",
    "[\\b]",
    "[\\t\\n]",
    "[\\x00-\\x1f]",
    "[\\u0080-\\u07ff]+",
    "[\\u0800-\\uffff]",
    "[\\u{10000}-\\u{10ffff}]",
    "[^\\u0000-\\u007f]",
    "[\\d\\s]+",
    "[\\w.-]+",
    "[\\W]",
    "[\\D]",
    "\\x00*",
    "[\\u00ff-\\u0100]",
    "[\\u07ff-\\u0800]",
    "[\\uffff\\u{10000}]",
    "\\u{10FFFF}",
    "[\\ud7ff\\ue000]",
    // Unicode literals
    "é+",
    "[é-ü]",
    "日本語",
    "[日本]+",
    "😀|😃",
    "[😀-😏]",
    "a😀*b",
    "€\\d+",
    "[^é]",
    ".é.",
    "ü{2,3}",
    "(日|本)*語",
    // classes
    "[^\"\\\\]*",
    "[^\"\\\\\\x00-\\x1f]*",
    "[a-]",
    "[-a]",
    "[]",
    "[^]",
    "[^\\s]",
    "[ -~]+",
    "[0-9a-fA-F]{2}",
    "[\\u00a0\\u2028]",
    "[^\\d]",
    "[^\\w\\s]",
    "[a-cx-z]+",
    "[^\\n]*",
    // line terminators and dot
    ".\\n.",
    "[\\s\\S]",
    "[^\\S\\n]",
    "[\\Sa]+",
    "(.|\\n)+",
    "\\u2028",
    ".\\u2029",
    "\\s",
    "[\\s]+",
    // JSON Schema style
    "^\\d{4}-\\d{2}-\\d{2}$",
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$",
    "^([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$",
    "^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?([zZ]|[+-]\\d\\d:\\d\\d)$",
    "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
    "^\\S+@\\S+\\.\\S+$",
    "[^@]+@[^@]+",
    "^\\+?[1-9]\\d{1,14}$",
    "^\\(\\d{3}\\) \\d{3}-\\d{4}$",
    "^(\\+\\d{1,3}\\s?)?\\(?\\d{3}\\)?[\\s.-]?\\d{3}[\\s.-]?\\d{4}$",
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$",
    ("^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}"
     "[a-zA-Z0-9])?)*$"),
    "^https?://[^\\s/$.?#].[^\\s]*$",
    "^\\d{5}(-\\d{4})?$",
    "^[A-Z]{2,3}$",
    "^[a-z0-9-]+$",
    "^#[0-9a-fA-F]{6}$",
    "^v\\d+\\.\\d+\\.\\d+$",
    "^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(-[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?$",
    "^[^\\s]+$",
    "^.{1,10}$",
    "^.{3}$",
    "^\\$?\\d+(\\.\\d{2})?$",
    "^(true|false)$",
    "^(yes|no|maybe)$",
    "^-?\\d+(\\.\\d+)?([eE][+-]?\\d+)?$",
    "^[A-Z][a-z]+( [A-Z][a-z]+)*$",
    "^\\w+( \\w+)*$",
    "^[a-zA-Z_][a-zA-Z0-9_]*$",
    "^/[a-z/]*$",
    "^\\d{3}-\\d{2}-\\d{4}$",
    "^[A-Z]{3}\\d{3}$",
    "^(?:[01]\\d|2[0-3]):[0-5]\\d$",
    "^P(\\d+Y)?(\\d+M)?(\\d+D)?(T(\\d+H)?(\\d+M)?(\\d+S)?)?$",
    "^[0-9]+(,[0-9]+)*$",
    "^(\\d+|\\*)$",
    "^([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}$",
    "^(([0-9a-fA-F]{1,4}:){1,7}|:)(:[0-9a-fA-F]{1,4}){0,6}$",
    "^[^<>]*$",
    "^\\s*\\S.*$",
    "^[\\w\\s]{0,20}$",
    "^[A-Za-z]{2}\\d{2}[A-Za-z0-9]{4,30}$",
    "^\\p{Lu}", // \p{Lu} is unsupported
    // lookaheads: leading ones (anchored), trailing positive ones (search only)
    "^(?!abc)\\w+$",
    "^(?=.*\\d)(?=.*[a-z])[a-z\\d]{4,8}$",
    "^(?!pattern$).*$",
    "^(?!tag|category)$",
    "^(?!.*--)[a-z-]+$",
    "(?!x)[a-z]",
    "(?=a)\\w*",
    "^(?!(a|b)$)[a-c]$",
    "x(?=y)",
    "\\d+(?=px)",
    "^(?!@@)[@a-z]+$",
    "^(?=[^=]+$)(?!\\s+$)(.|\\n)+$",
    "^(?!^lucene\\.|builtin\\.).*",
    "^(?!aa)(?!b)(?=.{2})..",
    "(?=)a",
    "(?!)a",
    "^(?=$)",
    "^(?!$)",
    "^(?!.*\\/)^(.*[^.]+.*)$",
    "^(?!io\\.papermc\\.)([a-zA-Z_$][a-zA-Z\\d_$]*\\.)*[a-zA-Z_$][a-zA-Z\\d_$]*$",
    // Unicode general categories (the small ones)
    "\\p{Zs}+",
    "[\\p{Zs}A-Za-z0-9+\\.,\\-_:;()]*",
    "\\P{N}",
    "\\p{Nd}{2,}",
    "[^\\p{N}\\p{Z}]",
    "\\p{No}|\\p{Nl}",
    "\\p{Z}\\P{Zs}",
    "[\\P{Nd}x]",
    "\\p{Zl}\\p{Zp}",
    "^[\\p{L} .'-]+$",
    "\\p{L}+\\d",
    "[^\\p{L}\\p{N}]+",
    // search style (unanchored)
    "\\d",
    "[aeiou]",
    "foo|bar",
    "a.c",
    "^\\s*$",
    "x+$",
    "^y+",
    "ab?c",
    "(\\d+)-(\\d+)",
    // counted repetition
    ".{0,30}",
    "(ab|a){0,10}b",
    "((a|b)*c){3}",
    "(a|b)*a(a|b){3}",
    "[ab]{1,12}",
    "(x?){5}x{5}",
    "(a?){3}a{3}",
    "(\\d{1,3}\\.){3}\\d{1,3}",
    "[😀a]{2,5}",
    "(é|e)\\u0301?",
};
#define N_PATTERNS (sizeof PATTERNS / sizeof PATTERNS[0])

// ECMA pattern -> PCRE2 pattern of the same language (UTF, no UCP, DOLLAR_ENDONLY,
// ALLOW_EMPTY_CLASS). Only the spellings the two disagree on change: `.`, \s \S (ECMA's are
// Unicode), \v (a class in PCRE2), \u. A class holding \S becomes an alternation, since PCRE2
// without UCP has no Unicode \S to put inside brackets.
struct obuf {
    char *p;
    size_t w, cap;
};

static void put(struct obuf *o, const char *s)
{
    size_t l = strlen(s);
    if (o->w + l + 1 < o->cap) {
        memcpy(o->p + o->w, s, l);
        o->w += l;
    }
    o->p[o->w] = 0;
}

static const char SP[] =
    "\\t\\n\\x0B\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
    "\\x{205f}\\x{3000}\\x{feff}";

// One escape at src[*i] == '\\' other than \s \S; advances *i.
static void put_escape(struct obuf *o, const char *src, size_t *i)
{
    char tmp[32];
    char e = src[*i + 1];
    if (e == 'v') {
        put(o, "\\x0B");
        *i += 2;
        return;
    }
    if (e != 'u') {
        tmp[0] = '\\';
        tmp[1] = e;
        tmp[2] = 0;
        put(o, tmp);
        *i += 2;
        return;
    }
    unsigned v;
    size_t j = *i + 2;
    if (src[j] == '{') {
        v = (unsigned)strtoul(src + j + 1, NULL, 16);
        while (src[j] != '}')
            j++;
        j++;
    } else {
        char h[5] = {src[j], src[j + 1], src[j + 2], src[j + 3], 0};
        v = (unsigned)strtoul(h, NULL, 16);
        j += 4;
        if (v >= 0xD800 && v <= 0xDBFF && src[j] == '\\' && src[j + 1] == 'u') {
            char l[5] = {src[j + 2], src[j + 3], src[j + 4], src[j + 5], 0};
            unsigned lo = (unsigned)strtoul(l, NULL, 16);
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            j += 6;
        }
    }
    snprintf(tmp, sizeof tmp, "\\x{%x}", v);
    put(o, tmp);
    *i = j;
}

static void translate(const char *src, char *out, size_t cap)
{
    struct obuf o = {out, 0, cap};
    char body[8192];
    out[0] = 0;
    for (size_t i = 0; src[i];) {
        char c = src[i];
        char tmp[2] = {c, 0};
        if (c == '\\' && src[i + 1]) {
            char e = src[i + 1];
            if (e == 's' || e == 'S') {
                put(&o, e == 's' ? "[" : "[^");
                put(&o, SP);
                put(&o, "]");
                i += 2;
            } else {
                put_escape(&o, src, &i);
            }
            continue;
        }
        if (c == '[') {
            struct obuf b = {body, 0, sizeof body};
            int neg = src[i + 1] == '^', has_S = 0;
            body[0] = 0;
            i += 1 + (size_t)neg;
            for (; src[i] && src[i] != ']';) {
                if (src[i] == '\\' && src[i + 1] == 's') {
                    put(&b, SP);
                    i += 2;
                } else if (src[i] == '\\' && src[i + 1] == 'S') {
                    has_S = 1;
                    i += 2;
                } else if (src[i] == '\\' && src[i + 1]) {
                    put_escape(&b, src, &i);
                } else {
                    char t[2] = {src[i++], 0};
                    put(&b, t);
                }
            }
            if (src[i] == ']')
                i++;
            if (!has_S) {
                put(&o, neg ? "[^" : "[");
                put(&o, body);
                put(&o, "]");
            } else {
                put(&o, neg ? "(?:(?!(?:[" : "(?:[");
                put(&o, body);
                put(&o, "]|[^");
                put(&o, SP);
                put(&o, neg ? "]))[\\x{0}-\\x{10ffff}])" : "])");
            }
            continue;
        }
        if (c == '.') {
            put(&o, "[^\\n\\r\\x{2028}\\x{2029}]");
            i++;
            continue;
        }
        put(&o, tmp);
        i++;
    }
}

// as_prefix: "(?:P)\\z" for hard partial matching (which refuses PCRE2_ENDANCHORED).
static pcre2_code *pcre_compile_ecma(const char *pat, int as_prefix)
{
    static char body[16384], tr[16400];
    translate(pat, body, sizeof body);
    snprintf(tr, sizeof tr, as_prefix ? "(?:%s)\\z" : "%s", body);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *c =
        pcre2_compile((PCRE2_SPTR)tr, PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS, &ec, &eo, NULL);
    if (!c)
        fprintf(stderr, "  pcre2 rejects %s (as %s) at %zu: %d\n", pat, tr, (size_t)eo, ec);
    return c;
}

// 1 = match, 0 = no match, 2 = partial (only with PARTIAL_HARD); invalid UTF-8 is no match.
static int pcre_run(pcre2_code *c, pcre2_match_data *md, const uint8_t *s, size_t n, uint32_t opts)
{
    int rc = pcre2_match(c, (PCRE2_SPTR)s, n, 0, opts, md, NULL);
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_PARTIAL)
        return 2;
    if (rc == PCRE2_ERROR_NOMATCH || rc <= PCRE2_ERROR_UTF8_ERR1)
        return 0;
    fprintf(stderr, "  pcre2_match error %d\n", rc);
    return -1;
}

static int utf8_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (c < 0xC2 || c > 0xF4 || i + (size_t)len > n)
            return 0;
        uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        for (int k = 1; k < len; k++) {
            if ((s[i + (size_t)k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + (size_t)k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

// Random-string pieces: ASCII from the pattern plus fixed multi-byte and invalid sequences.
static const char *const EXTRA[] = {
    "a",
    "b",
    "c",
    "x",
    "y",
    "Z",
    "0",
    "1",
    "9",
    "-",
    ".",
    " ",
    "\n",
    "\r",
    "\t",
    "@",
    ":",
    "\xc3\xa9",         // é
    "\xe2\x82\xac",     // €
    "\xf0\x9f\x98\x80", // U+1F600
    "\xc2\xa0",         // U+00A0
    "\xe2\x80\xa8",     // U+2028
    "\xe2\x80\xa9",     // U+2029
    "\xe3\x80\x80",     // U+3000
    "\xc2\x85",         // U+0085 (not a space in ECMA)
    "\xef\xbf\xbf",     // U+FFFF
    "\xf4\x8f\xbf\xbf", // U+10FFFF
    "\xd9\xa0",         // U+0660 (Nd)
    "\xc2\xb2",         // U+00B2 (No)
    "\xe2\x85\xa0",     // U+2160 (Nl)
    "\xef\xbb\xbf",     // U+FEFF
    "\xe6\x97\xa5",     // 日
    "\xff",
    "\xc3",
    "\x80",
    "\xed\xa0\x80", // invalid: 0xFF, lone lead, lone cont., surrogate
    "\xc0\xaf",     // overlong
};
#define N_EXTRA (sizeof EXTRA / sizeof EXTRA[0])

#define MAX_STR 96

struct strgen {
    char pieces[128][8];
    int n;
};

static void strgen_init(struct strgen *g, const char *pat)
{
    g->n = 0;
    for (size_t i = 0; i < N_EXTRA; i++)
        snprintf(g->pieces[g->n++], 8, "%s", EXTRA[i]);
    for (const char *p = pat; *p && g->n < 128; p++) {
        if ((unsigned char)*p < 0x80 && *p != '\\') {
            g->pieces[g->n][0] = *p;
            g->pieces[g->n][1] = 0;
            g->n++;
        }
    }
}

static size_t strgen_random(struct strgen *g, uint8_t *buf)
{
    size_t n = 0, k = rnd(13);
    for (size_t i = 0; i < k; i++) {
        const char *p = g->pieces[rnd((uint32_t)g->n)];
        size_t l = strlen(p);
        if (n + l > MAX_STR)
            break;
        memcpy(buf + n, p, l);
        n += l;
    }
    return n;
}

// A string from the DFA: random live bytes, stopping at accepting states now and then.
// Returns the length, or SIZE_MAX if no accepting state was reached.
static size_t dfa_walk(struct gl_regex *re, uint8_t *buf)
{
    uint32_t s = gl_regex_start(re);
    size_t n = 0;
    if (s == GL_RE_DEAD)
        return SIZE_MAX;
    for (;;) {
        if (gl_regex_is_accept(re, s) && (rnd(4) == 0 || n + 4 > MAX_STR))
            return n;
        if (n + 4 > MAX_STR)
            return SIZE_MAX;
        uint8_t live[256];
        int nl = 0;
        for (int b = 0; b < 256; b++)
            if (gl_regex_step(re, s, (uint8_t)b) != GL_RE_DEAD)
                live[nl++] = (uint8_t)b;
        if (nl == 0)
            return gl_regex_is_accept(re, s) ? n : SIZE_MAX;
        uint8_t b = live[rnd((uint32_t)nl)];
        buf[n++] = b;
        s = gl_regex_step(re, s, b);
    }
}

static long n_compared, n_mismatch, n_viability, n_strings;

// skip_full / skip_search: that mode is unsupported for the pattern (placeholder regex).
static int skip_full, skip_search;

static void compare_one(const char *pat, struct gl_regex *full, struct gl_regex *search,
                        pcre2_code *pc, pcre2_code *pp, pcre2_match_data *md, const uint8_t *s,
                        size_t n)
{
    n_strings++;
    int want_full = pcre_run(pc, md, s, n, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
    int want_search = pcre_run(pc, md, s, n, 0);
    int got_full = skip_full ? want_full : gl_regex_match(full, s, n);
    int got_search = skip_search ? want_search : gl_regex_match(search, s, n);
    n_compared += 2;
    if (got_full != want_full || got_search != want_search) {
        n_mismatch++;
        if (n_mismatch < 20) {
            fprintf(stderr, "  mismatch /%s/ on \"", pat);
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, s[i] >= 0x20 && s[i] < 0x7F ? "%c" : "\\x%02x", s[i]);
            fprintf(stderr, "\": full %d want %d, search %d want %d\n", got_full, want_full,
                    got_search, want_search);
        }
    }
    if (!pp || skip_full || !utf8_valid(s, n))
        return;
    // Prefix viability at every code-point boundary: alive in the DFA iff PCRE2 finds a whole
    // match or a hard partial match of that prefix.
    uint32_t st = gl_regex_start(full);
    for (size_t i = 0; i < n; i++) {
        st = gl_regex_step(full, st, s[i]);
        if (i + 1 < n && (s[i + 1] & 0xC0) == 0x80)
            continue;
        int want = pcre_run(pp, md, s, i + 1, PCRE2_ANCHORED | PCRE2_PARTIAL_HARD);
        int alive = st != GL_RE_DEAD;
        n_viability++;
        if (alive != (want != 0)) {
            n_mismatch++;
            if (n_mismatch < 20)
                fprintf(stderr, "  viability /%s/ prefix of %zu bytes: alive %d, pcre2 %d\n", pat,
                        i + 1, alive, want);
        }
        if (!alive)
            break;
    }
}

TEST(test_pcre2_oracle)
{
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    REQUIRE(md);
    int compiled = 0, unsupported = 0;
    uint8_t buf[MAX_STR + 8];
    for (size_t pi = 0; pi < N_PATTERNS; pi++) {
        const char *pat = PATTERNS[pi];
        struct gl_regex *full = NULL, *search = NULL;
        struct gl_err err = {0};
        gl_status st = gl_regex_compile(&full, pat, strlen(pat), 0, 0, &err);
        if (strcmp(pat, "^\\p{Lu}") == 0) {
            CHECK(st == GL_E_UNSUPPORTED);
            unsupported++;
            continue;
        }
        // A lookahead at the end is supported in search mode only; at the start, in both.
        int la_end = strstr(pat, "(?=") && !strstr(pat, "^(?") && strstr(pat, "(?=") != pat;
        if (la_end) {
            CHECKF(st == GL_E_UNSUPPORTED, "/%s/: %s", pat, gl_status_name(st));
            st = gl_regex_compile(&full, "[]", 2, 0, 0, &err); // placeholder, not compared
        }
        CHECKF(st == GL_OK, "/%s/: %s", pat, err.msg);
        st = gl_regex_compile(&search, pat, strlen(pat), GL_RE_SEARCH, 0, &err);
        int la_start_unanchored = (strstr(pat, "(?=") == pat || strstr(pat, "(?!") == pat);
        if (la_start_unanchored) {
            CHECKF(st == GL_E_UNSUPPORTED, "/%s/ search: %s", pat, gl_status_name(st));
            st = gl_regex_compile(&search, "[]", 2, GL_RE_SEARCH, 0, &err);
        }
        CHECKF(st == GL_OK, "/%s/ search: %s", pat, err.msg);
        pcre2_code *pc = pcre_compile_ecma(pat, 0);
        CHECK(pc != NULL);
        // A hard partial match reports any $ met at the end of the subject as partial, and so
        // any lookahead that reaches it, so viability is compared only where $ can only be
        // the last thing matched and there is no lookahead. (The brute-force test below checks
        // that dead states are exactly those that cannot reach acceptance.)
        const char *dollar = strchr(pat, '$');
        int look = strstr(pat, "(?=") || strstr(pat, "(?!");
        pcre2_code *pp = (!dollar || dollar[1] == 0) && !look ? pcre_compile_ecma(pat, 1) : NULL;
        if (!full || !search || !pc) {
            gl_regex_free(full);
            gl_regex_free(search);
            pcre2_code_free(pc);
            pcre2_code_free(pp);
            continue;
        }
        compiled++;
        skip_full = la_end;
        skip_search = la_start_unanchored;
        struct strgen g;
        strgen_init(&g, pat);
        for (int k = 0; k < 160; k++) {
            size_t n = strgen_random(&g, buf);
            compare_one(pat, full, search, pc, pp, md, buf, n);
        }
        for (int k = 0; k < 40; k++) {
            size_t n = dfa_walk(skip_full ? search : full, buf);
            if (n == SIZE_MAX)
                continue;
            CHECKF(pcre_run(pc, md, buf, n, PCRE2_ANCHORED | PCRE2_ENDANCHORED) == 1,
                   "/%s/ walk string not matched by pcre2", pat);
            compare_one(pat, full, search, pc, pp, md, buf, n);
            // A near miss: one byte replaced by a random piece.
            if (n > 0) {
                const char *p = g.pieces[rnd((uint32_t)g.n)];
                size_t at = rnd((uint32_t)n), l = strlen(p);
                memmove(buf + at + l, buf + at + 1, n - at - 1);
                memcpy(buf + at, p, l);
                compare_one(pat, full, search, pc, pp, md, buf, n - 1 + l);
            }
        }
        CHECK(!gl_regex_overflowed(full) && !gl_regex_overflowed(search));
        gl_regex_free(full);
        gl_regex_free(search);
        pcre2_code_free(pc);
        pcre2_code_free(pp);
    }
    pcre2_match_data_free(md);
    printf("# pcre2 oracle: %d patterns (+%d unsupported), %ld strings, %ld match comparisons, "
           "%ld prefix viability checks, %ld mismatches\n",
           compiled, unsupported, n_strings, n_compared, n_viability, n_mismatch);
    CHECK(n_mismatch == 0);
    CHECK(compiled >= 200);
}

// The carried general-category tables against PCRE2's, code point by code point (both use
// Unicode 14.0).
TEST(test_unicode_props)
{
    static const char *const PROPS[] = {
        "\\p{Zs}",    "\\p{Z}",     "\\p{Nd}", "\\p{Nl}",
        "\\p{No}",    "\\P{N}",     "\\p{L}",  "\\p{gc=Decimal_Number}",
        "\\p{digit}", "\\p{Letter}"};
    // PCRE2's spelling where ours is an alias it does not take.
    static const char *const PCRE_AS[] = {NULL, NULL, NULL,      NULL,      NULL,
                                          NULL, NULL, "\\p{Nd}", "\\p{Nd}", "\\p{L}"};
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    REQUIRE(md);
    long wrong = 0, checked = 0, positive = 0;
    for (size_t i = 0; i < sizeof PROPS / sizeof PROPS[0]; i++) {
        struct gl_regex *re = NULL;
        struct gl_err err = {0};
        CHECKF(gl_regex_compile(&re, PROPS[i], strlen(PROPS[i]), 0, 0, &err) == GL_OK, "%s: %s",
               PROPS[i], err.msg);
        pcre2_code *pc = pcre_compile_ecma(PCRE_AS[i] ? PCRE_AS[i] : PROPS[i], 0);
        if (!re || !pc) {
            gl_regex_free(re);
            pcre2_code_free(pc);
            continue;
        }
        // Letters reach plane 3 (CJK extensions); the rest lie below U+20000.
        uint32_t end = strstr(PROPS[i], "L") ? 0x40000 : 0x20000;
        for (uint32_t cp = 0; cp < end; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF)
                continue;
            uint8_t b[4];
            size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (n == 1) {
                b[0] = (uint8_t)cp;
            } else {
                for (size_t k = n - 1; k > 0; k--)
                    b[k] = (uint8_t)(0x80 | ((cp >> (6 * (n - 1 - k))) & 0x3F));
                b[0] = (uint8_t)((0xF00u >> n) | (cp >> (6 * (n - 1))));
            }
            int want = pcre_run(pc, md, b, n, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
            positive += want == 1;
            if (gl_regex_match(re, b, n) != want && wrong++ < 5)
                fprintf(stderr, "  %s U+%04X: pcre2 %d\n", PROPS[i], cp, want);
            checked++;
        }
        gl_regex_free(re);
        pcre2_code_free(pc);
    }
    pcre2_match_data_free(md);
    printf("# unicode properties: %ld code points compared (%ld in the class), %ld wrong\n",
           checked, positive, wrong);
    CHECK(wrong == 0 && checked > 800000 && positive > 100000); // \P{N} holds most of them
}

// Every DFA state reachable from start (by BFS over all bytes); returns the count.
static uint32_t dfa_states(struct gl_regex *re, uint32_t *ids, uint32_t cap, uint8_t *seen)
{
    uint32_t n = 0;
    uint32_t s0 = gl_regex_start(re);
    ids[n++] = s0;
    seen[s0] = 1;
    for (uint32_t i = 0; i < n; i++)
        for (int b = 0; b < 256; b++) {
            uint32_t t = gl_regex_step(re, ids[i], (uint8_t)b);
            if (!seen[t] && n < cap) {
                seen[t] = 1;
                ids[n++] = t;
            }
        }
    return n;
}

// min_chars and unbounded against brute force on the DFA graph (lead bytes weigh 1).
TEST(test_min_chars_unbounded_brute)
{
    enum { CAP = 4096 };
    static uint32_t ids[CAP];
    static int32_t dist[CAP];
    static uint8_t seen[CAP], reach[CAP], on_cycle[CAP];
    int checked = 0;
    for (size_t pi = 0; pi < N_PATTERNS; pi++) {
        for (int mode = 0; mode < 2; mode++) {
            const char *pat = PATTERNS[pi];
            struct gl_regex *re = NULL;
            if (gl_regex_compile(&re, pat, strlen(pat), mode ? GL_RE_SEARCH : 0, CAP, NULL) !=
                GL_OK)
                continue;
            if (gl_regex_build_all(re, NULL) != GL_OK) {
                gl_regex_free(re);
                continue;
            }
            memset(seen, 0, sizeof seen);
            uint32_t n = dfa_states(re, ids, CAP, seen);
            if (n > 400) {
                gl_regex_free(re);
                continue;
            }
            // dist: Bellman-Ford to a fixpoint over ids (state ids are < CAP).
            for (uint32_t i = 0; i < CAP; i++)
                dist[i] = -1;
            for (uint32_t i = 0; i < n; i++)
                if (gl_regex_is_accept(re, ids[i]))
                    dist[ids[i]] = 0;
            for (int changed = 1; changed;) {
                changed = 0;
                for (uint32_t i = 0; i < n; i++)
                    for (int b = 0; b < 256; b++) {
                        uint32_t t = gl_regex_step(re, ids[i], (uint8_t)b);
                        if (dist[t] < 0)
                            continue;
                        int32_t d = dist[t] + ((b & 0xC0) != 0x80);
                        if (dist[ids[i]] < 0 || d < dist[ids[i]]) {
                            dist[ids[i]] = d;
                            changed = 1;
                        }
                    }
            }
            // on_cycle: a live state that reaches itself through live states.
            for (uint32_t i = 0; i < n; i++) {
                uint32_t u = ids[i];
                on_cycle[u] = 0;
                if (dist[u] < 0)
                    continue;
                memset(reach, 0, sizeof reach);
                uint32_t q[CAP], qn = 0;
                q[qn++] = u;
                for (uint32_t k = 0; k < qn && !on_cycle[u]; k++)
                    for (int b = 0; b < 256; b++) {
                        uint32_t t = gl_regex_step(re, q[k], (uint8_t)b);
                        if (dist[t] < 0)
                            continue;
                        if (t == u)
                            on_cycle[u] = 1;
                        if (!reach[t]) {
                            reach[t] = 1;
                            q[qn++] = t;
                        }
                    }
            }
            for (uint32_t i = 0; i < n; i++) {
                uint32_t u = ids[i];
                int inf = 0;
                memset(reach, 0, sizeof reach);
                uint32_t q[CAP], qn = 0;
                q[qn++] = u;
                reach[u] = 1;
                for (uint32_t k = 0; k < qn && !inf; k++) {
                    if (dist[q[k]] >= 0 && on_cycle[q[k]])
                        inf = 1;
                    for (int b = 0; b < 256; b++) {
                        uint32_t t = gl_regex_step(re, q[k], (uint8_t)b);
                        if (dist[t] >= 0 && !reach[t]) {
                            reach[t] = 1;
                            q[qn++] = t;
                        }
                    }
                }
                CHECKF(gl_regex_min_chars(re, u) == dist[u], "/%s/ mode %d state %u: %d vs %d", pat,
                       mode, u, gl_regex_min_chars(re, u), dist[u]);
                CHECKF(gl_regex_unbounded(re, u) == inf, "/%s/ mode %d state %u: unbounded %d", pat,
                       mode, u, gl_regex_unbounded(re, u));
                CHECKF((u == GL_RE_DEAD) == (dist[u] < 0), "/%s/ state %u live but dead id", pat,
                       u);
            }
            checked++;
            gl_regex_free(re);
        }
    }
    printf("# min_chars/unbounded brute force: %d compiled patterns\n", checked);
    CHECK(checked > 300);
}

static gl_status compile_err(const char *pat, struct gl_err *err)
{
    struct gl_regex *re = NULL;
    memset(err, 0, sizeof *err);
    gl_status st = gl_regex_compile(&re, pat, strlen(pat), 0, 0, err);
    if (st == GL_OK)
        CHECK(re != NULL);
    else
        CHECK(re == NULL && err->msg[0]);
    gl_regex_free(re);
    return st;
}

TEST(test_errors)
{
    struct gl_err err;
    static const struct {
        const char *pat;
        gl_status want;
        const char *needle; // must appear in the message
    } CASES[] = {
        {"(a)\\1", GL_E_UNSUPPORTED, "backreference"},
        {"a(?=b)", GL_E_UNSUPPORTED, "lookahead at byte 1"},
        {"a(?!b)", GL_E_UNSUPPORTED, "lookahead at byte 1"},
        {"^(a(?!b))", GL_E_UNSUPPORTED, "lookahead at byte 3"},
        {"^(?!a(?!b))", GL_E_UNSUPPORTED, "lookahead at byte 5"},
        {"^(?!a)*b", GL_E_UNSUPPORTED, "quantified lookahead"},
        {"^(?!a)b|c", GL_E_UNSUPPORTED, "lookahead at byte 1"},
        {"(?<=a)b", GL_E_UNSUPPORTED, "lookbehind"},
        {"(?<!a)b", GL_E_UNSUPPORTED, "lookbehind"},
        {"\\bword", GL_E_UNSUPPORTED, "\\b at byte 0"},
        {"x\\B", GL_E_UNSUPPORTED, "\\B at byte 1"},
        {"\\p{Lu}", GL_E_UNSUPPORTED, "property \\p{Lu} at byte 0"},
        {"\\p{Script=Greek}", GL_E_UNSUPPORTED, "property"},
        {"x\\pL", GL_E_FORMAT, "needs {name} at byte 1"},
        {"\\p{Zs", GL_E_FORMAT, "unterminated"},
        {"(?i)abc", GL_E_UNSUPPORTED, "(?i"},
        {"\\k<n>", GL_E_UNSUPPORTED, "\\k"},
        {"\\01", GL_E_UNSUPPORTED, "octal"},
        {"\\q", GL_E_UNSUPPORTED, "\\q"},
        {"*a", GL_E_FORMAT, "nothing to repeat"},
        {"a**", GL_E_FORMAT, "nothing to repeat"},
        {"a{2}{3}", GL_E_FORMAT, "nothing to repeat"},
        {"^*", GL_E_FORMAT, "anchor"},
        {"(ab", GL_E_FORMAT, "unclosed group opened at byte 0"},
        {"ab)", GL_E_FORMAT, "unmatched ')' at byte 2"},
        {"[abc", GL_E_FORMAT, "unterminated character class opened at byte 0"},
        {"[z-a]", GL_E_FORMAT, "out of order at byte 1"},
        {"a{3,2}", GL_E_FORMAT, "out of order"},
        {"\\x4", GL_E_FORMAT, "\\x needs"},
        {"\\u12", GL_E_FORMAT, "\\u needs"},
        {"\\u{110000}", GL_E_FORMAT, "\\u{"},
        {"abc\\", GL_E_FORMAT, "backslash"},
        {"a\xff", GL_E_FORMAT, "invalid UTF-8 in the pattern at byte 1"},
        {"a{100001}", GL_E_LIMIT, "over"},
        {"(?<>a)", GL_E_FORMAT, "group name"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        gl_status st = compile_err(CASES[i].pat, &err);
        CHECKF(st == CASES[i].want, "/%s/: %s (%s)", CASES[i].pat, gl_status_name(st), err.msg);
        CHECKF(strstr(err.msg, CASES[i].needle) != NULL, "/%s/: message \"%s\" lacks \"%s\"",
               CASES[i].pat, err.msg, CASES[i].needle);
    }
    // A NULL err is allowed.
    struct gl_regex *re = NULL;
    CHECK(gl_regex_compile(&re, "(", 1, 0, 0, NULL) == GL_E_FORMAT && re == NULL);
    gl_regex_free(NULL);
}

// Hostile patterns end within the budget with GL_E_LIMIT, never a hang or a crash.
TEST(test_budgets)
{
    struct gl_err err = {0};
    struct gl_regex *re = NULL;
    int64_t t0 = gl_time_us();
    CHECK(gl_regex_compile(&re, "(a{1000}){1000}", 15, 0, 0, &err) == GL_E_LIMIT);
    CHECK(strstr(err.msg, "byte") != NULL);
    CHECK(gl_regex_compile(&re, "((){100000}){100000}", 20, 0, 0, &err) == GL_E_LIMIT);
    CHECK(gl_regex_compile(&re, "(.{100000}){9}", 14, 0, 0, &err) == GL_E_LIMIT);
    // Deep nesting.
    char deep[2 * 300 + 2];
    memset(deep, '(', 300);
    memset(deep + 300, ')', 300);
    CHECK(gl_regex_compile(&re, deep, 600, 0, 0, &err) == GL_E_LIMIT);
    CHECK(strstr(err.msg, "nested") != NULL);
    // 200 levels are fine.
    CHECK(gl_regex_compile(&re, deep + 100, 400, 0, 0, &err) == GL_OK);
    CHECK(gl_regex_match(re, "", 0));
    gl_regex_free(re);
    // Exponential DFA: (a|b)*a(a|b){20} needs 2^21 states; the lazy DFA overflows at its budget.
    const char *expo = "(a|b)*a(a|b){20}";
    REQUIRE(gl_regex_compile(&re, expo, strlen(expo), 0, 1000, &err) == GL_OK);
    CHECK(gl_regex_build_all(re, &err) == GL_E_LIMIT);
    CHECK(strstr(err.msg, "1000") != NULL);
    CHECK(gl_regex_overflowed(re));
    gl_regex_free(re);
    REQUIRE(gl_regex_compile(&re, expo, strlen(expo), 0, 1000, &err) == GL_OK);
    uint8_t s[64];
    uint32_t st = gl_regex_start(re);
    for (int i = 0; i < 64 && !gl_regex_overflowed(re); i++) {
        s[i] = (uint8_t)(rnd(2) ? 'a' : 'b');
        st = gl_regex_step(re, st, s[i]);
    }
    // 64 random steps visit at most 65 states: no overflow; a long walk will overflow.
    CHECK(!gl_regex_overflowed(re));
    for (int i = 0; i < 20000 && !gl_regex_overflowed(re); i++)
        st = gl_regex_step(re, st, (uint8_t)(rnd(2) ? 'a' : 'b'));
    CHECK(gl_regex_overflowed(re));
    CHECK(gl_regex_step(re, st, 'a') == GL_RE_DEAD || st != GL_RE_DEAD);
    // Past the budget, gl_regex_match still answers exactly (NFA simulation): a string matches
    // iff it ends with 'a' and 20 more letters.
    int wrong = 0;
    for (int k = 0; k < 200; k++) {
        size_t n = 21 + rnd(40);
        for (size_t i = 0; i < n; i++)
            s[i] = (uint8_t)(rnd(2) ? 'a' : 'b');
        if (k % 7 == 0)
            s[rnd((uint32_t)n)] = 'c';
        int want = s[n - 21] == 'a' && !memchr(s, 'c', n);
        wrong += gl_regex_match(re, s, n) != want;
    }
    CHECK(wrong == 0);
    gl_regex_free(re);
    // Few states but huge closures: the closure-step budget (1024 per allowed state) stops it.
    const char *wide = "((a|ab){0,20}b){0,20}";
    REQUIRE(gl_regex_compile(&re, wide, strlen(wide), GL_RE_SEARCH, 2048, &err) == GL_OK);
    CHECK(gl_regex_build_all(re, &err) == GL_E_LIMIT && strstr(err.msg, "closure steps"));
    CHECK(gl_regex_match(re, "xabbb", 5)); // exact even so
    gl_regex_free(re);
    int64_t dt = gl_time_us() - t0;
    printf("# hostile patterns rejected in %lld us\n", (long long)dt);
    CHECK(dt < 5 * 1000 * 1000);
}

TEST(test_literal_and_escape)
{
    static const char *const LITS[] = {"a.b*c",        "(x|y)",       "[]{}^$\\/?+",         "",
                                       "\x01\x1f\x7f", "caf\xc3\xa9", "\xf0\x9f\x98\x80 end"};
    for (size_t i = 0; i < sizeof LITS / sizeof LITS[0]; i++) {
        const char *l = LITS[i];
        size_t n = strlen(l);
        char pat[256];
        size_t need = gl_regex_escape(l, n, pat, sizeof pat);
        REQUIRE(need < sizeof pat);
        struct gl_regex *re = NULL, *lit = NULL;
        struct gl_err err = {0};
        REQUIRE(gl_regex_compile(&re, pat, need, 0, 0, &err) == GL_OK);
        REQUIRE(gl_regex_compile(&lit, l, n, GL_RE_LITERAL, 0, &err) == GL_OK);
        CHECKF(gl_regex_match(re, l, n), "escape of %zu: %s", i, pat);
        CHECK(gl_regex_match(lit, l, n));
        char longer[64];
        snprintf(longer, sizeof longer, "%sx", l);
        CHECK(!gl_regex_match(re, longer, n + 1) && !gl_regex_match(lit, longer, n + 1));
        if (n > 0) {
            CHECK(!gl_regex_match(re, l, n - 1) && !gl_regex_match(lit, l, n - 1));
            CHECK(gl_regex_min_chars(re, gl_regex_start(re)) > 0);
        }
        gl_regex_free(re);
        gl_regex_free(lit);
    }
    // snprintf-like truncation.
    char small[4];
    CHECK(gl_regex_escape("a.b", 3, small, sizeof small) == 4 && strcmp(small, "a\\.") == 0);
    // A literal may be invalid UTF-8 (token bytes); patterns never accept it.
    struct gl_regex *re = NULL;
    REQUIRE(gl_regex_compile(&re, "\xff\x80", 2, GL_RE_LITERAL, 0, NULL) == GL_OK);
    CHECK(gl_regex_match(re, "\xff\x80", 2) && !gl_regex_match(re, "\xff", 1));
    gl_regex_free(re);
    REQUIRE(gl_regex_compile(&re, "[^a]*", 5, 0, 0, NULL) == GL_OK);
    CHECK(!gl_regex_match(re, "\xff", 1) && !gl_regex_match(re, "\xed\xa0\x80", 3));
    CHECK(gl_regex_match(re, "\xed\x9f\xbf", 3)); // U+D7FF
    gl_regex_free(re);
    // Surrogate code points name no UTF-8 string: alone they match nothing; in ranges, the
    // rest of the range still counts (GBNF classes are spelled as \u{...} ranges).
    REQUIRE(gl_regex_compile(&re, "\\uD800|x", 8, 0, 0, NULL) == GL_OK);
    CHECK(gl_regex_match(re, "x", 1) && !gl_regex_match(re, "\xed\xa0\x80", 3));
    gl_regex_free(re);
    const char *sr = "[\\u{D000}-\\u{E000}]";
    REQUIRE(gl_regex_compile(&re, sr, strlen(sr), 0, 0, NULL) == GL_OK);
    CHECK(gl_regex_match(re, "\xed\x9f\xbf", 3) && gl_regex_match(re, "\xee\x80\x80", 3));
    CHECK(!gl_regex_match(re, "\xed\xa0\x80", 3) && !gl_regex_match(re, "\xed\xbf\xbf", 3));
    gl_regex_free(re);
}

// min_chars counts code points, not bytes; dead and accept states; unbounded per state.
TEST(test_state_queries)
{
    struct gl_regex *re = NULL;
    const char *pat = "\xc3\xa9{2}x*";
    REQUIRE(gl_regex_compile(&re, pat, strlen(pat), 0, 0, NULL) == GL_OK);
    uint32_t s = gl_regex_start(re);
    CHECK(gl_regex_min_chars(re, s) == 2 && !gl_regex_is_accept(re, s));
    CHECK(gl_regex_unbounded(re, s)); // x*
    s = gl_regex_step(re, s, 0xC3);
    CHECK(gl_regex_min_chars(re, s) == 1); // mid code point: one more to start
    s = gl_regex_step(re, s, 0xA9);
    CHECK(gl_regex_min_chars(re, s) == 1);
    s = gl_regex_step(re, s, 0xC3);
    s = gl_regex_step(re, s, 0xA9);
    CHECK(gl_regex_min_chars(re, s) == 0 && gl_regex_is_accept(re, s));
    CHECK(gl_regex_step(re, s, 'y') == GL_RE_DEAD);
    CHECK(gl_regex_min_chars(re, GL_RE_DEAD) == -1 && !gl_regex_unbounded(re, GL_RE_DEAD));
    gl_regex_free(re);
    REQUIRE(gl_regex_compile(&re, "ab|c{1,3}", 9, 0, 0, NULL) == GL_OK);
    s = gl_regex_start(re);
    CHECK(!gl_regex_unbounded(re, s) && gl_regex_min_chars(re, s) == 1);
    gl_regex_free(re);
    // An empty language: start is the dead state.
    REQUIRE(gl_regex_compile(&re, "[]", 2, GL_RE_SEARCH, 0, NULL) == GL_OK);
    CHECK(gl_regex_start(re) == GL_RE_DEAD);
    gl_regex_free(re);
    REQUIRE(gl_regex_compile(&re, "a$b", 3, GL_RE_SEARCH, 0, NULL) == GL_OK);
    CHECK(gl_regex_start(re) == GL_RE_DEAD);
    gl_regex_free(re);
    // Search semantics: after a match the tail is free and unbounded.
    REQUIRE(gl_regex_compile(&re, "ab", 2, GL_RE_SEARCH, 0, NULL) == GL_OK);
    s = gl_regex_start(re);
    CHECK(gl_regex_min_chars(re, s) == 2 && gl_regex_unbounded(re, s));
    gl_regex_free(re);
}

// Build speed for the JSON Schema formats (whole DFA) and cached step speed.
TEST(test_speed)
{
    static const char *const FORMATS[] = {
        "^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?([zZ]|[+-]\\d\\d:\\d\\d)$",
        "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
        "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
        "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$",
        ("^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}"
         "[a-zA-Z0-9])?)*$"),
        "[^\"\\\\\\x00-\\x1f]*",
        ".{0,30}",
    };
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++) {
        struct gl_regex *re = NULL;
        struct gl_err err = {0};
        int64_t t0 = gl_time_us();
        REQUIRE(gl_regex_compile(&re, FORMATS[i], strlen(FORMATS[i]), 0, 0, &err) == GL_OK);
        int64_t t1 = gl_time_us();
        CHECKF(gl_regex_build_all(re, &err) == GL_OK, "%s", err.msg);
        int64_t t2 = gl_time_us();
        uint32_t seen_max = 0;
        uint32_t s = gl_regex_start(re);
        for (int b = 0; b < 256; b++) {
            uint32_t t = gl_regex_step(re, s, (uint8_t)b);
            seen_max = t > seen_max ? t : seen_max;
        }
        printf("# format %zu: compile %lld us, build_all %lld us\n", i, (long long)(t1 - t0),
               (long long)(t2 - t1));
        gl_regex_free(re);
    }
    // Cached stepping: a table lookup per byte.
    struct gl_regex *re = NULL;
    REQUIRE(gl_regex_compile(&re, "[a-z]+( [a-z]+)*", 16, 0, 0, NULL) == GL_OK);
    uint32_t s = gl_regex_start(re);
    const char *txt = "lorem ipsum dolor sit amet ";
    int64_t t0 = gl_time_us();
    long steps = 0;
    for (int r = 0; r < 40000; r++)
        for (const char *p = txt; *p; p++, steps++)
            s = gl_regex_step(re, s, (uint8_t)*p);
    int64_t dt = gl_time_us() - t0;
    CHECK(s != GL_RE_DEAD);
    printf("# cached step: %.2f ns/byte over %ld bytes\n", (double)dt * 1000.0 / (double)steps,
           steps);
    gl_regex_free(re);
}

// GL_RE_NEGATE: the complement, checked against the pattern itself on every string of a small
// alphabet (one two-byte character among them) up to length 5; live states keep min_chars >= 0.
TEST(test_negate)
{
    static const struct {
        const char *pat;
        int flags;
    } k[] = {{"ab", GL_RE_SEARCH},
             {"^[a-b]+$", GL_RE_SEARCH},
             {"a|b", 0},
             {"^(?:ab)*$", GL_RE_SEARCH},
             {"", 0},
             {"[^a]", GL_RE_SEARCH},
             {"^.{14,}(?:ab|ba)", GL_RE_SEARCH},
             {"b{2,3}$", GL_RE_SEARCH}};
    static const char alpha[] = "abc\xc3\xa9";
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        struct gl_regex *re = NULL, *ne = NULL;
        struct gl_err err = {0};
        REQUIRE(gl_regex_compile(&re, k[i].pat, strlen(k[i].pat), k[i].flags, 0, &err) == GL_OK);
        CHECKF(gl_regex_compile(&ne, k[i].pat, strlen(k[i].pat), k[i].flags | GL_RE_NEGATE, 0,
                                &err) == GL_OK,
               "%s: %s", k[i].pat, err.msg);
        if (!ne) {
            gl_regex_free(re);
            continue;
        }
        char buf[16]; // up to 5 characters of up to 2 bytes
        int bad = 0;
        for (int len = 0; len <= 5 && !bad; len++) {
            int total = 1;
            for (int j = 0; j < len; j++)
                total *= 4;
            for (int x = 0; x < total && !bad; x++) {
                size_t n = 0;
                for (int j = 0, y = x; j < len; j++, y /= 4) {
                    int c = y % 4;
                    if (c == 3) {
                        buf[n++] = alpha[3];
                        buf[n++] = alpha[4];
                    } else {
                        buf[n++] = alpha[c];
                    }
                }
                int a = gl_regex_match(re, buf, n), b = gl_regex_match(ne, buf, n);
                // walking byte by byte: a live state always has min_chars >= 0 and a dead one
                // is reached only when no continuation of the complement matches
                uint32_t st = gl_regex_start(ne);
                for (size_t j = 0; j < n && st != GL_RE_DEAD; j++)
                    st = gl_regex_step(ne, st, (uint8_t)buf[j]);
                if (a == b || (st != GL_RE_DEAD && gl_regex_min_chars(ne, st) < 0) ||
                    (b && st == GL_RE_DEAD)) {
                    CHECKF(0, "%s negated: '%.*s' pattern %d negation %d", k[i].pat, (int)n, buf, a,
                           b);
                    bad = 1;
                }
            }
        }
        gl_regex_free(re);
        gl_regex_free(ne);
    }
}

int main(void)
{
    RUN_TESTS(test_pcre2_oracle, test_unicode_props, test_min_chars_unbounded_brute, test_errors,
              test_budgets, test_literal_and_escape, test_state_queries, test_speed, test_negate);
}
