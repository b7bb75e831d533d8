// SPDX-License-Identifier: MIT
// Tests for base/buf.h: appends across the growth steps keep every byte and the terminator, the
// printf-append's retry path (output longer than the room left) matches snprintf, take hands the
// bytes over, an out-of-memory condition is sticky and take then returns NULL, and gl_hex_val
// agrees with a plain reference (strchr over the digit set) on every byte value and EOF.
#include "base/buf.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

TEST(test_put_growth)
{
    struct gl_buf b = {0};
    char want[5000];
    size_t n = 0;
    for (int i = 0; i < 1000; i++) { // 1, 2, 3 byte pieces: crosses 64, 128, ... 4096
        char piece[3] = {(char)('a' + i % 26), (char)('0' + i % 10), '\0'};
        size_t k = (size_t)(i % 3);
        if (k == 0) {
            CHECK(gl_buf_putc(&b, piece[0]) == GL_OK);
            want[n++] = piece[0];
        } else {
            CHECK(gl_buf_put(&b, piece, k) == GL_OK);
            memcpy(want + n, piece, k);
            n += k;
        }
        REQUIRE(b.p && b.len == n && b.p[b.len] == '\0' && b.cap > b.len);
    }
    CHECK(!memcmp(b.p, want, n));
    gl_buf_free(&b);
    CHECK(!b.p && !b.len && !b.cap && !b.oom);
}

TEST(test_empty_put_allocates)
{
    struct gl_buf b = {0};
    CHECK(gl_buf_put(&b, NULL, 0) == GL_OK);
    REQUIRE(b.p);
    CHECK(b.len == 0 && b.p[0] == '\0');
    size_t len = 7;
    char *p = gl_buf_take(&b, &len);
    CHECK(p && len == 0 && !strcmp(p, ""));
    CHECK(!b.p && !b.len);
    gl_free(p);
}

TEST(test_printf)
{
    struct gl_buf b = {0};
    char xs[256], want[8192] = "", tmp[512];
    memset(xs, 'x', sizeof xs - 1);
    xs[sizeof xs - 1] = '\0';
    for (int i = 0; i < 40; i++) { // pieces longer than the room left: the retry path
        snprintf(tmp, sizeof tmp, "line %d: %.*s|%g\n", i, i * 5, xs, 0.1 * i);
        strcat(want, tmp);
        CHECK(gl_buf_printf(&b, "line %d: %.*s|%g\n", i, i * 5, xs, 0.1 * i) == GL_OK);
    }
    size_t len = 0;
    char *p = gl_buf_take(&b, &len);
    REQUIRE(p);
    CHECKF(len == strlen(want) && !strcmp(p, want), "len %zu want %zu", len, strlen(want));
    gl_free(p);
}

TEST(test_oom_sticky)
{
    struct gl_buf b = {0};
    CHECK(gl_buf_puts(&b, "abc") == GL_OK);
    CHECK(gl_buf_reserve(&b, SIZE_MAX - 1) == GL_E_NOMEM); // cannot be allocated
    CHECK(b.oom);
    CHECK(b.len == 3 && !strcmp(b.p, "abc")); // contents kept
    CHECK(gl_buf_puts(&b, "d") == GL_E_NOMEM);
    CHECK(gl_buf_printf(&b, "%d", 5) == GL_E_NOMEM);
    CHECK(b.len == 3);
    size_t len = 9;
    CHECK(gl_buf_take(&b, &len) == NULL);
    CHECK(len == 0 && !b.p && !b.oom);
}

TEST(test_hex_val)
{
    static const char digits[] = "0123456789abcdef";
    for (int c = -1; c < 256; c++) {
        const char *at = c > 0 ? strchr(digits, c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c) : NULL;
        int want = at ? (int)(at - digits) : -1;
        CHECKF(gl_hex_val(c) == want, "byte %d: %d, want %d", c, gl_hex_val(c), want);
        if (c >= 0x80) // the same byte as a (signed) char
            CHECK(gl_hex_val((char)c) == -1);
    }
}

int main(void)
{
    RUN_TESTS(test_put_growth, test_empty_put_allocates, test_printf, test_oom_sticky,
              test_hex_val);
}
