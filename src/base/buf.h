// SPDX-License-Identifier: MIT
// base/buf: the one growable byte buffer, and the small text helpers every module shares
// (hex digits, UTF-8 sequences; gl_utf8_encode is in base.h).
// A struct gl_buf starts zeroed ({0}) and owns p (gl_malloc'ed: free with gl_buf_free, or take
// it with gl_buf_take and gl_free it). After any append, even of 0 bytes, p is allocated and
// p[len] == 0, so text writers can read p as a C string (binary data may hold NULs before len).
// Growth doubles from 64 bytes. An append that cannot allocate leaves the contents as they were
// and sets oom, which is sticky: later appends do nothing, so a writer may append without
// checking and test oom once at the end (or test each append's status where it stops early).
#pragma once

#include "base/base.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct gl_buf {
    char *p;    // NULL until the first append
    size_t len; // bytes held, the terminator not counted
    size_t cap; // bytes allocated
    int oom;    // an append failed; the buffer takes no more
};

// Room for extra more bytes and the terminator. GL_OK, or GL_E_NOMEM (oom set, or already set).
gl_status gl_buf_reserve(struct gl_buf *b, size_t extra);
// Appends n bytes of s (s may be NULL when n is 0). GL_OK or GL_E_NOMEM, as gl_buf_reserve.
gl_status gl_buf_put(struct gl_buf *b, const void *s, size_t n);
gl_status gl_buf_puts(struct gl_buf *b, const char *s);
gl_status gl_buf_putc(struct gl_buf *b, char c);
// printf-append; GL_E_NOMEM also for an encoding error of vsnprintf (sets oom).
gl_status gl_buf_printf(struct gl_buf *b, const char *fmt, ...) GL_PRINTF(2, 3);
// Hands over p (NUL-terminated; NULL when nothing was appended) and its length (when len is
// non-NULL) and resets b to {0}. When oom is set, frees p instead and returns NULL, *len = 0.
char *gl_buf_take(struct gl_buf *b, size_t *len);
// Frees p and resets b to {0}.
void gl_buf_free(struct gl_buf *b);

// Value of the hexadecimal digit c (0-9, a-f, A-F), else -1 (also for EOF and bytes >= 0x80,
// whether passed as a negative char or as an unsigned byte). Inline: the grammar matcher calls
// it per byte of \uXXXX escapes.
static inline int gl_hex_val(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

// Length (1-4) of the well-formed UTF-8 sequence at p[0..n), n >= 1 (Unicode 15 Table 3-7: no
// overlong forms, surrogates or code points past U+10FFFF), or 0 when none starts there; then, if
// bad is non-NULL, *bad is the length of the maximal invalid subpart to replace with one U+FFFD
// (Unicode's "maximal subpart" practice, as Python's and HF's lossy decoders: a truncated
// sequence is one replacement, a stray byte one each). Inline: the tokenizer calls it per
// character of every prompt.
static inline size_t gl_utf8_seq(const uint8_t *p, size_t n, size_t *bad)
{
    uint8_t c = p[0];
    if (c < 0x80)
        return 1;
    size_t k;
    uint8_t lo = 0x80, hi = 0xBF; // the second byte's range depends on the lead byte
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        if (bad)
            *bad = 1;
        return 0;
    }
    for (size_t j = 1; j < k; j++) {
        if (j >= n || p[j] < lo || p[j] > hi) {
            if (bad)
                *bad = j;
            return 0;
        }
        lo = 0x80, hi = 0xBF;
    }
    return k;
}
