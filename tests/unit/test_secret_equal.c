// SPDX-License-Identifier: MIT
// Tests for gl_secret_equal (base.c), the API-key comparison of `glint serve`: equal only for
// the same bytes and the same length (prefixes, extensions, embedded NULs, every single-byte
// difference at every position), and no read outside given[0..n) or secret[0..secret_len) even
// when the presented token is much longer than the secret (both sit against a PROT_NONE page,
// so an out-of-bounds read faults). Timing is not asserted here (no timed assertions in the
// suite); the property that makes it constant-time is structural: see base.h.
#include "base/base.h"
#include "test.h"

#include <string.h>
#include <sys/mman.h>

static int eq(const char *given, const char *secret)
{
    return gl_secret_equal(given, strlen(given), secret, strlen(secret));
}

TEST(test_equal_and_unequal)
{
    CHECK(eq("sk-test-123", "sk-test-123") == 1);
    CHECK(eq("", "") == 1);
    CHECK(eq("xk-test-123", "sk-test-123") == 0);  // first byte
    CHECK(eq("sk-tesT-123", "sk-test-123") == 0);  // middle
    CHECK(eq("sk-test-124", "sk-test-123") == 0);  // last byte
    CHECK(eq("sk-test-12", "sk-test-123") == 0);   // a prefix of the key
    CHECK(eq("sk-test-1234", "sk-test-123") == 0); // the key plus one byte
    CHECK(eq("sk-test-123sk-test-123", "sk-test-123") == 0);
    CHECK(eq("", "sk-test-123") == 0);
    CHECK(eq("sk-test-123", "") == 0);
    CHECK(gl_secret_equal("a\0b", 3, "a\0b", 3) == 1); // bytes, not C strings
    CHECK(gl_secret_equal("a\0b", 3, "a\0c", 3) == 0);
    CHECK(gl_secret_equal("a\0", 2, "a", 1) == 0);
}

TEST(test_every_single_byte_difference)
{
    const uint8_t key[4] = {0x00, 0x7f, 0x80, 0xff};
    int wrong = 0;
    for (int pos = 0; pos < 4; pos++)
        for (int v = 0; v < 256; v++) {
            uint8_t g[4];
            memcpy(g, key, 4);
            g[pos] = (uint8_t)v;
            int want = v == key[pos];
            wrong += gl_secret_equal(g, 4, key, 4) != want;
        }
    CHECKF(wrong == 0, "%d of 1024 single-byte variants compared wrongly", wrong);
}

// Bytes placed so that the byte after the last one is on a PROT_NONE page.
static uint8_t *against_guard(uint8_t *page2, const char *s, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p = page2 + ps - n;
    memcpy(p, s, n);
    return p;
}

TEST(test_reads_stay_in_bounds)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *a =
        mmap(NULL, (size_t)ps * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *b =
        mmap(NULL, (size_t)ps * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(a != MAP_FAILED && b != MAP_FAILED);
    REQUIRE(mprotect(a + ps, (size_t)ps, PROT_NONE) == 0 &&
            mprotect(b + ps, (size_t)ps, PROT_NONE) == 0);
    char longer[1000];
    memset(longer, 'k', sizeof longer);
    const uint8_t *secret = against_guard(a, "kkk", 3);
    const uint8_t *given = against_guard(b, longer, sizeof longer);
    CHECK(gl_secret_equal(given, sizeof longer, secret, 3) == 0); // would fault past the secret
    CHECK(gl_secret_equal(given + sizeof longer - 3, 3, secret, 3) == 1);
    CHECK(gl_secret_equal(given + sizeof longer - 2, 2, secret, 3) == 0);
    secret = against_guard(a, "", 0);
    CHECK(gl_secret_equal(given, sizeof longer, secret, 0) == 0); // empty secret: nothing read
    munmap(a, (size_t)ps * 2);
    munmap(b, (size_t)ps * 2);
}

int main(void)
{
    RUN_TESTS(test_equal_and_unequal, test_every_single_byte_difference, test_reads_stay_in_bounds);
}
