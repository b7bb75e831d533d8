// SPDX-License-Identifier: MIT
// base/buf: the growable byte buffer (buf.h).
#include "base/buf.h"

#include <stdio.h>
#include <string.h>

#define GL_BUF_MIN 64 // first allocation, bytes

gl_status gl_buf_reserve(struct gl_buf *b, size_t extra)
{
    if (b->oom)
        return GL_E_NOMEM;
    if (extra >= SIZE_MAX - b->len) {
        b->oom = 1;
        return GL_E_NOMEM;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return GL_OK;
    size_t cap = b->cap ? b->cap : GL_BUF_MIN;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = gl_realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return GL_E_NOMEM;
    }
    b->p = p;
    b->cap = cap;
    return GL_OK;
}

gl_status gl_buf_put(struct gl_buf *b, const void *s, size_t n)
{
    if (gl_buf_reserve(b, n) != GL_OK)
        return GL_E_NOMEM;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return GL_OK;
}

gl_status gl_buf_puts(struct gl_buf *b, const char *s)
{
    return gl_buf_put(b, s, strlen(s));
}

gl_status gl_buf_putc(struct gl_buf *b, char c)
{
    return gl_buf_put(b, &c, 1);
}

gl_status gl_buf_printf(struct gl_buf *b, const char *fmt, ...)
{
    if (b->oom)
        return GL_E_NOMEM;
    // First try what is left of the allocation; on a miss, grow to the reported size and print
    // again (a va_list is used once per va_start).
    for (int tries = 0; tries < 2; tries++) {
        size_t room = b->p ? b->cap - b->len : 0;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return GL_E_NOMEM;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return GL_OK;
        }
        if (gl_buf_reserve(b, (size_t)n) != GL_OK) {
            if (b->p)
                b->p[b->len] = '\0'; // the failed try may have written past len
            return GL_E_NOMEM;
        }
    }
    GL_ASSERT(0); // the second pass had room for n bytes and the terminator
    return GL_E_INTERNAL;
}

char *gl_buf_take(struct gl_buf *b, size_t *len)
{
    char *p = b->oom ? NULL : b->p;
    if (len)
        *len = p ? b->len : 0;
    if (b->oom)
        gl_free(b->p);
    *b = (struct gl_buf){0};
    return p;
}

void gl_buf_free(struct gl_buf *b)
{
    gl_free(b->p);
    *b = (struct gl_buf){0};
}
