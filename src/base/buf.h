// SPDX-License-Identifier: MIT
// base/buf: the one growable byte buffer, and the small text helpers every module shares.
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
