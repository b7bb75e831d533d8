// SPDX-License-Identifier: MIT
// Tests for base/buf.h: appends across the growth steps keep every byte and the terminator, the
// printf-append's retry path (output longer than the room left) matches snprintf, take hands the
// bytes over, an out-of-memory condition is sticky and take then returns NULL, gl_hex_val agrees
// with a plain reference (strchr over the digit set) on every byte value and EOF, and
// gl_utf8_seq with a decoder written from the definition (decode the code point, refuse overlong
// forms, surrogates and values past U+10FFFF; the maximal subpart by trying completions).
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

// Reference: the length of the well-formed sequence at p[0..n) by decoding, else 0.
static size_t ref_seq(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    size_t k = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (k == 0 || k > n)
        return 0;
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1Fu : k == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t j = 1; j < k; j++) {
        if ((p[j] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[j] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return k;
}

// Reference maximal subpart of an invalid p[0..n): the longest prefix (at least 1) that some
// continuation bytes complete to a well-formed sequence; the range ends suffice as trials.
static size_t ref_bad(const uint8_t *p, size_t n)
{
    static const uint8_t trial[] = {0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF};
    size_t best = 1;
    for (size_t m = 1; m <= n && m < 4; m++) {
        int ok = 0;
        for (int t = 0; t < 6 * 6 * 6 && !ok; t++) {
            uint8_t q[4] = {0};
            memcpy(q, p, m);
            for (size_t j = m, tt = (size_t)t; j < 4; j++, tt /= 6)
                q[j] = trial[tt % 6];
            size_t k = ref_seq(q, 4);
            ok = k > m;
        }
        if (ok)
            best = m;
        else
            break;
    }
    return best;
}

TEST(test_utf8_seq)
{
    static const uint8_t tail[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90,
                                   0x9F, 0xA0, 0xBF, 0xC0, 0xF5, 0xFF};
    size_t nt = sizeof tail, checked = 0;
    for (int c = 0; c < 256; c++)
        for (size_t a = 0; a < nt; a++)
            for (size_t b = 0; b < nt; b++)
                for (size_t d = 0; d < nt; d++)
                    for (size_t n = 1; n <= 4; n++) {
                        uint8_t p[4] = {(uint8_t)c, tail[a], tail[b], tail[d]};
                        size_t bad = 99, k = gl_utf8_seq(p, n, &bad), want = ref_seq(p, n);
                        CHECKF(k == want, "%02x %02x %02x %02x n=%zu: %zu, want %zu", p[0], p[1],
                               p[2], p[3], n, k, want);
                        if (!k && !want)
                            CHECKF(bad == ref_bad(p, n),
                                   "%02x %02x %02x %02x n=%zu: bad %zu, want %zu", p[0], p[1], p[2],
                                   p[3], n, bad, ref_bad(p, n));
                        CHECK(gl_utf8_seq(p, n, NULL) == k);
                        checked++;
                    }
    CHECK(checked == 256 * 12 * 12 * 12 * 4);
}

int main(void)
{
    RUN_TESTS(test_put_growth, test_empty_put_allocates, test_printf, test_oom_sticky, test_hex_val,
              test_utf8_seq);
}
