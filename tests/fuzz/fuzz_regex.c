// SPDX-License-Identifier: MIT
// Fuzz target for the regex compiler and lazy DFA. Input: byte 0 picks flags (bit 0 search,
// bit 1 literal), byte 1 the state budget (64 << (b & 7)), then the pattern up to the first
// '\n', then up to 8 '\n'-separated test strings. Invariants: compile ends (OK or an error with
// a message, never a crash or hang: the budgets bound it); for every string, stepping agrees
// with gl_regex_match, min_chars is 0 at accepting states (and only there after ASCII, for
// patterns), -1 exactly at the dead state, and drops by at most one per code point; a whole
// match is also a search match (L is inside .*L.*); build_all either fits or says GL_E_LIMIT.
// Bit 2 also compiles the complement (GL_RE_NEGATE): it matches exactly what the pattern does
// not, its min_chars (bytes there) drops by at most one per byte, is 0 at accepting states and
// -1 exactly at the dead state; or it is refused with GL_E_LIMIT / GL_E_UNSUPPORTED.
#include "grammar/regex.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STRINGS 8

static void check_string(struct gl_regex *re, int literal, const uint8_t *s, size_t n)
{
    uint32_t st = gl_regex_start(re);
    for (size_t i = 0; i < n; i++) {
        int32_t before = gl_regex_min_chars(re, st);
        uint32_t next = gl_regex_step(re, st, s[i]);
        int32_t after = gl_regex_min_chars(re, next);
        int lead = (s[i] & 0xC0) != 0x80;
        if (next != GL_RE_DEAD && before >= 0 && after < before - lead)
            abort();
        st = next;
    }
    // Accepting states need 0 more code points; so does the middle of a code point that can end
    // a match (its continuation bytes start none), so the converse holds after ASCII only.
    int32_t mc = gl_regex_min_chars(re, st);
    if (gl_regex_is_accept(re, st) && mc != 0)
        abort();
    if (!literal && mc == 0 && !gl_regex_is_accept(re, st) && (n == 0 || s[n - 1] < 0x80))
        abort();
    if ((mc < 0) != (st == GL_RE_DEAD))
        abort();
    if (st == GL_RE_DEAD && gl_regex_unbounded(re, st))
        abort();
    if (!gl_regex_overflowed(re) && gl_regex_match(re, s, n) != gl_regex_is_accept(re, st))
        abort();
}

static void check_negated(struct gl_regex *re, struct gl_regex *neg, const uint8_t *s, size_t n)
{
    uint32_t st = gl_regex_start(neg);
    for (size_t i = 0; i < n; i++) {
        int32_t before = gl_regex_min_chars(neg, st);
        st = gl_regex_step(neg, st, s[i]);
        if (st != GL_RE_DEAD && before >= 0 && gl_regex_min_chars(neg, st) < before - 1)
            abort();
    }
    int32_t mc = gl_regex_min_chars(neg, st);
    if ((mc < 0) != (st == GL_RE_DEAD) || (gl_regex_is_accept(neg, st) && mc != 0))
        abort();
    if (gl_regex_is_accept(neg, st) != !gl_regex_match(re, s, n))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int flags = data[0] & (GL_RE_SEARCH | GL_RE_LITERAL);
    int32_t budget = 64 << (data[1] & 7);
    const uint8_t *p = data + 2, *end = data + size;
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    size_t plen = nl ? (size_t)(nl - p) : (size_t)(end - p);
    const uint8_t *strs[MAX_STRINGS];
    size_t lens[MAX_STRINGS];
    int ns = 0;
    for (const uint8_t *q = nl ? nl + 1 : end; q < end && ns < MAX_STRINGS;) {
        const uint8_t *e = memchr(q, '\n', (size_t)(end - q));
        strs[ns] = q;
        lens[ns++] = e ? (size_t)(e - q) : (size_t)(end - q);
        q = e ? e + 1 : end;
    }

    struct gl_regex *re = NULL, *search = NULL;
    struct gl_err err = {0};
    gl_status st = gl_regex_compile(&re, (const char *)p, plen, flags, budget, &err);
    if (st != GL_OK) {
        if (re || err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (!(flags & GL_RE_SEARCH) && gl_regex_compile(&search, (const char *)p, plen,
                                                    flags | GL_RE_SEARCH, budget, &err) != GL_OK) {
        // The search wrapper adds a few NFA states, and a leading lookahead needs a ^ there:
        // only the budget or that may refuse it.
        if (err.code != GL_E_LIMIT && err.code != GL_E_UNSUPPORTED)
            abort();
    }
    for (int i = 0; i < ns; i++) {
        check_string(re, flags & GL_RE_LITERAL, strs[i], lens[i]);
        if (search) {
            check_string(search, flags & GL_RE_LITERAL, strs[i], lens[i]);
            // gl_regex_match is exact even past the state budget (NFA fallback).
            if (gl_regex_match(re, strs[i], lens[i]) && !gl_regex_match(search, strs[i], lens[i]))
                abort();
        }
    }
    struct gl_regex *neg = NULL;
    if (data[0] & 4) {
        st = gl_regex_compile(&neg, (const char *)p, plen, flags | GL_RE_NEGATE, budget, &err);
        if (st != GL_OK && (neg || err.msg[0] == '\0' ||
                            (st != GL_E_LIMIT && st != GL_E_UNSUPPORTED && st != GL_E_NOMEM)))
            abort();
        for (int i = 0; neg && i < ns; i++)
            check_negated(re, neg, strs[i], lens[i]);
        gl_regex_free(neg);
    }
    st = gl_regex_build_all(re, &err);
    if (st != GL_OK && (st != GL_E_LIMIT || !gl_regex_overflowed(re)))
        abort();
    gl_regex_free(re);
    gl_regex_free(search);
    return 0;
}
