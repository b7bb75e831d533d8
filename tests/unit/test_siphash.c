// SPDX-License-Identifier: MIT
// Tests for gl_siphash_* (base.c), the keyed hash of the prefix cache's block keys and of image
// digests: the reference vectors of the SipHash paper (key 00..0f, message 00..n-1; the values
// were cross-checked with `openssl mac SIPHASH`), the same value whatever way the input is split
// across updates, and a process key that is drawn once (stable within the process, not zero).
#include "base/base.h"
#include "test.h"

#include <string.h>

static uint64_t sip(const uint8_t key[16], const uint8_t *m, size_t n)
{
    struct gl_siphash h;
    gl_siphash_init(&h, key);
    gl_siphash_update(&h, m, n);
    return gl_siphash_final(&h);
}

TEST(test_reference_vectors)
{
    uint8_t key[16], m[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        m[i] = (uint8_t)i;
    static const struct {
        size_t n;
        uint64_t want;
    } v[] = {{0, 0x726fdb47dd0e0e31ull}, {1, 0x74f839c593dc67fdull},  {7, 0xab0200f58b01d137ull},
             {8, 0x93f5f5799a932462ull}, {15, 0xa129ca6149be45e5ull}, {16, 0x3f2acc7f57c29bdbull},
             {63, 0x958a324ceb064572ull}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint64_t got = sip(key, m, v[i].n);
        CHECKF(got == v[i].want, "length %zu: %016llx, want %016llx", v[i].n,
               (unsigned long long)got, (unsigned long long)v[i].want);
    }
}

TEST(test_split_updates)
{
    uint8_t key[16] = {7, 1, 2, 3}, m[64];
    for (int i = 0; i < 64; i++)
        m[i] = (uint8_t)(i * 37 + 11);
    int bad = 0;
    for (size_t n = 0; n <= 64; n++) {
        uint64_t whole = sip(key, m, n);
        for (size_t a = 0; a <= n; a++)
            for (size_t b = a; b <= n; b++) {
                struct gl_siphash h;
                gl_siphash_init(&h, key);
                gl_siphash_update(&h, m, a);
                gl_siphash_update(&h, m + a, b - a);
                gl_siphash_update(&h, m + b, n - b);
                bad += gl_siphash_final(&h) != whole;
            }
    }
    CHECKF(bad == 0, "%d three-way splits differ from the one-shot hash", bad);
}

TEST(test_process_key)
{
    const uint8_t *k = gl_hash_key();
    static const uint8_t zero[16];
    CHECK(k != NULL && memcmp(k, zero, 16) != 0);
    CHECK(gl_hash_key() == k);
}

int main(void)
{
    RUN_TESTS(test_reference_vectors, test_split_updates, test_process_key);
}
